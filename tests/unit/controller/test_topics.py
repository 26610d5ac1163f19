"""Topic administration on a real embedded store with a running controller: creation, validation in Kafka's
order and codes, deletion, added partitions, config changes, and the znodes as a 2.6 broker writes them."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

import pytest

from sofakafka.controller.embedded import EmbeddedMetadataStore
from sofakafka.controller.node import ControllerNode
from sofakafka.controller.registration import make_registration, register_broker
from sofakafka.controller.topics import NewTopic, has_collision_chars
from sofakafka.controller.zk_data import TopicPartition
from sofakafka.protocol.errors import ErrorCode, KafkaError

from .conftest import SETTLE_TIMEOUT, plaintext, read_json, settle


def error_of(fn: object, *args: object, **kwargs: object) -> KafkaError:
    assert callable(fn)
    with pytest.raises(KafkaError) as info:
        fn(*args, **kwargs)
    return info.value


def leaders_elected(node: ControllerNode, topic: str, count: int) -> bool:
    def check(snap: object) -> bool:
        meta = node.cache.snapshot().topics.get(topic)
        return meta is not None and len(meta.partitions) == count and all(p.leader >= 0 for p in meta.partitions.values())

    return node.cache.wait_until(check, SETTLE_TIMEOUT)


# ------------------------------------------------------------------------------------------- creation


def test_created_topic_has_kafkas_znodes(node: ControllerNode) -> None:
    created = node.admin.create_topic(NewTopic("orders", 3, 1, configs={"retention.ms": "1000"}))
    assert (created.num_partitions, created.replication_factor) == (3, 1)
    assert leaders_elected(node, "orders", 3)
    settle(node)
    store = node.store
    data, _ = store.get("/brokers/topics/orders")
    assert data == b'{"version":2,"partitions":{"0":[1],"1":[1],"2":[1]},"adding_replicas":{},"removing_replicas":{}}'
    assert read_json(store, "/config/topics/orders") == {"version": 1, "config": {"retention.ms": "1000"}}
    for p in range(3):
        state, stat = store.get(f"/brokers/topics/orders/partitions/{p}/state")
        assert json.loads(state) == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}
        assert stat.version == 0
        assert store.get(f"/brokers/topics/orders/partitions/{p}")[0] == b""
    assert store.get("/brokers/topics/orders/partitions")[0] == b""
    # Creation is not announced through /config/changes, as in Kafka.
    assert store.get_children("/config/changes") == []


def test_topic_without_overrides_still_gets_a_config_znode(node: ControllerNode) -> None:
    node.admin.create_topic(NewTopic("plain"))
    assert read_json(node.store, "/config/topics/plain") == {"version": 1, "config": {}}


def test_defaults_apply_when_partitions_and_rf_are_unset(node: ControllerNode) -> None:
    node.admin.default_num_partitions = 4
    created = node.admin.create_topic(NewTopic("defaults"))
    assert created.num_partitions == 4
    assert created.replication_factor == 1
    assert leaders_elected(node, "defaults", 4)


def test_validate_only_writes_nothing(node: ControllerNode) -> None:
    created = node.admin.create_topic(NewTopic("dry", 2, 1, configs={"cleanup.policy": "compact"}), validate_only=True)
    assert created.assignment == {0: [1], 1: [1]}
    assert node.store.exists("/brokers/topics/dry") is None
    assert node.store.exists("/config/topics/dry") is None


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a" * 250, "with space", "slash/name", "ünïcode", "star*", "colon:"],
)
def test_illegal_topic_names_are_invalid_topic(node: ControllerNode, name: str) -> None:
    err = error_of(node.admin.create_topic, NewTopic(name, 1, 1))
    assert err.code == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize("name", ["a" * 249, "Az09._-", "...a", "-", "_"])
def test_legal_topic_names_are_created(node: ControllerNode, name: str) -> None:
    node.admin.create_topic(NewTopic(name, 1, 1))
    assert node.admin.topic_exists(name)


def test_existing_topic_is_topic_already_exists(node: ControllerNode) -> None:
    node.admin.create_topic(NewTopic("dup", 1, 1))
    assert error_of(node.admin.create_topic, NewTopic("dup", 1, 1)).code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_names_differing_only_in_dot_and_underscore_collide(node: ControllerNode) -> None:
    node.admin.create_topic(NewTopic("metrics.cpu", 1, 1))
    err = error_of(node.admin.create_topic, NewTopic("metrics_cpu", 1, 1))
    assert err.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "collides with existing topics: metrics.cpu" in str(err)
    assert has_collision_chars("metrics_cpu") and not has_collision_chars("metrics-cpu")


@pytest.mark.parametrize(
    ("partitions", "rf", "code"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS),
        (-2, 1, ErrorCode.INVALID_PARTITIONS),
        (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
        (1, 2, ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_bad_counts_get_kafkas_codes(node: ControllerNode, partitions: int, rf: int, code: ErrorCode) -> None:
    assert error_of(node.admin.create_topic, NewTopic("counts", partitions, rf)).code == code
    assert not node.admin.topic_exists("counts")


@pytest.mark.parametrize(("partitions", "refused"), [(9, False), (10, False), (11, True), (2**31 - 1, True)])
def test_partition_counts_above_the_limit_are_invalid_partitions(node: ControllerNode, partitions: int,
                                                                  refused: bool) -> None:
    """sofakafka.max.partitions.per.topic, at its edge: Kafka would try to assign 2^31 - 1 partitions."""
    node.admin.max_partitions_per_topic = 10
    try:
        if refused:
            err = error_of(node.admin.create_topic, NewTopic("many", partitions, 1), True)
            assert err.code == ErrorCode.INVALID_PARTITIONS and "sofakafka.max.partitions.per.topic" in err.message
        else:
            assert node.admin.create_topic(NewTopic("many", partitions, 1), True).num_partitions == partitions
        node.admin.create_topic(NewTopic("grown", 1, 1))
        if refused:
            err = error_of(node.admin.create_partitions, "grown", partitions, None, True)
            assert err.code == ErrorCode.INVALID_PARTITIONS
        else:
            assert len(node.admin.create_partitions("grown", partitions, None, True)) == partitions - 1
    finally:
        node.admin.max_partitions_per_topic = 200_000


def test_placement_errors_come_before_name_errors_as_in_kafka(node: ControllerNode) -> None:
    err = error_of(node.admin.create_topic, NewTopic("bad name", 1, 3))
    assert err.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_counts_and_assignments_together_are_invalid_request(node: ControllerNode) -> None:
    err = error_of(node.admin.create_topic, NewTopic("both", 1, -1, assignments={0: [1]}))
    assert err.code == ErrorCode.INVALID_REQUEST


def test_null_config_values_are_invalid_request(node: ControllerNode) -> None:
    err = error_of(node.admin.create_topic, NewTopic("nulls", 1, 1, configs={"retention.ms": None}))
    assert err.code == ErrorCode.INVALID_REQUEST
    assert "retention.ms" in str(err)


@pytest.mark.parametrize(
    ("configs", "key"),
    [
        ({"no.such.config": "1"}, "no.such.config"),
        ({"retention.ms": "soon"}, "retention.ms"),
        ({"cleanup.policy": "shred"}, "cleanup.policy"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms"),
    ],
)
def test_bad_topic_configs_are_invalid_config_naming_the_key(node: ControllerNode, configs: dict[str, str], key: str) -> None:
    err = error_of(node.admin.create_topic, NewTopic("configs", 1, 1, configs=configs))
    assert err.code == ErrorCode.INVALID_CONFIG
    assert key in str(err)
    assert not node.admin.topic_exists("configs")


@pytest.fixture
def second_broker(node: ControllerNode) -> ControllerNode:
    """Broker 2 registered through its own session on the same tree, so assignments can span two brokers."""
    session = node.store.server.connect()  # type: ignore[attr-defined]
    register_broker(session, make_registration(2, plaintext(9093)))
    settle(node)
    return node


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        ({0: [1], 1: [1, 2]}, "same number of replicas"),
        ({0: [1, 1]}, "Duplicate replica assignment"),
        ({0: [1], 2: [1]}, "consecutive 0-based"),
        ({1: [1]}, "consecutive 0-based"),
        ({0: []}, "replication factor of 0"),
        ({0: [1, 7]}, "Unknown broker(s) in replica assignment: 7."),
    ],
)
def test_bad_explicit_assignments_are_invalid_replica_assignment(
    second_broker: ControllerNode, assignments: dict[int, list[int]], message: str
) -> None:
    err = error_of(second_broker.admin.create_topic, NewTopic("explicit", assignments=assignments))
    assert err.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert message in str(err)


def test_explicit_assignment_is_written_as_given_and_first_replica_leads(second_broker: ControllerNode) -> None:
    node = second_broker
    node.admin.create_topic(NewTopic("explicit", assignments={0: [2, 1], 1: [1, 2]}))
    assert leaders_elected(node, "explicit", 2)
    settle(node)
    assert read_json(node.store, "/brokers/topics/explicit")["partitions"] == {"0": [2, 1], "1": [1, 2]}
    snap = node.cache.snapshot()
    assert snap.partition("explicit", 0) is not None
    assert (snap.partition("explicit", 0).leader, snap.partition("explicit", 0).isr) == (2, (2, 1))  # type: ignore[union-attr]
    assert (snap.partition("explicit", 1).leader, snap.partition("explicit", 1).isr) == (1, (1, 2))  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------- deletion


def test_deleting_an_unknown_topic_is_unknown_topic(node: ControllerNode) -> None:
    assert error_of(node.admin.delete_topic, "ghost").code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_single_broker_deletion_removes_every_znode_of_the_topic(node: ControllerNode) -> None:
    node.admin.create_topic(NewTopic("doomed", 2, 1, configs={"retention.ms": "5"}))
    assert leaders_elected(node, "doomed", 2)
    node.admin.delete_topic("doomed")
    node.admin.delete_topic("doomed")  # a second request waits for the same deletion, no error
    settle(node)
    store = node.store
    assert store.exists("/brokers/topics/doomed") is None
    assert store.exists("/config/topics/doomed") is None
    assert store.get_children("/admin/delete_topics") == []
    assert node.cache.wait_until(lambda s: "doomed" not in s.topics and "doomed" not in s.deleting, SETTLE_TIMEOUT)
    # The name is free again.
    node.admin.create_topic(NewTopic("doomed", 1, 1))
    assert leaders_elected(node, "doomed", 1)
    assert node.store.get("/brokers/topics/doomed/partitions/0/state")[1].version == 0


class RecordingSender:
    """Stands in for the brokers' StopReplica handling: records requests, answers when told to."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, list[TopicPartition]]] = []
        self.sent = threading.Event()

    def stop_replicas(self, broker_id: int, partitions: Sequence[TopicPartition]) -> None:
        self.requests.append((broker_id, list(partitions)))
        self.sent.set()


