"""Record batch v2: layout, round trips with every codec, CRC range, corruption and torn tails."""

from __future__ import annotations

import struct
import warnings
import zlib

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.protocol.errors import CorruptRecordError
from sofakafka.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    V2_HEADER_SIZE,
    ControlRecordType,
    EndTransactionMarker,
    Record,
    RecordBatchBuilder,
    batch_producer,
    build_batch,
    build_end_txn_marker,
    build_message_set,
    decode_records,
    iter_batches,
    peek_batch_header,
    read_batch_header,
    validate_batch,
)
from sofakafka.protocol.records.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

with warnings.catch_warnings():
    # kafka-python 3.0 calls a deprecated importlib API at import; it is only an independent implementation
    # to compare against here, and tests run with warnings as errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

optional_bytes = st.one_of(st.none(), st.binary(max_size=64))
headers_st = st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3)
timestamps = st.one_of(st.just(-1), st.integers(0, 2**42))


@st.composite
def record_lists(draw: st.DrawFn, min_size: int = 1, max_size: int = 12) -> list[Record]:
    base = draw(st.integers(0, 2**40))
    gaps = draw(st.lists(st.integers(1, 3), min_size=min_size, max_size=max_size))
    out: list[Record] = []
    off = base
    for g in gaps:
        off += g - 1 if not out else g
        out.append(Record(off, draw(timestamps), draw(optional_bytes), draw(optional_bytes), draw(headers_st)))
    return out


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(v: int) -> None:
    enc = encode_varint(v)
    assert decode_varint(enc, 0) == (v, len(enc))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(v: int) -> None:
    enc = encode_varlong(v)
    assert decode_varlong(enc, 0) == (v, len(enc))


def test_varint_zigzag_bytes_match_kafka_examples() -> None:
    assert encode_varint(0) == b"\x00"
    assert encode_varint(-1) == b"\x01"
    assert encode_varint(1) == b"\x02"
    assert encode_varint(-64) == b"\x7f"
    assert encode_varint(64) == b"\x80\x01"


@given(record_lists(), st.sampled_from([0, 1, 2, 3, 4]), st.booleans(), st.integers(-1, 1000))
def test_v2_batch_round_trips_with_every_codec(records: list[Record], codec: int, txn: bool, epoch: int) -> None:
    buf = build_batch(records, compression=codec, producer_id=7 if txn else -1, producer_epoch=3 if txn else -1,
                      base_sequence=11 if txn else -1, is_transactional=txn, partition_leader_epoch=epoch)
    h = read_batch_header(buf)
    assert h is not None
    assert (h.position, h.size, h.magic, h.compression) == (0, len(buf), 2, codec)
    assert h.base_offset == records[0].offset and h.last_offset == records[-1].offset
    assert h.record_count == len(records) and h.partition_leader_epoch == epoch
    assert h.is_transactional is txn and not h.is_control
    assert h.first_timestamp == records[0].timestamp
    assert h.max_timestamp == max(r.timestamp for r in records)
    validate_batch(buf, h)
    assert decode_records(buf, h) == records


def test_v2_header_layout_matches_formats_table() -> None:
    recs = [Record(100, 1_000, b"k", b"v", [("h", b"x")]), Record(102, 999, None, None, [])]
    buf = build_batch(recs, base_offset=100, producer_id=42, producer_epoch=5, base_sequence=9,
                      is_transactional=True, partition_leader_epoch=17)
    (base, length, ple, magic, crc, attrs, lod, first_ts, max_ts, pid, pepoch, bseq, count) = struct.unpack_from(
        ">qiibIhiqqqhii", buf
    )
    assert (base, length + LOG_OVERHEAD, ple, magic) == (100, len(buf), 17, 2)
    assert (attrs, lod, first_ts, max_ts) == (0x10, 2, 1_000, 1_000)
    assert (pid, pepoch, bseq, count) == (42, 5, 9, 2)
    # CRC-32C covers attributes (byte 21) to the end, not the leader epoch or base offset.
    assert crc == crc32c.crc32c(buf[21:])
    assert crc != zlib.crc32(buf[21:])
    # First record: length, attributes 0, timestampDelta 0, offsetDelta 0, key "k", value "v", 1 header.
    rec = buf[V2_HEADER_SIZE:]
    body = b"\x00" + b"\x00" + b"\x00" + b"\x02k" + b"\x02v" + b"\x02" + b"\x02h" + b"\x02x"
    assert rec[: 1 + len(body)] == encode_varint(len(body)) + body
    # Second record: timestampDelta -1 (zig-zag 0x01), offsetDelta 2, null key and value.
    body2 = b"\x00" + b"\x01" + b"\x04" + b"\x01" + b"\x01" + b"\x00"
    assert rec[1 + len(body) :] == encode_varint(len(body2)) + body2


