"""Sends fuzz frames to a live broker and classifies what each one did, pipelined over many connections.

Each frame goes out followed by a probe (ApiVersions v0 with a correlation id of its own) on the same connection,
a batch of them at a time, on ``lanes`` connections at once, so that the broker is kept busy instead of every
frame waiting for the round trip of the one before. The broker answers a connection's requests in order, so the
probe's answer says the frame was dealt with and the connection lives; an answer between two probes is the
frame's own. Per frame:

- **answered**: a response came back for it (an error response is an answer);
- **silent**: handled without a response, as a produce with acks=0 is;
- **closed**: the broker closed the connection after it (the frames behind it in the batch are sent again on a
  new connection, not counted twice);
- **slow**: nothing came back on its connection for ``timeout`` (a mutated field may ask the broker to wait: a
  long poll); the connection is dropped and a fresh connection must be answered at once, or the broker **hung**.

The broker's process is watched by whoever started it: a dead broker is a **crash**.

Most damaged frames close their connection, so connections are made and lost at the pace of frames: the lanes
run on uvloop and read their answers in a protocol's callback (no stream reader, no timer or task per answer),
which is what lets one driver process feed the broker thousands of frames a second.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import uvloop

PROBE_BASE = -0x40000000  # probe correlation ids count up from here; fuzz frames use other ids
TIMEOUT_S = 10.0
BATCH = 32
MAX_EXAMPLES = 20  # frames kept (as hex) in Counts.examples
SHOWN_BYTES = 128  # of each

_INT = struct.Struct(">i")


@dataclass
class Counts:
    sent: int = 0
    answered: int = 0
    silent: int = 0
    closed: int = 0
    slow: int = 0
    hung: int = 0
    connect_failures: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, other: Counts) -> None:
        for name in ("sent", "answered", "silent", "closed", "slow", "hung", "connect_failures"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for example in other.examples:
            self.note(example)

    def note(self, example: str) -> None:
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)

    def line(self) -> str:
        return (f"{self.sent} frames: {self.answered} answered, {self.silent} handled without an answer, "
                f"{self.closed} closed the connection, {self.slow} slow, {self.hung} hangs, "
                f"{self.connect_failures} failed connects")


def api_versions_v0(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, 5) + b"probe"
    return _INT.pack(len(body)) + body


def probe(i: int) -> bytes:
    return api_versions_v0(PROBE_BASE + i)


_PROBES = [probe(i) for i in range(BATCH)]


def _probes(n: int) -> list[bytes]:
    while len(_PROBES) < n:
        _PROBES.append(probe(len(_PROBES)))
    return _PROBES


class Outcome(enum.Enum):
    KEPT = "every frame dealt with, the connection open"
    CLOSED = "the broker closed the connection"
    SLOW = "nothing came back within the timeout"


class _Connection(asyncio.Protocol):
    """One connection: :meth:`exchange` writes a batch with its probes and classifies the answers as they arrive
    (``data_received``), until every frame is dealt with, the connection is lost, or nothing arrives for
    ``timeout`` (one timer per batch, pushed back as answers come)."""

    def __init__(self, timeout: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._timeout = timeout
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self._buf = bytearray()
        self._frames: Sequence[bytes] = ()
        self._counts = Counts()
        self._expected = 0
        self._own_answer = False
        self._last_progress = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._done: asyncio.Future[tuple[int, Outcome]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def exchange(self, frames: Sequence[bytes], counts: Counts) -> asyncio.Future[tuple[int, Outcome]]:
        """Send ``frames`` with probes; the future gives how many were dealt with (counted in ``counts``; the
        rest go again elsewhere) and how the batch ended."""
        assert self.transport is not None and not self.lost
        self._frames, self._counts, self._expected, self._own_answer = frames, counts, 0, False
        self._done = done = self._loop.create_future()
        self._last_progress = self._loop.time()
        self._timer = self._loop.call_later(self._timeout, self._check_progress)
        self.transport.write(b"".join(itertools.chain.from_iterable(zip(frames, _probes(len(frames)), strict=False))))
        return done

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos, end = 0, len(buf)
        while end - pos >= 4:
            size = max(0, _INT.unpack_from(buf, pos)[0])
            if end - pos - 4 < size:
                break
            correlation_id = _INT.unpack_from(buf, pos + 4)[0] if size >= 4 else None
            pos += 4 + size
            self._answer(correlation_id)
        if pos:
            del buf[:pos]

    def _answer(self, correlation_id: int | None) -> None:
        if self._done is None or self._done.done():
            return
        self._last_progress = self._loop.time()
        if correlation_id != PROBE_BASE + self._expected:
            self._own_answer = True
            return
        counts = self._counts
        counts.sent += 1
        if self._own_answer:
            counts.answered += 1
        else:
            counts.silent += 1
        self._own_answer = False
        self._expected += 1
        if self._expected == len(self._frames):
            self._finish(Outcome.KEPT)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._done is not None and not self._done.done():
            self._counts.sent += 1
            self._counts.closed += 1
            self._expected += 1
            self._finish(Outcome.CLOSED)

    def _check_progress(self) -> None:
        self._timer = None
        if self._done is None or self._done.done():
            return
        quiet = self._loop.time() - self._last_progress
        if quiet < self._timeout:
            self._timer = self._loop.call_later(self._timeout - quiet, self._check_progress)
            return
        self._counts.sent += 1
        self._counts.slow += 1
        self._expected += 1
        self._finish(Outcome.SLOW)

    def _finish(self, outcome: Outcome) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        assert self._done is not None
        self._done.set_result((self._expected, outcome))

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()


def batched(frames: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    it = iter(frames)
    while batch := list(itertools.islice(it, size)):
        yield batch


class Driver:
    """Classifies frames sent over ``lanes`` connections at once, ``batch`` frames (each with its probe) written
    at a time. Owns its event loop (uvloop): :meth:`send` and :meth:`alive` run on it, and the connections still
    open after a send are used again by the next."""

    def __init__(self, host: str, port: int, lanes: int = 16, timeout: float = TIMEOUT_S, batch: int = BATCH) -> None:
        self.host, self.port, self.lanes, self.timeout, self.batch = host, port, lanes, timeout, batch
        self._loop = uvloop.new_event_loop()
        self._idle: list[_Connection] = []

    def send(self, frames: Iterable[bytes], counts: Counts | None = None) -> Counts:
        """Send every frame of ``frames`` (consumed lazily, ``batch`` at a time, by whichever lane is free) and
        add what each did to ``counts``. A lane that cannot connect stops (a failed connect is counted)."""
        counts = Counts() if counts is None else counts
        self._loop.run_until_complete(self._send(batched(frames, self.batch), counts))
        return counts

    def alive(self) -> bool:
        """A fresh connection's ApiVersions is answered within the timeout."""
        return self._loop.run_until_complete(self._alive())

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        self._loop.run_until_complete(asyncio.sleep(0))  # let the transports close
        self._loop.close()

    async def _open(self) -> _Connection | None:
        try:
            async with asyncio.timeout(self.timeout):
                _, conn = await self._loop.create_connection(lambda: _Connection(self.timeout), self.host, self.port)
        except (OSError, TimeoutError):
            return None
        return conn

    async def _alive(self) -> bool:
        conn = await self._open()
        if conn is None:
            return False
        try:
            _, outcome = await conn.exchange([api_versions_v0(0)], Counts())
            return outcome is Outcome.KEPT
        finally:
            conn.close()

    async def _send(self, batches: Iterator[list[bytes]], counts: Counts) -> None:
        await asyncio.gather(*(self._lane(batches, counts) for _ in range(self.lanes)))

    async def _lane(self, batches: Iterator[list[bytes]], counts: Counts) -> None:
        conn: _Connection | None = None
        try:
            for frames in batches:
                while frames:
                    while conn is None and self._idle:
                        conn = self._idle.pop()
                        conn = None if conn.lost else conn
                    if conn is None:
                        conn = await self._open()
                        if conn is None:
                            counts.connect_failures += 1
                            return
                    done, outcome = await conn.exchange(frames, counts)
                    if outcome is not Outcome.KEPT:
                        conn.close()
                        conn = None
                    if outcome is Outcome.SLOW:
                        shown = frames[done - 1][:SHOWN_BYTES].hex()
                        counts.note(f"slow: {shown}")
                        if not await self._alive():
                            counts.hung += 1
                            counts.note(f"HANG after {shown}")
                    frames = frames[done:]
        finally:
            if conn is not None:
                self._idle.append(conn)
