from pathlib import Path

import pytest

from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.records import LOG_APPEND_TIME, decode_records, iter_batches, read_batch_header
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import (
    CorruptLogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from sofakafka.storage.log import FetchIsolation, Log, parse_topic_partition
from sofakafka.storage.segment import LogSegment
from sofakafka.storage.transaction_index import AbortedTxn, TransactionIndex

from .storage_helpers import FakeClock, make_batch, make_marker


def new_log(tmp_path: Path, clock: FakeClock | None = None, **props: object) -> Log:
    cfg = LogConfig.from_props({k.replace("_", "."): v for k, v in props.items()})
    return Log(tmp_path / "topic-0", cfg, time_ms=clock or FakeClock())


def offsets_of(data: bytes) -> list[int]:
    return [r.offset for h in iter_batches(data) for r in decode_records(data, h)]


def test_partition_dir_names() -> None:
    assert parse_topic_partition("my-topic-12") == ("my-topic", 12)
    assert parse_topic_partition("t-3.0123456789abcdef0123456789abcdef-delete") == ("t", 3)
    with pytest.raises(ValueError):
        parse_topic_partition("nopartition")


def test_leader_append_assigns_offsets_and_epoch_in_place(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    first = log.append_as_leader(make_batch(3, base_offset=77), leader_epoch=4)
    second = log.append_as_leader(make_batch(2), leader_epoch=4)
    assert (first.first_offset, first.last_offset, second.first_offset, second.last_offset) == (0, 2, 3, 4)
    assert log.log_end_offset == 5
    data = log.read(0, 10_000).records.read_bytes()
    assert offsets_of(data) == [0, 1, 2, 3, 4]
    assert {h.partition_leader_epoch for h in iter_batches(data)} == {4}
    assert log.leader_epoch_cache.latest_epoch == 4
    log.close()


def test_log_append_time_overrides_timestamps(tmp_path: Path) -> None:
    clock = FakeClock(5_000_000)
    log = new_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(make_batch(2, timestamp=1), leader_epoch=0)
    assert info.log_append_time == 5_000_000
    header = read_batch_header(log.read(0, 1000).records.read_bytes())
    assert header is not None and header.timestamp_type == LOG_APPEND_TIME and header.max_timestamp == 5_000_000
    log.close()


def test_append_rejects_corrupt_oversized_and_partial_input(tmp_path: Path) -> None:
    log = new_log(tmp_path, max_message_bytes=200)
    bad = make_batch(1)
    bad[-1] ^= 1
    with pytest.raises(CorruptLogError) as info:
        log.append_as_leader(bad, 0)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch(5, value_size=100), 0)
    with pytest.raises(CorruptLogError):
        log.append_as_leader(make_batch(1)[:-3], 0)
    assert log.log_end_offset == 0
    log.close()


def test_follower_append_keeps_offsets_and_refuses_going_backwards(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_follower(make_batch(2, base_offset=10, partition_leader_epoch=3))
    assert log.log_end_offset == 12
    assert log.leader_epoch_cache.entries[0].start_offset == 10
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(make_batch(2, base_offset=11))
    log.append_as_follower(make_batch(1, base_offset=20, partition_leader_epoch=5))
    assert log.end_offset_for_epoch(3) == (3, 20)
    assert log.end_offset_for_epoch(5) == (5, 21)
    log.close()


def test_read_out_of_range_and_at_log_end(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(make_batch(3), 0)
    assert log.read(3, 100).records.size == 0
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(4, 100)
    assert info.value.code is ErrorCode.OFFSET_OUT_OF_RANGE
    log.close()


def test_reads_stop_at_the_high_watermark(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=500)
    for _ in range(10):
        log.append_as_leader(make_batch(2), 0)
    seen: list[int] = []
    log.add_high_watermark_listener(seen.append)
    log.high_watermark = 7
    assert seen == [7]
    assert log.high_watermark == 7
    got: list[int] = []
    offset = 0
    while True:
        data = log.read(offset, 10_000, isolation=FetchIsolation.HIGH_WATERMARK).records.read_bytes()
        if not data:
            break
        got += offsets_of(data)
        offset = got[-1] + 1
    assert got == [0, 1, 2, 3, 4, 5]  # batch [6, 7] holds the high watermark offset, so it is not visible
    assert log.update_high_watermark(100) == 20
    log.close()


def test_roll_by_size_and_reads_across_segments(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=400)
    for _ in range(20):
        log.append_as_leader(make_batch(2), 0)
    assert log.number_of_segments > 3
    bases = [s.base_offset for s in log.log_segments()]
    assert bases == sorted(bases) and bases[0] == 0
    got: list[int] = []
    offset = 0
    while offset < log.log_end_offset:
        got += offsets_of(log.read(offset, 1_000_000).records.read_bytes())
        offset = got[-1] + 1
    assert got == list(range(40))
    for seg in log.log_segments()[:-1]:
        assert seg.size <= 400
        assert seg.offset_index.path.stat().st_size == seg.offset_index.entries * 8  # trimmed on roll
    log.close()


def test_roll_by_segment_ms_uses_first_batch_timestamp(tmp_path: Path) -> None:
    clock = FakeClock()
    log = new_log(tmp_path, clock, segment_ms=1000)
    log.append_as_leader(make_batch(1, timestamp=10_000), 0)
    log.append_as_leader(make_batch(1, timestamp=10_900), 0)
    assert log.number_of_segments == 1
    log.append_as_leader(make_batch(1, timestamp=11_001), 0)
    assert [s.base_offset for s in log.log_segments()] == [0, 2]
    log.close()


def test_roll_when_index_is_full(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_index_bytes=32, index_interval_bytes=1)
    for _ in range(20):
        log.append_as_leader(make_batch(1), 0)
    assert log.number_of_segments > 2
    assert all(s.offset_index.entries <= 4 for s in log.log_segments())
    log.close()


def test_offset_overflow_rolls_a_new_segment(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_follower(make_batch(1, base_offset=0))
    log.append_as_follower(make_batch(1, base_offset=2**31 + 5))
    assert [s.base_offset for s in log.log_segments()] == [0, 2**31 + 5]
    log.close()


def test_fetch_offset_by_timestamp_earliest_latest_and_time(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=300)
    for i in range(10):
        log.append_as_leader(make_batch(2, timestamp=1000 * (i + 1)), 2)
    found = log.fetch_offset_by_timestamp(5500)
    assert found is not None and (found.offset, found.timestamp, found.leader_epoch) == (10, 6000, 2)
    found = log.fetch_offset_by_timestamp(5001)
    assert found is not None and found.offset == 9
    assert log.fetch_offset_by_timestamp(10**9) is None
    earliest = log.fetch_offset_by_timestamp(-2)
    latest = log.fetch_offset_by_timestamp(-1)
    assert earliest is not None and latest is not None
    assert (earliest.offset, latest.offset) == (0, 20)
    log.close()


def test_retention_by_size_deletes_oldest_inactive_segments_after_delay(tmp_path: Path) -> None:
    clock = FakeClock()
    log = new_log(tmp_path, clock, segment_bytes=400, retention_bytes=800, file_delete_delay_ms=1000)
    for _ in range(20):
        log.append_as_leader(make_batch(2), 0)
    log.high_watermark = log.log_end_offset
    in_flight = log.read(0, 10_000)
    before = log.number_of_segments
    deleted = log.delete_old_segments()
    assert deleted > 0 and log.number_of_segments == before - deleted
    assert log.size - log.active_segment.size <= 800
    assert log.log_start_offset == log.log_segments()[0].base_offset
    assert any(p.name.endswith(".log.deleted") for p in log.dir.iterdir())
    assert len(in_flight.records.read_bytes()) == in_flight.records.size  # still readable
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.purge_deleted_segments() == 0
    clock.advance(1000)
    assert log.purge_deleted_segments() == deleted
    assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())
    log.close()


def test_retention_by_time_never_deletes_the_active_segment_or_unreplicated_data(tmp_path: Path) -> None:
    clock = FakeClock()
    log = new_log(tmp_path, clock, segment_bytes=300, retention_ms=1000, file_delete_delay_ms=0)
    now = clock.now
    for _ in range(6):
        log.append_as_leader(make_batch(2, timestamp=now), 0)
    clock.advance(5000)
    assert log.delete_old_segments() == 0  # high watermark still 0: nothing replicated
    log.high_watermark = log.log_end_offset
    n = log.number_of_segments
    assert log.delete_old_segments() == n - 1
    assert log.number_of_segments == 1 and log.log_start_offset == log.active_segment.base_offset
    log.close()


def test_delete_records_moves_log_start_and_retention_removes_segments_below(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=300, file_delete_delay_ms=0, retention_ms=-1)
    for _ in range(10):
        log.append_as_leader(make_batch(2), 0)
    log.high_watermark = 15
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(16)
    assert log.maybe_increment_log_start_offset(9)
    assert log.log_start_offset == 9
    with pytest.raises(OffsetOutOfRangeError):
        log.read(8, 100)
    data = log.read(9, 100_000).records.read_bytes()
    assert offsets_of(data)[0] <= 9  # the batch holding 9 is returned whole; clients skip below the start
    log.delete_old_segments()
    assert log.log_segments()[0].base_offset <= 9
    assert all(s.base_offset <= 9 or s.base_offset > 9 for s in log.log_segments())
    assert len(log.log_segments()) == 1 or log.log_segments()[1].base_offset > 9
    log.close()


def test_truncate_to_and_truncate_fully(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=300, file_delete_delay_ms=0)
    for epoch in range(10):
        log.append_as_leader(make_batch(2), epoch)
    log.high_watermark = 20
    assert log.truncate_to(8)
    assert log.log_end_offset == 8 and log.high_watermark == 8
    assert log.leader_epoch_cache.latest_epoch == 3
    # Inside a batch: the whole batch [6, 7] goes and the log ends where it began.
    assert log.truncate_to(7)
    assert log.log_end_offset == 6 and log.high_watermark == 6
    assert log.leader_epoch_cache.latest_epoch == 2
    assert offsets_of(b"".join(log.iter_batches_bytes())) == list(range(6))
    log.append_as_leader(make_batch(1), 11)
    assert log.log_end_offset == 7
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.number_of_segments) == (100, 100, 1)
    assert log.leader_epoch_cache.entries == []
    assert sorted(p.name for p in log.dir.iterdir() if p.suffix == ".log") == ["00000000000000000100.log"]
    log.close()


def test_idempotent_retry_is_recognised_even_after_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    log = new_log(tmp_path, clock, segment_bytes=300)
    log.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0, timestamp=clock.now), 0)
    again = log.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0), 0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (0, 1)
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(make_batch(1, producer_id=9, producer_epoch=0, base_sequence=5), 0)
    assert info.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.close()
    reopened = Log(log.dir, log.config, time_ms=clock)
    dup = reopened.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0), 0)
    assert dup.duplicate and reopened.log_end_offset == 2
    reopened.close()


