"""Partition reassignment on three real broker processes and a real ZooKeeper, driven by kafka-python's
KafkaAdminClient (AlterPartitionReassignments / ListPartitionReassignments) and by the legacy
``/admin/reassign_partitions`` znode that ``kafka-reassign-partitions.sh --zookeeper`` writes.

One cluster serves both paths. The partition moves under acks=all produce load; what is checked is what an
operator relies on: the assignment znode ends as Kafka writes it, the removed broker's log directory is gone,
the leader is in the new replica set, and every acknowledged record is readable at the offset it was
acknowledged at.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition, errors
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kazoo.client import KazooClient

from sofakafka.cli import reassign_partitions
from sofakafka.client.connection import BrokerConnection
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from sofakafka.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from tests.cluster.conftest import ZooKeeperServer
from tests.integration.conftest import BrokerProcess

WAIT_S = 60.0
"""A bound on waiting for the cluster to converge, never a timing assertion."""

TOPIC = "moving"
TP = TopicPartition(TOPIC, 0)
SETTINGS = {
    "replica.lag.time.max.ms": "10000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "offsets.topic.replication.factor": "1",
    "min.insync.replicas": "2",
}


def wait_for(what: str, predicate: Callable[[], bool], brokers: dict[int, BrokerProcess]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- broker {i}\n{b.log_tail()}" for i, b in brokers.items())
            raise AssertionError(f"timed out waiting for {what}\n{tails}")
        time.sleep(0.2)


class LoadProducer:
    """acks=all sends from a thread until stopped; remembers where each acknowledged record landed."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, retries=100,
                                      retry_backoff_ms=200, request_timeout_ms=15000)
        self.acked: dict[int, bytes] = {}
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reassignment-load", daemon=True)
        self._lock = threading.Lock()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            value = f"record-{n}".encode()
            n += 1
            future = self.producer.send(TOPIC, value=value, partition=0)
            try:
                md = future.get(timeout=30)
            except KafkaError as exc:
                self.failures.append(exc)  # not acknowledged: nothing is promised about it
                continue
            with self._lock:
                self.acked[md.offset] = value

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    @contextmanager
    def running(self) -> Iterator[LoadProducer]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(60)
            self.producer.close()


