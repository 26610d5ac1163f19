"""The log manager's periodic compaction pass, the cleaner kept off logs being truncated or deleted, and the
runtime expiry of idle producer ids."""

from __future__ import annotations

from pathlib import Path

from sofakafka.protocol.records import decode_records
from sofakafka.storage.config import LogConfig
from sofakafka.storage.log import Log
from sofakafka.storage.log_manager import LogManager
from sofakafka.storage.producer_state import PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS
from sofakafka.storage.segment import LogSegment, wall_clock_ms

from .storage_helpers import FakeClock, make_batch, make_marker

COMPACT = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 0.0,
                                "file.delete.delay.ms": 0, "index.interval.bytes": 128})
DELETE = LogConfig.from_props({"cleanup.policy": "delete", "segment.bytes": 1024, "file.delete.delay.ms": 0})


def manager_for(root: Path, clock: FakeClock, **kwargs: object) -> LogManager:
    def topic_config(topic: str) -> LogConfig:
        return COMPACT if topic.startswith("compacted") else DELETE

    manager = LogManager([root], topic_configs=topic_config, time_ms=clock, **kwargs)  # type: ignore[arg-type]
    manager.startup()
    return manager


def fill_with_rewrites(lg: Log, clock: FakeClock, rounds: int = 6) -> None:
    """The same three keys rewritten ``rounds`` times over several segments, then a committed high watermark."""
    for _ in range(rounds):
        lg.append_as_leader(make_batch(3, timestamp=clock.now, value_size=100), 0)
        lg.roll()
    lg.append_as_leader(make_batch(1, timestamp=clock.now, key_prefix=b"tail"), 0)
    lg.update_high_watermark(lg.log_end_offset)


def keyed_offsets(lg: Log) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.key) for seg in lg.log_segments() for buf, h in seg.batches()
            for r in decode_records(buf, h)]


