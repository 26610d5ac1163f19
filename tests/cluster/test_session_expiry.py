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
import random
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from sofakafka.client import KafkaClient, NewTopic
from sofakafka.controller.metadata import ClusterMetadata
from sofakafka.controller.node import ControllerNode
from sofakafka.controller.session import SessionRenewingStore
from sofakafka.controller.store import MetadataStore, SessionState
from sofakafka.controller.topics import NewTopic as NewTopicSpec
from sofakafka.controller.zookeeper import ZooKeeperMetadataStore
from sofakafka.protocol.errors import ErrorCode
from tests.cluster.conftest import ZooKeeperServer
from tests.cluster.test_failover import (
    WAIT_S,
    Cluster,
    fail_under_load,
    kazoo_client,
    running_cluster,
    wait_for,
)
from tests.cluster.test_zookeeper_store import StateLog, expire
from tests.unit.controller import conftest as unit


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path / "expiry", {"replica.lag.time.max.ms": "10000"}) as c:
        yield c


@pytest.fixture
def zk(cluster: Cluster) -> Iterator[KazooClient]:
    with kazoo_client(cluster) as client:
        yield client


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
        cluster.frozen.add(broker_id)
        os.kill(cluster.record(broker_id).pid, signal.SIGSTOP)

    def thaw(broker_id: int) -> None:
        with cluster.client() as c:
            wait_for("the frozen controller to leave the cluster",
                     lambda: broker_id not in c.metadata([]).brokers
                     and c.metadata([]).controller_id not in (broker_id, -1))
            successor.append(c.metadata([]).controller_id)
        os.kill(cluster.record(broker_id).pid, signal.SIGCONT)
        cluster.frozen.discard(broker_id)
        wait_for("the woken broker to register again with a new broker epoch",
                 lambda: (broker_epoch(zk, broker_id) or 0) > old_epoch)
        # Registered again means its metadata is the tree's again, not what it held when it froze (itself
        # the controller and a leader): a client bootstrapping from it right now must be sent to the new
        # leaders, or it reads the woken broker's old high watermark as the partition's.
        with KafkaClient(cluster.bootstrap(broker_id), request_timeout_ms=10_000) as c:
            seen = c.metadata([topic])
        assert seen.controller_id == successor[0], seen
        assert all(p.leader not in (broker_id, -1) for p in seen.topics[topic].partitions.values()), seen
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


class _RegistrationWatchingStore(SessionRenewingStore):
    """Keeps what the node's cache says at the moment each registration of ``broker_id`` is written: what a
    client asking that broker for metadata is told from the instant the cluster sees it back."""

    def __init__(self, connect: Callable[[], MetadataStore], broker_id: int) -> None:
        super().__init__(connect, retry_backoff_s=0.05)
        self.node: ControllerNode | None = None
        self.views_at_registration: list[ClusterMetadata] = []
        self._path = f"/brokers/ids/{broker_id}"

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False, sequence: bool = False,
               makepath: bool = False) -> str:
        if path == self._path and self.node is not None:
            self.views_at_registration.append(self.node.cache.snapshot())
        return super().create(path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath)


def test_a_broker_registers_again_only_once_its_metadata_is_the_trees_again(
    zookeeper: ZooKeeperServer, zk_chroot: str
) -> None:
    # The race behind a stale high watermark read after a controller's session expired: the woken broker was
    # seen registered again while its cache still held the view it froze with (itself the controller and
    # the leader), so a client bootstrapping from it fetched from it as the leader. Here the new session is
    # held back until the other broker has taken over and moved the leadership, as a frozen broker is.
    gate = threading.Event()
    sessions = 0

    def connect() -> ZooKeeperMetadataStore:
        nonlocal sessions
        sessions += 1
        if sessions > 1:
            assert gate.wait(WAIT_S), "the test never let the renewal through"
        return ZooKeeperMetadataStore.connect(zookeeper.hosts, zk_chroot, session_timeout=10,
                                              connection_timeout=10)

    first_store = _RegistrationWatchingStore(connect, 1)
    second_store = SessionRenewingStore(lambda: ZooKeeperMetadataStore.connect(
        zookeeper.hosts, zk_chroot, session_timeout=10, connection_timeout=10), retry_backoff_s=0.05)
    nodes: list[ControllerNode] = []
    try:
        first = ControllerNode.start(first_store, 1, unit.plaintext(9091), rng=random.Random(1),
                                     stale_registration_wait_s=10)
        nodes.append(first)
        first_store.node = first
        unit.settle(first)
        second = ControllerNode.start(second_store, 2, unit.plaintext(9092), rng=random.Random(2),
                                      stale_registration_wait_s=10)
        nodes.append(second)
        first.admin.create_topic(NewTopicSpec("orders", assignments={0: [1, 2]}))
        unit.settle(first)
        assert first.cache.wait_until(lambda s: s.has_leaders("orders"), WAIT_S)
        before = first.cache.snapshot().partition("orders", 0)
        assert before is not None and before.leader == 1

        lost = first_store.current_session
        assert isinstance(lost, ZooKeeperMetadataStore)
        states = StateLog()
        lost.add_listener(states)
        expire(zookeeper, lost)
        states.wait_for(SessionState.LOST)

        def taken_over(s: ClusterMetadata) -> bool:
            p = s.partition("orders", 0)
            return s.controller_id == 2 and p is not None and p.leader == 2
        assert second.cache.wait_until(taken_over, WAIT_S)
        gate.set()
        assert second.cache.wait_until(lambda s: sorted(s.brokers) == [1, 2], WAIT_S)

        (seen,) = first_store.views_at_registration
        assert taken_over(seen), (seen.controller_id, seen.partition("orders", 0))
    finally:
        gate.set()
        for n in reversed(nodes):
            n.shutdown()
        second_store.close()
        first_store.close()