def test_aborted_transactions_are_indexed_and_bound_read_committed(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=1000)
    log.append_as_leader(make_batch(2, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True), 0)
    log.append_as_leader(make_batch(2, producer_id=2, producer_epoch=0, base_sequence=0, transactional=True), 0)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 0
    assert log.read(0, 10_000, isolation=FetchIsolation.TXN_COMMITTED).records.size == 0
    log.append_as_leader(make_marker(1, 0, commit=False), 0, origin=_coordinator())
    log.append_as_leader(make_marker(2, 0, commit=True), 0, origin=_coordinator())
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == log.log_end_offset
    info = log.read(0, 10_000, isolation=FetchIsolation.TXN_COMMITTED)
    assert info.aborted_transactions is not None
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in info.aborted_transactions] == [(1, 0, 4)]
    assert log.active_segment.txn_index.path.name == "00000000000000000000.txnindex"
    log.close()
    reopened = Log(log.dir, log.config, had_clean_shutdown=False)
    assert [(a.producer_id, a.first_offset) for a in reopened.collect_aborted_transactions(0, 100)] == [(1, 0)]
    reopened.close()


def _coordinator():  # type: ignore[no-untyped-def]
    from sofakafka.storage.producer_state import AppendOrigin

    return AppendOrigin.COORDINATOR


