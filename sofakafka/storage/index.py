"""Sparse, memory-mapped segment indexes in Kafka's byte layouts.

``OffsetIndex`` (``.index``): 8-byte entries, int32 offset relative to the segment's base offset + int32 byte
position in the segment's ``.log``. ``TimeIndex`` (``.timeindex``): 12-byte entries, int64 timestamp + int32
relative offset. Both big-endian, both sparse: the segment adds an entry once ``index.interval.bytes`` of log
have been written since the last one, so a lookup lands at most that many bytes before its target and the
segment scans batch headers from there.

The active segment's indexes are preallocated to ``segment.index.bytes`` (rounded down to a whole entry) so
appends never grow the file; ``trim_to_valid_size`` cuts them to their real length when the segment is rolled
or closed, which is also what lets a restart count entries from the file length. After a crash the file may
still be preallocated: trailing all-zero entries are then not counted (a zero entry can only ever be a
segment's first entry, and dropping that one only makes lookups start at position 0, which is always safe).

Files are mapped lazily on first use so that a broker with many segments does not hold two mappings per
segment it never reads, and, as Kafka does, an index holds no file descriptor: the file is opened just long
enough to map it (or to change its length, then map it again) and closed (``mapping.FileMapping``), so a
broker's descriptors grow with its open ``.log`` files only (``file_cache``), not with its indexes.

Thread-safety: appends, truncations and resizes come from the owning Log under its lock; lookups may run
concurrently from reader threads, so every method takes the index's own lock (cheap: no I/O beyond page
faults on the mapping).
"""

from __future__ import annotations

import os
import struct
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from sofakafka.storage.errors import CorruptIndexError, InvalidOffsetError
from sofakafka.storage.mapping import FileMapping

INT32_MAX = (1 << 31) - 1
# Disk blocks are reserved (fallocate) this many bytes ahead of the entries written through the mapping.
_ALLOCATE_CHUNK = 64 * 1024


@dataclass(frozen=True)
class OffsetPosition:
    offset: int
    position: int


@dataclass(frozen=True)
class TimestampOffset:
    timestamp: int
    offset: int


_E = TypeVar("_E", OffsetPosition, TimestampOffset)


