"""The "consumer" embedded protocol: subscription and assignment bytes that members put in JoinGroup/SyncGroup.

The broker treats them as opaque except in two places, as Kafka does: offsets of topics a consumer group no
longer subscribes to may expire while it has members, and tools describe who owns which partition.
Subscription v0: version int16, topics [string], user_data nullable bytes; v1 adds owned_partitions
[{topic string, partitions [int32]}] (KIP-429). Assignment v0/v1: version int16, partitions
[{topic string, partitions [int32]}], user_data nullable bytes. Newer versions only append fields, so a
reader takes the fields it knows and ignores the rest, as the Java client does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sofakafka.protocol.primitives import (
    Buffer,
    read_array_length,
    read_int16,
    read_int32,
    read_nullable_bytes,
    read_string,
    write_array_length,
    write_int16,
    write_int32,
    write_nullable_bytes,
    write_string,
)

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    version: int = 0


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[tuple[str, tuple[int, ...]], ...] = field(default_factory=tuple)
    user_data: bytes | None = None
    version: int = 0

    def topic_partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t, ps in self.partitions for p in ps]


def _write_topic_partitions(out: bytearray, tps: Sequence[tuple[str, Sequence[int]]]) -> None:
    write_array_length(out, len(tps))
    for topic, partitions in tps:
        write_string(out, topic)
        write_array_length(out, len(partitions))
        for p in partitions:
            write_int32(out, p)


def _read_topic_partitions(buf: Buffer, pos: int) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], int]:
    n, pos = read_array_length(buf, pos)
    result = []
    for _ in range(n or 0):
        topic, pos = read_string(buf, pos)
        m, pos = read_array_length(buf, pos)
        parts = []
        for _ in range(m or 0):
            p, pos = read_int32(buf, pos)
            parts.append(p)
        result.append((topic, tuple(parts)))
    return tuple(result), pos


def encode_subscription(sub: Subscription) -> bytes:
    out = bytearray()
    write_int16(out, sub.version)
    write_array_length(out, len(sub.topics))
    for t in sub.topics:
        write_string(out, t)
    write_nullable_bytes(out, sub.user_data)
    if sub.version >= 1:
        _write_topic_partitions(out, sub.owned_partitions)
    return bytes(out)


def decode_subscription(buf: Buffer) -> Subscription:
    version, pos = read_int16(buf, 0)
    n, pos = read_array_length(buf, pos)
    topics = []
    for _ in range(n or 0):
        t, pos = read_string(buf, pos)
        topics.append(t)
    user_data, pos = read_nullable_bytes(buf, pos)
    owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
    if version >= 1 and pos < len(buf):
        owned, pos = _read_topic_partitions(buf, pos)
    return Subscription(tuple(topics), user_data, owned, version)


def encode_assignment(assignment: Assignment | Mapping[str, Sequence[int]]) -> bytes:
    if not isinstance(assignment, Assignment):
        assignment = Assignment(tuple((t, tuple(ps)) for t, ps in assignment.items()))
    out = bytearray()
    write_int16(out, assignment.version)
    _write_topic_partitions(out, assignment.partitions)
    write_nullable_bytes(out, assignment.user_data)
    return bytes(out)


def decode_assignment(buf: Buffer) -> Assignment:
    """An empty buffer is an empty assignment: that is what the broker hands a member the leader skipped."""
    if len(buf) == 0:
        return Assignment()
    version, pos = read_int16(buf, 0)
    partitions, pos = _read_topic_partitions(buf, pos)
    user_data: bytes | None = None
    if pos < len(buf):
        user_data, pos = read_nullable_bytes(buf, pos)
    return Assignment(partitions, user_data, version)
