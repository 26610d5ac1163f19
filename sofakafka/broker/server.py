"""The listeners: one asyncio server per ``listeners`` entry, each connection a :class:`KafkaConnection`.

Every security protocol is served: PLAINTEXT as it is; SSL and SASL_SSL connections go through a TLS
handshake first (:class:`_TlsServer`: ``loop.connect_accepted_socket`` with the context, bounded by
``sofakafka.authentication.timeout.ms``; a failed handshake is logged with its reason and closes that socket
alone), then become a :class:`KafkaConnection` like any other; SASL_* connections authenticate before anything
else (see connection.py). The settings of each listener come from :mod:`sofakafka.broker.listener_security`,
checked before any port is bound.

A listener on port 0 binds an ephemeral port (tests); the bound port is what gets advertised when the
advertised listener also says 0. A listener bound to every interface advertises the machine's host name,
as Kafka does.

Shutdown (``stop_accepting`` then ``drain`` then ``close_connections``): listening sockets close first, every
connection stops reading, the requests already taken are answered, then the connections close.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
from collections.abc import Callable

from sofakafka.broker.bound_listener import BoundListener
from sofakafka.broker.config import ConfigError, EndPoint, KafkaConfig, SecurityProtocol
from sofakafka.broker.connection import KafkaConnection
from sofakafka.broker.context import BrokerContext
from sofakafka.broker.listener_security import BrokerSecurity, ListenerSecurity

log = logging.getLogger(__name__)

SUPPORTED_PROTOCOLS = tuple(SecurityProtocol)


class SocketServer:
    """Every listener's sockets and connections; a connection reaches the broker through ``broker``."""

    def __init__(self, broker: BrokerContext, config: KafkaConfig, security: BrokerSecurity) -> None:
        self.broker = broker
        self.config = config
        self.security = security
        self._handshakes: set[asyncio.Task[None]] = set()
        self.max_request_bytes = config.get_int("socket.request.max.bytes")
        self.max_inflight = config.get_int("queued.max.requests")
        self.idle_seconds = config.get_int("connections.max.idle.ms") / 1000.0
        self.send_buffer_bytes = config.get_int("socket.send.buffer.bytes")
        self.receive_buffer_bytes = config.get_int("socket.receive.buffer.bytes")
        # Responses may be large (a Fetch of 50 MB): pausing reads above a few MB of unsent data keeps a
        # client that does not read from growing our memory without bound.
        self.write_buffer_high = 4 * 1024 * 1024
        self.max_connections = config.get_int("max.connections")
        self.max_connections_per_ip = config.get_int("max.connections.per.ip")
        self._per_ip: dict[str, int] = {}
        self.shutting_down = False
        self.listeners: list[BoundListener] = []
        self._servers: list[asyncio.Server | _TlsServer] = []
        self.connections: set[KafkaConnection] = set()

    async def start(self) -> list[BoundListener]:
        endpoints = self.config.listeners
        for e in endpoints:
            if e.security_protocol not in SUPPORTED_PROTOCOLS:
                raise ConfigError("listeners", f"listener {e.listener_name} uses {e.security_protocol.value}, "
                                               "which this broker does not serve")
        self.security.configure()
        advertised = {e.listener_name: e for e in self.config.advertised_listeners}
        loop = asyncio.get_running_loop()
        try:
            for e in endpoints:
                listener = self.security.listeners[e.listener_name]
                if listener.ssl_context is not None:
                    server: asyncio.Server | _TlsServer = _TlsServer.bind(
                        self, listener, functools.partial(self._protocol_for, e), e.host or None, e.port)
                else:
                    server = await loop.create_server(
                        functools.partial(self._protocol_for, e),
                        host=e.host or None,
                        port=e.port,
                        reuse_address=True,
                        backlog=1024,
                        start_serving=False,
                    )
                self._servers.append(server)
                port = server.sockets[0].getsockname()[1]
                self.listeners.append(self._bound(e, port, advertised.get(e.listener_name)))
        except OSError as exc:
            await self.stop_accepting()
            raise ConfigError("listeners", f"cannot listen: {exc.strerror or exc}") from exc
        return self.listeners

    def _protocol_for(self, e: EndPoint) -> KafkaConnection:
        return KafkaConnection(self, e.listener_name, e.security_protocol.value,
                               self.security.listeners[e.listener_name])

    async def start_serving(self) -> None:
        """Accept connections (bound in ``start``, held back until the broker is ready to answer)."""
        for server in self._servers:
            await server.start_serving()

    @staticmethod
    def _bound(e: EndPoint, port: int, adv: EndPoint | None) -> BoundListener:
        adv_host = adv.host if adv is not None else e.host
        adv_port = adv.port if adv is not None and adv.port != 0 else port
        if adv_host in ("", "0.0.0.0", "::"):
            adv_host = socket.getfqdn()
        return BoundListener(e.listener_name, e.security_protocol, e.host, port, adv_host, adv_port)

    def connection_opened(self, conn: KafkaConnection) -> bool:
        """Admit the connection, or refuse it (False) over ``max.connections`` / ``max.connections.per.ip``."""
        host = conn.peer[0]
        if len(self.connections) >= self.max_connections:
            log.warning("refusing connection from %s: max.connections (%d) reached", host, self.max_connections)
            return False
        if self._per_ip.get(host, 0) >= self.max_connections_per_ip:
            log.warning("refusing connection from %s: max.connections.per.ip (%d) reached", host,
                        self.max_connections_per_ip)
            return False
        self.connections.add(conn)
        self._per_ip[host] = self._per_ip.get(host, 0) + 1
        self.broker.metrics.connections_created += 1
        return True

    def connection_closed(self, conn: KafkaConnection) -> None:
        if conn not in self.connections:
            return
        self.connections.discard(conn)
        self.broker.metrics.connections_closed += 1
        host = conn.peer[0]
        left = self._per_ip.get(host, 0) - 1
        if left > 0:
            self._per_ip[host] = left
        else:
            self._per_ip.pop(host, None)

    async def stop_accepting(self) -> None:
        self.shutting_down = True
        for task in list(self._handshakes):
            task.cancel()
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.stop_reading()
        # Not Server.wait_closed(): on newer loops it also waits for every connection to close, which is
        # the next step of shutdown, not this one.
        self._servers.clear()
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


