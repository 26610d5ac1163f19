"""Server-side filtering of fetched bytes: survivors keep their offsets, every batch keeps its span."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sofakafka.broker.record_filter import filter_fetched
from sofakafka.ldc import RecordFilter
from sofakafka.protocol.records import (
    LOG_APPEND_TIME,
    MAGIC_V1,
    MAGIC_V2,
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
    before = list(iter_batches(data))
    after = list(iter_batches(filtered))
    assert len(before) == len(after)
    for b, a in zip(before, after, strict=True):
        assert a.last_offset == b.last_offset  # the client's next fetch offset is the same
        if b.magic == MAGIC_V2:
            assert (a.base_offset, a.producer_id, a.producer_epoch, a.base_sequence, a.is_transactional,
                    a.is_control, a.timestamp_type) == (b.base_offset, b.producer_id, b.producer_epoch,
                                                        b.base_sequence, b.is_transactional, b.is_control,
                                                        b.timestamp_type)
        old = decode_records(data, b) if not (b.magic == MAGIC_V2 and b.is_control) else []
        if b.is_control or all(matches(r) for r in old):
            assert filtered[a.position:a.end] == data[b.position:b.end]


def test_an_all_matching_read_is_returned_unchanged_and_a_partial_tail_is_kept() -> None:
    whole = RecordBatchBuilder(base_offset=0)
    whole.append(Record(0, 1, b"k1", b"v", [("unit", b"R1")]))
    first = whole.build()
    second = RecordBatchBuilder(base_offset=1)
    second.append(Record(1, 1, b"x", b"v", []))
    tail = second.build()[:30]
    filtered, kept, dropped = filter_fetched(first + tail, FILTER)
    assert filtered == first + tail and (kept, dropped) == (1, 0)


def test_an_entirely_filtered_batch_becomes_an_empty_batch_over_the_same_offsets() -> None:
    b = RecordBatchBuilder(base_offset=10, compression=1, producer_id=4, producer_epoch=2, base_sequence=30)
    for i in range(5):
        b.append(Record(10 + i, 1, b"x", b"v", [("unit", b"R2")]))
    filtered, kept, dropped = filter_fetched(b.build(), FILTER)
    (h,) = list(iter_batches(filtered))
    assert (h.base_offset, h.last_offset, h.record_count, h.producer_id, h.base_sequence) == (10, 14, 0, 4, 30)
    assert (kept, dropped) == (0, 5)
    assert len(filtered) == 61
