"""The log of one partition: a directory ``<topic>-<partition>`` of segments sorted by base offset.

Reads find the segment by binary search over base offsets (``bisect``), then the segment's sparse offset index,
then scan a few batch headers. Appends go to the last ("active") segment, which is rolled when it is full, too
old, its indexes are full, or the next offsets would not fit as int32 relative offsets.

Bookkeeping the replication layer drives through this class: ``log_end_offset`` (next offset to assign),
``log_start_offset`` (first offset visible, moved by retention and DeleteRecords), ``high_watermark``
(set by the partition leader / follower fetcher; listeners are called on change), ``recovery_point`` (all
offsets below are fsynced; recovery after a crash starts there), the leader-epoch cache and the producer state.

Threading: one re-entrant lock serialises every mutation (appends, rolls, truncations, retention, segment
replacement by the cleaner, flushes). Readers (``read``, ``fetch_offset_by_timestamp``) do not take it: the
segment list is replaced copy-on-write, so a reader works on a consistent snapshot, and a segment removed
while it is being read is only renamed ``.deleted`` and closed ``file.delete.delay.ms`` later.
All methods may block on disk I/O (reads with ``pread``, ``fsync`` on roll and flush, recovery scans on open):
the broker calls them from a worker thread, never on its event loop.
"""

from __future__ import annotations

import bisect
import enum
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from sofakafka.protocol.errors import CorruptRecordError, DecodeError
from sofakafka.protocol.records import (
    LOG_APPEND_TIME,
    MAGIC_V2,
    NO_TIMESTAMP,
    BatchHeader,
    EndTransactionMarker,
    assign_offsets,
    decode_records,
    iter_batches,
    read_batch_header,
    validate_batch,
)
from sofakafka.protocol.records.header import (
    V2_HEADER_SIZE,
    V2_LAST_OFFSET_DELTA,
    V2_LENGTH,
    V2_MAGIC,
    V2_PARTITION_LEADER_EPOCH,
)
from sofakafka.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import (
    CorruptIndexError,
    CorruptLogError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from sofakafka.storage.file_cache import DescriptorCache
from sofakafka.storage.index import INT32_MAX
from sofakafka.storage.leader_epoch import LeaderEpochFileCache
from sofakafka.storage.producer_state import (
    PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    AppendOrigin,
    BatchMetadata,
    LastRecord,
    ProducerStateManager,
)
from sofakafka.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    EMPTY_SLICE,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
    TimestampAndOffset,
    wall_clock_ms,
)
from sofakafka.storage.transaction_index import AbortedTxn

log = logging.getLogger(__name__)

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"


