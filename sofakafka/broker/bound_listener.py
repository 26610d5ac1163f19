"""A listener as bound and as advertised: what the server reports once its sockets listen, and what Metadata
and FindCoordinator answer clients with."""

from __future__ import annotations

from dataclasses import dataclass

from sofakafka.broker.config import EndPoint, SecurityProtocol


@dataclass(frozen=True)
class BoundListener:
    """A listener as bound (``port`` is the real one) and as advertised to clients."""

    listener_name: str
    security_protocol: SecurityProtocol
    bind_host: str
    port: int
    advertised_host: str
    advertised_port: int

    def connection_string(self) -> str:
        """The advertised endpoint, written as Kafka writes one (``NAME://host:port``, IPv6 bracketed)."""
        advertised = EndPoint(self.listener_name, self.advertised_host, self.advertised_port, self.security_protocol)
        return advertised.connection_string()
