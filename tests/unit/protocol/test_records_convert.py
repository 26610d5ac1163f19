"""Up-conversion (old producers -> stored v2) and down-conversion (stored v2 -> old fetchers)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Record,
    build_batch,
    build_end_txn_marker,
    build_message_set,
    convert_to_v2,
    decode_records,
    down_convert,
    iter_batches,
    read_batch_header,
    validate_batch,
)

optional_bytes = st.one_of(st.none(), st.binary(max_size=32))


def _decode_all(buf: bytes) -> list[Record]:
    out: list[Record] = []
    for h in iter_batches(buf):
        validate_batch(buf, h)
        out.extend(decode_records(buf, h))
    return out


@st.composite
def record_runs(draw: st.DrawFn, with_headers: bool) -> list[Record]:
    off = draw(st.integers(0, 2**40))
    recs = []
    for _ in range(draw(st.integers(1, 8))):
        hdrs = draw(st.lists(st.tuples(st.text(max_size=4), optional_bytes), max_size=2)) if with_headers else []
        recs.append(Record(off, draw(st.integers(0, 2**41)), draw(optional_bytes), draw(optional_bytes), hdrs))
        off += draw(st.integers(1, 2))
    return recs


@given(record_runs(with_headers=False), st.sampled_from([0, 1]), st.sampled_from([0, 1, 2, 3]))
def test_up_conversion_keeps_keys_values_timestamps_and_offsets(recs: list[Record], magic: int, codec: int) -> None:
    if magic == 0:
        recs = [Record(r.offset, -1, r.key, r.value, []) for r in recs]
    legacy = build_message_set(recs, magic=magic, compression=codec)
    v2 = convert_to_v2(legacy)
    (h,) = iter_batches(v2)
    validate_batch(v2, h)
    assert (h.magic, h.compression, h.record_count, h.producer_id) == (2, codec, len(recs), -1)
    assert decode_records(v2, h) == recs


def test_up_conversion_renumbers_and_recompresses_when_asked() -> None:
    recs = [Record(0, 10, b"a", b"1"), Record(1, 20, b"b", b"2")]
    legacy = build_message_set(recs, magic=1, compression=1)
    v2 = convert_to_v2(legacy, base_offset=500, compression=4, timestamp_type=LOG_APPEND_TIME,
                       log_append_time=77, partition_leader_epoch=3)
    h = read_batch_header(v2)
    assert h is not None
    assert (h.base_offset, h.last_offset, h.compression, h.timestamp_type, h.max_timestamp) == (500, 501, 4, 1, 77)
    assert h.partition_leader_epoch == 3
    assert [(r.offset, r.timestamp, r.key) for r in decode_records(v2, h)] == [(500, 77, b"a"), (501, 77, b"b")]


@given(record_runs(with_headers=True), st.sampled_from([0, 1]), st.sampled_from([0, 1, 2, 3]))
def test_down_conversion_keeps_offsets_keys_values_and_v1_timestamps(recs: list[Record], to_magic: int,
                                                                     codec: int) -> None:
    stored = build_batch(recs, compression=codec)
    old = down_convert(stored, to_magic)
    assert all(h.magic == to_magic and h.compression == codec for h in iter_batches(old))
    got = _decode_all(old)
    assert [(r.offset, r.key, r.value) for r in got] == [(r.offset, r.key, r.value) for r in recs]
    assert all(r.headers == [] for r in got)
    assert [r.timestamp for r in got] == ([r.timestamp for r in recs] if to_magic == 1 else [-1] * len(recs))


def test_down_conversion_drops_control_batches_and_passes_older_entries_through() -> None:
    v1 = build_message_set([Record(0, 5, b"old", b"x")], magic=1)
    data = build_batch([Record(1, 6, b"k", b"v")], producer_id=4, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    marker = build_end_txn_marker(producer_id=4, producer_epoch=0, coordinator_epoch=1, commit=True,
                                  timestamp=7, base_offset=2)
    out = down_convert(v1 + data + marker, 1)
    assert out.startswith(v1)
    assert [(r.offset, r.key) for r in _decode_all(out)] == [(0, b"old"), (1, b"k")]


def test_down_conversion_skips_records_below_fetch_offset_only_when_uncompressed() -> None:
    recs = [Record(10 + i, 100, b"k", b"%d" % i) for i in range(4)]
    plain = down_convert(build_batch(recs), 1, first_offset=12)
    assert [r.offset for r in _decode_all(plain)] == [12, 13]
    packed = down_convert(build_batch(recs, compression=1), 1, first_offset=12)
    assert [r.offset for r in _decode_all(packed)] == [10, 11, 12, 13]


def test_down_conversion_keeps_log_append_time() -> None:
    recs = [Record(0, 1, b"a", b"1"), Record(1, 2, b"b", b"2")]
    stored = build_batch(recs, compression=1, timestamp_type=LOG_APPEND_TIME, log_append_time=555)
    old = down_convert(stored, 1)
    (h,) = iter_batches(old)
    assert h.timestamp_type == LOG_APPEND_TIME and h.max_timestamp == 555
    assert [r.timestamp for r in decode_records(old, h)] == [555, 555]


def test_down_conversion_v1_to_v0() -> None:
    stored = build_message_set([Record(3, 9, b"a", b"1"), Record(4, 9, b"b", b"2")], magic=1, compression=3)
    old = down_convert(stored, 0)
    (h,) = iter_batches(old)
    assert (h.magic, h.compression, h.timestamp_type) == (0, 3, -1)
    assert [(r.offset, r.timestamp, r.key) for r in decode_records(old, h)] == [(3, -1, b"a"), (4, -1, b"b")]


def test_down_conversion_of_zstd_is_unsupported_compression_type() -> None:
    stored = build_batch([Record(0, 1, b"a", b"1")], compression=4)
    with pytest.raises(KafkaError) as e:
        down_convert(stored, 1)
    assert e.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_up_conversion_of_v0_keeps_no_timestamp_under_create_time() -> None:
    legacy = build_message_set([Record(0, -1, b"a", b"1")], magic=0)
    v2 = convert_to_v2(legacy)
    h = read_batch_header(v2)
    assert h is not None and h.timestamp_type == CREATE_TIME and h.max_timestamp == -1
    assert decode_records(v2, h)[0].timestamp == -1
