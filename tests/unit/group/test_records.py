"""__consumer_offsets key/value formats (INTERNAL-TOPICS.md section 1) and the consumer embedded protocol."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.broker.group.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from sofakafka.broker.group.coordinator import replay_records
from sofakafka.broker.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    java_string_hash,
    partition_for,
)
from sofakafka.protocol.errors import DecodeError


def kstr(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # hashed as two UTF-16 surrogates
    assert java_string_hash("polygenelubricants") == -(2**31)


def test_partition_for_maps_integer_min_value_to_zero_like_utils_abs() -> None:
    assert partition_for("polygenelubricants", 7) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("Aa", 50) == partition_for("BB", 50)  # the classic String.hashCode collision


def test_offset_key_is_version_1_with_group_topic_partition() -> None:
    raw = encode_key(OffsetKey("g", "t", 3))
    assert raw == struct.pack(">h", 1) + kstr("g") + kstr("t") + struct.pack(">i", 3)
    assert decode_key(raw) == OffsetKey("g", "t", 3)
    # Version 0 keys (older brokers) read the same way.
    assert decode_key(struct.pack(">h", 0) + raw[2:]) == OffsetKey("g", "t", 3)


def test_group_key_is_version_2() -> None:
    raw = encode_key(GroupMetadataKey("grp"))
    assert raw == struct.pack(">h", 2) + kstr("grp")
    assert decode_key(raw) == GroupMetadataKey("grp")


def test_unknown_key_version_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode_key(struct.pack(">h", 3) + kstr("g"))


def test_offset_value_v3_bytes_as_kafka_26_writes_them() -> None:
    v = OffsetValue(offset=42, metadata="meta", commit_timestamp=1000, leader_epoch=7)
    raw = encode_offset_value(v)
    assert raw == struct.pack(">hqi", 3, 42, 7) + kstr("meta") + struct.pack(">q", 1000)
    assert decode_offset_value(raw) == v


def test_offset_value_with_explicit_expiry_is_written_as_v1() -> None:
    v = OffsetValue(offset=1, metadata="", commit_timestamp=10, expire_timestamp=20)
    raw = encode_offset_value(v)
    assert raw == struct.pack(">hq", 1, 1) + kstr("") + struct.pack(">qq", 10, 20)
    assert decode_offset_value(raw) == v


def test_offset_value_v0_and_v2_read_without_epoch_or_expiry() -> None:
    raw0 = struct.pack(">hq", 0, 5) + kstr("x") + struct.pack(">q", 99)
    assert decode_offset_value(raw0) == OffsetValue(5, "x", 99, None, -1)
    raw2 = struct.pack(">hq", 2, 5) + kstr("x") + struct.pack(">q", 99)
    assert decode_offset_value(raw2) == OffsetValue(5, "x", 99, None, -1)


def test_group_value_v0_members_get_session_timeout_as_rebalance_timeout() -> None:
    raw = (struct.pack(">h", 0) + kstr("consumer") + struct.pack(">i", 4) + kstr("range") + kstr("m1")
           + struct.pack(">i", 1) + kstr("m1") + kstr("cid") + kstr("/h") + struct.pack(">i", 10000)
           + struct.pack(">i", 2) + b"su" + struct.pack(">i", 1) + b"a")
    v = decode_group_value(raw)
    assert v.members == (MemberValue("m1", None, "cid", "/h", 10000, 10000, b"su", b"a"),)
    assert (v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp) == (
        "consumer", 4, "range", "m1", -1)
    assert encode_group_value(v, version=0) == raw


def test_empty_group_value_v3_has_null_protocol_and_leader() -> None:
    v = GroupMetadataValue("consumer", 3, None, None, 123, ())
    raw = encode_group_value(v)
    assert raw == (struct.pack(">h", 3) + kstr("consumer") + struct.pack(">i", 3) + b"\xff\xff\xff\xff"
                   + struct.pack(">qi", 123, 0))
    assert decode_group_value(raw) == v


names = st.text(max_size=20)
members = st.builds(
    MemberValue, names, st.none() | names, names, names, st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
    st.binary(max_size=30), st.binary(max_size=30),
)


@given(
    st.builds(GroupMetadataValue, names, st.integers(0, 2**31 - 1), st.none() | names, st.none() | names,
              st.integers(-1, 2**62), st.lists(members, max_size=4).map(tuple)),
    st.sampled_from([1, 2, 3]),
)
def test_group_values_round_trip_at_every_version(value: GroupMetadataValue, version: int) -> None:
    decoded = decode_group_value(encode_group_value(value, version))
    expected = value
    if version < 3:
        expected = GroupMetadataValue(
            value.protocol_type, value.generation, value.protocol, value.leader, value.current_state_timestamp,
            tuple(MemberValue(m.member_id, None, m.client_id, m.client_host, m.rebalance_timeout,
                              m.session_timeout, m.subscription, m.assignment) for m in value.members))
    if version < 2:
        expected = GroupMetadataValue(expected.protocol_type, expected.generation, expected.protocol,
                                      expected.leader, -1, expected.members)
    assert decoded == expected


@given(st.builds(OffsetValue, st.integers(-1, 2**62), names, st.integers(-1, 2**62),
                 st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), st.integers(-1, 2**31 - 1)))
def test_offset_values_round_trip_in_the_version_2_6_picks(value: OffsetValue) -> None:
    decoded = decode_offset_value(encode_offset_value(value))
    if value.expire_timestamp is not None:  # v1 has no leader epoch
        assert decoded == OffsetValue(value.offset, value.metadata, value.commit_timestamp,
                                      value.expire_timestamp, -1)
    else:
        assert decoded == value


topic_partitions = st.lists(st.tuples(names, st.lists(st.integers(0, 1000), max_size=5).map(tuple)),
                            max_size=4).map(tuple)


@given(st.builds(Subscription, st.lists(names, max_size=4).map(tuple), st.none() | st.binary(max_size=10),
                 topic_partitions, st.just(1)))
def test_subscription_round_trips(sub: Subscription) -> None:
    assert decode_subscription(encode_subscription(sub)) == sub


@given(st.builds(Assignment, topic_partitions, st.none() | st.binary(max_size=10)))
def test_assignment_round_trips(assignment: Assignment) -> None:
    assert decode_assignment(encode_assignment(assignment)) == assignment


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert decode_assignment(b"").topic_partitions() == []


def test_subscription_v0_has_no_owned_partitions() -> None:
    raw = encode_subscription(Subscription(("a", "b")))
    assert raw == struct.pack(">hi", 0, 2) + kstr("a") + kstr("b") + b"\xff\xff\xff\xff"
    assert decode_subscription(raw) == Subscription(("a", "b"))


ops = st.lists(st.tuples(
    st.sampled_from(["a", "b"]),
    st.one_of(st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 2)), st.none()),  # None: the group record
    st.none() | st.integers(0, 100),  # None: a tombstone
), max_size=40)


@given(ops)
def test_replay_keeps_the_last_word_on_every_key(operations: list[tuple[str, tuple[str, int] | None, int | None]]) -> None:
    records: list[tuple[bytes | None, bytes | None]] = [(None, b"ignored: no key")]
    model_offsets: dict[str, dict[tuple[str, int], int]] = {}
    model_groups: dict[str, int] = {}
    for group, tp, n in operations:
        if tp is None:
            key = encode_key(GroupMetadataKey(group))
            value = None if n is None else encode_group_value(GroupMetadataValue("consumer", n, None, None))
            if n is None:
                model_groups.pop(group, None)
            else:
                model_groups[group] = n
        else:
            key = encode_key(OffsetKey(group, *tp))
            value = None if n is None else encode_offset_value(OffsetValue(n, "", 0))
            if n is None:
                model_offsets.get(group, {}).pop(tp, None)
            else:
                model_offsets.setdefault(group, {})[tp] = n
        records.append((key, value))
    state = replay_records(records)
    assert {g: v.generation for g, v in state.groups.items()} == model_groups
    assert {g: {tp: v.offset for tp, v in offs.items()} for g, offs in state.offsets.items() if offs} == {
        g: offs for g, offs in model_offsets.items() if offs}
