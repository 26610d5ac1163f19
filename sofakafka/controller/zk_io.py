"""The sockets and the ``select`` kazoo's connection thread uses for a ZooKeeper session.

One thread per session (kazoo's ``zk_loop``) carries every request, answer, watch notification and ping. In a
busy broker it competes for the interpreter lock with the request loop and the replication threads, and each
system call it makes gives the lock up and then waits its turn to take it back (up to the switch interval,
5 ms, behind each thread that holds it). kazoo makes five such calls per answer it reads (a ``select`` in its
loop, then a ``select`` and a ``recv`` for the length and again for the body) and four per request it sends (the
loop's ``select``, a one-byte ``recv`` of its wake-up pipe, a ``select`` for writing, the ``send``). At 100,000
partitions on three brokers on two cores the thread was seen waiting for the lock in every sample, its socket's
receive queue standing still for 18 s, and ZooKeeper expiring the session of a broker that was running: the
session heard nothing, not even a ping, for its whole timeout; each new session then read every partition state
again, and the loss came round again.

So the thread reads ahead: :class:`BufferedSocket` fills a buffer with one ``recv`` of up to
:data:`READ_AHEAD` bytes (hundreds of answers or notifications) and hands kazoo its reads from memory, and says
so through ``pending()``, which kazoo already consults before it selects. :class:`PollHandler` wraps the session
socket and the read end of kazoo's wake-up pipe in it (so the one-byte reads of queued requests come from memory
too), answers a ``select`` for buffered data without a system call, and lets a write go straight to ``send``,
which waits for room only when the kernel has none. What is left per request is its ``send``.

Nothing about the protocol changes: bytes are read in the same order; a closed peer still reads as ``b""``.
"""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler

READ_AHEAD = 256 * 1024
"""The most one ``recv`` of :class:`BufferedSocket` reads: about 3,000 watch notifications of a partition state."""


def _fd(obj: Any) -> int:
    return obj if isinstance(obj, int) else int(obj.fileno())


def _wait(fd: int, mask: int, timeout: float | None) -> bool:
    poller = select.poll()
    poller.register(fd, mask)
    return bool(poller.poll(None if timeout is None else timeout * 1000.0))


class BufferedSocket:
    """A socket whose reads come from a buffer filled :data:`READ_AHEAD` bytes at a time; everything else is the
    socket's own. ``write_timeout`` is how long a ``send`` finding no room waits for some (what kazoo's ``select``
    before the write last asked for)."""

    __slots__ = ("_buf", "_pos", "_sock", "write_timeout")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._buf = b""
        self._pos = 0
        self.write_timeout: float | None = None

    def pending(self) -> int:
        """Bytes read from the kernel and not yet handed out."""
        return len(self._buf) - self._pos

    def recv(self, n: int) -> bytes:
        if self._pos == len(self._buf):
            data: bytes = self._sock.recv(max(n, READ_AHEAD))
            if len(data) <= n:
                return data  # all of it asked for (or b"": the peer closed), nothing kept
            self._buf, self._pos = data, 0
        end = min(self._pos + n, len(self._buf))
        out = self._buf[self._pos:end]
        self._pos = end
        if end == len(self._buf):
            self._buf, self._pos = b"", 0
        return out

    def send(self, data: Any) -> int:
        try:
            return int(self._sock.send(data))
        except BlockingIOError:
            # The kernel's send buffer is full: wait for room as kazoo's select would have.
            if not _wait(self._sock.fileno(), select.POLLOUT, self.write_timeout):
                raise TimeoutError("socket time-out during write") from None
            return int(self._sock.send(data))

    def fileno(self) -> int:
        return int(self._sock.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class PollHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler with buffered sockets (module doc) and a cheaper ``select``: kazoo's own builds
    and closes a new epoll selector on every call, which was most of the connection thread's time when a broker
    followed a burst of thousands of partition-state changes; one ``poll`` does the same without a kernel object
    per call, for any descriptor number (``select.select`` stops at 1024)."""

    def create_connection(self, *args: Any, **kwargs: Any) -> BufferedSocket:
        return BufferedSocket(super().create_connection(*args, **kwargs))

    def create_socket_pair(self) -> tuple[Any, Any]:
        read_end, write_end = super().create_socket_pair()
        return BufferedSocket(read_end), write_end

    def select(self, rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any],
               timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be non-negative")
        buffered = [obj for obj in rlist if isinstance(obj, BufferedSocket) and obj.pending()]
        if buffered:
            return buffered, [], []
        if not rlist and wlist and all(isinstance(obj, BufferedSocket) for obj in wlist):
            # kazoo selects before each write; the write itself waits if it must (BufferedSocket.send).
            for obj in wlist:
                obj.write_timeout = timeout
            return [], list(wlist), []
        masks: dict[int, int] = {}
        objects: dict[int, list[Any]] = {}
        for objs, mask in ((rlist, select.POLLIN), (wlist, select.POLLOUT)):
            for obj in objs:
                fd = _fd(obj)
                masks[fd] = masks.get(fd, 0) | mask
                objects.setdefault(fd, []).append(obj)
        poller = select.poll()
        for fd, mask in masks.items():
            poller.register(fd, mask)
        readable: list[Any] = []
        writable: list[Any] = []
        for fd, events in poller.poll(None if timeout is None else timeout * 1000.0):
            # As kazoo's: an error or hang-up counts as ready, reading first.
            if events & ~select.POLLOUT and masks[fd] & select.POLLIN:
                readable.extend(objects[fd])
            elif events & ~select.POLLIN and masks[fd] & select.POLLOUT:
                writable.extend(objects[fd])
        return readable, writable, []

