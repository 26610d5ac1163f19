"""Message sets v0/v1: layout, wrappers, offsets, timestamps, and agreement with kafka-python."""

from __future__ import annotations

import struct
import warnings
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.protocol.errors import CorruptRecordError, EncodeError
from sofakafka.protocol.records import (
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    Record,
    build_message_set,
    decode_records,
    iter_batches,
    read_batch_header,
    validate_batch,
    validate_inner_messages,
)
from sofakafka.protocol.records.compression import CompressionType, compress
from sofakafka.protocol.records.legacy import encode_entry, encode_message

with warnings.catch_warnings():
    # kafka-python 3.0 calls a deprecated importlib API at import; it is only an independent implementation
    # to compare against here, and tests run with warnings as errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

optional_bytes = st.one_of(st.none(), st.binary(max_size=64))


@st.composite
def legacy_records(draw: st.DrawFn, magic: int) -> list[Record]:
    off = draw(st.integers(1, 2**40))
    out = []
    for _ in range(draw(st.integers(1, 10))):
        ts = draw(st.integers(0, 2**42)) if magic == 1 else -1
        out.append(Record(off, ts, draw(optional_bytes), draw(optional_bytes), []))
        off += draw(st.integers(1, 3))
    return out


def _all(buf: bytes) -> list[Record]:
    out: list[Record] = []
    for h in iter_batches(buf):
        validate_batch(buf, h)
        out.extend(decode_records(buf, h))
    return out


@given(st.data(), st.sampled_from([0, 1]), st.sampled_from([0, 1, 2, 3]))
def test_message_set_round_trips_with_every_codec(data: st.DataObject, magic: int, codec: int) -> None:
    records = data.draw(legacy_records(magic))
    buf = build_message_set(records, magic=magic, compression=codec)
    headers = list(iter_batches(buf))
    assert len(headers) == (1 if codec else len(records))
    assert all(h.magic == magic and h.compression == codec for h in headers)
    assert headers[-1].last_offset == records[-1].offset
    assert _all(buf) == records


def test_v0_message_layout() -> None:
    buf = build_message_set([Record(5, -1, b"key", b"value")], magic=0)
    offset, size, crc, magic, attrs = struct.unpack_from(">qiIbb", buf)
    assert (offset, size, magic, attrs) == (5, len(buf) - 12, 0, 0)
    assert size == 14 + 3 + 5
    assert crc == zlib.crc32(buf[16:])
    assert struct.unpack_from(">i3si5s", buf, 18) == (3, b"key", 5, b"value")
    h = read_batch_header(buf)
    assert h is not None and h.timestamp_type == NO_TIMESTAMP_TYPE and h.max_timestamp == -1


def test_v1_message_layout_with_null_key() -> None:
    buf = build_message_set([Record(7, 1234, None, b"v")], magic=1)
    offset, size, crc, magic, attrs, ts, klen, vlen = struct.unpack_from(">qiIbbqii", buf)
    assert (offset, size, magic, attrs, ts, klen, vlen) == (7, 22 + 1, 1, 0, 1234, -1, 1)
    assert crc == zlib.crc32(buf[16:])


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_bytes_equal_kafka_python(magic: int) -> None:
    recs = [Record(0, 1000 if magic else -1, b"k", b"v"), Record(1, 1001 if magic else -1, None, b"v2"),
            Record(2, 1002 if magic else -1, b"k3", None)]
    theirs = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for r in recs:
        theirs.append(r.offset, r.timestamp if magic else None, r.key, r.value)
    assert build_message_set(recs, magic=magic) == bytes(theirs.build())


@pytest.mark.parametrize(("magic", "codec"), [(0, 1), (1, 1), (1, 3)])
def test_reads_kafka_python_compressed_wrappers(magic: int, codec: int) -> None:
    theirs = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(5):
        theirs.append(i, 100 + i if magic else None, b"k%d" % i, b"v" * i)
    buf = bytes(theirs.build())
    (h,) = iter_batches(buf)
    validate_batch(buf, h)
    validate_inner_messages(buf, h)
    got = decode_records(buf, h)
    assert [r.offset for r in got] == [0, 1, 2, 3, 4]
    assert [r.key for r in got] == [b"k%d" % i for i in range(5)]
    assert [r.timestamp for r in got] == ([100, 101, 102, 103, 104] if magic else [-1] * 5)


@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_reads_our_compressed_wrappers(magic: int) -> None:
    recs = [Record(i, 50 + i if magic else -1, b"key", b"val%d" % i) for i in range(4)]
    buf = build_message_set(recs, magic=magic, compression=CompressionType.GZIP)
    got = list(LegacyRecordBatch(buf, magic))
    assert [(r.offset, r.key, r.value) for r in got] == [(i, b"key", b"val%d" % i) for i in range(4)]


def test_v1_wrapper_holds_relative_inner_offsets_and_last_offset() -> None:
    recs = [Record(100, 5, b"a", b"1"), Record(101, 9, b"b", b"2"), Record(102, 7, b"c", b"3")]
    buf = build_message_set(recs, magic=1, compression=CompressionType.GZIP)
    h = read_batch_header(buf)
    assert h is not None
    assert (h.base_offset, h.last_offset, h.max_timestamp, h.record_count) == (102, 102, 9, 1)
    inner = zlib.decompress(buf[h.position + 34 : h.end], 31)
    assert [x.last_offset for x in iter_batches(inner)] == [0, 1, 2]
    assert [r.offset for r in decode_records(buf, h)] == [100, 101, 102]


