"""Per-topic log configuration with Kafka's names, defaults and validation rules.

Values arrive as strings (CreateTopics, AlterConfigs, server.properties) or as Python values (tests, code).
``LogConfig.from_props`` turns either into a typed, validated, immutable object; unknown keys are refused so a
typo never silently falls back to a default. Broker-wide defaults (``log.segment.bytes`` ...) map onto topic
keys through ``BROKER_TO_TOPIC``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sofakafka.storage.errors import InvalidLogConfigError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

CLEANUP_DELETE = "delete"
CLEANUP_COMPACT = "compact"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def _parse_bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidLogConfigError(key, raw, "expected true or false")


def _parse_int(key: str, raw: object) -> int:
    if isinstance(raw, bool):
        raise InvalidLogConfigError(key, raw, "expected an integer")
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidLogConfigError(key, raw, "expected an integer") from None


def _parse_float(key: str, raw: object) -> float:
    if isinstance(raw, bool):
        raise InvalidLogConfigError(key, raw, "expected a number")
    if isinstance(raw, int | float):
        return float(raw)
    try:
        return float(str(raw).strip())
    except ValueError:
        raise InvalidLogConfigError(key, raw, "expected a number") from None


def _parse_list(key: str, raw: object) -> tuple[str, ...]:
    if isinstance(raw, list | tuple):
        items = [str(x).strip() for x in raw]
    else:
        items = [x.strip() for x in str(raw).split(",")]
    return tuple(x for x in items if x)


@dataclass(frozen=True)
class _Key:
    name: str
    attr: str
    parse: Callable[[str, object], Any]
    check: Callable[[Any], str | None]


def _at_least(low: int | float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"value must be at least {low}"


def _between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"value must be between {low} and {high}"


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"value must be one of {', '.join(choices)}"


def _cleanup_policy(v: tuple[str, ...]) -> str | None:
    if not v:
        return "at least one of delete, compact is required"
    bad = [p for p in v if p not in (CLEANUP_DELETE, CLEANUP_COMPACT)]
    return f"unknown cleanup policy {bad[0]!r}; allowed: delete, compact" if bad else None


def _any(_: Any) -> str | None:
    return None


_THROTTLED_REPLICA = re.compile(r"^([0-9]+:[0-9]+)?$")


def throttled_replicas_error(v: str) -> str | None:
    """Kafka's ThrottledReplicaListValidator: the literal ``*`` or ``partitionId:brokerId`` items (KIP-73)."""
    items = [item.strip() for item in v.split(",")]
    if all(_THROTTLED_REPLICA.match(item) for item in items) or "".join(items) == "*":
        return None
    return ("must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


@dataclass(frozen=True)
class LogConfig:
    """Everything a Log needs to decide rolls, indexes, flushes, retention and compaction.

    Attribute names are Kafka's keys with dots turned into underscores; defaults are Kafka 2.6's.
    """

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    max_message_bytes: int = 1_048_588
    file_delete_delay_ms: int = 60_000
    cleanup_policy: tuple[str, ...] = (CLEANUP_DELETE,)
    min_cleanable_dirty_ratio: float = 0.5
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_format_version: str = "2.6-IV0"
    message_downconversion_enable: bool = True
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    @property
    def compact(self) -> bool:
        return CLEANUP_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return CLEANUP_DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_size(self) -> int:
        """``segment.index.bytes`` as the byte size every index is preallocated to."""
        return self.segment_index_bytes

    @classmethod
    def from_props(cls, props: Mapping[str, object], base: LogConfig | None = None) -> LogConfig:
        """Parse and validate Kafka topic config keys (``segment.bytes`` ...) on top of ``base``.

        Raises InvalidLogConfigError naming the key and the reason for the first bad entry.
        """
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            spec = _KEYS.get(key)
            if spec is None:
                raise InvalidLogConfigError(key, raw, "unknown topic configuration")
            value = spec.parse(key, raw)
            problem = spec.check(value)
            if problem is not None:
                raise InvalidLogConfigError(key, raw, problem)
            changes[spec.attr] = value
        return dataclasses.replace(base or cls(), **changes)

    @classmethod
    def from_broker_props(cls, props: Mapping[str, object]) -> LogConfig:
        """Topic defaults from server.properties keys (``log.segment.bytes``, ``log.retention.hours`` ...).

        Keys that are not log defaults are ignored: server.properties holds much more than these.
        """
        topic: dict[str, object] = {}
        for broker_key, topic_key in BROKER_TO_TOPIC.items():
            if broker_key in props:
                topic[topic_key] = props[broker_key]
        # Kafka's precedence for retention: ms over minutes over hours.
        for key, factor in (("log.retention.hours", 3_600_000), ("log.retention.minutes", 60_000)):
            if key in props and "log.retention.ms" not in props:
                value = _parse_int(key, props[key])
                topic["retention.ms"] = -1 if value < 0 else value * factor
                break
        for key, factor in (("log.roll.hours", 3_600_000),):
            if key in props and "log.roll.ms" not in props:
                topic["segment.ms"] = _parse_int(key, props[key]) * factor
        for key, factor in (("log.roll.jitter.hours", 3_600_000),):
            if key in props and "log.roll.jitter.ms" not in props:
                topic["segment.jitter.ms"] = _parse_int(key, props[key]) * factor
        if "log.flush.interval.ms" not in props and "log.flush.scheduler.interval.ms" in props:
            topic["flush.ms"] = props["log.flush.scheduler.interval.ms"]
        return cls.from_props(topic)

    def to_props(self) -> dict[str, str]:
        """Kafka key -> string value, as DescribeConfigs reports them."""
        out: dict[str, str] = {}
        for spec in _KEYS.values():
            value = getattr(self, spec.attr)
            if isinstance(value, bool):
                out[spec.name] = "true" if value else "false"
            elif isinstance(value, tuple):
                out[spec.name] = ",".join(value)
            else:
                out[spec.name] = str(value)
        return out


_KEYS: dict[str, _Key] = {
    k.name: k
    for k in (
        _Key("segment.bytes", "segment_bytes", _parse_int, _at_least(14)),
        _Key("segment.ms", "segment_ms", _parse_int, _at_least(1)),
        _Key("segment.jitter.ms", "segment_jitter_ms", _parse_int, _at_least(0)),
        _Key("segment.index.bytes", "segment_index_bytes", _parse_int, _at_least(0)),
        _Key("index.interval.bytes", "index_interval_bytes", _parse_int, _at_least(0)),
        _Key("flush.messages", "flush_messages", _parse_int, _at_least(0)),
        _Key("flush.ms", "flush_ms", _parse_int, _at_least(0)),
        _Key("retention.bytes", "retention_bytes", _parse_int, _any),
        _Key("retention.ms", "retention_ms", _parse_int, _at_least(-1)),
        _Key("max.message.bytes", "max_message_bytes", _parse_int, _at_least(0)),
        _Key("file.delete.delay.ms", "file_delete_delay_ms", _parse_int, _at_least(0)),
        _Key("cleanup.policy", "cleanup_policy", _parse_list, _cleanup_policy),
        _Key("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", _parse_float, _between(0.0, 1.0)),
        _Key("delete.retention.ms", "delete_retention_ms", _parse_int, _at_least(0)),
        _Key("min.compaction.lag.ms", "min_compaction_lag_ms", _parse_int, _at_least(0)),
        _Key("max.compaction.lag.ms", "max_compaction_lag_ms", _parse_int, _at_least(1)),
        _Key("message.timestamp.type", "message_timestamp_type", lambda k, v: str(v).strip(),
             _one_of(TIMESTAMP_TYPES)),
        _Key("message.timestamp.difference.max.ms", "message_timestamp_difference_max_ms", _parse_int,
             _at_least(0)),
        _Key("message.format.version", "message_format_version", lambda k, v: str(v).strip(), _any),
        _Key("message.downconversion.enable", "message_downconversion_enable", _parse_bool, _any),
        _Key("compression.type", "compression_type", lambda k, v: str(v).strip().lower(),
             _one_of(COMPRESSION_TYPES)),
        _Key("min.insync.replicas", "min_insync_replicas", _parse_int, _at_least(1)),
        _Key("unclean.leader.election.enable", "unclean_leader_election_enable", _parse_bool, _any),
        _Key("preallocate", "preallocate", _parse_bool, _any),
        _Key("leader.replication.throttled.replicas", "leader_replication_throttled_replicas",
             lambda k, v: str(v).strip(), throttled_replicas_error),
        _Key("follower.replication.throttled.replicas", "follower_replication_throttled_replicas",
             lambda k, v: str(v).strip(), throttled_replicas_error),
    )
}

TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(_KEYS)

# server.properties default key -> topic key it provides the default for (Kafka's LogConfig synonyms).
BROKER_TO_TOPIC: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.bytes": "retention.bytes",
    "log.retention.ms": "retention.ms",
    "message.max.bytes": "max.message.bytes",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.message.format.version": "message.format.version",
    "log.message.downconversion.enable": "message.downconversion.enable",
    "compression.type": "compression.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.preallocate": "preallocate",
}
