"""A broker whose log dir cannot be used when it starts (issue 15, Kafka 2.6's createAndValidateLogDirs and
loadLogs): that dir is offline from the start and the broker serves the others; with none usable it exits.

As root, chmod does not make a dir unreadable, so "unusable" is what really raises OSError in start-up: a
regular file where a log dir should be, or a directory where a partition's segment file must be.

* Every dir unusable: ``sofakafka serve`` exits 1 and logs Kafka's "Shutdown broker because none of the
  specified log dirs from ... can be created or validated", naming them.
* One of two unusable: the broker starts, DescribeLogDirs lists that dir with KAFKA_STORAGE_ERROR, the replicas
  it held are offline (led by other ISR members, listed in Metadata's offline replicas; not created empty in the
  other dir), and the other dir's partitions are served to a stock client (kafka-python) with every record
  acknowledged before. Restarted with the dir usable again, the broker has it all back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from sofakafka.client import KafkaClient, NewTopic
from sofakafka.protocol.errors import ErrorCode
from tests.integration.conftest import REPO, BrokerProcess

pytestmark = [pytest.mark.timeout(300)]

TOPIC = "replicated"
SOLO = "solo"  # replicas on broker 1 only: what it serves is served by nobody else
REPLICATED = {p: [2, 1, 3] if p % 2 == 0 else [3, 1, 2] for p in range(4)}  # broker 1 never the first choice
SOLO_ASSIGNMENT = {p: [1] for p in range(4)}


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = 60.0,
             state: Callable[[], object] = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {state()}")
        time.sleep(0.2)


def run_to_exit(broker: BrokerProcess) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    broker.base_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.run(broker.command(), cwd=broker.base_dir, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=90)


def test_a_broker_whose_every_log_dir_is_unusable_exits_naming_them(
        tmp_path: Path, zk_broker_factory: Callable[..., BrokerProcess]) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("a file where a log dir should be\n")
    second.write_text("another\n")
    broker = zk_broker_factory({"broker.id": "1", "log.dirs": f"{first},{second}"}, start=False)
    done = run_to_exit(broker)
    assert done.returncode == 1, done
    out = done.stdout + done.stderr
    assert "Failed to create or validate data directory" in out, out
    assert (f"Shutdown broker because none of the specified log dirs from {first.resolve()}, {second.resolve()} "
            "can be created or validated") in out, out
    assert first.read_text() == "a file where a log dir should be\n"  # nothing was done to what is there


def consume(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=20000,
                             auto_offset_reset="earliest")
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        while len(values) < count:
            batch = consumer.poll(timeout_ms=1000)
            if not batch and consumer.position(tp) >= count:
                break
            values += [r.value for r in batch.get(tp, [])]
        return values
    finally:
        consumer.close()


def test_a_broker_with_one_unusable_log_dir_serves_the_other_and_its_replicas_are_led_elsewhere(
        tmp_path: Path, zk_broker_factory: Callable[..., BrokerProcess]) -> None:
    settings = {"min.insync.replicas": "2", "auto.leader.rebalance.enable": "false"}
    good, bad = (tmp_path / "good").resolve(), (tmp_path / "bad").resolve()
    brokers = {
        1: zk_broker_factory({**settings, "broker.id": "1", "log.dirs": f"{good},{bad}"}, start=False),
        2: zk_broker_factory({**settings, "broker.id": "2"}, start=False),
        3: zk_broker_factory({**settings, "broker.id": "3"}, start=False),
    }
    for b in brokers.values():
        b.start()
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    sent: dict[tuple[str, int], list[bytes]] = {}
    with KafkaClient(bootstrap) as client:
        created = client.create_topics([NewTopic(TOPIC, assignments=REPLICATED),
                                        NewTopic(SOLO, assignments=SOLO_ASSIGNMENT,
                                                 configs={"min.insync.replicas": "1"})])
        assert all(r.error == ErrorCode.NONE for r in created.values()), created
        wait_for("full ISRs", lambda: all(len(p.isr) == 3 for p in client.metadata([TOPIC]).topics[TOPIC]
                                          .partitions.values()))
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5)
        try:
            for topic, parts in ((TOPIC, REPLICATED), (SOLO, SOLO_ASSIGNMENT)):
                for p in parts:
                    values = [b"%s-%d-%d" % (topic.encode(), p, i) for i in range(20)]
                    for v in values:
                        producer.send(topic, value=v, partition=p).get(timeout=30)
                    sent[(topic, p)] = values
        finally:
            producer.close()
        where = {(p.topic, p.partition): d.log_dir for d in client.describe_log_dirs(1) for p in d.partitions}
    in_bad = sorted(tp for tp, d in where.items() if d == str(bad))
    in_good = sorted(tp for tp, d in where.items() if d == str(good))
    assert any(t == SOLO for t, _ in in_bad) and any(t == SOLO for t, _ in in_good) and \
        any(t == TOPIC for t, _ in in_bad), where

    assert brokers[1].stop() == 0
    # A directory where one partition's segment file must be: loading the dir raises IsADirectoryError.
    broken_topic, broken_partition = in_bad[0]
    saved = tmp_path / "saved-segments"
    saved.mkdir()
    for segment in sorted((bad / f"{broken_topic}-{broken_partition}").glob("*.log")):
        shutil.move(str(segment), str(saved / segment.name))
        segment.mkdir()
    brokers[1].start()
    log_text = brokers[1].log_text()
    assert f"log directory {bad} is offline: Error while loading log dir {bad}" in log_text, brokers[1].log_tail()

    with KafkaClient(bootstrap) as client:
        dirs = {d.log_dir: d for d in client.describe_log_dirs(1)}
        assert dirs[str(bad)].error == ErrorCode.KAFKA_STORAGE_ERROR and not dirs[str(bad)].partitions
        assert dirs[str(good)].error == ErrorCode.NONE
        assert {(p.topic, p.partition) for p in dirs[str(good)].partitions} == set(in_good)

        def settled() -> bool:
            md = client.metadata([TOPIC, SOLO]).topics
            for topic, p in in_bad:
                part = md[topic].partitions[p]
                if part.offline_replicas != (1,):
                    return False
                # Led by another ISR member; a partition with no other replica has no leader (its ISR keeps its
                # last member, as Kafka keeps it).
                if (topic == TOPIC and (part.leader not in (2, 3) or 1 in part.isr)) or \
                        (topic == SOLO and part.leader != -1):
                    return False
            return all(1 in md[t].partitions[p].isr and not md[t].partitions[p].offline_replicas
                       for t, p in in_good)

        wait_for("the offline dir's replicas out of the ISRs and the good dir's back in", settled,
                 state=lambda: client.metadata([TOPIC, SOLO]).topics)

    # A stock client: the good dir's partitions on broker 1 alone take acks=all writes and read back in full;
    # the replicated partitions of the bad dir, led elsewhere, lost nothing acknowledged.
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5)
    try:
        for topic, p in in_good + [tp for tp in in_bad if tp[0] == TOPIC]:
            producer.send(topic, value=b"after", partition=p).get(timeout=30)
            sent[(topic, p)].append(b"after")
    finally:
        producer.close()
    for topic, p in in_good + [tp for tp in in_bad if tp[0] == TOPIC]:
        assert consume(bootstrap, topic, p, len(sent[(topic, p)])) == sent[(topic, p)], (topic, p)

    # The dir usable again: a restart serves it, its solo partitions with every record.
    assert brokers[1].stop() == 0
    for segment in sorted(saved.iterdir()):
        target = bad / f"{broken_topic}-{broken_partition}" / segment.name
        target.rmdir()
        shutil.move(str(segment), str(target))
    brokers[1].start()
    with KafkaClient(bootstrap) as client:
        wait_for("broker 1 back in every ISR with no offline replica", lambda: all(
            1 in p.isr and not p.offline_replicas
            for t in (TOPIC, SOLO) for p in client.metadata([t]).topics[t].partitions.values()))
    for topic, p in [tp for tp in in_bad if tp[0] == SOLO]:
        assert consume(bootstrap, topic, p, len(sent[(topic, p)])) == sent[(topic, p)], (topic, p)
