"""Comparing one broker's answers with another's, field by field, after normalising what legitimately differs.

A :class:`Session` sends requests (our codec, raw frames on one socket) to one broker and records every
exchange under a label. A scenario is a function of a session; run once against sofakafka and once against
Apache Kafka 2.6, it gives two lists of exchanges, which :func:`differences` walks side by side.

What is normalised away (never a difference, see docs/compatibility.md "What the comparison ignores"):
throttle times, broker hosts and ports, the cluster id, fetch session ids, producer ids, the random part of
member ids, log dir paths, the text of error messages (whether there is one is compared), and the order of
lists that are sets (SaslHandshake's mechanisms, an ACL resource's entries). Lists are
keyed by their identifying field (topic name, partition index, config name, api key, ...) so order does
not matter and a path reads ``topics[t].partitions[0].error_code``.

Every other difference must be accepted by a row of the one table in docs/compatibility.md; the rows are
read from there (between the ``accepted-differences`` markers), so the table is the single source.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sofakafka.client.security import ClientSecurity, SaslLogin
from sofakafka.protocol.api import ApiKey, decode_response, encode_request, size_prefixed
from sofakafka.protocol.headers import RequestHeader
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sofakafka.protocol.records import decode_records, iter_batches
from sofakafka.protocol.schema import Request, Response, Struct, in_range

REPO = Path(__file__).resolve().parents[2]
COMPATIBILITY_DOC = REPO / "docs" / "compatibility.md"

# Identifying fields of list elements, in order of preference.
_KEYS = ("name", "topic", "resource_name", "group_id", "api_key", "partition_index", "partition_id", "log_dir",
         "partition", "batch_index", "node_id", "key")
# Lists that are sets: their order means nothing (an ACL resource's entries, the ACLs a DeleteAcls filter matched,
# the components of a client quota entity, which Kafka lists in its hash map's order).
_SETS = ("acls", "matching_acls", "entity")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ABSENT = "<absent>"


class Message(str):
    """An error message: any text equals any other text (their wording is not compared, whether there is one
    is), but the text is kept so a report shows it."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return 0


@dataclass
class Exchange:
    label: str
    api_key: int
    version: int
    response: Any  # the normalised, plain form


@dataclass
class Session:
    """One connection to one broker; ``call`` records, ``ask`` does not (set-up and waiting). With ``login``
    (a SASL listener) every new connection first logs in as our client does (client/security.py), unrecorded.
    Sessions of one run may share one ``exchanges`` list, so one comparison spans several users."""

    host: str
    port: int
    exchanges: list[Exchange] = field(default_factory=list)
    login: ClientSecurity | None = None
    _sock: socket.socket | None = None
    _correlation: int = 0

    def _socket(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=60)
            if self.login is not None:
                login = SaslLogin(self.login, f"{self.host}:{self.port}")
                request: Request | None = login.first_request()
                try:
                    while request is not None:
                        request = login.next_request(self._round_trip(sock, request, 1))
                except BaseException:
                    sock.close()  # a refused login leaves no socket behind
                    raise
            self._sock = sock
        return self._sock

    def ask(self, request: Request, version: int) -> Response:
        return self._round_trip(self._socket(), request, version)

    def _round_trip(self, s: socket.socket, request: Request, version: int) -> Response:
        self._correlation += 1
        header = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                               correlation_id=self._correlation, client_id="conformance")
        s.sendall(size_prefixed(encode_request(header, request)))
        frame = _recv_frame(s)
        resp_header, response = decode_response(frame, request.API_KEY, version)
        assert resp_header.correlation_id == self._correlation
        return response

    def note(self, label: str, api_key: int, version: int, observed: Any) -> None:
        """Record what a scenario observed itself (a part of an answer that only its meaning can compare)."""
        self.exchanges.append(Exchange(label, api_key, version, normalise(observed)))

    def token(self, label: str, api_key: int, version: int, token: bytes) -> bytes | None:
        """A bare SASL token after a SaslHandshake v0 (size-prefixed, no Kafka header): records the answer's
        size, or that the broker closed the connection."""
        answer = self._exchange_frame(token)
        self.note(label, api_key, version, "<closed>" if answer is None else {"token_bytes": len(answer)})
        return answer

    def call(self, label: str, request: Request, version: int) -> Response:
        response = self.ask(request, version)
        self.exchanges.append(Exchange(label, request.API_KEY, version, normalise(plain(response, version))))
        return response

    def call_or_closed(self, label: str, request: Request, version: int) -> Response | None:
        """``call`` for a request a broker may answer by closing the connection (recorded as ``<closed>``;
        the next call reconnects)."""
        try:
            return self.call(label, request, version)
        except (ConnectionError, OSError):
            self.close()
            self.exchanges.append(Exchange(label, request.API_KEY, version, "<closed>"))
            return None

    def _exchange_frame(self, payload: bytes) -> bytes | None:
        """One size-prefixed frame out and one back; None when the broker closed the connection instead (the
        next call reconnects)."""
        s = self._socket()
        s.sendall(struct.pack(">i", len(payload)) + payload)
        try:
            return _recv_frame(s)
        except (ConnectionError, OSError):
            self.close()
            return None

    def raw(self, label: str, api_key: int, version: int, body: bytes) -> bytes | None:
        """A hand-made frame (a corrupt or unsupported one); records what came back, or that the broker
        closed the connection (then reconnects for the next call)."""
        self._correlation += 1
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=self._correlation, client_id="conformance")
        from sofakafka.protocol.headers import encode_request_header
        frame = self._exchange_frame(bytes(encode_request_header(header)) + body)
        self.exchanges.append(Exchange(label, api_key, version,
                                       "<closed>" if frame is None else {"frame_bytes_after_correlation": len(frame) - 4,
                                                                         "head": frame[4:6].hex()}))
        return frame

    def wait(self, what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.host}:{self.port}: timed out waiting for {what}")
            time.sleep(0.05)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def advertised_by(host: str, port: int) -> dict[int, tuple[int, int]]:
    """What a broker's ApiVersions v3 advertises: key -> (min, max)."""
    s = Session(host, port)
    try:
        r = s.ask(ApiVersionsRequest(client_software_name="conformance", client_software_version="1"), 3)
    finally:
        s.close()
    assert isinstance(r, ApiVersionsResponse) and r.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def _recv_frame(s: socket.socket) -> bytes:
    head = _recv(s, 4)
    (size,) = struct.unpack(">i", head)
    return _recv(s, size)


