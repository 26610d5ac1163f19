"""The client against a real broker: negotiation, routing, data and admin calls at old and new versions.

The broker is a separate process (see conftest.py). Each test uses its own topics, so tests sharing the
module's broker do not see each other's data.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sofakafka.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AlterConfigOp,
    BrokerConnection,
    BrokerConnectionError,
    ConfigEntry,
    ConfigResourceType,
    ConfigSource,
    KafkaClient,
    NewTopic,
    NoBrokersAvailableError,
    RequestTimeoutError,
)
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from sofakafka.protocol.records import CompressionType, Record
from tests.unit.client.conftest import RunningBroker, start_broker, stop_broker

_names = itertools.count()

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER


def new_name(prefix: str = "t") -> str:
    return f"{prefix}-{next(_names)}"


@pytest.fixture
def client(broker: RunningBroker) -> Iterator[KafkaClient]:
    with KafkaClient(broker.bootstrap, request_timeout_ms=20_000) as c:
        yield c


def create(client: KafkaClient, name: str, partitions: int = 1, **configs: str) -> None:
    result = client.create_topics([NewTopic(name, partitions, 1, configs=configs)])[name]
    assert result.error == ErrorCode.NONE, result


def records(n: int, *, headers: bool = True, start_ts: int = 1_600_000_000_000) -> list[Record]:
    return [Record(0, start_ts + i, f"k{i}".encode(), f"v{i}".encode(), [("h", f"{i}".encode())] if headers else [])
            for i in range(n)]


# -- connection and negotiation ------------------------------------------------------------------------


def test_connection_negotiates_the_highest_common_versions(broker: RunningBroker) -> None:
    with BrokerConnection(broker.host, broker.port) as conn:
        assert conn.api_versions[ApiKey.API_VERSIONS] == (0, 3)
        assert conn.supported_version(ApiKey.PRODUCE) == 8
        assert conn.supported_version(ApiKey.FETCH) == 11
        assert conn.supported_version(ApiKey.METADATA, max_version=4) == 4


def test_metadata_names_the_broker_and_controller(client: KafkaClient, broker: RunningBroker) -> None:
    cluster = client.metadata()
    assert set(cluster.brokers) == {broker.broker_id}
    assert cluster.brokers[broker.broker_id].port == broker.port
    assert cluster.controller_id == broker.broker_id
    assert cluster.cluster_id


def test_unreachable_bootstrap_raises_no_brokers_available() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with KafkaClient(f"127.0.0.1:{port}", request_timeout_ms=2000) as c, pytest.raises(NoBrokersAvailableError):
        c.metadata()


class _SilentPeer:
    """A TCP peer that accepts and reads but never answers (a hung broker), or answers with a wrong
    correlation id (a confused one)."""

    def __init__(self, wrong_correlation: bool) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.wrong_correlation = wrong_correlation
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            if self.wrong_correlation:
                (correlation_id,) = struct.unpack_from(">i", data, 8)
                conn.sendall(struct.pack(">iih", 6, correlation_id + 1, 0))
            # Hold the connection open until the client gives up and closes it.
            while conn.recv(4096):
                pass

    def close(self) -> None:
        self.sock.close()
        self.thread.join(timeout=10)


def test_a_broker_that_never_answers_times_out_and_closes_the_connection() -> None:
    peer = _SilentPeer(wrong_correlation=False)
    try:
        conn = BrokerConnection("127.0.0.1", peer.port, timeout_s=0.5)
        with pytest.raises(RequestTimeoutError):
            conn.connect()
        assert not conn.connected
    finally:
        peer.close()


def test_a_response_with_another_correlation_id_is_refused() -> None:
    peer = _SilentPeer(wrong_correlation=True)
    try:
        conn = BrokerConnection("127.0.0.1", peer.port, timeout_s=10)
        with pytest.raises(BrokerConnectionError, match="correlation id"):
            conn.connect()
        assert not conn.connected
    finally:
        peer.close()


# -- produce, fetch, offsets ---------------------------------------------------------------------------


@pytest.mark.parametrize(("produce_version", "fetch_version"), [(0, 0), (2, 3), (3, 4), (7, 10), (8, 11)])
def test_round_trip_at_old_and_new_versions(broker: RunningBroker, produce_version: int, fetch_version: int) -> None:
    caps = {ApiKey.PRODUCE: produce_version, ApiKey.FETCH: fetch_version}
    with KafkaClient(broker.bootstrap, max_versions=caps) as c:
        name = new_name()
        create(c, name)
        with_headers = produce_version >= 3
        sent = records(5, headers=with_headers)
        result = c.produce(name, 0, sent, compression=CompressionType.GZIP)
        assert result is not None and result.base_offset == 0
        got = c.fetch(name, 0, 0)
        assert [r.offset for r in got.records] == [0, 1, 2, 3, 4]
        assert [(r.key, r.value) for r in got.records] == [(r.key, r.value) for r in sent]
        if produce_version >= 2 and fetch_version >= 2:
            assert [r.timestamp for r in got.records] == [r.timestamp for r in sent]
        if with_headers and fetch_version >= 4:
            assert [r.headers for r in got.records] == [r.headers for r in sent]
        assert got.high_watermark == 5
        assert got.next_offset == 5


def test_produce_with_each_codec_and_fetch_from_the_middle(client: KafkaClient) -> None:
    name = new_name()
    create(client, name)
    for codec in CompressionType:
        client.produce(name, 0, records(3), compression=codec)
    got = client.fetch(name, 0, 4)
    assert [r.offset for r in got.records] == list(range(4, 15))


def test_acks_zero_gets_no_answer_but_the_records_arrive(client: KafkaClient) -> None:
    name = new_name()
    create(client, name)
    assert client.produce(name, 0, records(2), acks=0) is None
    # The next acknowledged produce on the same connection is appended after the unacknowledged one.
    result = client.produce(name, 0, records(1), acks=-1)
    assert result is not None and result.base_offset == 2


def test_produce_to_a_missing_partition_fails_with_unknown_topic(broker: RunningBroker) -> None:
    # The error is retriable (the partition may be on its way), so the client retries until its request
    # timeout: a short one keeps the test from waiting out the fixture's 20 s.
    with KafkaClient(broker.bootstrap, request_timeout_ms=1_500) as client:
        name = new_name()
        create(client, name)
        with pytest.raises(KafkaError) as info:
            client.produce(name, 5, records(1))
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_by_time_start_and_end(client: KafkaClient) -> None:
    name = new_name()
    create(client, name)
    client.produce(name, 0, records(10, start_ts=1000))
    found = client.list_offsets(name, {0: 1004})
    assert found[0].offset == 4 and found[0].timestamp == 1004
    assert client.list_offsets(name, {0: EARLIEST_TIMESTAMP})[0].offset == 0
    assert client.list_offsets(name, {0: LATEST_TIMESTAMP})[0].offset == 10
    assert client.list_offsets(name, {0: 99_999})[0].offset == -1


def test_list_offsets_v0_answers_old_style_offsets(broker: RunningBroker) -> None:
    with KafkaClient(broker.bootstrap, max_versions={ApiKey.LIST_OFFSETS: 0}) as c:
        name = new_name()
        create(c, name)
        c.produce(name, 0, records(3))
        assert c.list_offsets(name, {0: LATEST_TIMESTAMP})[0].offset == 3
        assert c.list_offsets(name, {0: EARLIEST_TIMESTAMP})[0].offset == 0


# -- delete records and log dirs -----------------------------------------------------------------------


def test_delete_records_moves_the_log_start(client: KafkaClient) -> None:
    name = new_name()
    create(client, name)
    client.produce(name, 0, records(10))
    assert client.delete_records(name, {0: 4}) == {0: 4}
    assert client.list_offsets(name, {0: EARLIEST_TIMESTAMP})[0].offset == 4
    with pytest.raises(KafkaError) as info:
        client.fetch(name, 0, 2)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert [r.offset for r in client.fetch(name, 0, 4).records] == list(range(4, 10))
    # An offset below the current start changes nothing.
    assert client.delete_records(name, {0: 1}) == {0: 4}
    # -1 means the high watermark.
    assert client.delete_records(name, {0: -1}) == {0: 10}


def test_delete_records_refuses_offsets_past_the_high_watermark_and_compacted_topics(client: KafkaClient) -> None:
    name = new_name()
    create(client, name)
    client.produce(name, 0, records(3))
    beyond = client.delete_records(name, {0: 4})[0]
    assert isinstance(beyond, KafkaError) and beyond.code == ErrorCode.OFFSET_OUT_OF_RANGE
    negative = client.delete_records(name, {0: -5})[0]
    assert isinstance(negative, KafkaError) and negative.code == ErrorCode.OFFSET_OUT_OF_RANGE
    compacted = new_name()
    create(client, compacted, **{"cleanup.policy": "compact"})
    client.produce(compacted, 0, records(2))
    refused = client.delete_records(compacted, {0: 1})[0]
    assert isinstance(refused, KafkaError) and refused.code == ErrorCode.POLICY_VIOLATION


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_log_dirs_lists_partitions_with_sizes(broker: RunningBroker, version: int) -> None:
    with KafkaClient(broker.bootstrap, max_versions={ApiKey.DESCRIBE_LOG_DIRS: version}) as c:
        name = new_name()
        create(c, name, partitions=2)
        c.produce(name, 1, records(4))
        dirs = c.describe_log_dirs(broker.broker_id)
        assert [d.log_dir for d in dirs] == [str(broker.data_dir.resolve())]
        assert dirs[0].error == ErrorCode.NONE
        mine = {p.partition: p for p in dirs[0].partitions if p.topic == name}
        assert set(mine) == {0, 1}
        assert mine[0].size == 0 and mine[1].size > 0
        assert mine[1].offset_lag == 0 and not mine[1].is_future
        only = c.describe_log_dirs(broker.broker_id, {name: [1]})
        assert [(p.topic, p.partition) for p in only[0].partitions] == [(name, 1)]


# -- topics --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 4, 5])
def test_create_topic_then_metadata_shows_its_leaders(broker: RunningBroker, version: int) -> None:
    with KafkaClient(broker.bootstrap, max_versions={ApiKey.CREATE_TOPICS: version}) as c:
        name = new_name()
        result = c.create_topics([NewTopic(name, 3, 1)])[name]
        assert result.error == ErrorCode.NONE
        info = c.topic(name)
        assert sorted(info.partitions) == [0, 1, 2]
        assert all(p.leader == broker.broker_id and p.isr == (broker.broker_id,) for p in info.partitions.values())


def test_create_topics_v4_defaults_come_from_the_broker(client: KafkaClient) -> None:
    name = new_name()
    result = client.create_topics([NewTopic(name)])[name]
    assert result.error == ErrorCode.NONE
    assert (result.num_partitions, result.replication_factor) == (1, 1)


def test_create_topics_v5_reports_the_configs_with_sources(client: KafkaClient) -> None:
    name = new_name()
    result = client.create_topics([NewTopic(name, 2, 1, configs={"retention.ms": "12345"})])[name]
    assert result.error == ErrorCode.NONE and result.num_partitions == 2
    assert result.configs is not None
    configs = {c.name: c for c in result.configs}
    assert configs["retention.ms"].value == "12345"
    assert configs["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG


def test_create_topics_refusals_carry_kafkas_codes(client: KafkaClient) -> None:
    existing = new_name()
    create(client, existing)
    cases = {
        existing: (NewTopic(existing, 1, 1), ErrorCode.TOPIC_ALREADY_EXISTS),
        "bad/name": (NewTopic("bad/name", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        "zero-parts": (NewTopic("zero-parts", 0, 1), ErrorCode.INVALID_PARTITIONS),
        "rf-two": (NewTopic("rf-two", 1, 2), ErrorCode.INVALID_REPLICATION_FACTOR),
        "bad-assignment": (NewTopic("bad-assignment", assignments={0: [0, 0]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        "bad-config": (NewTopic("bad-config", 1, 1, configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
    }
    results = client.create_topics([t for t, _ in cases.values()])
    for name, (_, code) in cases.items():
        assert results[name].error == code, results[name]
    assert "retention.ms" in (results["bad-config"].error_message or "")
    assert set(client.metadata().topics).isdisjoint({"zero-parts", "rf-two", "bad-assignment", "bad-config"})


def test_create_topics_with_a_name_twice_refuses_both(client: KafkaClient) -> None:
    name = new_name()
    results = client.create_topics([NewTopic(name, 1, 1), NewTopic(name, 2, 1)])
    assert results[name].error == ErrorCode.INVALID_REQUEST
    assert name not in client.metadata().topics


def test_create_topics_validate_only_creates_nothing(client: KafkaClient) -> None:
    name = new_name()
    result = client.create_topics([NewTopic(name, 4, 1)], validate_only=True)[name]
    assert result.error == ErrorCode.NONE and result.num_partitions == 4
    assert name not in client.metadata().topics


def test_create_topic_with_an_explicit_assignment(client: KafkaClient, broker: RunningBroker) -> None:
    name = new_name()
    result = client.create_topics([NewTopic(name, assignments={0: [broker.broker_id], 1: [broker.broker_id]})])[name]
    assert result.error == ErrorCode.NONE
    assert sorted(client.topic(name).partitions) == [0, 1]


@pytest.mark.parametrize("version", [0, 3, 4])
def test_delete_topics_removes_the_topic(broker: RunningBroker, version: int) -> None:
    with KafkaClient(broker.bootstrap, max_versions={ApiKey.DELETE_TOPICS: version}) as c:
        name = new_name()
        create(c, name)
        c.produce(name, 0, records(2))
        assert c.delete_topics([name])[name].error == ErrorCode.NONE
        assert name not in c.metadata().topics
        assert c.delete_topics([name])[name].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_create_partitions_grows_a_topic_and_refuses_to_shrink(client: KafkaClient, broker: RunningBroker) -> None:
    name = new_name()
    create(client, name)
    assert client.create_partitions({name: 3}, validate_only=True)[name].error == ErrorCode.NONE
    assert sorted(client.topic(name).partitions) == [0]
    assert client.create_partitions({name: 3})[name].error == ErrorCode.NONE
    info = client.topic(name)
    assert sorted(info.partitions) == [0, 1, 2]
    assert all(p.leader == broker.broker_id for p in info.partitions.values())
    client.produce(name, 2, records(1))
    for count in (3, 2):
        result = client.create_partitions({name: count})[name]
        assert result.error == ErrorCode.INVALID_PARTITIONS and result.error_message
    wrong = client.create_partitions({name: 5}, assignments={name: [[broker.broker_id]]})[name]
    assert wrong.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    missing = new_name()
    assert client.create_partitions({missing: 2})[missing].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- configs -------------------------------------------------------------------------------------------


def entries(client: KafkaClient, rtype: int, name: str, **kw: bool) -> dict[str, ConfigEntry]:
    result = client.describe_configs([(rtype, name, None)], **kw)[0]
    result.raise_for_error()
    return {e.name: e for e in result.entries}


def test_describe_topic_configs_names_overrides_and_defaults(client: KafkaClient) -> None:
    name = new_name()
    create(client, name, **{"cleanup.policy": "compact"})
    result = client.describe_configs([(TOPIC, name, None)], include_synonyms=True)[0]
    configs = {e.name: e for e in result.entries}
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [(s.name, s.source) for s in configs["cleanup.policy"].synonyms] == [
        ("cleanup.policy", ConfigSource.DYNAMIC_TOPIC_CONFIG), ("log.cleanup.policy", ConfigSource.DEFAULT_CONFIG)]
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert configs["retention.ms"].value == "604800000"
    assert not any(e.read_only or e.is_sensitive for e in configs.values())
    some = client.describe_configs([(TOPIC, name, ["segment.bytes", "no.such.key"])])[0]
    assert [e.name for e in some.entries] == ["segment.bytes"]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_describe_configs_fields_by_version(broker: RunningBroker, version: int) -> None:
    with KafkaClient(broker.bootstrap, max_versions={ApiKey.DESCRIBE_CONFIGS: version}) as c:
        name = new_name()
        create(c, name, **{"retention.ms": "1000"})
        result = c.describe_configs([(TOPIC, name, None)], include_synonyms=True, include_documentation=True)[0]
        configs = {e.name: e for e in result.entries}
        assert not configs["retention.ms"].is_default and configs["segment.bytes"].is_default
        assert bool(configs["retention.ms"].synonyms) == (version >= 1)
        assert configs["retention.ms"].config_type == (5 if version >= 3 else 0)  # LONG
        brokers = {e.name: e for e in c.describe_configs([(BROKER, str(broker.broker_id), None)],
                                                          include_documentation=True)[0].entries}
        assert brokers["broker.id"].read_only
        assert bool(brokers["num.partitions"].documentation) == (version >= 3)


def test_describe_broker_configs_reports_static_and_default_sources(client: KafkaClient, broker: RunningBroker) -> None:
    result = client.describe_configs([(BROKER, str(broker.broker_id), None)], include_synonyms=True)[0]
    configs = {e.name: e for e in result.entries}
    # The test broker is started with --override log.dirs=..., broker.id=0, listeners=...
    assert configs["log.dirs"].config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert configs["log.dirs"].value == str(broker.data_dir)
    assert configs["num.partitions"].config_source == ConfigSource.DEFAULT_CONFIG
    assert configs["num.partitions"].value == "1"
    assert configs["log.retention.hours"].synonyms[0].name == "log.retention.hours"
    assert configs["ssl.keystore.password"].is_sensitive and configs["ssl.keystore.password"].value is None
    assert configs["log.cleaner.threads"].read_only is False


def test_describe_configs_refusals(client: KafkaClient, broker: RunningBroker) -> None:
    missing, other_broker, bad_type = client.describe_configs(
        [(TOPIC, "no-such-topic", None), (BROKER, "", None), (3, "x", None)])
    assert missing.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert other_broker.error == ErrorCode.NONE  # the cluster-default entity
    assert bad_type.error == ErrorCode.INVALID_REQUEST
    # Another broker's id is that broker's to answer.
    with BrokerConnection(broker.host, broker.port) as conn:
        response = conn.send(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=BROKER, resource_name=str(broker.broker_id + 1), configuration_keys=None)]))
        assert isinstance(response, DescribeConfigsResponse)
        assert response.results[0].error_code == ErrorCode.INVALID_REQUEST


def test_alter_configs_replaces_the_whole_override_set(client: KafkaClient) -> None:
    name = new_name()
    create(client, name, **{"retention.ms": "1000", "segment.bytes": "100000"})
    [result] = client.alter_configs({(TOPIC, name): {"cleanup.policy": "compact"}})
    assert result.error == ErrorCode.NONE
    configs = entries(client, TOPIC, name)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].config_source == ConfigSource.DEFAULT_CONFIG


def test_alter_configs_refuses_bad_values_naming_the_key_and_validate_only_writes_nothing(client: KafkaClient) -> None:
    name = new_name()
    create(client, name)
    [bad] = client.alter_configs({(TOPIC, name): {"min.cleanable.dirty.ratio": "1.5"}})
    assert bad.error == ErrorCode.INVALID_REQUEST
    assert "min.cleanable.dirty.ratio" in (bad.error_message or "")
    assert "ConfigResource(type=TOPIC" in (bad.error_message or "")
    [dry] = client.alter_configs({(TOPIC, name): {"retention.ms": "5"}}, validate_only=True)
    assert dry.error == ErrorCode.NONE
    assert entries(client, TOPIC, name)["retention.ms"].config_source == ConfigSource.DEFAULT_CONFIG
    [missing] = client.alter_configs({(TOPIC, "no-such-topic"): {"retention.ms": "5"}})
    # Kafka 2.6's answer, as tests/conformance shows: UNKNOWN_SERVER_ERROR without a message.
    assert (missing.error, missing.error_message) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)


def test_incremental_alter_configs_set_delete_append_subtract(client: KafkaClient) -> None:
    name = new_name()
    create(client, name, **{"retention.ms": "1000"})
    ops = [("segment.bytes", AlterConfigOp.SET, "200000"), ("retention.ms", AlterConfigOp.DELETE, None),
           ("cleanup.policy", AlterConfigOp.APPEND, "compact")]
    [result] = client.incremental_alter_configs({(TOPIC, name): ops})
    assert result.error == ErrorCode.NONE, result
    configs = entries(client, TOPIC, name)
    assert configs["segment.bytes"].value == "200000"
    assert configs["retention.ms"].config_source == ConfigSource.DEFAULT_CONFIG
    assert configs["cleanup.policy"].value == "delete,compact"
    [result] = client.incremental_alter_configs({(TOPIC, name): [("cleanup.policy", AlterConfigOp.SUBTRACT, "delete")]})
    assert result.error == ErrorCode.NONE
    assert entries(client, TOPIC, name)["cleanup.policy"].value == "compact"


def test_incremental_alter_configs_refusals(client: KafkaClient, broker: RunningBroker) -> None:
    name = new_name()
    create(client, name)
    refusals = {
        "append to a non-list": [("retention.ms", AlterConfigOp.APPEND, "5")],
        "null SET": [("retention.ms", AlterConfigOp.SET, None)],
        "twice": [("retention.ms", AlterConfigOp.SET, "5"), ("retention.ms", AlterConfigOp.DELETE, None)],
        "bad value": [("segment.bytes", AlterConfigOp.SET, "ten")],
    }
    for what, ops in refusals.items():
        [result] = client.incremental_alter_configs({(TOPIC, name): ops})
        assert result.error == ErrorCode.INVALID_REQUEST, what
    # An unknown topic config name is INVALID_CONFIG in Kafka 2.6 (tests/conformance compares it).
    [unknown] = client.incremental_alter_configs({(TOPIC, name): [("no.such.config", AlterConfigOp.SET, "1")]})
    assert unknown.error == ErrorCode.INVALID_CONFIG and "no.such.config" in (unknown.error_message or "")
    own = str(broker.broker_id)
    [read_only] = client.incremental_alter_configs({(BROKER, own): [("broker.id", AlterConfigOp.SET, "7")]})
    assert read_only.error == ErrorCode.INVALID_REQUEST and "broker.id" in (read_only.error_message or "")
    [per_broker] = client.incremental_alter_configs({(BROKER, ""): [("listeners", AlterConfigOp.SET, "PLAINTEXT://:1")]})
    assert per_broker.error == ErrorCode.INVALID_REQUEST


def test_dynamic_broker_configs_show_their_sources(client: KafkaClient, broker: RunningBroker) -> None:
    own = str(broker.broker_id)
    [r1] = client.incremental_alter_configs({(BROKER, own): [("log.cleaner.threads", AlterConfigOp.SET, "2")]})
    [r2] = client.incremental_alter_configs({(BROKER, ""): [("log.retention.bytes", AlterConfigOp.SET, "123456")]})
    assert r1.error == ErrorCode.NONE and r2.error == ErrorCode.NONE
    try:
        configs = entries(client, BROKER, own, include_synonyms=True)
        assert configs["log.cleaner.threads"].value == "2"
        assert configs["log.cleaner.threads"].config_source == ConfigSource.DYNAMIC_BROKER_CONFIG
        assert configs["log.retention.bytes"].config_source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        defaults = entries(client, BROKER, "")
        assert set(defaults) == {"log.retention.bytes"}
        # Topics without an override inherit the dynamic default.
        name = new_name()
        create(client, name)
        topic = entries(client, TOPIC, name)
        assert topic["retention.bytes"].value == "123456"
        assert topic["retention.bytes"].config_source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    finally:
        client.incremental_alter_configs({(BROKER, own): [("log.cleaner.threads", AlterConfigOp.DELETE, None)]})
        client.incremental_alter_configs({(BROKER, ""): [("log.retention.bytes", AlterConfigOp.DELETE, None)]})
    assert entries(client, BROKER, own)["log.cleaner.threads"].config_source == ConfigSource.DEFAULT_CONFIG


def test_altered_topic_configs_take_effect_on_the_log(client: KafkaClient) -> None:
    name = new_name()
    create(client, name)
    big = [Record(0, 1, None, b"x" * 2000)]
    client.produce(name, 0, big)
    [result] = client.incremental_alter_configs({(TOPIC, name): [("max.message.bytes", AlterConfigOp.SET, "1000")]})
    assert result.error == ErrorCode.NONE
    # The broker applies config changes as its metadata watch reports them, a moment after the answer
    # (Kafka's config change notifications work the same way), so the first produces may still pass.
    for _ in range(500):
        try:
            client.produce(name, 0, big)
        except KafkaError as e:
            assert e.code == ErrorCode.MESSAGE_TOO_LARGE
            break
        time.sleep(0.01)
    else:
        pytest.fail("max.message.bytes=1000 never took effect")


def test_delete_topics_is_refused_when_deletion_is_disabled(tmp_path: Path) -> None:
    running = start_broker(tmp_path, {"delete.topic.enable": "false"})
    try:
        caps = {ApiKey.DELETE_TOPICS: 2}
        with KafkaClient(running.bootstrap) as c, KafkaClient(running.bootstrap, max_versions=caps) as old:
            create(c, "kept")
            assert c.delete_topics(["kept"])["kept"].error == ErrorCode.TOPIC_DELETION_DISABLED
            # v0-2 clients do not know TOPIC_DELETION_DISABLED; Kafka answers them INVALID_REQUEST.
            assert old.delete_topics(["kept"])["kept"].error == ErrorCode.INVALID_REQUEST
            assert "kept" in c.metadata().topics
    finally:
        stop_broker(running.process)


_record = st.builds(
    lambda key, value, ts, headers: Record(0, ts, key, value, headers),
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=200),
    st.integers(min_value=0, max_value=2**41),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(_record, min_size=1, max_size=15), codec=st.sampled_from(list(CompressionType)),
       version=st.sampled_from([2, 3, 7, 8]))
def test_any_records_round_trip_through_the_broker(broker: RunningBroker, batch: list[Record], codec: int,
                                                    version: int) -> None:
    if version < 3:
        batch = [Record(0, r.timestamp, r.key, r.value) for r in batch]
    if codec == CompressionType.ZSTD and version < 7:
        codec = CompressionType.NONE  # zstd needs Produce v7 (the broker answers UNSUPPORTED_COMPRESSION_TYPE)
    with KafkaClient(broker.bootstrap, max_versions={ApiKey.PRODUCE: version}) as c:
        name = "round-trip"
        c.topic(name, allow_auto_topic_creation=True)
        result = c.produce(name, 0, batch, compression=codec)
        assert result is not None
        got = c.fetch(name, 0, result.base_offset, max_bytes=10 << 20).records[: len(batch)]
        assert [r.offset for r in got] == list(range(result.base_offset, result.base_offset + len(batch)))
        assert [(r.key, r.value, r.timestamp, r.headers) for r in got] == [
            (r.key, r.value, r.timestamp, r.headers) for r in batch]


def test_fetch_many_reads_every_partition_in_one_request(client: KafkaClient) -> None:
    name = new_name()
    create(client, name, partitions=3)
    for p in range(3):
        client.produce(name, p, records(p + 1))
    got = client.fetch_many(name, {0: 0, 1: 1, 2: 5})
    first, second, beyond = got[0], got[1], got[2]
    assert not isinstance(first, KafkaError) and [r.offset for r in first.records] == [0]
    assert not isinstance(second, KafkaError) and [r.offset for r in second.records] == [1]
    assert isinstance(beyond, KafkaError) and beyond.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_broker_loggers_describe_and_change_levels(client: KafkaClient, broker: RunningBroker) -> None:
    own = str(broker.broker_id)
    loggers = entries(client, ConfigResourceType.BROKER_LOGGER, own)
    logger = "sofakafka.broker.handlers.create_topics"
    assert loggers["root"].value == "INFO" and loggers[logger].value == "INFO"
    assert loggers[logger].config_source == ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
    key = (ConfigResourceType.BROKER_LOGGER, own)
    [dry] = client.incremental_alter_configs({key: [(logger, AlterConfigOp.SET, "DEBUG")]}, validate_only=True)
    assert dry.error == ErrorCode.NONE
    assert entries(client, ConfigResourceType.BROKER_LOGGER, own)[logger].value == "INFO"
    [done] = client.incremental_alter_configs({key: [(logger, AlterConfigOp.SET, "DEBUG")]})
    assert done.error == ErrorCode.NONE
    assert entries(client, ConfigResourceType.BROKER_LOGGER, own)[logger].value == "DEBUG"
    [reset] = client.incremental_alter_configs({key: [(logger, AlterConfigOp.DELETE, None)]})
    assert reset.error == ErrorCode.NONE
    assert entries(client, ConfigResourceType.BROKER_LOGGER, own)[logger].value == "INFO"
    for ops in ([("root", AlterConfigOp.DELETE, None)], [(logger, AlterConfigOp.APPEND, "DEBUG")],
                [("no.such.logger", AlterConfigOp.SET, "DEBUG")], [(logger, AlterConfigOp.SET, "LOUD")]):
        [refused] = client.incremental_alter_configs({key: ops})
        assert refused.error == ErrorCode.INVALID_REQUEST, ops
    [legacy] = client.alter_configs({key: {logger: "DEBUG"}})
    assert legacy.error == ErrorCode.INVALID_REQUEST


def test_a_client_reads_its_own_config_writes_at_once(client: KafkaClient, broker: RunningBroker) -> None:
    # Kafka reads configs from ZooKeeper, not from a cache that follows it: an answer to DescribeConfigs (or
    # the base of an incremental alter) never predates the AlterConfigs answered just before.
    name = new_name()
    create(client, name)
    for i in range(30):
        [a] = client.alter_configs({(TOPIC, name): {"retention.ms": str(1000 + i)}})
        assert a.error == ErrorCode.NONE
        assert entries(client, TOPIC, name)["retention.ms"].value == str(1000 + i)
        [b] = client.incremental_alter_configs({(TOPIC, name): [("segment.bytes", AlterConfigOp.SET, str(100_000 + i))]})
        assert b.error == ErrorCode.NONE
        configs = entries(client, TOPIC, name)
        assert configs["retention.ms"].value == str(1000 + i)
        assert configs["segment.bytes"].value == str(100_000 + i)
    own = str(broker.broker_id)
    try:
        for i in range(10):
            client.incremental_alter_configs({(BROKER, own): [("log.cleaner.threads", AlterConfigOp.SET, str(2 + i))]})
            assert entries(client, BROKER, own)["log.cleaner.threads"].value == str(2 + i)
    finally:
        client.incremental_alter_configs({(BROKER, own): [("log.cleaner.threads", AlterConfigOp.DELETE, None)]})
