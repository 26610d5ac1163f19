"""One client connection: size-prefixed frames in, responses out in request order.

Life of a request: the socket reads into our buffers (``get_buffer``/``buffer_updated``) and complete frames
are cut off (a size above ``socket.request.max.bytes``, or negative, closes the connection as soon as the four
size bytes arrive, before any body is buffered); the header is decoded, the handler for its API key looked up in the registry, the body
decoded, and the handler started as a task. Several requests of one connection may be handled at once (a
Fetch waiting in purgatory does not hold back the Metadata request behind it), but each request takes a slot
in a FIFO when it arrives and responses leave in slot order, as Kafka's protocol requires. Produce handlers
hand their appends to a single append thread in the order they start, and tasks start in the order they are
created, so the appends of one connection happen in request order. A Produce behind an unanswered acks=all
Produce of its connection starts only once that one is answered, as in Kafka, which handles a connection's
requests one at a time (what goes wrong otherwise is in ``_may_start``); reading stops while it waits.

Backpressure, both ways: when ``queued.max.requests`` requests are in flight, or the transport's write buffer
is above its high-water mark (a client not reading its responses), reading stops; it resumes when both have
drained. ``connections.max.idle.ms`` closes a connection with nothing in flight that has neither completed a
request nor been sent a response for that long: bytes trickling in without ever completing a frame (slowloris)
do not keep it open. A client that does not read its responses is closed once more than
``sofakafka.connection.max.response.backlog.bytes`` of them wait to be sent.

Memory per connection is bounded by what the client has actually sent: an idle connection holds no read
buffer (the small scratch buffer is taken when bytes arrive and given back when every request is answered), and
a large frame's buffer starts small and doubles as its bytes arrive, up to the size it announced (itself at
most ``socket.request.max.bytes``), so announcing a huge frame and sending a byte a second costs next to
nothing.

What closes a connection (logged with the peer and the reason, other connections are untouched; the
requests taken before the offending one are answered first): a frame that does not decode (the codec raises the ProtocolError family for any malformed bytes), an unknown API key,
a version of an API the codec does not know (Kafka does the same: the response could not be encoded). A known
API at a version we do not handle is answered with UNSUPPORTED_VERSION when the response body has a top-level
error code, and closes the connection otherwise. An ApiVersions request of an unknown version gets the KIP-511
answer. A handler may ask for the close itself (``RequestContext.close_connection``: a failed acks=0
Produce). Handler failures are turned into error responses here and only here.

Security. A TLS listener's connection arrives here after its handshake (server.py); its principal is the
mapped DN of the client's certificate, or ``User:ANONYMOUS``. On a SASL listener a
:class:`~sofakafka.security.sasl.SaslAuthenticator` guards the connection: until it is authenticated only
ApiVersions, SaslHandshake and SaslAuthenticate may come (anything else closes it, as Kafka does), frames are
limited to ``sasl.server.max.receive.size``, the whole login must finish within
``sofakafka.authentication.timeout.ms``, and after a SaslHandshake v0 the next frame is a bare token answered
with a bare token (no Kafka header). An expired KIP-368 session closes the connection at its next request.
The principal reaches every handler in :attr:`RequestContext.principal`.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import logging
import socket
import struct
import time
import types
from collections.abc import Awaitable, Coroutine, Generator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sofakafka.broker.client_quotas import REQUEST_QUOTA_EXEMPT, client_throttles
from sofakafka.broker.context import BrokerContext
from sofakafka.broker.handlers import HandlerSpec, RawResponse, RequestContext, lookup
from sofakafka.broker.handlers.api_versions import unsupported_version_response
from sofakafka.broker.listener_security import BrokerSecurity, ListenerSecurity
from sofakafka.broker.metrics import FETCH_CONSUMER, FETCH_FOLLOWER
from sofakafka.protocol.api import ApiKey, decode_request_body, response_type
from sofakafka.protocol.errors import ErrorCode, KafkaError, ProtocolError, UnsupportedVersionError
from sofakafka.protocol.headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    ResponseHeader,
    decode_request_header,
    response_header_version,
)
from sofakafka.protocol.schema import FieldSpec, Request, Response, in_range
from sofakafka.security.principal import ANONYMOUS, PrincipalMappingError
from sofakafka.security.quotas import REQUEST_PERCENTAGE
from sofakafka.security.sasl import IllegalSaslStateError, SaslAuthenticationError, SaslAuthenticator

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_SIZE = struct.Struct(">i")
_SCRATCH_BYTES = 32 * 1024
_LARGE_FRAME = 16 * 1024  # below this a partial frame waits in the scratch buffer, which always has room for it
_FIRST_FRAME_BUFFER = 64 * 1024  # a large frame's buffer starts at this (or its size) and doubles as bytes arrive
_EMPTY_VIEW = memoryview(b"")
# The order of activity across every connection of this process: a connection's last request or response takes the
# next number. Loop time cannot order them: uvloop's clock is cached per loop iteration at millisecond resolution, so
# connections active within the same millisecond tie and "least recently active" would pick one at random.
_ACTIVITY_ORDER = itertools.count(1)
_FETCH_KEY = int(ApiKey.FETCH)
_PRODUCE_KEY = int(ApiKey.PRODUCE)
_PRODUCE_KEY_BYTES = struct.pack(">h", _PRODUCE_KEY)  # a request frame starts with its API key


class ConnectionOwner(Protocol):
    """What a connection needs from the server that accepted it (sofakafka/broker/server.py's SocketServer):
    its limits, admission and departure, whether it is shutting down, the listeners' security (TLS principals,
    SASL logins) and the broker its handlers see."""

    broker: BrokerContext
    security: BrokerSecurity
    max_request_bytes: int
    max_inflight: int
    idle_seconds: float
    send_buffer_bytes: int
    receive_buffer_bytes: int
    write_buffer_high: int
    max_response_backlog: int
    shutting_down: bool

    def connection_opened(self, conn: KafkaConnection) -> bool: ...

    def connection_closed(self, conn: KafkaConnection) -> None: ...


@dataclass(slots=True)
class _Slot:
    """One request's place in the response order; ``chunks`` is None until its answer is ready."""

    correlation_id: int
    done: bool = False
    chunks: Sequence[bytes | bytearray | memoryview] | None = None
    acks_all: bool = False  # an acks=all Produce: later Produces wait for its answer (KafkaConnection._may_start)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: ConnectionOwner, listener_name: str, security_protocol: str,
                 listener: ListenerSecurity | None = None) -> None:
        self.server = server
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.listener = listener
        self.principal = ANONYMOUS
        self.sasl: SaslAuthenticator | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("?", 0)
        self._scratch: bytearray | None = None  # taken when bytes arrive (see the module doc)
        self._scratch_view = _EMPTY_VIEW
        self._scratch_end = 0
        self._frame: bytearray | None = None
        self._frame_view = _EMPTY_VIEW
        self._frame_filled = 0
        self._frame_size = 0
        self._ready_bytes = 0  # bytes of answers ready but waiting behind an earlier request's
        self._pending: collections.deque[_Slot] = collections.deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._reading = True
        self._write_paused = False
        self._closing = False
        self._close_when_drained = False
        self._closed = asyncio.get_running_loop().create_future()
        self._last_activity = 0.0
        self._activity_order = 0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._connection_state: dict[str, object] = {}
        self.requests_handled = 0
        # KIP-219: while a quota throttles this client the connection reads nothing (muted until this loop time).
        self._muted_until = 0.0
        self._unmute_timer: asyncio.TimerHandle | None = None
        # A client with a quota has its requests handled one at a time, as Kafka handles every connection's: the
        # next is read only once the last one's throttle is known (and, throttled, once the mute is over), so a
        # client with many requests in flight cannot get them all in before the first throttle (see _dispatch).
        self._one_at_a_time = False
        self._one_busy = False
        self._held: collections.deque[bytearray] = collections.deque()  # read but not started (_may_start)
        self._releasing = False
        self._acks_all_unanswered = 0
        self._metrics = server.broker.metrics

    # -- transport callbacks -------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport's methods without subclassing it.
        tr: asyncio.Transport = transport  # type: ignore[assignment]
        self.transport = tr
        peer = transport.get_extra_info("peername")
        if self.peer[0] == "?" and isinstance(peer, tuple) and len(peer) >= 2:  # else the server's accept set it
            self.peer = (str(peer[0]), int(peer[1]))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._tune_socket(sock)
        tr.set_write_buffer_limits(high=self.server.write_buffer_high)
        loop = asyncio.get_running_loop()
        self._last_activity = loop.time()
        self._activity_order = next(_ACTIVITY_ORDER)
        if not self.server.connection_opened(self):
            self._closing = True
            tr.close()
            return
        if self.server.idle_seconds > 0:
            self._idle_timer = loop.call_later(self.server.idle_seconds, self._check_idle)
        listener = self.listener
        if listener is None:
            return
        security = self.server.security
        if listener.uses_ssl:
            try:
                self.principal = security.certificate_principal(listener, transport.get_extra_info("ssl_object"))
            except PrincipalMappingError as exc:
                self.close_for(f"failed authentication: {exc}", drain=False)
                return
        if listener.uses_sasl:
            self.sasl = security.new_authenticator(listener)
            self._connection_state["sasl"] = self.sasl
            self._auth_timer = loop.call_later(security.authentication_timeout_s, self._check_authenticated)

    def _check_authenticated(self) -> None:
        self._auth_timer = None
        if self.sasl is not None and self.sasl.in_progress and not self._closing:
            self.close_for(f"SASL authentication not complete after "
                           f"{self.server.security.authentication_timeout_s * 1000:.0f} ms "
                           "(sofakafka.authentication.timeout.ms)", drain=False)

    def _tune_socket(self, sock: socket.socket) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.server.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.server.send_buffer_bytes)
            if self.server.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.server.receive_buffer_bytes)
        except OSError as exc:  # e.g. a Unix socket in tests: the options are only tuning
            log.debug("socket options not applied for %s: %s", self.peer, exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        self._pending.clear()
        self._frame = None
        self.server.connection_closed(self)
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    # -- reading frames -------------------------------------------------------------------------------------------
    # Small frames are cut out of a scratch buffer the socket reads into (one copy each). A frame of at least
    # _LARGE_FRAME bytes gets a buffer of its own and the socket reads the rest of it straight into it, so a 1 MB
    # produce is never accumulated and re-sliced on the event loop; that buffer grows as the frame arrives.
    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            if self._frame_filled == len(frame):
                grown = bytearray(min(self._frame_size, 2 * len(frame)))
                grown[: self._frame_filled] = frame
                self._frame = frame = grown
                self._frame_view = memoryview(grown)
            return self._frame_view[self._frame_filled:]
        if self._scratch is None:
            self._scratch = bytearray(_SCRATCH_BYTES)
            self._scratch_view = memoryview(self._scratch)
        return self._scratch_view[self._scratch_end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._closing or self._close_when_drained:
            return
        frame = self._frame
        if frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == self._frame_size:
                self._frame = None
                self._frame_view = _EMPTY_VIEW
                self._dispatch(frame)
            return
        self._scratch_end += nbytes
        self._cut_frames()

    def _cut_frames(self) -> None:
        buf = self._scratch
        assert buf is not None
        end = self._scratch_end
        max_bytes = self.server.max_request_bytes
        limit_key = "socket.request.max.bytes"
        if self.sasl is not None and self.sasl.in_progress:
            max_bytes, limit_key = min(max_bytes, self.server.security.max_receive_size), "sasl.server.max.receive.size"
        pos = 0
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > max_bytes:
                self.close_for(f"request frame of {size} bytes, {limit_key} is {max_bytes}",
                               drain=False)
                return
            if end - pos - 4 >= size:
                frame = buf[pos + 4 : pos + 4 + size]
                pos += 4 + size
                self._dispatch(frame)
                if self._closing or self._close_when_drained:
                    return
                continue
            if size >= _LARGE_FRAME:
                have = end - pos - 4
                frame = bytearray(min(size, max(_FIRST_FRAME_BUFFER, 2 * have)))
                frame[:have] = self._scratch_view[pos + 4 : end]
                self._frame = frame
                self._frame_view = memoryview(frame)
                self._frame_filled = have
                self._frame_size = size
                pos = end
            break
        # What is left is less than one small frame: move it to the front so the scratch never fills up.
        remaining = end - pos
        if remaining and pos:
            buf[:remaining] = self._scratch_view[pos:end]
        self._scratch_end = remaining
        self._maybe_release_scratch()

    def _maybe_release_scratch(self) -> None:
        """Give the scratch buffer back when nothing is in it and nothing is in flight: an idle connection
        (thousands of them) holds no read buffer."""
        if self._scratch_end == 0 and not self._pending and self._scratch is not None:
            self._scratch = None
            self._scratch_view = _EMPTY_VIEW

    # -- requests --------------------------------------------------------------------------------------------
    def _dispatch(self, frame: bytearray) -> None:
        # A complete request is what counts as activity for connections.max.idle.ms, not bytes that trickle in.
        self._last_activity = asyncio.get_running_loop().time()
        self._activity_order = next(_ACTIVITY_ORDER)
        if self._held or not self._may_start(frame):
            self._held.append(frame)  # its turn comes when the requests before it allow (see _may_start)
            self._update_reading()
            return
        self._dispatch_now(frame)

    def _may_start(self, frame: bytearray) -> bool:
        """Whether a request read now may start, given what the connection's earlier requests are doing.

        A client with a quota waits for the last request's throttle to be known and served. A Produce waits
        while an earlier acks=all Produce of the connection is unanswered, as in Kafka (which mutes a
        connection until its request is answered): it is checked against the producer's sequence numbers and
        the partition's leadership only once the one before it has its outcome. Started together, the second
        could be refused OUT_OF_ORDER_SEQUENCE_NUMBER while the first still waited for its replicas as
        leadership moved, which makes librdkafka bump its epoch and resend what may already be stored (a
        duplicate no broker can catch). An acks=1 or acks=0 Produce has its outcome at its append, and appends
        run in the order their requests started, so what follows it need not wait (and pipelined small
        produces keep their throughput)."""
        if self._one_at_a_time and (self._one_busy or self._unmute_timer is not None):
            return False
        if self._acks_all_unanswered and frame[:2] == _PRODUCE_KEY_BYTES:
            sasl = self.sasl
            return sasl is not None and sasl.expecting_raw_token  # a bare SASL token is not a request
        return True

    def _dispatch_now(self, frame: bytearray) -> None:
        sasl = self.sasl
        if sasl is not None and sasl.expecting_raw_token:
            self._raw_sasl_token(sasl, bytes(frame))
            return
        started = time.perf_counter()
        try:
            header, body_offset = decode_request_header(frame)
        except UnsupportedVersionError as exc:
            self.close_for(f"unsupported request: {exc}")
            return
        except ProtocolError as exc:
            self.close_for(f"malformed request header: {exc}")
            return
        key, version = header.request_api_key, header.request_api_version
        if sasl is not None:
            try:
                sasl.check_request(key, _now_ms())
            except IllegalSaslStateError as exc:
                self.close_for(f"{exc} ({_api_name(key)} v{version})")
                return
        spec = lookup(key)
        if spec is None or not spec.accepts(version):
            if key == API_VERSIONS_KEY:
                self._answer_now(header, unsupported_version_response(), 0)
            else:
                self._answer_unsupported(header)
            return
        try:
            body = decode_request_body(header, frame, body_offset)
        except UnsupportedVersionError as exc:
            if key == API_VERSIONS_KEY:
                self._answer_now(header, unsupported_version_response(), 0)
            else:
                self.close_for(f"unsupported request: {exc}")
            return
        except ProtocolError as exc:
            self.close_for(f"malformed {_api_name(key)} v{version} request: {exc}")
            return
        slot = _Slot(header.correlation_id)
        if key == _PRODUCE_KEY and getattr(body, "acks", 0) == -1:
            slot.acks_all = True
            self._acks_all_unanswered += 1
        self._pending.append(slot)
        self.requests_handled += 1
        fetch_kind = None
        if key == _FETCH_KEY:
            fetch_kind = FETCH_FOLLOWER if getattr(body, "replica_id", -1) >= 0 else FETCH_CONSUMER
        ctx = RequestContext(
            header=header,
            broker=self.server.broker,
            listener_name=self.listener_name,
            security_protocol=self.security_protocol,
            client_host=self.peer[0],
            client_port=self.peer[1],
            principal=sasl.principal or ANONYMOUS if sasl is not None else self.principal,
            token_authenticated=sasl is not None and sasl.token_authenticated,
            connection_state=self._connection_state,
            close_connection=self.close_for,
            request_size=len(frame) + 4,
        )
        task = asyncio.get_running_loop().create_task(self._run(spec, ctx, body, slot, started, fetch_kind))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._one_at_a_time = self.server.broker.client_quotas.has_quota(ctx.principal, ctx.client_id)
        if self._one_at_a_time:
            self._one_busy = True
            task.add_done_callback(self._one_done)
        self._update_reading()

    def _one_done(self, _: object) -> None:
        self._one_busy = False
        self._release_held()

    def _release_held(self) -> None:
        """Start the requests held back, in the order they came, as far as _may_start lets them."""
        if self._releasing:
            return  # a request started below was answered at once: the loop that started it goes on
        self._releasing = True
        try:
            while self._held and not self._closing and self._may_start(self._held[0]):
                self._dispatch_now(self._held.popleft())
        finally:
            self._releasing = False
        self._update_reading()

    def _raw_sasl_token(self, sasl: SaslAuthenticator, token: bytes) -> None:
        """SaslHandshake v0 framing: a bare token in, a bare token out; a failure just closes (v0 cannot say)."""
        slot = _Slot(-1)
        self._pending.append(slot)
        try:
            answer = sasl.authenticate(token, _now_ms())
        except SaslAuthenticationError as exc:
            self._pending.remove(slot)
            self._fail_login_later(exc.detail)
            return
        except IllegalSaslStateError as exc:
            self._pending.remove(slot)
            self.close_for(str(exc))
            return
        self._finish(slot, [_SIZE.pack(len(answer)) + answer])

    def _fail_login_later(self, detail: str) -> None:
        """A failed login closes after ``connection.failed.authentication.delay.ms``, reading nothing more."""
        self._close_when_drained = True
        self._update_reading()
        delay = self.server.security.failed_authentication_delay_s
        asyncio.get_running_loop().call_later(
            delay, functools.partial(self.close_for, f"failed authentication: {detail}", drain=False))

    async def _run(self, spec: HandlerSpec, ctx: RequestContext, body: Request, slot: _Slot, started: float,
                   fetch_kind: str | None) -> None:
        """Handle one request into its slot; its total time (frame received to answer ready, Kafka's
        TotalTimeMs less the wait behind earlier answers) counts in the broker's request metrics."""
        try:
            header = ctx.header
            result: Response | RawResponse | None
            try:
                result = await _timed(spec.handler(ctx, body), ctx.handler_seconds)
            except KafkaError as exc:
                log.info("%s v%d from %s failed with %s: %s", _api_name(ctx.api_key), ctx.api_version, self.peer,
                         exc.code.name, exc.message)
                self._metrics.record_error(ctx.api_key, exc.code.name)
                result = _error_response(spec, body, ctx.api_version, exc.code)
                if result is None:
                    self._finish(slot, None)
                    self.close_for(f"{_api_name(ctx.api_key)} failed with {exc.code.name} and its response cannot say so")
                    return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("unexpected error handling %s v%d from %s", _api_name(ctx.api_key), ctx.api_version,
                              self.peer)
                self._metrics.record_error(ctx.api_key, ErrorCode.UNKNOWN_SERVER_ERROR.name)
                result = _error_response(spec, body, ctx.api_version, ErrorCode.UNKNOWN_SERVER_ERROR)
                if result is None:
                    self._finish(slot, None)
                    self.close_for(f"{_api_name(ctx.api_key)} failed and its response cannot carry an error")
                    return
            self._apply_request_quota(ctx, result)
            throttle_ms = ctx.throttle_ms
            if throttle_ms > 0:
                self._mute_for(throttle_ms)
                if result is not None and not client_throttles(ctx.api_key, ctx.api_version):
                    # A client from before KIP-219 does not throttle itself: the broker holds the response back.
                    await asyncio.sleep(throttle_ms / 1000)
            if result is None:
                self._finish(slot, None)
                return
            try:
                chunks = self._encode(header, result)
            except ProtocolError:
                log.exception("cannot encode the %s v%d response for %s", _api_name(ctx.api_key), ctx.api_version,
                              self.peer)
                self._finish(slot, None)
                self.close_for("response could not be encoded")
                return
            self._finish(slot, chunks)
        finally:
            self._metrics.record_request(ctx.api_key, ctx.api_version, (time.perf_counter() - started) * 1000.0,
                                         fetch_kind)

    def _apply_request_quota(self, ctx: RequestContext, result: Response | RawResponse | None) -> None:
        """Record the request's handling time against the request-time quota (KIP-124), unless the handler did
        (Produce, Fetch) or the API is exempt, and put the throttle time into the response."""
        quotas = self.server.broker.client_quotas
        if not ctx.quota_done and ctx.api_key not in REQUEST_QUOTA_EXEMPT:
            throttle = quotas.record_request_time(ctx.principal, ctx.client_id, ctx.handler_seconds[0])
            quotas.throttle(REQUEST_PERCENTAGE, ctx.principal, ctx.client_id, throttle)
            ctx.throttle_ms = max(ctx.throttle_ms, throttle)
        if ctx.throttle_ms > 0 and isinstance(result, Response):
            spec = _throttle_field(type(result))
            if spec is not None and in_range(ctx.api_version, spec.versions):
                result.throttle_time_ms = max(result.throttle_time_ms, ctx.throttle_ms)  # type: ignore[attr-defined]
        elif ctx.throttle_ms > 0 and isinstance(result, RawResponse) and result.throttle_time_at is not None:
            first = result.chunks[0]
            assert isinstance(first, bytearray)
            at = result.throttle_time_at
            (current,) = _SIZE.unpack_from(first, at)
            _SIZE.pack_into(first, at, max(current, ctx.throttle_ms))

    def _mute_for(self, throttle_ms: int) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        self._unmute_timer = loop.call_at(until, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        self._unmute_timer = None
        self._release_held()

    def _encode(self, header: RequestHeader, result: Response | RawResponse, version: int | None = None
                ) -> Sequence[bytes | bytearray | memoryview]:
        key = header.request_api_key
        v = header.request_api_version if version is None else version
        out = bytearray(4)
        ResponseHeader(correlation_id=header.correlation_id).encode_into(out, response_header_version(key, v))
        if isinstance(result, RawResponse):
            _SIZE.pack_into(out, 0, len(out) - 4 + result.size)
            return [out, *result.chunks]
        result.encode_into(out, v)
        _SIZE.pack_into(out, 0, len(out) - 4)
        return [out]

    def _answer_now(self, header: RequestHeader, body: Response, version: int) -> None:
        slot = _Slot(header.correlation_id)
        self._pending.append(slot)
        self._finish(slot, self._encode(header, body, version))

    def _answer_unsupported(self, header: RequestHeader) -> None:
        name = _api_name(header.request_api_key)
        body = _top_level_error_response(header.request_api_key, ErrorCode.UNSUPPORTED_VERSION)
        if body is None:
            self.close_for(f"{name} v{header.request_api_version} is not supported and its response cannot say so")
            return
        try:
            chunks = self._encode(header, body)
        except ProtocolError:
            self.close_for(f"{name} v{header.request_api_version} is not supported and this version's response "
                           "cannot say so")
            return
        log.info("answering UNSUPPORTED_VERSION to %s v%d from %s", name, header.request_api_version, self.peer)
        slot = _Slot(header.correlation_id)
        self._pending.append(slot)
        self._finish(slot, chunks)

    def _finish(self, slot: _Slot, chunks: Sequence[bytes | bytearray | memoryview] | None) -> None:
        slot.done = True
        slot.chunks = chunks
        release = False
        if slot.acks_all:
            self._acks_all_unanswered -= 1
            release = not self._acks_all_unanswered and bool(self._held)
        if self._closing or self.transport is None:
            return
        pending = self._pending
        out: list[bytes | bytearray | memoryview] = []
        while pending and pending[0].done:
            head = pending.popleft()
            if head.chunks:
                out.extend(head.chunks)
                if head is not slot:
                    self._ready_bytes -= sum(len(c) for c in head.chunks)
        if pending and chunks and not out:
            self._ready_bytes += sum(len(c) for c in chunks)
        if out:
            self._last_activity = asyncio.get_running_loop().time()
            self._activity_order = next(_ACTIVITY_ORDER)
            if len(out) == 1:
                self.transport.write(out[0])
            else:
                self.transport.writelines(out)
        backlog = self._ready_bytes + self.transport.get_write_buffer_size()
        if backlog > self.server.max_response_backlog:
            self.close_for(f"{backlog} bytes of responses wait to be sent (the client is not reading them), "
                           f"sofakafka.connection.max.response.backlog.bytes is {self.server.max_response_backlog}",
                           drain=False)
            return
        if self._close_when_drained and not pending:
            self.close()
            return
        if not pending:
            self._maybe_release_scratch()
        if release:
            self._release_held()
            return
        self._update_reading()

    # -- flow control, idleness, closing -------------------------------------------------------------------------
    def _update_reading(self) -> None:
        if self.transport is None or self._closing:
            return
        too_many = len(self._pending) >= self.server.max_inflight
        muted = self._unmute_timer is not None
        one_waits = bool(self._held) or (self._one_at_a_time and self._one_busy)
        want = (not self._write_paused and not too_many and not self.server.shutting_down
                and not self._close_when_drained and not muted and not one_waits)
        if want and not self._reading:
            self._reading = True
            self.transport.resume_reading()
        elif not want and self._reading:
            self._reading = False
            self.transport.pause_reading()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def last_activity(self) -> float:
        """Loop time of the last complete request or response written (what connections.max.idle.ms measures)."""
        return self._last_activity

    @property
    def activity_order(self) -> int:
        """Where its last activity (the same events as ``last_activity``) falls among every connection's: the
        larger, the more recent, never tied, so the least recently active connection is always one definite one."""
        return self._activity_order

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self._closing:
            return
        loop = asyncio.get_running_loop()
        idle = self.server.idle_seconds
        if self._pending:
            self._idle_timer = loop.call_later(idle, self._check_idle)
            return
        elapsed = loop.time() - self._last_activity
        if elapsed >= idle:
            log.info("closing idle connection from %s after %.0f ms (connections.max.idle.ms)", self.peer,
                     elapsed * 1000)
            self.close()
            return
        self._idle_timer = loop.call_later(idle - elapsed, self._check_idle)

    def close_for(self, reason: str, *, drain: bool = True) -> None:
        """Close because of ``reason`` (logged). With ``drain`` the requests taken before the bad one are
        answered first, as Kafka, which handles a connection's requests one at a time, would have answered them
        before reading further; a frame size that cannot be trusted closes at once."""
        log.warning("closing connection from %s:%d on %s: %s", self.peer[0], self.peer[1], self.listener_name,
                    reason)
        if drain and self._pending and not self._closing:
            self._close_when_drained = True
            self._update_reading()
            return
        self.close()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    def stop_reading(self) -> None:
        """Shutdown: take no new requests; the ones in flight still get their answers."""
        self._update_reading()

    async def drained(self) -> None:
        """Wait until every request taken so far has been answered (or the connection closed)."""
        while self._pending and not self._closing:
            tasks = list(self._tasks)
            if not tasks:
                break
            await asyncio.wait(tasks)

    async def wait_closed(self) -> None:
        await self._closed


@types.coroutine
def _timed(coro: Awaitable[_T], seconds: list[float]) -> Generator[object, object, _T]:
    """Drive ``coro`` step by step, adding the time each step runs on the loop to ``seconds[0]``: a request's
    handling time without its waits (purgatory, worker threads), what Kafka's request-time quota measures."""
    assert isinstance(coro, Coroutine), "handlers are coroutines"
    send: object = None
    error: BaseException | None = None
    clock = time.perf_counter
    while True:
        start = clock()
        try:
            yielded = coro.throw(error) if error is not None else coro.send(send)
        except StopIteration as done:
            seconds[0] += clock() - start
            result: _T = done.value
            return result
        except BaseException:
            seconds[0] += clock() - start
            raise
        seconds[0] += clock() - start
        error = None
        try:
            send = yield yielded
        except BaseException as exc:  # noqa: BLE001 - passed on into the coroutine, as await does
            error, send = exc, None


def _throttle_field(cls: type[Response]) -> FieldSpec | None:
    for spec in cls.fields():
        if spec.name == "throttle_time_ms":
            return spec
    return None


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _api_name(api_key: int) -> str:
    try:
        return response_type(api_key).__name__.removesuffix("Response")
    except UnsupportedVersionError:
        return f"API {api_key}"


def _error_response(spec: HandlerSpec, request: Request, version: int, code: ErrorCode) -> Response | None:
    """What Kafka's getErrorResponse answers: ``code`` for every partition or resource of the request."""
    if spec.error_response is not None:
        return spec.error_response(request, version, int(code))
    return _top_level_error_response(spec.api_key, code)


def _top_level_error_response(api_key: int, code: ErrorCode) -> Response | None:
    """A body that says ``code`` for the whole request, if the response has a top-level error code."""
    cls = response_type(api_key)
    if "error_code" not in getattr(cls, "__dataclass_fields__", {}):
        return None
    return cls(error_code=int(code))  # type: ignore[call-arg]
