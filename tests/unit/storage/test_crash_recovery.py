"""Crash a log mid-write (files cut at random bytes, garbage appended, indexes damaged) and recover it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sofakafka.protocol.records import iter_batches, read_batch_header
from sofakafka.storage.config import LogConfig
from sofakafka.storage.log import Log
from sofakafka.storage.log_manager import LogManager

from .storage_helpers import FakeClock, make_batch


def write_log(root: Path, sizes: list[tuple[int, int]], config: LogConfig) -> list[tuple[int, bytes]]:
    """Append batches through a LogManager, then "crash": descriptors closed, nothing trimmed or marked."""
    manager = LogManager([root], default_config=config)
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    written = []
    for count, value_size in sizes:
        buf = make_batch(count, value_size=value_size)
        log.append_as_leader(buf, 1)
        written.append((log.active_segment.base_offset, bytes(buf)))
    manager.abandon()
    return written


def read_everything(log: Log) -> list[bytes]:
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, min_one_message=True).records.read_bytes()
        headers = list(iter_batches(data))
        if not headers:
            break
        out += [data[h.position:h.end] for h in headers]
        offset = headers[-1].last_offset + 1
    return out


def assert_indexes_point_at_batches(log: Log) -> None:
    for seg in log.log_segments():
        for n in range(seg.offset_index.entries):
            entry = seg.offset_index.entry(n)
            header = read_batch_header(seg.read_bytes(entry.position))
            assert header is not None and header.base_offset <= entry.offset <= header.last_offset
        assert seg.offset_index.entries == 0 or seg.offset_index.last_offset < log.log_end_offset
        assert seg.time_index.entries == 0 or seg.time_index.last_entry.offset < log.log_end_offset


damage = st.sampled_from(["none", "delete", "cut", "garbage"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 120)), min_size=1, max_size=25),
    cut_fraction=st.floats(0, 1),
    garbage=st.binary(max_size=200),
    index_damage=st.lists(st.tuples(damage, st.floats(0, 1), st.binary(max_size=40)), min_size=0, max_size=8),
)
def test_recovery_keeps_every_fully_written_batch_and_serves_nothing_corrupt(
        tmp_path_factory: pytest.TempPathFactory, sizes: list[tuple[int, int]], cut_fraction: float,
        garbage: bytes, index_damage: list[tuple[str, float, bytes]]) -> None:
    root = tmp_path_factory.mktemp("crash")
    config = LogConfig.from_props({"segment.bytes": 700, "index.interval.bytes": 150, "segment.index.bytes": 400})
    written = write_log(root, sizes, config)
    part = root / "t-0"
    logs = sorted(part.glob("*.log"))
    last = logs[-1]
    last_base = int(last.name[:20])
    size = last.stat().st_size
    cut = int(size * cut_fraction)
    with open(last, "r+b") as f:
        f.truncate(cut)
        f.seek(cut)
        f.write(garbage)
    index_files = sorted(part.glob("*.index")) + sorted(part.glob("*.timeindex"))
    for (kind, where, junk), path in zip(index_damage, index_files, strict=False):
        if kind == "delete":
            path.unlink()
        elif kind == "cut":
            with open(path, "r+b") as f:
                f.truncate(int(path.stat().st_size * where))
        elif kind == "garbage":
            with open(path, "ab") as f:
                f.write(junk)

    # Which batches were wholly on disk before the cut: all of the earlier segments, a prefix of the last.
    expected: list[bytes] = []
    position = 0
    for base, data in written:
        if base < last_base:
            expected.append(data)
        else:
            if position + len(data) <= cut:
                expected.append(data)
            position += len(data)

    manager = LogManager([root], default_config=config)
    manager.startup()
    log = manager.get_log("t", 0)
    assert log is not None
    assert read_everything(log) == expected
    assert log.log_end_offset == (read_batch_header(expected[-1]).last_offset + 1  # type: ignore[union-attr]
                                  if expected else last_base)
    assert_indexes_point_at_batches(log)
    # The recovered log accepts appends right where it ends.
    info = log.append_as_leader(make_batch(1), 2)
    assert info.first_offset == log.log_end_offset - 1
    manager.shutdown()
    shutil.rmtree(root)


def test_corrupt_middle_segment_is_cut_without_losing_later_segments(tmp_path: Path) -> None:
    config = LogConfig.from_props({"segment.bytes": 700, "index.interval.bytes": 100})
    written = write_log(tmp_path, [(2, 60)] * 20, config)
    # A clean shutdown afterwards would mark everything flushed; emulate that with a recovery point at the end.
    manager = LogManager([tmp_path], default_config=config)
    manager.startup()
    manager.shutdown()
    logs = sorted((tmp_path / "t-0").glob("*.log"))
    assert len(logs) >= 3
    middle = logs[1]
    middle_base = int(middle.name[:20])
    in_middle = [d for b, d in written if b == middle_base]
    with open(middle, "r+b") as f:
        f.truncate(len(in_middle[0]) + 5)  # keep the first batch and a torn piece of the second
    manager = LogManager([tmp_path], default_config=config)
    manager.startup()
    log = manager.get_log("t", 0)
    assert log is not None
    expected = [d for b, d in written if b != middle_base or d == in_middle[0]]
    assert read_everything(log) == expected
    manager.shutdown()


def test_clean_shutdown_with_a_damaged_index_rebuilds_it(tmp_path: Path) -> None:
    config = LogConfig.from_props({"segment.bytes": 700, "index.interval.bytes": 100})
    manager = LogManager([tmp_path], default_config=config)
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    for _ in range(20):
        log.append_as_leader(make_batch(2, value_size=60), 0)
    before = read_everything(log)
    first_index = log.log_segments()[0].offset_index.raw_bytes()
    manager.shutdown()
    index = tmp_path / "t-0" / "00000000000000000000.index"
    index.write_bytes(bytes(reversed(index.read_bytes())))
    manager = LogManager([tmp_path], default_config=config)
    manager.startup()
    log = manager.get_log("t", 0)
    assert log is not None
    assert read_everything(log) == before
    assert log.log_segments()[0].offset_index.raw_bytes() == first_index
    manager.shutdown()
    assert os.path.getsize(index) == len(first_index)


@pytest.mark.parametrize("into_segment", [0, 1])
def test_unclean_load_still_checks_the_indexes_below_the_recovery_point(tmp_path: Path, into_segment: int) -> None:
    # After a crash the segments from the one holding the recovery point on are rebuilt by recovery, so their
    # indexes are not sanity-checked first; the segments below it are only checked, and a damaged index there
    # must still be found and rebuilt.
    config = LogConfig.from_props({"segment.bytes": 700, "index.interval.bytes": 100})
    log = Log(tmp_path / "t-0", config)
    for _ in range(20):
        log.append_as_leader(make_batch(2, value_size=60), 0)
    segments = log.log_segments()
    assert len(segments) >= 5
    before = read_everything(log)
    indexes = [seg.offset_index.raw_bytes() for seg in segments[:4]]
    assert all(indexes)
    recovery_point = segments[2].base_offset + into_segment  # the third segment's base, or inside it
    log.flush()
    log.close_handlers()
    for seg in segments[:4]:  # two below the recovery point, the one holding it, one after it
        path = seg.offset_index.path
        path.write_bytes(bytes(reversed(path.read_bytes())))
    reopened = Log(tmp_path / "t-0", config, recovery_point=recovery_point, had_clean_shutdown=False)
    assert read_everything(reopened) == before
    assert [seg.offset_index.raw_bytes() for seg in reopened.log_segments()[:4]] == indexes
    assert_indexes_point_at_batches(reopened)
    reopened.close()


def test_recovery_of_a_log_without_producers_leaves_the_snapshot_to_close(tmp_path: Path) -> None:
    # No producer state to keep: recovery writes no snapshot (that was a file and an fsync per partition at
    # start-up); the clean shutdown writes it, so the next clean start does not replay the log.
    config = LogConfig()
    log = Log(tmp_path / "t-0", config)
    for _ in range(3):
        log.append_as_leader(make_batch(2), 0)
    log.close_handlers()
    recovered = Log(tmp_path / "t-0", config, had_clean_shutdown=False)
    assert recovered.log_end_offset == 6
    assert recovered.producer_state.snapshot_offsets() == []
    recovered.close()
    assert recovered.producer_state.snapshot_offsets() == [6]
    Log(tmp_path / "t-0", config).close()
    assert recovered.producer_state.snapshot_offsets() == [6]


def test_producer_state_survives_repeated_crashes(tmp_path: Path) -> None:
    # An idempotent producer's last batch and another's open transaction, then non-idempotent records, crashed
    # twice: recovery snapshots the state at the log end, and both crashes keep the duplicate recognised and
    # the transaction open (it bounds the last stable offset).
    clock = FakeClock()
    config = LogConfig.from_props({"segment.bytes": 400})
    log = Log(tmp_path / "t-0", config, time_ms=clock)
    log.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0, timestamp=clock.now), 0)
    log.append_as_leader(make_batch(1, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True,
                                    timestamp=clock.now), 0)
    for _ in range(6):
        log.append_as_leader(make_batch(2, timestamp=clock.now), 0)
    assert log.number_of_segments > 1
    end = log.log_end_offset
    log.close_handlers()
    for _ in range(2):
        log = Log(tmp_path / "t-0", config, had_clean_shutdown=False, time_ms=clock)
        assert log.log_end_offset == end
        assert log.producer_state.latest_snapshot_offset == end
        log.update_high_watermark(end)
        assert log.last_stable_offset == 2  # producer 7's transaction, still open
        dup = log.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0), 0)
        assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
        log.close_handlers()


def test_unclean_load_checks_indexes_below_a_swapped_segment_holding_the_recovery_point(tmp_path: Path) -> None:
    # A crash in the middle of a cleaner's swap: the segment holding the recovery point exists only as a
    # ".swap" (the old one was already deleted). Recovery starts at the swapped segment, so the one below it
    # is only sanity-checked, and its damaged index must be found.
    config = LogConfig.from_props({"segment.bytes": 700, "index.interval.bytes": 100})
    log = Log(tmp_path / "t-0", config)
    for _ in range(20):
        log.append_as_leader(make_batch(2, value_size=60), 0)
    segments = log.log_segments()
    before = read_everything(log)
    first_index = segments[0].offset_index.raw_bytes()
    assert first_index
    log.flush()
    log.close_handlers()
    second = segments[1]
    os.replace(second.log.path, second.log.path.with_name(second.log.path.name + ".swap"))
    second.offset_index.path.unlink()
    second.time_index.path.unlink()
    path = segments[0].offset_index.path
    path.write_bytes(bytes(reversed(path.read_bytes())))
    reopened = Log(tmp_path / "t-0", config, recovery_point=second.base_offset + 1, had_clean_shutdown=False)
    assert read_everything(reopened) == before
    assert reopened.log_segments()[0].offset_index.raw_bytes() == first_index
    assert_indexes_point_at_batches(reopened)
    reopened.close()
