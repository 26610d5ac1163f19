"""A real Broker on its own uvloop thread, and a blocking socket client speaking our codec.

The broker is the whole thing (listeners, metadata store, logs), only in-process so tests can start many
quickly; clients talk to it over real TCP sockets, frame by frame.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvloop

from sofakafka.broker.broker import Broker
from sofakafka.broker.config import KafkaConfig
from sofakafka.protocol.api import RequestHeader, decode_response, encode_request, size_prefixed
from sofakafka.protocol.schema import Request, Response


class BrokerThread:
    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        props = {
            "log.dirs": str(data_dir),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.flush.offset.checkpoint.interval.ms": "600000",
            "replica.high.watermark.checkpoint.interval.ms": "600000",
        }
        props.update(overrides or {})
        self.config = KafkaConfig.from_properties(props)
        self.broker: Broker | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Future[None] | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="test-broker", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self._stop = self.loop.create_future()
            self.broker = Broker(self.config)
            startup = asyncio.ensure_future(self.broker.startup())
            await asyncio.wait([startup])
            self._error = startup.exception()  # handed to the test thread, which raises it from start()
            self._ready.set()
            if self._error is not None:
                return
            try:
                await self._stop
            finally:
                await self.broker.shutdown()

        try:
            uvloop.run(main())
        except BaseException as exc:
            # Reported to the test through start(), then re-raised so the thread does not hide it.
            if self._error is None:
                self._error = exc
            self._ready.set()
            raise

    def start(self) -> BrokerThread:
        self._thread.start()
        if not self._ready.wait(60):
            raise TimeoutError("broker did not start")
        if self._error is not None:
            raise self._error
        return self

    @property
    def port(self) -> int:
        assert self.broker is not None
        return self.broker.listeners[0].port

    def call_soon(self, fn: Any, *args: Any) -> None:
        assert self.loop is not None
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None and not self.loop.is_closed():
            stop = self._stop

            def resolve() -> None:
                if not stop.done():
                    stop.set_result(None)

            try:
                self.loop.call_soon_threadsafe(resolve)
            except RuntimeError:
                pass
        self._thread.join(60)
        if self._thread.is_alive():
            raise TimeoutError("broker did not stop")


@contextmanager
def running_broker(data_dir: Path, overrides: dict[str, str] | None = None) -> Iterator[BrokerThread]:
    b = BrokerThread(data_dir, overrides).start()
    try:
        yield b
    finally:
        b.stop()


class Client:
    """One connection; ``send`` writes a request, ``receive`` reads the next response frame."""

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._correlation = 0
        self._sent: dict[int, tuple[int, int]] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def frame(self, body: Request, version: int, correlation_id: int | None = None) -> bytes:
        if correlation_id is None:
            self._correlation += 1
            correlation_id = self._correlation
        self._sent[correlation_id] = (body.API_KEY, version)
        header = RequestHeader(request_api_key=body.API_KEY, request_api_version=version,
                               correlation_id=correlation_id, client_id="unit-test")
        return size_prefixed(encode_request(header, body))

    def send(self, body: Request, version: int, correlation_id: int | None = None) -> None:
        self.sock.sendall(self.frame(body, version, correlation_id))

    def read_frame(self) -> bytes | None:
        """The next response frame without its size, or None when the broker closed the connection."""
        head = self._read_exactly(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def receive(self) -> tuple[int, Response]:
        frame = self.read_frame()
        if frame is None:
            raise ConnectionError("connection closed by the broker")
        (correlation_id,) = struct.unpack_from(">i", frame)
        key, version = self._sent.pop(correlation_id)
        header, body = decode_response(frame, key, version)
        return header.correlation_id, body

    def call(self, body: Request, version: int) -> Any:
        self.send(body, version)
        return self.receive()[1]

    def closed_by_peer(self) -> bool:
        """True when the broker closed the connection (reads EOF; any bytes before it are discarded)."""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except ConnectionResetError:
            return True
