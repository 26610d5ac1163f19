"""KafkaConfig: Kafka 2.6's defaults, precedence rules, properties syntax, and errors that name their key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.broker.config import (
    CONFIG_KEYS,
    TOPIC_CONFIG_SYNONYMS,
    ConfigError,
    ConfigSource,
    ConfigType,
    DynamicUpdateMode,
    EndPoint,
    KafkaConfig,
    SecurityProtocol,
    load_properties,
)


def config(**props: str) -> KafkaConfig:
    return KafkaConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})


def expect_error(props: dict[str, str], key: str, fragment: str = "") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        KafkaConfig.from_properties(props)
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ")
    assert fragment in str(info.value)
    return info.value


# ------------------------------------------------------------------------------------------- defaults


def test_defaults_are_kafka_2_6_defaults() -> None:
    c = KafkaConfig.from_properties({})
    expected = {
        "num.partitions": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "auto.create.topics.enable": True,
        "delete.topic.enable": True,
        "message.max.bytes": 1048588,
        "replica.fetch.max.bytes": 1048576,
        "socket.request.max.bytes": 104857600,
        "connections.max.idle.ms": 600000,
        "log.segment.bytes": 1073741824,
        "log.roll.hours": 168,
        "log.retention.hours": 168,
        "log.retention.bytes": -1,
        "log.retention.check.interval.ms": 300000,
        "log.index.size.max.bytes": 10485760,
        "log.index.interval.bytes": 4096,
        "log.flush.interval.messages": 2**63 - 1,
        "log.cleanup.policy": ["delete"],
        "log.cleaner.enable": True,
        "log.message.timestamp.type": "CreateTime",
        "offsets.topic.num.partitions": 50,
        "offsets.topic.replication.factor": 3,
        "offsets.retention.minutes": 10080,
        "group.initial.rebalance.delay.ms": 3000,
        "group.min.session.timeout.ms": 6000,
        "group.max.session.timeout.ms": 1800000,
        "group.max.size": 2**31 - 1,
        "transaction.state.log.num.partitions": 50,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
        "transaction.state.log.segment.bytes": 104857600,
        "transactional.id.expiration.ms": 604800000,
        "transaction.max.timeout.ms": 900000,
        "unclean.leader.election.enable": False,
        "replica.lag.time.max.ms": 30000,
        "auto.leader.rebalance.enable": True,
        "controlled.shutdown.enable": True,
        "zookeeper.session.timeout.ms": 18000,
        "num.network.threads": 3,
        "num.io.threads": 8,
        "broker.rack": None,
        "broker.id": -1,
        "compression.type": "producer",
        "fetch.max.bytes": 57671680,
    }
    for name, value in expected.items():
        assert c.get(name) == value, name
        assert c.source(name) is ConfigSource.DEFAULT_CONFIG


def test_no_file_listens_on_loopback_9092_with_the_embedded_store() -> None:
    c = KafkaConfig.from_properties({})
    assert c.listeners == [EndPoint("PLAINTEXT", "127.0.0.1", 9092, SecurityProtocol.PLAINTEXT)]
    assert c.advertised_listeners == c.listeners
    assert c.inter_broker_listener_name == "PLAINTEXT"
    assert c.uses_embedded_store
    assert c.zookeeper_connect is None and c.zookeeper_chroot is None
    assert c.effective_broker_id() == 0
    assert c.log_dirs and c.log_dirs[0] != "/tmp/kafka-logs"
    assert c.metadata_dir == Path(c.log_dirs[0]) / "__sofakafka_metadata"


def test_broker_id_minus_one_is_generated_only_with_zookeeper() -> None:
    assert config(zookeeper_connect="zk:2181").effective_broker_id() is None
    assert config(broker_id="7", zookeeper_connect="zk:2181").effective_broker_id() == 7
    assert config(broker_id="3").effective_broker_id() == 3


def test_every_key_declares_a_dynamic_mode_and_topic_synonyms_point_back() -> None:
    for key in CONFIG_KEYS.values():
        assert isinstance(key.dynamic, DynamicUpdateMode)
        assert key.name.startswith("sofakafka.") or not key.name.startswith("sofa")
    assert CONFIG_KEYS["log.dirs"].dynamic is DynamicUpdateMode.READ_ONLY
    assert CONFIG_KEYS["listeners"].dynamic is DynamicUpdateMode.PER_BROKER
    assert CONFIG_KEYS["log.segment.bytes"].dynamic is DynamicUpdateMode.CLUSTER_WIDE
    assert CONFIG_KEYS["message.max.bytes"].topic_config == "max.message.bytes"
    assert CONFIG_KEYS["log.segment.bytes"].topic_config == "segment.bytes"
    assert TOPIC_CONFIG_SYNONYMS["retention.ms"] == ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
    assert TOPIC_CONFIG_SYNONYMS["segment.ms"] == ("log.roll.ms", "log.roll.hours")
    assert TOPIC_CONFIG_SYNONYMS["flush.ms"] == ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    assert not CONFIG_KEYS["num.io.threads"].applicable and not CONFIG_KEYS["num.network.threads"].applicable
    assert CONFIG_KEYS["ssl.keystore.password"].type is ConfigType.PASSWORD


def test_topic_defaults_follow_broker_settings() -> None:
    c = config(log_retention_minutes="10", log_segment_bytes="1024", log_cleanup_policy="compact, delete")
    defaults = c.topic_config_defaults()
    assert defaults["retention.ms"] == 600_000
    assert defaults["segment.bytes"] == 1024
    assert defaults["cleanup.policy"] == ["compact", "delete"]
    assert defaults["max.message.bytes"] == 1048588
    assert defaults["flush.ms"] == 2**63 - 1


# ----------------------------------------------------------------------------------------- precedence


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert config().log_retention_ms == 168 * 3_600_000
    assert config(log_retention_hours="1").log_retention_ms == 3_600_000
    assert config(log_retention_hours="1", log_retention_minutes="5").log_retention_ms == 300_000
    assert config(log_retention_hours="1", log_retention_minutes="5", log_retention_ms="42").log_retention_ms == 42
    assert config(log_retention_ms="-1").log_retention_ms == -1
    assert config(log_retention_hours="-5").log_retention_ms == -1
    assert config(log_retention_ms="-2").log_retention_ms == -1


def test_retention_synonyms_report_sources_in_precedence_order() -> None:
    c = config(log_retention_minutes="5")
    entries = c.synonyms("log.retention.ms")
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("log.retention.minutes", "5", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]


def test_roll_flush_and_dirs_fallbacks() -> None:
    assert config().log_roll_ms == 168 * 3_600_000
    assert config(log_roll_hours="2").log_roll_ms == 7_200_000
    assert config(log_roll_hours="2", log_roll_ms="1000").log_roll_ms == 1000
    assert config(log_flush_interval_ms="50").log_flush_interval_ms == 50
    assert config(log_flush_scheduler_interval_ms="70").log_flush_interval_ms == 70
    assert config(log_dir="/data/a").log_dirs == ["/data/a"]
    assert config(log_dir="/data/a", log_dirs=" /data/b , /data/c ").log_dirs == ["/data/b", "/data/c"]
    assert config(zookeeper_session_timeout_ms="9000").zookeeper_connection_timeout_ms == 9000
    c = config(zookeeper_session_timeout_ms="9000", zookeeper_connection_timeout_ms="100")
    assert c.zookeeper_connection_timeout_ms == 100


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nbroker.id=1\n")
    c = KafkaConfig.load(path, ["num.partitions=5", "log.dirs=/x"])
    assert c.get("num.partitions") == 5
    assert c.broker_id == 1
    assert c.log_dirs == ["/x"]
    assert c.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG


def test_zookeeper_connect_with_chroot() -> None:
    c = config(zookeeper_connect="zk1:2181,zk2:2182/kafka/prod")
    assert not c.uses_embedded_store
    assert c.zookeeper_connect == "zk1:2181,zk2:2182"
    assert c.zookeeper_chroot == "/kafka/prod"
    assert config(zookeeper_connect="zk1:2181/").zookeeper_chroot is None
    assert config(zookeeper_connect="").uses_embedded_store


# ------------------------------------------------------------------------------------------ listeners


def test_listeners_with_names_ipv6_and_empty_host() -> None:
    c = config(
        listeners="plaintext://:9092,INTERNAL://[::1]:9093,SECURE://host.example:9094",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,SECURE:SASL_SSL",
        inter_broker_listener_name="internal",
    )
    assert c.listeners == [
        EndPoint("PLAINTEXT", "", 9092, SecurityProtocol.PLAINTEXT),
        EndPoint("INTERNAL", "::1", 9093, SecurityProtocol.SASL_PLAINTEXT),
        EndPoint("SECURE", "host.example", 9094, SecurityProtocol.SASL_SSL),
    ]
    assert c.listeners[1].connection_string() == "INTERNAL://[::1]:9093"
    assert c.inter_broker_listener_name == "INTERNAL"


def test_advertised_listeners_are_separate_from_bind_addresses() -> None:
    c = config(listeners="PLAINTEXT://0.0.0.0:9092", advertised_listeners="PLAINTEXT://kafka1:19092")
    assert c.listeners[0].host == "0.0.0.0"
    assert c.advertised_listeners == [EndPoint("PLAINTEXT", "kafka1", 19092, SecurityProtocol.PLAINTEXT)]


@pytest.mark.parametrize(
    ("props", "key", "fragment"),
    [
        ({"listeners": "PLAINTEXT:/localhost:9092"}, "listeners", "NAME://host:port"),
        ({"listeners": "PLAINTEXT://localhost"}, "listeners", "NAME://host:port"),
        ({"listeners": "PLAINTEXT://localhost:70000"}, "listeners", "between 0 and 65535"),
        ({"listeners": "FOO://localhost:9092"}, "listeners", "no security protocol defined for listener FOO"),
        ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "listeners", "different name"),
        ({"listeners": "PLAINTEXT://a:1,SSL://b:1"}, "listeners", "different port"),
        ({"listeners": ""}, "listeners", "at least one"),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "0.0.0.0"),
        (
            {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:9093"},
            "advertised.listeners",
            "not in listeners",
        ),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map", "TLS"),
        ({"listener.security.protocol.map": "PLAINTEXT"}, "listener.security.protocol.map", "NAME:PROTOCOL"),
        ({"inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name", "REPLICATION"),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
            "inter.broker.listener.name",
            "only one",
        ),
        ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol", "SSL"),
    ],
)
def test_listener_errors_name_their_key(props: dict[str, str], key: str, fragment: str) -> None:
    expect_error(props, key, fragment)


# ------------------------------------------------------------------------------------- value errors


@pytest.mark.parametrize(
    ("props", "key", "fragment"),
    [
        ({"num.partitions": "0"}, "num.partitions", "must be >= 1, got 0"),
        ({"num.partitions": "three"}, "num.partitions", "integer"),
        ({"num.partitions": "99999999999"}, "num.partitions", "does not fit"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable", "true or false"),
        ({"log.cleanup.policy": "delete,archive"}, "log.cleanup.policy", "archive"),
        ({"log.message.timestamp.type": "createtime"}, "log.message.timestamp.type", "CreateTime"),
        ({"compression.type": "brotli"}, "compression.type", "brotli"),
        ({"log.segment.bytes": "10"}, "log.segment.bytes", ">= 14"),
        ({"log.retention.ms": "0"}, "log.retention.ms", "-1"),
        ({"log.retention.hours": "0"}, "log.retention.hours", "-1"),
        ({"log.retention.minutes": "0"}, "log.retention.minutes", "-1"),
        ({"log.roll.hours": "0"}, "log.roll.hours", ">= 1"),
        ({"log.cleaner.min.cleanable.ratio": "half"}, "log.cleaner.min.cleanable.ratio", "number"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas", ">= 1"),
        ({"default.replication.factor": "0"}, "default.replication.factor", ">= 1"),
        ({"offsets.topic.replication.factor": "40000"}, "offsets.topic.replication.factor", "SHORT"),
        ({"broker.id": "-2"}, "broker.id", "-1"),
        ({"broker.id": "1001"}, "broker.id", "reserved.broker.max.id"),
        ({"broker.id": "-1", "broker.id.generation.enable": "false"}, "broker.id", ">= 0"),
        ({"zookeeper.connect": "zk"}, "zookeeper.connect", "host:port"),
        ({"zookeeper.connect": "zk:2181/kafka/"}, "zookeeper.connect", "chroot"),
        ({"log.dirs": " , "}, "log.dirs", "at least one"),
        ({"log.message.format.version": "3.9-foo"}, "log.message.format.version", "Kafka version"),
        ({"group.min.session.timeout.ms": "9000", "group.max.session.timeout.ms": "8000"}, "group.max.session.timeout.ms", ""),
        ({"transaction.state.log.min.isr": "4"}, "transaction.state.log.min.isr", "replication.factor"),
        ({"replica.fetch.wait.max.ms": "40000"}, "replica.fetch.wait.max.ms", "replica.socket.timeout.ms"),
        ({"num.io.threads": "0"}, "num.io.threads", ">= 1"),
        ({"sofakafka.metadata.snapshot.interval.ops": "0"}, "sofakafka.metadata.snapshot.interval.ops", ">= 1"),
    ],
)
def test_bad_values_name_their_key(props: dict[str, str], key: str, fragment: str) -> None:
    expect_error(props, key, fragment)


def test_unknown_key_stops_start_up_and_suggests_the_close_one() -> None:
    error = expect_error({"log.retention.hour": "1"}, "log.retention.hour", "unknown configuration key")
    assert "log.retention.hours" in str(error)
    expect_error({"sofakafka.nonsense": "1"}, "sofakafka.nonsense", "unknown")


def test_listener_prefixed_keys_are_accepted_as_is() -> None:
    c = KafkaConfig.from_properties({"listener.name.sasl_ssl.plain.sasl.jaas.config": "x required;"})
    assert c.listener_overrides == {"listener.name.sasl_ssl.plain.sasl.jaas.config": "x required;"}


def test_bad_override_syntax_names_it() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        KafkaConfig.load(None, ["num.partitions"])


def test_missing_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(ConfigError) as info:
        KafkaConfig.load(missing)
    assert info.value.key == str(missing)


def test_values_are_trimmed_and_booleans_case_insensitive() -> None:
    c = config(num_partitions="  4 ", delete_topic_enable="FALSE", broker_rack=" r1 ")
    assert c.get("num.partitions") == 4
    assert c.get("delete.topic.enable") is False
    assert c.get("broker.rack") == "r1"
    assert c.value_string("delete.topic.enable") == "false"


def test_passwords_are_never_reported() -> None:
    c = config(ssl_keystore_password=" secret ")
    assert c.get("ssl.keystore.password") == " secret "
    assert c.value_string("ssl.keystore.password") is None


# --------------------------------------------------------------------------------- properties syntax


def test_properties_syntax() -> None:
    text = (
        "# a comment\n"
        "! another comment \\\n"
        "broker.id=1\n"
        "   num.partitions : 3\n"
        "log.dirs /a,\\\n"
        "         /b\n"
        "\n"
        "key\\=with\\:seps = value with spaces  \n"
        "unicode=caf\\u00e9\\tx\n"
        "empty=\n"
        "justkey\n"
        "escaped\\ space=1\n"
        "trailing=back\\\\\n"
        "broker.id=2\n"
    )
    props = load_properties(text)
    assert props == {
        "broker.id": "2",
        "num.partitions": "3",
        "log.dirs": "/a,/b",
        "key=with:seps": "value with spaces  ",
        "unicode": "café\tx",
        "empty": "",
        "justkey": "",
        "escaped space": "1",
        "trailing": "back\\",
    }


def test_properties_crlf_and_continuation_at_end_of_file() -> None:
    assert load_properties("a=1\r\nb=2\\\r\n  3\r\nc=4\\") == {"a": "1", "b": "23", "c": "4"}


def test_malformed_unicode_escape_names_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        load_properties("bad.key=\\u12x4\n")
    assert info.value.key == "bad.key"


def test_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "broker.id=0\nlisteners=PLAINTEXT://:9092\nadvertised.listeners=PLAINTEXT://localhost:9092\n"
        "log.dirs=/tmp/kafka-logs\nzookeeper.connect=localhost:2181\nnum.partitions=1\n"
        "log.retention.hours=168\nlog.segment.bytes=1073741824\nlog.retention.check.interval.ms=300000\n"
        "num.network.threads=3\nnum.io.threads=8\nsocket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\nsocket.request.max.bytes=104857600\n"
        "num.recovery.threads.per.data.dir=1\noffsets.topic.replication.factor=1\n"
        "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
        "zookeeper.connection.timeout.ms=18000\ngroup.initial.rebalance.delay.ms=0\n"
    )
    # Kafka 2.6's own config/server.properties (values, not prose) loads unchanged.
    c = KafkaConfig.load(path)
    assert c.zookeeper_connect == "localhost:2181"
    assert c.get("group.initial.rebalance.delay.ms") == 0


_key_chars = st.text(st.characters(codec="utf-8", exclude_characters="\r\n\\=: \t\f#!", exclude_categories=("Cs",)), min_size=1)
_value_chars = st.text(st.characters(codec="utf-8", exclude_characters="\r\n\\", exclude_categories=("Cs",)))


@given(st.dictionaries(_key_chars, _value_chars, max_size=8))
def test_simple_key_value_lines_parse_back(props: dict[str, str]) -> None:
    text = "".join(f"{k}={v}\n" for k, v in props.items())
    expected = {k: v.lstrip(" \t\f") for k, v in props.items()}
    assert load_properties(text) == expected


@pytest.mark.parametrize(
    "name", sorted(k.name for k in CONFIG_KEYS.values() if k.type not in (ConfigType.STRING, ConfigType.PASSWORD, ConfigType.LIST, ConfigType.CLASS))
)
def test_every_typed_key_refuses_garbage_naming_itself(name: str) -> None:
    expect_error({name: "not-a-value!"}, name)


def test_every_key_accepts_its_own_default_written_out() -> None:
    written: dict[str, str] = {}
    for key in CONFIG_KEYS.values():
        value = KafkaConfig.from_properties({}).value_string(key.name)
        if value is not None:
            written[key.name] = value
    c = KafkaConfig.from_properties(written)
    defaults = KafkaConfig.from_properties({})
    for name in written:
        assert c.get(name) == defaults.get(name), name


def test_no_properties_file_gives_internal_topics_one_replica_as_kafkas_sample_config() -> None:
    # One broker cannot host 3 replicas: without this, `sofakafka serve` alone never serves consumer groups.
    from sofakafka.broker.config import KafkaConfig

    cfg = KafkaConfig.load(None, [])
    assert cfg.get_int("offsets.topic.replication.factor") == 1
    assert cfg.get_int("transaction.state.log.replication.factor") == 1
    assert cfg.get_int("transaction.state.log.min.isr") == 1
    # An override still wins, and a file means the operator chose: Kafka's built-in default applies.
    assert KafkaConfig.load(None, ["offsets.topic.replication.factor=2"]).get_int("offsets.topic.replication.factor") == 2


def test_a_properties_file_keeps_kafkas_default_of_three_offsets_replicas(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sofakafka.broker.config import KafkaConfig

    f = tmp_path / "server.properties"
    f.write_text("num.partitions=2\n")
    assert KafkaConfig.load(f, []).get_int("offsets.topic.replication.factor") == 3


@pytest.mark.parametrize(("props", "expected"), [
    ({}, None),
    ({"delegation.token.master.key": "m"}, "m"),
    ({"delegation.token.master.key": ""}, None),  # Kafka: empty means off
    ({"delegation.token.secret.key": "s", "delegation.token.master.key": "m"}, "s"),  # Kafka 3.0's name wins
    ({"delegation.token.secret.key": "", "delegation.token.master.key": "m"}, None),  # set, even empty, it wins
])
def test_the_delegation_token_secret_and_its_later_name(props: dict[str, str], expected: str | None) -> None:
    assert KafkaConfig.from_properties(props).delegation_token_master_key == expected