def test_leader_epoch_and_base_offset_are_outside_the_crc() -> None:
    buf = bytearray(build_batch([Record(0, 5, b"a", b"b")]))
    h = read_batch_header(buf)
    assert h is not None
    struct.pack_into(">q", buf, 0, 12345)
    struct.pack_into(">i", buf, 12, 99)
    validate_batch(buf, read_batch_header(buf))  # type: ignore[arg-type]
    buf[30] ^= 1  # firstTimestamp is inside the CRC range
    with pytest.raises(CorruptRecordError) as e:
        validate_batch(buf, read_batch_header(buf))  # type: ignore[arg-type]
    assert e.value.position == 0


def test_log_append_time_reports_max_timestamp_for_every_record() -> None:
    recs = [Record(0, 10, b"a", None), Record(1, 20, b"b", None)]
    b = RecordBatchBuilder(timestamp_type=LOG_APPEND_TIME, log_append_time=777)
    for r in recs:
        b.append(r)
    buf = b.build()
    h = read_batch_header(buf)
    assert h is not None and h.timestamp_type == LOG_APPEND_TIME and h.max_timestamp == 777
    assert [r.timestamp for r in decode_records(buf, h)] == [777, 777]


def test_iter_batches_walks_concatenated_batches_and_stops_at_torn_tail() -> None:
    a = build_batch([Record(0, 1, b"a", b"1"), Record(1, 2, b"b", b"2")])
    b = build_batch([Record(2, 3, None, b"3")], compression=1)
    c = build_batch([Record(3, 4, b"c", b"4")])
    buf = a + b + c
    hs = list(iter_batches(buf))
    assert [h.position for h in hs] == [0, len(a), len(a) + len(b)]
    assert [h.base_offset for h in hs] == [0, 2, 3]
    assert hs[-1].end == len(buf)
    for cut in (1, 11, 12, 16, 17, 60, len(c) - 1):
        torn = list(iter_batches(buf[: len(a) + len(b) + cut]))
        assert len(torn) == 2 and torn[-1].end == len(a) + len(b)
    assert [h.position for h in iter_batches(buf, start=len(a), end=len(a) + len(b))] == [len(a)]


def test_read_batch_header_none_when_short() -> None:
    buf = build_batch([Record(0, 1, b"a", b"1")])
    assert read_batch_header(buf[:-1]) is None
    assert read_batch_header(b"") is None


@pytest.mark.parametrize("size", [0, -5, 13])
def test_impossible_size_is_corrupt_with_position(size: int) -> None:
    good = build_batch([Record(0, 1, b"a", b"1")])
    bad = bytearray(build_batch([Record(1, 1, b"a", b"1")]))
    struct.pack_into(">i", bad, 8, size)
    with pytest.raises(CorruptRecordError) as e:
        list(iter_batches(good + bad))
    assert e.value.position == len(good)


def test_v2_size_below_header_is_corrupt() -> None:
    bad = bytearray(build_batch([Record(0, 1, b"a", b"1")]))
    struct.pack_into(">i", bad, 8, 40)  # big enough for a v0 message, not for a v2 header
    with pytest.raises(CorruptRecordError, match="minimum"):
        read_batch_header(bad)


def test_unknown_magic_is_corrupt() -> None:
    bad = bytearray(build_batch([Record(0, 1, b"a", b"1")]))
    bad[16] = 3
    with pytest.raises(CorruptRecordError, match="magic"):
        list(iter_batches(bad))


def test_validate_reports_which_batch_is_corrupt() -> None:
    a = build_batch([Record(0, 1, b"a", b"1")])
    b = bytearray(build_batch([Record(1, 1, b"b", b"2")]))
    b[-1] ^= 0xFF
    buf = a + bytes(b)
    hs = list(iter_batches(buf))
    validate_batch(buf, hs[0])
    with pytest.raises(CorruptRecordError) as e:
        validate_batch(buf, hs[1])
    assert e.value.position == len(a) and "checksum" in e.value.reason


def test_count_larger_than_offset_span_is_corrupt() -> None:
    buf = bytearray(build_batch([Record(0, 1, b"a", b"1"), Record(1, 1, b"a", b"1")]))
    struct.pack_into(">i", buf, 57, 3)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(buf[21:]))
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        validate_batch(buf, read_batch_header(buf))  # type: ignore[arg-type]


def test_corrupt_compressed_payload_raises_with_position() -> None:
    buf = bytearray(build_batch([Record(0, 1, b"a" * 100, b"1")], compression=4))
    buf[V2_HEADER_SIZE + 2] ^= 0xFF
    h = read_batch_header(buf)
    assert h is not None
    with pytest.raises(CorruptRecordError) as e:
        decode_records(buf, h)
    assert e.value.position == 0


def test_empty_batch_keeps_span_for_compaction() -> None:
    b = RecordBatchBuilder(base_offset=50, producer_id=1, producer_epoch=0, base_sequence=10)
    buf = b.build(last_offset_delta=4)
    h = read_batch_header(buf)
    assert h is not None
    assert (h.record_count, h.first_timestamp, h.max_timestamp, h.last_offset) == (0, -1, -1, 54)
    assert h.last_sequence == 14 and h.next_offset == 55
    validate_batch(buf, h)
    assert decode_records(buf, h) == []


