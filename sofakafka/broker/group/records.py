"""``__consumer_offsets`` record formats, byte-compatible with Kafka 2.6 (INTERNAL-TOPICS.md section 1).

Every key and value is an int16 schema version followed by that version's fields in the classic encoding.
The key version tells record types apart: 0 and 1 are offset commits (2.6 writes 1), 2 is group metadata.
We write what a 2.6 broker with the default inter.broker.protocol writes (offset value v3, or v1 when the
commit carried an explicit retention; group value v3) and read every version, so a Kafka data dir loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sofakafka.protocol.errors import DecodeError
from sofakafka.protocol.primitives import (
    Buffer,
    read_array_length,
    read_bytes,
    read_int16,
    read_int32,
    read_int64,
    read_nullable_string,
    read_string,
    write_array_length,
    write_bytes,
    write_int16,
    write_int32,
    write_int64,
    write_nullable_string,
    write_string,
)

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, 32-bit wrapping, signed."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partition_count: int) -> int:
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    return (0 if h == -(2**31) else abs(h)) % partition_count


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    """A committed offset; ``expire_timestamp`` None = no explicit expiry, ``leader_epoch`` -1 = unknown.

    An explicit expiry is any int64, negative too: 2.6 computes it as now + retention_time in wrapping long
    arithmetic, so a retention near 2^63 wraps to a past time and the offset expires at the next sweep."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


def encode_key(key: OffsetKey | GroupMetadataKey) -> bytes:
    out = bytearray()
    if isinstance(key, OffsetKey):
        write_int16(out, OFFSET_KEY_VERSION)
        write_string(out, key.group)
        write_string(out, key.topic)
        write_int32(out, key.partition)
    else:
        write_int16(out, GROUP_KEY_VERSION)
        write_string(out, key.group)
    return bytes(out)


def decode_key(buf: Buffer) -> OffsetKey | GroupMetadataKey:
    version, pos = read_int16(buf, 0)
    if version in (0, 1):
        group, pos = read_string(buf, pos)
        topic, pos = read_string(buf, pos)
        partition, pos = read_int32(buf, pos)
        return OffsetKey(group, topic, partition)
    if version == 2:
        group, pos = read_string(buf, pos)
        return GroupMetadataKey(group)
    raise DecodeError(f"unknown __consumer_offsets key version {version}")


def offset_value_version(value: OffsetValue) -> int:
    """2.6 writes v1 only when the commit set an explicit expiry (OffsetCommit v2-v4 retention_time)."""
    return 1 if value.expire_timestamp is not None else 3


def encode_offset_value(value: OffsetValue, version: int | None = None) -> bytes:
    v = offset_value_version(value) if version is None else version
    out = bytearray()
    write_int16(out, v)
    write_int64(out, value.offset)
    if v == 3:
        write_int32(out, value.leader_epoch)
    elif v not in (0, 1, 2):
        raise ValueError(f"unknown offset commit value version {v}")
    write_string(out, value.metadata)
    write_int64(out, value.commit_timestamp)
    if v == 1:
        write_int64(out, -1 if value.expire_timestamp is None else value.expire_timestamp)
    return bytes(out)


def decode_offset_value(buf: Buffer) -> OffsetValue:
    version, pos = read_int16(buf, 0)
    if version not in (0, 1, 2, 3):
        raise DecodeError(f"unknown offset commit value version {version}")
    offset, pos = read_int64(buf, pos)
    leader_epoch = -1
    if version == 3:
        leader_epoch, pos = read_int32(buf, pos)
        leader_epoch = max(leader_epoch, -1)
    metadata, pos = read_string(buf, pos)
    commit_timestamp, pos = read_int64(buf, pos)
    expire_timestamp: int | None = None
    if version == 1:
        expire_timestamp, pos = read_int64(buf, pos)
    return OffsetValue(offset, metadata, commit_timestamp, expire_timestamp, leader_epoch)


def encode_group_value(value: GroupMetadataValue, version: int = 3) -> bytes:
    if version not in (0, 1, 2, 3):
        raise ValueError(f"unknown group metadata value version {version}")
    out = bytearray()
    write_int16(out, version)
    write_string(out, value.protocol_type)
    write_int32(out, value.generation)
    write_nullable_string(out, value.protocol)
    write_nullable_string(out, value.leader)
    if version >= 2:
        write_int64(out, value.current_state_timestamp)
    write_array_length(out, len(value.members))
    for m in value.members:
        write_string(out, m.member_id)
        if version >= 3:
            write_nullable_string(out, m.group_instance_id)
        write_string(out, m.client_id)
        write_string(out, m.client_host)
        if version >= 1:
            write_int32(out, m.rebalance_timeout)
        write_int32(out, m.session_timeout)
        write_bytes(out, m.subscription)
        write_bytes(out, m.assignment)
    return bytes(out)


def decode_group_value(buf: Buffer) -> GroupMetadataValue:
    version, pos = read_int16(buf, 0)
    if version not in (0, 1, 2, 3):
        raise DecodeError(f"unknown group metadata value version {version}")
    protocol_type, pos = read_string(buf, pos)
    generation, pos = read_int32(buf, pos)
    protocol, pos = read_nullable_string(buf, pos)
    leader, pos = read_nullable_string(buf, pos)
    state_ts = -1
    if version >= 2:
        state_ts, pos = read_int64(buf, pos)
        # 2.6's loader reads the state timestamp back for value v2 only (INTERNAL-TOPICS.md 1.4 quirk); we
        # read it for v3 as well: it is what the writer meant, and expiry from it is what Kafka intends.
    count, pos = read_array_length(buf, pos)
    members: list[MemberValue] = []
    for _ in range(count or 0):
        member_id, pos = read_string(buf, pos)
        instance_id: str | None = None
        if version >= 3:
            instance_id, pos = read_nullable_string(buf, pos)
        client_id, pos = read_string(buf, pos)
        client_host, pos = read_string(buf, pos)
        rebalance_timeout = -1
        if version >= 1:
            rebalance_timeout, pos = read_int32(buf, pos)
        session_timeout, pos = read_int32(buf, pos)
        if version == 0:
            rebalance_timeout = session_timeout
        subscription, pos = read_bytes(buf, pos)
        assignment, pos = read_bytes(buf, pos)
        members.append(
            MemberValue(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                        subscription, assignment)
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))
