"""Sends fuzz frames to a live broker and classifies what each one did, pipelined for volume.

Each frame goes out followed by a probe (ApiVersions v0 with a correlation id of its own) on the same connection,
a batch of them at a time. The broker answers a connection's requests in order, so the probe's answer says the
frame was dealt with and the connection lives; an answer between two probes is the frame's own. Per frame:

- **answered**: a response came back for it (an error response is an answer);
- **silent**: handled without a response, as a produce with acks=0 is;
- **closed**: the broker closed the connection after it (the frames behind it in the batch are sent again on a
  new connection, not counted twice);
- **slow**: neither within ``timeout`` (a mutated field may ask the broker to wait: a long poll); the connection
  is dropped and a fresh connection must be answered at once, or the broker **hung**.

The broker's process is watched by whoever started it: a dead broker is a **crash**.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import struct
from dataclasses import dataclass, field

PROBE_BASE = -0x40000000  # probe correlation ids count up from here; fuzz frames use other ids
TIMEOUT_S = 10.0


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
        self.examples += other.examples[: max(0, 20 - len(self.examples))]

    def line(self) -> str:
        return (f"{self.sent} frames: {self.answered} answered, {self.silent} handled without an answer, "
                f"{self.closed} closed the connection, {self.slow} slow, {self.hung} hangs, "
                f"{self.connect_failures} failed connects")


def probe(i: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, PROBE_BASE + i, 5) + b"probe"
    return struct.pack(">i", len(body)) + body


class Driver:
    def __init__(self, host: str, port: int, timeout: float = TIMEOUT_S) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.sock: socket.socket | None = None
        self._buf = bytearray()

    def _connect(self) -> socket.socket:
        s = socket.create_connection((self.host, self.port), timeout=self.timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = bytearray()
        return s

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def alive(self) -> bool:
        """A fresh connection's ApiVersions is answered within the timeout."""
        try:
            with socket.create_connection((self.host, self.port), timeout=self.timeout) as s:
                s.sendall(probe(0))
                head = _recv(s, 4)
                return head is not None and _recv(s, struct.unpack(">i", head)[0]) is not None
        except OSError:
            return False

    def send(self, frames: list[bytes]) -> Counts:
        counts = Counts()
        queue = list(frames)
        while queue:
            if self.sock is None:
                try:
                    self.sock = self._connect()
                except OSError:
                    counts.connect_failures += 1
                    return counts
            done = self._batch(queue, counts)
            queue = queue[done:]
        return counts

    def _batch(self, frames: list[bytes], counts: Counts) -> int:
        """Send ``frames`` with probes; returns how many were dealt with (the rest go again)."""
        s = self.sock
        assert s is not None
        payload = b"".join(f + probe(i) for i, f in enumerate(frames))
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the broker closed it part way: the reads below say where
        except TimeoutError:
            pass  # the broker stopped reading (a frame it waits on): the reads below say which
        expected = 0
        own_answer = False
        while expected < len(frames):
            try:
                response = self._read_frame(s)
            except TimeoutError:
                counts.sent += 1
                counts.slow += 1
                counts.examples.append(f"slow: {frames[expected][:64].hex()}")
                self.close()
                if not self.alive():
                    counts.hung += 1
                    counts.examples.append(f"HANG after {frames[expected][:64].hex()}")
                return expected + 1
            if response is None:
                counts.sent += 1
                counts.closed += 1
                self.close()
                return expected + 1
            (cid,) = struct.unpack_from(">i", response, 0) if len(response) >= 4 else (None,)
            if cid == PROBE_BASE + expected:
                counts.sent += 1
                if own_answer:
                    counts.answered += 1
                else:
                    counts.silent += 1
                own_answer = False
                expected += 1
            else:
                own_answer = True
        return expected

    def _read_frame(self, s: socket.socket) -> bytes | None:
        head = self._read_exactly(s, 4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read_exactly(s, size)

    def _read_exactly(self, s: socket.socket, n: int) -> bytes | None:
        while len(self._buf) < n:
            try:
                chunk = s.recv(max(65536, n - len(self._buf)))
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                return None
            self._buf += chunk
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out


def _recv(s: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class AsyncDriver:
    """The same classification as ``Driver``, over ``lanes`` connections at once (asyncio), so that the broker
    is kept busy instead of every frame waiting for the round trip of the one before: what the long form needs
    to reach millions of frames."""

    def __init__(self, host: str, port: int, lanes: int = 16, timeout: float = TIMEOUT_S) -> None:
        self.host, self.port, self.lanes, self.timeout = host, port, lanes, timeout

    def send(self, frames: list[bytes], batch: int = 32) -> Counts:
        return asyncio.run(self._send(frames, batch))

    async def _send(self, frames: list[bytes], batch: int) -> Counts:
        counts = Counts()
        queue: collections.deque[list[bytes]] = collections.deque(
            frames[i:i + batch] for i in range(0, len(frames), batch))
        await asyncio.gather(*(self._lane(queue, counts) for _ in range(self.lanes)))
        return counts

    async def _alive(self) -> bool:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), self.timeout)
        except (OSError, TimeoutError):
            return False
        try:
            writer.write(probe(0))
            head = await asyncio.wait_for(reader.readexactly(4), self.timeout)
            await asyncio.wait_for(reader.readexactly(struct.unpack(">i", head)[0]), self.timeout)
            return True
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            return False
        finally:
            writer.close()

    async def _lane(self, queue: collections.deque[list[bytes]], counts: Counts) -> None:
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while queue:
            frames = queue.popleft()
            while frames:
                if writer is None:
                    try:
                        reader, writer = await asyncio.wait_for(
                            asyncio.open_connection(self.host, self.port), self.timeout)
                    except (OSError, TimeoutError):
                        counts.connect_failures += 1
                        return
                assert reader is not None
                done, keep = await self._batch(reader, writer, frames, counts)
                frames = frames[done:]
                if not keep:
                    writer.close()
                    reader = writer = None
        if writer is not None:
            writer.close()

    async def _batch(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frames: list[bytes],
                     counts: Counts) -> tuple[int, bool]:
        writer.write(b"".join(f + probe(i) for i, f in enumerate(frames)))
        expected = 0
        own_answer = False
        while expected < len(frames):
            try:
                head = await asyncio.wait_for(reader.readexactly(4), self.timeout)
                response = await asyncio.wait_for(reader.readexactly(struct.unpack(">i", head)[0]), self.timeout)
            except TimeoutError:
                counts.sent += 1
                counts.slow += 1
                counts.examples.append(f"slow: {frames[expected][:64].hex()}")
                if not await self._alive():
                    counts.hung += 1
                    counts.examples.append(f"HANG after {frames[expected][:64].hex()}")
                return expected + 1, False
            except (OSError, asyncio.IncompleteReadError):
                counts.sent += 1
                counts.closed += 1
                return expected + 1, False
            cid = struct.unpack_from(">i", response, 0)[0] if len(response) >= 4 else None
            if cid == PROBE_BASE + expected:
                counts.sent += 1
                if own_answer:
                    counts.answered += 1
                else:
                    counts.silent += 1
                own_answer = False
                expected += 1
            else:
                own_answer = True
        return expected, True
