"""The controller's own ZooKeeper session expires (three broker processes, real ZooKeeper, stock clients).

The controller broker is frozen (SIGSTOP) past its session timeout under acks=all load: ZooKeeper expires its
session, which removes ``/controller`` and its registration, another broker takes over and moves the
leaderships, and producers carry on. On waking, the old controller finds its session gone, opens a new one by
itself (no restart), registers again with a new broker epoch and comes back as an ordinary broker, following
and rejoining every ISR; it is not the controller (another broker is), but runs in every later election and
wins one once the brokers ahead of it are gone. The broker whose session expires as a non-controller is
tests/cluster/test_failover.py's.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from sofakafka import cluster_launcher as cl
from sofakafka.client import KafkaClient, NewTopic
from sofakafka.protocol.errors import ErrorCode
from tests.cluster.test_failover import (
    BROKERS,
    SESSION_TIMEOUT_MS,
    WAIT_S,
    Cluster,
    _free_ports,
    fail_under_load,
    wait_for,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    base, zk = _free_ports()
    state = cl.up(cl.ClusterSpec(BROKERS, tmp_path / "expiry", base, zk, overrides={
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "replica.lag.time.max.ms": "10000",
    }))
    try:
        yield Cluster(state)
    finally:
        cl.stop_processes(cl.ClusterState.load(state.directory).processes, deadline_s=15)


@pytest.fixture
def zk(cluster: Cluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=f"127.0.0.1:{cluster.state.zk_port}")
    client.start(WAIT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def broker_epoch(zk: KazooClient, broker_id: int) -> int | None:
    stat = zk.exists(f"/brokers/ids/{broker_id}")
    return None if stat is None else int(stat.czxid)


def controller_seen_by(cluster: Cluster, broker_id: int) -> int:
    with KafkaClient(cluster.bootstrap(broker_id), request_timeout_ms=10_000) as c:
        return c.metadata([]).controller_id


def test_an_expired_controller_hands_over_comes_back_as_a_broker_and_can_be_elected_again(
    cluster: Cluster, zk: KazooClient
) -> None:
    topic = cluster.create_topic()
    old = cluster.controller()
    pid = cluster.record(old).pid
    old_epoch = broker_epoch(zk, old)
    assert old_epoch is not None
    successor: list[int] = []

    def freeze(broker_id: int) -> None:
        os.kill(cluster.record(broker_id).pid, signal.SIGSTOP)

    def thaw(broker_id: int) -> None:
        with cluster.client() as c:
            wait_for("the frozen controller to leave the cluster",
                     lambda: broker_id not in c.metadata([]).brokers
                     and c.metadata([]).controller_id not in (broker_id, -1))
            successor.append(c.metadata([]).controller_id)
        os.kill(cluster.record(broker_id).pid, signal.SIGCONT)
        wait_for("the woken broker to register again with a new broker epoch",
                 lambda: (broker_epoch(zk, broker_id) or 0) > old_epoch)
        try:
            cluster.wait_full_isr([topic])
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{cluster.logs()}") from None

    fail_under_load(cluster, topic, lambda: old, freeze, thaw)
    assert cluster.record(old).pid == pid, "the broker was restarted; it had to come back by itself"
    (new,) = successor
    # Back as an ordinary broker: the one that took over stays the controller, as every broker sees it
    # (the woken one included, whose metadata came back with its session).
    assert json.loads(zk.get("/controller")[0])["brokerid"] == new
    assert {b: controller_seen_by(cluster, b) for b in cluster.state.brokers} == dict.fromkeys(cluster.state.brokers, new)

    # It runs for controller again: once the other two are gone, it is elected and does a controller's work.
    bystander = next(b for b in cluster.state.brokers if b not in (old, new))
    cluster.stop(bystander)
    cluster.stop(new)
    wait_for("the woken broker to become the controller", lambda: controller_seen_by(cluster, old) == old)
    assert json.loads(zk.get("/controller")[0])["brokerid"] == old
    with KafkaClient(cluster.bootstrap(old), request_timeout_ms=10_000) as c:
        created = c.create_topics([NewTopic("after-expiry", 1, 1)])
        assert created["after-expiry"].error == ErrorCode.NONE, created
        wait_for("a leader for the topic it created",
                 lambda: c.metadata(["after-expiry"]).topics["after-expiry"].partitions[0].leader == old)
