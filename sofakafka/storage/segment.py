"""One log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` and ``.txnindex``.

Batches are stored exactly as received (after the leader stamped offsets into them), so a fetch returns a
region of the ``.log`` file that is copied out as it is. The indexes are sparse:
after at least ``index.interval.bytes`` of log since the previous entry, the next batch gets an offset-index
entry (its last offset -> its position) and the time index records the largest timestamp seen so far. Recovery
and append add entries by the same rule, so a rebuilt index equals the one written live.

Who calls: only the owning ``Log``, under its lock, for anything that writes (append, truncate, recover, roll,
rename, delete). ``read``, ``translate_offset`` and ``find_offset_by_timestamp`` may run concurrently from
reader threads: they only use ``pread`` on the ``.log`` and the indexes' own locks. Every method blocks on
file I/O; ``recover`` reads and checksums the whole segment and ``flush`` fsyncs.

Descriptors: the ``.log`` is opened through the broker's descriptor cache (closed when idle, reopened on use)
and the indexes are mappings without descriptors, so a segment costs no descriptor while nobody uses it.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sofakafka.protocol.errors import CorruptRecordError
from sofakafka.protocol.records import (
    LOG_APPEND_TIME,
    MAGIC_V2,
    V2_HEADER_SIZE,
    BatchHeader,
    decode_records,
    peek_batch_header,
    read_batch_header,
    validate_batch,
)
from sofakafka.storage.errors import CorruptIndexError, InvalidOffsetError
from sofakafka.storage.file_cache import DescriptorCache, default_descriptor_cache
from sofakafka.storage.index import INT32_MAX, OffsetIndex, TimeIndex
from sofakafka.storage.transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_HEADER_PEEK = V2_HEADER_SIZE  # enough bytes to parse any entry header (v0/v1 headers are shorter)
_SCAN_CHUNK = 1 << 20


def filename_prefix_from_offset(offset: int) -> str:
    """Kafka names segment files by base offset, zero-padded to 20 digits so they sort lexically."""
    return f"{offset:020d}"


def segment_file(log_dir: Path, base_offset: int, suffix: str, extra: str = "") -> Path:
    return Path(log_dir) / f"{filename_prefix_from_offset(base_offset)}{suffix}{extra}"


_clock_offset_ms = 0


def wall_clock_ms() -> int:
    """The broker's wall clock in milliseconds: the system's, moved by ``set_clock_offset_ms`` (tests only)."""
    return time.time_ns() // 1_000_000 + _clock_offset_ms


def set_clock_offset_ms(offset_ms: int) -> None:
    """Skew this process's wall clock (``sofakafka.test.clock.offset.ms``: the chaos suite's clock nemesis runs
    a broker ahead of or behind the others). Record timestamps, LogAppendTime, retention and rolls by time,
    producer-id expiry and everything else reading ``wall_clock_ms`` see it; monotonic timers do not."""
    global _clock_offset_ms
    _clock_offset_ms = int(offset_ms)


class FileRecords:
    """The segment's ``.log`` file: appended with ``pwrite``, read with ``pread``.

    Its descriptor lives in the broker's ``DescriptorCache``: opened on first use, closed when the file has been
    idle while ``log.max.open.segment.files`` others were used, reopened on the next use. The size is kept
    here, so an append or read of an open file costs its system call and two short lock rounds, nothing more.
    ``close`` is for good: a segment scheduled for deletion is only renamed, so slices handed out before then
    stay readable until the delete delay has passed.
    """

    def __init__(self, path: Path, preallocate_size: int = 0, cache: DescriptorCache | None = None) -> None:
        self.path = Path(path)
        self._file = (cache or default_descriptor_cache()).file(self.path)
        self._closed = False
        try:
            self._size = os.stat(self.path).st_size
        except FileNotFoundError:
            self._size = -1
        if self._size <= 0:
            # A new (or empty) segment: create it and keep the descriptor, since it is the active segment and
            # written next.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._size = 0
            if preallocate_size:
                # Reserves the blocks up front; recovery cuts the zeros after the last batch after a crash.
                try:
                    os.posix_fallocate(fd, 0, preallocate_size)
                except OSError:
                    pass
            self._file.adopt(fd)

    @property
    def size(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is open right now (tests and benchmarks; it may be closed any time)."""
        return self._file.is_open

    def append(self, data: bytes | bytearray | memoryview) -> int:
        position = self._size
        total = len(data)
        f = self._file
        fd = f.acquire()
        try:
            written = os.pwrite(fd, data, position)
            if written < total:  # short writes are rare (signals, full disks): only then slice
                view = memoryview(data)
                while written < total:
                    n = os.pwrite(fd, view[written:], position + written)
                    if n == 0:
                        raise OSError(f"no progress writing {self.path}")
                    written += n
        finally:
            f.release()
        self._size = position + written
        return written

    def read(self, position: int, size: int) -> bytes:
        if self._closed:
            raise OSError(f"{self.path} is closed")
        size = max(0, min(size, self._size - position))
        if size == 0:
            return b""
        f = self._file
        fd = f.acquire()
        try:
            out = os.pread(fd, size, position)
            while len(out) < size:
                more = os.pread(fd, size - len(out), position + len(out))
                if not more:
                    break
                out += more
        finally:
            f.release()
        return out

    def truncate_to(self, size: int) -> int:
        if size < 0 or size > self._size:
            raise ValueError(f"cannot truncate {self.path} of size {self._size} to {size}")
        removed = self._size - size
        fd = self._file.acquire()
        try:
            os.ftruncate(fd, size)
        finally:
            self._file.release()
        self._size = size
        return removed

    def trim(self) -> None:
        """Cut preallocated blocks past the data (no-op when the file was not preallocated)."""
        if os.stat(self.path).st_size != self._size:
            fd = self._file.acquire()
            try:
                os.ftruncate(fd, self._size)
            finally:
                self._file.release()

    def flush(self) -> None:
        """fsync, through a reopened descriptor if the cache closed the one that wrote (see ``file_cache``)."""
        fd = self._file.acquire()
        try:
            os.fsync(fd)
        finally:
            self._file.release()

    def rename_to(self, new_path: Path) -> None:
        self._file.rename_to(new_path)
        self.path = Path(new_path)

    def update_parent_dir(self, parent: Path) -> None:
        """The directory holding the file was renamed: reopen under the new name from now on."""
        self.path = Path(parent) / self.path.name
        self._file.follow(self.path)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._file.retire()

    def last_modified_ms(self) -> int:
        return os.stat(self.path).st_mtime_ns // 1_000_000


