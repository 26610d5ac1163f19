import pytest

from sofakafka.protocol.errors import ErrorCode
from sofakafka.storage.config import LONG_MAX, TOPIC_CONFIG_NAMES, LogConfig
from sofakafka.storage.errors import InvalidLogConfigError


def test_defaults_are_kafka_2_6s() -> None:
    props = LogConfig().to_props()
    assert props["segment.bytes"] == "1073741824"
    assert props["segment.ms"] == "604800000"
    assert props["retention.ms"] == "604800000"
    assert props["retention.bytes"] == "-1"
    assert props["segment.index.bytes"] == "10485760"
    assert props["index.interval.bytes"] == "4096"
    assert props["max.message.bytes"] == "1048588"
    assert props["flush.messages"] == str(LONG_MAX)
    assert props["flush.ms"] == str(LONG_MAX)
    assert props["file.delete.delay.ms"] == "60000"
    assert props["cleanup.policy"] == "delete"
    assert props["min.cleanable.dirty.ratio"] == "0.5"
    assert props["delete.retention.ms"] == "86400000"
    assert props["min.compaction.lag.ms"] == "0"
    assert props["message.timestamp.type"] == "CreateTime"
    assert props["segment.jitter.ms"] == "0"
    assert props["preallocate"] == "false"
    assert set(props) == set(TOPIC_CONFIG_NAMES)


def test_string_values_parse_into_types() -> None:
    c = LogConfig.from_props({"segment.bytes": "1024", "cleanup.policy": "compact, delete", "preallocate": "TRUE",
                              "min.cleanable.dirty.ratio": "0.25", "message.timestamp.type": "LogAppendTime"})
    assert c.segment_bytes == 1024
    assert c.compact and c.delete
    assert c.preallocate is True
    assert c.min_cleanable_dirty_ratio == 0.25
    assert c.log_append_time
    assert LogConfig.from_props(c.to_props()) == c


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("segment.bytes", "13", "at least 14"),
        ("segment.bytes", "big", "integer"),
        ("retention.ms", "-2", "at least -1"),
        ("cleanup.policy", "shred", "unknown cleanup policy"),
        ("cleanup.policy", "", "at least one"),
        ("min.cleanable.dirty.ratio", "1.5", "between"),
        ("message.timestamp.type", "WallTime", "one of"),
        ("preallocate", "yes", "true or false"),
        ("segment.bytez", "1", "unknown topic configuration"),
    ],
)
def test_invalid_values_name_key_and_reason(key: str, value: str, reason: str) -> None:
    with pytest.raises(InvalidLogConfigError, match=reason) as info:
        LogConfig.from_props({key: value})
    assert info.value.key == key
    assert key in str(info.value)
    assert info.value.code is ErrorCode.INVALID_CONFIG


def test_broker_defaults_map_onto_topic_keys() -> None:
    c = LogConfig.from_broker_props({"log.segment.bytes": "2048", "log.retention.hours": "2", "broker.id": "1",
                                     "log.cleanup.policy": "compact"})
    assert c.segment_bytes == 2048
    assert c.retention_ms == 7_200_000
    assert c.cleanup_policy == ("compact",)
    assert LogConfig.from_broker_props({"log.retention.ms": "5", "log.retention.hours": "2"}).retention_ms == 5
    assert LogConfig.from_broker_props({"log.retention.hours": "-1"}).retention_ms == -1