class FetchIsolation(enum.Enum):
    """How far a read may go: the log end (followers), the high watermark, or the last stable offset."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


@dataclass(slots=True)
class LogAppendInfo:
    """What an append did; the produce path turns it into a response.

    Not frozen: a frozen dataclass pays an ``object.__setattr__`` per field, and one is built per append.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    valid_bytes: int
    record_count: int
    duplicate: bool = False


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """``<topic>-<partition>`` (also with Kafka's ``.<uuid>-delete`` / ``.<uuid>-future`` suffixes)."""
    name = dir_name
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX):
        if name.endswith(suffix):
            dot = name.rfind(".")
            if dot < 0:
                raise ValueError(f"log directory name {dir_name!r} has {suffix} without a uuid")
            name = name[:dot]
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"log directory name {dir_name!r} is not <topic>-<partition>")
    return topic, int(partition)


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class Log:
    """One partition's log. See the module docstring for who calls what."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = True,
        time_ms: Callable[[], int] = wall_clock_ms,
        producer_id_expiration_ms: int = 604_800_000,
        descriptor_cache: DescriptorCache | None = None,
    ) -> None:
        self.dir = Path(dir)
        #: Where the segments' ``.log`` and ``.txnindex`` descriptors live (the log manager's, else the
        #: process-wide default).
        self.descriptor_cache = descriptor_cache
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self.config = config
        self._time_ms = time_ms
        self._lock = threading.RLock()
        # (sorted base offsets, base offset -> segment): one tuple, replaced whole, so a reader that takes it once
        # sees a consistent pair even while the segments are replaced (cleaning, truncation, a move between dirs).
        self._view: tuple[list[int], dict[int, LogSegment]] = ([], {})
        # How many times the log was cut back (truncation, restart empty): a copy of it (a future replica being
        # filled by a move between log dirs) compares counts to know its copy may have diverged.
        self._truncations = 0
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._high_watermark = 0
        self._log_end_offset = 0
        # (offset, segment base, position), one tuple swapped atomically; the dataclass is built on demand
        # so appends do not pay for it.
        self._log_end_position: tuple[int, int, int] = (0, -1, -1)
        self._hw_listeners: list[Callable[[int], None]] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._unflushed_messages = 0
        self._last_flush_ms = time_ms()
        # Kafka's first producer-expiration check runs one interval after the log opens, not at once.
        self._last_producer_expiration_check_ms = self._last_flush_ms
        self._closed = False
        #: The error that took this log's directory offline (every later write refuses with it); None: healthy.
        self._failure: OSError | None = None
        #: Told (from the thread that hit it) when a file operation of this log fails: the log manager's
        #: log-dir failure channel, which takes the whole directory offline. Must not block or take locks:
        #: it is called with this log's lock held.
        self.io_error_handler: Callable[[Path, OSError], None] | None = None
        #: Wrapped around truncations by whoever runs a cleaner over this log (the log manager), so a pass is
        #: never rewriting segments that a truncation removes. None: nobody cleans this log.
        self.rewrite_guard: Callable[[Log], AbstractContextManager[object]] | None = None
        try:
            os.mkdir(self.dir)
            fresh = True  # made just now: nothing in it to list, clean up or recover
        except FileExistsError:
            fresh = False
        except FileNotFoundError:
            self.dir.mkdir(parents=True, exist_ok=True)
            fresh = True
        self.leader_epoch_cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(self.dir / LEADER_EPOCH_CHECKPOINT))
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms)
        self._load(had_clean_shutdown, fresh)

    # -- segment map (copy-on-write so readers need no lock) -------------------------------------------------
    @property
    def _bases(self) -> list[int]:
        return self._view[0]

    @property
    def _segments(self) -> dict[int, LogSegment]:
        return self._view[1]

    def _set_segments(self, segments: dict[int, LogSegment]) -> None:
        self._view = (sorted(segments), segments)

    def _add_segment(self, segment: LogSegment) -> None:
        segments = dict(self._segments)
        segments[segment.base_offset] = segment
        self._set_segments(segments)

    def _remove_segment(self, base_offset: int) -> None:
        segments = dict(self._segments)
        segments.pop(base_offset, None)
        self._set_segments(segments)

    def log_segments(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """Segments in offset order that may hold offsets in ``[from_offset, to_offset)`` (all by default)."""
        bases, segments = self._view
        start = 0
        if from_offset is not None:
            start = max(0, bisect.bisect_right(bases, from_offset) - 1)
        end = len(bases) if to_offset is None else bisect.bisect_left(bases, to_offset)
        return [segments[b] for b in bases[start:end]]

    @property
    def active_segment(self) -> LogSegment:
        bases, segments = self._view
        return segments[bases[-1]]

    @property
    def number_of_segments(self) -> int:
        return len(self._bases)

    def _floor_segment(self, offset: int) -> tuple[list[int], dict[int, LogSegment], int]:
        bases, segments = self._view
        return bases, segments, bisect.bisect_right(bases, offset) - 1

    # -- offsets ----------------------------------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        offset, segment_base, position = self._log_end_position
        return LogOffsetMetadata(offset, segment_base, position)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self.update_high_watermark(value)

    def add_high_watermark_listener(self, listener: Callable[[int], None]) -> None:
        """``listener(new_hw)`` runs (under the log lock) whenever the high watermark changes."""
        self._hw_listeners.append(listener)

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark, clamped to [log start, log end]; returns the value set."""
        with self._lock:
            hw = min(max(high_watermark, self._log_start_offset), self._log_end_offset)
            self._set_high_watermark(hw)
            return hw

    def maybe_increment_high_watermark(self, high_watermark: int) -> int | None:
        """Move the high watermark forward only; returns the old value if it moved."""
        with self._lock:
            if high_watermark > self._log_end_offset:
                raise ValueError(f"high watermark {high_watermark} beyond log end {self._log_end_offset}")
            old = self._high_watermark
            if high_watermark > old:
                self._set_high_watermark(high_watermark)
                return old
            return None

    def _set_high_watermark(self, hw: int) -> None:
        changed = hw != self._high_watermark
        self._high_watermark = hw
        self.producer_state.on_high_watermark_updated(hw)
        if changed:
            for listener in list(self._hw_listeners):
                listener(hw)

    @property
    def first_unstable_offset(self) -> int | None:
        """Locked: the cleaner reads it from its own thread while appends change the producer state."""
        with self._lock:
            return self.producer_state.first_unstable_offset()

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        """Each producer's last data offset and epoch, a consistent copy taken under the log lock (cleaner)."""
        with self._lock:
            return self.producer_state.last_records_of_active_producers()

    def maybe_remove_expired_producers(self, now_ms: int | None = None) -> bool:
        """Forget producers idle for ``producer.id.expiration.ms``, at most once per
        ``PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS`` (Kafka's periodic check); True if the check ran.

        The log manager's periodic pass calls this; without it an idle producer's entry (and its snapshot
        bytes) would live until the next restart.
        """
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            if self._closed or now - self._last_producer_expiration_check_ms < PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS:
                return False
            self._last_producer_expiration_check_ms = now
            self.producer_state.remove_expired_producers(now)
            return True

    @property
    def last_stable_offset(self) -> int:
        """Offsets below this are decided (committed or aborted) and replicated: the read_committed bound."""
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is not None and first_unstable < self._high_watermark:
            return first_unstable
        return self._high_watermark

    def _set_log_end_offset(self, offset: int) -> None:
        self._log_end_offset = offset
        active = self.active_segment
        self._log_end_position = (offset, active.base_offset, active.size)
        if self._high_watermark > offset:
            self._set_high_watermark(offset)
        if self._recovery_point > offset:
            self._recovery_point = offset

    # -- loading -----------------------------------------------------------------------------------------------
    def _new_segment(self, base_offset: int, suffix: str = "", active: bool = True) -> LogSegment:
        seg = LogSegment.open(
            self.dir, base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.max_index_size,
            segment_jitter_ms=self.config.segment_jitter_ms,
            now_ms=self._time_ms(),
            file_suffix=suffix,
            preallocate_size=self.config.segment_bytes if self.config.preallocate and active else 0,
            descriptor_cache=self.descriptor_cache,
        )
        if active:
            seg.resize_indexes(self.config.max_index_size)
        return seg

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A fresh ``.cleaned`` segment for the cleaner to fill before ``replace_segments``."""
        return self._new_segment(base_offset, CLEANED_SUFFIX, active=True)

    def _load(self, had_clean_shutdown: bool, fresh: bool = False) -> None:
        if not fresh:
            # One listing of the directory serves every step below (a broker restarting with 100,000 logs
            # listed each one three times before, and asked the file system about every index by name).
            names, swap_logs = self._remove_temp_files_and_collect_swaps()
            self._load_segment_files(names, had_clean_shutdown)
            self._complete_swaps(swap_logs)
        if not self._bases:
            self._add_segment(self._new_segment(self._log_start_offset))
        if not had_clean_shutdown and not fresh:
            self._recover_log()
        for seg in self.log_segments()[:-1]:
            seg.offset_index.trim_to_valid_size()
            seg.time_index.trim_to_valid_size()
            # Checked and trimmed; unmap until a read needs them, so idle segments hold no mappings.
            seg.offset_index.close_handler()
            seg.time_index.close_handler()
        active = self.active_segment
        active.resize_indexes(self.config.max_index_size)
        next_offset = active.read_next_offset()
        self._log_start_offset = min(max(self._log_start_offset, self.log_segments()[0].base_offset), next_offset)
        self._log_end_offset = next_offset
        self._log_end_position = (next_offset, active.base_offset, active.size)
        self._recovery_point = min(max(self._recovery_point, 0), next_offset)
        if had_clean_shutdown:
            self._recovery_point = next_offset
        self._high_watermark = min(self._log_start_offset, next_offset)
        self.leader_epoch_cache.truncate_from_end(next_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self._load_producer_state(next_offset)

    def _remove_temp_files_and_collect_swaps(self) -> tuple[list[str], list[Path]]:
        """Delete leftovers of interrupted work; returns the sorted names of the regular files left in the
        directory and the ``.log.swap`` files whose swap ``_complete_swaps`` finishes."""
        swaps: list[Path] = []
        index_swaps: list[Path] = []
        with os.scandir(self.dir) as it:
            files = sorted(entry.name for entry in it if entry.is_file())
        listed = set(files)  # as found: the swap rules below look at what the crash left, deleted or not
        names = set(files)  # what is left once this is done
        for name in files:
            path = self.dir / name
            if name.endswith(DELETED_SUFFIX) or name.endswith(CLEANED_SUFFIX) or name.endswith(".tmp"):
                path.unlink(missing_ok=True)
                names.discard(name)
            elif name.endswith(SWAP_SUFFIX):
                base_name = name[: -len(SWAP_SUFFIX)]
                if base_name.endswith(LOG_SUFFIX):
                    swaps.append(path)
                else:
                    index_swaps.append(path)
        swapped_stems = {p.name[:20] for p in swaps}
        for path in index_swaps:
            # Offset and time indexes are rebuilt from the swapped log; the txnindex cannot be (it needs the
            # producer state before the segment), so a swapped segment keeps the one the cleaner wrote.
            stem = path.name[:20]
            if not path.name.endswith(TXN_INDEX_SUFFIX + SWAP_SUFFIX):
                path.unlink(missing_ok=True)
            elif stem in swapped_stems:
                continue
            elif stem + LOG_SUFFIX in listed and stem + LOG_SUFFIX + CLEANED_SUFFIX not in listed and \
                    stem + TXN_INDEX_SUFFIX not in listed:
                # The crash came between the swapped log taking its live name and its txnindex doing so (the
                # old segment of that base was already renamed .deleted): finish the rename.
                os.replace(path, self.dir / (stem + TXN_INDEX_SUFFIX))
                names.discard(path.name)
                names.add(stem + TXN_INDEX_SUFFIX)
            else:
                path.unlink(missing_ok=True)  # a .cleaned -> .swap rename that never reached its log
                names.discard(path.name)
        return sorted(names), swaps

    def _load_segment_files(self, names: list[str], had_clean_shutdown: bool = True) -> None:
        """Open the segments among ``names`` (the directory's files, sorted), checking or recovering each."""
        segments: dict[int, LogSegment] = {}
        present = set(names)
        # After a crash, _recover_log rebuilds the indexes of every segment from the one holding the recovery
        # point on and validates each of their batches: checking those indexes here first would only be
        # thrown away. The first recovered base is the greatest base at or below the recovery point; a
        # ``.log.swap`` counts too, since completing the swap may replace the segment holding the recovery
        # point with it (_complete_swaps recovers it), and then recovery starts there.
        recovered_from: int | None = None
        if not had_clean_shutdown:
            at_or_below = [int(stem) for stem, _dot, ext in (name.partition(".") for name in names)
                           if ext in (LOG_SUFFIX[1:], LOG_SUFFIX[1:] + SWAP_SUFFIX) and stem.isdigit()
                           and len(stem) == 20 and int(stem) <= self._recovery_point]
            recovered_from = max(at_or_below) if at_or_below else -1
        for name in names:
            stem, _dot, ext = name.partition(".")
            if not (stem.isdigit() and len(stem) == 20):
                continue
            suffix = "." + ext
            base = int(stem)
            if suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if stem + LOG_SUFFIX not in present:
                    (self.dir / name).unlink(missing_ok=True)  # orphan index of a deleted segment
                continue
            if suffix != LOG_SUFFIX:
                continue
            if recovered_from is not None and base >= recovered_from:
                segments[base] = self._new_segment(base, active=False)  # _recover_log checks and rebuilds it
                continue
            indexes_exist = stem + INDEX_SUFFIX in present and stem + TIME_INDEX_SUFFIX in present
            seg = self._new_segment(base, active=False)
            # Index files are created by their first entry, so after a clean shutdown a missing one is an empty
            # index (a segment that never reached index.interval.bytes); the checks below still walk its
            # batches. After a crash, as in Kafka, a missing index means the segment is rebuilt.
            needs_recovery = not indexes_exist and not had_clean_shutdown
            if not needs_recovery:
                try:
                    seg.sanity_check()
                    needs_recovery = not seg.tail_is_intact()
                except CorruptIndexError as e:
                    log.warning("%s: %s; rebuilding indexes", self.dir, e)
                    needs_recovery = True
            if needs_recovery:
                # Only this segment's offset/time indexes (or a torn tail) are suspect; its txnindex stays, cut
                # to what the log still holds, because rebuilding it needs the producer state before it.
                truncated = seg.recover(self._epoch_callback, reset_txn_index=False)
                seg.txn_index.truncate_to(seg.read_next_offset())
                if truncated:
                    log.warning("%s: truncated %d invalid bytes from segment %d", self.dir, truncated, base)
            segments[base] = seg
        self._set_segments(segments)

    def _complete_swaps(self, swap_logs: list[Path]) -> None:
        """Finish a cleaner's replace_segments interrupted by a crash: the swapped segment wins."""
        for swap in swap_logs:
            base = int(swap.name[:20])
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (self.dir / f"{swap.name[:20]}{suffix}{SWAP_SUFFIX}").unlink(missing_ok=True)
            seg = self._new_segment(base, SWAP_SUFFIX, active=False)
            # The cleaner's .txnindex lists the aborted transactions still in the segment; recovery only
            # rebuilds offset and time indexes, then cuts the txnindex to what the (possibly torn) log holds.
            seg.recover(reset_txn_index=False)
            next_offset = seg.read_next_offset()
            seg.txn_index.truncate_to(next_offset)
            old = [s for s in self.log_segments() if base <= s.base_offset < max(next_offset, base + 1)]
            self._replace_segments_locked([seg], old, recovered_swap=True)

    def _epoch_callback(self, buf: bytes, header: BatchHeader) -> None:
        if header.magic >= MAGIC_V2 and header.partition_leader_epoch >= 0:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or header.partition_leader_epoch > latest:
                self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

    def _recover_log(self) -> None:
        """Validate every segment from the one holding the recovery point; cut the log at the first bad byte."""
        to_recover = self.log_segments(self._recovery_point)
        if not to_recover:
            return
        first_base = to_recover[0].base_offset
        # Producer state as of the first recovered segment, so aborted transactions can be re-indexed.
        self._load_producer_state(first_base)
        for i, seg in enumerate(to_recover):
            def on_batch(buf: bytes, header: BatchHeader, seg: LogSegment = seg) -> None:
                self._epoch_callback(buf, header)
                self._update_producer_state(buf, header, seg)

            truncated = seg.recover(on_batch)
            if truncated > 0:
                log.warning("%s: truncated %d invalid bytes at the end of segment %d", self.dir, truncated,
                            seg.base_offset)
                for later in to_recover[i + 1:]:
                    self._remove_segment(later.base_offset)
                    later.delete_files()
                break
        self.producer_state.update_map_end_offset(self.active_segment.read_next_offset())
        # A snapshot of no producer is left unwritten: it would record nothing that the segments do not still
        # say (an older snapshot, or a replay, gives the same empty state: replays only add producers), a later
        # recovery deletes it anyway (snapshots above its first recovered segment go), and the next roll or
        # close writes one at its own offset (nothing was snapshotted at the log end, so close does). It cost
        # a file creation and an fsync for every partition that only ever had non-idempotent producers.
        if not self.producer_state.is_empty:
            self.producer_state.take_snapshot()

    # -- producer state -------------------------------------------------------------------------------------------
    def _control_marker(self, buf: bytes | bytearray | memoryview, header: BatchHeader) -> tuple[int | None, int]:
        try:
            records = decode_records(buf, header)
            if not records:
                return None, -1
            marker = EndTransactionMarker.decode(records[0])
            return int(marker.control_type), marker.coordinator_epoch
        except (DecodeError, CorruptRecordError):
            return None, -1

    def _update_producer_state(self, buf: bytes | bytearray | memoryview, header: BatchHeader,
                               segment: LogSegment | None) -> None:
        control_type, coordinator_epoch = (None, -1)
        if header.is_control:
            control_type, coordinator_epoch = self._control_marker(buf, header)
        completed = self.producer_state.update(header, control_type, coordinator_epoch=coordinator_epoch)
        if completed is not None and completed.is_aborted and segment is not None:
            aborted = self.producer_state.aborted_txn(completed)
            last = segment.txn_index.last_offset
            if last is None or aborted.last_offset > last:
                segment.update_txn_index(aborted)

    def _load_producer_state(self, last_offset: int) -> None:
        """Rebuild producer state for [log start, last_offset): newest snapshot, then replay the log after it."""
        replay_from = self.producer_state.load(self._log_start_offset, last_offset, self._time_ms())
        if replay_from < last_offset:
            for seg in self.log_segments(replay_from, last_offset):
                found = seg.translate_offset(replay_from)
                if found is None:
                    continue
                for buf, header in seg.batches(found[0]):
                    if header.last_offset < replay_from:
                        continue
                    if header.base_offset >= last_offset:
                        break
                    self._update_producer_state(buf, header, None)
        self.producer_state.update_map_end_offset(last_offset)

    # -- appends ----------------------------------------------------------------------------------------------------
    def _analyze(self, buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
        config = self.config
        try:
            headers = list(iter_batches(buf))
            for h in headers:
                validate_batch(buf, h)
                if h.size > config.max_message_bytes:
                    raise RecordTooLargeError(f"batch of {h.size} bytes exceeds max.message.bytes "
                                              f"{config.max_message_bytes}")
                if h.size > config.segment_bytes:
                    raise RecordTooLargeError(f"batch of {h.size} bytes exceeds segment.bytes {config.segment_bytes}")
        except CorruptRecordError as e:
            raise CorruptLogError(f"{self.topic}-{self.partition}: {e}") from e
        if not headers:
            raise CorruptLogError(f"{self.topic}-{self.partition}: no complete record batch in {len(buf)} bytes")
        if headers[-1].end != len(buf):
            raise CorruptLogError(f"{self.topic}-{self.partition}: {len(buf) - headers[-1].end} trailing bytes "
                                  "after the last batch")
        return headers

    def _validated_headers(self, buf: bytearray, positions: list[int]) -> list[BatchHeader]:
        """``_analyze`` for a buffer whose framing ``_stamp_offsets_and_epoch`` has already walked."""
        config = self.config
        headers = []
        try:
            for position in positions:
                h = read_batch_header(buf, position)
                if h is None:  # the walk saw whole batches; a header that disagrees is corrupt
                    raise CorruptRecordError(position, "batch shorter than its length field")
                validate_batch(buf, h)
                if h.size > config.max_message_bytes:
                    raise RecordTooLargeError(f"batch of {h.size} bytes exceeds max.message.bytes "
                                              f"{config.max_message_bytes}")
                if h.size > config.segment_bytes:
                    raise RecordTooLargeError(f"batch of {h.size} bytes exceeds segment.bytes {config.segment_bytes}")
                headers.append(h)
        except CorruptRecordError as e:
            raise CorruptLogError(f"{self.topic}-{self.partition}: {e}") from e
        return headers

    def append_as_leader(self, buf: bytearray, leader_epoch: int, *,
                         origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Assign offsets (in place in ``buf``), stamp the leader epoch and maybe LogAppendTime, append.

        ``buf`` holds validated magic-2 batches (the produce path converts older formats first). A retried
        idempotent batch that is already in the log is not appended again: the result carries the original
        offsets and ``duplicate=True``. Producer-state violations raise KafkaError with their codes.
        """
        with self._lock:
            if self._closed or self._failure is not None:
                self._check_open()
            base = self._log_end_offset
            now = self._time_ms()
            positions = _stamp_offsets_and_epoch(buf, base, leader_epoch)
            if positions is not None:
                # Offsets and epoch sit outside the CRC range, so parsing after stamping validates the same
                # bytes and yields headers with the final offsets: one header parse per batch, not three.
                headers = self._validated_headers(buf, positions)
            else:
                headers = self._analyze(buf)  # raises for anything the quick walk could not take
                assign_offsets(buf, base, log_append_time=None, partition_leader_epoch=leader_epoch)
                headers = _restamped(headers, base, leader_epoch, None)
            log_append_time = now if self.config.log_append_time else None
            if log_append_time is not None:
                # Restamping time changes attributes, maxTimestamp and so the CRC: only after validation.
                assign_offsets(buf, base, log_append_time=log_append_time, partition_leader_epoch=leader_epoch)
                headers = _restamped(headers, base, leader_epoch, log_append_time)
            producer_state = self.producer_state
            max_ts, max_ts_offset, record_count = NO_TIMESTAMP, -1, 0
            for h in headers:
                if h.max_timestamp > max_ts or max_ts_offset < 0:
                    max_ts, max_ts_offset = max(h.max_timestamp, max_ts), h.last_offset
                record_count += h.record_count
                if h.producer_id < 0:
                    continue  # not idempotent: nothing for the producer state to check
                control_type, coordinator_epoch = (None, -1)
                if h.is_control:
                    control_type, coordinator_epoch = self._control_marker(buf, h)
                duplicate = producer_state.check_append(h, origin=origin, control_type=control_type,
                                                        coordinator_epoch=coordinator_epoch)
                if duplicate is not None:
                    return self._duplicate_info(duplicate, headers)
            self._append(buf, headers, now)
            return LogAppendInfo(
                first_offset=base,
                last_offset=headers[-1].last_offset,
                max_timestamp=max_ts,
                offset_of_max_timestamp=max_ts_offset,
                log_append_time=-1 if log_append_time is None else log_append_time,
                log_start_offset=self._log_start_offset,
                valid_bytes=len(buf),
                record_count=record_count,
            )

    def _duplicate_info(self, meta: BatchMetadata, headers: list[BatchHeader]) -> LogAppendInfo:
        return LogAppendInfo(
            first_offset=meta.first_offset,
            last_offset=meta.last_offset,
            max_timestamp=meta.timestamp,
            offset_of_max_timestamp=meta.last_offset,
            log_append_time=-1,
            log_start_offset=self._log_start_offset,
            valid_bytes=0,
            record_count=sum(h.record_count for h in headers),
            duplicate=True,
        )

    def append_as_follower(self, buf: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches fetched from the leader with their offsets and epochs as they are."""
        with self._lock:
            self._check_open()
            headers = self._analyze(buf)
            first = headers[0]
            if first.base_offset < self._log_end_offset or (first.magic < MAGIC_V2 and
                                                             first.last_offset < self._log_end_offset):
                raise UnexpectedAppendOffsetError(
                    f"{self.topic}-{self.partition}: follower append starts at {first.base_offset}, "
                    f"below the log end offset {self._log_end_offset}")
            previous = self._log_end_offset - 1
            for h in headers:
                if (h.base_offset <= previous and h.magic == MAGIC_V2) or h.last_offset <= previous:
                    raise UnexpectedAppendOffsetError(
                        f"{self.topic}-{self.partition}: offsets not increasing at batch {h.base_offset}")
                previous = h.last_offset
            self._append(buf, headers, self._time_ms())
            max_ts, max_off = NO_TIMESTAMP, -1
            for h in headers:
                if h.max_timestamp > max_ts or max_off < 0:
                    max_ts, max_off = max(h.max_timestamp, max_ts), h.last_offset
            return LogAppendInfo(
                first_offset=first.base_offset,
                last_offset=headers[-1].last_offset,
                max_timestamp=max_ts,
                offset_of_max_timestamp=max_off,
                log_append_time=-1,
                log_start_offset=self._log_start_offset,
                valid_bytes=len(buf),
                record_count=sum(h.record_count for h in headers),
            )

    def _append(self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader], now: int) -> None:
        try:
            self._append_batches(buf, headers, now)
        except OSError as exc:
            raise self._io_failed("append", exc) from exc

    def _io_failed(self, operation: str, exc: OSError) -> KafkaStorageError:
        """A file operation failed: the log refuses writes from now on and its directory is reported offline
        (Kafka's LogDirFailureChannel). Nothing acknowledged is touched: an append writes its batches before
        anything points at them, and a torn tail is cut by recovery at the next start."""
        first = self._failure is None
        if first:
            self._failure = exc
            log.error("%s: %s failed, taking log directory %s offline: %s", self.dir.name, operation,
                      self.dir.parent, exc)
        handler = self.io_error_handler
        if first and handler is not None:
            handler(self.dir.parent, exc)
        return KafkaStorageError(f"{self.topic}-{self.partition}: {operation} failed: {exc.strerror or exc}")

    @property
    def failed(self) -> bool:
        """A file operation of this log failed (its directory is offline); it takes no more writes."""
        return self._failure is not None

    def _append_batches(self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader], now: int) -> None:
        first, last = headers[0], headers[-1]
        next_offset = last.last_offset + 1
        if last.last_offset - first.base_offset > INT32_MAX:
            raise RecordTooLargeError(f"append spans offsets {first.base_offset}..{last.last_offset}, more than "
                                      "one segment can index")
        max_timestamp = first.max_timestamp if len(headers) == 1 else max(h.max_timestamp for h in headers)
        config = self.config
        segment = self.active_segment
        if segment.needs_roll(config.segment_ms, config.segment_bytes, max_timestamp, last.last_offset,
                              last.end - first.position, now):
            segment = self.roll(first.base_offset)
        segment.append(buf, headers)
        epochs = self.leader_epoch_cache
        for h in headers:
            if h.magic >= MAGIC_V2:
                epochs.assign(h.partition_leader_epoch, h.base_offset)
            if h.producer_id >= 0:  # batches without a producer id leave the producer state as it is
                self._update_producer_state(buf, h, segment)
        self._set_log_end_offset(next_offset)
        self.producer_state.update_map_end_offset(next_offset)
        self._unflushed_messages += next_offset - first.base_offset
        if self._unflushed_messages >= config.flush_messages:
            self.flush()

    # -- rolling ----------------------------------------------------------------------------------------------------
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or ``expected_next_offset`` if higher).

        The old active segment gets its final time-index entry, trimmed indexes and an fsync; the producer
        state is snapshotted at the new base offset. Blocks on fsync.
        """
        with self._lock:
            self._check_open()
            try:
                return self._roll(expected_next_offset)
            except OSError as exc:
                raise self._io_failed("roll", exc) from exc

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        with self._lock:
            new_offset = max(expected_next_offset or 0, self._log_end_offset)
            old = self.active_segment
            if old.base_offset == new_offset:
                if old.size == 0:
                    return old  # nothing in it yet: keep using it
                raise StorageError(f"{self.dir}: trying to roll to {new_offset}, which is the active segment")
            if new_offset < old.base_offset:
                raise StorageError(f"{self.dir}: roll offset {new_offset} below active segment {old.base_offset}")
            old.on_become_inactive()
            self.producer_state.update_map_end_offset(new_offset)
            self.producer_state.take_snapshot()
            segment = self._new_segment(new_offset)
            self._add_segment(segment)
            self._log_end_position = (self._log_end_offset, segment.base_offset, 0)
            self.flush(new_offset)
            return segment

    # -- reads --------------------------------------------------------------------------------------------------------
    def read(self, start_offset: int, max_length: int, *,
             isolation: FetchIsolation = FetchIsolation.LOG_END,
             min_one_message: bool = False, max_offset: int | None = None) -> FetchDataInfo:
        """Batches from ``start_offset`` up to ``max_length`` bytes, not beyond the isolation's bound.

        Raises OffsetOutOfRangeError if ``start_offset`` is below the log start or above the log end.
        With TXN_COMMITTED the aborted transactions overlapping the range are attached. ``max_offset``
        (exclusive) narrows the bound further. No lock: works on a snapshot of the segment list.

        The log end is taken once, with where it lies in its segment, and bounds the read in bytes, as Kafka
        bounds it by ``nextOffsetMetadata``: an append writes its batches to the segment file before it moves
        the log end, so the file may already hold a batch the log does not have yet. Bounded only by the
        file's size, a read whose upper bound is the log end (a follower's, or a consumer's when the high
        watermark or last stable offset has caught up with it) could return that batch, beyond the high
        watermark and the log end, and the fetcher's next offset would then be past the log end: answered
        OFFSET_OUT_OF_RANGE although nothing is wrong with it.
        """
        end, end_segment, end_position = self._log_end_position
        start = self._log_start_offset
        if isolation is FetchIsolation.LOG_END:
            upper = end
        elif isolation is FetchIsolation.HIGH_WATERMARK:
            upper = self._high_watermark
        else:
            upper = self.last_stable_offset
        # The high watermark and last stable offset are read after the log end: appends since then may have
        # moved them past it, but this read ends where the log ended when it began.
        upper = min(upper, end)
        if max_offset is not None:
            upper = min(upper, max_offset)
        if start_offset == end:
            return self._empty_read(start_offset, isolation)
        if start_offset > end or start_offset < start:
            raise OffsetOutOfRangeError(
                f"{self.topic}-{self.partition}: offset {start_offset} is out of range for the log with "
                f"start offset {start} and end offset {end}")
        if start_offset >= upper:
            return self._empty_read(start_offset, isolation)
        bases, segments, idx = self._floor_segment(start_offset)
        idx = max(idx, 0)
        while idx < len(bases):
            seg = segments[bases[idx]]
            if seg.base_offset >= upper:
                break  # everything in it (a segment rolled since the log end was taken, too) is past the bound
            next_base = bases[idx + 1] if idx + 1 < len(bases) else None
            max_position: int | None = None
            if upper < end and (next_base is None or upper < next_base):
                found = seg.translate_offset(upper)
                if found is not None:
                    max_position = found[0]
            if seg.base_offset == end_segment:
                max_position = end_position if max_position is None else min(max_position, end_position)
            info = seg.read(start_offset, max_length, max_position, min_one_message)
            if info is not None:
                if isolation is FetchIsolation.TXN_COMMITTED:
                    aborted = self.collect_aborted_transactions(start_offset, upper)
                    return FetchDataInfo(info.fetch_offset_metadata, info.records, info.first_entry_incomplete,
                                         aborted)
                return info
            idx += 1
        return self._empty_read(start_offset, isolation)

    def _empty_read(self, offset: int, isolation: FetchIsolation) -> FetchDataInfo:
        aborted: list[AbortedTxn] | None = [] if isolation is FetchIsolation.TXN_COMMITTED else None
        return FetchDataInfo(LogOffsetMetadata(offset), EMPTY_SLICE, False, aborted)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), for read_committed fetches."""
        out: list[AbortedTxn] = []
        for seg in self.log_segments(start_offset):
            if seg.base_offset >= upper_bound_offset:
                break
            result = seg.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(result.aborted)
            if result.is_complete:
                break
        return out

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest, -1 latest, else the first record with timestamp >= target (None if none)."""
        if target_timestamp == EARLIEST_TIMESTAMP:
            earliest = self.leader_epoch_cache.earliest_entry
            epoch = earliest.epoch if earliest is not None and earliest.start_offset <= self._log_start_offset \
                else None
            return TimestampAndOffset(NO_TIMESTAMP, self._log_start_offset, epoch)
        if target_timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self._log_end_offset, self.leader_epoch_cache.latest_epoch)
        start = self._log_start_offset
        for seg in self.log_segments():
            if seg.max_timestamp_so_far >= target_timestamp:
                found = seg.find_offset_by_timestamp(target_timestamp, start)
                if found is not None:
                    return found
        return None

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch answer: (epoch, end offset) per the leader-epoch cache."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self._log_end_offset)

    # -- log start and retention --------------------------------------------------------------------------------------
    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """Move the log start forward (DeleteRecords, retention); never beyond the high watermark."""
        with self._lock:
            if new_log_start_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"{self.topic}-{self.partition}: cannot move log start to {new_log_start_offset}, beyond the "
                    f"high watermark {self._high_watermark}")
            if new_log_start_offset <= self._log_start_offset:
                return False
            self._log_start_offset = new_log_start_offset
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producer_state.truncate_head(new_log_start_offset)
            return True

    def delete_old_segments(self) -> int:
        """Retention pass: whole inactive segments past ``retention.ms``/``retention.bytes`` (delete policy)
        or wholly below the log start offset. Returns how many segments were deleted."""
        with self._lock:
            if self._closed:
                return 0
            deleted = 0
            if self.config.delete:
                deleted += self._delete_retention_ms_breached()
                deleted += self._delete_retention_size_breached()
            deleted += self._delete_segments(
                lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset)
            return deleted

    def _delete_retention_ms_breached(self) -> int:
        if self.config.retention_ms < 0:
            return 0
        now = self._time_ms()
        return self._delete_segments(lambda seg, nxt: now - seg.largest_timestamp() > self.config.retention_ms)

    def _delete_retention_size_breached(self) -> int:
        if self.config.retention_bytes < 0:
            return 0
        excess = self.size - self.config.retention_bytes
        if excess <= 0:
            return 0

        def predicate(seg: LogSegment, nxt: LogSegment | None) -> bool:
            nonlocal excess
            if excess - seg.size >= 0:
                excess -= seg.size
                return True
            return False

        return self._delete_segments(predicate)

    def _delete_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        segments = self.log_segments()
        deletable: list[LogSegment] = []
        for i, seg in enumerate(segments[:-1]):  # never the active segment
            nxt = segments[i + 1]
            if self._high_watermark >= nxt.base_offset and predicate(seg, nxt):
                deletable.append(seg)
            else:
                break
        if not deletable:
            return 0
        for seg in deletable:
            self._remove_segment(seg.base_offset)
        self._schedule_delete(deletable)
        first = self.log_segments()[0].base_offset
        if first > self._log_start_offset:
            self._log_start_offset = first
            self.leader_epoch_cache.truncate_from_start(first)
            self.producer_state.truncate_head(first)
        return len(deletable)

    def _schedule_delete(self, segments: list[LogSegment]) -> None:
        """Rename to ``.deleted`` now, remove after ``file.delete.delay.ms`` so in-flight reads finish."""
        due = self._time_ms() + self.config.file_delete_delay_ms
        for seg in segments:
            seg.change_file_suffixes("", DELETED_SUFFIX)
            if self.config.file_delete_delay_ms == 0:
                seg.delete_files()
            else:
                self._pending_deletes.append((due, seg))

    def purge_deleted_segments(self, now_ms: int | None = None) -> int:
        """Remove ``.deleted`` segments whose delay has passed (the broker schedules this)."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            due = [seg for t, seg in self._pending_deletes if t <= now]
            self._pending_deletes = [(t, seg) for t, seg in self._pending_deletes if t > now]
        for seg in due:
            seg.delete_files()
        return len(due)

    @property
    def size(self) -> int:
        return sum(seg.size for seg in self.log_segments())

    # -- truncation (replication) -------------------------------------------------------------------------------------
    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at and after ``target_offset`` (a follower diverged from its leader).

        Runs inside ``rewrite_guard`` (the log manager's: no cleaner pass over the log meanwhile, its clean
        point moved back after), so the caller must not hold this log's lock: a pass it waits for may need it.
        """
        if target_offset < 0:
            raise ValueError(f"cannot truncate to negative offset {target_offset}")
        guard = self.rewrite_guard
        try:
            if guard is None:
                return self._truncate_to(target_offset)
            with guard(self):
                return self._truncate_to(target_offset)
        except OSError as exc:
            raise self._io_failed("truncation", exc) from exc

    def _truncate_to(self, target_offset: int) -> bool:
        with self._lock:
            self._check_open()
            if target_offset >= self._log_end_offset:
                return False
            if self.log_segments()[0].base_offset > target_offset:
                self._truncate_fully_and_start_at(target_offset)
                return True
            self._truncations += 1
            doomed = [s for s in self.log_segments() if s.base_offset > target_offset]
            for seg in doomed:
                self._remove_segment(seg.base_offset)
            self._schedule_delete(doomed)
            active = self.active_segment
            # A target inside a batch removes the whole batch; the log then ends where that batch began, so
            # the end offset always matches the data (and what a restart will compute from it).
            found = active.translate_offset(target_offset)
            new_end = target_offset
            if found is not None and found[1].base_offset < target_offset:
                new_end = max(found[1].base_offset, active.base_offset)
            active.truncate_to(target_offset)
            active.resize_indexes(self.config.max_index_size)
            self._set_log_end_offset(new_end)
            self._log_start_offset = min(self._log_start_offset, new_end)
            self.leader_epoch_cache.truncate_from_end(new_end)
            self._load_producer_state(new_end)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Drop every segment and start empty at ``new_offset`` (a follower far behind the leader's log start).

        Inside ``rewrite_guard`` like ``truncate_to``, with the same rule for the caller.
        """
        guard = self.rewrite_guard
        try:
            if guard is None:
                self._truncate_fully_and_start_at(new_offset)
                return
            with guard(self):
                self._truncate_fully_and_start_at(new_offset)
        except OSError as exc:
            raise self._io_failed("truncation", exc) from exc

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        with self._lock:
            self._check_open()
            self._truncations += 1
            doomed = self.log_segments()
            self._set_segments({})
            self._schedule_delete(doomed)
            self._add_segment(self._new_segment(new_offset))
            self._log_start_offset = new_offset
            self._high_watermark = new_offset
            self._recovery_point = new_offset
            self._set_log_end_offset(new_offset)
            self._set_high_watermark(new_offset)
            self.leader_epoch_cache.clear_and_flush()
            self.producer_state.truncate_fully_and_start_at(new_offset)

    # -- the cleaner's hooks --------------------------------------------------------------------------------------------
    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """Atomically swap cleaned segments in for the ones they were built from (crash-safe).

        ``new_segments`` are ``.cleaned`` segments (from ``new_cleaned_segment``), already flushed by the
        cleaner. Steps, each surviving a crash: rename ``.cleaned`` -> ``.swap`` (from here on, a restart
        completes the swap); install them in the map; rename old segments ``.deleted`` (removed after the
        delay); rename ``.swap`` -> live names. Old segments already gone (retention won) are skipped.
        """
        with self._lock:
            self._check_open()
            for seg in sorted(new_segments, key=lambda s: s.base_offset, reverse=True):
                seg.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            self._replace_segments_locked(new_segments, old_segments, recovered_swap=False)

    def _replace_segments_locked(self, new_segments: list[LogSegment], old_segments: list[LogSegment],
                                 recovered_swap: bool) -> None:
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        old_sorted = sorted((s for s in old_segments if self._segments.get(s.base_offset) is s),
                            key=lambda s: s.base_offset)
        segments = dict(self._segments)
        for seg in old_sorted:
            segments.pop(seg.base_offset, None)
        for seg in new_sorted:
            segments[seg.base_offset] = seg
        self._set_segments(segments)
        if recovered_swap:
            for seg in old_sorted:
                seg.delete_files()
        else:
            self._schedule_delete(old_sorted)
        for seg in new_sorted:
            seg.change_file_suffixes(SWAP_SUFFIX, "")
            if seg is not self.active_segment:
                seg.offset_index.trim_to_valid_size()
                seg.time_index.trim_to_valid_size()

    # -- moving between log directories (AlterReplicaLogDirs, KIP-113) --------------------------------------------------
    @property
    def is_future(self) -> bool:
        """A future replica: the copy a move between log dirs fills (``<topic>-<partition>.<id>-future``)."""
        return self.dir.name.endswith(FUTURE_DIR_SUFFIX)

    @property
    def lock(self) -> threading.RLock:
        """The lock every mutation of this log holds (re-entrant); a swap between log dirs holds it throughout."""
        return self._lock

    @property
    def truncations(self) -> int:
        """How many times this log was cut back; a copy of it compares this to know it may have diverged."""
        return self._truncations

    def delete_segments_below_log_start(self) -> int:
        """Only the log-start part of retention (a future replica follows its current replica's log start and
        must not apply retention of its own)."""
        with self._lock:
            if self._closed:
                return 0
            return self._delete_segments(
                lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset)

    def rename_dir(self, new_dir: Path) -> None:
        """Rename the partition directory (``-future`` to the live name, the live name to ``-delete``) and follow
        it: segments, pending deletions, producer snapshots and the epoch checkpoint are opened under the new name
        from now on. The caller fsyncs the parent directories. Holds the log's lock."""
        new_dir = Path(new_dir)
        with self._lock:
            os.replace(self.dir, new_dir)
            self._follow_dir(new_dir)

    def _follow_dir(self, new_dir: Path) -> None:
        self.dir = new_dir
        for seg in self.log_segments():
            seg.update_parent_dir(new_dir)
        for _, seg in self._pending_deletes:
            seg.update_parent_dir(new_dir)
        self.producer_state.update_parent_dir(new_dir)
        self.leader_epoch_cache.move_checkpoint(LeaderEpochCheckpointFile(new_dir / LEADER_EPOCH_CHECKPOINT))

    def exchange_segments(self, other: Log) -> None:
        """Trade directories and segments with ``other``, a log of the same partition ending at the same offset:
        the end of a move between log dirs, where this log (the one every caller holds) takes the future replica's
        segments and the future replica object keeps the old ones, to be closed and deleted later.

        What describes the records stays with this log: offsets (equal), high watermark, log start offset, and
        the leader-epoch cache and producer state, which are this log's own (a copy built them from the same
        batches, but may lack what this log learned otherwise: an epoch started at the log end, producers whose
        batches retention removed). Both are re-pointed to the new directory and written there, so a restart
        reads them back. One assignment publishes the new segments to lock-free readers, which read either set
        (the same records at the same offsets); the old set stays readable until its files go.
        """
        with self._lock, other._lock:
            if other._log_end_offset != self._log_end_offset or other.topic != self.topic or \
                    other.partition != self.partition:
                raise StorageError(f"cannot exchange segments of {self} with {other}")
            mine = (self.dir, self._view, self._log_end_position, self._recovery_point, self._pending_deletes,
                    self._unflushed_messages, self._last_flush_ms)
            theirs = (other.dir, other._view, other._log_end_position, other._recovery_point,
                      other._pending_deletes, other._unflushed_messages, other._last_flush_ms)
            (self.dir, self._view, self._log_end_position, self._recovery_point, self._pending_deletes,
             self._unflushed_messages, self._last_flush_ms) = theirs
            (other.dir, other._view, other._log_end_position, other._recovery_point, other._pending_deletes,
             other._unflushed_messages, other._last_flush_ms) = mine
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self.producer_state.update_parent_dir(self.dir)
            self.producer_state.take_snapshot(force=True)
            self.leader_epoch_cache.move_checkpoint(LeaderEpochCheckpointFile(self.dir / LEADER_EPOCH_CHECKPOINT),
                                                    write=True)

    # -- flushing and closing -----------------------------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync segments holding offsets below ``offset`` (default: everything) and advance the recovery point."""
        with self._lock:
            target = self._log_end_offset if offset is None else offset
            if target <= self._recovery_point:
                return
            if self._failure is not None:
                raise KafkaStorageError(f"{self.topic}-{self.partition}: log directory offline after "
                                        f"{self._failure}")
            try:
                for seg in self.log_segments(self._recovery_point, target):
                    seg.flush()
            except OSError as exc:
                raise self._io_failed("flush", exc) from exc
            self._recovery_point = target
            self._unflushed_messages = 0
            self._last_flush_ms = self._time_ms()

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Apply ``flush.ms`` (the broker's periodic flusher calls this)."""
        now = self._time_ms() if now_ms is None else now_ms
        if now - self._last_flush_ms >= self.config.flush_ms and self._log_end_offset > self._recovery_point:
            self.flush()
            return True
        return False

    @property
    def time_since_last_flush_ms(self) -> int:
        return self._time_ms() - self._last_flush_ms

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config

    def _check_open(self) -> None:
        if self._failure is not None:
            raise KafkaStorageError(f"{self.topic}-{self.partition}: log directory offline after {self._failure}")
        if self._closed:
            raise StorageError(f"log {self.dir} is closed")

    def close(self) -> None:
        """Clean shutdown of this log: fsync, producer snapshot, trimmed indexes, files closed."""
        with self._lock:
            if self._closed:
                return
            if self._failure is not None:  # its directory is offline: leave the files as the failure left them
                self.close_handlers()
                return
            self.flush()
            self.producer_state.update_map_end_offset(self._log_end_offset)
            self.producer_state.take_snapshot()
            for seg in self.log_segments():
                seg.close()
            self.purge_deleted_segments(1 << 62)
            self._closed = True

    def close_handlers(self) -> None:
        """Release descriptors without flushing or trimming: what a crash leaves behind (tests) or before a
        directory is deleted."""
        with self._lock:
            for seg in self.log_segments():
                seg.close_handlers()
            for _, seg in self._pending_deletes:
                seg.close_handlers()
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def iter_batches_bytes(self, start_offset: int = 0) -> Iterator[bytes]:
        """Every stored batch's bytes from ``start_offset`` on (tools and tests)."""
        for seg in self.log_segments(start_offset):
            for buf, header in seg.batches():
                if header.last_offset >= start_offset:
                    yield bytes(buf[header.position:header.end])

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self._log_start_offset}, end={self._log_end_offset}, "
                f"hw={self._high_watermark}, segments={len(self._bases)})")