def read_all(bootstrap: str, expected: int) -> dict[int, bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    try:
        consumer.assign([TP])
        found: dict[int, bytes] = {}
        deadline = time.monotonic() + WAIT_S
        while len(found) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                for r in records:
                    found[r.offset] = r.value
        return found
    finally:
        consumer.close()


def test_reassignment_under_load_through_the_api_and_the_legacy_znode(
    zk_broker_factory: Callable[..., BrokerProcess], zookeeper: ZooKeeperServer, zk_chroot: str,
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    # Broker 1 starts first and so is the controller; broker 3, the one being added, can be frozen safely.
    brokers = {i: zk_broker_factory({**SETTINGS, "broker.id": str(i)}, name=f"broker{i}-") for i in (1, 2, 3)}
    zk = KazooClient(hosts=zookeeper.hosts + zk_chroot)
    zk.start(timeout=30)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    # Clients that must answer while broker 3 is frozen never bootstrap through it.
    admin = KafkaAdminClient(bootstrap_servers=f"{brokers[1].bootstrap},{brokers[2].bootstrap}",
                             request_timeout_ms=30000)
    try:
        wait_for("three registered brokers", lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"],
                 brokers)
        assert json.loads(zk.get("/controller")[0])["brokerid"] == 1
        admin.create_topics([NewTopic(TOPIC, replica_assignments={0: [1, 2]})], timeout_ms=30000)

        def topic_znode() -> dict[str, object]:
            doc: dict[str, object] = json.loads(zk.get(f"/brokers/topics/{TOPIC}")[0])
            return doc

        def state() -> dict[str, Any]:
            doc: dict[str, Any] = json.loads(zk.get(f"/brokers/topics/{TOPIC}/partitions/0/state")[0])
            return doc

        wait_for("the partition in sync on [1, 2]",
                 lambda: zk.exists(f"/brokers/topics/{TOPIC}/partitions/0/state") is not None
                 and sorted(state()["isr"]) == [1, 2], brokers)

        load = LoadProducer(bootstrap)
        with load.running():
            wait_for("records acknowledged before the move", lambda: load.count() >= 200, brokers)
            # Frozen, broker 3 cannot copy anything, so the reassignment is certainly still in flight when listed.
            frozen = brokers[3].proc
            assert frozen is not None
            os.kill(frozen.pid, signal.SIGSTOP)
            try:
                assert admin.alter_partition_reassignments({TP: [2, 3]}) == {TP: None}
                assert admin.list_partition_reassignments() == {
                    TP: {"replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}}
                assert topic_znode() == {"version": 2, "partitions": {"0": [2, 3, 1]},
                                         "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [1]}}
                capsys.readouterr()
                assert reassign_partitions.main(["--bootstrap-server", brokers[1].bootstrap, "--list"]) == 0
                assert "moving-0: replicas: 2,3,1. adding: 3. removing: 1." in capsys.readouterr().out
            finally:
                os.kill(frozen.pid, signal.SIGCONT)

            final = {"version": 2, "partitions": {"0": [2, 3]}, "adding_replicas": {}, "removing_replicas": {}}
            wait_for("the reassignment to complete", lambda: topic_znode() == final, brokers)
            assert admin.list_partition_reassignments() == {}
            plan = tmp_path / "plan.json"
            plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0,
                                                                      "replicas": [2, 3]}]}))
            capsys.readouterr()
            assert reassign_partitions.main(["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan),
                                      "--verify"]) == 0
            assert "Reassignment of partition moving-0 is complete." in capsys.readouterr().out
            moved = state()
            assert moved["leader"] in (2, 3) and sorted(moved["isr"]) == [2, 3]
            wait_for("broker 1's replica deleted", lambda: not (brokers[1].data_dir / f"{TOPIC}-0").exists(), brokers)
            after = load.count()
            wait_for("records acknowledged after the move", lambda: load.count() >= after + 200, brokers)

            # The legacy znode, as kafka-reassign-partitions.sh --zookeeper writes it: back onto broker 1.
            zk.create("/admin/reassign_partitions", json.dumps(
                {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [3, 1]}]}).encode(),
                makepath=True)
            wait_for("the znode reassignment to complete and its znode deleted",
                     lambda: zk.exists("/admin/reassign_partitions") is None and topic_znode() == {
                         "version": 2, "partitions": {"0": [3, 1]}, "adding_replicas": {}, "removing_replicas": {}},
                     brokers)
            back = state()
            assert back["leader"] in (3, 1) and sorted(back["isr"]) == [1, 3]
            wait_for("broker 2's replica deleted", lambda: not (brokers[2].data_dir / f"{TOPIC}-0").exists(), brokers)
            after = load.count()
            wait_for("records acknowledged after the second move", lambda: load.count() >= after + 100, brokers)

        acked = dict(load.acked)
        found = read_all(bootstrap, max(acked) + 1)
        missing = {offset: value for offset, value in acked.items() if found.get(offset) != value}
        assert not missing, f"{len(missing)} acknowledged records not where they were acknowledged"

        # Refusals as Kafka words them, through the stock client and, on a broker that is not the controller,
        # through the wire.
        assert admin.alter_partition_reassignments({TP: [3, 9], TopicPartition(TOPIC, 7): [1]}) == {
            TP: errors.InvalidReplicationAssignmentError, TopicPartition(TOPIC, 7): errors.UnknownTopicOrPartitionError}
        assert admin.alter_partition_reassignments({TP: None}) == {TP: errors.NoReassignmentInProgressError}
        with BrokerConnection(brokers[2].host, brokers[2].port, timeout_s=30) as conn:
            alter = conn.send(AlterPartitionReassignmentsRequest(topics=[
                AlterPartitionReassignmentsRequest.ReassignableTopic(name=TOPIC, partitions=[
                    AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                        partition_index=0, replicas=[1, 2])])]), 0)
            assert isinstance(alter, AlterPartitionReassignmentsResponse)
            assert (alter.error_code, alter.responses) == (ErrorCode.NOT_CONTROLLER, [])
            listed = conn.send(ListPartitionReassignmentsRequest(), 0)
            assert isinstance(listed, ListPartitionReassignmentsResponse)
            assert listed.error_code == ErrorCode.NOT_CONTROLLER
        assert topic_znode()["partitions"] == {"0": [3, 1]}
    finally:
        admin.close()
        zk.stop()
        zk.close()
