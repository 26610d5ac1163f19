"""Primitive types: known byte vectors from FORMATS.md section 6, round trips, and strict decoding."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.protocol import primitives as P
from sofakafka.protocol.errors import DecodeError, EncodeError

# --- known vectors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (2, "04"), (63, "7e"), (-64, "7f"), (64, "8001"),
     (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)
def test_varint_uses_zigzag_then_base128(value: int, encoded: str) -> None:
    assert P.encode_varint(value).hex() == encoded
    assert P.read_varint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)
    assert P.size_varint(value) == len(encoded) // 2


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (-1, "01"), (1, "02"), (2**63 - 1, "feffffffffffffffff01"), (-(2**63), "ffffffffffffffffff01")],
)
def test_varlong_uses_zigzag_then_base128(value: int, encoded: str) -> None:
    assert P.encode_varlong(value).hex() == encoded
    assert P.read_varlong(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)
    assert P.size_varlong(value) == len(encoded) // 2


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16383, "ff7f"), (16384, "808001"),
     (2**32 - 1, "ffffffff0f")],
)
def test_unsigned_varint_is_plain_base128_least_significant_group_first(value: int, encoded: str) -> None:
    assert P.encode_unsigned_varint(value).hex() == encoded
    assert P.read_unsigned_varint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)
    assert P.size_unsigned_varint(value) == len(encoded) // 2


def _written(writer: Callable[[bytearray, Any], None], value: Any) -> str:
    out = bytearray()
    writer(out, value)
    return out.hex()


def test_compact_lengths_are_length_plus_one_with_zero_for_null() -> None:
    assert _written(P.write_compact_nullable_string, None) == "00"
    assert _written(P.write_compact_string, "") == "01"
    assert _written(P.write_compact_string, "abc") == "04616263"
    assert _written(P.write_compact_nullable_bytes, None) == "00"
    assert _written(P.write_compact_bytes, b"\x01\x02") == "030102"
    assert _written(P.write_compact_array_length, None) == "00"
    assert _written(P.write_compact_array_length, 0) == "01"
    assert _written(P.write_compact_array_length, 127) == "8001"


def test_classic_lengths_use_minus_one_for_null() -> None:
    assert _written(P.write_nullable_string, None) == "ffff"
    assert _written(P.write_string, "ab") == "00026162"
    assert _written(P.write_nullable_bytes, None) == "ffffffff"
    assert _written(P.write_bytes, b"x") == "0000000178"
    assert _written(P.write_array_length, None) == "ffffffff"
    assert _written(P.write_array_length, 2) == "00000002"


def test_empty_tagged_field_section_is_one_zero_byte() -> None:
    assert _written(P.write_tagged_fields, []) == "00"
    assert P.read_tagged_fields(b"\x00", 0) == ([], 1)


def test_tagged_fields_keep_raw_values_in_tag_order() -> None:
    raw = bytes.fromhex("02" "00" "02" "abcd" "05" "00")
    fields, end = P.read_tagged_fields(raw, 0)
    assert fields == [(0, b"\xab\xcd"), (5, b"")]
    assert end == len(raw)
    assert _written(P.write_tagged_fields, fields) == raw.hex()
    assert P.size_tagged_fields(fields) == len(raw)


def test_boolean_reads_any_nonzero_byte_as_true() -> None:
    assert P.read_boolean(b"\x00", 0) == (False, 1)
    assert P.read_boolean(b"\x02", 0) == (True, 1)


def test_uuid_is_sixteen_raw_bytes() -> None:
    value, end = P.read_uuid(bytes(range(16)), 0)
    assert end == 16
    assert _written(P.write_uuid, value) == bytes(range(16)).hex()


# --- round trips ------------------------------------------------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    data = P.encode_varint(value)
    assert P.read_varint(data, 0) == (value, len(data))
    assert P.size_varint(value) == len(data)


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    data = P.encode_varlong(value)
    assert P.read_varlong(data, 0) == (value, len(data))
    assert P.size_varlong(value) == len(data)


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(value: int) -> None:
    data = P.encode_unsigned_varint(value)
    assert P.read_unsigned_varint(data, 0) == (value, len(data))
    assert P.size_unsigned_varint(value) == len(data)


STRING_CODECS = [
    (P.write_string, P.read_string, P.size_string, False),
    (P.write_nullable_string, P.read_nullable_string, P.size_nullable_string, True),
    (P.write_compact_string, P.read_compact_string, P.size_compact_string, False),
    (P.write_compact_nullable_string, P.read_compact_nullable_string, P.size_compact_nullable_string, True),
]
BYTES_CODECS = [
    (P.write_bytes, P.read_bytes, P.size_bytes, False),
    (P.write_nullable_bytes, P.read_nullable_bytes, P.size_nullable_bytes, True),
    (P.write_compact_bytes, P.read_compact_bytes, P.size_compact_bytes, False),
    (P.write_compact_nullable_bytes, P.read_compact_nullable_bytes, P.size_compact_nullable_bytes, True),
]


@pytest.mark.parametrize(("write", "read", "size", "nullable"), STRING_CODECS)
@given(data=st.data())
def test_string_forms_round_trip(write: Any, read: Any, size: Any, nullable: bool, data: st.DataObject) -> None:
    value = data.draw(st.one_of(st.none(), text) if nullable else text)
    out = bytearray(b"\x99")  # a leading byte proves readers honour the start position
    write(out, value)
    assert read(out, 1) == (value, len(out))
    assert read(memoryview(out), 1) == (value, len(out))
    assert size(value) == len(out) - 1


@pytest.mark.parametrize(("write", "read", "size", "nullable"), BYTES_CODECS)
@given(data=st.data())
def test_bytes_forms_round_trip(write: Any, read: Any, size: Any, nullable: bool, data: st.DataObject) -> None:
    value = data.draw(st.one_of(st.none(), st.binary(max_size=300)) if nullable else st.binary(max_size=300))
    out = bytearray(b"\x99")
    write(out, value)
    assert read(bytes(out), 1) == (value, len(out))
    assert size(value) == len(out) - 1


@given(st.one_of(st.none(), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5)), st.booleans())
def test_arrays_round_trip_in_both_forms(items: list[int] | None, compact: bool) -> None:
    out = bytearray()
    P.write_array(out, items, P.write_int32, compact)
    assert P.read_array(bytes(out), 0, P.read_int32, compact) == (items, len(out))


@given(st.lists(st.tuples(st.integers(0, 2**20), st.binary(max_size=8)), max_size=4, unique_by=lambda t: t[0]))
def test_tagged_fields_round_trip(fields: list[tuple[int, bytes]]) -> None:
    fields.sort()
    out = bytearray()
    P.write_tagged_fields(out, fields)
    assert P.read_tagged_fields(bytes(out), 0) == (fields, len(out))
    assert P.size_tagged_fields(fields) == len(out)


def test_records_read_as_a_view_of_the_input_without_copying() -> None:
    frame = bytearray(b"\x00\x00\x00\x03abc")
    view, end = P.read_records(frame, 0)
    assert (bytes(view), end) == (b"abc", 7)
    frame[4] = ord("z")
    assert bytes(view) == b"zbc"


# --- strict decoding --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reader", "data"),
    [
        (P.read_int8, b""),
        (P.read_int16, b"\x00"),
        (P.read_int32, b"\x00\x00\x00"),
        (P.read_int64, b"\x00" * 7),
        (P.read_float64, b"\x00" * 7),
        (P.read_boolean, b""),
        (P.read_uuid, b"\x00" * 15),
        (P.read_unsigned_varint, b""),
        (P.read_unsigned_varint, b"\x80"),
        (P.read_varint, b"\xff\xff"),
        (P.read_varlong, b"\x80" * 9),
        (P.read_string, b"\x00\x05abc"),
        (P.read_string, b"\xff\xff"),  # null where null is not allowed
        (P.read_nullable_string, b"\xff\xfe"),  # negative but not -1
        (P.read_compact_string, b"\x00"),  # null where null is not allowed
        (P.read_compact_string, b"\x05ab"),
        (P.read_string, b"\x00\x02\xc3\x28"),  # invalid UTF-8
        (P.read_compact_nullable_string, b"\x03\xff\xfe"),
        (P.read_bytes, b"\x00\x00\x00\x09abc"),
        (P.read_bytes, b"\xff\xff\xff\xff"),
        (P.read_nullable_bytes, b"\xff\xff\xff\xf0"),
        (P.read_compact_bytes, b"\x00"),
        (P.read_compact_nullable_bytes, b"\x09ab"),
        (P.read_records, b"\x00\x00\x00\x09abc"),
        (P.read_nullable_records, b"\x80\x00\x00\x00"),
        (P.read_compact_records, b"\x00"),
        (P.read_compact_nullable_records, b"\x09"),
        (P.read_array_length, b"\xff\xff\xff\xfe"),
        (P.read_array_length, b"\x7f\xff\xff\xff\x00"),  # more elements than bytes left
        (P.read_compact_array_length, b"\x8f\x01"),
        (P.read_tagged_fields, b"\x02\x01\x00\x01\x00"),  # tags must increase strictly
        (P.read_tagged_fields, b"\x01\x00\x05ab"),
    ],
)
def test_bad_input_raises_decode_error(reader: Callable[[bytes, int], Any], data: bytes) -> None:
    with pytest.raises(DecodeError):
        reader(data, 0)


def test_varints_longer_than_allowed_are_rejected() -> None:
    with pytest.raises(DecodeError):
        P.read_unsigned_varint(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(DecodeError):
        P.read_unsigned_varint(b"\xff\xff\xff\xff\x1f", 0)  # 35 bits
    with pytest.raises(DecodeError):
        P.read_varint(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(DecodeError):
        P.read_varlong(b"\x80" * 10 + b"\x01", 0)


@given(st.binary(max_size=12))
def test_readers_raise_only_decode_error_on_arbitrary_bytes(data: bytes) -> None:
    readers = [
        P.read_int16, P.read_int64, P.read_unsigned_varint, P.read_varint, P.read_varlong, P.read_string,
        P.read_nullable_string, P.read_compact_string, P.read_compact_nullable_string, P.read_bytes,
        P.read_compact_nullable_bytes, P.read_uuid, P.read_tagged_fields, P.read_array_length,
        P.read_compact_array_length, P.read_nullable_records,
    ]
    for reader in readers:
        try:
            reader(data, 0)
        except DecodeError:
            pass


@pytest.mark.parametrize(
    ("writer", "value"),
    [
        (P.write_int8, 128),
        (P.write_int16, -(2**15) - 1),
        (P.write_int32, 2**31),
        (P.write_int64, 2**63),
        (P.write_int32, None),
        (P.write_string, None),
        (P.write_string, "x" * 32768),
        (P.write_compact_string, "\ud800"),
        (P.write_bytes, None),
        (P.write_uuid, "not-a-uuid"),
    ],
)
def test_values_a_type_cannot_hold_raise_encode_error(writer: Callable[[bytearray, Any], None], value: Any) -> None:
    with pytest.raises(EncodeError):
        writer(bytearray(), value)


def test_encoders_reject_out_of_range_varints() -> None:
    for bad in (lambda: P.encode_unsigned_varint(-1), lambda: P.encode_unsigned_varint(2**32),
                lambda: P.encode_varint(2**31), lambda: P.encode_varlong(-(2**63) - 1)):
        with pytest.raises(EncodeError):
            bad()


def test_fixed_width_structs_are_big_endian() -> None:
    assert P.INT32.pack(1) == b"\x00\x00\x00\x01"
    assert struct.calcsize(P.INT64.format) == 8
