"""Server-side filtering of fetched bytes: survivors keep their offsets, every batch keeps its span."""

from __future__ import annotations

import itertools
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from sofakafka.broker.record_filter import FILTERED_CONTROL_TYPE, filter_fetched
from sofakafka.ldc import RecordFilter
from sofakafka.protocol.records import (
    LOG_APPEND_TIME,
    MAGIC_V1,
    MAGIC_V2,
    BatchHeader,
    Record,
    RecordBatchBuilder,
    build_end_txn_marker,
    build_message_set,
    decode_records,
    iter_batches,
    validate_batch,
)

FILTER = RecordFilter.build(headers=[("unit", "R1")], key_prefixes=["k"])


def matches(r: Record) -> bool:
    return FILTER.matches(r.key, r.headers)


@st.composite
def log_bytes(draw: st.DrawFn) -> tuple[bytes, list[Record]]:
    """Entries as a log holds them: v2 batches (any codec, transactional or not, LogAppendTime or not),
    transaction markers and v1 message sets, with offsets increasing (gaps allowed, as after compaction)."""
    offset = draw(st.integers(0, 1000))
    out = bytearray()
    records: list[Record] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["v2", "v2", "v2", "marker", "v1"]))
        if kind == "marker":
            out += build_end_txn_marker(producer_id=7, producer_epoch=1, coordinator_epoch=0, commit=True,
                                        timestamp=5, base_offset=offset)
            offset += 1
            continue
        batch: list[Record] = []
        for _ in range(draw(st.integers(1, 8))):
            key = draw(st.sampled_from([None, b"k1", b"x1", b"k"]))
            unit = draw(st.sampled_from([None, b"R1", b"R2"]))
            headers = [] if unit is None or kind == "v1" else [("unit", unit)]
            batch.append(Record(offset, 1000 + offset, key, b"v%d" % offset, headers))
            offset += draw(st.integers(1, 3))
        if kind == "v1":
            out += build_message_set(batch, magic=MAGIC_V1, compression=draw(st.integers(0, 3)))
        else:
            lat = draw(st.booleans())
            builder = RecordBatchBuilder(
                base_offset=batch[0].offset, compression=draw(st.integers(0, 4)),
                timestamp_type=LOG_APPEND_TIME if lat else 0, log_append_time=99_999 if lat else None,
                producer_id=draw(st.sampled_from([-1, 3])), producer_epoch=0, base_sequence=0,
                is_transactional=draw(st.booleans()))
            for r in batch:
                builder.append(r)
            out += builder.build()
            if lat:
                batch = [Record(r.offset, 99_999, r.key, r.value, r.headers) for r in batch]
        records += batch
    return bytes(out), records


@settings(max_examples=150)
@given(log_bytes())
def test_filtered_fetch_holds_exactly_the_matching_records_at_their_offsets(case: tuple[bytes, list[Record]]) -> None:
    data, records = case
    filtered, kept, dropped = filter_fetched(data, FILTER)
    out_records: list[Record] = []
    for h in iter_batches(filtered):
        validate_batch(filtered, h)
        if not (h.magic == MAGIC_V2 and h.is_control):
            out_records += decode_records(filtered, h)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in out_records] == [
        (r.offset, r.key, r.value, r.headers, r.timestamp) for r in records if matches(r)]
    assert kept == len(out_records) and kept + dropped == len(records)


@settings(max_examples=150)
@given(log_bytes())
def test_every_entry_keeps_its_span_and_untouched_ones_their_bytes(case: tuple[bytes, list[Record]]) -> None:
    data, _ = case
    filtered, _, _ = filter_fetched(data, FILTER)
    after = list(iter_batches(filtered))
    out_pos = 0
    for b in iter_batches(data):
        # the entries that replace b: they start where b's records start and end at b's last offset, so a
        # client's next fetch offset after them is the same as after b
        replaced: list[BatchHeader] = []
        while out_pos < len(after) and (not replaced or replaced[-1].last_offset < b.last_offset):
            replaced.append(after[out_pos])
            out_pos += 1
        assert replaced and replaced[-1].last_offset == b.last_offset
        old = decode_records(data, b) if not (b.magic == MAGIC_V2 and b.is_control) else []
        if b.is_control or all(matches(r) for r in old):
            assert len(replaced) == 1 and filtered[replaced[0].position:replaced[0].end] == data[b.position:b.end]
            continue
        kept = [r for r in old if matches(r)]
        if b.magic == MAGIC_V2 and kept:
            first = replaced[0]
            assert (first.base_offset, first.producer_id, first.producer_epoch, first.base_sequence,
                    first.is_transactional, first.timestamp_type, first.compression) == (
                b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional,
                b.timestamp_type, b.compression)
        if not kept or kept[-1].offset < b.last_offset:
            marker = replaced[-1]
            (record,) = decode_records(filtered, marker)
            assert marker.is_control and marker.producer_id == -1 and not marker.is_transactional
            assert record.offset == b.last_offset and record.key == struct.pack(">hh", 0, FILTERED_CONTROL_TYPE)
            assert marker.base_offset == (kept[-1].offset + 1 if kept else old[0].offset)
        for earlier, later in itertools.pairwise(replaced):
            assert earlier.last_offset < later.base_offset or later.magic != MAGIC_V2
    assert out_pos == len(after)


def test_an_all_matching_read_is_returned_unchanged_and_a_partial_tail_is_kept() -> None:
    whole = RecordBatchBuilder(base_offset=0)
    whole.append(Record(0, 1, b"k1", b"v", [("unit", b"R1")]))
    first = whole.build()
    second = RecordBatchBuilder(base_offset=1)
    second.append(Record(1, 1, b"x", b"v", []))
    tail = second.build()[:30]
    filtered, kept, dropped = filter_fetched(first + tail, FILTER)
    assert filtered == first + tail and (kept, dropped) == (1, 0)


def test_an_entirely_filtered_batch_becomes_one_marker_over_the_same_offsets() -> None:
    b = RecordBatchBuilder(base_offset=10, compression=1, producer_id=4, producer_epoch=2, base_sequence=30)
    for i in range(5):
        b.append(Record(10 + i, 1, b"x", b"v", [("unit", b"R2")]))
    filtered, kept, dropped = filter_fetched(b.build(), FILTER)
    (h,) = list(iter_batches(filtered))
    assert (h.base_offset, h.last_offset, h.record_count, h.is_control, h.producer_id) == (10, 14, 1, True, -1)
    assert [r.offset for r in decode_records(filtered, h)] == [14]
    assert (kept, dropped) == (0, 5)


def test_a_filtered_tail_is_covered_by_a_marker_after_the_survivors() -> None:
    b = RecordBatchBuilder(base_offset=0)
    for i, unit in enumerate([b"R1", b"R2", b"R1", b"R2", b"R2"]):
        b.append(Record(i, 1, b"k", b"v%d" % i, [("unit", unit)]))
    filtered, kept, dropped = filter_fetched(b.build(), FILTER)
    survivors, marker = list(iter_batches(filtered))
    assert [r.offset for r in decode_records(filtered, survivors)] == [0, 2]
    assert (survivors.base_offset, survivors.last_offset) == (0, 2)
    assert (marker.base_offset, marker.last_offset, marker.is_control) == (3, 4, True)
    assert (kept, dropped) == (2, 3)
