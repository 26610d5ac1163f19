"""Log compaction (``cleanup.policy=compact`` and ``compact,delete``), following Kafka 2.6's LogCleaner.

A compacted log keeps, per key, at least the latest record. One cleaning pass over a log:

1. Pick the range: the *dirty* section starts at the offset recorded in the log dir's
   ``cleaner-offset-checkpoint`` (else the log start) and ends at the first *uncleanable* offset, the lowest
   of the active segment's base offset, the first unstable offset (an open or unreplicated transaction) and
   the first segment younger than ``min.compaction.lag.ms``, rounded down to a segment boundary. A log is
   cleaned when its dirty bytes exceed ``min.cleanable.dirty.ratio`` of its total, or when a dirty segment
   is older than ``max.compaction.lag.ms``.
2. Build an offset map ``key -> latest offset`` over the dirty section (records of aborted transactions do
   not count: they will be dropped anyway).
3. Rewrite every segment from the start of the log up to the end of the mapped range, grouping neighbours
   so that the cleaned groups stay below ``segment.bytes`` (and the index size), each group into one
   ``.cleaned`` segment, then swap it in through ``Log.replace_segments`` (``.cleaned`` -> ``.swap`` ->
   live, which a restart can finish or undo).

What survives a rewrite, per record: keyed records whose offset is the latest for their key, records beyond
the mapped range, and tombstones (null value) only while their segment is younger than the delete horizon
(the last clean segment's mtime minus ``delete.retention.ms``). Keyless records are dropped. Per batch
(``MemoryRecords.filterTo``'s contract): a batch whose records all survive is copied byte for byte; one that
loses some is re-encoded with the same base offset, last offset delta, producer id, epoch, base sequence,
compression, timestamp type and transactional/control flags; one that loses all is dropped, unless it holds
its producer's last sequence (or is its last marker), then an empty header is kept so idempotence still works.
Transactions: data of aborted transactions is removed; an ABORT marker is kept (and re-indexed in the
cleaned ``.txnindex``) while any batch of its transaction is still in the log; COMMIT markers with no data
left and ABORT markers with no data left go once past the delete horizon.

Threading: a cleaning pass runs on one thread (the log manager's ``clean_compacted_logs``, which the broker
runs off its event loop) and does blocking file I/O; the Log's own lock protects the final swap inside
``replace_segments`` and the producer state the pass reads (``first_unstable_offset``,
``last_records_of_active_producers`` are the Log's locked accessors, never the manager itself). Readers are
never blocked by the rewrite, which happens in new files.
"""

from __future__ import annotations

import heapq
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import crc32c

from sofakafka.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    MAGIC_V2,
    BatchHeader,
    ControlRecordType,
    Record,
    RecordBatchBuilder,
    build_message_set,
    decode_control_key,
    decode_records,
    iter_batches,
)
from sofakafka.protocol.records.header import V2_ATTRIBUTES, V2_CRC, V2_HEADER, V2_HEADER_SIZE
from sofakafka.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from sofakafka.storage.config import LogConfig
from sofakafka.storage.producer_state import LastRecord
from sofakafka.storage.segment import CLEANED_SUFFIX, LogSegment, segment_file
from sofakafka.storage.transaction_index import AbortedTxn, TransactionIndex

logger = logging.getLogger(__name__)

#: ``log.cleaner.dedupe.buffer.size`` default; Kafka spends 24 bytes per key (MD5 + offset).
DEFAULT_DEDUPE_BUFFER_SIZE = 134_217_728
#: ``log.cleaner.io.buffer.load.factor``: how full the offset map may get before a pass stops mapping.
DEFAULT_DEDUPE_LOAD_FACTOR = 0.9
_BYTES_PER_MAP_ENTRY = 24
_WRITE_CHUNK = 1 << 20

_ATTR_TIMESTAMP_TYPE = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20


class LogCleaningAbortedError(Exception):
    """The log changed under the cleaner (truncated, deleted); the pass is abandoned and retried later."""