def _recv(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def plain(value: Any, version: int, name: str = "") -> Any:
    """A decoded struct as nested dicts/lists of primitives, with only the fields that exist at ``version``."""
    if isinstance(value, Struct):
        out: dict[str, Any] = {}
        for spec in type(value).fields():
            if in_range(version, spec.versions) or in_range(version, spec.tagged):
                out[spec.name] = plain(getattr(value, spec.name), version, spec.name)
        return out
    if isinstance(value, list):
        return [plain(v, version, name) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        if name == "records":
            return _records(data)
        return data.hex()
    return value


def _records(data: bytes) -> Any:
    """A fetched records blob as batches and records (so a difference names the field, not a byte).

    A control batch (a transaction's COMMIT/ABORT marker) is stamped with the writing broker's clock, and its
    CRC covers that stamp: both are shown as ``<broker clock>``; its offsets, producer and records are compared.
    The CRC of any other batch with a producer id covers that id, which each broker hands out itself: shown as
    ``<covers the producer id>`` (the producer id itself is normalised like every other)."""
    out = []
    try:
        for h in iter_batches(data):
            control = h.magic >= 2 and h.is_control
            clock = (lambda value: "<broker clock>") if control else (lambda value: value)
            crc = clock(h.crc) if control or h.producer_id < 0 else "<covers the producer id>"
            out.append({
                "base_offset": h.base_offset, "last_offset": h.last_offset, "magic": h.magic,
                "crc": crc, "compression": h.compression, "timestamp_type": h.timestamp_type,
                "max_timestamp": clock(h.max_timestamp), "producer_id": h.producer_id,
                "transactional": h.magic >= 2 and h.is_transactional, "control": control,
                "partition_leader_epoch": h.partition_leader_epoch, "count": h.record_count, "size": h.size,
                "records": [{"offset": r.offset, "timestamp": clock(r.timestamp), "key": r.key, "value": r.value,
                             "headers": r.headers} for r in decode_records(data, h)],
            })
    except Exception as exc:  # noqa: BLE001 - a partial trailing batch is shown as what it is
        out.append({"undecodable": repr(exc)})
    trailing = len(data) - sum(b.get("size", 0) for b in out)
    if trailing:
        out.append({"partial_trailing_bytes": trailing})
    return out


def normalise(value: Any, name: str = "") -> Any:
    if name == "mechanisms" and isinstance(value, list):
        return sorted(value)  # a set: Kafka lists SaslHandshake's mechanisms in its hash map's order
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [normalise(v, name) for v in value]
        if name in _SETS:
            return sorted(items, key=repr)
        if name == "entries" and items and all(isinstance(i, dict) and "entity" in i for i in items):
            return sorted(items, key=lambda i: repr(i["entity"]))  # client quota entries: a map in Kafka
        if items and all(isinstance(i, dict) for i in items):
            key = next((k for k in _KEYS if all(k in i for i in items)), None)
            if key is not None and len({str(i[key]) for i in items}) == len(items):
                return {f"[{i[key]}]": i for i in items}
        return items
    if name == "throttle_time_ms":
        return 0
    if name in ("host", "client_host") and isinstance(value, str):
        return "<host>"
    if name == "port":
        return "<port>"
    if name == "cluster_id" and value is not None:
        return "<cluster>"
    if name == "session_id" and value:
        return "<session>"
    if name == "producer_id" and isinstance(value, int) and value >= 0:
        return "<pid>"
    if name in ("error_message", "batch_index_error_message") and value is not None:
        return Message(value)
    if name == "log_dir":
        return "<dir>"
    if isinstance(value, str):
        return _UUID.sub("<uuid>", value)
    return value


def differences(ours: Any, theirs: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for k in list(ours) + [k for k in theirs if k not in ours]:
            sub = f"{path}{k}" if k.startswith("[") else (f"{path}.{k}" if path else k)
            yield from differences(ours.get(k, ABSENT), theirs.get(k, ABSENT), sub)
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            yield from differences(a, b, f"{path}[{i}]")
    elif ours != theirs:
        yield path, ours, theirs


@dataclass(frozen=True)
class Accepted:
    row: str
    api: str
    versions: str
    case: str
    path: str
    ours: str
    kafka: str
    reason: str

    def matches(self, api: str, version: int, case: str, path: str, ours: Any, kafka: Any) -> bool:
        lo, _, hi = self.versions.partition("-")
        if self.versions != "*" and not int(lo) <= version <= int(hi or lo):
            return False
        return (self.api == api and _glob(self.case, case) and _glob(self.path, path)
                and _cell(self.ours, ours) and _cell(self.kafka, kafka))


def _glob(pattern: str, text: str) -> bool:
    """``*`` is the only wildcard (brackets in paths are literal, unlike fnmatch's)."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), text) is not None


def _cell(cell: str, value: Any) -> bool:
    """A table cell matches a value: ``*`` anything, ``<message>`` any error message, else the value's text."""
    if cell == "*":
        return True
    if cell == "<message>":
        return isinstance(value, Message)
    return cell == _text(value)


def _text(value: Any) -> str:
    if isinstance(value, Message):
        return f"<message: {str.__str__(value)}>"
    return value if isinstance(value, str) else repr(value)


def accepted_differences(doc: Path = COMPATIBILITY_DOC) -> list[Accepted]:
    """The rows of the accepted-differences table in docs/compatibility.md."""
    text = doc.read_text()
    start = text.index("<!-- accepted-differences:start -->")
    end = text.index("<!-- accepted-differences:end -->")
    rows = []
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 8 or not cells[0].isdigit():
            continue
        row, api, versions, case, path, ours, kafka, reason = (c.strip("`") if i < 7 else c
                                                               for i, c in enumerate(cells))
        rows.append(Accepted(row, api, versions, case, path, ours, kafka, reason))
    return rows


def keys_not_advertised_yet(doc: Path = COMPATIBILITY_DOC) -> dict[int, str]:
    """The table of docs/compatibility.md listing Kafka 2.6's keys sofakafka does not advertise: key -> the
    issue (or reason) in its last column."""
    text = doc.read_text()
    start = text.index("## Keys sofakafka does not advertise yet")
    end = text.index("\n## ", start + 1)
    keys: dict[int, str] = {}
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0][:1].isdigit():
            continue
        for key in cells[0].split(","):
            keys[int(key)] = cells[2]
    return keys


def compare(ours: list[Exchange], theirs: list[Exchange], accepted: list[Accepted]) -> tuple[list[str], set[str]]:
    """Unaccepted differences as readable lines, and the accepted rows that were used."""
    problems: list[str] = []
    used: set[str] = set()
    assert [(e.label, e.api_key, e.version) for e in ours] == [(e.label, e.api_key, e.version) for e in theirs]
    for a, b in zip(ours, theirs, strict=True):
        api = ApiKey(a.api_key).name
        for path, x, y in differences(a.response, b.response):
            row = next((r for r in accepted if r.matches(api, a.version, a.label, path, x, y)), None)
            if row is None:
                problems.append(f"{api} v{a.version} [{a.label}] {path}: sofakafka={_text(x)!s:.300} kafka={_text(y)!s:.300}")
            else:
                used.add(row.row)
    return problems, used
