"""The handler registry: which APIs this broker answers, at which versions, and with which coroutine.

A handler module registers itself when imported::

    @handles(ApiKey.PRODUCE, 0, 8)
    async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
        ...

``load_handlers()`` imports every module of this package once, so adding an API is adding a file.
ApiVersions is computed from this table (``supported_versions``): a key is advertised only when a handler for
it exists, so a client never picks a version we cannot decode and answer.

A handler returns the response body (the connection adds the header and the size prefix), a
:class:`RawResponse` (body bytes assembled by the handler itself, e.g. Fetch splicing stored record bytes in
without re-encoding them), or None when the protocol says no response is sent (Produce with acks=0).
Failures that concern one partition or one resource go into the response; a handler lets an exception escape
only when the whole request failed: a :class:`~sofakafka.protocol.errors.KafkaError` then becomes that error
code where the response can carry it, and anything else becomes UNKNOWN_SERVER_ERROR, logged, at the
connection boundary.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sofakafka.broker.context import BrokerContext
from sofakafka.protocol.api import valid_versions
from sofakafka.protocol.headers import RequestHeader
from sofakafka.protocol.schema import Response


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response body already encoded, as chunks written in order after the response header."""

    chunks: Sequence[bytes | bytearray | memoryview]
    #: Where the body's int32 ``throttle_time_ms`` sits in ``chunks[0]`` (a bytearray then), for the connection to
    #: raise it when a client quota throttles the request after the handler; None when the body has none there.
    throttle_time_at: int | None = None

    @property
    def size(self) -> int:
        return sum(len(c) for c in self.chunks)


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body; ``broker`` is everything else it may use
    (sofakafka/broker/context.py)."""

    header: RequestHeader
    broker: BrokerContext
    listener_name: str
    security_protocol: str
    client_host: str
    client_port: int
    principal: str = "User:ANONYMOUS"
    # The principal logged in with a delegation token (KIP-48): such a connection may not manage tokens.
    token_authenticated: bool = False
    # Connection-scoped state handlers may keep (e.g. a SASL exchange later); dies with the connection.
    connection_state: dict[str, Any] = field(default_factory=dict)
    # Closes the connection (with the reason logged) once the responses before this request are sent: how a
    # handler that sends no response tells the client something went wrong (Produce acks=0 does).
    close_connection: Callable[[str], None] = field(default=lambda reason: None)
    # Client quotas (broker/client_quotas.py): the request's size on the wire, the seconds its handler has run on
    # the loop so far (kept up to date by the connection), and the throttle time the handler decided (the
    # connection mutes the channel for it, KIP-219). ``quota_done``: the handler recorded the request-time quota
    # itself (Produce and Fetch, which fold it into their own throttle decision, as Kafka's do).
    request_size: int = 0
    handler_seconds: list[float] = field(default_factory=lambda: [0.0])
    throttle_ms: int = 0
    quota_done: bool = False

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


HandlerResult = Response | RawResponse | None
Handler = Callable[[RequestContext, Any], Awaitable[HandlerResult]]
ErrorResponseBuilder = Callable[[Any, int, int], Response | None]
"""(request, api version, error code) -> a response that gives every partition or resource of the request that code, as
Kafka's ``getErrorResponse``; used when a handler fails as a whole. None: the request gets no response (acks=0
Produce), so the connection closes instead."""


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorResponseBuilder | None = None
    # False for sofakafka's own inter-broker APIs (sofakafka/protocol/internal.py): answered, never advertised.
    advertised: bool = True

    def accepts(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


REGISTRY: dict[int, HandlerSpec] = {}


def handles(api_key: int, min_version: int | None = None, max_version: int | None = None, *,
            error_response: ErrorResponseBuilder | None = None,
            advertised: bool = True) -> Callable[[Handler], Handler]:
    """Register the decorated coroutine for ``api_key``; versions default to everything the codec knows.

    The range must lie within the codec's, since the connection decodes the body with it before the handler
    runs. Registering a key twice is a programming error (two modules claiming one API). ``error_response``
    answers a request whose handler failed as a whole; without it the connection falls back to a top-level
    error code, or closes when the response has none.
    """
    codec_min, codec_max = valid_versions(api_key)
    lo = codec_min if min_version is None else min_version
    hi = codec_max if max_version is None else max_version
    if not codec_min <= lo <= hi <= codec_max:
        raise ValueError(f"API key {api_key}: versions {lo}-{hi} outside the codec's {codec_min}-{codec_max}")

    def register(fn: Handler) -> Handler:
        existing = REGISTRY.get(api_key)
        if existing is not None and existing.handler is not fn:
            raise ValueError(f"API key {api_key} is already handled by {existing.handler.__qualname__}")
        REGISTRY[api_key] = HandlerSpec(api_key, lo, hi, fn, error_response, advertised)
        return fn

    return register


def lookup(api_key: int) -> HandlerSpec | None:
    return REGISTRY.get(api_key)


def supported_versions() -> list[tuple[int, int, int]]:
    """(api key, min, max) of every registered handler, by key: what ApiVersions advertises."""
    return [(k, s.min_version, s.max_version) for k, s in sorted(REGISTRY.items()) if s.advertised]


_loaded = False


def load_handlers() -> None:
    """Import every handler module of this package (each registers itself); idempotent."""
    global _loaded
    if _loaded:
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _loaded = True


__all__ = [
    "REGISTRY",
    "ErrorResponseBuilder",
    "Handler",
    "HandlerResult",
    "HandlerSpec",
    "RawResponse",
    "RequestContext",
    "handles",
    "load_handlers",
    "lookup",
    "supported_versions",
]
