"""A real broker process with ``zookeeper.connect`` writes the znodes a Kafka 2.6 broker writes.

The znodes are read with a bare kazoo client, not with our store, so what is asserted is what any Kafka
tool reading that ZooKeeper would see: paths under the chroot, ephemeral or not, and JSON shapes field by
field (reference/kafka-2.6/ZOOKEEPER-LAYOUT.md).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kazoo.client import KazooClient

from tests.cluster.conftest import ZooKeeperServer
from tests.integration.conftest import BrokerProcess

WAIT_S = 60.0
"""A bound on waiting for the controller to write what it writes after start-up, never a timing assertion."""


@pytest.fixture
def zk_reader(zookeeper: ZooKeeperServer, zk_chroot: str) -> Iterator[Callable[[], KazooClient]]:
    """A bare kazoo client on the test's chroot, opened on demand (once a broker created the chroot)."""
    clients: list[KazooClient] = []

    def open_client() -> KazooClient:
        client = KazooClient(hosts=zookeeper.hosts + zk_chroot, timeout=10)
        clients.append(client)
        client.start(timeout=WAIT_S)
        return client

    try:
        yield open_client
    finally:
        for client in clients:
            client.stop()
            client.close()


def read_json(zk: KazooClient, path: str) -> Any:
    data, _ = zk.get(path)
    return json.loads(data)


def wait_for_json(zk: KazooClient, path: str, ready: Callable[[Any], bool]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        if zk.exists(path) is not None:
            doc = read_json(zk, path)
            if ready(doc):
                return doc
        assert time.monotonic() < deadline, f"{path} never became ready"
        time.sleep(0.1)


def test_a_broker_writes_kafka_2_6_znodes_under_its_chroot(
    zk_broker_factory: Callable[..., BrokerProcess],
    zk_reader: Callable[[], KazooClient],
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
) -> None:
    broker = zk_broker_factory({"broker.id": "-1", "broker.rack": "r1"})
    zk = zk_reader()
    broker_id = 1001  # the first id generated from /brokers/seqid above reserved.broker.max.id=1000

    # The chroot holds everything; nothing of Kafka's lands at ZooKeeper's root.
    outside = KazooClient(hosts=zookeeper.hosts, timeout=10)
    outside.start(timeout=WAIT_S)
    try:
        assert outside.exists(zk_chroot + "/brokers/ids") is not None
        assert outside.exists("/brokers") is None
    finally:
        outside.stop()
        outside.close()

    for path in ("/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
                 "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
                 "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users",
                 "/config/brokers"):
        assert zk.exists(path) is not None, path
    assert zk.get("/brokers/seqid")[1].version == 1

    # /brokers/ids/<id>: ephemeral, registration JSON v4.
    assert zk.get_children("/brokers/ids") == [str(broker_id)]
    data, stat = zk.get(f"/brokers/ids/{broker_id}")
    assert stat.ephemeralOwner != 0
    registration = json.loads(data)
    assert set(registration) == {"version", "host", "port", "endpoints", "listener_security_protocol_map",
                                 "jmx_port", "timestamp", "rack"}
    assert registration["version"] == 4
    assert (registration["host"], registration["port"]) == (broker.host, broker.port)
    assert registration["endpoints"] == [f"PLAINTEXT://{broker.host}:{broker.port}"]
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert registration["jmx_port"] == -1 and registration["rack"] == "r1"
    assert isinstance(registration["timestamp"], str) and registration["timestamp"].isdigit()

    # /controller: ephemeral {"version":1,"brokerid":...,"timestamp":"..."}; /controller_epoch: decimal text.
    controller = wait_for_json(zk, "/controller", lambda doc: True)
    assert set(controller) == {"version", "brokerid", "timestamp"}
    assert controller["version"] == 1 and controller["brokerid"] == broker_id
    assert isinstance(controller["timestamp"], str) and controller["timestamp"].isdigit()
    assert zk.get("/controller")[1].ephemeralOwner == stat.ephemeralOwner
    epoch_data, _ = zk.get("/controller_epoch")
    assert epoch_data.decode().isdigit() and int(epoch_data) >= 1

    # /cluster/id: version is the string "1"; the id is 22 URL-safe Base64 characters.
    cluster = read_json(zk, "/cluster/id")
    assert set(cluster) == {"version", "id"} and cluster["version"] == "1"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster["id"])

    # A topic created over the wire: assignment v2, config v1, partition state v1 written by the controller.
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics(
            [NewTopic("orders", num_partitions=2, replication_factor=1, topic_configs={"retention.ms": "3600000"})]
        )
    finally:
        admin.close()

    assignment = read_json(zk, "/brokers/topics/orders")
    assert assignment["version"] == 2
    assert assignment["partitions"] == {"0": [broker_id], "1": [broker_id]}
    assert assignment.get("adding_replicas", {}) == {} and assignment.get("removing_replicas", {}) == {}
    assert set(assignment) <= {"version", "partitions", "adding_replicas", "removing_replicas"}

    config = read_json(zk, "/config/topics/orders")
    assert config == {"version": 1, "config": {"retention.ms": "3600000"}}

    assert sorted(zk.get_children("/brokers/topics/orders/partitions")) == ["0", "1"]
    for partition in (0, 1):
        assert zk.get(f"/brokers/topics/orders/partitions/{partition}")[0] in (b"", None)
        state = wait_for_json(zk, f"/brokers/topics/orders/partitions/{partition}/state", lambda doc: True)
        assert set(state) == {"version", "leader", "leader_epoch", "controller_epoch", "isr"}
        assert state["version"] == 1 and state["leader"] == broker_id and state["isr"] == [broker_id]
        assert state["leader_epoch"] >= 0 and state["controller_epoch"] == int(epoch_data)

    # A clean stop ends the session: the ephemerals go with it, the persistent layout stays.
    assert broker.stop() == 0
    assert zk.exists(f"/brokers/ids/{broker_id}") is None
    assert zk.exists("/brokers/topics/orders") is not None

    # Restarted with broker.id=-1 again, it keeps its id from meta.properties instead of drawing a new one.
    broker.start()
    wait_for_json(zk, f"/brokers/ids/{broker_id}", lambda doc: True)
    assert zk.get("/brokers/seqid")[1].version == 1
