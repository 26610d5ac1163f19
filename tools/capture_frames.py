"""Recording TCP proxy: put it between a real Kafka client and a real Kafka-compatible broker to keep
the exact frames they exchange as codec test fixtures (tests/fixtures/frames/).

A dev tool, not part of the product: the broker side is whatever runs on ``--broker`` (we use Tansu),
and nothing in the product or its tests talks to this proxy.

Why a proxy and not a packet capture: the client must reach the broker's *advertised* address on its
later connections too, so the broker is started with the proxy's address as its advertised listener
and every connection the client opens goes through here.

Why it rewrites ApiVersions: the fixtures must be what a client sends to a Kafka 2.6 (or older)
broker, and modern clients pick the highest version both sides know. So the proxy answers the version
negotiation the way a broker of ``--cap-release`` would: ApiVersions responses are rebuilt with the
release's version ranges (intersected with the real broker's), and an ApiVersions request newer than
that release is answered by the proxy itself with the v0 UNSUPPORTED_VERSION body, which is what makes
clients retry at a version the release knows.

Output: one JSON object per frame, appended as it passes (so a crash keeps what was seen):
``client``, ``direction`` (request/response), ``api_key``, ``api_version``, ``correlation_id``,
``hex`` (the frame without its 4-byte size prefix) plus ``connection`` (a per-run counter, so a
request can be paired with its response; correlation ids repeat across connections).
Responses carry their request's api_key/api_version because a response does not say what it answers.
Only bytes a client or the broker wrote are recorded: the proxy's own ApiVersions answers are not,
and a rewritten ApiVersions response is recorded as the client received it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import signal
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35

# Max version per API key advertised by each release line's .0 tag (facts from Kafka 2.6's API-VERSIONS.md,
# table 2, as tests/data/kafka-2.6/api_versions.json keeps them); "-" = the key does not exist in that release.
RELEASES = ("0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6")
_MAX_VERSION_TABLE = """
0  2 2 2 3 5 5 6 7 7 7 8 8 8
1  2 3 3 5 6 7 8 10 10 11 11 11 11
2  0 1 1 2 2 2 3 4 5 5 5 5 5
3  1 2 2 4 5 5 6 7 7 8 9 9 9
4  0 0 0 0 1 1 1 1 2 2 4 4 4
5  0 0 0 0 0 0 0 0 1 1 2 2 3
6  2 2 3 3 4 4 4 4 5 5 6 6 6
7  1 1 1 1 1 1 1 1 2 2 3 3 3
8  2 2 2 3 3 3 4 6 6 7 8 8 8
9  1 1 2 3 3 3 4 5 5 5 6 7 7
10 0 0 0 1 1 1 2 2 2 2 3 3 3
11 0 1 1 2 2 2 3 3 4 5 6 7 7
12 0 0 0 1 1 1 2 2 2 3 4 4 4
13 0 0 0 1 1 1 2 2 2 2 4 4 4
14 0 0 0 1 1 1 2 2 2 3 4 5 5
15 0 0 0 1 1 1 2 2 2 3 5 5 5
16 0 0 0 1 1 1 2 2 2 2 3 3 4
17 0 0 0 0 1 1 1 1 1 1 1 1 1
18 0 0 0 1 1 1 2 2 2 2 3 3 3
19 - 0 1 2 2 2 3 3 3 3 5 5 5
20 - 0 0 1 1 1 2 3 3 3 4 4 4
21 - - - 0 0 0 1 1 1 1 1 1 2
22 - - - 0 0 0 1 1 1 1 2 3 3
23 - - - 0 0 0 1 2 2 3 3 3 3
24 - - - 0 0 0 1 1 1 1 1 1 1
25 - - - 0 0 0 1 1 1 1 1 1 1
26 - - - 0 0 0 1 1 1 1 1 1 1
27 - - - 0 0 0 0 0 0 0 0 0 0
28 - - - 0 0 0 1 2 2 2 2 3 3
29 - - - 0 0 0 1 1 1 1 1 2 2
30 - - - 0 0 0 1 1 1 1 1 2 2
31 - - - 0 0 0 1 1 1 1 1 2 2
32 - - - 0 0 1 2 2 2 2 2 2 3
33 - - - 0 0 0 1 1 1 1 1 1 1
34 - - - - 0 0 1 1 1 1 1 1 1
35 - - - - 0 0 1 1 1 1 1 1 2
36 - - - - 0 0 0 0 1 1 1 2 2
37 - - - - 0 0 1 1 1 1 1 2 2
38 - - - - - 0 1 1 1 1 2 2 2
39 - - - - - 0 1 1 1 1 1 2 2
40 - - - - - 0 1 1 1 1 1 2 2
41 - - - - - 0 1 1 1 1 1 2 2
42 - - - - - 0 1 1 1 1 2 2 2
43 - - - - - - - - 0 0 2 2 2
44 - - - - - - - - - 0 1 1 1
45 - - - - - - - - - - 0 0 0
46 - - - - - - - - - - 0 0 0
47 - - - - - - - - - - 0 0 0
48 - - - - - - - - - - - - 0
49 - - - - - - - - - - - - 0
"""


def release_max_versions(release: str) -> dict[int, int]:
    column = RELEASES.index(release)
    table: dict[int, int] = {}
    for line in _MAX_VERSION_TABLE.strip().splitlines():
        key, *maxes = line.split()
        if maxes[column] != "-":
            table[int(key)] = int(maxes[column])
    return table


def _min_version(release: str, api_key: int) -> int:
    # ControlledShutdown's v0 slot was empty before 1.0; every other API starts at 0.
    return 1 if api_key == 7 and RELEASES.index(release) <= RELEASES.index("0.11.0") else 0


# --- just enough of the wire format to rewrite ApiVersions -------------------------------------------


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


def parse_api_versions_body(body: bytes, version: int) -> tuple[int, list[tuple[int, int, int]], int]:
    """(error_code, [(api_key, min, max)], throttle_time_ms) of an ApiVersions response body.

    A broker answering a too-new request uses the v0 body whatever the request version was, so a
    caller that gets an error here should retry with version 0."""
    (error_code,) = struct.unpack_from(">h", body, 0)
    pos = 2
    if version >= 3:
        count, pos = _read_uvarint(body, pos)
        count -= 1
    else:
        (count,) = struct.unpack_from(">i", body, pos)
        pos += 4
    keys = []
    for _ in range(max(count, 0)):
        keys.append(struct.unpack_from(">hhh", body, pos))
        pos += 6
        if version >= 3:
            pos = _skip_tagged_fields(body, pos)
    throttle = 0
    if version >= 1:
        (throttle,) = struct.unpack_from(">i", body, pos)
    return error_code, [(k, lo, hi) for k, lo, hi in keys], throttle


def encode_api_versions_body(
    error_code: int, keys: list[tuple[int, int, int]], throttle: int, version: int
) -> bytes:
    out = bytearray(struct.pack(">h", error_code))
    if version >= 3:
        out += _uvarint(len(keys) + 1)
    else:
        out += struct.pack(">i", len(keys))
    for key in keys:
        out += struct.pack(">hhh", *key)
        if version >= 3:
            out += b"\x00"
    if version >= 1:
        out += struct.pack(">i", throttle)
    if version >= 3:
        out += b"\x00"
    return bytes(out)


def cap_api_versions(
    body: bytes, version: int, release: str
) -> bytes:
    """The broker's ApiVersions response body as a broker of `release` would have sent it: only the
    release's keys, each range intersected with the real broker's, no tagged fields (2.6 had none)."""
    try:
        error_code, keys, throttle = parse_api_versions_body(body, version)
        body_version = version
    except (struct.error, IndexError):
        error_code, keys, throttle = parse_api_versions_body(body, 0)
        body_version = 0
    table = release_max_versions(release)
    capped = []
    for key, lo, hi in keys:
        if key in table:
            new_lo, new_hi = max(lo, _min_version(release, key)), min(hi, table[key])
            if new_lo <= new_hi:
                capped.append((key, new_lo, new_hi))
    return encode_api_versions_body(error_code, capped, throttle, body_version)


# --- the proxy ---------------------------------------------------------------------------------------


class Recorder:
    def __init__(self, out: IO[str], client_label: str) -> None:
        self._out = out
        self._client = client_label
        self.frames = 0

    def record(
        self, connection: int, direction: str, api_key: int, api_version: int, correlation_id: int, frame: bytes
    ) -> None:
        entry = {
            "client": self._client,
            "direction": direction,
            "api_key": api_key,
            "api_version": api_version,
            "correlation_id": correlation_id,
            "connection": connection,
            "hex": frame.hex(),
        }
        self._out.write(json.dumps(entry) + "\n")
        self._out.flush()
        self.frames += 1


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def _write_frame(writer: asyncio.StreamWriter, frame: bytes) -> None:
    writer.write(struct.pack(">i", len(frame)) + frame)


class CaptureProxy:
    def __init__(self, broker: tuple[str, int], recorder: Recorder, cap_release: str | None) -> None:
        self._broker = broker
        self._recorder = recorder
        self._cap_release = cap_release
        self._connection_ids = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()

    async def handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        connection = next(self._connection_ids)
        try:
            broker_reader, broker_writer = await asyncio.open_connection(*self._broker)
        except OSError as exc:
            print(f"capture: cannot reach broker: {exc}", file=sys.stderr)
            client_writer.close()
            return
        # correlation id -> (api_key, api_version) of requests still waiting for their response.
        pending: dict[int, tuple[int, int]] = {}
        upstream = asyncio.create_task(
            self._client_to_broker(connection, client_reader, client_writer, broker_writer, pending)
        )
        downstream = asyncio.create_task(self._broker_to_client(connection, broker_reader, client_writer, pending))
        for task in (upstream, downstream):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
        for task in (upstream, downstream):
            task.cancel()
        for writer in (client_writer, broker_writer):
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _client_to_broker(
        self,
        connection: int,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        broker_writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int]],
    ) -> None:
        while (frame := await _read_frame(client_reader)) is not None:
            api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
            self._recorder.record(connection, "request", api_key, api_version, correlation_id, frame)
            if api_key == API_VERSIONS and self._too_new_for_release(api_key, api_version):
                # The broker of the emulated release would not understand it: answer as it would.
                # The answer is ours, not the broker's, so it is not recorded as a fixture.
                response = struct.pack(">i", correlation_id) + self._unsupported_api_versions_body()
                _write_frame(client_writer, response)
                await client_writer.drain()
                continue
            pending[correlation_id] = (api_key, api_version)
            _write_frame(broker_writer, frame)
            await broker_writer.drain()

    async def _broker_to_client(
        self,
        connection: int,
        broker_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int]],
    ) -> None:
        while (frame := await _read_frame(broker_reader)) is not None:
            (correlation_id,) = struct.unpack_from(">i", frame, 0)
            request = pending.pop(correlation_id, None)
            if request is None:
                print(f"capture: response to unknown correlation id {correlation_id}", file=sys.stderr)
            else:
                api_key, api_version = request
                if api_key == API_VERSIONS and self._cap_release is not None:
                    # ApiVersions answers always use response header v0: the body starts at byte 4.
                    frame = frame[:4] + cap_api_versions(frame[4:], api_version, self._cap_release)
                self._recorder.record(connection, "response", api_key, api_version, correlation_id, frame)
            _write_frame(client_writer, frame)
            await client_writer.drain()

    def _too_new_for_release(self, api_key: int, api_version: int) -> bool:
        if self._cap_release is None:
            return False
        return api_version > release_max_versions(self._cap_release)[api_key]

    def _unsupported_api_versions_body(self) -> bytes:
        assert self._cap_release is not None
        # Since 2.4 (KIP-511) the error answer names ApiVersions' own range so the client can retry.
        own = [(API_VERSIONS, 0, release_max_versions(self._cap_release)[API_VERSIONS])]
        if RELEASES.index(self._cap_release) < RELEASES.index("2.4"):
            own = []
        return encode_api_versions_body(UNSUPPORTED_VERSION, own, 0, 0)


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


async def _serve(args: argparse.Namespace) -> int:
    cap = None if args.cap_release == "none" else args.cap_release
    with Path(args.out).open("a", encoding="utf-8") as out:
        recorder = Recorder(out, args.client_label)
        proxy = CaptureProxy(_host_port(args.broker), recorder, cap)
        host, port = _host_port(args.listen)
        server = await asyncio.start_server(proxy.handle, host, port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        set_stop: Callable[[], None] = stop.set
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, set_stop)
        bound = server.sockets[0].getsockname()
        print(f"capture: listening on {bound[0]}:{bound[1]} -> {args.broker}", file=sys.stderr, flush=True)
        async with server:
            await stop.wait()
        print(f"capture: recorded {recorder.frames} frames to {args.out}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", default="127.0.0.1:9092", help="proxy address the broker advertises")
    parser.add_argument("--broker", required=True, help="real broker's listener, host:port")
    parser.add_argument("--out", required=True, help="JSONL file frames are appended to")
    parser.add_argument("--client-label", required=True, help="stored in every frame's 'client' field")
    parser.add_argument(
        "--cap-release",
        default="2.6",
        choices=[*RELEASES, "none"],
        help="negotiate API versions as a broker of this Kafka release would (default 2.6)",
    )
    return asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