def test_deletion_waits_for_every_replica_to_be_stopped(node: ControllerNode) -> None:
    sender = RecordingSender()
    node.controller.set_stop_replica_sender(sender)
    node.admin.create_topic(NewTopic("slow", 2, 1))
    assert leaders_elected(node, "slow", 2)
    node.admin.delete_topic("slow")
    settle(node)
    assert sender.requests == [(1, [TopicPartition("slow", 0), TopicPartition("slow", 1)])]
    # Until the broker reports back the topic is hidden from clients but its znodes remain.
    snap = node.cache.snapshot()
    assert "slow" not in snap.topics and "slow" in snap.deleting
    assert node.store.exists("/brokers/topics/slow") is not None
    node.controller.replica_deletion_done(1, {TopicPartition("slow", 0): ErrorCode.NONE})
    settle(node)
    assert node.store.exists("/brokers/topics/slow") is not None
    node.controller.replica_deletion_done(1, {TopicPartition("slow", 1): ErrorCode.NONE})
    settle(node)
    assert node.store.exists("/brokers/topics/slow") is None
    assert node.store.exists("/admin/delete_topics/slow") is None


def test_a_failed_replica_deletion_is_asked_again(node: ControllerNode) -> None:
    sender = RecordingSender()
    node.controller.set_stop_replica_sender(sender)
    node.admin.create_topic(NewTopic("stubborn", 1, 1))
    assert leaders_elected(node, "stubborn", 1)
    node.admin.delete_topic("stubborn")
    settle(node)
    assert len(sender.requests) == 1
    sender.sent.clear()
    node.controller.replica_deletion_done(1, {TopicPartition("stubborn", 0): ErrorCode.KAFKA_STORAGE_ERROR})
    assert sender.sent.wait(SETTLE_TIMEOUT)
    assert sender.requests[1] == (1, [TopicPartition("stubborn", 0)])
    assert node.store.exists("/brokers/topics/stubborn") is not None
    node.controller.replica_deletion_done(1, {TopicPartition("stubborn", 0): ErrorCode.NONE})
    settle(node)
    assert node.store.exists("/brokers/topics/stubborn") is None