def _restamped(headers: list[BatchHeader], base_offset: int, leader_epoch: int,
               log_append_time: int | None) -> list[BatchHeader]:
    """The headers as ``assign_offsets`` rewrote them, without parsing the buffer a third time.

    (The ``crc`` field keeps the pre-stamp value; nothing after validation reads it.)
    """
    out = []
    offset = base_offset
    for h in headers:
        delta = h.last_offset - h.base_offset
        out.append(BatchHeader(
            position=h.position, size=h.size, magic=h.magic, base_offset=offset, last_offset=offset + delta,
            max_timestamp=h.max_timestamp if log_append_time is None else log_append_time,
            first_timestamp=h.first_timestamp,
            timestamp_type=h.timestamp_type if log_append_time is None else LOG_APPEND_TIME,
            compression=h.compression, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence, partition_leader_epoch=leader_epoch,
            is_transactional=h.is_transactional, is_control=h.is_control, record_count=h.record_count,
            crc=h.crc))
        offset += delta + 1
    return out


_V2_BATCH_SIZE_FIELD_MIN = V2_HEADER_SIZE - 12


def _stamp_offsets_and_epoch(buf: bytearray, base_offset: int, leader_epoch: int) -> list[int] | None:
    """Write base offsets from ``base_offset`` and the leader epoch into every v2 batch of ``buf``, in place;
    returns the batches' positions.

    Reads only the three fields it needs per batch (length, magic, lastOffsetDelta), so the full header is
    parsed once, afterwards. None when the framing is not plainly a whole number of v2 batches: the caller
    then takes the validating path, which says what is wrong (and stamps again, so a partly stamped ``buf``
    does not matter; neither field is covered by the CRC).
    """
    end = len(buf)
    position = 0
    offset = base_offset
    positions: list[int] = []
    while position < end:
        if end - position < V2_HEADER_SIZE or buf[position + V2_MAGIC] != MAGIC_V2:
            return None
        (length,) = _INT32.unpack_from(buf, position + V2_LENGTH)
        (delta,) = _INT32.unpack_from(buf, position + V2_LAST_OFFSET_DELTA)
        if length < _V2_BATCH_SIZE_FIELD_MIN or delta < 0 or position + 12 + length > end:
            return None
        _INT64.pack_into(buf, position, offset)
        _INT32.pack_into(buf, position + V2_PARTITION_LEADER_EPOCH, leader_epoch)
        positions.append(position)
        offset += delta + 1
        position += 12 + length
    return positions or None


def delete_log_dir(path: Path) -> None:
    """Remove a partition directory and everything in it (blocking)."""
    for child in sorted(Path(path).iterdir(), reverse=True):
        if child.is_dir():
            delete_log_dir(child)
        else:
            child.unlink(missing_ok=True)
    os.rmdir(path)