def test_replace_segments_swaps_in_cleaned_segments(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=300, file_delete_delay_ms=0)
    for _ in range(6):
        log.append_as_leader(make_batch(2), 0)
    old = log.log_segments()[:2]
    cleaned = log.new_cleaned_segment(old[0].base_offset)
    keep = next(old[1].batches())
    buf, header = keep
    cleaned.append(buf[header.position:header.end], [h for h in iter_batches(buf[header.position:header.end])])
    cleaned.on_become_inactive()
    cleaned.flush()
    log.replace_segments([cleaned], old)
    assert log.log_segments()[0].base_offset == old[0].base_offset
    assert log.log_segments()[0] is cleaned
    names = sorted(p.name for p in log.dir.iterdir())
    assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in names)
    data = log.read(0, 100_000).records.read_bytes()
    assert data == bytes(buf[header.position:header.end])
    log.close()


def test_interrupted_swap_is_completed_on_restart(tmp_path: Path) -> None:
    log = new_log(tmp_path, segment_bytes=300, file_delete_delay_ms=0)
    for _ in range(6):
        log.append_as_leader(make_batch(2), 0)
    first = log.log_segments()[0]
    kept = first.read_bytes()
    log.close()
    # A crash after ".cleaned" became ".swap": a restart must finish replacing the old segment with it.
    seg = LogSegment.open(log.dir, 0, file_suffix=".swap")
    trimmed = kept[: read_batch_header(kept).size]  # type: ignore[union-attr]
    seg.append(trimmed, list(iter_batches(trimmed)))
    seg.close()
    (log.dir / "00000000000000000000.cleaned").write_bytes(b"junk")
    reopened = Log(log.dir, log.config)
    assert reopened.log_segments()[0].read_bytes() == trimmed
    assert not any(p.name.endswith((".swap", ".cleaned")) for p in log.dir.iterdir())
    reopened.close()


