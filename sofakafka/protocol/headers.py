"""Request and response headers, and which header version each (api key, api version) uses.

The header is decoded without touching the body: a broker reads the key and version first, needs the
correlation id even for a request it cannot parse (to answer UNSUPPORTED_VERSION to ApiVersions), and
hands the body offset to the decoder of the right message class.

2.6's quirks, kept here:

- request header v2 (flexible APIs) still writes ClientId with an int16 length, so that a broker of any
  age can read the header of an ApiVersions request of any version;
- ControlledShutdown v0 uses request header v0, which has no ClientId;
- ApiVersions responses always use response header v0, so a client can read the answer before it knows
  which versions the broker speaks;
- an ApiVersions request newer than we know still has a readable header: Kafka's generated rule is
  "flexible from version 3 on", so any version >= 3 is read with request header v2.
"""

from __future__ import annotations

from typing import ClassVar

from sofakafka.protocol.errors import UnsupportedVersionError
from sofakafka.protocol.internal import ALL_REQUEST_TYPES as REQUEST_TYPES
from sofakafka.protocol.internal import ALL_RESPONSE_TYPES as RESPONSE_TYPES
from sofakafka.protocol.primitives import Buffer, read_int16
from sofakafka.protocol.schema import INT16, INT32, STRING, Struct, field, in_range

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


class _Header(Struct):
    HEADER_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)

    @classmethod
    def _check_version(cls, version: int) -> None:
        lo, hi = cls.HEADER_VERSIONS
        if not lo <= version <= hi:
            raise ValueError(f"{cls.__name__} has no version {version}")


class RequestHeader(_Header):
    HEADER_VERSIONS = (0, 2)
    FLEXIBLE_VERSIONS = "2+"

    request_api_key: int = field(INT16, "0+", default=0)
    request_api_version: int = field(INT16, "0+", default=0)
    correlation_id: int = field(INT32, "0+", default=0)
    client_id: str | None = field(STRING, "1+", nullable="1+", ignorable=True, flexible="none", default="")


class ResponseHeader(_Header):
    HEADER_VERSIONS = (0, 1)
    FLEXIBLE_VERSIONS = "1+"

    correlation_id: int = field(INT32, "0+", default=0)


def _known_version(api_key: int, api_version: int) -> bool:
    request = REQUEST_TYPES.get(api_key)
    if request is None:
        raise UnsupportedVersionError(api_key, api_version, f"unknown API key {api_key}")
    lo, hi = request.valid_versions()
    if lo <= api_version <= hi:
        return True
    if api_key == API_VERSIONS_KEY and api_version > hi:
        return False
    raise UnsupportedVersionError(api_key, api_version)


def request_header_version(api_key: int, api_version: int) -> int:
    """Raises UnsupportedVersionError for an unknown key or version (ApiVersions: only for an unknown key)."""
    _known_version(api_key, api_version)
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if in_range(api_version, REQUEST_TYPES[api_key].flexible_versions()) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    _known_version(api_key, api_version)
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if in_range(api_version, RESPONSE_TYPES[api_key].flexible_versions()) else 0


def decode_request_header(buf: Buffer, pos: int = 0) -> tuple[RequestHeader, int]:
    """Decodes the header at ``pos`` of a frame (size prefix removed); returns it and the body offset.

    An ApiVersions request of a version we do not know still decodes here; its body does not.
    """
    api_key, after_key = read_int16(buf, pos)
    api_version, _ = read_int16(buf, after_key)
    version = request_header_version(api_key, api_version)
    return RequestHeader.decode_from(buf, version, pos)


def encode_request_header(header: RequestHeader, out: bytearray | None = None) -> bytearray:
    out = bytearray() if out is None else out
    header.encode_into(out, request_header_version(header.request_api_key, header.request_api_version))
    return out


def decode_response_header(buf: Buffer, api_key: int, api_version: int, pos: int = 0) -> tuple[ResponseHeader, int]:
    """The response header does not name its API: the caller knows what it asked for."""
    return ResponseHeader.decode_from(buf, response_header_version(api_key, api_version), pos)


def encode_response_header(
    header: ResponseHeader, api_key: int, api_version: int, out: bytearray | None = None
) -> bytearray:
    out = bytearray() if out is None else out
    header.encode_into(out, response_header_version(api_key, api_version))
    return out


__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "decode_request_header",
    "decode_response_header",
    "encode_request_header",
    "encode_response_header",
    "request_header_version",
    "response_header_version",
]
