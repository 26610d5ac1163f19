"""Controlled shutdown, /admin/preferred_replica_election and /isr_change_notification on the controller, with
several brokers as sessions of one embedded store (as they would be ZooKeeper clients)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.controller import zk_data, zk_paths
from sofakafka.controller.admin_notifications import DELETE_BATCH
from sofakafka.controller.context import ElectionType
from sofakafka.controller.controlled_shutdown import ControlledShutdownError, controlled_shutdown_leader
from sofakafka.controller.store import MetadataStore
from sofakafka.controller.topics import NewTopic
from sofakafka.controller.zk_data import PartitionState, TopicPartition
from sofakafka.protocol.errors import ErrorCode

from . import test_controller
from .conftest import SETTLE_TIMEOUT

STATE = "/brokers/topics/{}/partitions/{}/state"


def state(store: MetadataStore, topic: str, partition: int) -> PartitionState:
    data, _ = store.get(STATE.format(topic, partition))
    return PartitionState.decode(data)


def write_state(store: MetadataStore, topic: str, partition: int, new: PartitionState) -> None:
    """What a leader's ISR change (or an older controller) leaves in the state znode."""
    store.set(STATE.format(topic, partition), new.encode())


class Cluster(test_controller.Cluster):
    def controlled_shutdown(self, broker_id: int, broker_epoch: int | None = None, via: int = 1) -> list[TopicPartition]:
        epoch = self.nodes[broker_id].broker_epoch if broker_epoch is None else broker_epoch
        remaining = self.nodes[via].controller.controlled_shutdown(broker_id, epoch, SETTLE_TIMEOUT)
        self.settle()
        return remaining


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "meta")
    yield c
    c.close()