@dataclass(frozen=True)
class FileSlice:
    """A region of a segment's ``.log``: what a fetch returns.

    ``read_bytes`` copies it (the segment's descriptor may be closed and reopened meanwhile, so the slice names
    the file, not a descriptor). A slice may end in the middle of a batch (max bytes reached), as Kafka's
    does; clients drop the partial tail. ``file`` is None for an empty result.
    """

    file: FileRecords | None
    position: int
    size: int

    @property
    def path(self) -> Path | None:
        return None if self.file is None else self.file.path

    def read_bytes(self) -> bytes:
        if self.file is None or self.size == 0:
            return b""
        return self.file.read(self.position, self.size)

    def __len__(self) -> int:
        return self.size


EMPTY_SLICE = FileSlice(None, 0, 0)


@dataclass(frozen=True)
class LogOffsetMetadata:
    """An offset with where it lives (segment base offset and byte position), when known."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@dataclass(frozen=True)
class FetchDataInfo:
    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(frozen=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int | None


@dataclass(frozen=True)
class RollParams:
    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now_ms: int


# Called for every valid batch during recovery: (buffer, header with position inside buffer).
BatchCallback = Callable[[bytes, BatchHeader], None]


class LogSegment:
    """A ``.log`` plus its indexes; the unit of rolling, retention, cleaning and deletion."""

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        base_offset: int,
        index_interval_bytes: int,
        rolling_jitter_ms: int,
        now_ms: int,
    ) -> None:
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        self.created_ms = now_ms
        self._bytes_since_last_index_entry = 0
        self._max_timestamp_so_far: int | None = None  # None: not loaded yet (lazily, from the tail)
        self._offset_of_max_timestamp = base_offset
        self._rolling_based_timestamp: int | None = None
        self._rolling_loaded = False
        self._lock = threading.RLock()

    @classmethod
    def open(
        cls,
        log_dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10_485_760,
        segment_jitter_ms: int = 0,
        now_ms: int | None = None,
        file_suffix: str = "",
        preallocate_size: int = 0,
        descriptor_cache: DescriptorCache | None = None,
    ) -> LogSegment:
        """Open (creating if needed) the files of the segment at ``base_offset`` in ``log_dir``.

        Nothing stays open but a new ``.log``'s descriptor (in ``descriptor_cache``, the process-wide one by
        default) and, once used, the index mappings.
        """
        log_dir = Path(log_dir)
        jitter = random.randint(0, segment_jitter_ms) if segment_jitter_ms > 0 else 0
        return cls(
            FileRecords(segment_file(log_dir, base_offset, LOG_SUFFIX, file_suffix), preallocate_size,
                        descriptor_cache),
            OffsetIndex(segment_file(log_dir, base_offset, INDEX_SUFFIX, file_suffix), base_offset, max_index_size),
            TimeIndex(segment_file(log_dir, base_offset, TIME_INDEX_SUFFIX, file_suffix), base_offset,
                      max_index_size),
            TransactionIndex(base_offset, segment_file(log_dir, base_offset, TXN_INDEX_SUFFIX, file_suffix),
                             descriptor_cache),
            base_offset,
            index_interval_bytes,
            jitter,
            wall_clock_ms() if now_ms is None else now_ms,
        )

    # -- sizes and timestamps -------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.log.size

    def _load_max_timestamp(self) -> None:
        """Largest timestamp in the segment: from the time index's last entry, then the batches after it."""
        if self._max_timestamp_so_far is not None:
            return
        last = self.time_index.last_entry
        max_ts, max_off = last.timestamp, last.offset
        start = self.offset_index.lookup(last.offset).position if self.time_index.entries else 0
        for _, header in self._scan_headers(start, self.log.size):
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.last_offset
        self._max_timestamp_so_far = max_ts
        self._offset_of_max_timestamp = max_off

    @property
    def max_timestamp_so_far(self) -> int:
        with self._lock:
            self._load_max_timestamp()
            assert self._max_timestamp_so_far is not None
            return self._max_timestamp_so_far

    @property
    def offset_of_max_timestamp(self) -> int:
        with self._lock:
            self._load_max_timestamp()
            return self._offset_of_max_timestamp

    def largest_timestamp(self) -> int:
        """What time retention compares: the largest record timestamp, or the file's mtime if none."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.log.last_modified_ms()

    def last_modified_ms(self) -> int:
        return self.log.last_modified_ms()

    # -- appending ------------------------------------------------------------------------------------------
    def append(self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Append whole batches (``headers`` parsed from ``buf``, positions relative to ``buf``).

        The caller (Log) has validated the batches and checked that every offset fits relative to this
        segment's base offset (``can_convert_to_relative_offset``).
        """
        if not headers:
            return
        with self._lock:
            last = headers[-1]
            if not 0 <= last.last_offset - self.base_offset <= INT32_MAX:
                raise InvalidOffsetError(
                    f"offset {last.last_offset} does not fit in segment {self.base_offset} (int32 relative offset)")
            if self._max_timestamp_so_far is None:
                self._load_max_timestamp()
            # Disk blocks for the index entries these batches may add, before anything is written: on a full
            # disk the append then fails here, cleanly, instead of with a SIGBUS in a mapped write after it.
            self.offset_index.reserve(len(headers))
            self.time_index.reserve(len(headers))
            log = self.log
            start_position = log.size
            first, end = headers[0].position, last.end
            # The usual produce buffer is exactly its batches: write it as it is, no view or slice.
            log.append(buf if first == 0 and end == len(buf) else memoryview(buf)[first:end])
            if start_position == 0:
                self._rolling_loaded = True
                self._rolling_based_timestamp = headers[0].max_timestamp
            for h in headers:
                self._index_batch(h, start_position + h.position - first)

    def _index_batch(self, h: BatchHeader, position: int) -> None:
        max_ts = self._max_timestamp_so_far
        assert max_ts is not None
        if h.max_timestamp > max_ts:
            max_ts = self._max_timestamp_so_far = h.max_timestamp
            self._offset_of_max_timestamp = h.last_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append_if_room(h.last_offset, position)
            self.time_index.append_if_room(max_ts, self._offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += h.size

    def update_txn_index(self, aborted: AbortedTxn) -> None:
        with self._lock:
            self.txn_index.append(aborted)

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # -- reading --------------------------------------------------------------------------------------------
    def _scan_headers(self, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch in [start, end), reading only headers.

        Stops at a torn tail or at bytes that cannot be a header (only recovery may judge those).
        """
        position = start
        while position < end:
            peek = self.log.read(position, min(_HEADER_PEEK, end - position))
            try:
                header = _peek_header(peek)
            except CorruptRecordError:
                return
            if header is None or position + header.size > end:
                return
            yield position, header
            position += header.size

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``, if any."""
        start = max(self.offset_index.lookup(offset).position, starting_position)
        for position, header in self._scan_headers(start, self.log.size):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> FetchDataInfo | None:
        """Up to ``max_size`` bytes starting at the batch holding ``start_offset``; None if it is past the end.

        ``max_position`` bounds the slice (the position of the high watermark or LSO when it is in this
        segment). With ``min_one_message`` the first batch is returned whole even if larger than ``max_size``,
        so a consumer can always make progress (KIP-74).
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for read of segment {self.base_offset}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        metadata = LogOffsetMetadata(start_offset, self.base_offset, position)
        limit = self.log.size if max_position is None else min(max_position, self.log.size)
        adjusted = max(max_size, header.size) if min_one_message else max_size
        if adjusted == 0 or limit <= position:
            return FetchDataInfo(metadata, EMPTY_SLICE)
        fetch_size = min(limit - position, adjusted)
        return FetchDataInfo(metadata, FileSlice(self.log, position, fetch_size),
                             first_entry_incomplete=adjusted < header.size)

    def read_next_offset(self) -> int:
        """Offset after the last batch (the segment's base offset when it is empty)."""
        last = self.offset_index.lookup(1 << 62)
        next_offset = self.base_offset
        for _, header in self._scan_headers(last.position, self.log.size):
            next_offset = header.next_offset
        return next_offset

    def batches(self, start_position: int = 0) -> Iterator[tuple[bytes, BatchHeader]]:
        """(buffer, header) for every whole batch, the header's position relative to the buffer.

        Reads in chunks; the cleaner and tools use it. Raises CorruptRecordError on bytes that cannot be a
        batch (a recovered segment never has those).
        """
        position = start_position
        end = self.log.size
        chunk = _SCAN_CHUNK
        while position < end:
            buf = self.log.read(position, min(chunk, end - position))
            consumed = 0
            offset = 0
            while True:
                header = read_batch_header(buf, offset)
                if header is None:
                    break
                yield buf, header
                offset = header.end
                consumed = offset
            if consumed == 0:
                header = _peek_header(buf)
                if header is None or position + header.size > end:
                    return
                chunk = header.size
                continue
            position += consumed
            chunk = _SCAN_CHUNK

    def read_bytes(self, position: int = 0, size: int | None = None) -> bytes:
        """Raw bytes of the ``.log`` (for the cleaner and tests)."""
        return self.log.read(position, self.log.size - position if size is None else size)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp >= ``timestamp``."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for pos, header in self._scan_headers(position, self.log.size):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            buf = self.log.read(pos, header.size)
            local = _peek_header(buf)
            assert local is not None
            for record in decode_records(buf, local):
                ts = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else record.timestamp
                if ts >= timestamp and record.offset >= starting_offset:
                    epoch = header.partition_leader_epoch if header.magic == MAGIC_V2 else -1
                    return TimestampAndOffset(ts, record.offset, epoch if epoch >= 0 else None)
        return None

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted(fetch_offset, upper_bound_offset)

    # -- recovery and truncation ----------------------------------------------------------------------------
    def recover(self, on_batch: BatchCallback | None = None, *, reset_txn_index: bool = True) -> int:
        """Validate every batch, rebuild all three indexes, cut the log after the last valid batch.

        A batch is valid if its framing and checksum are right and its offsets follow the previous batch's
        and fit the segment. Returns the number of bytes truncated (a torn or corrupt tail).
        """
        with self._lock:
            self.offset_index.reset()
            self.time_index.reset()
            if reset_txn_index:
                self.txn_index.reset()
            self._bytes_since_last_index_entry = 0
            self._max_timestamp_so_far = -1
            self._offset_of_max_timestamp = self.base_offset
            self._rolling_loaded = False
            valid = 0
            next_offset = self.base_offset
            try:
                for buf, header in self.batches():
                    validate_batch(buf, header)
                    if (header.magic == MAGIC_V2 and header.base_offset < next_offset) or \
                            header.last_offset < next_offset or \
                            not self.can_convert_to_relative_offset(header.last_offset):
                        break
                    self._index_batch(header, valid)
                    if on_batch is not None:
                        on_batch(buf, header)
                    valid += header.size
                    next_offset = header.next_offset
            except CorruptRecordError:
                pass
            truncated = self.log.size - valid
            if truncated > 0:
                self.log.truncate_to(valid)
            if self._max_timestamp_so_far >= 0:
                self.time_index.maybe_append(self._max_timestamp_so_far, self._offset_of_max_timestamp,
                                             skip_full_check=True)
            return truncated

    def truncate_to(self, offset: int) -> int:
        """Drop every batch holding offsets >= ``offset``; returns bytes removed."""
        with self._lock:
            found = self.translate_offset(offset)
            if found is None:
                return 0
            position, _ = found
            self.offset_index.truncate_to(offset)
            self.time_index.truncate_to(offset)
            self.txn_index.truncate_to(offset)
            removed = self.log.truncate_to(position)
            self._bytes_since_last_index_entry = 0
            self._max_timestamp_so_far = None
            if self.log.size == 0:
                self.created_ms = wall_clock_ms()
                self._rolling_loaded = False
            return removed

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an index cannot be trusted (the loader then recovers the segment)."""
        self.offset_index.sanity_check(self.log.size)
        last = self.offset_index.last_offset if self.offset_index.entries else None
        if last is not None:
            position = self.offset_index.lookup(last).position
            peek = self.log.read(position, _HEADER_PEEK)
            try:
                header = _peek_header(peek)
            except CorruptRecordError:
                header = None
            if header is None or header.base_offset > last:
                raise CorruptIndexError(self.offset_index.path, f"entry for {last} does not point at its batch")
        self.time_index.sanity_check()
        if self.time_index.entries and self.time_index.last_entry.offset < self.base_offset:
            raise CorruptIndexError(self.time_index.path, "last entry before the segment base offset")

    def tail_is_intact(self) -> bool:
        """Cheap structural check: batch headers from the last index entry chain exactly to the file end."""
        start = self.offset_index.lookup(1 << 62).position
        end = start
        for position, header in self._scan_headers(start, self.log.size):
            end = position + header.size
        return end == self.log.size

    # -- rolling --------------------------------------------------------------------------------------------
    def _load_rolling_timestamp(self) -> int | None:
        if not self._rolling_loaded:
            self._rolling_loaded = True
            first = next(self._scan_headers(0, self.log.size), None)
            self._rolling_based_timestamp = None if first is None else first[1].max_timestamp
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        first = self._load_rolling_timestamp()
        if first is not None and first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    def should_roll(self, p: RollParams) -> bool:
        return self.needs_roll(p.max_segment_ms, p.max_segment_bytes, p.max_timestamp_in_messages,
                               p.max_offset_in_messages, p.messages_size, p.now_ms)

    def needs_roll(self, max_segment_ms: int, max_segment_bytes: int, max_timestamp_in_messages: int,
                   max_offset_in_messages: int, messages_size: int, now_ms: int) -> bool:
        """``should_roll`` without building a RollParams: the Log asks this on every append."""
        with self._lock:
            size = self.log.size
            if size > 0 and (size > max_segment_bytes - messages_size or
                             self.time_waited_for_roll(now_ms, max_timestamp_in_messages) >
                             max_segment_ms - self.rolling_jitter_ms):
                return True
            return self.offset_index.is_full() or self.time_index.is_full() or \
                not 0 <= max_offset_in_messages - self.base_offset <= INT32_MAX

    def on_become_inactive(self) -> None:
        """The segment was rolled: final time-index entry, trim the preallocated indexes and log."""
        with self._lock:
            self._load_max_timestamp()
            assert self._max_timestamp_so_far is not None
            if self._max_timestamp_so_far >= 0:
                self.time_index.maybe_append(self._max_timestamp_so_far, self._offset_of_max_timestamp,
                                             skip_full_check=True)
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()
            self.log.trim()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- life cycle -----------------------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync the log and its indexes (blocks on disk)."""
        with self._lock:
            self.log.flush()
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment, e.g. '' -> '.deleted', '.cleaned' -> '.swap', '.swap' -> ''.

        The ``.log`` rename is what a restart acts on, so its place in the order matters for a crash between
        renames: to ``.swap`` it goes last (a ``.log.swap`` then always has its ``.txnindex.swap`` beside it,
        which cannot be rebuilt); otherwise first (a ``.deleted`` log means the segment is gone, whatever its
        indexes are called; a live log after ``.swap`` lets the loader adopt the indexes left behind).
        """
        with self._lock:
            def renamed(path: Path) -> Path:
                name = path.name
                if old_suffix and name.endswith(old_suffix):
                    name = name[: -len(old_suffix)]
                return path.with_name(name + new_suffix)
            log_last = new_suffix == SWAP_SUFFIX
            if not log_last:
                self.log.rename_to(renamed(self.log.path))
            self.offset_index.rename_to(renamed(self.offset_index.path))
            self.time_index.rename_to(renamed(self.time_index.path))
            self.txn_index.rename_to(renamed(self.txn_index.path))
            if log_last:
                self.log.rename_to(renamed(self.log.path))

    def update_parent_dir(self, parent: Path) -> None:
        """The partition directory was renamed (a move between log dirs, a deletion): follow it."""
        with self._lock:
            self.log.update_parent_dir(parent)
            self.offset_index.update_parent_dir(parent)
            self.time_index.update_parent_dir(parent)
            self.txn_index.update_parent_dir(parent)

    def close(self) -> None:
        """Trim indexes (their length tells a restart how many entries there are) and close files."""
        with self._lock:
            if self._max_timestamp_so_far is not None and self._max_timestamp_so_far >= 0 and \
                    not self.log.closed:
                self.time_index.maybe_append(self._max_timestamp_so_far, self._offset_of_max_timestamp,
                                             skip_full_check=True)
            self.offset_index.close()
            self.time_index.close()
            self.txn_index.close()
            if not self.log.closed:
                self.log.trim()
            self.log.close()

    def close_handlers(self) -> None:
        """Close descriptors without touching file contents (after a crash simulation or before deletion)."""
        with self._lock:
            self.offset_index.close_handler()
            self.time_index.close_handler()
            self.txn_index.close()
            self.log.close()

    def delete_files(self) -> None:
        with self._lock:
            self.close_handlers()
            for path in (self.log.path, self.offset_index.path, self.time_index.path, self.txn_index.path):
                path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log.path})"


def _peek_header(buf: bytes) -> BatchHeader | None:
    """Header of the entry at the start of ``buf``, which may hold only the header, not the whole entry."""
    return peek_batch_header(buf, 0)