class CleanableLog(Protocol):
    """What the cleaner needs from a partition's ``Log`` (``sofakafka.storage.log.Log`` provides it).

    ``log_segments()`` is a snapshot in base-offset order whose last element is the active segment;
    ``new_cleaned_segment`` makes an empty segment whose files carry the ``.cleaned`` suffix;
    ``replace_segments`` installs such segments in place of the old ones crash-safely (``.cleaned`` ->
    ``.swap`` -> live; a restart finishes a swap it finds) and schedules the old files for deletion.
    """

    @property
    def dir(self) -> Path: ...
    @property
    def config(self) -> LogConfig: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def first_unstable_offset(self) -> int | None: ...
    def last_records_of_active_producers(self) -> dict[int, LastRecord]: ...
    def log_segments(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]: ...
    def new_cleaned_segment(self, base_offset: int) -> LogSegment: ...
    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None: ...


# -- offset map ----------------------------------------------------------------------------------------------


class OffsetMap:
    """``key -> largest offset seen`` for the dirty section, bounded like Kafka's dedupe buffer.

    Keys are kept whole (a dict is the natural Python structure and avoids Kafka's hash-collision caveat);
    the bound is the number of entries Kafka's buffer of the same size would hold.
    """

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("offset map must hold at least one key")
        self.max_entries = max_entries
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    @classmethod
    def for_buffer_size(cls, buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
                        load_factor: float = DEFAULT_DEDUPE_LOAD_FACTOR) -> OffsetMap:
        return cls(max(1, int(buffer_size // _BYTES_PER_MAP_ENTRY * load_factor)))

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, -1 if it was not seen (so any record of it counts as latest)."""
        return self._offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.max_entries


# -- transaction tracking while cleaning ---------------------------------------------------------------------


@dataclass
class _AbortedTxnState:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Tracks, while the cleaner walks the log in order, which transactional batches belong to aborted
    transactions (their data goes) and whether each marker still has data behind it (else it can go too).

    Aborted transactions come from the segments' ``.txnindex`` files; each becomes "ongoing" when the walk
    reaches its first offset and ends at its ABORT marker.
    """

    def __init__(self) -> None:
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self._pending: list[tuple[int, int, AbortedTxn]] = []
        self._known: set[AbortedTxn] = set()
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: Sequence[AbortedTxn]) -> None:
        for txn in txns:
            if txn not in self._known:
                self._known.add(txn)
                heapq.heappush(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            _, _, txn = heapq.heappop(self._pending)
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_control_batch_read(self, header: BatchHeader, control_type: int | None) -> bool:
        """True when this marker may be discarded (subject to the delete horizon)."""
        self._consume_up_to(header.last_offset)
        if control_type is None:
            return True  # emptied by an earlier cleaning
        pid = header.producer_id
        if control_type == ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset is not None:
                # Some batch of the transaction is still in the log (kept as its producer's last): keep the
                # marker and its index entry so read_committed consumers still drop it.
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, header: BatchHeader) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        state = self._ongoing_aborted.get(header.producer_id)
        if state is not None:
            state.last_observed_batch_offset = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False


# -- statistics ----------------------------------------------------------------------------------------------


@dataclass
class CleanerStats:
    map_messages_read: int = 0
    map_bytes_read: int = 0
    messages_read: int = 0
    bytes_read: int = 0
    messages_written: int = 0
    bytes_written: int = 0
    invalid_messages_read: int = 0
    buffer_utilization: float = 0.0


# -- choosing what to clean ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def _floor_index(segments: Sequence[LogSegment], offset: int) -> int:
    """Index of the segment holding ``offset`` (the last with base <= offset), 0 if before all."""
    lo, hi = 0, len(segments)
    while lo < hi:
        mid = (lo + hi) // 2
        if segments[mid].base_offset <= offset:
            lo = mid + 1
        else:
            hi = mid
    return max(0, lo - 1)


def log_segments_between(segments: Sequence[LogSegment], from_offset: int, to_offset: int) -> list[LogSegment]:
    """Segments that may hold offsets in ``[from_offset, to_offset)`` (Kafka's ``Log.logSegments(from, to)``)."""
    if to_offset <= from_offset:
        return []
    start = _floor_index(segments, from_offset)
    return [s for s in segments[start:] if s.base_offset < to_offset]


def _first_batch_timestamp(segment: LogSegment) -> int:
    for _, header in segment.batches():
        return header.max_timestamp
    return -1


def max_compaction_delay(log: CleanableLog, first_dirty_offset: int, now_ms: int) -> int:
    """How far past ``max.compaction.lag.ms`` the oldest dirty batch is (KIP-354); > 0 forces a clean."""
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    if clean_until <= 0:
        return 0  # the default lag (Long.MAX) never forces a clean; skip reading the segments
    segments = log.log_segments()
    dirty = segments[_floor_index(segments, first_dirty_offset):-1]
    stamps = [t for t in (_first_batch_timestamp(s) for s in dirty) if t > 0]
    if not stamps:
        return 0
    earliest = min(stamps)
    return clean_until - earliest if earliest < clean_until else 0


def cleanable_offsets(log: CleanableLog, last_clean_offset: int | None, now_ms: int) -> OffsetsToClean:
    """The dirty range (Kafka's ``LogCleanerManager.cleanableOffsets``)."""
    segments = log.log_segments()
    start = log.log_start_offset
    checkpoint = start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpoint < start:
        # Retention moved the log start past the last clean point (normal with compact,delete).
        if not log.config.delete:
            logger.warning("resetting first dirty offset of %s to log start offset %d: checkpoint %d is below it",
                           log.dir, start, checkpoint)
        first_dirty, force = start, True
    elif checkpoint > log.log_end_offset:
        logger.warning(
            "resetting first dirty offset of %s to log start offset %d: checkpoint %d is past the log end %d",
            log.dir, start, checkpoint, log.log_end_offset)
        first_dirty, force = start, True
    else:
        first_dirty = checkpoint

    candidates = [segments[-1].base_offset]
    unstable = log.first_unstable_offset
    if unstable is not None:
        candidates.append(unstable)
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for s in segments[_floor_index(segments, first_dirty):-1]:
            if s.largest_timestamp() > now_ms - lag:
                candidates.append(s.base_offset)
                break
    return OffsetsToClean(first_dirty, max(first_dirty, min(candidates)), force)


def calculate_cleanable_bytes(log: CleanableLog, first_dirty_offset: int,
                              uncleanable_offset: int) -> tuple[int, int]:
    """(first uncleanable offset rounded down to its segment's base, dirty bytes before it)."""
    segments = log.log_segments()
    first_uncleanable = segments[_floor_index(segments, uncleanable_offset)].base_offset
    cleanable = sum(s.size for s in log_segments_between(segments, first_dirty_offset,
                                                          max(first_dirty_offset, first_uncleanable)))
    return first_uncleanable, cleanable


@dataclass
class LogToClean:
    log: CleanableLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False
    force_update_checkpoint: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def should_clean(self) -> bool:
        if self.total_bytes <= 0:
            return False
        return (self.need_compaction_now and self.cleanable_bytes > 0) or \
            self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio


def log_to_clean(log: CleanableLog, last_clean_offset: int | None, now_ms: int) -> LogToClean:
    offsets = cleanable_offsets(log, last_clean_offset, now_ms)
    segments = log.log_segments()
    # As in Kafka, a segment holding the first dirty offset counts as clean and as cleanable.
    clean_bytes = sum(s.size for s in segments if s.base_offset < offsets.first_dirty_offset)
    first_uncleanable, cleanable = calculate_cleanable_bytes(log, offsets.first_dirty_offset,
                                                             offsets.first_uncleanable_dirty_offset)
    return LogToClean(log, offsets.first_dirty_offset, first_uncleanable, clean_bytes, cleanable,
                      max_compaction_delay(log, offsets.first_dirty_offset, now_ms) > 0,
                      offsets.force_update_checkpoint)


def group_segments_by_size(segments: Sequence[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Runs of neighbours whose log and index bytes stay under the limits and whose offsets fit one segment
    (relative offsets are int32), so cleaning keeps segment counts down as logs shrink."""
    groups: list[list[LogSegment]] = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i].size
        index_size = segs[i].offset_index.size_in_bytes()
        time_index_size = segs[i].time_index.size_in_bytes()
        i += 1
        while i < len(segs):
            nxt = segs[i]
            last_offset_estimate = segs[i + 1].base_offset - 1 if i + 1 < len(segs) else first_uncleanable_offset - 1
            if (log_size + nxt.size > max_size
                    or index_size + nxt.offset_index.size_in_bytes() > max_index_size
                    or time_index_size + nxt.time_index.size_in_bytes() > max_index_size
                    or last_offset_estimate - group[0].base_offset > 2**31 - 1):
                break
            group.append(nxt)
            log_size += nxt.size
            index_size += nxt.offset_index.size_in_bytes()
            time_index_size += nxt.time_index.size_in_bytes()
            i += 1
        groups.append(group)
    return groups


# -- rewriting batches ---------------------------------------------------------------------------------------


def _control_type(buf: bytes, header: BatchHeader) -> int | None:
    records = decode_records(buf, header)
    if not records:
        return None
    return decode_control_key(records[0].key)


def empty_batch_header(header: BatchHeader) -> bytes:
    """A record-less v2 batch keeping the offsets, producer fields and flags of ``header``.

    Kafka's ``writeEmptyHeader``: no compression, first timestamp -1, max timestamp kept.
    """
    attributes = 0
    if header.timestamp_type == LOG_APPEND_TIME:
        attributes |= _ATTR_TIMESTAMP_TYPE
    if header.is_transactional:
        attributes |= _ATTR_TRANSACTIONAL
    if header.is_control:
        attributes |= _ATTR_CONTROL
    out = bytearray(V2_HEADER_SIZE)
    V2_HEADER.pack_into(out, 0, header.base_offset, V2_HEADER_SIZE - 12, header.partition_leader_epoch,
                        MAGIC_V2, 0, attributes, header.last_offset - header.base_offset, -1,
                        header.max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence, 0)
    struct.pack_into(">I", out, V2_CRC, crc32c.crc32c(bytes(out[V2_ATTRIBUTES:])))
    return bytes(out)


def rebuild_batch(header: BatchHeader, records: Sequence[Record]) -> bytes:
    """Re-encode the surviving ``records`` of a batch with everything else about the batch unchanged."""
    if header.magic == MAGIC_V2:
        builder = RecordBatchBuilder(
            base_offset=header.base_offset,
            compression=header.compression,
            timestamp_type=header.timestamp_type,
            log_append_time=header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            partition_leader_epoch=header.partition_leader_epoch,
        )
        for record in records:
            builder.append(record)
        # The last offset delta is kept so the batch still spans its producer's sequence range.
        return builder.build(last_offset_delta=header.last_offset - header.base_offset)
    timestamp_type = header.timestamp_type if header.timestamp_type >= 0 else CREATE_TIME
    return build_message_set(records, magic=header.magic, compression=header.compression,
                             timestamp_type=timestamp_type,
                             log_append_time=header.max_timestamp if timestamp_type == LOG_APPEND_TIME else None)


@dataclass
class _SegmentFilter:
    """The per-pass decisions of ``cleanInto``: which batches and records of a source segment survive."""

    offset_map: OffsetMap
    retain_deletes_and_markers: bool
    txn_metadata: CleanedTransactionMetadata
    last_records: dict[int, LastRecord]
    stats: CleanerStats = field(default_factory=CleanerStats)

    def _is_last_record_of_producer(self, header: BatchHeader) -> bool:
        last = self.last_records.get(header.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return header.last_offset == last.last_data_offset
        return header.is_control and header.producer_epoch == last.producer_epoch

    def _retain_record(self, header: BatchHeader, record: Record) -> bool:
        if header.is_control:
            return True  # markers are never compaction candidates by key
        if record.offset > self.offset_map.latest_offset:
            return True
        if record.key is None:
            self.stats.invalid_messages_read += 1
            return False
        latest = record.offset >= self.offset_map.get(record.key)
        return latest and (record.value is not None or self.retain_deletes_and_markers)

    def filter_batch(self, buf: bytes, header: BatchHeader) -> bytes | None:
        """The bytes to write for this batch: itself, a rebuilt or empty version, or None to drop it."""
        self.stats.bytes_read += header.size
        control_type: int | None = None
        if header.is_control:
            control_type = _control_type(buf, header)
            can_discard = self.txn_metadata.on_control_batch_read(header, control_type)
            discard_records = can_discard and not self.retain_deletes_and_markers
        else:
            discard_records = self.txn_metadata.on_batch_read(header)
        retain_empty = header.producer_id >= 0 and self._is_last_record_of_producer(header)
        if discard_records and not retain_empty:
            self.stats.messages_read += header.record_count
            return None
        records = decode_records(buf, header)
        self.stats.messages_read += len(records)
        kept = [] if discard_records else [r for r in records if self._retain_record(header, r)]
        if kept and len(kept) == len(records):
            out = bytes(buf[header.position:header.end])
        elif kept:
            out = rebuild_batch(header, kept)
        elif retain_empty and header.magic == MAGIC_V2:
            out = empty_batch_header(header)
        else:
            return None
        self.stats.messages_written += len(kept)
        self.stats.bytes_written += len(out)
        return out


# -- the cleaner ---------------------------------------------------------------------------------------------


def _topic_partition(log_dir: Path) -> tuple[str, int]:
    topic, _, partition = log_dir.name.rpartition("-")
    return topic, int(partition)


@dataclass
class CleanResult:
    first_dirty_offset: int
    end_offset: int
    stats: CleanerStats


class LogCleaner:
    """Runs compaction passes; the broker's cleaner thread calls :meth:`clean_log` for compacted logs.

    The cleaner owns ``cleaner-offset-checkpoint`` in each log directory: after a pass it records the offset
    up to which the log is clean, so the next pass only maps the new dirty section.

    Anything that rewrites a log under the cleaner (truncation by replication, deletion, moving the log start)
    first calls :meth:`abort_and_pause_cleaning` (from any thread; it waits for a running pass to stop at its
    next batch) and :meth:`resume_cleaning` afterwards, as with Kafka's LogCleanerManager.
    """

    def __init__(self, *, dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
                 dedupe_load_factor: float = DEFAULT_DEDUPE_LOAD_FACTOR,
                 clock: Callable[[], int] | None = None) -> None:
        self.offset_map = OffsetMap.for_buffer_size(dedupe_buffer_size, dedupe_load_factor)
        self._clock = clock
        self._checkpoint_lock = threading.Lock()
        self._state = threading.Condition()
        self._in_progress: set[Path] = set()
        self._aborting: set[Path] = set()
        self._paused: dict[Path, int] = {}

    def _now(self) -> int:
        if self._clock is not None:
            return self._clock()
        return time.time_ns() // 1_000_000

    # -- checkpoint ------------------------------------------------------------------------------------------

    @staticmethod
    def checkpoint_file(log_dir: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(Path(log_dir).parent / CLEANER_OFFSET_CHECKPOINT)

    def last_clean_offset(self, log: CleanableLog) -> int | None:
        with self._checkpoint_lock:
            file = self.checkpoint_file(log.dir)
            if not file.path.exists():
                return None
            return file.read().get(_topic_partition(log.dir))

    def maybe_truncate_checkpoint(self, log: CleanableLog, offset: int) -> None:
        """The log was truncated to ``offset``: a clean point beyond it no longer describes the log."""
        last = self.last_clean_offset(log)
        if last is not None and last > offset:
            self.update_checkpoint(log, offset)

    # -- pausing ---------------------------------------------------------------------------------------------

    def abort_and_pause_cleaning(self, log_dir: Path) -> None:
        """Stop any pass over this log (waiting until it has stopped) and keep new passes off it until resumed."""
        key = Path(log_dir)
        with self._state:
            self._paused[key] = self._paused.get(key, 0) + 1
            if key in self._in_progress:
                self._aborting.add(key)
            while key in self._in_progress:
                self._state.wait()

    def pause_cleaning_if_idle(self, log_dir: Path) -> bool:
        """Pause the log's cleaning unless a pass is running over it (then False, nothing paused).

        For retention on ``compact,delete`` logs: it should not wait for a long pass, only skip this round.
        """
        key = Path(log_dir)
        with self._state:
            if key in self._in_progress:
                return False
            self._paused[key] = self._paused.get(key, 0) + 1
            return True

    def resume_cleaning(self, log_dir: Path) -> None:
        key = Path(log_dir)
        with self._state:
            count = self._paused.get(key, 0) - 1
            if count < 0:
                raise ValueError(f"cleaning of {key} was not paused")
            if count:
                self._paused[key] = count
            else:
                del self._paused[key]

    def request_abort(self, log_dir: Path) -> None:
        """Ask a running pass to stop without waiting (for callers on the cleaner's own thread)."""
        key = Path(log_dir)
        with self._state:
            if key in self._in_progress:
                self._aborting.add(key)

    def is_paused(self, log_dir: Path) -> bool:
        with self._state:
            return Path(log_dir) in self._paused

    def _checker(self, log_dir: Path) -> Callable[[], None]:
        key = Path(log_dir)

        def check_done() -> None:
            if key in self._aborting:
                raise LogCleaningAbortedError(f"cleaning of {key} was aborted")
        return check_done

    def update_checkpoint(self, log: CleanableLog, offset: int | None) -> None:
        """Record (or with None forget, e.g. when the log is deleted) the clean offset of ``log``."""
        with self._checkpoint_lock:
            file = self.checkpoint_file(log.dir)
            offsets = file.read() if file.path.exists() else {}
            key = _topic_partition(log.dir)
            if offset is None:
                offsets.pop(key, None)
            else:
                offsets[key] = offset
            file.write(offsets)

    def alter_checkpoint_dir(self, topic_partition: tuple[str, int], source_dir: Path, dest_dir: Path) -> None:
        """A log moved from the log dir ``source_dir`` to ``dest_dir``: its clean offset moves along (Kafka's
        ``alterCheckpointDir``), so the next pass does not clean the log again from its start."""
        with self._checkpoint_lock:
            source = OffsetCheckpointFile(Path(source_dir) / CLEANER_OFFSET_CHECKPOINT)
            if not source.path.exists():
                return
            offsets = source.read()
            offset = offsets.pop(topic_partition, None)
            if offset is None:
                return
            dest = OffsetCheckpointFile(Path(dest_dir) / CLEANER_OFFSET_CHECKPOINT)
            moved = dest.read() if dest.path.exists() else {}
            moved[topic_partition] = offset
            dest.write(moved)
            source.write(offsets)

    # -- passes ----------------------------------------------------------------------------------------------

    def log_to_clean(self, log: CleanableLog, now_ms: int | None = None) -> LogToClean:
        return log_to_clean(log, self.last_clean_offset(log), self._now() if now_ms is None else now_ms)

    def clean_log(self, log: CleanableLog, now_ms: int | None = None, *, force: bool = False) -> CleanResult | None:
        """One pass if the log is dirty enough (or ``force``); None when nothing was done or it was aborted.

        Blocking: reads and rewrites the log's inactive segments. One pass at a time per cleaner (its offset
        map is reused), so the broker runs it on its cleaner thread.
        """
        if not log.config.compact:
            return None
        key = Path(log.dir)
        with self._state:
            if key in self._paused or key in self._in_progress:
                return None
            self._in_progress.add(key)
        try:
            now = self._now() if now_ms is None else now_ms
            candidate = self.log_to_clean(log, now)
            if candidate.force_update_checkpoint:
                self.update_checkpoint(log, candidate.first_dirty_offset)
            if not (candidate.should_clean or (force and candidate.cleanable_bytes > 0)):
                return None
            try:
                end_offset, stats = self.clean(candidate)
            except LogCleaningAbortedError:
                logger.info("cleaning of %s aborted", key)
                return None
            self.update_checkpoint(log, end_offset)
            return CleanResult(candidate.first_dirty_offset, end_offset, stats)
        finally:
            with self._state:
                self._in_progress.discard(key)
                self._aborting.discard(key)
                self._state.notify_all()

    def clean(self, cleanable: LogToClean) -> tuple[int, CleanerStats]:
        """Kafka's ``Cleaner.clean``: the delete horizon is the last clean segment's mtime minus
        ``delete.retention.ms`` (time the tombstone has been visible to consumers of the clean section)."""
        segments = cleanable.log.log_segments()
        clean = log_segments_between(segments, 0, cleanable.first_dirty_offset)
        delete_horizon_ms = clean[-1].last_modified_ms() - cleanable.log.config.delete_retention_ms if clean else 0
        return self.do_clean(cleanable, delete_horizon_ms)

    def do_clean(self, cleanable: LogToClean, delete_horizon_ms: int) -> tuple[int, CleanerStats]:
        log_ = cleanable.log
        stats = CleanerStats()
        upper = cleanable.first_uncleanable_offset
        check_done = self._checker(log_.dir)
        self.build_offset_map(log_, cleanable.first_dirty_offset, upper, self.offset_map, stats, check_done)
        end_offset = self.offset_map.latest_offset + 1
        txn_metadata = CleanedTransactionMetadata()
        segments = log_.log_segments()
        groups = group_segments_by_size(log_segments_between(segments, 0, end_offset), log_.config.segment_bytes,
                                        log_.config.max_index_size, upper)
        for group in groups:
            self.clean_segments(log_, group, self.offset_map, delete_horizon_ms, stats, txn_metadata, check_done)
        stats.buffer_utilization = self.offset_map.utilization
        return end_offset, stats

    def build_offset_map(self, log_: CleanableLog, start: int, end: int, offset_map: OffsetMap,
                         stats: CleanerStats, check_done: Callable[[], None] = lambda: None) -> None:
        offset_map.clear()
        segments = log_.log_segments()
        dirty = log_segments_between(segments, start, end)
        txn_metadata = CleanedTransactionMetadata()
        txn_metadata.add_aborted_transactions(collect_aborted_transactions(segments, start, end))
        for i, segment in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(segment, offset_map, start, next_start, txn_metadata, stats, check_done):
                logger.info("offset map full while mapping %s; cleaning up to offset %d", segment,
                         offset_map.latest_offset)
                return

    @staticmethod
    def _map_segment(segment: LogSegment, offset_map: OffsetMap, start: int, next_segment_start: int,
                     txn_metadata: CleanedTransactionMetadata, stats: CleanerStats,
                     check_done: Callable[[], None]) -> bool:
        position = segment.offset_index.lookup(start).position
        for buf, header in segment.batches(position):
            check_done()
            stats.map_bytes_read += header.size
            if header.is_control:
                txn_metadata.on_control_batch_read(header, _control_type(buf, header))
                stats.map_messages_read += 1
            elif txn_metadata.on_batch_read(header):
                stats.map_messages_read += header.record_count
            else:
                for record in decode_records(buf, header):
                    if record.key is not None and record.offset >= start:
                        if offset_map.is_full:
                            return True
                        offset_map.put(record.key, record.offset)
                    stats.map_messages_read += 1
            if header.last_offset >= start:
                offset_map.update_latest_offset(header.last_offset)
        # Offsets may have gaps (compacted input): the mapped range runs to the next segment.
        offset_map.update_latest_offset(next_segment_start - 1)
        return False

    def clean_segments(self, log_: CleanableLog, group: Sequence[LogSegment], offset_map: OffsetMap,
                       delete_horizon_ms: int, stats: CleanerStats,
                       txn_metadata: CleanedTransactionMetadata,
                       check_done: Callable[[], None] = lambda: None) -> None:
        """Rewrite ``group`` into one ``.cleaned`` segment and swap it in."""
        cleaned = create_cleaned_segment(log_, group[0].base_offset)
        txn_metadata.cleaned_index = cleaned.txn_index
        try:
            last_records = log_.last_records_of_active_producers()
            all_segments = log_.log_segments()
            for i, segment in enumerate(group):
                upper = group[i + 1].base_offset if i + 1 < len(group) else offset_map.latest_offset + 1
                txn_metadata.add_aborted_transactions(
                    collect_aborted_transactions(all_segments, segment.base_offset, upper))
                retain = segment.last_modified_ms() > delete_horizon_ms
                seg_filter = _SegmentFilter(offset_map, retain, txn_metadata, last_records, stats)
                clean_into(segment, cleaned, seg_filter, check_done)
            cleaned.on_become_inactive()
            cleaned.flush()
            check_done()
            modified_ms = group[-1].last_modified_ms()
            os.utime(cleaned.log.path, ns=(modified_ms * 1_000_000, modified_ms * 1_000_000))
            log_.replace_segments([cleaned], list(group))
        except BaseException:
            cleaned.delete_files()
            raise


def create_cleaned_segment(log_: CleanableLog, base_offset: int) -> LogSegment:
    """A fresh ``<base>.log.cleaned`` segment (leftovers of an interrupted pass are removed first)."""
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        segment_file(log_.dir, base_offset, suffix, CLEANED_SUFFIX).unlink(missing_ok=True)
    return log_.new_cleaned_segment(base_offset)


def collect_aborted_transactions(segments: Sequence[LogSegment], start_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping ``[start_offset, upper_bound_offset)`` from the segments' txnindexes."""
    found: list[AbortedTxn] = []
    for segment in segments[_floor_index(segments, start_offset):]:
        result = segment.txn_index.collect_aborted(start_offset, upper_bound_offset)
        found.extend(result.aborted)
        if result.is_complete:
            break
    return found


def clean_into(source: LogSegment, dest: LogSegment, seg_filter: _SegmentFilter,
               check_done: Callable[[], None] = lambda: None) -> None:
    """Copy the surviving batches of ``source`` into ``dest``, in order, in chunks of about a megabyte."""
    out = bytearray()
    for buf, header in source.batches():
        check_done()
        kept = seg_filter.filter_batch(buf, header)
        if kept is not None:
            out += kept
            if len(out) >= _WRITE_CHUNK:
                _append(dest, out)
                out = bytearray()
    if out:
        _append(dest, out)


def _append(dest: LogSegment, data: bytearray) -> None:
    buf = bytes(data)
    headers = list(iter_batches(buf))
    dest.append(buf, headers)