def test_the_periodic_pass_compacts_compact_logs_and_leaves_delete_logs_alone(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = manager_for(tmp_path, clock)
    compacted = manager.get_or_create_log("compacted", 0)
    plain = manager.get_or_create_log("plain", 0)
    fill_with_rewrites(compacted, clock)
    fill_with_rewrites(plain, clock)
    plain_before = keyed_offsets(plain)

    assert manager.clean_compacted_logs() == 1
    # Only the latest write of k0..k2 survives below the active segment; the tail is untouched.
    assert keyed_offsets(compacted) == [(15, b"k0"), (16, b"k1"), (17, b"k2"), (18, b"tail0")]
    assert keyed_offsets(plain) == plain_before
    assert manager.cleaner.last_clean_offset(compacted) == 18
    assert manager.cleaner.last_clean_offset(plain) is None
    # Nothing new is dirty: the next pass has nothing to do.
    assert manager.clean_compacted_logs() == 0
    manager.shutdown()


def test_deleting_a_log_forgets_its_clean_point_and_does_not_leave_cleaning_paused(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = manager_for(tmp_path, clock)
    lg = manager.get_or_create_log("compacted", 0)
    fill_with_rewrites(lg, clock)
    manager.clean_compacted_logs()
    assert manager.cleaner.last_clean_offset(lg) == 18

    assert manager.delete_log("compacted", 0)
    assert manager.cleaner.last_clean_offset(lg) is None
    assert not manager.cleaner.is_paused(lg.dir)
    # A partition re-created under the same name is cleaned from its start, not from the old clean point.
    again = manager.get_or_create_log("compacted", 0)
    fill_with_rewrites(again, clock, rounds=2)
    assert manager.clean_compacted_logs() == 1
    assert keyed_offsets(again)[:3] == [(3, b"k0"), (4, b"k1"), (5, b"k2")]
    manager.shutdown()


def test_truncation_through_the_manager_moves_the_clean_point_back_and_resumes_cleaning(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = manager_for(tmp_path, clock)
    lg = manager.get_or_create_log("compacted", 0)
    fill_with_rewrites(lg, clock)
    manager.clean_compacted_logs()
    assert manager.cleaner.last_clean_offset(lg) == 18

    # Straight on the Log, as the replica fetcher does: the manager's guard still wraps it.
    assert lg.truncate_to(16)
    # Kafka moves the clean point to the active segment's base, a boundary at or below the new end.
    assert lg.log_end_offset == 15
    assert manager.cleaner.last_clean_offset(lg) == lg.active_segment.base_offset <= 15
    assert not manager.cleaner.is_paused(lg.dir)
    assert not manager.truncate_to("compacted", 0, 100)  # nothing past the end: the clean point stays
    assert manager.cleaner.last_clean_offset(lg) == lg.active_segment.base_offset

    manager.truncate_fully_and_start_at("compacted", 0, 5)  # the manager's shorthand, same guard
    assert (lg.log_start_offset, lg.log_end_offset) == (5, 5)
    assert manager.cleaner.last_clean_offset(lg) == 5
    assert not manager.cleaner.is_paused(lg.dir)
    fill_with_rewrites(lg, clock, rounds=3)
    assert manager.clean_compacted_logs() == 1
    assert keyed_offsets(lg)[:3] == [(11, b"k0"), (12, b"k1"), (13, b"k2")]
    manager.shutdown()


def test_idle_producers_expire_in_the_periodic_pass_every_check_interval(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = manager_for(tmp_path, clock, producer_id_expiration_ms=60_000)
    lg = manager.get_or_create_log("plain", 0)
    lg.append_as_leader(make_batch(2, timestamp=clock.now, producer_id=7, producer_epoch=0, base_sequence=0), 0)
    lg.append_as_leader(make_batch(1, timestamp=clock.now, producer_id=8, producer_epoch=0, base_sequence=0,
                                   transactional=True), 0)
    lg.update_high_watermark(lg.log_end_offset)

    clock.advance(PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS - 1)
    manager.cleanup_logs()
    # Long idle, but the first check only comes one interval after the log opened.
    assert set(lg.producer_state.active_producers) == {7, 8}
    clock.advance(1)
    manager.cleanup_logs()
    # 7 is idle past producer.id.expiration.ms; 8 has an open transaction, which pins it.
    assert set(lg.producer_state.active_producers) == {8}

    lg.append_as_leader(make_marker(8, 0, commit=True, timestamp=clock.now), 0)
    lg.update_high_watermark(lg.log_end_offset)
    clock.advance(PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS - 1)
    manager.cleanup_logs()
    assert set(lg.producer_state.active_producers) == {8}  # not yet the next check
    clock.advance(1)
    manager.cleanup_logs()
    assert not lg.producer_state.active_producers
    manager.shutdown()


def test_a_truncation_waits_for_a_running_pass_and_its_result_is_never_installed(tmp_path: Path) -> None:
    import threading

    clock = FakeClock()
    manager = manager_for(tmp_path, clock)
    lg = manager.get_or_create_log("compacted", 0)
    fill_with_rewrites(lg, clock)
    in_pass, truncating = threading.Event(), threading.Event()
    real_new_cleaned_segment = lg.new_cleaned_segment

    def new_cleaned_segment(base_offset: int) -> LogSegment:
        # Hold the pass here until the truncation has asked it to stop (request_abort is what it calls first).
        in_pass.set()
        assert truncating.wait(60)
        return real_new_cleaned_segment(base_offset)

    lg.new_cleaned_segment = new_cleaned_segment  # type: ignore[method-assign]
    real_abort = manager.cleaner.abort_and_pause_cleaning

    def abort_and_pause_cleaning(log_dir: Path) -> None:
        manager.cleaner.request_abort(log_dir)
        truncating.set()
        real_abort(log_dir)

    manager.cleaner.abort_and_pause_cleaning = abort_and_pause_cleaning  # type: ignore[method-assign]
    results: list[int] = []
    worker = threading.Thread(target=lambda: results.append(manager.clean_compacted_logs()))
    worker.start()
    assert in_pass.wait(60)
    assert lg.truncate_to(9)
    worker.join()
    assert results == [0]  # the pass was abandoned, not finished over a log that changed under it
    assert lg.log_end_offset == 9
    assert [o for o, _ in keyed_offsets(lg)] == list(range(9))
    assert not [p for p in lg.dir.iterdir() if ".cleaned" in p.name or ".swap" in p.name]
    assert manager.clean_compacted_logs() == 1  # resumed afterwards
    manager.shutdown()


def test_retention_on_a_compact_delete_log_waits_while_a_pass_rewrites_it(tmp_path: Path) -> None:
    import threading

    # Starting at the wall clock: segments the cleaner emptied are aged by their file's mtime.
    clock = FakeClock(wall_clock_ms())
    compact_delete = LogConfig.from_props({"cleanup.policy": "compact,delete", "segment.bytes": 1024,
                                           "min.cleanable.dirty.ratio": 0.0, "file.delete.delay.ms": 0,
                                           "retention.ms": 60_000})
    manager = LogManager([tmp_path], topic_configs=lambda topic: compact_delete, time_ms=clock)
    manager.startup()
    lg = manager.get_or_create_log("both", 0)
    fill_with_rewrites(lg, clock)
    clock.advance(600_000)  # every inactive segment is well past retention.ms
    in_pass, release = threading.Event(), threading.Event()
    real_new_cleaned_segment = lg.new_cleaned_segment

    def new_cleaned_segment(base_offset: int) -> LogSegment:
        in_pass.set()
        assert release.wait(60)
        return real_new_cleaned_segment(base_offset)

    lg.new_cleaned_segment = new_cleaned_segment  # type: ignore[method-assign]
    worker = threading.Thread(target=manager.clean_compacted_logs)
    worker.start()
    assert in_pass.wait(60)
    segments_during_pass = lg.number_of_segments
    # The pass is reading those segments: retention leaves them for the next check rather than wait for it.
    assert manager.cleanup_logs() == 0
    assert lg.number_of_segments == segments_during_pass
    release.set()
    worker.join()
    assert not manager.cleaner.is_paused(lg.dir)
    assert manager.cleanup_logs() > 0
    assert lg.number_of_segments == 1 and lg.log_start_offset == lg.active_segment.base_offset
    manager.shutdown()


def test_shutdown_stops_a_running_pass_before_closing_the_logs(tmp_path: Path) -> None:
    import threading

    clock = FakeClock()
    manager = manager_for(tmp_path, clock)
    lg = manager.get_or_create_log("compacted", 0)
    fill_with_rewrites(lg, clock)
    before = keyed_offsets(lg)
    in_pass, stopping = threading.Event(), threading.Event()
    real_new_cleaned_segment = lg.new_cleaned_segment

    def new_cleaned_segment(base_offset: int) -> LogSegment:
        in_pass.set()
        assert stopping.wait(60)
        return real_new_cleaned_segment(base_offset)

    lg.new_cleaned_segment = new_cleaned_segment  # type: ignore[method-assign]
    real_abort = manager.cleaner.abort_and_pause_cleaning

    def abort_and_pause_cleaning(log_dir: Path) -> None:
        manager.cleaner.request_abort(log_dir)
        stopping.set()
        real_abort(log_dir)

    manager.cleaner.abort_and_pause_cleaning = abort_and_pause_cleaning  # type: ignore[method-assign]
    results: list[int] = []
    worker = threading.Thread(target=lambda: results.append(manager.clean_compacted_logs()))
    worker.start()
    assert in_pass.wait(60)
    manager.shutdown()
    worker.join()
    assert results == [0]
    assert not [p for p in lg.dir.iterdir() if ".cleaned" in p.name or ".swap" in p.name]
    assert not manager.cleaner.is_paused(lg.dir)

    reopened = manager_for(tmp_path, clock)
    again = reopened.get_log("compacted", 0)
    assert again is not None and keyed_offsets(again) == before
    assert reopened.cleaner.last_clean_offset(again) is None
    reopened.shutdown()
