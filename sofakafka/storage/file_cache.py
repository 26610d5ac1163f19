"""A bounded cache of open file descriptors for segment files (``log.max.open.segment.files``).

A broker holds one ``.log`` per segment (and a ``.txnindex`` for segments with aborted transactions); with
thousands of partitions, keeping every one open costs a descriptor each and runs into ``RLIMIT_NOFILE`` long
before memory or disk run out (the offset and time indexes are memory-mapped with their descriptors closed, see
``mapping``). So a segment file is a ``CachedFile``: it is opened on first use, stays open while it is used,
and the least recently used idle ones are closed when more than ``capacity`` are open. Closing loses nothing: a
file's size lives in its owner (``FileRecords``), every write is a ``pwrite`` at an explicit position, and
data written through a descriptor that was since closed is still the file's (page cache, then disk).

fsync after a close: ``flush`` reopens the file and fsyncs the new descriptor, which writes back every dirty page
of the file whichever descriptor wrote it. A writeback error that happened while no descriptor was open is still
reported to that fsync (Linux reports an error no descriptor has seen to the next fsync of any descriptor, since
4.16; PostgreSQL relies on the same behaviour for the same reason), so acknowledged-after-flush keeps its meaning.

Pins: a descriptor in use (between ``acquire`` and ``release``) is never closed underneath its user, since the
number could be reused by another open and a ``pread`` would then read someone else's file. When every open
descriptor is pinned the cache goes over capacity rather than block; the excess is closed as pins are released.

Cost: ``acquire``/``release`` are one short lock round each and an LRU move, no system call while the file stays
open; a miss costs an ``open`` (and maybe a ``close`` of the victim). Any thread may call anything.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

#: Default capacity when no broker config sets one (tests, tools, a Log built on its own).
DEFAULT_MAX_OPEN_FILES = 1000


class FileClosedError(OSError):
    """The file was closed for good (its segment was deleted or closed); nothing may be read from it."""


class DescriptorCache:
    """Open descriptors of many ``CachedFile`` objects, at most ``capacity`` of them idle at once."""

    def __init__(self, capacity: int = DEFAULT_MAX_OPEN_FILES) -> None:
        if capacity < 1:
            raise ValueError(f"descriptor cache capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._lock = threading.Lock()
        self._open: OrderedDict[CachedFile, None] = OrderedDict()  # least recently used first
        #: Descriptors opened (first opens and reopens after an eviction) and closed by eviction, for
        #: benchmarks and tests.
        self.opens = 0
        self.evictions = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def set_capacity(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"descriptor cache capacity must be at least 1, got {capacity}")
        with self._lock:
            self._capacity = capacity
            victims = self._evict_locked()
        _close_all(victims)

    @property
    def open_count(self) -> int:
        """Descriptors open right now (pinned ones included)."""
        with self._lock:
            return len(self._open)

    def file(self, path: Path) -> CachedFile:
        """A handle on ``path`` (not opened until used; the file must exist by then)."""
        return CachedFile(self, Path(path))

    def _evict_locked(self) -> list[int]:
        """Take the least recently used unpinned descriptors off their files until at most ``capacity`` remain;
        returns them for the caller to close once the lock is released."""
        excess = len(self._open) - self._capacity
        if excess <= 0:
            return []
        chosen: list[CachedFile] = []
        for f in self._open:  # oldest first; usually the first one is idle, so this stops at once
            if f._pins == 0:
                chosen.append(f)
                if len(chosen) == excess:
                    break
        victims: list[int] = []
        for f in chosen:
            fd = f._fd
            assert fd is not None
            f._fd = None
            del self._open[f]
            victims.append(fd)
        self.evictions += len(victims)
        return victims


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


class CachedFile:
    """One file whose descriptor the cache may close while nobody uses it.

    ``acquire`` returns an open descriptor and pins it; ``release`` unpins. Use them in ``try``/``finally``.
    ``adopt`` hands over a descriptor the owner just opened (creating the file), ``rename_to`` renames the file
    (a closed descriptor reopens under the new name), ``close`` drops the descriptor (it reopens on the next
    ``acquire``) and ``retire`` closes for good.
    """

    __slots__ = ("_cache", "_drop", "_fd", "_pins", "_retired", "path")

    def __init__(self, cache: DescriptorCache, path: Path) -> None:
        self._cache = cache
        self.path = path
        self._fd: int | None = None
        self._pins = 0
        self._drop = False  # close the descriptor when the last pin is released
        self._retired = False

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    @property
    def retired(self) -> bool:
        return self._retired

    def acquire(self) -> int:
        cache = self._cache
        victims: list[int] = []
        with cache._lock:
            if self._retired:
                raise FileClosedError(f"{self.path} is closed")
            fd = self._fd
            if fd is None:
                fd = os.open(self.path, os.O_RDWR)  # never O_CREAT: a file that vanished must not come back empty
                self._fd = fd
                cache._open[self] = None
                cache.opens += 1
                self._pins += 1
                victims = cache._evict_locked()
            else:
                cache._open.move_to_end(self)
                self._pins += 1
            self._drop = False
        if victims:
            _close_all(victims)
        return fd

    def release(self) -> None:
        cache = self._cache
        fd: int | None = None
        victims: list[int] = []
        with cache._lock:
            self._pins -= 1
            if self._pins == 0:
                if self._drop and self._fd is not None:
                    fd, self._fd = self._fd, None
                    cache._open.pop(self, None)
                    self._drop = False
                elif len(cache._open) > cache._capacity:
                    victims = cache._evict_locked()
        if fd is not None:
            os.close(fd)
        if victims:
            _close_all(victims)

    def adopt(self, fd: int) -> None:
        """Take ``fd`` (open on ``path``, owned by the caller until now) as this file's descriptor."""
        cache = self._cache
        with cache._lock:
            if self._fd is not None or self._retired:
                raise ValueError(f"{self.path} already has a descriptor")
            self._fd = fd
            cache._open[self] = None
            cache.opens += 1
            victims = cache._evict_locked()
        _close_all(victims)

    def rename_to(self, new_path: Path) -> None:
        """Rename the file (if it exists) and follow it; under the cache lock so no reopen sees neither name."""
        new_path = Path(new_path)
        with self._cache._lock:
            if self.path.exists():
                os.replace(self.path, new_path)
            self.path = new_path

    def follow(self, new_path: Path) -> None:
        """The file was moved by someone else (its directory was renamed): reopen under ``new_path``."""
        with self._cache._lock:
            self.path = Path(new_path)

    def close(self) -> None:
        """Close the descriptor now, or when its last pin is released; the file may be opened again."""
        cache = self._cache
        fd: int | None = None
        with cache._lock:
            if self._fd is None:
                return
            if self._pins:
                self._drop = True
                return
            fd, self._fd = self._fd, None
            cache._open.pop(self, None)
        os.close(fd)

    def retire(self) -> None:
        """Close for good: ``acquire`` raises FileClosedError from now on (pins held keep their descriptor)."""
        with self._cache._lock:
            self._retired = True
        self.close()

    def __repr__(self) -> str:
        return f"CachedFile({str(self.path)!r}, open={self._fd is not None}, pins={self._pins})"


_default_cache: DescriptorCache | None = None
_default_lock = threading.Lock()


def default_descriptor_cache() -> DescriptorCache:
    """The process-wide cache used by logs built without one (a LogManager passes the broker's own)."""
    global _default_cache
    with _default_lock:
        if _default_cache is None:
            _default_cache = DescriptorCache()
        return _default_cache
