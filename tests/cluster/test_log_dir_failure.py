"""One of a broker's two log dirs fails in a three-broker ZooKeeper cluster (issue 15, Kafka's
``/log_dir_event_notification``): its disk fills up for real (a small tmpfs the test mounts; root only).

The broker refuses the write that does not fit with KAFKA_STORAGE_ERROR and takes that dir offline; it tells the
controller, which elects other ISR members for the partitions it led there and takes it out of their ISRs, within
seconds, while the partitions in its healthy dir stay with it and keep taking acks=all writes. Metadata lists the
offline replicas. Every record acknowledged before is on the new leaders. Restarted with space again, the broker
recovers the dir, catches up and rejoins the ISRs. On the way, the same cluster shows AlterReplicaLogDirs for a
replica not on the broker yet: REPLICA_NOT_AVAILABLE, and the replica a reassignment brings later is created in the
dir asked for.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sofakafka.client import KafkaClient, NewTopic
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.records import Record
from tests.integration import test_disk_full
from tests.integration.conftest import BrokerProcess
from tests.integration.test_disk_full import fill, read_all

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
              pytest.mark.timeout(300)]

VALUE = b"v" * 8000
TOPIC = "jbod"
# Broker 1 leads every partition, so half of its leaderships are in the dir that fails.
small_fs = test_disk_full.small_fs  # the 4 MB tmpfs, mounted and unmounted around the test
ASSIGNMENT = {p: [1, 2, 3] if p % 2 == 0 else [1, 3, 2] for p in range(4)}


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = 60.0) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - start


def test_a_failed_log_dir_moves_its_leaderships_to_other_isr_members_and_the_other_dir_keeps_serving(
        tmp_path: Path, small_fs: Path, zk_broker_factory: Callable[..., BrokerProcess]) -> None:
    settings = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "10000"}
    doomed_dir = small_fs / "logs"
    brokers = {
        1: zk_broker_factory({**settings, "broker.id": "1", "log.dirs": f"{tmp_path / 'healthy'},{doomed_dir}"},
                             start=False),
        2: zk_broker_factory({**settings, "broker.id": "2"}, start=False),
        3: zk_broker_factory({**settings, "broker.id": "3"}, start=False),
    }
    for b in brokers.values():
        b.start()
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    with KafkaClient(bootstrap) as client:
        created = client.create_topics([NewTopic(TOPIC, assignments=ASSIGNMENT)])
        assert created[TOPIC].error == ErrorCode.NONE, created
        wait_for("full ISRs", lambda: all(len(p.isr) == 3 for p in client.metadata([TOPIC]).topics[TOPIC]
                                          .partitions.values()))
        dirs = {d.log_dir: {p.partition for p in d.partitions} for d in client.describe_log_dirs(1)}
        failing = dirs[str(doomed_dir.resolve())]
        healthy = dirs[str((tmp_path / "healthy").resolve())]
        assert failing and healthy and failing | healthy == set(ASSIGNMENT)
        target = min(failing)

        # AlterReplicaLogDirs for a replica the broker does not have yet: REPLICA_NOT_AVAILABLE, and the dir is
        # remembered; a reassignment then brings the replica, and it is created in that dir (Kafka's behaviour).
        assert client.create_topics([NewTopic("later", assignments={0: [2, 3]})])["later"].error == ErrorCode.NONE
        wanted = str((tmp_path / "healthy").resolve()) if len(healthy) > len(failing) else str(doomed_dir.resolve())
        assert client.alter_replica_log_dirs(1, {("later", 0): wanted}) == {("later", 0): ErrorCode.REPLICA_NOT_AVAILABLE}
        assert client.alter_replica_log_dirs(1, {("later", 9): wanted}) == {
            ("later", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert client.alter_partition_reassignments({("later", 0): [2, 3, 1]})[("later", 0)].error == ErrorCode.NONE
        wait_for("the reassigned replica on broker 1", lambda: any(
            d.log_dir == wanted and any(p.topic == "later" for p in d.partitions)
            for d in client.describe_log_dirs(1)))

        acknowledged: list[tuple[int, bytes]] = []
        fill(small_fs / "filler", leave=400 * 1024)
        refused: KafkaError | None = None
        for i in range(2000):
            value = b"%06d" % i + VALUE
            try:
                result = client.produce(TOPIC, target, [Record(0, -1, None, value)], acks=-1, timeout_ms=5000)
            except KafkaError as exc:
                refused = exc
                break
            assert result is not None
            acknowledged.append((result.base_offset, value))
        assert refused is not None and refused.code == ErrorCode.KAFKA_STORAGE_ERROR, refused
        assert len(acknowledged) > 5

        def moved() -> bool:
            parts = client.metadata([TOPIC]).topics[TOPIC].partitions
            return all(parts[p].leader not in (1, -1) and 1 not in parts[p].isr and parts[p].offline_replicas == (1,)
                       for p in failing) and all(parts[p].leader == 1 for p in healthy)

        took = wait_for("the failed dir's leaderships to move", moved, timeout=30)
        assert took < 15, f"leaderships moved after {took:.1f} s"
        # The healthy dir keeps serving acks=all on broker 1, and the moved partitions take writes elsewhere.
        for p in sorted(healthy):
            assert client.produce(TOPIC, p, [Record(0, -1, None, b"fine")], acks=-1) is not None
        assert client.produce(TOPIC, target, [Record(0, -1, None, b"elsewhere")], acks=-1) is not None
        stored = read_all(client, TOPIC, target)
        assert all(stored.get(o) == v for o, v in acknowledged), "an acknowledged record is gone"
        assert brokers[1].alive()

    # Space again: the restarted broker recovers the dir, catches up and is back in every ISR.
    (small_fs / "filler").unlink()
    brokers[1].stop()
    brokers[1].start()
    with KafkaClient(bootstrap) as client:
        wait_for("broker 1 back in every ISR", lambda: all(
            1 in p.isr and not p.offline_replicas
            for p in client.metadata([TOPIC]).topics[TOPIC].partitions.values()), timeout=60)

