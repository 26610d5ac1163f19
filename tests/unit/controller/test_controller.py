"""The controller on real embedded stores: election and epochs, restarts, fencing, and leadership as brokers
come and go (several brokers are sessions of one embedded server, as they would be ZooKeeper clients)."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sofakafka.controller import kafka_controller
from sofakafka.controller.embedded import EmbeddedMetadataServer, EmbeddedMetadataStore
from sofakafka.controller.kafka_controller import KafkaController
from sofakafka.controller.node import ControllerNode
from sofakafka.controller.registration import make_registration, register_broker
from sofakafka.controller.store import MetadataStore, SetDataOp
from sofakafka.controller.topics import NewTopic
from sofakafka.controller.zk_data import PartitionState, TopicAssignment, TopicPartition

from .conftest import SETTLE_TIMEOUT, plaintext, read_json, settle


def state(store: MetadataStore, topic: str, partition: int) -> PartitionState:
    data, _ = store.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return PartitionState.decode(data)


def test_single_broker_elects_itself_with_kafkas_znodes(node: ControllerNode) -> None:
    store = node.store
    controller = read_json(store, "/controller")
    assert set(controller) == {"version", "brokerid", "timestamp"}
    assert controller["version"] == 1 and controller["brokerid"] == 1
    assert isinstance(controller["timestamp"], str) and controller["timestamp"].isdigit()
    stat = store.exists("/controller")
    assert stat is not None and stat.ephemeral_owner == store.session_id
    assert store.get("/controller_epoch")[0] == b"1"
    assert node.controller.is_active and node.controller.epoch == 1
    assert node.cache.wait_until(lambda s: s.controller_id == 1, SETTLE_TIMEOUT)


def test_restart_bumps_the_controller_epoch_but_not_leader_epochs(meta_dir: Path) -> None:
    store = EmbeddedMetadataStore.open(meta_dir, fsync=False)
    node = ControllerNode.start(store, 1, plaintext())
    node.admin.create_topic(NewTopic("kept", 2, 1))
    settle(node)
    before = [store.get(f"/brokers/topics/kept/partitions/{p}/state") for p in range(2)]
    node.shutdown()
    store.close()

    store = EmbeddedMetadataStore.open(meta_dir, fsync=False)
    try:
        node = ControllerNode.start(store, 1, plaintext())
        settle(node)
        assert node.controller.epoch == 2
        assert store.get("/controller_epoch")[0] == b"2"
        after = [store.get(f"/brokers/topics/kept/partitions/{p}/state") for p in range(2)]
        # The broker leads its partitions again without any leadership change: nothing is rewritten.
        assert [(d, s.version) for d, s in after] == [(d, s.version) for d, s in before]
        snap = node.cache.snapshot()
        assert [snap.partition("kept", p).leader_epoch for p in range(2)] == [0, 0]  # type: ignore[union-attr]
        node.shutdown()
    finally:
        store.close()


def test_a_partition_created_while_down_gets_its_leader_at_start(meta_dir: Path) -> None:
    """A topic znode written without a running controller (by a tool, or before a crash) is completed by
    the next controller."""
    store = EmbeddedMetadataStore.open(meta_dir, fsync=False)
    try:
        store.create("/brokers/topics/late", TopicAssignment({0: [1]}).encode(), makepath=True)
        node = ControllerNode.start(store, 1, plaintext())
        settle(node)
        assert state(store, "late", 0) == PartitionState(1, 0, 1, (1,))
        node.shutdown()
    finally:
        store.close()


class Cluster:
    """Brokers as sessions of one embedded server; each can die (session closed) and come back."""

    def __init__(self, directory: Path) -> None:
        self.server = EmbeddedMetadataServer.open(directory, fsync=False)
        self.nodes: dict[int, ControllerNode] = {}
        self.sessions: dict[int, EmbeddedMetadataStore] = {}

    def start(self, broker_id: int) -> ControllerNode:
        """Start a broker and let it settle, so which broker wins the election is the order of start."""
        session = self.server.connect()
        self.sessions[broker_id] = session
        node = ControllerNode.start(session, broker_id, plaintext(9090 + broker_id), rng=random.Random(broker_id))
        self.nodes[broker_id] = node
        self.settle()
        return node

    def kill(self, broker_id: int) -> None:
        self.nodes.pop(broker_id).shutdown()
        self.sessions.pop(broker_id).close()

    def settle(self) -> None:
        for node in self.nodes.values():
            settle(node)
        for node in self.nodes.values():
            settle(node)

    def active(self) -> list[int]:
        return [b for b, n in self.nodes.items() if n.controller.is_active]

    def close(self) -> None:
        for broker_id in list(self.nodes):
            self.kill(broker_id)
        self.server.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "meta")
    yield c
    c.close()


def test_only_one_controller_and_the_next_takes_over_with_a_higher_epoch(cluster: Cluster) -> None:
    cluster.start(1)
    cluster.start(2)
    cluster.settle()
    assert cluster.active() == [1]
    store = cluster.sessions[2]
    assert read_json(store, "/controller")["brokerid"] == 1
    cluster.kill(1)
    cluster.settle()
    assert cluster.active() == [2]
    assert read_json(store, "/controller")["brokerid"] == 2
    assert store.get("/controller_epoch")[0] == b"2"
    assert cluster.nodes[2].cache.wait_until(lambda s: s.controller_id == 2 and list(s.brokers) == [2], SETTLE_TIMEOUT)


def test_leadership_moves_when_brokers_die_and_return(cluster: Cluster) -> None:
    n1 = cluster.start(1)
    cluster.start(2)
    cluster.start(3)
    assert cluster.active() == [1]
    n1.admin.create_topic(NewTopic("moving", assignments={0: [2, 3], 1: [3, 2]}))
    n1.admin.create_topic(NewTopic("lonely", assignments={0: [2]}))
    cluster.settle()
    store = n1.store
    assert state(store, "moving", 0) == PartitionState(2, 0, 1, (2, 3))
    assert state(store, "moving", 1) == PartitionState(3, 0, 1, (3, 2))
    assert state(store, "lonely", 0) == PartitionState(2, 0, 1, (2,))

    cluster.kill(2)
    cluster.settle()
    # The controller saw broker 2 go: another ISR member leads where 2 led, and 2 leaves every ISR.
    assert state(store, "moving", 0) == PartitionState(3, 1, 1, (3,))
    assert state(store, "moving", 1) == PartitionState(3, 1, 1, (3,))
    # No live ISR member: leaderless, the ISR keeps its last member, and the epoch still moves on.
    assert state(store, "lonely", 0) == PartitionState(-1, 1, 1, (2,))
    assert n1.cache.wait_until(lambda s: s.partition("lonely", 0).leader == -1, SETTLE_TIMEOUT)  # type: ignore[union-attr]
    lonely = n1.cache.snapshot().partition("lonely", 0)
    assert lonely is not None and lonely.offline_replicas == (2,) and lonely.isr == (2,)

    cluster.start(2)
    assert state(store, "lonely", 0) == PartitionState(2, 2, 1, (2,))
    # Partitions with a live leader are left alone: the returning broker catches up as a follower.
    assert state(store, "moving", 0) == PartitionState(3, 1, 1, (3,))
    assert cluster.active() == [1]


def test_a_new_controller_elects_partitions_without_a_live_leader_and_drops_dead_replicas_from_isrs(
        cluster: Cluster) -> None:
    n1 = cluster.start(1)
    n2 = cluster.start(2)
    n1.admin.create_topic(NewTopic("moving", assignments={0: [1, 2], 1: [2, 1]}))
    n1.admin.create_topic(NewTopic("lonely", assignments={0: [1]}))
    cluster.settle()
    store = n2.store
    cluster.kill(1)
    cluster.settle()
    assert cluster.active() == [2]
    assert state(store, "moving", 0) == PartitionState(2, 1, 2, (2,))
    # Led by a live broker: the dead follower leaves the ISR at once (Kafka's OfflineReplica at controller
    # start-up), so acks=all does not wait for the leader to drop it by replica.lag.time.max.ms.
    assert state(store, "moving", 1) == PartitionState(2, 1, 2, (2,))
    # No eligible leader: no leader, and the ISR keeps its last member as the record of who was in sync.
    assert state(store, "lonely", 0) == PartitionState(-1, 1, 2, (1,))
    # When broker 1 returns, the offline partition is elected again, with a new epoch.
    cluster.start(1)
    assert state(store, "lonely", 0) == PartitionState(1, 2, 2, (1,))
    assert cluster.active() == [2]


def test_new_partition_waits_for_a_live_replica(cluster: Cluster) -> None:
    n1 = cluster.start(1)
    cluster.settle()
    # A tool (or another broker) assigned the partition to broker 3, which has not started yet.
    n1.store.create("/brokers/topics/later", TopicAssignment({0: [3]}).encode())
    cluster.settle()
    assert n1.store.exists("/brokers/topics/later/partitions/0/state") is None
    partition = n1.cache.snapshot().partition("later", 0)
    assert partition is not None and (partition.leader, partition.leader_epoch, partition.offline_replicas) == (-1, -1, (3,))
    cluster.start(3)
    cluster.settle()
    assert state(n1.store, "later", 0) == PartitionState(3, 0, 1, (3,))
    assert n1.cache.wait_until(lambda s: s.partition("later", 0).leader == 3, SETTLE_TIMEOUT)  # type: ignore[union-attr]


def test_unclean_election_takes_any_live_replica_when_enabled(tmp_path: Path) -> None:
    server = EmbeddedMetadataServer.open(tmp_path / "meta", fsync=False)
    try:
        s1, s2 = server.connect(), server.connect()
        register_broker(s2, make_registration(2, plaintext(9092)))
        node = ControllerNode.start(s1, 1, plaintext(), unclean_leader_election_enable=True)
        settle(node)
        # Broker 2 is a replica outside the ISR, and the only ISR member (3) is gone.
        txn = s1.transaction()
        txn.create("/brokers/topics/risky", TopicAssignment({0: [3, 2]}).encode())
        txn.create("/brokers/topics/risky/partitions")
        txn.create("/brokers/topics/risky/partitions/0")
        txn.create("/brokers/topics/risky/partitions/0/state", PartitionState(3, 4, 1, (3,)).encode())
        txn.commit()
        settle(node)
        assert state(s1, "risky", 0) == PartitionState(2, 5, 1, (2,))
        node.shutdown()
    finally:
        server.close()


def test_a_deposed_controller_cannot_write(node: ControllerNode) -> None:
    # Another controller was elected behind our back: the epoch znode moved on.
    node.store.set("/controller_epoch", b"7")
    node.admin.create_topic(NewTopic("fenced", 1, 1))
    settle(node)
    assert node.store.exists("/brokers/topics/fenced/partitions/0/state") is None
    assert not node.controller.is_active


def test_controller_events_from_other_threads_are_serialised(node: ControllerNode) -> None:
    """Topics created from many threads at once all get exactly one leader election."""
    import threading

    def create(i: int) -> None:
        node.admin.create_topic(NewTopic(f"t{i}", 3, 1))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    settle(node)
    for i in range(8):
        for p in range(3):
            data, stat = node.store.get(f"/brokers/topics/t{i}/partitions/{p}/state")
            assert json.loads(data)["leader"] == 1 and stat.version == 0


def test_shutdown_is_idempotent_and_startup_twice_is_harmless(store: EmbeddedMetadataStore) -> None:
    register_broker(store, make_registration(1, plaintext()))
    controller = KafkaController(store, 1)
    controller.startup()
    controller.startup()
    assert controller.wait_idle(SETTLE_TIMEOUT)
    assert controller.is_active
    controller.shutdown()
    controller.shutdown()
    assert not controller.is_active


def test_a_lost_session_ends_controllership(tmp_path: Path) -> None:
    with EmbeddedMetadataServer.open(tmp_path / "meta", fsync=False) as server:
        session = server.connect()
        register_broker(session, make_registration(1, plaintext()))
        controller = KafkaController(session, 1)
        controller.startup()
        try:
            assert controller.wait_idle(SETTLE_TIMEOUT) and controller.is_active
            session.close()
            assert controller.wait_idle(SETTLE_TIMEOUT)
            assert not controller.is_active
            # The ephemeral /controller went with the session, so another broker can take over.
            other = server.connect()
            assert other.exists("/controller") is None
        finally:
            controller.shutdown()


class ControllerCalls:
    """Counts the store calls the controller thread makes through a session (its own broker's cache shares the
    session and reads each changed znode: those are not counted)."""

    METHODS = ("get", "exists", "get_children", "multi", "get_many", "multi_many", "create", "set", "delete")

    def __init__(self, store: MetadataStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        for name in self.METHODS:
            monkeypatch.setattr(store, name, self._counting(name, getattr(store, name)))

    def _counting(self, name: str, method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name.startswith("controller-"):
                first = args[0] if args else None
                if name == "multi_many":  # the partition states written
                    self.calls.append((name, sum(isinstance(op, SetDataOp) for ops in first for op in ops)))
                else:
                    self.calls.append((name, len(first) if isinstance(first, list) else 1))
            return method(*args, **kwargs)
        return call

    def take(self) -> list[tuple[str, int]]:
        calls, self.calls = self.calls, []
        return calls


def test_a_failed_broker_s_leaderships_move_in_batches_not_a_round_trip_per_partition(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Electing the partitions a dead broker led and taking it out of every ISR reads and writes the states in a
    few batched calls (pipelined on ZooKeeper, one fsync embedded): a round trip per partition made a 3-broker
    cluster with 10,000 partitions take minutes to move a broker's leaderships. Counted, not timed."""
    partitions = 300
    n1 = cluster.start(1)
    cluster.start(2)
    cluster.start(3)
    orders = [(1, 2, 3), (2, 3, 1), (3, 1, 2)]
    n1.admin.create_topic(NewTopic("wide", assignments={p: list(orders[p % 3]) for p in range(partitions)}))
    cluster.settle()
    calls = ControllerCalls(n1.store, monkeypatch)
    cluster.kill(2)
    cluster.settle()
    made = calls.take()
    for p in range(partitions):
        replicas = [r for r in orders[p % 3] if r != 2]
        assert state(n1.store, "wide", p) == PartitionState(replicas[0], 1 if 2 in orders[p % 3] else 0, 1,
                                                            tuple(replicas))
    assert len(made) < 20, made
    assert sum(n for name, n in made if name == "multi_many") == partitions  # every state written once
    assert sum(n for name, n in made if name == "get_many") == partitions  # and read once