class _MappedIndex(ABC, Generic[_E]):
    """A file of fixed-size entries, mapped into memory; subclasses give the entry layout and which of its
    fields the entries are sorted by."""

    ENTRY_SIZE = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._lock = threading.RLock()
        self._max_index_size = max_index_size
        self._mmap: FileMapping | None = None
        self._length = 0  # bytes of the file (mapping) currently allocated
        # Bytes from the start known to have disk blocks (see ``reserve``); 0 until the first reservation,
        # which covers the written entries again (fallocate of allocated blocks changes nothing).
        self._allocated = 0
        self._entries = 0
        self._loaded = False
        self._preallocate = False
        # The file is created by the first entry written (Kafka's LazyIndex): a new partition costs one file
        # (its .log), not three, and until then the index reads as empty.
        self._exists = self.path.exists()
        self._deleted = False

    # -- mapping management -------------------------------------------------------------------------------
    def _ensure_open(self) -> None:
        if self._loaded:
            return
        if not self._exists:
            self._length = 0
            self._entries = 0
            self._loaded = True
            self._after_load()
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            length = os.fstat(fd).st_size
            if length % self.ENTRY_SIZE != 0:
                raise CorruptIndexError(self.path, f"file length {length} is not a multiple of {self.ENTRY_SIZE}")
            self._unmap()
            self._mmap = FileMapping(fd, length) if length > 0 else None
            entries = self._count_entries(fd, length)
        finally:
            os.close(fd)  # the mapping stays valid without it
        self._length = length
        self._entries = entries
        self._loaded = True
        self._after_load()
        if self._preallocate:
            self._resize_locked(self._max_index_size)

    def _after_load(self) -> None:
        """Subclass hook: cache the last entry."""

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def _count_entries(self, fd: int, length: int) -> int:
        """Entries actually written: the file length minus an all-zero preallocated tail (see module doc)."""
        size = self.ENTRY_SIZE
        slots = length // size
        if slots == 0:
            return 0
        zero = bytes(size)
        # Entries strictly increase in their sort key, so only slot 0 can be all zeros: past it, written
        # entries are a prefix and the preallocated zeros the rest. A binary search for the first zero slot
        # reads a few entries, where scanning a preallocated 10 MB file for its last non-zero byte read all of
        # it. The probes are preads, not reads of the mapping: a fault on a hole of the sparse file zero-fills
        # a whole readahead window, ~50 times the cost (5 ms per index, 10 s per thousand partitions at
        # start-up after a crash, before this). The search gallops out from slot 1 first (slots 1, 2, 4, ...),
        # so an index of n entries costs about 2 log n probes rather than log of its preallocated slots: most
        # segments a restart reads hold a handful of entries or none, in files preallocated for 1.3 million.
        lo, hi = 1, slots  # the answer is in [lo, hi]: slots below lo are written, slot hi is zero or the end
        probe = 1
        while probe < hi:
            if os.pread(fd, size, probe * size) == zero:
                hi = probe
                break
            lo = probe + 1
            probe *= 2
        while lo < hi:
            mid = (lo + hi) // 2
            if os.pread(fd, size, mid * size) == zero:
                hi = mid
            else:
                lo = mid + 1
        if lo == 1 and os.pread(fd, size, 0) == zero:
            # Slot 0 zero with nothing written after it: not counted (if it was a real entry, offset 0 at
            # position 0, dropping it is safe: module doc).
            return 0
        return lo

    def _resize_locked(self, new_size: int) -> bool:
        """Change the file's length and map it again: the one time besides loading that needs a descriptor,
        opened for the change and closed after."""
        rounded = max(new_size - new_size % self.ENTRY_SIZE, self._entries * self.ENTRY_SIZE)
        if rounded == self._length:
            return False
        if self._mmap is not None:
            self._mmap.flush()
            self._unmap()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._exists = True
        try:
            os.ftruncate(fd, rounded)
            self._length = rounded
            self._allocated = min(self._allocated, rounded)
            if rounded > 0:
                self._mmap = FileMapping(fd, rounded)
        finally:
            os.close(fd)
        return True

    def resize(self, new_size: int) -> bool:
        """Set the allocated size (never below the valid entries); True if it changed. Blocks on ftruncate."""
        with self._lock:
            self._max_index_size = new_size
            self._preallocate = True
            if not self._loaded or not self._exists:
                return True  # done when the file is first loaded or written
            return self._resize_locked(new_size)

    def trim_to_valid_size(self) -> None:
        """Cut the preallocated tail so the file length says how many entries there are."""
        with self._lock:
            self._preallocate = False
            if self._loaded:
                self._resize_locked(self._entries * self.ENTRY_SIZE)

    def reserve(self, entries: int) -> None:
        """Give the next ``entries`` entries (and one more, the time index's entry at a roll) disk blocks before
        anything writes them through the mapping.

        A write through a mapping to a page of a sparse file that has no block yet must allocate one, and on a
        full disk that is a SIGBUS, which kills the process: the broker could not even refuse the produce.
        ``posix_fallocate`` fails with ENOSPC instead, which the log turns into KAFKA_STORAGE_ERROR and an
        offline log directory. The segment calls this before it writes the batches, so a full disk fails the
        append before anything reached the log; the index's own write paths call it too (a no-op comparison
        when the blocks are there). Blocks are reserved ``_ALLOCATE_CHUNK`` bytes at a time, with a descriptor
        opened for that and closed again.
        """
        need = (self._entries + entries + 1) * self.ENTRY_SIZE
        if need <= self._allocated:
            return
        with self._lock:
            self._ensure_open()
            cap = max(self._max_index_size - self._max_index_size % self.ENTRY_SIZE, self._entries * self.ENTRY_SIZE)
            need = min(need, cap)
            if need <= self._allocated:
                return
            if need > self._length:
                self._resize_locked(max(self._max_index_size, need))
            start = self._allocated - self._allocated % 4096
            end = min(self._length, max(need, start + _ALLOCATE_CHUNK))
            if end > start:
                fd = os.open(self.path, os.O_RDWR)
                try:
                    os.posix_fallocate(fd, start, end - start)
                finally:
                    os.close(fd)
            self._allocated = end

    # -- properties -----------------------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        with self._lock:
            self._ensure_open()
            return self._entries

    @property
    def max_entries(self) -> int:
        with self._lock:
            self._ensure_open()
            return self._max_index_size // self.ENTRY_SIZE

    def is_full(self) -> bool:
        with self._lock:
            if not self._loaded:
                self._ensure_open()
            return self._entries >= self._max_index_size // self.ENTRY_SIZE

    def size_in_bytes(self) -> int:
        with self._lock:
            self._ensure_open()
            return self._entries * self.ENTRY_SIZE

    def relative_offset(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > INT32_MAX:
            raise InvalidOffsetError(f"offset {offset} does not fit as a relative offset of {self.base_offset}")
        return rel

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # -- life cycle -----------------------------------------------------------------------------------------
    def flush(self) -> None:
        """msync the mapping (blocks on disk)."""
        with self._lock:
            if self._mmap is not None:
                self._mmap.flush()

    def close(self) -> None:
        with self._lock:
            if self._loaded:
                self._resize_locked(self._entries * self.ENTRY_SIZE)
            self._close_handles()
            if not self._exists and not self._deleted:
                # An index never written is created only now, empty: a cleanly closed log dir has every
                # segment's index files, as Kafka's clean shutdown leaves them (Kafka itself, started on such a
                # dir, would otherwise recover the segment and rebuild its index).
                self.path.touch()
                self._exists = True

    def _close_handles(self) -> None:
        self._unmap()
        self._loaded = False

    def close_handler(self) -> None:
        """Release the mapping without trimming (used before deleting or renaming the file)."""
        with self._lock:
            self._close_handles()

    def update_parent_dir(self, parent: Path) -> None:
        """The directory holding the file was renamed: a mapping made from now on opens the new name."""
        with self._lock:
            self.path = Path(parent) / self.path.name

    def rename_to(self, new_path: Path) -> None:
        with self._lock:
            if self.path.exists():
                os.replace(self.path, new_path)
            self.path = Path(new_path)

    def delete(self) -> None:
        with self._lock:
            self._close_handles()
            self.path.unlink(missing_ok=True)
            self._exists = False
            self._deleted = True

    def reset(self) -> None:
        """Drop every entry (before a rebuild from the log), even from a file too damaged to open."""
        with self._lock:
            if not self._loaded:
                try:
                    self._ensure_open()
                except CorruptIndexError:
                    os.truncate(self.path, 0)
                    self._ensure_open()
            self.truncate_to_entries(0)

    def truncate_to_entries(self, n: int) -> None:
        with self._lock:
            self._ensure_open()
            if n < self._entries:
                mm = self._mmap
                if mm is not None:
                    mm.buf[n * self.ENTRY_SIZE:self._entries * self.ENTRY_SIZE] = bytes(
                        (self._entries - n) * self.ENTRY_SIZE)
                self._entries = n
                self._after_load()

    def _ensure_room(self) -> FileMapping:
        if self._entries * self.ENTRY_SIZE + self.ENTRY_SIZE > self._length:
            # Only a non-preallocated index (a segment loaded inactive, then made active again) gets here.
            self._resize_locked(max(self._max_index_size, (self._entries + 1) * self.ENTRY_SIZE))
        if (self._entries + 1) * self.ENTRY_SIZE > self._allocated:
            self.reserve(1)
        assert self._mmap is not None
        return self._mmap

    def raw_bytes(self) -> bytes:
        """The valid entries' bytes (tests and tools compare layouts with this)."""
        with self._lock:
            self._ensure_open()
            if self._mmap is None:
                return b""
            return bytes(self._mmap.buf[: self._entries * self.ENTRY_SIZE])

    @abstractmethod
    def _entry_locked(self, n: int) -> _E:
        """Entry ``n`` decoded; the caller holds the lock and has checked the bounds."""

    @abstractmethod
    def _sort_key(self, entry: _E) -> int:
        """The field entries are ordered by (offset for the offset index, timestamp for the time index)."""

    def entry(self, n: int) -> _E:
        with self._lock:
            self._ensure_open()
            if not 0 <= n < self._entries:
                raise IndexError(f"entry {n} out of range in {self.path} with {self._entries} entries")
            return self._entry_locked(n)

    def _floor_slot(self, target: int) -> int:
        """Slot of the last entry whose sort key is <= target, or -1."""
        lo, hi = 0, self._entries - 1
        if hi < 0 or self._sort_key(self._entry_locked(0)) > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._sort_key(self._entry_locked(mid)) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _floor_entry(self, target: int, default: _E) -> _E:
        with self._lock:
            self._ensure_open()
            slot = self._floor_slot(target)
            return default if slot < 0 else self._entry_locked(slot)


class OffsetIndex(_MappedIndex[OffsetPosition]):
    """Relative offset -> log file position, for finding where to start scanning for an offset."""

    ENTRY_SIZE = 8
    _FMT = struct.Struct(">iI")

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10_485_760) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._last_offset = base_offset

    def _after_load(self) -> None:
        self._last_offset = self._entry_locked(self._entries - 1).offset if self._entries else self.base_offset

    def _entry_locked(self, n: int) -> OffsetPosition:
        assert self._mmap is not None
        rel, pos = self._FMT.unpack_from(self._mmap.buf, n * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def _sort_key(self, entry: OffsetPosition) -> int:
        return entry.offset

    @property
    def last_offset(self) -> int:
        with self._lock:
            self._ensure_open()
            return self._last_offset

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must strictly increase and the index must not be full."""
        with self._lock:
            self._ensure_open()
            if self._entries and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"attempt to append offset {offset} to {self.path} after offset {self._last_offset}")
            if self.is_full():
                raise InvalidOffsetError(f"attempt to append to full index {self.path}")
            mm = self._ensure_room()
            self._FMT.pack_into(mm.buf, self._entries * 8, self.relative_offset(offset), position)
            self._entries += 1
            self._last_offset = offset

    def append_if_room(self, offset: int, position: int) -> bool:
        """The segment's per-batch path: append unless full or not past the last entry; True if appended.

        One lock round and no re-checks, since an active segment's index is asked this for every indexed batch.
        """
        with self._lock:
            if not self._loaded:
                self._ensure_open()
            entries = self._entries
            if entries >= self._max_index_size // 8 or (entries and offset <= self._last_offset):
                return False
            rel = offset - self.base_offset
            if rel < 0 or rel > INT32_MAX:
                raise InvalidOffsetError(f"offset {offset} does not fit as a relative offset of {self.base_offset}")
            mm = self._mmap if (entries + 1) * 8 <= self._allocated else self._ensure_room()
            assert mm is not None
            self._FMT.pack_into(mm.buf, entries * 8, rel, position)
            self._entries = entries + 1
            self._last_offset = offset
            return True

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest indexed offset <= target with its position, or (base offset, 0) when none is."""
        return self._floor_entry(target_offset, OffsetPosition(self.base_offset, 0))

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        with self._lock:
            self._ensure_open()
            slot = self._floor_slot(offset)
            if slot < 0:
                keep = 0
            elif self._entry_locked(slot).offset == offset:
                keep = slot
            else:
                keep = slot + 1
            self.truncate_to_entries(keep)

    def sanity_check(self, log_size: int | None = None) -> None:
        """Raise CorruptIndexError unless offsets and positions strictly increase and stay inside the log."""
        with self._lock:
            self._ensure_open()
            if self._entries == 0 or self._mmap is None:
                return
            data = bytes(self._mmap.buf[: self._entries * 8])
            prev_rel, prev_pos = -1, -1
            for i, (rel, pos) in enumerate(self._FMT.iter_unpack(data)):
                if (rel <= prev_rel and not (i == 0 and rel == 0)) or rel < 0:
                    raise CorruptIndexError(self.path, f"entry {i} offset {self.base_offset + rel} out of order")
                if pos <= prev_pos:
                    raise CorruptIndexError(self.path, f"entry {i} position {pos} out of order")
                prev_rel, prev_pos = rel, pos
            if log_size is not None and prev_pos >= max(log_size, 1):
                raise CorruptIndexError(self.path, f"last entry points at {prev_pos}, beyond log size {log_size}")


class TimeIndex(_MappedIndex[TimestampOffset]):
    """Timestamp -> relative offset, for ListOffsets by time. Timestamps and offsets never decrease."""

    ENTRY_SIZE = 12
    _FMT = struct.Struct(">qi")

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10_485_760) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._last = TimestampOffset(-1, base_offset)

    def _after_load(self) -> None:
        self._last = self._entry_locked(self._entries - 1) if self._entries else TimestampOffset(-1, self.base_offset)

    def _entry_locked(self, n: int) -> TimestampOffset:
        assert self._mmap is not None
        ts, rel = self._FMT.unpack_from(self._mmap.buf, n * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def _sort_key(self, entry: TimestampOffset) -> int:
        return entry.timestamp

    @property
    def last_entry(self) -> TimestampOffset:
        with self._lock:
            self._ensure_open()
            return self._last

    def is_full(self) -> bool:
        # One slot stays free for the entry written when the segment is rolled (skip_full_check).
        with self._lock:
            if not self._loaded:
                self._ensure_open()
            return self._entries >= self._max_index_size // self.ENTRY_SIZE - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append if ``timestamp`` is larger than the last entry's; out-of-order input is a caller bug."""
        with self._lock:
            self._ensure_open()
            if not skip_full_check and self.is_full():
                raise InvalidOffsetError(f"attempt to append to full time index {self.path}")
            if self._entries and offset < self._last.offset:
                raise InvalidOffsetError(
                    f"attempt to append offset {offset} to {self.path} after offset {self._last.offset}")
            if self._entries and timestamp < self._last.timestamp:
                raise InvalidOffsetError(
                    f"attempt to append timestamp {timestamp} to {self.path} after {self._last.timestamp}")
            if timestamp > self._last.timestamp:
                mm = self._ensure_room()
                self._FMT.pack_into(mm.buf, self._entries * 12, timestamp, self.relative_offset(offset))
                self._entries += 1
                self._last = TimestampOffset(timestamp, offset)

    def append_if_room(self, timestamp: int, offset: int) -> bool:
        """The segment's per-batch path: ``maybe_append`` unless full (then False), in one lock round."""
        with self._lock:
            if not self._loaded:
                self._ensure_open()
            if self._entries >= self._max_index_size // 12 - 1:
                return False
            if timestamp <= self._last.timestamp and self._entries:
                if timestamp < self._last.timestamp:
                    raise InvalidOffsetError(
                        f"attempt to append timestamp {timestamp} to {self.path} after {self._last.timestamp}")
                return False
        self.maybe_append(timestamp, offset)
        return True

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= target, or (-1, base offset): where to start looking."""
        return self._floor_entry(target_timestamp, TimestampOffset(-1, self.base_offset))

    def truncate_to(self, offset: int) -> None:
        """Remove entries pointing at offsets >= ``offset``."""
        with self._lock:
            self._ensure_open()
            keep = self._entries
            while keep > 0 and self._entry_locked(keep - 1).offset >= offset:
                keep -= 1
            self.truncate_to_entries(keep)

    def sanity_check(self, last_offset: int | None = None) -> None:
        with self._lock:
            self._ensure_open()
            if self._entries == 0 or self._mmap is None:
                return
            data = bytes(self._mmap.buf[: self._entries * 12])
            prev_ts, prev_rel = -1 << 63, -1
            for i, (ts, rel) in enumerate(self._FMT.iter_unpack(data)):
                if ts < prev_ts or (i > 0 and ts == prev_ts) or rel < prev_rel or rel < 0:
                    raise CorruptIndexError(self.path, f"entry {i} ({ts}, {self.base_offset + rel}) out of order")
                prev_ts, prev_rel = ts, rel
            if last_offset is not None and self.base_offset + prev_rel > last_offset:
                raise CorruptIndexError(
                    self.path, f"last entry offset {self.base_offset + prev_rel} beyond log end {last_offset}")
