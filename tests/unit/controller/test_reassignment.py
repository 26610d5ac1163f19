"""Partition reassignment on real embedded stores: several controllers on one tree, the ISR moved by hand where
a leader would move it (no broker processes here; tests/cluster/test_reassignment.py has them)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sofakafka.controller.context import ElectionType
from sofakafka.controller.reassignment import OngoingReassignment
from sofakafka.controller.store import MetadataStore
from sofakafka.controller.topics import NewTopic
from sofakafka.controller.zk_data import PartitionState, TopicAssignment, TopicPartition, encode_reassignment
from sofakafka.protocol.errors import ErrorCode, KafkaError

from .conftest import read_json
from .test_controller import Cluster, state

TP = TopicPartition("moving", 0)
TIMEOUT = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "meta")
    yield c
    c.close()


def started(cluster: Cluster, brokers: int, replicas: list[int]) -> MetadataStore:
    for broker_id in range(1, brokers + 1):
        cluster.start(broker_id)
    cluster.nodes[1].admin.create_topic(NewTopic("moving", assignments={0: replicas, 1: [2, 1]}))
    cluster.settle()
    return cluster.nodes[1].store


def catch_up(cluster: Cluster, store: MetadataStore, isr: list[int]) -> None:
    """What the leader does when followers reach its high watermark: rewrite the ISR, same leader and epoch."""
    path = "/brokers/topics/moving/partitions/0/state"
    data, stat = store.get(path)
    old = PartitionState.decode(data)
    store.set(path, PartitionState(old.leader, old.leader_epoch, old.controller_epoch, tuple(isr)).encode(),
              stat.version)
    cluster.settle()


def alter(cluster: Cluster, broker: int, target: list[int] | None, tp: TopicPartition = TP) -> tuple[ErrorCode, str | None]:
    return cluster.nodes[broker].controller.reassignments.alter_partition_reassignments({tp: target}, TIMEOUT)[tp]


def test_reassignment_adds_then_completes_when_targets_are_in_sync(cluster: Cluster) -> None:
    store = started(cluster, 3, [1, 2])
    before = state(store, "moving", 0)
    assert alter(cluster, 1, [2, 3]) == (ErrorCode.NONE, None)
    cluster.settle()
    # Kafka's topic znode version 2: replicas TRS + (ORS - TRS), adding and removing per partition.
    assert read_json(store, "/brokers/topics/moving") == {
        "version": 2, "partitions": {"0": [2, 3, 1], "1": [2, 1]},
        "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [1]}}
    moving = state(store, "moving", 0)
    assert (moving.leader, moving.leader_epoch, moving.isr) == (1, before.leader_epoch + 1, (1, 2))
    listed = cluster.nodes[1].controller.reassignments.list_partition_reassignments(None, TIMEOUT)
    assert listed == {TP: OngoingReassignment((2, 3, 1), (3,), (1,))}
    assert cluster.nodes[1].controller.reassignments.list_partition_reassignments([TP, TopicPartition("moving", 1),
                                                           TopicPartition("nope", 0)], TIMEOUT) == listed

    catch_up(cluster, store, [1, 2])  # not yet: 3 is missing
    assert read_json(store, "/brokers/topics/moving")["adding_replicas"] == {"0": [3]}
    catch_up(cluster, store, [1, 2, 3])
    assert read_json(store, "/brokers/topics/moving") == {
        "version": 2, "partitions": {"0": [2, 3], "1": [2, 1]}, "adding_replicas": {}, "removing_replicas": {}}
    # The leader was leaving: the first target replica in the ISR leads, and the removed one left the ISR.
    assert state(store, "moving", 0) == PartitionState(2, before.leader_epoch + 2, 1, (2, 3))
    assert cluster.nodes[1].controller.reassignments.list_partition_reassignments(None, TIMEOUT) == {}
    snap = cluster.nodes[3].cache
    assert snap.wait_until(lambda s: (p := s.partition("moving", 0)) is not None and p.replicas == (2, 3), TIMEOUT)


def test_a_leader_in_the_target_keeps_leading(cluster: Cluster) -> None:
    store = started(cluster, 3, [1, 2])
    assert alter(cluster, 1, [1, 3]) == (ErrorCode.NONE, None)
    cluster.settle()
    catch_up(cluster, store, [1, 2, 3])
    after = state(store, "moving", 0)
    assert (after.leader, after.isr, after.leader_epoch) == (1, (1, 3), 2)
    assert read_json(store, "/brokers/topics/moving")["partitions"]["0"] == [1, 3]


def test_invalid_requests_are_refused_as_kafka_refuses_them(cluster: Cluster) -> None:
    store = started(cluster, 3, [1, 2])
    before = store.get("/brokers/topics/moving")
    assert alter(cluster, 1, []) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Empty replica list specified in partition reassignment.")
    assert alter(cluster, 1, [2, 2])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert alter(cluster, 1, [2, -1])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    code, message = alter(cluster, 1, [2, 7])
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and message is not None and "not alive" in message
    assert alter(cluster, 1, [2, 3], TopicPartition("moving", 5)) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                                      "The partition does not exist.")
    assert alter(cluster, 1, [2, 3], TopicPartition("nope", 0))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert alter(cluster, 1, None) == (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
    with pytest.raises(KafkaError) as refused:
        alter(cluster, 2, [2, 3])
    assert refused.value.code == ErrorCode.NOT_CONTROLLER
    with pytest.raises(KafkaError):
        cluster.nodes[3].controller.reassignments.list_partition_reassignments(None, TIMEOUT)
    assert store.get("/brokers/topics/moving") == before  # nothing written
    # Replicas already in the assignment need not be alive: only the added ones do.
    cluster.kill(3)
    cluster.settle()
    assert alter(cluster, 1, [2]) == (ErrorCode.NONE, None)


def test_cancelling_reverts_to_the_original_replicas(cluster: Cluster) -> None:
    store = started(cluster, 4, [1, 2])
    assert alter(cluster, 1, [3, 4]) == (ErrorCode.NONE, None)
    cluster.settle()
    catch_up(cluster, store, [1, 2, 3])  # 3 joined the ISR, 4 is still copying
    epoch = state(store, "moving", 0).leader_epoch
    assert alter(cluster, 1, None) == (ErrorCode.NONE, None)
    cluster.settle()
    assert read_json(store, "/brokers/topics/moving") == {
        "version": 2, "partitions": {"0": [1, 2], "1": [2, 1]}, "adding_replicas": {}, "removing_replicas": {}}
    # The replica that was being added leaves the ISR with the assignment, under a new leader epoch.
    assert state(store, "moving", 0) == PartitionState(1, epoch + 1, 1, (1, 2))
    assert cluster.nodes[1].controller.reassignments.list_partition_reassignments(None, TIMEOUT) == {}
    assert alter(cluster, 1, None) == (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)


def test_a_lagging_leaving_replica_does_not_hold_the_reassignment(cluster: Cluster) -> None:
    store = started(cluster, 3, [1, 2])
    assert alter(cluster, 1, [3]) == (ErrorCode.NONE, None)
    cluster.settle()
    catch_up(cluster, store, [1, 3])  # 2 fell out of the ISR; only the targets count
    assert read_json(store, "/brokers/topics/moving")["partitions"]["0"] == [3]
    assert state(store, "moving", 0).leader == 3 and state(store, "moving", 0).isr == (3,)


def test_a_new_reassignment_replaces_the_running_one_from_the_original_replicas(cluster: Cluster) -> None:
    store = started(cluster, 4, [1, 2])
    assert alter(cluster, 1, [3, 4]) == (ErrorCode.NONE, None)
    cluster.settle()
    assert read_json(store, "/brokers/topics/moving")["partitions"]["0"] == [3, 4, 1, 2]
    catch_up(cluster, store, [1, 2, 3])  # 3 joined, 4 still copying
    assert alter(cluster, 1, [2, 4]) == (ErrorCode.NONE, None)
    cluster.settle()
    # Measured from ORS [1, 2]: 3 was only being added, so it goes at once, out of the ISR too.
    assert read_json(store, "/brokers/topics/moving") == {
        "version": 2, "partitions": {"0": [2, 4, 1], "1": [2, 1]},
        "adding_replicas": {"0": [4]}, "removing_replicas": {"0": [1]}}
    assert state(store, "moving", 0).isr == (1, 2)
    catch_up(cluster, store, [1, 2, 4])
    assert read_json(store, "/brokers/topics/moving")["partitions"]["0"] == [2, 4]
    assert state(store, "moving", 0).isr == (2, 4)


def test_a_new_controller_resumes_reassignments_from_the_topic_znode(cluster: Cluster) -> None:
    started(cluster, 3, [1, 2])
    assert alter(cluster, 1, [2, 3]) == (ErrorCode.NONE, None)
    cluster.settle()
    cluster.kill(1)  # the controller and a leaving replica
    cluster.settle()
    [active] = cluster.active()
    store = cluster.nodes[active].store
    assert cluster.nodes[active].controller.reassignments.list_partition_reassignments(None, TIMEOUT) == {
        TP: OngoingReassignment((2, 3, 1), (3,), (1,))}
    catch_up(cluster, store, [2, 3])
    assert read_json(store, "/brokers/topics/moving")["partitions"]["0"] == [2, 3]
    assert read_json(store, "/brokers/topics/moving")["adding_replicas"] == {}
    assert state(store, "moving", 0).isr == (2, 3)


def test_the_legacy_znode_starts_reassignments_and_is_deleted_when_they_complete(cluster: Cluster) -> None:
    store = started(cluster, 3, [1, 2])
    store.create("/admin/reassign_partitions",
                 encode_reassignment({TP: [2, 3], TopicPartition("moving", 1): [1], TopicPartition("gone", 0): [1]}),
                 makepath=True)
    cluster.settle()
    # The unknown partition is dropped at once; 1 (whose target is in sync) completed at once; 0 is moving.
    assert json.loads(store.get("/admin/reassign_partitions")[0]) == {
        "version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3]}]}
    assert read_json(store, "/brokers/topics/moving")["adding_replicas"] == {"0": [3]}
    catch_up(cluster, store, [1, 2, 3])
    assert store.exists("/admin/reassign_partitions") is None
    assert read_json(store, "/brokers/topics/moving")["partitions"]["0"] == [2, 3]
    # Watched again: a second run of the tool is seen.
    store.create("/admin/reassign_partitions", encode_reassignment({TP: [3, 1]}))
    cluster.settle()
    assert read_json(store, "/brokers/topics/moving")["partitions"]["0"] == [3, 1, 2]


def test_the_api_takes_a_partition_over_from_the_legacy_znode(cluster: Cluster) -> None:
    store = started(cluster, 3, [1, 2])
    store.create("/admin/reassign_partitions", encode_reassignment({TP: [2, 3]}), makepath=True)
    cluster.settle()
    assert alter(cluster, 1, [1, 3]) == (ErrorCode.NONE, None)
    cluster.settle()
    assert store.exists("/admin/reassign_partitions") is None
    assert read_json(store, "/brokers/topics/moving")["partitions"]["0"] == [1, 3, 2]


def test_deleting_a_moving_topic_deletes_it_at_once_with_the_replicas_being_added(cluster: Cluster) -> None:
    """Kafka 2.6 starts a deletion at once, a partition of the topic moving or not (its 'reassignment in progress'
    ineligibility is set before the topic is queued, so it never holds on the DeleteTopics path): the move goes
    with the topic. Waiting for the move instead needs the topic replicated until then, and a move can wait for a
    broker that never comes back. Every replica of the moving assignment is asked to delete itself."""
    store = started(cluster, 3, [1, 2])
    asked: list[tuple[int, list[TopicPartition]]] = []

    class Sender:
        def stop_replicas(self, broker_id: int, partitions: Sequence[TopicPartition]) -> None:
            asked.append((broker_id, sorted(partitions)))
            cluster.nodes[1].controller.replica_deletion_done(broker_id, dict.fromkeys(partitions, ErrorCode.NONE))

    cluster.nodes[1].controller.set_stop_replica_sender(Sender())
    assert alter(cluster, 1, [2, 3]) == (ErrorCode.NONE, None)
    cluster.settle()
    store.create("/admin/delete_topics/moving", makepath=True)
    cluster.settle()
    assert store.exists("/brokers/topics/moving") is None and store.exists("/admin/delete_topics/moving") is None
    # Partition 0 moving from [1, 2] to [2, 3]: broker 3, being added, is asked too; partition 1 is on [2, 1].
    assert sorted(asked) == [(1, [TopicPartition("moving", 0), TopicPartition("moving", 1)]),
                             (2, [TopicPartition("moving", 0), TopicPartition("moving", 1)]),
                             (3, [TopicPartition("moving", 0)])]
    assert cluster.nodes[1].controller.reassignments.list_partition_reassignments(None, TIMEOUT) == {}


def test_a_topic_being_deleted_refuses_moves_elections_and_new_partitions_as_kafka_does(cluster: Cluster) -> None:
    """Codes checked against Apache Kafka 2.6 (tests/cluster/test_operation_pairs.py asks both): a move started,
    replaced or cancelled on a topic being deleted is UNKNOWN_TOPIC_OR_PARTITION, an election INVALID_TOPIC_EXCEPTION,
    CreatePartitions INVALID_TOPIC_EXCEPTION; nothing is written. The move that was running is abandoned with the
    topic (the deletion waits here for broker 3, which is down)."""
    store = started(cluster, 4, [1, 2])
    assert alter(cluster, 1, [2, 3]) == (ErrorCode.NONE, None)
    cluster.settle()
    cluster.kill(3)
    cluster.settle()

    class Sender:  # replicas on live brokers are deleted at once; broker 3's wait for its return
        def stop_replicas(self, broker_id: int, partitions: Sequence[TopicPartition]) -> None:
            cluster.nodes[1].controller.replica_deletion_done(broker_id, dict.fromkeys(partitions, ErrorCode.NONE))

    cluster.nodes[1].controller.set_stop_replica_sender(Sender())
    store.create("/admin/delete_topics/moving", makepath=True)
    cluster.settle()
    before = store.get("/brokers/topics/moving")
    assert alter(cluster, 1, [2, 4]) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    assert alter(cluster, 1, None) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    assert alter(cluster, 1, [1], TopicPartition("moving", 1)) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                                   "The partition does not exist.")
    assert alter(cluster, 1, None, TopicPartition("moving", 1)) == (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
    elected = cluster.nodes[1].controller.elect_leaders([TP], ElectionType.PREFERRED, TIMEOUT)
    assert elected == {TP: (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")}
    with pytest.raises(KafkaError) as refused:
        cluster.nodes[1].admin.create_partitions("moving", 3)
    assert refused.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert store.get("/brokers/topics/moving") == before
    # Still listed, as in Kafka, until the topic is gone; broker 3's return completes the deletion.
    assert TP in cluster.nodes[1].controller.reassignments.list_partition_reassignments(None, TIMEOUT)
    cluster.start(3)
    cluster.settle()
    assert store.exists("/brokers/topics/moving") is None
    assert cluster.nodes[1].controller.reassignments.list_partition_reassignments(None, TIMEOUT) == {}


def test_create_partitions_while_a_partition_moves_is_refused_as_kafka_does(cluster: Cluster) -> None:
    store = started(cluster, 3, [1, 2])
    assert alter(cluster, 1, [2, 3]) == (ErrorCode.NONE, None)
    cluster.settle()
    before = store.get("/brokers/topics/moving")
    with pytest.raises(KafkaError) as refused:
        cluster.nodes[1].admin.create_partitions("moving", 3)
    assert (refused.value.code, refused.value.message) == (
        ErrorCode.REASSIGNMENT_IN_PROGRESS, "A partition reassignment is in progress for the topic 'moving'.")
    assert store.get("/brokers/topics/moving") == before
    catch_up(cluster, store, [1, 2, 3])
    assert sorted(cluster.nodes[1].admin.create_partitions("moving", 3)) == [2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True),
       st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True), min_size=1, max_size=4))
def test_reassign_to_is_measured_from_the_original_replicas(origin: list[int], targets: list[list[int]]) -> None:
    current = OngoingReassignment(tuple(origin), (), ())
    for target in targets:
        current = current.reassign_to(target)
        assert sorted(current.origin_replicas) == sorted(origin)  # as a set: Kafka keeps the full list's order
        assert current.target_replicas == target
        assert list(current.replicas[: len(target)]) == target
        assert set(current.replicas) == set(origin) | set(target)
        assert set(current.adding_replicas) == set(target) - set(origin)
        assert set(current.removing_replicas) == set(origin) - set(target)
    encoded = TopicAssignment({0: current.replicas}, {0: current.adding_replicas}, {0: current.removing_replicas})
    decoded = TopicAssignment.decode("t", encoded.encode())
    assert tuple(decoded.adding_replicas.get(0, ())) == current.adding_replicas


def test_a_listed_reassignment_in_flight_stays_listed_when_its_new_broker_dies(cluster: Cluster) -> None:
    """Re-reading the legacy znode (any change to it fires the watch) must not re-validate what already runs:
    broker 3 being down now does not cancel the move to it, which completes when 3 returns."""
    store = started(cluster, 3, [1, 2])
    entry = encode_reassignment({TP: [2, 3]})
    store.create("/admin/reassign_partitions", entry, makepath=True)
    cluster.settle()
    cluster.kill(3)
    cluster.settle()
    store.set("/admin/reassign_partitions", entry)
    cluster.settle()
    assert store.get("/admin/reassign_partitions")[0] == entry
    assert cluster.nodes[1].controller.reassignments.list_partition_reassignments(None, TIMEOUT) == {
        TP: OngoingReassignment((2, 3, 1), (3,), (1,))}
    cluster.start(3)
    catch_up(cluster, store, [1, 2, 3])
    assert store.exists("/admin/reassign_partitions") is None
    assert read_json(store, "/brokers/topics/moving")["partitions"]["0"] == [2, 3]


class Recorder:
    """A StopReplica sender that records who was asked to delete what and answers NONE at once."""

    def __init__(self, cluster: Cluster, controller: int = 1) -> None:
        self.cluster, self.controller = cluster, controller
        self.asked: set[tuple[int, TopicPartition]] = set()

    def stop_replicas(self, broker_id: int, partitions: Sequence[TopicPartition]) -> None:
        self.asked |= {(broker_id, tp) for tp in partitions}
        self.cluster.nodes[self.controller].controller.replica_deletion_done(
            broker_id, dict.fromkeys(partitions, ErrorCode.NONE))


def test_a_deleted_topic_leaves_the_legacy_reassignment_znode(cluster: Cluster) -> None:
    """A move started through /admin/reassign_partitions goes with its topic, and so does its entry: nothing else
    would ever remove an entry that can no longer complete (the znode would stay for ever)."""
    store = started(cluster, 3, [1, 2])
    store.create("/admin/reassign_partitions", encode_reassignment({TP: [2, 3]}), makepath=True)
    cluster.settle()
    assert read_json(store, "/brokers/topics/moving")["adding_replicas"] == {"0": [3]}
    store.create("/admin/delete_topics/moving", makepath=True)
    cluster.settle()
    assert store.exists("/brokers/topics/moving") is None
    assert store.exists("/admin/reassign_partitions") is None


def test_a_move_of_a_topic_being_deleted_is_not_completed_when_its_target_catches_up(cluster: Cluster) -> None:
    """The move is abandoned with the topic: its target catching up (the ISR a leader wrote) does not rewrite the
    topic znode of a topic being deleted; the deletion, waiting for broker 2 here, completes when 2 returns."""
    store = started(cluster, 3, [1, 2])
    assert alter(cluster, 1, [1, 3]) == (ErrorCode.NONE, None)
    cluster.settle()
    cluster.kill(2)
    cluster.settle()
    store.create("/admin/delete_topics/moving", makepath=True)
    cluster.settle()
    moving = store.get("/brokers/topics/moving")[0]
    assert json.loads(moving)["adding_replicas"] == {"0": [3]}
    catch_up(cluster, store, [1, 3])
    assert store.get("/brokers/topics/moving")[0] == moving
    cluster.start(2)
    cluster.settle()
    assert store.exists("/brokers/topics/moving") is None
    assert cluster.nodes[1].controller.reassignments.list_partition_reassignments(None, TIMEOUT) == {}


def test_partitions_added_in_a_race_with_the_deletion_marker_are_deleted_too(cluster: Cluster) -> None:
    """A CreatePartitions that passed its check just before the marker was written adds a partition to a topic
    being deleted: its replicas are asked to delete themselves with the rest, and none of its znodes stays."""
    store = started(cluster, 3, [1, 2])
    recorder = Recorder(cluster)
    cluster.nodes[1].controller.set_stop_replica_sender(recorder)
    cluster.kill(2)  # the deletion waits for broker 2's replicas: time for the racing write to land
    cluster.settle()
    store.create("/admin/delete_topics/moving", makepath=True)
    cluster.settle()
    assert store.exists("/brokers/topics/moving") is not None
    data, stat = store.get("/brokers/topics/moving")
    grown = TopicAssignment.decode("moving", data)
    store.set("/brokers/topics/moving",
              TopicAssignment({**grown.partitions, 2: [3, 1]}).encode(), stat.version)
    cluster.settle()
    cluster.start(2)
    cluster.settle()
    assert store.exists("/brokers/topics/moving") is None and store.exists("/admin/delete_topics/moving") is None
    added = TopicPartition("moving", 2)
    assert {(1, added), (3, added)} <= recorder.asked
    # No leader was elected for the partition that slipped in, and nothing of it is left.
    assert store.exists("/brokers/topics/moving/partitions") is None


def test_a_new_controller_elects_no_leader_for_a_topic_being_deleted(cluster: Cluster) -> None:
    """Kafka's controller starts its deletion manager before its partition state machine, and the latter skips
    topics queued for deletion: a topic whose leader died with the old controller gets no new leader."""
    for broker_id in (1, 2, 3):
        cluster.start(broker_id)
    cluster.nodes[1].admin.create_topic(NewTopic("doomed", assignments={0: [1, 2, 3]}))
    cluster.settle()
    store = cluster.nodes[2].store
    cluster.kill(3)  # the deletion waits for broker 3
    cluster.settle()
    store.create("/admin/delete_topics/doomed", makepath=True)
    cluster.settle()
    before = state(store, "doomed", 0)
    assert before.leader == 1
    cluster.kill(1)  # the leader and the controller
    cluster.settle()
    assert cluster.active() == [2]
    assert state(store, "doomed", 0).leader != 2
    cluster.start(1)
    cluster.start(3)
    cluster.settle()
    assert store.exists("/brokers/topics/doomed") is None
