"""A throttled reassignment (KIP-73) on three real broker processes and a real ZooKeeper.

``sofakafka reassign --execute --throttle`` must leave in ZooKeeper what kafka-reassign-partitions.sh leaves:
both rates on every broker of the move in ``/config/brokers/<id>`` and the two throttled-replica lists in
``/config/topics/<t>``, in Kafka's JSON. The move still completes under acks=all load (a throttle only ever holds
back replicas outside the ISR), every acknowledged record is read back from the new replica, now the leader,
and ``--verify`` removes the throttle once the move is done. The broker rates are also set and described
through kafka-python's admin client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kazoo.client import KazooClient

from sofakafka.cli import reassign_partitions
from tests.cluster.conftest import ZooKeeperServer
from tests.cluster.test_reassignment import SETTINGS, WAIT_S, wait_for
from tests.integration.conftest import BrokerProcess

TOPIC = "throttled"
TP = TopicPartition(TOPIC, 0)
RATE = 400_000


def test_a_throttled_reassignment_sets_kafkas_throttle_configs_completes_and_verify_removes_them(
    zk_broker_factory: Callable[..., BrokerProcess], zookeeper: ZooKeeperServer, zk_chroot: str,
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    pending = {i: zk_broker_factory({**SETTINGS, "broker.id": str(i)}, name=f"broker{i}-", start=False)
               for i in (1, 2, 3)}
    brokers = {i: b.start() for i, b in pending.items()}
    zk = KazooClient(hosts=zookeeper.hosts + zk_chroot)
    zk.start(timeout=30)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, retries=100,
                             retry_backoff_ms=200, request_timeout_ms=15000)
    try:
        wait_for("three registered brokers", lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"],
                 brokers)

        def znode(path: str) -> dict[str, Any]:
            if zk.exists(path) is None:
                return {}
            doc: dict[str, Any] = json.loads(zk.get(path)[0])
            return doc

        # The broker rates through kafka-python: AlterConfigs on broker 3, DescribeConfigs answered by it.
        result = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3", configs={
            "follower.replication.throttled.rate": "12345"})], raise_on_unknown=False, incremental=False)
        assert result == {"broker": {"3": "OK"}}
        assert znode("/config/brokers/3") == {"version": 1, "config": {"follower.replication.throttled.rate": "12345"}}
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "3")])
        assert described["broker"]["3"]["follower.replication.throttled.rate"]["value"] == "12345"
        refused = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3", configs={
            "leader.replication.throttled.rate": "-5"})], raise_on_unknown=False, incremental=False)
        assert "leader.replication.throttled.rate" in refused["broker"]["3"]

        admin.create_topics([NewTopic(TOPIC, replica_assignments={0: [1, 2]})], timeout_ms=30000)
        state_path = f"/brokers/topics/{TOPIC}/partitions/0/state"
        wait_for("the partition in sync on [1, 2]",
                 lambda: sorted(znode(state_path).get("isr", [])) == [1, 2], brokers)

        acked: dict[int, bytes] = {}

        def produce(n: int, start: int) -> None:
            values = [f"record-{i}.".encode().ljust(1000, b".") for i in range(start, start + n)]
            futures = [(value, producer.send(TOPIC, value=value, partition=0)) for value in values]
            for value, future in futures:
                acked[future.get(timeout=30).offset] = value

        produce(1500, 0)  # about 1.5 MB for the new replica to copy at RATE bytes/s

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0,
                                                                  "replicas": [3, 2]}]}))
        args = ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan)]
        capsys.readouterr()
        assert reassign_partitions.main([*args, "--execute", "--throttle", str(RATE)]) == 0
        out = capsys.readouterr().out
        assert f"The inter-broker throttle limit was set to {RATE} B/s" in out
        rates = {"leader.replication.throttled.rate": str(RATE), "follower.replication.throttled.rate": str(RATE)}
        for broker_id in (1, 2, 3):  # the current replicas and the new one (broker 3's earlier value replaced)
            assert znode(f"/config/brokers/{broker_id}") == {"version": 1, "config": rates}
        assert znode(f"/config/topics/{TOPIC}") == {"version": 1, "config": {
            "leader.replication.throttled.replicas": "0:1,0:2",
            "follower.replication.throttled.replicas": "0:3"}}
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
        assert described["broker"]["1"]["leader.replication.throttled.rate"]["value"] == str(RATE)

        produce(200, 1500)  # acks=all goes on: the in-sync replicas are never held back

        final = {"version": 2, "partitions": {"0": [3, 2]}, "adding_replicas": {}, "removing_replicas": {}}
        wait_for("the reassignment to complete",
                 lambda: znode(f"/brokers/topics/{TOPIC}") == final, brokers)
        # Until --verify says done, the throttle stays, as with Kafka's tool.
        assert znode(f"/config/topics/{TOPIC}")["config"]

        def verified() -> bool:
            capsys.readouterr()
            return reassign_partitions.main([*args, "--verify"]) == 0

        wait_for("--verify to see the move complete", verified, brokers)
        out = capsys.readouterr().out
        assert "Clearing broker-level throttles on brokers 1,2,3" in out
        assert f"Clearing topic-level throttles on topic(s) {TOPIC}" in out
        for broker_id in (1, 2, 3):
            assert znode(f"/config/brokers/{broker_id}") == {"version": 1, "config": {}}
        assert znode(f"/config/topics/{TOPIC}") == {"version": 1, "config": {}}

        # Broker 1, the old leader, left: the new leader is the first in-sync target replica, broker 3, so
        # reading everything back from the leader reads it from the new replica.
        wait_for("broker 3 leading", lambda: znode(state_path).get("leader") == 3, brokers)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)
        try:
            consumer.assign([TP])
            found: dict[int, bytes] = {}
            deadline = time.monotonic() + WAIT_S
            while len(found) < len(acked) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=1000).values():
                    for r in records:
                        found[r.offset] = r.value
        finally:
            consumer.close()
        missing = [offset for offset, value in acked.items() if found.get(offset) != value]
        assert not missing, f"{len(missing)} acknowledged records not read back from the new replica"
    finally:
        producer.close()
        admin.close()
        zk.stop()
        zk.close()
