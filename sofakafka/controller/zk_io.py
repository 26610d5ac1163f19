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

Every request kazoo sends also gets an ``AsyncResult``, and kazoo's makes a ``threading.Condition`` for each (a
lock, a queue of waiters, bound methods and three caught ``AttributeError`` exceptions): at 100,000 partition
states read with watches that was a tenth to a sixth of the time the broker's threads held the interpreter lock,
and garbage for the collector to walk. :class:`LightResult` answers the same calls with one lock shared by the
handler, and a lock of its own only for a caller that actually blocks on it.
"""

from __future__ import annotations

import functools
import select
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.handlers.utils import AsyncResult

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


_UNSET: Any = object()


class LightResult(AsyncResult):  # type: ignore[misc]
    """kazoo's ``AsyncResult`` (a value or an exception, set once; waiters woken; callbacks run through the
    handler's completion queue) without a ``Condition`` per result: state changes under ``guard``, a lock the
    handler shares among all its results, and each blocked ``get``/``wait`` waits on a lock of its own that ``set``
    releases. Each callback is dispatched exactly once, whether linked before or after the result was set."""

    def __init__(self, handler: Any, guard: Any) -> None:
        # Not the base __init__: that is where the Condition is made.
        self._handler = handler
        self._guard = guard
        self._state: Any = _UNSET  # None: a value; an exception: that; _UNSET: not yet
        self._callbacks: list[Callable[[Any], Any]] | None = None
        self._waiters: list[Any] | None = None
        self.value: Any = None

    # What kazoo reads, on the one field this class keeps.
    def ready(self) -> bool:
        return self._state is not _UNSET

    def successful(self) -> bool:
        return self._state is None

    @property
    def exception(self) -> BaseException | None:
        state = self._state
        return None if state is _UNSET else state

    def set(self, value: Any = None) -> None:
        self._settle(value, None)

    def set_exception(self, exception: BaseException) -> None:
        self._settle(None, exception)

    def _settle(self, value: Any, exception: BaseException | None) -> None:
        with self._guard:
            if exception is None:
                self.value = value
            self._state = exception
            callbacks, self._callbacks = self._callbacks, None
            waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            waiter.release()
        for callback in callbacks or ():
            self._dispatch(callback)

    def _dispatch(self, callback: Callable[[Any], Any]) -> None:
        if self._handler.running:
            self._handler.completion_queue.put(functools.partial(callback, self))
        else:
            callback(self)

    def _outcome(self) -> Any:
        if self._state is None:
            return self.value
        raise self._state

    def _block(self, timeout: float | None) -> bool:
        """Wait until set or ``timeout`` (as ``Condition.wait`` takes it); whether it was set."""
        with self._guard:
            if self._state is not _UNSET:
                return True
            waiter = threading.Lock()
            waiter.acquire()
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(waiter)
        if timeout is None:
            waiter.acquire()
        elif timeout > 0:
            waiter.acquire(True, timeout)
        else:
            waiter.acquire(False)
        with self._guard:
            if self._state is not _UNSET:
                return True
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)
            return False

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if self._state is not _UNSET or (block and self._block(timeout)):
            return self._outcome()
        raise KazooTimeoutError()

    def get_nowait(self) -> Any:
        return self.get(block=False)

    def wait(self, timeout: float | None = None) -> bool:
        return self._block(timeout)

    def rawlink(self, callback: Callable[[Any], Any]) -> None:
        with self._guard:
            if self._state is _UNSET:
                if self._callbacks is None:
                    self._callbacks = []
                if callback not in self._callbacks:
                    self._callbacks.append(callback)
                return
        self._dispatch(callback)

    def unlink(self, callback: Callable[[Any], Any]) -> None:
        with self._guard:
            if self._callbacks is not None and callback in self._callbacks:
                self._callbacks.remove(callback)


class PollHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler with buffered sockets (module doc) and a cheaper ``select``: kazoo's own builds
    and closes a new epoll selector on every call, which was most of the connection thread's time when a broker
    followed a burst of thousands of partition-state changes; one ``poll`` does the same without a kernel object
    per call, for any descriptor number (``select.select`` stops at 1024)."""

    def __init__(self) -> None:
        super().__init__()
        self._result_guard = threading.Lock()

    def async_result(self) -> LightResult:
        return LightResult(self, self._result_guard)

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

