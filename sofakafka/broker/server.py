"""The listeners: one asyncio server per ``listeners`` entry, each connection a :class:`KafkaConnection`.

Only PLAINTEXT is served for now; the listener names, the protocol map and ``advertised.listeners`` are
parsed in full (KafkaConfig), so SSL and SASL_* listeners will plug in here by wrapping the transport. A
listener of another protocol stops start-up naming it rather than silently serving plaintext on it.

A listener on port 0 binds an ephemeral port (tests); the bound port is what gets advertised when the
advertised listener also says 0. A listener bound to every interface advertises the machine's host name,
as Kafka does.

Shutdown (``stop_accepting`` then ``drain`` then ``close_connections``): listening sockets close first, every
connection stops reading, the requests already taken are answered, then the connections close.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from sofakafka.broker.bound_listener import BoundListener
from sofakafka.broker.config import ConfigError, EndPoint, KafkaConfig, SecurityProtocol
from sofakafka.broker.connection import KafkaConnection
from sofakafka.broker.context import BrokerContext

log = logging.getLogger(__name__)

SUPPORTED_PROTOCOLS = (SecurityProtocol.PLAINTEXT,)


class SocketServer:
    """Every listener's sockets and connections; a connection reaches the broker through ``broker``."""

    def __init__(self, broker: BrokerContext, config: KafkaConfig) -> None:
        self.broker = broker
        self.config = config
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
        self._servers: list[asyncio.AbstractServer] = []
        self.connections: set[KafkaConnection] = set()

    async def start(self) -> list[BoundListener]:
        endpoints = self.config.listeners
        for e in endpoints:
            if e.security_protocol not in SUPPORTED_PROTOCOLS:
                raise ConfigError("listeners", f"listener {e.listener_name} uses {e.security_protocol.value}, "
                                               "which this broker does not serve yet (only PLAINTEXT)")
        advertised = {e.listener_name: e for e in self.config.advertised_listeners}
        loop = asyncio.get_running_loop()
        try:
            for e in endpoints:
                server = await loop.create_server(
                    lambda e=e: KafkaConnection(self, e.listener_name, e.security_protocol.value),
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