def test_last_sequence_wraps_past_int32_max() -> None:
    recs = [Record(i, 1, None, b"x") for i in range(3)]
    buf = build_batch(recs, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    h = read_batch_header(buf)
    assert h is not None and h.last_sequence == 0


@pytest.mark.parametrize("commit", [True, False])
def test_end_transaction_marker_layout(commit: bool) -> None:
    buf = build_end_txn_marker(producer_id=9, producer_epoch=2, coordinator_epoch=5, commit=commit,
                               timestamp=1234, base_offset=77, partition_leader_epoch=3)
    h = read_batch_header(buf)
    assert h is not None
    validate_batch(buf, h)
    assert h.is_control and h.is_transactional and h.record_count == 1 and h.base_sequence == -1
    assert (h.producer_id, h.producer_epoch, h.base_offset, h.timestamp_type) == (9, 2, 77, CREATE_TIME)
    (rec,) = decode_records(buf, h)
    expected_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    assert rec.key == struct.pack(">hh", 0, expected_type)
    assert rec.value == struct.pack(">hi", 0, 5)
    assert EndTransactionMarker.decode(rec) == EndTransactionMarker(expected_type, 5)


def test_uncompressed_batch_bytes_equal_kafka_python() -> None:
    theirs = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=5,
                                       producer_epoch=1, base_sequence=3, batch_size=1 << 20)
    recs = [Record(0, 1000, b"k", b"v", [("h", b"x"), ("n", None)]), Record(2, 999, None, None, []),
            Record(3, 5000, b"", b"", [])]
    for r in recs:
        theirs.append(r.offset, r.timestamp, r.key, r.value, r.headers)
    # kafka-python leaves partitionLeaderEpoch at 0 where a Java client writes -1.
    ours = build_batch(recs, is_transactional=True, producer_id=5, producer_epoch=1, base_sequence=3,
                       partition_leader_epoch=0)
    assert ours == bytes(theirs.build())


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_kafka_python_reads_our_compressed_batches(codec: int) -> None:
    recs = [Record(10 + i, 100 + i, b"k%d" % i, b"v" * i, [("h", b"%d" % i)]) for i in range(20)]
    buf = build_batch(recs, compression=codec)
    got = list(DefaultRecordBatch(buf))
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in got] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs
    ]


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_reads_kafka_python_compressed_batches(codec: int) -> None:
    theirs = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                       producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(20):
        theirs.append(i, 100 + i, b"k%d" % i, b"v" * i, [])
    buf = bytes(theirs.build())
    h = read_batch_header(buf)
    assert h is not None
    validate_batch(buf, h)
    assert [(r.offset, r.key) for r in decode_records(buf, h)] == [(i, b"k%d" % i) for i in range(20)]


def test_max_size_turns_an_absurd_size_field_into_corruption() -> None:
    good = build_batch([Record(0, 1, b"a", b"1")])
    bad = bytearray(build_batch([Record(1, 1, b"b", b"2")]))
    struct.pack_into(">i", bad, 8, 2**31 - 1)
    buf = good + bytes(bad)
    assert [h.position for h in iter_batches(buf)] == [0]  # without a limit: looks like a short tail
    with pytest.raises(CorruptRecordError, match="exceeds") as e:
        list(iter_batches(buf, max_size=1 << 20))
    assert e.value.position == len(good)


def test_peek_needs_only_the_fixed_header() -> None:
    for buf, fixed in ((build_batch([Record(3, 1, b"a", b"1" * 100)]), 61),
                       (build_message_set([Record(3, 1, b"a", b"1" * 100)], magic=1), 26),
                       (build_message_set([Record(3, -1, b"a", b"1" * 100)], magic=0), 18)):
        full = read_batch_header(buf)
        assert read_batch_header(buf[:fixed]) is None
        assert peek_batch_header(buf[:fixed]) == full
        assert peek_batch_header(buf[: fixed - 1]) is None


@given(producer_id=st.integers(-1, 2**63 - 1), epoch=st.integers(-1, 2**15 - 1))
def test_batch_producer_reads_what_the_header_says(producer_id: int, epoch: int) -> None:
    buf = _one_record_batch(producer_id, epoch)
    header = read_batch_header(buf)
    assert header is not None
    assert batch_producer(buf) == (header.producer_id, header.producer_epoch) == (producer_id, epoch)


def _one_record_batch(producer_id: int, epoch: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch)
    builder.append_record(0, 1, b"k", b"v")
    return builder.build()


def test_batch_producer_is_none_for_legacy_message_sets_and_short_bytes() -> None:
    legacy = build_message_set([Record(0, 5, b"k", b"v")], magic=1)
    assert batch_producer(legacy) == (-1, -1)
    v2 = _one_record_batch(42, 3)
    assert batch_producer(v2[:V2_HEADER_SIZE]) == (42, 3), "the fixed header is enough"
    assert batch_producer(v2[: V2_HEADER_SIZE - 1]) == (-1, -1)
    assert batch_producer(b"") == (-1, -1)
