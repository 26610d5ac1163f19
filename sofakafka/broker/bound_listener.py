"""A listener as bound and as advertised: what the server reports once its sockets listen, and what Metadata
and FindCoordinator answer clients with."""

from __future__ import annotations

from dataclasses import dataclass

from sofakafka.broker.config import SecurityProtocol


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
        host = f"[{self.advertised_host}]" if ":" in self.advertised_host else self.advertised_host
        return f"{self.listener_name}://{host}:{self.advertised_port}"
