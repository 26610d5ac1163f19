"""The public face of the message codec: API keys, body classes, whole-frame encode and decode.

Public API (others code against it; keep it stable):

``ApiKey``
    IntEnum of the 50 keys of Kafka 2.6, Kafka's names: ``ApiKey.PRODUCE`` (0) ... ``ApiKey.ALTER_CLIENT_QUOTAS`` (49).
``request_type(api_key) -> type[Request]``, ``response_type(api_key) -> type[Response]``
    The body classes, e.g. ``ProduceRequest``; unknown key -> ``UnsupportedVersionError``.
``valid_versions(api_key) -> (min, max)``, ``flexible_versions(api_key) -> (first, last) | None``,
``is_flexible(api_key, version) -> bool``
    What 2.6 accepts (API-VERSIONS.md Table 1) and where the compact/tagged encoding applies.
``encode_request(header, body) -> bytes`` / ``decode_request(frame, strict=False) -> (RequestHeader, Request)``
    A whole request without the int32 size prefix; the version is ``header.request_api_version``.
    Bytes after the body are ignored unless ``strict``, as Kafka 2.6 does (it never checks what is left
    in the buffer, and librdkafka >= 2.1 sends Metadata v9 requests with stray trailing bytes).
``decode_request_body(header, frame, body_offset, strict=False) -> Request``
    The second half of ``decode_request``, for a caller that read the header first with
    ``headers.decode_request_header(frame) -> (RequestHeader, body_offset)`` (e.g. to answer an
    ApiVersions request of an unknown version, whose body raises ``UnsupportedVersionError``).
``encode_response(header, body, api_version) -> bytes`` /
``decode_response(frame, api_key, api_version, strict=False) -> (ResponseHeader, Response)``
    A whole response without the size prefix (its header does not carry the key or version).
``size_prefixed(payload) -> bytes``
    Adds the int32 size prefix of the wire framing.

Message classes (sofakafka.protocol.messages, one module per API): keyword construction with Kafka's
field names in snake_case (``ProduceRequest(acks=-1, timeout_ms=30000, topics=[...])``), nested structs
as nested classes (``ProduceRequest.TopicProduceData``), defaults for fields not given, equality by
value. ``obj.encode(version) -> bytes``, ``obj.encode_into(bytearray, version)``,
``obj.size(version) -> int`` (without encoding), ``Cls.decode(buf, version)`` (exactly the body) and
``Cls.decode_from(buf, version, pos) -> (obj, end)``. Record data (Produce/Fetch ``records``) decodes to a
zero-copy ``memoryview`` of the input and accepts bytes, bytearray or memoryview when encoding.

Kafka's default rule applies: a field a version lacks must hold its default (raises ``EncodeError``
otherwise) unless it is ignorable, and decoding such a version yields the default. Defaults are those of
the 2.6 JSON (e.g. a nullable string without a declared default defaults to ``""``, not None), except
where 2.6's hand-written Java schemas (what actually served those APIs) differ: ``ProduceRequest``'s
``transactional_id`` defaults to None and ``FetchResponse``'s ``preferred_read_replica`` to -1
(tools/gen_messages.py ``DEFAULT_OVERRIDES``).

Errors (sofakafka.protocol.errors): ``DecodeError`` for bad bytes, ``EncodeError`` for values a version
cannot carry, ``UnsupportedVersionError`` (with ``api_key``/``api_version``) for unknown keys/versions.
"""

from __future__ import annotations

from enum import IntEnum

from sofakafka.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from sofakafka.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    decode_request_header,
    decode_response_header,
    request_header_version,
    response_header_version,
)
from sofakafka.protocol.internal import ALL_REQUEST_TYPES as REQUEST_TYPES
from sofakafka.protocol.internal import ALL_RESPONSE_TYPES as RESPONSE_TYPES
from sofakafka.protocol.primitives import INT32, Buffer
from sofakafka.protocol.schema import Request, Response, VersionRange, in_range


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49


def request_type(api_key: int) -> type[Request]:
    try:
        return REQUEST_TYPES[api_key]
    except KeyError:
        raise UnsupportedVersionError(api_key, -1, f"unknown API key {api_key}") from None


def response_type(api_key: int) -> type[Response]:
    try:
        return RESPONSE_TYPES[api_key]
    except KeyError:
        raise UnsupportedVersionError(api_key, -1, f"unknown API key {api_key}") from None


def valid_versions(api_key: int) -> tuple[int, int]:
    return request_type(api_key).valid_versions()


def flexible_versions(api_key: int) -> VersionRange:
    """Request and response of one API are flexible from the same version on in 2.6."""
    return request_type(api_key).flexible_versions()


def is_flexible(api_key: int, api_version: int) -> bool:
    return in_range(api_version, flexible_versions(api_key))


def encode_request(header: RequestHeader, body: Request) -> bytes:
    """Header then body, without the size prefix."""
    if body.API_KEY != header.request_api_key:
        raise EncodeError(f"{type(body).__name__} is API key {body.API_KEY}, header says {header.request_api_key}")
    version = header.request_api_version
    out = bytearray()
    header.encode_into(out, request_header_version(header.request_api_key, version))
    body.encode_into(out, version)
    return bytes(out)


def decode_request(frame: Buffer, strict: bool = False) -> tuple[RequestHeader, Request]:
    """A whole request frame (size prefix removed): header, then one body.

    Trailing bytes are tolerated unless ``strict``: Kafka 2.6 parses the body and never looks at what
    is left, and real clients rely on it (librdkafka >= 2.1's Metadata v9 request for all topics).
    """
    header, offset = decode_request_header(frame)
    return header, decode_request_body(header, frame, offset, strict)


def decode_request_body(header: RequestHeader, frame: Buffer, body_offset: int, strict: bool = False) -> Request:
    cls = request_type(header.request_api_key)
    body, end = cls.decode_from(frame, header.request_api_version, body_offset)
    if strict and end != len(frame):
        raise DecodeError(f"{cls.__name__} v{header.request_api_version}: {len(frame) - end} trailing bytes")
    return body


def encode_response(header: ResponseHeader, body: Response, api_version: int) -> bytes:
    """Header then body, without the size prefix."""
    out = bytearray()
    header.encode_into(out, response_header_version(body.API_KEY, api_version))
    body.encode_into(out, api_version)
    return bytes(out)


def decode_response(
    frame: Buffer, api_key: int, api_version: int, strict: bool = False
) -> tuple[ResponseHeader, Response]:
    """Trailing bytes are tolerated unless ``strict``, like Kafka's clients."""
    header, offset = decode_response_header(frame, api_key, api_version)
    cls = response_type(api_key)
    body, end = cls.decode_from(frame, api_version, offset)
    if strict and end != len(frame):
        raise DecodeError(f"{cls.__name__} v{api_version}: {len(frame) - end} trailing bytes")
    return header, body


def size_prefixed(payload: Buffer) -> bytes:
    return INT32.pack(len(payload)) + bytes(payload)


__all__ = [
    "ApiKey",
    "RequestHeader",
    "ResponseHeader",
    "decode_request",
    "decode_request_body",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "flexible_versions",
    "is_flexible",
    "request_type",
    "response_type",
    "size_prefixed",
    "valid_versions",
]