@pytest.fixture(autouse=True)
def no_errors_from_these_duties(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    yield
    ours = {"sofakafka.controller.controlled_shutdown", "sofakafka.controller.admin_notifications"}
    errors = [r for r in caplog.get_records("call") if r.levelno >= logging.ERROR and r.name in ours]
    assert not errors, [r.getMessage() for r in errors]


def three_brokers(cluster: Cluster) -> MetadataStore:
    for broker_id in (1, 2, 3):
        cluster.start(broker_id)
    cluster.nodes[1].admin.create_topic(NewTopic("orders", assignments={0: [2, 3, 1], 1: [1, 2, 3], 2: [3, 1, 2]}))
    cluster.settle()
    return cluster.sessions[1]


# ------------------------------------------------------------------------------------------ controlled shutdown

def test_controlled_shutdown_moves_leadership_to_the_next_isr_member_and_leaves_every_isr(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    assert cluster.controlled_shutdown(2) == []
    # Led by 2: the next replica of the assignment that is in the ISR leads; 2 leaves the ISR; epoch bumped.
    assert state(store, "orders", 0) == PartitionState(3, 1, 1, (3, 1))
    # Followed by 2: same leader, ISR without 2, epoch bumped (Kafka's OfflineReplica transition).
    assert state(store, "orders", 1) == PartitionState(1, 1, 1, (1, 3))
    assert state(store, "orders", 2) == PartitionState(3, 1, 1, (3, 1))
    # Still registered: it serves until it exits.
    assert store.exists(zk_paths.broker_id_path(2)) is not None


def test_the_leader_is_chosen_from_the_isr_the_leaders_wrote_not_the_cached_one(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    # Broker 2 shrank the ISR of partition 0 without telling the controller: 3 is no longer in sync.
    write_state(store, "orders", 0, PartitionState(2, 0, 1, (2, 1)))
    assert cluster.controlled_shutdown(2) == []
    assert state(store, "orders", 0) == PartitionState(1, 1, 1, (1,))


def test_partitions_with_no_other_isr_member_remain_and_single_replicas_are_not_reported(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    cluster.nodes[1].admin.create_topic(NewTopic("single", assignments={0: [2]}))
    cluster.settle()
    write_state(store, "orders", 0, PartitionState(2, 0, 1, (2,)))
    remaining = cluster.controlled_shutdown(2)
    assert remaining == [TopicPartition("orders", 0)]
    assert state(store, "orders", 0) == PartitionState(2, 0, 1, (2,))  # untouched, never an empty ISR
    assert state(store, "single", 0) == PartitionState(2, 0, 1, (2,))
    # A retry gives the same answer while nothing changed.
    assert cluster.controlled_shutdown(2) == [TopicPartition("orders", 0)]


def test_a_shutting_down_broker_is_elected_nowhere_until_it_registers_again(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    assert cluster.controlled_shutdown(2) == []
    admin = cluster.nodes[1].admin
    admin.create_topic(NewTopic("late", assignments={0: [2, 3]}))
    cluster.settle()
    assert state(store, "late", 0) == PartitionState(3, 0, 1, (3,))
    # Its preferred replica is 2, registered and once in the ISR: still not eligible.
    write_state(store, "late", 0, PartitionState(3, 1, 1, (3, 2)))
    results = cluster.nodes[1].controller.elect_leaders([TopicPartition("late", 0)],
                                                         ElectionType.PREFERRED, SETTLE_TIMEOUT)
    assert results[TopicPartition("late", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    # Broker 2 restarts: a new registration (broker epoch) is a new broker the controller may elect.
    cluster.kill(2)
    cluster.start(2)
    write_state(store, "late", 0, PartitionState(3, 3, 1, (3, 2)))
    results = cluster.nodes[1].controller.elect_leaders([TopicPartition("late", 0)],
                                                         ElectionType.PREFERRED, SETTLE_TIMEOUT)
    assert results[TopicPartition("late", 0)][0] == ErrorCode.NONE
    assert state(store, "late", 0).leader == 2


@pytest.mark.parametrize(("broker_id", "epoch_delta", "code"), [
    (2, -1, ErrorCode.STALE_BROKER_EPOCH),
    (9, 0, ErrorCode.BROKER_NOT_AVAILABLE),
])
def test_a_request_for_an_old_or_unknown_broker_is_refused(cluster: Cluster, broker_id: int, epoch_delta: int,
                                                          code: ErrorCode) -> None:
    store = three_brokers(cluster)
    before = [state(store, "orders", p) for p in range(3)]
    epoch = cluster.nodes[2].broker_epoch + epoch_delta
    with pytest.raises(ControlledShutdownError) as raised:
        cluster.controlled_shutdown(broker_id, epoch)
    assert raised.value.code == code
    assert [state(store, "orders", p) for p in range(3)] == before


def test_an_unknown_or_newer_broker_epoch_is_accepted(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    assert cluster.controlled_shutdown(2, -1) == []
    assert state(store, "orders", 0).leader == 3
    assert cluster.controlled_shutdown(3, cluster.nodes[3].broker_epoch + 1000) == []


def test_only_the_active_controller_answers(cluster: Cluster) -> None:
    three_brokers(cluster)
    with pytest.raises(ControlledShutdownError) as raised:
        cluster.controlled_shutdown(2, via=3)
    assert raised.value.code == ErrorCode.NOT_CONTROLLER


def test_the_controller_itself_can_shut_down_under_control(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    assert cluster.controlled_shutdown(1, via=1) == []
    assert state(store, "orders", 1) == PartitionState(2, 1, 1, (2, 3))


@given(replicas=st.lists(st.integers(0, 6), min_size=1, max_size=5, unique=True),
       isr=st.sets(st.integers(0, 6)), online=st.sets(st.integers(0, 6)))
def test_the_controlled_shutdown_leader_is_the_first_online_isr_replica(replicas: list[int], isr: set[int],
                                                                       online: set[int]) -> None:
    leader = controlled_shutdown_leader(replicas, sorted(isr), online.__contains__)
    eligible = [r for r in replicas if r in isr and r in online]
    assert leader == (eligible[0] if eligible else None)


# --------------------------------------------------------------------------- /admin/preferred_replica_election

def _request_preferred_election(store: MetadataStore, partitions: list[TopicPartition]) -> None:
    store.create(zk_paths.PREFERRED_REPLICA_ELECTION_PATH, zk_data.encode_preferred_replica_election(partitions))


def test_the_preferred_replica_election_znode_is_run_and_deleted(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    write_state(store, "orders", 0, PartitionState(3, 1, 1, (3, 1, 2)))
    write_state(store, "orders", 2, PartitionState(1, 1, 1, (1, 2)))  # preferred 3 is out of the ISR
    # The JSON kafka-preferred-replica-election.sh --zookeeper writes; unknown partitions are skipped.
    store.create(zk_paths.PREFERRED_REPLICA_ELECTION_PATH, json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1},
        {"topic": "orders", "partition": 2}, {"topic": "nosuch", "partition": 0}]}).encode())
    cluster.settle()
    assert store.exists(zk_paths.PREFERRED_REPLICA_ELECTION_PATH) is None
    assert state(store, "orders", 0) == PartitionState(2, 2, 1, (3, 1, 2))
    assert state(store, "orders", 1) == PartitionState(1, 0, 1, (1, 2, 3))  # already preferred: not rewritten
    assert state(store, "orders", 2) == PartitionState(1, 1, 1, (1, 2))
    # The tool can ask again, and is heard again.
    write_state(store, "orders", 0, PartitionState(3, 3, 1, (3, 2)))
    _request_preferred_election(store, [TopicPartition("orders", 0)])
    cluster.settle()
    assert store.exists(zk_paths.PREFERRED_REPLICA_ELECTION_PATH) is None
    assert state(store, "orders", 0) == PartitionState(2, 4, 1, (3, 2))


def test_an_unreadable_preferred_replica_election_znode_is_removed(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    store.create(zk_paths.PREFERRED_REPLICA_ELECTION_PATH, b"{not json")
    cluster.settle()
    assert store.exists(zk_paths.PREFERRED_REPLICA_ELECTION_PATH) is None


def test_a_pending_election_and_notifications_are_processed_by_the_next_controller(cluster: Cluster) -> None:
    three_brokers(cluster)
    deaf = cluster.nodes.pop(1)
    deaf.controller.shutdown()  # controller 1 hears nothing from now on, and is still controller
    store = cluster.sessions[3]
    write_state(store, "orders", 0, PartitionState(3, 1, 1, (3, 1, 2)))
    _request_preferred_election(store, [TopicPartition("orders", 0)])
    for _ in range(3):
        store.create(zk_paths.isr_change_prefix_path(),
                     zk_data.encode_isr_change_notification([TopicPartition("orders", 0)]), sequence=True)
    cluster.settle()
    assert store.exists(zk_paths.PREFERRED_REPLICA_ELECTION_PATH) is not None
    # Broker 1 goes: the next controller finds both waiting.
    deaf.shutdown()
    cluster.sessions.pop(1).close()
    cluster.settle()
    assert len([b for b, n in cluster.nodes.items() if n.controller.is_active]) == 1  # 2 or 3, who was first
    assert store.exists(zk_paths.PREFERRED_REPLICA_ELECTION_PATH) is None
    assert state(store, "orders", 0).leader == 2
    assert store.get_children(zk_paths.ISR_CHANGE_NOTIFICATION_PATH) == []


# ------------------------------------------------------------------------------------ /isr_change_notification

def test_isr_change_notifications_are_read_and_deleted_in_batches(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    # A leader shrank the ISR and announced it: the controller's cached state follows.
    write_state(store, "orders", 1, PartitionState(1, 0, 1, (1, 2)))
    written = []
    for n in range(DELETE_BATCH + 50):
        tp = TopicPartition("orders", 1) if n == 0 else TopicPartition("elsewhere", n)
        written.append(store.create(zk_paths.isr_change_prefix_path(),
                                    zk_data.encode_isr_change_notification([tp]), sequence=True))
    assert all(zk_paths.sequence_number(p.rsplit("/", 1)[1], zk_paths.ISR_CHANGE_PREFIX) >= 0 for p in written)
    cluster.settle()
    assert store.get_children(zk_paths.ISR_CHANGE_NOTIFICATION_PATH) == []
    cached = cluster.nodes[1].controller.context.partitions[TopicPartition("orders", 1)].state
    assert cached == PartitionState(1, 0, 1, (1, 2))


def test_an_unreadable_isr_change_notification_is_deleted_too(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    store.create(zk_paths.isr_change_prefix_path(), b"garbage", sequence=True)
    cluster.settle()
    assert store.get_children(zk_paths.ISR_CHANGE_NOTIFICATION_PATH) == []


def test_a_reassignment_onto_a_broker_in_controlled_shutdown_is_refused(cluster: Cluster) -> None:
    """Kafka's liveBrokerIds leaves out brokers shutting down: a replica added there would never catch up."""
    store = three_brokers(cluster)
    cluster.nodes[1].admin.create_topic(NewTopic("moving", assignments={0: [1, 2]}))
    cluster.settle()
    before = store.get("/brokers/topics/moving")[0]
    assert cluster.controlled_shutdown(3) == []
    tp = TopicPartition("moving", 0)
    reassignments = cluster.nodes[1].controller.reassignments
    code, message = reassignments.alter_partition_reassignments({tp: [2, 3]}, SETTLE_TIMEOUT)[tp]
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and message is not None and "[3]" in message
    assert store.get("/brokers/topics/moving")[0] == before
    # Brokers not shutting down may still be added.
    assert reassignments.alter_partition_reassignments({tp: [2, 1]}, SETTLE_TIMEOUT)[tp] == (ErrorCode.NONE, None)