class _TlsServer:
    """A TLS listener: our own accept loop, each socket handed to ``loop.connect_accepted_socket`` with the TLS
    context, so the handshake is the loop's (C speed under uvloop) and its failure reaches us with the peer's
    address, to be logged and the socket closed. (``create_server(ssl=...)`` drops a failed handshake
    silently, and ``start_tls`` on an accepted transport can lose the ClientHello: uvloop starts reading
    before the hand-over.) It offers the part of ``asyncio.Server`` the SocketServer uses."""

    def __init__(self, owner: SocketServer, listener: ListenerSecurity, factory: Callable[[], KafkaConnection],
                 sock: socket.socket) -> None:
        self._owner = owner
        self._listener = listener
        self._factory = factory
        self.sockets = [sock]
        self._serving = False

    @classmethod
    def bind(cls, owner: SocketServer, listener: ListenerSecurity, factory: Callable[[], KafkaConnection],
             host: str | None, port: int) -> _TlsServer:
        family = socket.AF_INET6 if host and ":" in host else socket.AF_INET
        sock = socket.create_server((host or "", port), family=family, backlog=1024, reuse_port=False)
        sock.setblocking(False)
        return cls(owner, listener, factory, sock)

    async def start_serving(self) -> None:
        if not self._serving:
            self._serving = True
            asyncio.get_running_loop().add_reader(self.sockets[0].fileno(), self._accept)

    def close(self) -> None:
        if self._serving:
            self._serving = False
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self.sockets[0].fileno())
        self.sockets[0].close()

    def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(64):  # a burst of connections; the rest on the next readiness
            try:
                conn, addr = self.sockets[0].accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and friends: keep serving the ones we have
                log.warning("accept on %s failed: %s", self._listener.listener_name, exc)
                return
            owner = self._owner
            if len(owner.connections) + len(owner._handshakes) >= owner.max_connections:
                # Handshakes in progress count too: a flood of unfinished TLS handshakes must not get around
                # max.connections (each costs the broker a TLS context and a task until its timeout).
                log.warning("refusing connection from %s: max.connections (%d) reached", addr, owner.max_connections)
                conn.close()
                continue
            conn.setblocking(False)
            task = loop.create_task(self._handshake(conn, addr))
            self._owner._handshakes.add(task)
            task.add_done_callback(self._owner._handshakes.discard)

    async def _handshake(self, conn: socket.socket, addr: object) -> None:
        where = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) and len(addr) >= 2 else str(addr)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                self._factory, conn, ssl=self._listener.ssl_context,
                ssl_handshake_timeout=self._owner.security.authentication_timeout_s)
        except asyncio.CancelledError:
            conn.close()
            raise
        except (OSError, TimeoutError, ConnectionError, ValueError) as exc:
            text = str(exc) or type(exc).__name__
            if isinstance(exc, TimeoutError) or "taking longer" in text:
                text = (f"not complete after {self._owner.security.authentication_timeout_s * 1000:.0f} ms "
                        "(sofakafka.authentication.timeout.ms)")
            reason = text
            log.warning("closing connection from %s on %s: TLS handshake failed: %s", where,
                        self._listener.listener_name, reason)
            conn.close()
