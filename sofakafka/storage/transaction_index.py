"""The aborted-transaction index (``<base offset>.txnindex``) of one log segment.

A consumer reading with ``isolation.level=read_committed`` needs, for the range it fetches, the producer ids
and first offsets of the transactions that were aborted there, so it can drop their records. Scanning the log
for ABORT markers on every fetch would be far too slow, so each segment keeps this small side file: one entry
per aborted transaction whose ABORT marker lies in the segment, in marker order.

Layout (Kafka 2.6, ``kafka.log.TransactionIndex`` / ``AbortedTxn``; FORMATS.md section 7): entries of 34 bytes,
big-endian, no header::

    int16 version (0) | int64 producer_id | int64 first_offset | int64 last_offset | int64 last_stable_offset

Unlike the offset and time indexes this file is not preallocated or memory-mapped: it is tiny, append-only and
read sequentially, and it is not even created until the first aborted transaction lands in the segment. Its
descriptor lives in the broker's descriptor cache like the ``.log``'s (closed when idle, reopened on use).

Threading: not thread-safe. The owning ``LogSegment`` (under its ``Log``'s lock) appends and truncates; readers
call :meth:`collect_aborted` from fetch paths, which only reads whole entries with ``pread`` and so tolerates a
concurrent append (it sees the entry or it does not). All calls do blocking file I/O.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sofakafka.storage.file_cache import CachedFile, DescriptorCache, default_descriptor_cache

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


class CorruptTransactionIndexError(Exception):
    """The ``.txnindex`` file holds entries that cannot belong to its segment; the Log rebuilds it."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its data spans ``first_offset``..``last_offset`` (the ABORT marker's offset).

    ``last_stable_offset`` is the partition's LSO right after the marker was written. A fetch that ends at or
    below it knows no later segment can hold an aborted transaction overlapping its range, which is what lets
    :meth:`TransactionIndex.collect_aborted` stop early.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def encode(self) -> bytes:
        return _ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, position: int = 0) -> AbortedTxn:
        version, producer_id, first_offset, last_offset, lso = _ENTRY.unpack_from(buf, position)
        return cls(producer_id, first_offset, last_offset, lso, version)


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """Aborted transactions overlapping a fetch range found in one index.

    ``is_complete`` says an entry's LSO reached the end of the range, so later segments need not be searched.
    """

    aborted: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    """Append-only file of :class:`AbortedTxn` entries for the segment starting at ``start_offset``."""

    def __init__(self, start_offset: int, path: Path, cache: DescriptorCache | None = None) -> None:
        self.start_offset = start_offset
        self._path = Path(path)
        self._file: CachedFile = (cache or default_descriptor_cache()).file(self._path)
        self._exists = False  # the file exists (it is created by the first append)
        self._size = 0
        self._last_offset: int | None = None
        try:
            self._size = os.stat(self._path).st_size
            self._exists = True
        except FileNotFoundError:
            pass
        if self._exists:
            last = None
            for txn, _ in self._entries():
                last = txn.last_offset
            self._last_offset = last

    # -- file handling -------------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    def _create(self) -> None:
        if not self._exists:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
            self._size = os.fstat(fd).st_size
            self._file.adopt(fd)
            self._exists = True

    def close(self) -> None:
        """Release the descriptor (a later use opens the file again)."""
        self._file.close()

    def flush(self) -> None:
        """fsync; the segment calls it on roll and on clean shutdown."""
        if self._exists:
            fd = self._file.acquire()
            try:
                os.fsync(fd)
            finally:
                self._file.release()

    def delete(self) -> bool:
        """Close and remove the file; False if there was none (the index had never been written)."""
        self.close()
        self._exists = False
        self._size = 0
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path: Path) -> None:
        """Move the file (``.cleaned`` -> ``.swap`` -> live, or ``.deleted``); an open descriptor stays valid.

        Even when no file exists yet the index adopts the new name, so a later first append creates it there.
        """
        new_path = Path(new_path)
        try:
            self._file.rename_to(new_path)
        finally:
            self._path = new_path
            self._file.follow(new_path)

    def update_parent_dir(self, parent: Path) -> None:
        """The partition directory was renamed (deletion, future-dir promotion): follow it."""
        self._path = Path(parent) / self._path.name
        self._file.follow(self._path)

    def _ftruncate(self, size: int) -> None:
        fd = self._file.acquire()
        try:
            os.ftruncate(fd, size)
        finally:
            self._file.release()
        self._size = size

    def reset(self) -> None:
        """Drop every entry; recovery rebuilds the index from the segment's markers."""
        if self._exists:
            self._ftruncate(0)
        self._last_offset = None

    # -- entries -------------------------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry. Markers arrive in offset order, so a non-increasing ``last_offset`` is a caller bug."""
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise ValueError(
                f"aborted transactions must be appended with increasing last offsets: {txn.last_offset} is "
                f"not above {self._last_offset} in {self._path}"
            )
        self._create()
        data = txn.encode()
        fd = self._file.acquire()
        try:
            written = os.pwrite(fd, data, self._size)
        finally:
            self._file.release()
        if written != len(data):
            raise OSError(f"short write to {self._path}")
        self._size += len(data)
        self._last_offset = txn.last_offset

    @property
    def last_offset(self) -> int | None:
        return self._last_offset

    @property
    def size_in_bytes(self) -> int:
        return self._size if self._exists else 0

    def _entries(self) -> Iterator[tuple[AbortedTxn, int]]:
        """Whole entries with their byte position; a torn trailing entry (crash mid-append) is not one."""
        if not self._exists:
            return
        end = self._size - self._size % ENTRY_SIZE
        chunk = 1024 * ENTRY_SIZE
        position = 0
        while position < end:
            fd = self._file.acquire()
            try:
                data = os.pread(fd, min(chunk, end - position), position)
            finally:
                self._file.release()
            if not data:
                return
            usable = len(data) - len(data) % ENTRY_SIZE
            for i in range(0, usable, ENTRY_SIZE):
                txn = AbortedTxn.decode(data, i)
                if txn.version > CURRENT_VERSION:
                    raise CorruptTransactionIndexError(
                        f"unexpected aborted transaction version {txn.version} in {self._path}"
                    )
                yield txn, position + i
            position += usable

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [txn for txn, _ in self._entries()]

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``.

        An entry whose LSO reaches ``upper_bound_offset`` ends the search: when its marker was written, no
        transaction starting below the bound was still open, so every aborted transaction overlapping the range
        has a marker at or before this one. Without such an entry the Log must go on to the next segment.
        """
        found: list[AbortedTxn] = []
        for txn, _ in self._entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose ABORT marker is at ``offset`` or later (the log is being truncated there)."""
        new_last: int | None = None
        for txn, position in self._entries():
            if txn.last_offset >= offset:
                self._ftruncate(position)
                self._last_offset = new_last
                return
            new_last = txn.last_offset
        # Also cut a torn trailing entry so the next append lands on an entry boundary.
        if self._exists and self._size % ENTRY_SIZE:
            self._ftruncate(self._size - self._size % ENTRY_SIZE)

    def sanity_check(self) -> None:
        """Cheap consistency check run when a segment is opened after an unclean shutdown.

        An entry whose marker lies before the segment's base offset cannot belong here; neither can a file
        whose length is not a whole number of entries, nor markers that go backwards.
        """
        if not self._exists:
            return
        if self._size % ENTRY_SIZE:
            raise CorruptTransactionIndexError(
                f"transaction index {self._path} has size {self._size}, not a multiple of {ENTRY_SIZE}"
            )
        previous: int | None = None
        for txn, _ in self._entries():
            if txn.last_offset < self.start_offset:
                raise CorruptTransactionIndexError(
                    f"last offset of aborted transaction {txn} in {self._path} is below the segment's "
                    f"start offset {self.start_offset}"
                )
            if previous is not None and txn.last_offset <= previous:
                raise CorruptTransactionIndexError(
                    f"aborted transaction {txn} in {self._path} does not follow last offset {previous}"
                )
            previous = txn.last_offset

    def __repr__(self) -> str:
        return f"TransactionIndex(start_offset={self.start_offset}, path={str(self._path)!r})"