def test_disabled_deletion_removes_the_marker_and_keeps_the_topic(store: EmbeddedMetadataStore) -> None:
    node = ControllerNode.start(store, 1, plaintext(), delete_topic_enable=False)
    try:
        settle(node)
        node.admin.create_topic(NewTopic("kept", 1, 1))
        assert leaders_elected(node, "kept", 1)
        node.admin.delete_topic("kept")
        settle(node)
        assert store.get_children("/admin/delete_topics") == []
        assert node.admin.topic_exists("kept")
        assert "kept" in node.cache.snapshot().topics
    finally:
        node.shutdown()


def test_markers_of_unknown_topics_are_removed(node: ControllerNode) -> None:
    node.store.create("/admin/delete_topics/never-was")
    settle(node)
    assert node.store.get_children("/admin/delete_topics") == []


# ------------------------------------------------------------------------------------ CreatePartitions


def test_added_partitions_get_placed_and_led(node: ControllerNode) -> None:
    node.admin.create_topic(NewTopic("grow", 2, 1))
    assert leaders_elected(node, "grow", 2)
    added = node.admin.create_partitions("grow", 5)
    assert added == {2: [1], 3: [1], 4: [1]}
    assert leaders_elected(node, "grow", 5)
    assert read_json(node.store, "/brokers/topics/grow")["partitions"] == {str(p): [1] for p in range(5)}
    # Existing partitions keep their state untouched.
    assert node.store.get("/brokers/topics/grow/partitions/0/state")[1].version == 0


