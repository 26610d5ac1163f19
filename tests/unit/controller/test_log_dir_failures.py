"""A broker's failed log dir reported to the controller (Kafka's /log_dir_event_notification), with several brokers
as sessions of one embedded store: the leaderships of the replicas in the failed dir move to other ISR members,
the broker leaves their ISRs, every broker's metadata lists the replicas offline, and a list of another broker
epoch (a session that is gone) counts for nothing."""

from __future__ import annotations

from sofakafka.controller import log_dir_failures, zk_data, zk_paths
from sofakafka.controller.context import ElectionType
from sofakafka.controller.store import MetadataStore
from sofakafka.controller.topics import NewTopic
from sofakafka.controller.zk_data import LogDirFailures, PartitionState, TopicPartition
from sofakafka.protocol.errors import ErrorCode

from . import test_controlled_shutdown
from .conftest import SETTLE_TIMEOUT
from .test_controlled_shutdown import Cluster, state

cluster = test_controlled_shutdown.cluster  # three brokers as sessions of one embedded store
ASSIGNMENT = {0: [2, 3, 1], 1: [1, 2, 3], 2: [3, 1, 2], 3: [2, 1, 3]}


def three_brokers(cluster: Cluster) -> MetadataStore:
    for broker_id in (1, 2, 3):
        cluster.start(broker_id)
    cluster.nodes[1].admin.create_topic(NewTopic("orders", assignments=ASSIGNMENT))
    cluster.settle()
    return cluster.sessions[1]


def fail(cluster: Cluster, broker_id: int, *partitions: int) -> None:
    cluster.nodes[broker_id].report_log_dir_failures(["/data/b"], [TopicPartition("orders", p) for p in partitions])
    cluster.settle()


def offline_replicas(cluster: Cluster, via: int) -> dict[int, tuple[int, ...]]:
    def listed() -> bool:
        return any(p.offline_replicas for p in cluster.nodes[via].cache.snapshot().topics["orders"].partitions.values())

    cluster.nodes[via].cache.wait_until(lambda _: listed(), SETTLE_TIMEOUT)
    return {p: m.offline_replicas for p, m in cluster.nodes[via].cache.snapshot().topics["orders"].partitions.items()}


def test_the_failed_dirs_leaderships_move_to_other_isr_members_and_the_broker_leaves_their_isrs(
        cluster: Cluster) -> None:
    store = three_brokers(cluster)
    fail(cluster, 2, 0, 2)  # broker 2 leads 0 (and 3, in a healthy dir) and follows 2
    assert state(store, "orders", 0) == PartitionState(3, 1, 1, (3, 1))  # the next online ISR member of [2, 3, 1]
    assert state(store, "orders", 2) == PartitionState(3, 1, 1, (3, 1))  # a follower leaves the ISR
    assert state(store, "orders", 3) == PartitionState(2, 0, 1, (2, 1, 3))  # its healthy dir: untouched
    assert state(store, "orders", 1) == PartitionState(1, 0, 1, (1, 2, 3))
    # Kafka's notification, then deleted by the controller; the list stays while the broker's session does.
    assert cluster.sessions[3].get_children(zk_paths.LOG_DIR_EVENT_NOTIFICATION_PATH) == []
    data, stat = store.get(zk_paths.log_dir_failures_path(2))
    assert stat.ephemeral_owner == cluster.sessions[2].session_id
    assert LogDirFailures.decode(data) == LogDirFailures(
        cluster.nodes[2].broker_epoch, ("/data/b",), frozenset({TopicPartition("orders", 0), TopicPartition("orders", 2)}))
    # Every broker's metadata names the replicas offline.
    assert offline_replicas(cluster, 3) == {0: (2,), 1: (), 2: (2,), 3: ()}
    # Elections of any kind leave them out: the preferred replica of partition 0 is 2.
    results = cluster.nodes[1].controller.elect_leaders([TopicPartition("orders", 0)], ElectionType.PREFERRED,
                                                         SETTLE_TIMEOUT)
    assert results[TopicPartition("orders", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_with_no_other_isr_member_the_partition_keeps_its_last_isr_with_no_leader(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    cluster.nodes[1].admin.create_topic(NewTopic("single", assignments={0: [2]}))
    cluster.settle()
    cluster.nodes[2].report_log_dir_failures(["/data/b"], [TopicPartition("single", 0)])
    cluster.settle()
    assert state(store, "single", 0) == PartitionState(-1, 1, 1, (2,))  # Kafka's OfflineReplica: leader -1
    # The broker restarts with the dir back: a new registration, no list, and it is elected again.
    cluster.kill(2)
    cluster.start(2)
    cluster.settle()
    assert state(store, "single", 0).leader == 2


def test_a_list_of_another_broker_epoch_counts_for_nothing(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    stale = LogDirFailures(cluster.nodes[2].broker_epoch - 1, ("/data/b",), frozenset({TopicPartition("orders", 0)}))
    store.ensure_path(zk_paths.LOG_DIR_FAILURES_PATH)
    store.create(zk_paths.log_dir_failures_path(2), stale.encode())
    store.create(zk_paths.log_dir_event_prefix_path(), zk_data.encode_log_dir_event(2), sequence=True)
    cluster.settle()
    assert state(store, "orders", 0) == PartitionState(2, 0, 1, (2, 3, 1))
    assert all(not p.offline_replicas for p in cluster.nodes[3].cache.snapshot().topics["orders"].partitions.values())


def test_a_new_controller_reads_every_live_brokers_list(cluster: Cluster) -> None:
    three_brokers(cluster)
    assert cluster.nodes[1].controller.is_active
    # Written with no controller to see it: the controller's session is gone, and the list's notification too.
    cluster.nodes[1].controller.shutdown()
    log_dir_failures.publish(cluster.sessions[2], 2, cluster.nodes[2].broker_epoch, ["/data/b"],
                             [TopicPartition("orders", 3)])
    for p in cluster.sessions[3].get_children(zk_paths.LOG_DIR_EVENT_NOTIFICATION_PATH):
        cluster.sessions[3].delete(f"{zk_paths.LOG_DIR_EVENT_NOTIFICATION_PATH}/{p}")
    cluster.kill(1)
    cluster.settle()
    assert state(cluster.sessions[3], "orders", 3).leader != 2
    assert 2 not in state(cluster.sessions[3], "orders", 3).isr


def test_the_list_goes_with_the_brokers_session_and_its_restart_clears_it(cluster: Cluster) -> None:
    store = three_brokers(cluster)
    fail(cluster, 2, 0)
    assert offline_replicas(cluster, 1)[0] == (2,)
    cluster.kill(2)
    cluster.settle()
    assert store.exists(zk_paths.log_dir_failures_path(2)) is None
    cluster.start(2)
    cluster.settle()
    snap = cluster.nodes[1].cache.snapshot()
    assert all(not p.offline_replicas for p in snap.topics["orders"].partitions.values())
