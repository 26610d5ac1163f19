"""Log compaction on real Logs: what survives, what the batches keep, when cleaning runs, crash-safe swaps."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sofakafka.protocol.records import (
    BatchHeader,
    RecordBatchBuilder,
    build_end_txn_marker,
    decode_records,
    read_batch_header,
)
from sofakafka.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT
from sofakafka.storage.cleaner import LogCleaner, OffsetMap, empty_batch_header
from sofakafka.storage.config import LogConfig
from sofakafka.storage.log import Log
from sofakafka.storage.producer_state import LastRecord, ProducerStateManager
from sofakafka.storage.segment import LogSegment
from sofakafka.storage.transaction_index import AbortedTxn

NOW = 1_700_000_000_000
HOUR_MS = 3_600_000

KV = tuple[bytes | None, bytes | None]


def compact_config(**overrides: object) -> LogConfig:
    settings_: dict[str, object] = {
        "segment_bytes": 1024,
        "cleanup_policy": ("compact",),
        "min_cleanable_dirty_ratio": 0.0,
        "file_delete_delay_ms": 0,
        "segment_index_bytes": 4096,
        "index_interval_bytes": 128,
    }
    settings_.update(overrides)
    return LogConfig(**settings_)  # type: ignore[arg-type]


def open_log(root: Path, config: LogConfig | None = None) -> Log:
    return Log(root / "compacted-0", config or compact_config(), time_ms=lambda: NOW)


def batch(offset: int, records: Sequence[KV], *, pid: int = -1, epoch: int = -1, seq: int = -1,
          transactional: bool = False, compression: int = 0, timestamp: int = NOW) -> bytes:
    builder = RecordBatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                 is_transactional=transactional, compression=compression)
    for i, (key, value) in enumerate(records):
        builder.append_record(offset + i, timestamp, key, value)
    return builder.build()


def marker(offset: int, pid: int, *, epoch: int = 0, commit: bool) -> bytes:
    return build_end_txn_marker(producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, commit=commit,
                                timestamp=NOW, base_offset=offset)


def append(log: Log, data: bytes) -> None:
    log.append_as_follower(data)


def batches(log: Log) -> list[tuple[BatchHeader, list[tuple[int, bytes | None, bytes | None]]]]:
    out = []
    for segment in log.log_segments():
        for buf, header in segment.batches():
            records = [(r.offset, r.key, r.value) for r in decode_records(buf, header)]
            out.append((header, records))
    return out


def data_records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [r for header, records in batches(log) if not header.is_control for r in records]


def set_mtime(log: Log, ms: int) -> None:
    for segment in log.log_segments():
        os.utime(segment.log.path, ns=(ms * 1_000_000, ms * 1_000_000))


# -- basic behaviour -------------------------------------------------------------------------------------


def test_keeps_the_latest_value_per_key_at_its_original_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, batch(0, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]))
    append(log, batch(3, [(b"c", b"1"), (b"b", b"2")]))
    log.roll()
    append(log, batch(5, [(b"a", b"3")]))
    active_before = log.active_segment.read_bytes()
    result = LogCleaner().clean_log(log, NOW)
    assert result is not None and result.end_offset == 5
    # a@2 stays: its successor a@5 is in the active segment, which is neither cleaned nor mapped.
    assert data_records(log) == [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", b"2"), (5, b"a", b"3")]
    assert log.active_segment.read_bytes() == active_before
    assert log.log_end_offset == 6
    log.close()


def test_a_batch_that_loses_records_keeps_its_offsets_and_attributes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, batch(0, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"a", b"2")], compression=1))
    append(log, batch(4, [(b"b", b"2"), (b"z", b"9")]))
    log.roll()
    append(log, batch(6, [(b"q", b"1")]))
    LogCleaner().clean_log(log, NOW)
    (first, first_records), (_, second_records), _ = batches(log)
    assert first_records == [(2, b"c", b"1"), (3, b"a", b"2")]
    assert (first.base_offset, first.last_offset, first.compression) == (0, 3, 1)
    assert first.first_timestamp == NOW and first.max_timestamp == NOW
    # Untouched batches are copied byte for byte.
    assert second_records == [(4, b"b", b"2"), (5, b"z", b"9")]
    log.close()


def test_keyless_records_are_removed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, batch(0, [(None, b"x"), (b"k", b"v")]))
    log.roll()
    append(log, batch(2, [(b"k2", b"v")]))
    LogCleaner().clean_log(log, NOW)
    assert data_records(log) == [(1, b"k", b"v"), (2, b"k2", b"v")]
    log.close()


def _touch(segment_path: Path, ms: int) -> None:
    os.utime(segment_path, ns=(ms * 1_000_000, ms * 1_000_000))


def test_tombstones_go_only_after_delete_retention(tmp_path: Path) -> None:
    # Segments of ~70-byte batches; 200 bytes keeps the first two cleaned segments apart in pass one.
    log = open_log(tmp_path, compact_config(delete_retention_ms=HOUR_MS, segment_bytes=200))
    append(log, batch(0, [(b"a", b"1")]))
    append(log, batch(1, [(b"a", None)]))
    log.roll()
    append(log, batch(2, [(b"b", b"1")]))
    log.roll()
    append(log, batch(3, [(b"c", b"1")]))
    cleaner = LogCleaner()
    cleaner.clean_log(log, NOW)
    # Nothing was clean before this pass, so the horizon is 0: the tombstone stays for consumers to see.
    assert data_records(log) == [(1, b"a", None), (2, b"b", b"1"), (3, b"c", b"1")]
    tombstone_segment, later_clean_segment = log.log_segments()[:2]

    # The horizon is the newest clean segment's mtime minus delete.retention.ms.
    _touch(tombstone_segment.log.path, NOW - 3 * HOUR_MS)
    _touch(later_clean_segment.log.path, NOW - 150 * 60_000)  # horizon: NOW - 3.5h
    log.roll()
    append(log, batch(4, [(b"d", b"1")]))
    cleaner.clean_log(log, NOW)
    assert (1, b"a", None) in data_records(log)  # NOW - 3h is younger than the horizon

    clean = log.log_segments()[:-1]
    for segment in clean:
        _touch(segment.log.path, NOW - 3 * HOUR_MS)
    _touch(clean[-1].log.path, NOW)  # horizon: NOW - 1h
    log.roll()
    append(log, batch(5, [(b"e", b"1")]))
    cleaner.clean_log(log, NOW)
    records = data_records(log)
    assert (1, b"a", None) not in records
    assert [o for o, _, _ in records] == [2, 3, 4, 5]
    log.close()


def test_dirty_ratio_gates_cleaning(tmp_path: Path) -> None:
    log = open_log(tmp_path, compact_config(min_cleanable_dirty_ratio=0.5))
    for i in range(4):
        append(log, batch(i, [(b"k", b"v%d" % i)]))
        log.roll()
    cleaner = LogCleaner()
    assert cleaner.clean_log(log, NOW) is not None  # everything is dirty: ratio 1.0
    append(log, batch(4, [(b"k", b"v9")]))
    log.roll()
    candidate = cleaner.log_to_clean(log, NOW)
    assert 0 < candidate.cleanable_ratio <= 0.5
    assert cleaner.clean_log(log, NOW) is None
    assert cleaner.clean_log(log, NOW, force=True) is not None
    log.close()


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path) -> None:
    log = open_log(tmp_path, compact_config(min_compaction_lag_ms=HOUR_MS))
    append(log, batch(0, [(b"k", b"old")], timestamp=NOW - 2 * HOUR_MS))
    log.roll()
    append(log, batch(1, [(b"k", b"young")], timestamp=NOW - 60_000))
    log.roll()
    append(log, batch(2, [(b"other", b"x")]))
    result = LogCleaner().clean_log(log, NOW)
    assert result is not None and result.end_offset == 1
    assert data_records(log) == [(0, b"k", b"old"), (1, b"k", b"young"), (2, b"other", b"x")]
    log.close()


def test_policy_delete_is_not_compacted(tmp_path: Path) -> None:
    log = open_log(tmp_path, compact_config(cleanup_policy=("delete",)))
    append(log, batch(0, [(b"k", b"1"), (b"k", b"2")]))
    log.roll()
    assert LogCleaner().clean_log(log, NOW) is None
    log.close()


def test_small_segments_are_grouped_into_one(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(6):
        append(log, batch(i, [(b"k%d" % (i % 2), b"v%d" % i)]))
        log.roll()
    assert len(log.log_segments()) == 7
    LogCleaner().clean_log(log, NOW)
    segments = log.log_segments()
    assert [s.base_offset for s in segments] == [0, 6]
    assert data_records(log) == [(4, b"k0", b"v4"), (5, b"k1", b"v5")]
    assert sorted(p.name for p in log.dir.iterdir() if p.name.startswith("00000000000000000000")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"]
    log.close()


def test_cleaner_checkpoint_is_kafkas_text_format(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, batch(0, [(b"a", b"1"), (b"a", b"2")]))
    log.roll()
    append(log, batch(2, [(b"b", b"1")]))
    cleaner = LogCleaner()
    cleaner.clean_log(log, NOW)
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == "0\n1\ncompacted 0 2\n"
    assert cleaner.last_clean_offset(log) == 2
    # Nothing new is dirty: a second pass has nothing to do.
    assert cleaner.clean_log(log, NOW, force=True) is None
    log.close()


def test_a_full_offset_map_cleans_only_what_it_mapped(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, batch(0, [(b"a", b"1"), (b"b", b"1")]))
    log.roll()
    append(log, batch(2, [(b"a", b"2"), (b"c", b"1")]))
    log.roll()
    append(log, batch(4, [(b"z", b"1")]))
    cleaner = LogCleaner()
    cleaner.offset_map = OffsetMap(2)
    result = cleaner.clean_log(log, NOW)
    assert result is not None and result.end_offset == 2
    assert data_records(log) == [(0, b"a", b"1"), (1, b"b", b"1"), (2, b"a", b"2"), (3, b"c", b"1"),
                                 (4, b"z", b"1")]
    result = cleaner.clean_log(log, NOW)
    assert result is not None and result.end_offset == 4
    assert data_records(log) == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"c", b"1"), (4, b"z", b"1")]
    log.close()


# -- producers and transactions --------------------------------------------------------------------------


def test_a_producers_last_batch_survives_as_an_empty_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, batch(0, [(b"a", b"1"), (b"b", b"1")], pid=7, epoch=3, seq=10))
    append(log, batch(2, [(b"a", b"2"), (b"b", b"2")]))
    log.roll()
    append(log, batch(4, [(b"c", b"1")]))
    LogCleaner().clean_log(log, NOW)
    (empty, records), (kept, _), _ = batches(log)
    assert records == []
    assert (empty.base_offset, empty.last_offset, empty.producer_id, empty.producer_epoch,
            empty.base_sequence, empty.record_count) == (0, 1, 7, 3, 10, 0)
    assert empty.max_timestamp == NOW and empty.first_timestamp == -1
    assert kept.base_offset == 2
    log.close()
    # The retried batch is still recognised after a restart that replays the cleaned log.
    reopened = open_log(tmp_path)
    entry = reopened.producer_state.last_entry(7)
    assert entry is not None and (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (3, 11, 1)
    reopened.close()


def test_empty_batch_header_is_a_valid_v2_batch(tmp_path: Path) -> None:
    original = read_batch_header(batch(40, [(b"a", b"1"), (b"b", None), (b"c", b"3")], pid=1, epoch=2, seq=5,
                                       transactional=True, compression=2))
    assert original is not None
    data = empty_batch_header(original)
    header = read_batch_header(data)
    assert header is not None
    from sofakafka.protocol.records import validate_batch
    validate_batch(data, header)
    assert (header.base_offset, header.last_offset, header.base_sequence, header.is_transactional,
            header.compression, header.record_count) == (40, 42, 5, True, 0, 0)


def test_aborted_data_is_removed_and_committed_data_kept(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, batch(0, [(b"a", b"committed")], pid=1, epoch=0, seq=0, transactional=True))
    append(log, batch(1, [(b"b", b"aborted")], pid=2, epoch=0, seq=0, transactional=True))
    append(log, marker(2, 1, commit=True))
    append(log, marker(3, 2, commit=False))
    append(log, batch(4, [(b"c", b"plain")]))
    append(log, batch(5, [(b"a", b"aborted too")], pid=1, epoch=0, seq=1, transactional=True))
    append(log, marker(6, 1, commit=False))
    append(log, batch(7, [(b"x", b"pid2 moves on")], pid=2, epoch=0, seq=1))
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    append(log, batch(8, [(b"y", b"1")]))
    assert [t.last_offset for t in log.collect_aborted_transactions(0, 8)] == [3, 6]
    LogCleaner().clean_log(log, NOW)
    assert data_records(log) == [(0, b"a", b"committed"), (4, b"c", b"plain"), (7, b"x", b"pid2 moves on"),
                                 (8, b"y", b"1")]
    kinds = [(h.base_offset, h.is_control, h.record_count) for h, _ in batches(log)]
    # pid 1's last data batch (offset 5, aborted) survives empty to keep its sequence, so its ABORT marker
    # and txnindex entry stay; pid 2's aborted batch is gone, so its marker is only kept until the horizon.
    assert (5, False, 0) in kinds and (6, True, 1) in kinds
    assert (1, False, 1) not in kinds
    cleaned = log.log_segments()[0]
    assert AbortedTxn(1, 5, 6, 7) in cleaned.txn_index.all_aborted_txns()
    log.close()


def test_open_transactions_bound_the_cleanable_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, batch(0, [(b"a", b"1")]))
    log.roll()
    append(log, batch(1, [(b"a", b"2")], pid=1, epoch=0, seq=0, transactional=True))
    log.roll()
    append(log, batch(2, [(b"a", b"3")]))
    log.roll()
    append(log, batch(3, [(b"z", b"1")]))
    log.update_high_watermark(log.log_end_offset)
    result = LogCleaner().clean_log(log, NOW)
    assert result is not None and result.end_offset == 1
    assert data_records(log)[0] == (0, b"a", b"1")
    log.close()


# -- crash safety ----------------------------------------------------------------------------------------


def _fill_for_crash(log: Log) -> None:
    for i in range(8):
        append(log, batch(i * 2, [(b"k%d" % (i % 3), b"v%d" % i), (b"j", b"%d" % i)]))
        if i % 2:
            log.roll()
    append(log, batch(16, [(b"tail", b"t")]))


@pytest.mark.parametrize("crash_point", ["cleaned_written", "renamed_to_swap", "old_renamed_deleted"])
def test_a_crash_during_the_swap_recovers_a_consistent_log(tmp_path: Path, crash_point: str) -> None:
    before_dir, after_dir, crashed = tmp_path / "before", tmp_path / "after", tmp_path / "crashed"
    log = open_log(before_dir)
    _fill_for_crash(log)
    original = data_records(log)
    old_bases = [s.base_offset for s in log.log_segments()]
    log.close()
    shutil.copytree(before_dir, after_dir)
    log = open_log(after_dir)
    LogCleaner().clean_log(log, NOW)
    cleaned = data_records(log)
    new_bases = [s.base_offset for s in log.log_segments()[:-1]]
    log.close()
    assert cleaned != original

    # Rebuild the files as a crash at `crash_point` would have left them.
    shutil.copytree(before_dir / "compacted-0", crashed / "compacted-0")
    part = crashed / "compacted-0"
    suffix = ".cleaned" if crash_point == "cleaned_written" else ".swap"
    for base in new_bases:
        for ext in (".log", ".index", ".timeindex", ".txnindex"):
            src = after_dir / "compacted-0" / f"{base:020d}{ext}"
            if src.exists():
                shutil.copy(src, part / f"{base:020d}{ext}{suffix}")
    if crash_point == "old_renamed_deleted":
        for base in old_bases[:-1]:
            for ext in (".log", ".index", ".timeindex", ".txnindex"):
                path = part / f"{base:020d}{ext}"
                if path.exists():
                    path.rename(path.with_name(path.name + ".deleted"))

    recovered = Log(part, compact_config(), time_ms=lambda: NOW, had_clean_shutdown=False)
    expected = original if crash_point == "cleaned_written" else cleaned
    assert data_records(recovered) == expected
    assert recovered.log_end_offset == 17
    assert not [p for p in part.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    # The recovered log keeps working: it can be cleaned again and appended to.
    LogCleaner().clean_log(recovered, NOW, force=True)
    append(recovered, batch(17, [(b"after", b"crash")]))
    assert data_records(recovered)[-1] == (17, b"after", b"crash")
    recovered.close()


def test_a_failed_pass_leaves_no_cleaned_files(tmp_path: Path) -> None:
    class FailingSwapLog(Log):
        def replace_segments(self, new_segments: list, old_segments: list) -> None:  # type: ignore[type-arg]
            raise OSError("disk full")

    log = FailingSwapLog(tmp_path / "compacted-0", compact_config(), time_ms=lambda: NOW)
    _fill_for_crash(log)
    before = data_records(log)
    with pytest.raises(OSError):
        LogCleaner().clean_log(log, NOW)
    assert not [p for p in log.dir.iterdir() if ".cleaned" in p.name]
    assert data_records(log) == before
    log.close()


# -- model check -----------------------------------------------------------------------------------------


@dataclass
class ModelRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    pid: int
    txn_id: int | None  # index of the transaction it belongs to


KEYS = st.sampled_from([b"a", b"b", b"c", b"d", None])
VALUES = st.sampled_from([b"1", b"22", None])
RECORDS = st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=4)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), RECORDS, st.sampled_from([0, 0, 1, 4])),
        st.tuples(st.just("idempotent"), RECORDS, st.just(0)),
        st.tuples(st.just("txn"), RECORDS, st.sampled_from([100, 101])),
        st.tuples(st.just("commit"), st.just([]), st.sampled_from([100, 101])),
        st.tuples(st.just("abort"), st.just([]), st.sampled_from([100, 101])),
        st.tuples(st.just("roll"), st.just([]), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40)
@given(ops=OPS, close_open_txns=st.booleans(), final_roll=st.booleans())
def test_cleaning_agrees_with_a_model(tmp_path_factory: pytest.TempPathFactory,
                                      ops: list[tuple[str, list[KV], int]], close_open_txns: bool,
                                      final_roll: bool) -> None:
    root = tmp_path_factory.mktemp("clean")
    log = open_log(root, compact_config(segment_bytes=400))
    records: list[ModelRecord] = []
    open_txn: dict[int, int] = {}
    txn_outcome: dict[int, bool] = {}  # txn id -> aborted
    seqs = {200: 0, 100: 0, 101: 0}
    next_txn = 0

    def end_txn(pid: int, commit: bool) -> None:
        txn = open_txn.pop(pid)
        txn_outcome[txn] = not commit
        append(log, marker(log.log_end_offset, pid, commit=commit))

    for kind, recs, arg in ops:
        offset = log.log_end_offset
        if kind == "plain":
            append(log, batch(offset, recs, compression=arg))
            records += [ModelRecord(offset + i, k, v, -1, None) for i, (k, v) in enumerate(recs)]
        elif kind == "idempotent":
            append(log, batch(offset, recs, pid=200, epoch=0, seq=seqs[200]))
            seqs[200] += len(recs)
            records += [ModelRecord(offset + i, k, v, 200, None) for i, (k, v) in enumerate(recs)]
        elif kind == "txn":
            if arg not in open_txn:
                open_txn[arg] = next_txn
                next_txn += 1
            append(log, batch(offset, recs, pid=arg, epoch=0, seq=seqs[arg], transactional=True))
            seqs[arg] += len(recs)
            records += [ModelRecord(offset + i, k, v, arg, open_txn[arg]) for i, (k, v) in enumerate(recs)]
        elif kind in ("commit", "abort"):
            if arg in open_txn:
                end_txn(arg, kind == "commit")
        elif log.active_segment.size:
            log.roll()
    if close_open_txns:
        for pid in sorted(open_txn):
            end_txn(pid, True)
    if final_roll and log.active_segment.size:
        log.roll()
    log.update_high_watermark(log.log_end_offset)

    before = batches(log)
    active_base = log.active_segment.base_offset
    active_bytes = log.active_segment.read_bytes()
    last_records = log.producer_state.last_records_of_active_producers()
    result = LogCleaner().clean_log(log, NOW)
    end = result.end_offset if result is not None else 0

    latest: dict[bytes, int] = {}
    for r in records:
        aborted = r.txn_id is not None and txn_outcome.get(r.txn_id, False)
        if r.offset < end and r.key is not None and not aborted:
            latest[r.key] = r.offset
    expected = []
    for r in records:
        aborted = r.txn_id is not None and txn_outcome.get(r.txn_id, False)
        if r.offset >= end:
            expected.append((r.offset, r.key, r.value))
        elif not aborted and r.key is not None and latest[r.key] == r.offset:
            expected.append((r.offset, r.key, r.value))
    after = batches(log)
    assert data_records(log) == expected

    # Nothing in the active segment was touched.
    assert log.active_segment.base_offset == active_base
    assert log.active_segment.read_bytes() == active_bytes
    # Every surviving batch is an original batch, same offsets span and producer fields.
    originals = {h.base_offset: h for h, _ in before}
    for header, _ in after:
        o = originals[header.base_offset]
        assert (header.last_offset, header.producer_id, header.producer_epoch, header.base_sequence,
                header.is_transactional, header.is_control, header.timestamp_type) == (
            o.last_offset, o.producer_id, o.producer_epoch, o.base_sequence, o.is_transactional,
            o.is_control, o.timestamp_type)
        if header.record_count:
            assert header.compression == o.compression
    # Each active producer's last data batch is still there, so its sequence survives.
    surviving_last_offsets = {(h.producer_id, h.last_offset) for h, _ in after}
    for pid, last in last_records.items():
        if last.last_data_offset is not None:
            assert (pid, last.last_data_offset) in surviving_last_offsets
    # A reopened log reads the same.
    log.close()
    reopened = open_log(root, compact_config(segment_bytes=400))
    assert data_records(reopened) == expected
    reopened.close()


# -- more batch shapes and policies ----------------------------------------------------------------------


def test_markers_without_data_go_once_past_the_delete_horizon(tmp_path: Path) -> None:
    # 150-byte segments hold about two batches, so cleaned groups stay apart.
    log = open_log(tmp_path, compact_config(delete_retention_ms=HOUR_MS, segment_bytes=150))
    append(log, batch(0, [(b"a", b"1")], pid=1, epoch=0, seq=0, transactional=True))
    append(log, marker(1, 1, commit=True))
    append(log, batch(2, [(b"b", b"1")], pid=2, epoch=0, seq=0, transactional=True))
    append(log, marker(3, 2, commit=False))
    append(log, batch(4, [(b"a", b"2")], pid=1, epoch=0, seq=1))
    append(log, batch(5, [(b"z", b"1")], pid=2, epoch=0, seq=1))
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    append(log, batch(6, [(b"c", b"1")]))
    cleaner = LogCleaner()
    cleaner.clean_log(log, NOW)
    # Data gone (a@0 superseded, b@2 aborted) but the markers stay until the horizon passes them.
    assert [h.base_offset for h, _ in batches(log) if h.is_control] == [1, 3]
    assert data_records(log)[:2] == [(4, b"a", b"2"), (5, b"z", b"1")]

    # Make a newer clean segment without markers, then age everything before it past the horizon.
    append(log, batch(7, [(b"d", b"1")]))
    log.roll()
    append(log, batch(8, [(b"e", b"1")]))
    cleaner.clean_log(log, NOW)
    clean = log.log_segments()[:-1]
    assert clean[-1].base_offset >= 6
    for segment in clean[:-1]:
        _touch(segment.log.path, NOW - 3 * HOUR_MS)
    _touch(clean[-1].log.path, NOW)
    log.roll()
    append(log, batch(9, [(b"f", b"1")]))
    cleaner.clean_log(log, NOW)
    assert [h.base_offset for h, _ in batches(log) if h.is_control] == []
    assert [o for o, _, _ in data_records(log)] == [4, 5, 6, 7, 8, 9]
    log.close()


def test_log_append_time_batches_keep_their_time_when_rebuilt(tmp_path: Path) -> None:
    from sofakafka.protocol.records import LOG_APPEND_TIME

    log = open_log(tmp_path)
    builder = RecordBatchBuilder(base_offset=0, timestamp_type=LOG_APPEND_TIME, log_append_time=NOW + 5)
    builder.append_record(0, NOW, b"a", b"1")
    builder.append_record(1, NOW, b"b", b"1")
    builder.append_record(2, NOW, b"a", b"2")
    append(log, builder.build())
    log.roll()
    append(log, batch(3, [(b"z", b"z")]))
    LogCleaner().clean_log(log, NOW)
    (header, records), _ = batches(log)
    assert records == [(1, b"b", b"1"), (2, b"a", b"2")]
    assert (header.timestamp_type, header.max_timestamp, header.last_offset) == (LOG_APPEND_TIME, NOW + 5, 2)
    log.close()


def test_legacy_message_sets_are_compacted_too(tmp_path: Path) -> None:
    from sofakafka.protocol.records import MAGIC_V1, Record, build_message_set

    log = open_log(tmp_path)
    recs = [Record(0, NOW, b"a", b"1"), Record(1, NOW, b"b", b"1"), Record(2, NOW, b"a", b"2")]
    append(log, build_message_set(recs, magic=MAGIC_V1, compression=1))
    append(log, build_message_set([Record(3, NOW, b"b", b"2"), Record(4, NOW, b"c", None)], magic=MAGIC_V1))
    log.roll()
    append(log, batch(5, [(b"z", b"z")]))
    LogCleaner().clean_log(log, NOW)
    assert data_records(log) == [(2, b"a", b"2"), (3, b"b", b"2"), (4, b"c", None), (5, b"z", b"z")]
    first = batches(log)[0][0]
    assert (first.magic, first.compression) == (MAGIC_V1, 1)
    log.close()


def test_compact_delete_resets_a_checkpoint_below_the_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, compact_config(cleanup_policy=("compact", "delete")))
    for i in range(4):
        append(log, batch(i, [(b"k", b"v%d" % i)]))
        log.roll()
    cleaner = LogCleaner()
    cleaner.update_checkpoint(log, 0)
    log.update_high_watermark(log.log_end_offset)
    assert log.maybe_increment_log_start_offset(2)
    candidate = cleaner.log_to_clean(log, NOW)
    assert (candidate.first_dirty_offset, candidate.force_update_checkpoint) == (2, True)
    result = cleaner.clean_log(log, NOW)
    assert result is not None and result.first_dirty_offset == 2
    assert cleaner.last_clean_offset(log) == 4
    log.close()


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(tmp_path: Path) -> None:
    log = open_log(tmp_path, compact_config(min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=HOUR_MS))
    append(log, batch(0, [(b"k", b"1")], timestamp=NOW - 2 * HOUR_MS))
    log.roll()
    append(log, batch(1, [(b"k", b"2")]))
    log.roll()
    append(log, batch(2, [(b"x", b"1")]))
    cleaner = LogCleaner()
    cleaner.clean_log(log, NOW, force=True)
    log.roll()
    # A late-arriving old record (its batch is the first of its segment, which is what KIP-354 looks at).
    append(log, batch(3, [(b"x", b"2")], timestamp=NOW - 2 * HOUR_MS))
    log.roll()
    append(log, batch(4, [(b"y", b"1")]))
    candidate = cleaner.log_to_clean(log, NOW)
    assert candidate.cleanable_ratio < 0.9 and candidate.need_compaction_now
    assert cleaner.clean_log(log, NOW) is not None
    assert data_records(log) == [(1, b"k", b"2"), (3, b"x", b"2"), (4, b"y", b"1")]
    log.close()


# -- pausing and aborting ----------------------------------------------------------------------------------


def test_a_paused_log_is_not_cleaned_until_resumed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    _fill_for_crash(log)
    cleaner = LogCleaner()
    cleaner.abort_and_pause_cleaning(log.dir)
    cleaner.abort_and_pause_cleaning(log.dir)
    assert cleaner.clean_log(log, NOW) is None
    cleaner.resume_cleaning(log.dir)
    assert cleaner.is_paused(log.dir)
    cleaner.resume_cleaning(log.dir)
    assert not cleaner.is_paused(log.dir)
    with pytest.raises(ValueError):
        cleaner.resume_cleaning(log.dir)
    assert cleaner.clean_log(log, NOW) is not None
    log.close()


def test_an_aborted_pass_leaves_the_log_and_checkpoint_as_they_were(tmp_path: Path) -> None:
    cleaner = LogCleaner()

    class AbortingLog(Log):
        """Replication truncating the log while the cleaner writes its first cleaned segment."""

        def new_cleaned_segment(self, base_offset: int) -> LogSegment:
            cleaner.request_abort(self.dir)
            return super().new_cleaned_segment(base_offset)

    log = AbortingLog(tmp_path / "compacted-0", compact_config(), time_ms=lambda: NOW)
    _fill_for_crash(log)
    before = data_records(log)
    assert cleaner.clean_log(log, NOW) is None
    assert data_records(log) == before
    assert cleaner.last_clean_offset(log) is None
    assert not [p for p in log.dir.iterdir() if ".cleaned" in p.name]
    log.close()


def test_truncation_below_the_clean_point_moves_the_checkpoint_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    _fill_for_crash(log)
    cleaner = LogCleaner()
    cleaner.clean_log(log, NOW)
    assert cleaner.last_clean_offset(log) == 16
    cleaner.maybe_truncate_checkpoint(log, 10)
    assert cleaner.last_clean_offset(log) == 10
    cleaner.maybe_truncate_checkpoint(log, 12)
    assert cleaner.last_clean_offset(log) == 10
    cleaner.update_checkpoint(log, None)
    assert cleaner.last_clean_offset(log) is None
    log.close()


def test_abort_from_another_thread_waits_for_the_running_pass_to_stop(tmp_path: Path) -> None:
    import threading

    cleaner = LogCleaner()
    started, go = threading.Event(), threading.Event()

    class SlowLog(Log):
        def new_cleaned_segment(self, base_offset: int) -> LogSegment:
            started.set()
            go.wait()
            return super().new_cleaned_segment(base_offset)

    log = SlowLog(tmp_path / "compacted-0", compact_config(), time_ms=lambda: NOW)
    _fill_for_crash(log)
    before = data_records(log)
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(cleaner.clean_log(log, NOW)))
    worker.start()
    assert started.wait(60)
    cleaner.request_abort(log.dir)
    go.set()
    cleaner.abort_and_pause_cleaning(log.dir)  # returns only once the pass has stopped
    assert not [p for p in log.dir.iterdir() if ".cleaned" in p.name]
    worker.join()
    assert results == [None]
    assert data_records(log) == before
    assert cleaner.clean_log(log, NOW) is None  # still paused
    cleaner.resume_cleaning(log.dir)
    assert cleaner.clean_log(log, NOW) is not None
    log.close()


@pytest.mark.parametrize("crash_point", ["all_swap", "log_already_live"])
def test_a_swapped_segment_found_after_a_crash_keeps_its_aborted_transactions(tmp_path: Path,
                                                                              crash_point: str) -> None:
    before_dir, after_dir, crashed = tmp_path / "before", tmp_path / "after", tmp_path / "crashed"
    log = open_log(before_dir)
    append(log, batch(0, [(b"a", b"1")], pid=1, epoch=0, seq=0, transactional=True))
    append(log, marker(1, 1, commit=False))
    append(log, batch(2, [(b"b", b"1")]))
    append(log, batch(3, [(b"b", b"2")]))
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    append(log, batch(4, [(b"z", b"1")]))
    log.update_high_watermark(log.log_end_offset)
    log.close()
    shutil.copytree(before_dir, after_dir)
    log = open_log(after_dir)
    LogCleaner().clean_log(log, NOW)
    # pid 1's aborted batch survives empty (its producer's last), so the marker and its index entry stay.
    expected = [AbortedTxn(1, 0, 1, 2)]
    assert log.log_segments()[0].txn_index.all_aborted_txns() == expected
    log.close()

    # all_swap: a crash after the cleaned files became ".swap", before they took the live names.
    # log_already_live: a crash in the middle of ".swap" -> live, the old segment already ".deleted" and the
    # new log renamed, its indexes not yet.
    shutil.copytree(before_dir / "compacted-0", crashed / "compacted-0")
    part = crashed / "compacted-0"
    if crash_point == "log_already_live":
        for old in part.glob(f"{0:020d}.*"):
            old.rename(old.with_name(old.name + ".deleted"))
    for ext in (".log", ".index", ".timeindex", ".txnindex"):
        suffix = "" if crash_point == "log_already_live" and ext == ".log" else ".swap"
        shutil.copy(after_dir / "compacted-0" / f"{0:020d}{ext}", part / f"{0:020d}{ext}{suffix}")
    # Everything below the active segment was flushed (recovery point 4), so recovery does not replay segment
    # 0 through the producer state: only the swapped-in .txnindex can tell that offsets 0-1 were aborted.
    recovered = Log(part, compact_config(), time_ms=lambda: NOW, had_clean_shutdown=False, recovery_point=4)
    assert recovered.log_segments()[0].txn_index.all_aborted_txns() == expected
    assert recovered.collect_aborted_transactions(0, 4) == expected
    assert [r[:2] for r in data_records(recovered)] == [(3, b"b"), (4, b"z")]
    recovered.close()
    # And after a clean restart the live .txnindex still has it.
    reopened = Log(part, compact_config(), time_ms=lambda: NOW)
    assert reopened.collect_aborted_transactions(0, 4) == expected
    reopened.close()


def test_the_cleaner_reads_producer_state_only_under_the_log_lock(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    lock = log._lock

    class LockCheckingProducerState(ProducerStateManager):
        """Appends change the producer state under the log lock; a reader without it sees a torn state."""

        def first_unstable_offset(self) -> int | None:
            assert lock._is_owned(), "first_unstable_offset read without the log lock"  # type: ignore[attr-defined]
            return super().first_unstable_offset()

        def last_records_of_active_producers(self) -> dict[int, LastRecord]:
            assert lock._is_owned(), "producer last records read without the log lock"  # type: ignore[attr-defined]
            return super().last_records_of_active_producers()

    log.producer_state.__class__ = LockCheckingProducerState
    append(log, batch(0, [(b"a", b"1")], pid=1, epoch=0, seq=0))
    append(log, batch(1, [(b"a", b"2")], pid=1, epoch=0, seq=1))
    log.roll()
    append(log, batch(2, [(b"b", b"1")], pid=2, epoch=0, seq=0, transactional=True))
    log.roll()
    append(log, batch(3, [(b"z", b"1")]))
    log.update_high_watermark(log.log_end_offset)
    result = LogCleaner().clean_log(log, NOW, force=True)
    assert result is not None and result.end_offset == 2  # the open transaction bounds the pass
    assert [r[:2] for r in data_records(log)] == [(1, b"a"), (2, b"b"), (3, b"z")]
    log.close()


class _Crash(BaseException):
    """The process dies here: nothing after it runs, no cleanup touches the files."""


@pytest.mark.parametrize("crash_at", range(17))
def test_a_crash_at_any_rename_of_the_swap_keeps_the_aborted_transactions(tmp_path: Path, crash_at: int,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path)
    append(log, batch(0, [(b"a", b"1")], pid=1, epoch=0, seq=0, transactional=True))
    append(log, marker(1, 1, commit=False))
    append(log, batch(2, [(b"b", b"1")]))
    log.roll()
    append(log, batch(3, [(b"b", b"2")]))
    log.roll()
    append(log, batch(4, [(b"z", b"1")]))
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    original = [r[:2] for r in data_records(log)]
    renames = 0
    real_replace = os.replace

    def replace_then_crash(src: object, dst: object) -> None:
        nonlocal renames
        if renames == crash_at:
            # From here on the "dead" process must not touch the disk (the pass's own cleanup would).
            monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: None)
            raise _Crash
        renames += 1
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace_then_crash)
    try:
        LogCleaner().clean_log(log, NOW, force=True)
        assert renames == crash_at  # the last case crashes nowhere: every rename above was a crash point
    except _Crash:
        pass
    monkeypatch.undo()
    log.close_handlers()

    # Recovery starts at the active segment: only the .txnindex files can tell that offsets 0-1 were aborted.
    recovered = Log(log.dir, compact_config(), time_ms=lambda: NOW, had_clean_shutdown=False, recovery_point=4)
    assert recovered.collect_aborted_transactions(0, 4) == [AbortedTxn(1, 0, 1, 2)]
    assert [r[:2] for r in data_records(recovered)] in (original, [(3, b"b"), (4, b"z")])
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    recovered.close()