def test_a_new_controller_reads_the_states_of_a_topic_in_batches(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    partitions = 300
    n1 = cluster.start(1)
    n2 = cluster.start(2)
    n1.admin.create_topic(NewTopic("wide", assignments={p: [1, 2] if p % 2 else [2, 1] for p in range(partitions)}))
    cluster.settle()
    calls = ControllerCalls(n2.store, monkeypatch)
    cluster.kill(1)
    cluster.settle()
    assert cluster.active() == [2]
    made = calls.take()
    assert all(state(n2.store, "wide", p).leader == 2 for p in range(partitions))
    assert len(made) < 40, made


def test_the_states_of_a_big_topic_are_created_in_bounded_multi_ops(
        node: ControllerNode, monkeypatch: pytest.MonkeyPatch) -> None:
    """One multi-op for every new state would be over ZooKeeper's 1 MB request limit for a topic of a few thousand
    partitions; they go in multi-ops of at most STATE_OPS_PER_MULTI operations."""
    monkeypatch.setattr(kafka_controller, "STATE_OPS_PER_MULTI", 10)
    calls = ControllerCalls(node.store, monkeypatch)
    node.admin.create_topic(NewTopic("big", 25, 1))
    settle(node)
    assert all(state(node.store, "big", p) == PartitionState(1, 0, 1, (1,)) for p in range(25))
    sizes = [n for name, n in calls.take() if name == "multi"]
    assert len(sizes) >= 5 and max(sizes) <= 10 + 2  # the fence, and a state with its partition's znode


def test_a_batch_of_state_writes_keeps_each_partition_s_outcome_its_own(node: ControllerNode) -> None:
    """States go in multi-ops of many partitions; one partition whose znode moved on (its leader changed the ISR)
    fails its multi-op, and the others of that multi-op are written on their own: only the one that lost its race
    is left as the leader wrote it, its context refreshed."""
    partitions = 2 * kafka_controller.STATES_PER_MULTI + 10
    node.admin.create_topic(NewTopic("many", partitions, 1))
    settle(node)
    store = node.store
    moved = TopicPartition("many", kafka_controller.STATES_PER_MULTI + 3)
    by_leader = PartitionState(1, 0, 1, (1,))
    store.set(f"/brokers/topics/many/partitions/{moved.partition}/state", by_leader.encode())
    controller = node.controller

    def write() -> None:
        updates = [(tp, ctx, PartitionState(1, 1, 1, (1,))) for tp, ctx in sorted(controller.context.partitions.items())
                   if tp.topic == "many"]
        controller._write_states(updates)

    controller.call_on_thread(write, SETTLE_TIMEOUT, "write")
    for p in range(partitions):
        assert state(store, "many", p) == (by_leader if p == moved.partition else PartitionState(1, 1, 1, (1,)))
    ctx = controller.context.partitions[moved]
    assert (ctx.state, ctx.zk_version) == (by_leader, 1)