def test_added_partitions_continue_kafkas_walk(second_broker: ControllerNode) -> None:
    node = second_broker
    node.admin.create_topic(NewTopic("walk", assignments={0: [2, 1]}))
    # Partition 0 is led by broker 2 (index 1 of [1, 2]): the walk starts there, at partition id 1.
    assert node.admin.create_partitions("walk", 3) == {1: [1, 2], 2: [2, 1]}


def test_create_partitions_validate_only_writes_nothing(node: ControllerNode) -> None:
    node.admin.create_topic(NewTopic("dry-grow", 1, 1))
    assert node.admin.create_partitions("dry-grow", 3, validate_only=True) == {1: [1], 2: [1]}
    assert read_json(node.store, "/brokers/topics/dry-grow")["partitions"] == {"0": [1]}


@pytest.mark.parametrize(
    ("count", "assignments", "code", "message"),
    [
        (2, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions."),
        (1, None, ErrorCode.INVALID_PARTITIONS, "higher than the requested 1"),
        (4, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "by 2 but 1 assignments provided"),
        (3, [[9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 9."),
        (3, [[1, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate brokers"),
        (3, [[]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "replication factor of 0"),
    ],
)
def test_bad_partition_increases_are_refused(
    node: ControllerNode, count: int, assignments: list[list[int]] | None, code: ErrorCode, message: str
) -> None:
    node.admin.create_topic(NewTopic("fixed", 2, 1))
    err = error_of(node.admin.create_partitions, "fixed", count, assignments)
    assert err.code == code
    assert message in str(err)
    assert read_json(node.store, "/brokers/topics/fixed")["partitions"] == {"0": [1], "1": [1]}


def test_inconsistent_replication_factor_is_refused(second_broker: ControllerNode) -> None:
    second_broker.admin.create_topic(NewTopic("rf2", 1, 2))
    err = error_of(second_broker.admin.create_partitions, "rf2", 2, [[1]])
    assert err.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "Inconsistent replication factor" in str(err)


def test_partitions_of_unknown_or_deleting_topics_are_refused(node: ControllerNode) -> None:
    assert error_of(node.admin.create_partitions, "ghost", 3).code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    node.controller.set_stop_replica_sender(RecordingSender())  # keep the deletion pending
    node.admin.create_topic(NewTopic("going", 1, 1))
    node.admin.delete_topic("going")
    err = error_of(node.admin.create_partitions, "going", 3)
    assert err.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "queued for deletion" in str(err)


# --------------------------------------------------------------------------------------------- configs


def test_topic_config_change_writes_config_and_notification(node: ControllerNode) -> None:
    node.admin.create_topic(NewTopic("tuned", 1, 1))
    node.admin.set_topic_config("tuned", {"retention.ms": "60000", "cleanup.policy": "compact"})
    assert read_json(node.store, "/config/topics/tuned") == {
        "version": 1,
        "config": {"retention.ms": "60000", "cleanup.policy": "compact"},
    }
    changes = node.store.get_children("/config/changes")
    assert changes == ["config_change_0000000000"]
    assert read_json(node.store, "/config/changes/" + changes[0]) == {"version": 2, "entity_path": "topics/tuned"}
    assert node.admin.topic_config("tuned") == {"retention.ms": "60000", "cleanup.policy": "compact"}
    assert node.cache.wait_until(lambda s: s.topic_config("tuned").get("cleanup.policy") == "compact", SETTLE_TIMEOUT)
    node.admin.set_topic_config("tuned", {})
    assert node.admin.topic_config("tuned") == {}
    assert len(node.store.get_children("/config/changes")) == 2


def test_bad_topic_config_change_writes_nothing(node: ControllerNode) -> None:
    node.admin.create_topic(NewTopic("strict", 1, 1, configs={"retention.ms": "5"}))
    err = error_of(node.admin.set_topic_config, "strict", {"segment.bytes": "1"})
    assert err.code == ErrorCode.INVALID_CONFIG and "segment.bytes" in str(err)
    assert node.admin.topic_config("strict") == {"retention.ms": "5"}
    assert node.store.get_children("/config/changes") == []
    node.admin.set_topic_config("strict", {"retention.ms": "9"}, validate_only=True)
    assert node.admin.topic_config("strict") == {"retention.ms": "5"}


def test_config_of_unknown_topic_is_unknown_topic(node: ControllerNode) -> None:
    assert error_of(node.admin.set_topic_config, "ghost", {}).code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert error_of(node.admin.topic_config, "ghost").code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_broker_and_default_broker_configs_have_kafkas_paths(node: ControllerNode) -> None:
    node.admin.set_broker_config(1, {"log.cleaner.threads": "2"})
    node.admin.set_broker_config(None, {"log.retention.ms": "1000"})
    assert read_json(node.store, "/config/brokers/1") == {"version": 1, "config": {"log.cleaner.threads": "2"}}
    assert read_json(node.store, "/config/brokers/<default>") == {"version": 1, "config": {"log.retention.ms": "1000"}}
    paths = [read_json(node.store, "/config/changes/" + c)["entity_path"] for c in node.store.get_children("/config/changes")]
    assert paths == ["brokers/1", "brokers/<default>"]
    assert node.admin.broker_config(1) == {"log.cleaner.threads": "2"}
    assert node.admin.broker_config(None) == {"log.retention.ms": "1000"}
    assert node.admin.broker_config(5) == {}
    assert node.cache.wait_until(
        lambda s: s.broker_config(None) == {"log.retention.ms": "1000"} and s.broker_config(1) == {"log.cleaner.threads": "2"},
        SETTLE_TIMEOUT,
    )


def test_broker_config_validator_can_refuse(node: ControllerNode) -> None:
    def refuse(broker_id: int | None, configs: object) -> None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"nope for {broker_id}")

    err = error_of(node.admin.set_broker_config, 1, {"x": "y"}, refuse)
    assert err.code == ErrorCode.INVALID_CONFIG
    assert node.store.exists("/config/brokers/1") is None


def test_a_thousand_partition_topic_gets_every_leader(node: ControllerNode) -> None:
    node.admin.create_topic(NewTopic("wide", 1000, 1))
    assert node.cache.wait_until(lambda s: s.has_leaders("wide"), SETTLE_TIMEOUT)
    assert sorted(node.cache.snapshot().topics["wide"].partitions) == list(range(1000))
    node.admin.delete_topic("wide")
    assert node.cache.wait_until(lambda s: "wide" not in s.topics and "wide" not in s.deleting, SETTLE_TIMEOUT)


@pytest.mark.parametrize("name", [".", "..", "", "a/b", "bad name"])
def test_growing_a_topic_whose_name_is_not_even_a_path_is_unknown_topic(node: ControllerNode, name: str) -> None:
    """Found by the protocol fuzzer: the deletion-marker lookup raised the store's path error, which the broker
    answered by closing the connection."""
    assert error_of(node.admin.create_partitions, name, 3).code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_an_assignment_too_large_for_its_znode_is_invalid_partitions(node: ControllerNode) -> None:
    """Found by the protocol fuzzer: CreatePartitions grew a topic to 100,000 partitions, under
    sofakafka.max.partitions.per.topic, but its assignment JSON (1.2 MB) is over ZooKeeper's 1 MiB znode limit;
    the store's refusal reached the handler as an unexpected error. CreateTopics of as many partitions writes
    the same znode."""
    node.admin.create_topic(NewTopic("grown", 1, 1))
    err = error_of(node.admin.create_partitions, "grown", 100_000)
    assert err.code == ErrorCode.INVALID_PARTITIONS and "100000 partitions" in err.message
    assert node.admin.assignment("grown") == {0: [1]}
    err = error_of(node.admin.create_topic, NewTopic("wide", 100_000, 1))
    assert err.code == ErrorCode.INVALID_PARTITIONS and "100000 partitions" in err.message
    assert not node.admin.topic_exists("wide")


def test_a_topic_config_written_as_the_topic_is_deleted_does_not_outlive_it(node: ControllerNode) -> None:
    """AlterConfigs checks that the topic exists, then writes; the controller may delete the topic in between.
    The write is conditioned on the topic's znode, so the config of a deleted topic is never left behind (a topic
    created again under the name would inherit it)."""
    node.admin.create_topic(NewTopic("racing"))
    assert leaders_elected(node, "racing", 1)
    store = node.store
    real_ensure_path = store.ensure_path

    def ensure_path_then_delete_the_topic(path: str) -> None:
        # The controller's deletion lands between the existence check and the config write.
        if store.exists("/brokers/topics/racing") is not None:
            store.create("/admin/delete_topics/racing", makepath=True)
            settle(node)
        real_ensure_path(path)

    store.ensure_path = ensure_path_then_delete_the_topic  # type: ignore[method-assign]
    try:
        error = error_of(node.admin.set_topic_config, "racing", {"retention.ms": "1000"})
    finally:
        del store.ensure_path
    assert error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert store.exists("/brokers/topics/racing") is None
    assert store.exists("/config/topics/racing") is None
