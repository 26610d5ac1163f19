"""A shared, writable memory mapping of a file that holds no file descriptor (what the indexes live in).

Kafka maps each ``.index`` and ``.timeindex`` and closes the file: a mapping stays valid without its
descriptor, so a broker pays one descriptor per segment (the ``.log``), not three. Python's ``mmap.mmap``
cannot do that before 3.13: it ``dup()``s the descriptor it is given and keeps the copy until the mapping is
closed (3.13's ``trackfd=False`` is the same thing as this module and could replace it once 3.11 is dropped).
So the mapping is made with libc's ``mmap`` through ctypes and exposed as a ``memoryview`` of its bytes, which
``struct.pack_into``/``unpack_from`` and slicing accept like an ``mmap`` object.

Safety: after ``close`` the memory is gone and touching the array would crash the process, so the owner (an
index) only touches it under its own lock and drops every reference when it closes the mapping; ``buf`` is
never handed out.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_mmap = _libc.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64]
_munmap = _libc.munmap
_munmap.restype = ctypes.c_int
_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_msync = _libc.msync
_msync.restype = ctypes.c_int
_msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # Linux (asm-generic and x86): the stdlib does not export it


class FileMapping:
    """``length`` bytes of a file mapped shared and writable; the descriptor may be closed right after."""

    __slots__ = ("_addr", "buf", "length")

    def __init__(self, fd: int, length: int) -> None:
        if length <= 0:
            raise ValueError(f"cannot map {length} bytes")
        addr = _mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            hint = ""
            if err == errno.ENOMEM:
                limit = max_map_count()
                hint = (f" (the process may be at vm.max_map_count{'' if limit is None else f', {limit}'}: "
                        "each partition's active segment maps its two indexes once written)")
            raise OSError(err, f"mmap of {length} bytes failed: {os.strerror(err)}{hint}")
        self._addr: int | None = addr
        self.length = length
        #: The mapped bytes; valid until ``close``, which releases the view.
        self.buf = memoryview((ctypes.c_char * length).from_address(addr)).cast("B")

    def flush(self) -> None:
        """msync: write dirty pages to disk and wait (an index's part of a segment flush)."""
        if self._addr is not None and _msync(self._addr, self.length, _MS_SYNC) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"msync failed: {os.strerror(err)}")

    def close(self) -> None:
        addr, self._addr = self._addr, None
        if addr is not None:
            self.buf.release()
            if _munmap(addr, self.length) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"munmap failed: {os.strerror(err)}")

    @property
    def closed(self) -> bool:
        return self._addr is None


def max_map_count() -> int | None:
    """The kernel's limit on one process's memory mappings (``vm.max_map_count``); None where it cannot be read.

    An index is one mapping while it is in use, so a broker holding P partitions with records needs about 2P of
    them beside its own (the interpreter's arenas, thread stacks, libraries); past the limit ``mmap`` fails
    with ENOMEM. Kafka is bound the same way and its operations guide says to raise the setting."""
    try:
        with open("/proc/sys/vm/max_map_count", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def map_file(path: str | os.PathLike[str], length: int) -> FileMapping:
    """Open ``path``, map its first ``length`` bytes and close the descriptor again."""
    fd = os.open(path, os.O_RDWR)
    try:
        return FileMapping(fd, length)
    finally:
        os.close(fd)
