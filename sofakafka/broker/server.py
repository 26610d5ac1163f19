"""The listeners: one accept loop per ``listeners`` entry, each connection a :class:`KafkaConnection`.

Every security protocol is served: PLAINTEXT as it is; SSL and SASL_SSL connections go through a TLS
handshake first (``loop.connect_accepted_socket`` with the context, in a task of its own so a slow handshake
does not hold up the accept loop, bounded by ``sofakafka.authentication.timeout.ms``; a failed handshake is
logged with its reason and closes that socket alone), then become a :class:`KafkaConnection` like any other;
SASL_* connections authenticate before anything else (see connection.py). The settings of each listener come
from :mod:`sofakafka.broker.listener_security`, checked before any port is bound.

Only PLAINTEXT is served for now; the listener names, the protocol map and ``advertised.listeners`` are
parsed in full (KafkaConfig), so SSL and SASL_* listeners will plug in here by wrapping the transport. A
listener of another protocol stops start-up naming it rather than silently serving plaintext on it.

A listener on port 0 binds an ephemeral port (tests); the bound port is what gets advertised when the
advertised listener also says 0. A listener bound to every interface advertises the machine's host name,
as Kafka does.

Connection limits, as Kafka's acceptor and ConnectionQuotas apply them (every refusal is logged with its
reason; the connections already open are served as before):

* ``max.connections``: at the limit a listener stops accepting, so new clients wait in the TCP backlog until a
  connection closes, and it resumes by itself. The inter-broker listener of a broker with several listeners is
  protected: it accepts anyway, and the least recently active connection of another listener is closed to make
  room, so replication and the controller never lock themselves out.
* ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``: a connection over its address's limit is
  accepted and closed at once.
* A TLS handshake in progress counts as a connection (of its address and of the broker) from its accept on, so a
  flood of unfinished handshakes cannot get around the limits.
* Running out of descriptors (EMFILE/ENFILE on accept): the listener logs it, pauses accepting for a moment and
  tries again; nothing else is affected.

The accept loop is ours (``sock_accept`` + ``connect_accepted_socket``) rather than the event loop's server,
whose accepting cannot be paused: that is what "stops accepting at the limit" needs.

Shutdown (``stop_accepting`` then ``drain`` then ``close_connections``): listening sockets close first, every
connection stops reading, the requests already taken are answered, then the connections close.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import time

from sofakafka.broker.bound_listener import BoundListener
from sofakafka.broker.config import (
    ConfigError,
    EndPoint,
    KafkaConfig,
    SecurityProtocol,
    parse_connection_overrides,
)
from sofakafka.broker.connection import KafkaConnection
from sofakafka.broker.context import BrokerContext
from sofakafka.broker.listener_security import BrokerSecurity, ListenerSecurity

log = logging.getLogger(__name__)

SUPPORTED_PROTOCOLS = tuple(SecurityProtocol)
# After accept fails for want of descriptors (or memory), wait this long before the next attempt.
ACCEPT_BACKOFF_S = 0.5
# A refusal repeated within this many seconds is counted, not logged again.
REFUSAL_LOG_INTERVAL_S = 10.0
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class SocketServer:
    """Every listener's sockets and connections; a connection reaches the broker through ``broker``."""

    def __init__(self, broker: BrokerContext, config: KafkaConfig, security: BrokerSecurity) -> None:
        self.broker = broker
        self.config = config
        self.security = security
        # TLS handshakes in progress (each counted against the limits from its accept on).
        self._handshakes: set[asyncio.Task[None]] = set()
        self.max_request_bytes = config.get_int("socket.request.max.bytes")
        self.max_inflight = config.get_int("queued.max.requests")
        self.idle_seconds = config.get_int("connections.max.idle.ms") / 1000.0
        self.send_buffer_bytes = config.get_int("socket.send.buffer.bytes")
        self.receive_buffer_bytes = config.get_int("socket.receive.buffer.bytes")
        # Responses may be large (a Fetch of 50 MB): pausing reads above a few MB of unsent data keeps a
        # client that does not read from growing our memory without bound.
        self.write_buffer_high = 4 * 1024 * 1024
        self.max_response_backlog = config.get_int("sofakafka.connection.max.response.backlog.bytes")
        self.max_connections = config.get_int("max.connections")
        self.max_connections_per_ip = config.get_int("max.connections.per.ip")
        self._per_ip_overrides = _resolve_overrides(
            parse_connection_overrides("max.connections.per.ip.overrides",
                                       config.get_str("max.connections.per.ip.overrides")))
        # Admitted connections, counted from their accept (a TLS handshake in progress included) to their close.
        self._per_ip: dict[str, int] = {}
        self._admitted = 0
        self.inter_broker_listener = config.inter_broker_listener_name
        self._protected = len(config.listeners) > 1
        self.shutting_down = False
        self.listeners: list[BoundListener] = []
        self._sockets: list[tuple[EndPoint, socket.socket]] = []
        self._accepting: list[asyncio.Task[None]] = []
        self._slot_freed = asyncio.Event()
        self._last_logged: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        #: Connections refused (per-ip limits) or waited for (max.connections), for tests and operators.
        self.refused = 0
        self.waits_for_a_slot = 0
        self.connections: set[KafkaConnection] = set()

    async def start(self) -> list[BoundListener]:
        endpoints = self.config.listeners
        for e in endpoints:
            if e.security_protocol not in SUPPORTED_PROTOCOLS:
                raise ConfigError("listeners", f"listener {e.listener_name} uses {e.security_protocol.value}, "
                                               "which this broker does not serve")
        self.security.configure()
        advertised = {e.listener_name: e for e in self.config.advertised_listeners}
        try:
            for e in endpoints:
                sock = _listening_socket(e.host or None, e.port)
                self._sockets.append((e, sock))
                port = sock.getsockname()[1]
                self.listeners.append(self._bound(e, port, advertised.get(e.listener_name)))
        except OSError as exc:
            await self.stop_accepting()
            raise ConfigError("listeners", f"cannot listen: {exc.strerror or exc}") from exc
        return self.listeners

    async def start_serving(self) -> None:
        """Accept connections (bound in ``start``, held back until the broker is ready to answer)."""
        loop = asyncio.get_running_loop()
        for e, sock in self._sockets:
            self._accepting.append(loop.create_task(self._accept_loop(e, sock), name=f"accept-{e.listener_name}"))

    # -- accepting ------------------------------------------------------------------------------------------------
    def _protected_listener(self, listener_name: str) -> bool:
        return self._protected and listener_name == self.inter_broker_listener

    def _slot_available(self, protected: bool) -> bool:
        return protected or self._admitted < self.max_connections

    async def _accept_loop(self, endpoint: EndPoint, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        name = endpoint.listener_name
        protected = self._protected_listener(name)
        listener = self.security.listeners[name]

        while not self.shutting_down:
            if not self._slot_available(protected):
                self.waits_for_a_slot += 1
                log.warning("listener %s stops accepting: max.connections (%d) reached; new clients wait until "
                            "a connection closes", name, self.max_connections)
                while not self._slot_available(protected) and not self.shutting_down:
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
                if self.shutting_down:
                    return
                log.info("listener %s accepts again: %d connections, max.connections is %d", name,
                         self._admitted, self.max_connections)
            try:
                conn_sock, address = await loop.sock_accept(sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                if self.shutting_down or sock.fileno() < 0:
                    return
                if exc.errno in _OUT_OF_RESOURCES:
                    self._log_refusal(f"accept-{name}", "listener %s cannot accept: %s (%d connections open); "
                                      "trying again in %.1f s", name, exc.strerror or exc, self._admitted,
                                      ACCEPT_BACKOFF_S)
                    await asyncio.sleep(ACCEPT_BACKOFF_S)
                else:
                    log.warning("listener %s: accept failed: %s", name, exc)
                continue
            host = str(address[0]) if isinstance(address, tuple) else "?"
            port = int(address[1]) if isinstance(address, tuple) and len(address) >= 2 else 0
            limit = self._per_ip_overrides.get(host, self.max_connections_per_ip)
            if self._per_ip.get(host, 0) >= limit:
                self.refused += 1
                self._log_refusal(f"ip-{host}", "rejected connection from %s on %s: the address already has the "
                                  "configured maximum of %d connections (max.connections.per.ip%s)", host, name, limit,
                                  ".overrides" if host in self._per_ip_overrides else "")
                _close_quietly(conn_sock)
                continue
            if protected and self._admitted >= self.max_connections:
                self._make_room(name)
            self._take(host)
            conn_sock.setblocking(False)
            if listener.ssl_context is not None:
                task = loop.create_task(self._start(endpoint, listener, conn_sock, host, port))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
            else:
                await self._start(endpoint, listener, conn_sock, host, port)

    async def _start(self, endpoint: EndPoint, listener: ListenerSecurity, conn_sock: socket.socket, host: str,
                     port: int) -> None:
        """Make an admitted socket a connection (after its TLS handshake on an SSL listener); if it never becomes
        one, give its slot back."""
        made: list[KafkaConnection] = []

        def factory() -> KafkaConnection:
            conn = KafkaConnection(self, endpoint.listener_name, endpoint.security_protocol.value, listener)
            conn.peer = (host, port)  # the address its slot was counted under
            made.append(conn)
            return conn

        loop = asyncio.get_running_loop()
        try:
            if listener.ssl_context is None:
                await loop.connect_accepted_socket(factory, conn_sock)
            else:
                await loop.connect_accepted_socket(
                    factory, conn_sock, ssl=listener.ssl_context,
                    ssl_handshake_timeout=self.security.authentication_timeout_s)
        except asyncio.CancelledError:
            self._give_back(made, host)
            _close_quietly(conn_sock)
            raise
        except (OSError, TimeoutError, ConnectionError, ValueError) as exc:
            self._give_back(made, host)
            _close_quietly(conn_sock)
            text = str(exc) or type(exc).__name__
            if listener.ssl_context is None:
                log.warning("listener %s: connection from %s failed as it started: %s", endpoint.listener_name,
                            host, text)
                return
            if isinstance(exc, TimeoutError) or "taking longer" in text:
                text = (f"not complete after {self.security.authentication_timeout_s * 1000:.0f} ms "
                        "(sofakafka.authentication.timeout.ms)")
            log.warning("closing connection from %s:%d on %s: TLS handshake failed: %s", host, port,
                        endpoint.listener_name, text)

    def _give_back(self, made: list[KafkaConnection], host: str) -> None:
        if made and made[0] in self.connections:
            return  # it opened: its close gives the slot back
        self._release(host)

    def _take(self, host: str) -> None:
        self._admitted += 1
        self._per_ip[host] = self._per_ip.get(host, 0) + 1

    def _release(self, host: str) -> None:
        self._admitted -= 1
        left = self._per_ip.get(host, 0) - 1
        if left > 0:
            self._per_ip[host] = left
        else:
            self._per_ip.pop(host, None)
        self._slot_freed.set()

    def _make_room(self, listener_name: str) -> None:
        """A protected (inter-broker) connection arrives at max.connections: close the least recently active
        connection of another listener, as Kafka's processors do."""
        candidates = [c for c in self.connections if c.listener_name != listener_name and not c.closing]
        if candidates:
            victim = min(candidates, key=lambda c: c.last_activity)
            victim.close_for(f"max.connections ({self.max_connections}) reached and inter-broker listener "
                             f"{listener_name} needs a slot: closing the least recently active connection",
                             drain=False)

    def _log_refusal(self, key: str, message: str, *args: object) -> None:
        """Log a refusal, at most once per REFUSAL_LOG_INTERVAL_S per key (a flood must not flood the log)."""
        now = time.monotonic()
        if now - self._last_logged.get(key, -REFUSAL_LOG_INTERVAL_S) >= REFUSAL_LOG_INTERVAL_S:
            suppressed = self._suppressed.pop(key, 0)
            log.warning(message + (f" ({suppressed} more since the last report)" if suppressed else ""), *args)
            self._last_logged[key] = now
        else:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1

    @staticmethod
    def _bound(e: EndPoint, port: int, adv: EndPoint | None) -> BoundListener:
        adv_host = adv.host if adv is not None else e.host
        adv_port = adv.port if adv is not None and adv.port != 0 else port
        if adv_host in ("", "0.0.0.0", "::"):
            adv_host = socket.getfqdn()
        return BoundListener(e.listener_name, e.security_protocol, e.host, port, adv_host, adv_port)

    def connection_opened(self, conn: KafkaConnection) -> bool:
        """Take the connection in (the accept loop has checked the limits and counted it already)."""
        if self.shutting_down:
            # Its handshake finished as the broker stopped: it will not be served.
            self._release(conn.peer[0])
            return False
        self.connections.add(conn)
        return True

    def connection_closed(self, conn: KafkaConnection) -> None:
        if conn not in self.connections:
            return
        self.connections.discard(conn)
        self._release(conn.peer[0])

    async def stop_accepting(self) -> None:
        self.shutting_down = True
        self._slot_freed.set()
        for task in [*self._accepting, *self._handshakes]:
            task.cancel()
        for task in self._accepting:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._accepting.clear()
        for _, sock in self._sockets:
            _close_quietly(sock)
        self._sockets.clear()
        for conn in list(self.connections):
            conn.stop_reading()
        await asyncio.sleep(0)

    async def drain(self, timeout: float) -> bool:
        """Wait for in-flight requests to be answered; False if some were still pending at the deadline."""
        conns = [c for c in self.connections if c.in_flight]
        if not conns:
            return True
        waits = [asyncio.ensure_future(c.drained()) for c in conns]
        _done, pending = await asyncio.wait(waits, timeout=timeout)
        for p in pending:
            p.cancel()
        return not pending

    async def close_connections(self) -> None:
        conns = list(self.connections)
        for conn in conns:
            conn.close()
        if conns:
            await asyncio.wait([asyncio.ensure_future(c.wait_closed()) for c in conns], timeout=5)


def _listening_socket(host: str | None, port: int, backlog: int = 1024) -> socket.socket:
    """A non-blocking listening TCP socket on ``host``; no host means every interface, as Kafka's null host:
    a dual-stack IPv6 socket where the system has IPv6, else IPv4's wildcard."""
    if host is None:
        try:
            return _bind(socket.AF_INET6, ("::", port), backlog, dual_stack=True)
        except OSError:
            return _bind(socket.AF_INET, ("0.0.0.0", port), backlog)
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    return _bind(family, address, backlog)


def _bind(family: int, address: tuple[object, ...], backlog: int, dual_stack: bool = False) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if dual_stack:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _resolve_overrides(overrides: dict[str, int]) -> dict[str, int]:
    """Per-address limits by IP: host names resolved once, as Kafka resolves them when the config is read."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError as exc:
            raise ConfigError("max.connections.per.ip.overrides", f"cannot resolve {host}: {exc}") from exc
        for info in infos:
            out[str(info[4][0])] = count
    return out


def _close_quietly(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