def test_v0_wrapper_holds_absolute_inner_offsets() -> None:
    recs = [Record(100, -1, b"a", b"1"), Record(101, -1, b"b", b"2")]
    buf = build_message_set(recs, magic=0, compression=CompressionType.GZIP)
    h = read_batch_header(buf)
    assert h is not None and h.last_offset == 101
    inner = zlib.decompress(buf[h.position + 26 : h.end], 31)
    assert [x.last_offset for x in iter_batches(inner)] == [100, 101]


def test_v1_wrapper_offset_zero_means_inner_offsets_are_absolute() -> None:
    inner = b"".join(encode_entry(i, encode_message(1, 0, 10 + i, None, b"x")) for i in range(3))
    buf = encode_entry(0, encode_message(1, 1, 12, None, compress(1, inner, magic=1)))
    h = read_batch_header(buf)
    assert h is not None
    assert [r.offset for r in decode_records(buf, h)] == [0, 1, 2]


def test_v1_wrapper_offset_below_last_inner_offset_is_corrupt() -> None:
    inner = b"".join(encode_entry(i, encode_message(1, 0, 10, None, b"x")) for i in range(5))
    buf = encode_entry(2, encode_message(1, 1, 10, None, compress(1, inner, magic=1)))
    h = read_batch_header(buf)
    assert h is not None
    with pytest.raises(CorruptRecordError, match="below last inner"):
        decode_records(buf, h)


def test_log_append_time_wrapper_timestamp_applies_to_every_inner_message() -> None:
    recs = [Record(0, 5, b"a", b"1"), Record(1, 6, b"b", b"2")]
    buf = build_message_set(recs, magic=1, compression=1, timestamp_type=LOG_APPEND_TIME, log_append_time=999)
    h = read_batch_header(buf)
    assert h is not None and h.timestamp_type == LOG_APPEND_TIME and h.max_timestamp == 999
    assert [r.timestamp for r in decode_records(buf, h)] == [999, 999]


def test_nested_compression_is_corrupt() -> None:
    inner_wrapper = build_message_set([Record(0, 1, None, b"x")], magic=1, compression=1)
    buf = encode_entry(0, encode_message(1, 1, 1, None, compress(1, inner_wrapper, magic=1)))
    h = read_batch_header(buf)
    assert h is not None
    with pytest.raises(CorruptRecordError, match="nested"):
        decode_records(buf, h)


def test_inner_crc_mismatch_is_found_by_inner_validation() -> None:
    good_inner = build_message_set([Record(0, 1, b"k", b"v"), Record(1, 1, b"k", b"v")], magic=1)
    bad = bytearray(good_inner)
    bad[-1] ^= 1
    buf = encode_entry(1, encode_message(1, 1, 1, None, compress(1, bytes(bad), magic=1)))
    h = read_batch_header(buf)
    assert h is not None
    validate_batch(buf, h)  # the wrapper itself is intact
    with pytest.raises(CorruptRecordError, match="inner message") as e:
        validate_inner_messages(buf, h)
    assert e.value.position == 0


def test_legacy_crc_is_crc32_from_magic_and_reports_position() -> None:
    a = build_message_set([Record(0, 1, b"a", b"1")], magic=1)
    b = bytearray(build_message_set([Record(1, 1, b"b", b"2")], magic=1))
    b[20] ^= 1  # timestamp byte, inside the CRC range
    buf = a + bytes(b)
    hs = list(iter_batches(buf))
    validate_batch(buf, hs[0])
    with pytest.raises(CorruptRecordError) as e:
        validate_batch(buf, hs[1])
    assert e.value.position == len(a)


def test_value_length_must_end_at_message_end() -> None:
    buf = bytearray(build_message_set([Record(0, 1, b"a", b"12")], magic=1))
    struct.pack_into(">i", buf, len(buf) - 6, 1)  # value length 1 instead of 2
    struct.pack_into(">I", buf, 12, zlib.crc32(buf[16:]))
    with pytest.raises(CorruptRecordError, match="value length"):
        validate_batch(buf, read_batch_header(buf))  # type: ignore[arg-type]


def test_zstd_and_headers_are_refused_by_the_legacy_builder() -> None:
    with pytest.raises(EncodeError):
        build_message_set([Record(0, 1, b"a", b"1")], magic=1, compression=4)
    with pytest.raises(EncodeError):
        build_message_set([Record(0, 1, b"a", b"1", [("h", b"v")])], magic=1)


def test_zstd_codec_bits_in_a_legacy_message_are_corrupt() -> None:
    buf = bytearray(build_message_set([Record(0, 1, b"a", b"1")], magic=1))
    buf[17] = 4
    struct.pack_into(">I", buf, 12, zlib.crc32(buf[16:]))
    with pytest.raises(CorruptRecordError, match="codec 4"):
        validate_batch(buf, read_batch_header(buf))  # type: ignore[arg-type]