@pytest.mark.parametrize("cleaned_log_left", [False, True])
def test_a_lone_txnindex_swap_is_renamed_only_when_no_cleaned_log_was_left(tmp_path: Path,
                                                                           cleaned_log_left: bool) -> None:
    """A ``.txnindex.swap`` beside a live ``.log`` with no ``.txnindex``: the crash came between the swapped
    log's rename and its txnindex's, so the restart finishes it. With a ``.log.cleaned`` beside them the crash
    came before the log reached its swap name, and the swap is stale; the restart deletes the ``.cleaned``
    first, and must still judge by what the crash left."""
    log = new_log(tmp_path)
    log.append_as_leader(make_batch(2), 0)
    log.close()
    stem = "00000000000000000000"
    assert not (log.dir / f"{stem}.txnindex").exists()
    index = TransactionIndex(0, log.dir / f"{stem}.txnindex.swap")
    index.append(AbortedTxn(7, 0, 1, 2))
    index.close()
    if cleaned_log_left:
        (log.dir / f"{stem}.log.cleaned").write_bytes(b"")
    reopened = Log(log.dir, log.config)
    names = {p.name for p in log.dir.iterdir()}
    assert not any(name.endswith((".swap", ".cleaned")) for name in names)
    assert reopened.collect_aborted_transactions(0, 2) == ([] if cleaned_log_left else [AbortedTxn(7, 0, 1, 2)])
    reopened.close()


def test_flush_messages_advances_the_recovery_point(tmp_path: Path) -> None:
    log = new_log(tmp_path, flush_messages=4)
    log.append_as_leader(make_batch(2), 0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(2), 0)
    assert log.recovery_point == 4
    log.close()


def test_flush_ms_is_applied_by_maybe_flush(tmp_path: Path) -> None:
    clock = FakeClock()
    log = new_log(tmp_path, clock, flush_ms=100)
    log.append_as_leader(make_batch(2), 0)
    assert not log.maybe_flush()
    clock.advance(100)
    assert log.maybe_flush()
    assert log.recovery_point == 2
    log.close()


def test_preallocated_segments_are_trimmed_on_roll_and_survive_a_crash(tmp_path: Path) -> None:
    log = new_log(tmp_path, preallocate="true", segment_bytes=4000)
    for _ in range(30):
        log.append_as_leader(make_batch(2, value_size=60), 0)
    assert log.number_of_segments > 1
    for seg in log.log_segments()[:-1]:
        assert seg.log.path.stat().st_size == seg.size  # the reserved tail was cut on roll
    expected = list(log.iter_batches_bytes())
    log.flush()
    log.close_handlers()  # crash: the active segment's file is still reserved at segment.bytes
    reopened = Log(log.dir, log.config, had_clean_shutdown=False)
    assert list(reopened.iter_batches_bytes()) == expected
    reopened.append_as_leader(make_batch(1), 0)
    reopened.close()
