"""Znode paths and JSON exactly as Kafka 2.6 writes and reads them (ZOOKEEPER-LAYOUT.md)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.controller import zk_paths as paths
from sofakafka.controller.zk_data import (
    BrokerEndpoint,
    BrokerRegistration,
    ControllerRegistration,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
    TopicPartition,
    ZkDataError,
    decode_cluster_id,
    decode_config,
    decode_config_change_notification,
    decode_controller_epoch,
    decode_isr_change_notification,
    decode_log_dir_event,
    decode_preferred_replica_election,
    decode_reassignment,
    encode_cluster_id,
    encode_config,
    encode_config_change_notification,
    encode_controller_epoch,
    encode_isr_change_notification,
    encode_log_dir_event,
    encode_preferred_replica_election,
    encode_reassignment,
    generate_cluster_id,
)


def as_json(data: bytes) -> object:
    return json.loads(data)


# ------------------------------------------------------------------------------------------------ paths


def test_paths_follow_the_2_6_layout() -> None:
    assert paths.broker_id_path(3) == "/brokers/ids/3"
    assert paths.topic_path("orders") == "/brokers/topics/orders"
    assert paths.topic_partitions_path("orders") == "/brokers/topics/orders/partitions"
    assert paths.topic_partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert paths.CONTROLLER_PATH == "/controller" and paths.CONTROLLER_EPOCH_PATH == "/controller_epoch"
    assert paths.config_topic_path("orders") == "/config/topics/orders"
    assert paths.config_broker_path(None) == "/config/brokers/<default>"
    assert paths.config_broker_path(1) == "/config/brokers/1"
    assert paths.config_change_prefix_path() == "/config/changes/config_change_"
    assert paths.CLUSTER_ID_PATH == "/cluster/id"
    assert paths.LATEST_PRODUCER_ID_BLOCK_PATH == "/latest_producer_id_block"
    assert paths.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert paths.isr_change_prefix_path() == "/isr_change_notification/isr_change_"
    assert set(paths.PERSISTENT_ZK_PATHS) == {
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
    }
    with pytest.raises(ValueError):
        paths.config_entity_type_path("groups")


def test_sequence_numbers_are_ten_digits() -> None:
    assert paths.sequence_number("config_change_0000000042", paths.CONFIG_CHANGE_PREFIX) == 42
    for bad in ("config_change_42", "isr_change_0000000001", "config_change_00000000x1"):
        with pytest.raises(ValueError):
            paths.sequence_number(bad, paths.CONFIG_CHANGE_PREFIX)


def test_sanitize_matches_kafkas_sanitizer() -> None:
    assert paths.sanitize("User:alice") == "User%3Aalice"
    assert paths.sanitize("a b*c+d~e_f.g-h") == "a%20b%2Ac%2Bd%7Ee_f.g-h"
    assert paths.sanitize("é") == "%C3%A9"


@pytest.mark.parametrize("name, znode", [(".", "%2E"), ("..", "%2E%2E"), ("...", "..."), (".a", ".a")])
def test_sanitize_encodes_the_names_zookeeper_refuses_as_a_path_component(name: str, znode: str) -> None:
    # Found by the fuzzer: DescribeConfigs of GROUP '.' reached the store's path check.
    assert paths.sanitize(name) == znode
    assert paths.desanitize(znode) == name
    assert paths.desanitize(paths.sanitize("client id/*")) == "client id/*"


@given(st.text())
def test_sanitized_names_are_safe_znode_names(name: str) -> None:
    sanitized = paths.sanitize(name)
    assert re.fullmatch(r"[A-Za-z0-9._\-%]*", sanitized)
    assert paths.desanitize(sanitized) == name


def test_topic_name_rules() -> None:
    paths.validate_topic_name("orders.v1_x-2")
    paths.validate_topic_name("a" * 249)
    for bad in ("", ".", "..", "a" * 250, "with/slash", "space here", "ü"):
        with pytest.raises(ValueError):
            paths.validate_topic_name(bad)
    assert paths.topics_collide("a.b", "a_b")
    assert not paths.topics_collide("a.b", "a-b")


# ------------------------------------------------------------------------------------ broker registration


def test_broker_registration_is_version_4_json() -> None:
    registration = BrokerRegistration(
        broker_id=1,
        endpoints=(
            BrokerEndpoint("INTERNAL", "10.0.0.1", 9093, "SASL_PLAINTEXT"),
            BrokerEndpoint("PLAINTEXT", "kafka1", 9092, "PLAINTEXT"),
            BrokerEndpoint("V6", "::1", 9094, "SSL"),
        ),
        timestamp_ms=1596000000000,
        rack="rack-a",
    )
    doc = as_json(registration.encode())
    assert doc == {
        "version": 4,
        "host": "kafka1",
        "port": 9092,
        "endpoints": ["INTERNAL://10.0.0.1:9093", "PLAINTEXT://kafka1:9092", "V6://[::1]:9094"],
        "listener_security_protocol_map": {"INTERNAL": "SASL_PLAINTEXT", "PLAINTEXT": "PLAINTEXT", "V6": "SSL"},
        "jmx_port": -1,
        "timestamp": "1596000000000",
        "rack": "rack-a",
    }
    assert BrokerRegistration.decode(1, registration.encode()) == registration


def test_broker_registration_without_plaintext_or_rack() -> None:
    registration = BrokerRegistration(7, (BrokerEndpoint("SSL", None, 9093, "SSL"),), 5)
    doc = as_json(registration.encode())
    assert isinstance(doc, dict)
    assert doc["host"] is None and doc["port"] == -1
    assert doc["endpoints"] == ["SSL://:9093"]
    assert "rack" not in doc
    assert BrokerRegistration.decode(7, registration.encode()) == registration


def test_older_broker_registrations_still_decode() -> None:
    v1 = BrokerRegistration.decode(0, b'{"version":1,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1"}')
    assert v1.endpoints == (BrokerEndpoint("PLAINTEXT", "h", 9092, "PLAINTEXT"),)
    v2 = BrokerRegistration.decode(
        0, b'{"version":2,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"],"jmx_port":-1,"timestamp":"1"}'
    )
    assert [e.security_protocol for e in v2.endpoints] == ["PLAINTEXT", "SSL"]
    with pytest.raises(ZkDataError):
        BrokerRegistration.decode(0, b'{"version":0,"host":"h","port":1}')
    with pytest.raises(ZkDataError):
        BrokerRegistration.decode(
            0, b'{"version":4,"endpoints":["X://h:1"],"listener_security_protocol_map":{"Y":"SSL"},"timestamp":"1"}'
        )


# ------------------------------------------------------------------------------------ topics and state


def test_topic_assignment_is_version_2_with_string_partition_keys() -> None:
    assignment = TopicAssignment({0: [1, 2, 3], 1: [2, 3, 1]}, adding_replicas={0: [4]}, removing_replicas={0: [1]})
    assert as_json(assignment.encode()) == {
        "version": 2,
        "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {"0": [4]},
        "removing_replicas": {"0": [1]},
    }
    assert TopicAssignment.decode("t", assignment.encode()) == assignment
    plain = TopicAssignment({0: [0]})
    assert as_json(plain.encode()) == {"version": 2, "partitions": {"0": [0]}, "adding_replicas": {}, "removing_replicas": {}}
    # A version 1 node (written by older brokers) has neither reassignment map.
    old = TopicAssignment.decode("t", b'{"version":1,"partitions":{"0":[1,2]}}')
    assert old == TopicAssignment({0: [1, 2]})
    with pytest.raises(ZkDataError):
        TopicAssignment.decode("t", b'{"version":2,"partitions":{"x":[1]}}')


def test_partition_state_is_version_1() -> None:
    state = PartitionState(leader=1, leader_epoch=4, controller_epoch=2, isr=(1, 3))
    assert as_json(state.encode()) == {"controller_epoch": 2, "leader": 1, "version": 1, "leader_epoch": 4, "isr": [1, 3]}
    assert PartitionState.decode(state.encode()) == state
    with pytest.raises(ZkDataError):
        PartitionState.decode(b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1}')
    with pytest.raises(ZkDataError):
        PartitionState.decode(b'{"version":1,"leader":"1","leader_epoch":0,"controller_epoch":1,"isr":[]}')


def test_controller_and_epoch() -> None:
    controller = ControllerRegistration(broker_id=2, timestamp_ms=1596000000000)
    assert as_json(controller.encode()) == {"version": 1, "brokerid": 2, "timestamp": "1596000000000"}
    assert ControllerRegistration.decode(controller.encode()) == controller
    assert encode_controller_epoch(7) == b"7"
    assert decode_controller_epoch(b"7") == 7
    with pytest.raises(ZkDataError):
        decode_controller_epoch(b"seven")


# ---------------------------------------------------------------------------------------------- configs


def test_config_entity_values_are_strings() -> None:
    data = encode_config({"retention.ms": "1000", "cleanup.policy": "compact"})
    assert as_json(data) == {"version": 1, "config": {"retention.ms": "1000", "cleanup.policy": "compact"}}
    assert decode_config(data) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert as_json(encode_config({})) == {"version": 1, "config": {}}
    with pytest.raises(ZkDataError):
        decode_config(b'{"version":1,"config":{"retention.ms":1000}}')


def test_config_change_notifications_v2_and_v1() -> None:
    assert as_json(encode_config_change_notification("topics/orders")) == {"version": 2, "entity_path": "topics/orders"}
    assert decode_config_change_notification(encode_config_change_notification("users/alice/clients/app1")) == (
        "users/alice/clients/app1"
    )
    assert decode_config_change_notification(b'{"version":1,"entity_type":"topics","entity_name":"orders"}') == "topics/orders"
    with pytest.raises(ZkDataError):
        decode_config_change_notification(b'{"version":1,"entity_type":"brokers","entity_name":"1"}')
    with pytest.raises(ZkDataError):
        decode_config_change_notification(b'{"version":3,"entity_path":"topics/x"}')


# --------------------------------------------------------------------------------------- singletons


def test_cluster_id_json_uses_a_string_version() -> None:
    cluster_id = generate_cluster_id()
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
    assert as_json(encode_cluster_id(cluster_id)) == {"version": "1", "id": cluster_id}
    assert decode_cluster_id(encode_cluster_id(cluster_id)) == cluster_id
    assert generate_cluster_id() != cluster_id


def test_producer_id_blocks_are_1000_ids_with_string_bounds() -> None:
    first = ProducerIdBlock.next_after(None, broker=0)
    assert (first.block_start, first.block_end) == (0, 999)
    assert as_json(first.encode()) == {"version": 1, "broker": 0, "block_start": "0", "block_end": "999"}
    second = ProducerIdBlock.next_after(ProducerIdBlock.decode(first.encode()), broker=2)
    assert second == ProducerIdBlock(2, 1000, 1999)


def test_notifications_and_admin_requests() -> None:
    partitions = [TopicPartition("a", 0), TopicPartition("b", 3)]
    expected = {"version": 1, "partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 3}]}
    assert as_json(encode_isr_change_notification(partitions)) == expected
    assert decode_isr_change_notification(encode_isr_change_notification(partitions)) == partitions
    assert as_json(encode_preferred_replica_election(partitions)) == expected
    assert decode_preferred_replica_election(encode_preferred_replica_election(partitions)) == partitions
    reassignment = {TopicPartition("a", 0): [1, 2]}
    assert as_json(encode_reassignment(reassignment)) == {
        "version": 1,
        "partitions": [{"topic": "a", "partition": 0, "replicas": [1, 2]}],
    }
    assert decode_reassignment(encode_reassignment(reassignment)) == reassignment
    assert as_json(encode_log_dir_event(4)) == {"version": 1, "broker": 4, "event": 1}
    assert decode_log_dir_event(encode_log_dir_event(4)) == (4, 1)


@pytest.mark.parametrize("data", [b"", b"not json", b"[1,2]", b'{"version":1}', b"\xff\xfe"])
def test_malformed_data_raises_zk_data_error(data: bytes) -> None:
    for decode in (
        lambda d: BrokerRegistration.decode(0, d),
        lambda d: TopicAssignment.decode("t", d),
        PartitionState.decode,
        ControllerRegistration.decode,
        decode_cluster_id,
        ProducerIdBlock.decode,
        decode_isr_change_notification,
    ):
        with pytest.raises(ZkDataError):
            decode(data)


_ids = st.integers(0, 2**31 - 1)


@given(
    st.dictionaries(st.integers(0, 1000), st.lists(_ids, max_size=5), min_size=1, max_size=10),
    st.dictionaries(st.integers(0, 1000), st.lists(_ids, min_size=1, max_size=3), max_size=3),
)
def test_topic_assignment_round_trips(partitions: dict[int, list[int]], adding: dict[int, list[int]]) -> None:
    assignment = TopicAssignment(partitions, adding_replicas=adding)
    assert TopicAssignment.decode("t", assignment.encode()) == assignment


@given(_ids, st.integers(-1, 2**31 - 1), _ids, st.lists(_ids, max_size=5))
def test_partition_state_round_trips(leader: int, epoch: int, controller_epoch: int, isr: list[int]) -> None:
    state = PartitionState(leader, epoch, controller_epoch, tuple(isr))
    assert PartitionState.decode(state.encode()) == state


def test_log_dir_failures_round_trip_and_refuse_what_they_cannot_read() -> None:
    from sofakafka.controller.zk_data import LogDirFailures

    failures = LogDirFailures(42, ("/data/a", "/data/b"), frozenset({TopicPartition("t", 0), TopicPartition("t", 3),
                                                                     TopicPartition("u", 1)}))
    encoded = failures.encode()
    assert json.loads(encoded) == {"version": 1, "broker_epoch": 42, "log_dirs": ["/data/a", "/data/b"],
                                   "partitions": {"t": [0, 3], "u": [1]}}
    assert LogDirFailures.decode(encoded) == failures
    for bad in (b"[]", b'{"broker_epoch": 1, "log_dirs": [1], "partitions": {}}',
                b'{"broker_epoch": 1, "log_dirs": [], "partitions": {"t": ["0"]}}', b"{"):
        with pytest.raises(ZkDataError):
            LogDirFailures.decode(bad)
