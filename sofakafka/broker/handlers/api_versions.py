"""ApiVersions (API key 18), versions 0-3.

Answers with the version range of every API that has a registered handler (``supported_versions``), so the
broker never advertises what it cannot answer. v3 (KIP-511) carries the client's software name and version,
which must match Kafka's pattern or the answer is INVALID_REQUEST. A request of a version newer than we know
never reaches this module: its body cannot be decoded, so the connection answers it with a v0 body holding
UNSUPPORTED_VERSION and our own ApiVersions range (:func:`unsupported_version_response`), from which the
client retries with a version we speak.
"""

from __future__ import annotations

import re

from sofakafka.broker.handlers import RequestContext, handles, supported_versions
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

_SOFTWARE_RE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

Key = ApiVersionsResponse.ApiVersionsResponseKey


_cache: tuple[tuple[tuple[int, int, int], ...], list[Key]] = ((), [])


def _keys() -> list[Key]:
    """The advertised ranges, rebuilt only when the registry changed (clients ask on every connection)."""
    global _cache
    current = tuple(supported_versions())
    if current != _cache[0]:
        _cache = (current, [Key(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in current])
    return _cache[1]


@handles(ApiKey.API_VERSIONS)
async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (
        _SOFTWARE_RE.match(request.client_software_name) and _SOFTWARE_RE.match(request.client_software_version)
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_keys())


def unsupported_version_response() -> ApiVersionsResponse:
    """The v0 body answering an ApiVersions request of a version we do not know (KIP-511)."""
    own = [k for k in _keys() if k.api_key == ApiKey.API_VERSIONS]
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=own)
