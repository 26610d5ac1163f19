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
* ``listener.name.<listener>.max.connections``: a listener's own limit (``max.connections`` where unset, as
  Kafka's prefixed key overrides the broker's); at it that listener stops accepting like at ``max.connections``,
  the protected inter-broker listener included.
* ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``: a connection over its address's limit is
  accepted and closed at once.
* Dynamic, as in Kafka 2.6: AlterConfigs of ``max.connections``, ``max.connections.per.ip``, its overrides and a
  listener's ``max.connections``, cluster-wide or for this broker, apply on the next metadata change
  (:meth:`SocketServer.reconfigure`). A raised limit lets waiting clients in; a lowered ``max.connections`` closes
  the least recently active connections over it on unprotected listeners, as Kafka's processors do; other
  lowered limits hold back new connections only.
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
from collections.abc import Mapping
from dataclasses import dataclass, field

from sofakafka.broker.bound_listener import BoundListener
from sofakafka.broker.config import (
    LISTENER_MAX_CONNECTIONS_RE,
    ConfigError,
    EndPoint,
    KafkaConfig,
    SecurityProtocol,
    listener_max_connections_key,
    parse_connection_overrides,
    parse_max_connections,
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
# What Kafka 2.6 lets AlterConfigs change while the broker runs (SocketServer.ReconfigurableConfigs, and
# max.connections per listener).
DYNAMIC_CONNECTION_KEYS = ("max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides")


@dataclass(frozen=True)
class ConnectionLimits:
    """The connection limits in force: static config, then the cluster-wide dynamic default, then this broker's
    dynamic config, the later winning, as Kafka's DynamicBrokerConfig layers them."""

    max_connections: int
    max_connections_per_ip: int
    per_ip_overrides: str  # as written (host:count,...); the server resolves host names
    #: listener name -> its own ``listener.name.<listener>.max.connections``, where one is set.
    listener_max: dict[str, int] = field(default_factory=dict)

    def listener_limit(self, listener_name: str) -> int:
        """A listener's limit: its own key, else ``max.connections`` (Kafka's prefix override)."""
        return self.listener_max.get(listener_name, self.max_connections)


def connection_limits(config: KafkaConfig, dynamic: Mapping[str, str] = {}) -> ConnectionLimits:
    """The limits ``config`` sets with ``dynamic`` (the merged dynamic broker configs) on top. A dynamic value
    that does not parse (AlterConfigs validates them, so only a hand-edited store has one) is logged and the
    layer below it kept."""
    def value(key: str, static: int) -> int:
        raw = dynamic.get(key)
        if raw is None:
            return static
        try:
            return parse_max_connections(key, raw)
        except ConfigError as exc:
            log.warning("ignoring the dynamic %s", exc)
            return static

    overrides = config.get_str("max.connections.per.ip.overrides") or ""
    raw_overrides = dynamic.get("max.connections.per.ip.overrides")
    if raw_overrides is not None:
        try:
            parse_connection_overrides("max.connections.per.ip.overrides", raw_overrides)
            overrides = raw_overrides
        except ConfigError as exc:
            log.warning("ignoring the dynamic %s", exc)
    listener_max: dict[str, int] = {}
    names = {e.listener_name.lower(): e.listener_name for e in config.listeners}
    for layer in (config.originals, dynamic):  # static (checked at start-up), then dynamic
        for key, raw in layer.items():
            m = LISTENER_MAX_CONNECTIONS_RE.fullmatch(key)
            if m is None or m.group(1).lower() not in names:
                continue
            listener = names[m.group(1).lower()]
            try:
                listener_max[listener] = parse_max_connections(key, raw)
            except ConfigError as exc:
                log.warning("ignoring the dynamic %s", exc)
    return ConnectionLimits(
        max_connections=value("max.connections", config.get_int("max.connections")),
        max_connections_per_ip=value("max.connections.per.ip", config.get_int("max.connections.per.ip")),
        per_ip_overrides=overrides,
        listener_max=listener_max,
    )


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
        self.limits = connection_limits(config)
        self.max_connections = self.limits.max_connections
        self.max_connections_per_ip = self.limits.max_connections_per_ip
        self._per_ip_overrides = _resolve_overrides(
            parse_connection_overrides("max.connections.per.ip.overrides", self.limits.per_ip_overrides))
        self._dynamic_applied: dict[str, str] = {}
        # Admitted connections, counted from their accept (a TLS handshake in progress included) to their close:
        # per address, per listener and in all.
        self._per_ip: dict[str, int] = {}
        self._per_listener: dict[str, int] = {}
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

    def _slot_available(self, listener_name: str, protected: bool) -> bool:
        if self._per_listener.get(listener_name, 0) >= self.limits.listener_limit(listener_name):
            return False
        return protected or self._admitted < self.max_connections

    def _full_because(self, listener_name: str) -> str:
        if listener_name in self.limits.listener_max and \
                self._per_listener.get(listener_name, 0) >= self.limits.listener_max[listener_name]:
            return f"{listener_max_connections_key(listener_name)} ({self.limits.listener_max[listener_name]})"
        return f"max.connections ({self.max_connections})"

    async def _accept_loop(self, endpoint: EndPoint, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        name = endpoint.listener_name
        protected = self._protected_listener(name)
        listener = self.security.listeners[name]

        while not self.shutting_down:
            if not self._slot_available(name, protected):
                self.waits_for_a_slot += 1
                log.warning("listener %s stops accepting: %s reached; new clients wait until a connection closes",
                            name, self._full_because(name))
                while not self._slot_available(name, protected) and not self.shutting_down:
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
                if self.shutting_down:
                    return
                log.info("listener %s accepts again: %d connections (%d on it), max.connections is %d, its own limit "
                         "%d", name, self._admitted, self._per_listener.get(name, 0), self.max_connections,
                         self.limits.listener_limit(name))
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
            self._take(host, name)
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
            self._give_back(made, host, endpoint.listener_name)
            _close_quietly(conn_sock)
            raise
        except (OSError, TimeoutError, ConnectionError, ValueError) as exc:
            self._give_back(made, host, endpoint.listener_name)
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

    def _give_back(self, made: list[KafkaConnection], host: str, listener_name: str) -> None:
        if made and made[0] in self.connections:
            return  # it opened: its close gives the slot back
        self._release(host, listener_name)

    def _take(self, host: str, listener_name: str) -> None:
        self._admitted += 1
        self._per_ip[host] = self._per_ip.get(host, 0) + 1
        self._per_listener[listener_name] = self._per_listener.get(listener_name, 0) + 1

    def _release(self, host: str, listener_name: str) -> None:
        self._admitted -= 1
        left = self._per_ip.get(host, 0) - 1
        if left > 0:
            self._per_ip[host] = left
        else:
            self._per_ip.pop(host, None)
        self._per_listener[listener_name] = max(0, self._per_listener.get(listener_name, 0) - 1)
        self._slot_freed.set()

    # -- dynamic limits ----------------------------------------------------------------------------------------------
    async def reconfigure(self, dynamic: Mapping[str, str]) -> None:
        """Apply the dynamic broker configs' connection limits (``dynamic``: the cluster-wide default with this
        broker's own on top). Raised limits wake the listeners waiting for a slot; a lowered max.connections
        closes the least recently active connections over it on the unprotected listeners, as Kafka's
        processors close excess connections; a lowered per-address or listener limit applies to new connections.
        Never raises: a failure is logged and the limits in force are kept."""
        relevant = {k: v for k, v in dynamic.items()
                    if k in DYNAMIC_CONNECTION_KEYS or LISTENER_MAX_CONNECTIONS_RE.fullmatch(k)}
        if relevant == self._dynamic_applied:
            return
        try:
            limits = connection_limits(self.config, relevant)
            overrides = self._per_ip_overrides
            if limits.per_ip_overrides != self.limits.per_ip_overrides:
                parsed = parse_connection_overrides("max.connections.per.ip.overrides", limits.per_ip_overrides)
                overrides = await asyncio.to_thread(_resolve_overrides, parsed)
        except (ConfigError, OSError) as exc:
            log.warning("connection limits not changed: %s", exc)
            return
        self._dynamic_applied = relevant
        if limits == self.limits:
            return
        log.info("connection limits now: max.connections %d, max.connections.per.ip %d, overrides %r, per "
                 "listener %s", limits.max_connections, limits.max_connections_per_ip, limits.per_ip_overrides,
                 limits.listener_max or "none")
        self.limits = limits
        self.max_connections = limits.max_connections
        self.max_connections_per_ip = limits.max_connections_per_ip
        self._per_ip_overrides = overrides
        self._slot_freed.set()
        self._close_excess()

    def _close_excess(self) -> None:
        """While more connections are open than max.connections, close the least recently active one of an
        unprotected listener, as Kafka's processors do after max.connections is lowered (a listener's own lowered
        limit only holds back new connections, as in Kafka)."""
        over = self._admitted - self.max_connections
        if over <= 0:
            return
        candidates = sorted((c for c in self.connections if not c.closing and not self._protected_listener(
            c.listener_name)), key=lambda c: c.activity_order)
        for conn in candidates[:over]:
            conn.close_for(f"max.connections lowered to {self.max_connections} with {self._admitted} connections "
                           "open: closing the least recently active connection", drain=False)

    def _make_room(self, listener_name: str) -> None:
        """A protected (inter-broker) connection arrives at max.connections: close the least recently active
        connection of another listener, as Kafka's processors do."""
        candidates = [c for c in self.connections if c.listener_name != listener_name and not c.closing]
        if candidates:
            victim = min(candidates, key=lambda c: c.activity_order)
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
            self._release(conn.peer[0], conn.listener_name)
            return False
        self.connections.add(conn)
        self.broker.metrics.connections_created += 1
        return True

    def connection_closed(self, conn: KafkaConnection) -> None:
        if conn not in self.connections:
            return
        self.connections.discard(conn)
        self.broker.metrics.connections_closed += 1
        self._release(conn.peer[0], conn.listener_name)

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
