"""Controlled shutdown and the controller's admin znodes on a launcher-started cluster (real ZooKeeper, three
broker processes, a stock librdkafka producer).

A clean SIGTERM of a partition leader under acks=all load (RF=3, min.insync.replicas=2) must hand leadership
over *before* the broker goes: a kazoo client records, in ZooKeeper's own order of events, the partition's
state znode naming another leader before the stopping broker's registration disappears (so the move did not
wait for the session to end). The producer sees no failed delivery (only retriable errors, which librdkafka
retries), and a consumer afterwards finds every acknowledged record at its offset. The same cluster then shows
the broker, restarted, elected again (its shutting-down mark is gone) through ``/admin/preferred_replica_election``
as ``kafka-preferred-replica-election.sh --zookeeper`` writes it, and ``/isr_change_notification`` emptied.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from sofakafka.client import BrokerConnection
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from tests.cluster import test_failover as tf

WAIT_S = tf.WAIT_S


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tf.Cluster]:
    with tf.running_cluster(tmp_path_factory.mktemp("controlled-shutdown"),
                            {"replica.lag.time.max.ms": "10000"}) as c:
        yield c


@pytest.fixture(scope="module")
def zk(cluster: tf.Cluster) -> Iterator[KazooClient]:
    with tf.kazoo_client(cluster) as client:
        yield client


@dataclass
class ZkEvents:
    """What kazoo's single event thread saw, in the order ZooKeeper delivered it."""

    events: list[tuple[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, value: Any) -> None:
        with self.lock:
            self.events.append((kind, value))

    def first(self, kind: str, predicate: Any) -> int | None:
        with self.lock:
            return next((i for i, (k, v) in enumerate(self.events) if k == kind and predicate(v)), None)


@dataclass
class Shutdown:
    topic: str
    victim: int
    events: ZkEvents
    acked: dict[tuple[int, int], bytes]
    errors: list[str]
    log: str  # the stopped broker's log


@pytest.fixture(scope="module")
def sigterm_of_a_leader(cluster: tf.Cluster, zk: KazooClient) -> Shutdown:
    """SIGTERM the leader of partition 0 under acks=all load, once for the module; the tests read the outcome."""
    topic = cluster.create_topic()
    victim = cluster.partitions(topic)[0][0]
    events = ZkEvents()
    state_path = f"/brokers/topics/{topic}/partitions/0/state"

    def on_state(data: bytes | None, _stat: object, *_: object) -> None:
        if data:
            events.add("leader", json.loads(data)["leader"])

    def on_ids(children: list[str]) -> None:
        events.add("ids", {int(c) for c in children})

    zk.DataWatch(state_path, on_state)
    zk.ChildrenWatch("/brokers/ids", on_ids)
    record = cluster.record(victim)
    with tf.LoadProducer(cluster.all_bootstrap, topic) as load:
        tf.wait_for("records acknowledged before the shutdown", lambda: load.count() >= 200)
        os.kill(record.pid, signal.SIGTERM)
        tf.wait_for(f"broker {victim} to exit after SIGTERM", lambda: not record.alive())
        before = load.count()
        tf.wait_for("the producer continuing after the shutdown", lambda: load.count() >= before + 200)
    tf.wait_for("the stopped broker's registration to be seen gone",
                lambda: events.first("ids", lambda ids: victim not in ids) is not None)
    return Shutdown(topic, victim, events, dict(load.acked), list(load.errors),
                    Path(record.log).read_text(errors="replace"))


def test_sigterm_moves_leadership_before_the_broker_leaves_and_loses_no_acknowledged_record(
        cluster: tf.Cluster, sigterm_of_a_leader: Shutdown) -> None:
    s = sigterm_of_a_leader
    moved = s.events.first("leader", lambda leader: leader not in (s.victim, -1))
    gone = s.events.first("ids", lambda ids: s.victim not in ids)
    assert moved is not None and gone is not None, s.events.events
    # ZooKeeper delivers watch events in the order the changes committed: the new leader came first.
    assert moved < gone, s.events.events
    assert s.events.first("leader", lambda leader: leader == -1) is None, "partition 0 was ever leaderless"
    assert not s.errors, f"deliveries failed: {s.errors[:5]}"
    tf.assert_every_acknowledged_record_in_place(cluster, s.topic, s.acked)
    assert "controlled shutdown succeeded" in s.log
    for leader, isr in cluster.partitions(s.topic).values():
        assert leader != s.victim and s.victim not in isr


def test_the_restarted_broker_is_elected_again_through_the_preferred_replica_election_znode(
        cluster: tf.Cluster, zk: KazooClient, sigterm_of_a_leader: Shutdown) -> None:
    s = sigterm_of_a_leader
    cluster.restart(s.victim, [s.topic])  # back in every ISR
    preferred = {p: replicas[0] for p, replicas in _assignment(zk, s.topic).items()}
    assert any(cluster.partitions(s.topic)[p][0] != leader for p, leader in preferred.items())
    # What kafka-preferred-replica-election.sh --zookeeper writes.
    zk.create("/admin/preferred_replica_election", json.dumps({"version": 1, "partitions": [
        {"topic": s.topic, "partition": p} for p in sorted(preferred)]}).encode())
    tf.wait_for("the controller to delete /admin/preferred_replica_election",
                lambda: zk.exists("/admin/preferred_replica_election") is None)
    tf.wait_for("every partition led by its preferred replica",
                lambda: {p: leader for p, (leader, _) in cluster.partitions(s.topic).items()} == preferred)


def test_isr_change_notifications_are_deleted_by_the_controller(cluster: tf.Cluster, zk: KazooClient,
                                                                sigterm_of_a_leader: Shutdown) -> None:
    # The restart above had leaders add the broker back to their ISRs, and announce it; one more in Kafka's
    # shape, as a 2.6 leader writes it, must go the same way.
    zk.create("/isr_change_notification/isr_change_", json.dumps(
        {"version": 1, "partitions": [{"topic": sigterm_of_a_leader.topic, "partition": 0}]}).encode(),
        sequence=True)
    tf.wait_for("/isr_change_notification to be emptied by the controller",
                lambda: zk.get_children("/isr_change_notification") == [])


def _assignment(zk: KazooClient, topic: str) -> dict[int, list[int]]:
    data, _ = zk.get(f"/brokers/topics/{topic}")
    return {int(p): replicas for p, replicas in json.loads(data)["partitions"].items()}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_controlled_shutdown_errors_at_every_version(cluster: tf.Cluster, zk: KazooClient, version: int) -> None:
    """Refusals change nothing, so they can be asked of a live cluster: NOT_CONTROLLER off the controller,
    BROKER_NOT_AVAILABLE for an id nobody registered, STALE_BROKER_EPOCH (v2+) for an older registration."""
    controller = cluster.controller()
    other = next(b for b in cluster.live() if b != controller)
    epoch = zk.exists(f"/brokers/ids/{other}").czxid

    def ask(at: int, broker_id: int, broker_epoch: int = -1) -> ControlledShutdownResponse:
        a = cluster.state.brokers[at]
        with BrokerConnection(a.external_advertised, a.external_port, timeout_s=30) as conn:
            response = conn.send(ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch), version)
        assert isinstance(response, ControlledShutdownResponse)
        return response

    assert ask(other, other).error_code == ErrorCode.NOT_CONTROLLER
    assert ask(controller, 99).error_code == ErrorCode.BROKER_NOT_AVAILABLE
    if version >= 2:
        stale = ask(controller, other, epoch - 1)
        assert (stale.error_code, stale.remaining_partitions) == (ErrorCode.STALE_BROKER_EPOCH, [])
    # Nobody was marked shutting down: a new topic is led by its preferred replicas, the other broker's included.
    topic = cluster.create_topic()
    assert {p: leader for p, (leader, _) in cluster.partitions(topic).items()} == \
        {p: replicas[0] for p, replicas in _assignment(zk, topic).items()}
