"""Garbage in, ProtocolError out: no decoder lets anything else escape.

The broker closes a connection on ProtocolError and logs anything else as an internal bug answered with
UNKNOWN_SERVER_ERROR; a peer must not be able to reach the second path with bytes alone. Inputs are
random bytes and valid frames corrupted the way real corruption and hostile peers look: flipped bits,
torn tails, length and count fields forged huge or negative, bytes spliced in or cut out.

Each parametrized case runs a few hypothesis examples; the volume comes from covering every decoder at
every version, and CI's larger profile widens each case.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sofakafka.protocol.api import (
    ApiKey,
    RequestHeader,
    ResponseHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_type,
    response_type,
    valid_versions,
)
from sofakafka.protocol.errors import ProtocolError
from sofakafka.protocol.headers import decode_request_header, decode_response_header, request_header_version
from sofakafka.protocol.records import (
    InvalidProduceError,
    Record,
    build_batch,
    build_message_set,
    compress,
    compute_crc,
    decode_records,
    decompress,
    iter_batches,
    peek_batch_header,
    read_batch_header,
    validate_batch,
    validate_inner_messages,
    validate_produce,
)
from sofakafka.protocol.records.header import LEGACY_CRC, V2_CRC
from tests.unit.protocol.strategies import message_strategy

CASES = [
    pytest.param(kind, api_key, version, id=f"{api_key.name}-{kind}-v{version}")
    for api_key in ApiKey
    for kind in ("request", "response")
    for version in range(valid_versions(api_key)[0], valid_versions(api_key)[1] + 1)
]


def _message_type(kind: str, api_key: ApiKey) -> Any:
    return request_type(api_key) if kind == "request" else response_type(api_key)


# Values a forged length or count field takes: the boundaries of the signed types, small negatives that
# are not the null marker, and "just past the end".
_INT32_FORGERIES = (-(2**31), -2, -1, 0x7FFFFFFF, 0x7FFFFFFE, 1 << 24, 0xFFFF)
_INT16_FORGERIES = (-(2**15), -2, -1, 0x7FFF, 0x7FFE)
_VARINT_FORGERIES = (
    b"\xff\xff\xff\xff\x0f",  # 2**32 - 1 as unsigned varint: a compact length of ~4 GiB
    b"\xff\xff\xff\xff\x7f",  # does not fit 32 bits
    b"\x80\x80\x80\x80\x80\x80",  # never terminates within the 5 bytes allowed
    b"\xfe\xff\xff\xff\x07",
)


@st.composite
def mutation(draw: st.DrawFn, data: bytes) -> bytes:
    """One corruption of ``data`` (which is non-empty)."""
    buf = bytearray(data)
    n = len(buf)
    kind = draw(st.sampled_from(("flip", "truncate", "int32", "int16", "varint", "insert", "delete", "byte")))
    pos = draw(st.integers(0, max(n - 1, 0)))
    if kind == "flip":
        buf[pos] ^= 1 << draw(st.integers(0, 7))
    elif kind == "truncate":
        del buf[pos:]
    elif kind == "int32":
        buf[pos : pos + 4] = struct.pack(">i", draw(st.sampled_from(_INT32_FORGERIES)))
    elif kind == "int16":
        buf[pos : pos + 2] = struct.pack(">h", draw(st.sampled_from(_INT16_FORGERIES)))
    elif kind == "varint":
        forged = draw(st.sampled_from(_VARINT_FORGERIES))
        buf[pos : pos + len(forged)] = forged
    elif kind == "insert":
        buf[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    elif kind == "delete":
        del buf[pos : pos + draw(st.integers(1, 8))]
    else:
        buf[pos] = draw(st.sampled_from((0x00, 0x7F, 0x80, 0xFF)))
    return bytes(buf)


@st.composite
def corrupted(draw: st.DrawFn, valid: st.SearchStrategy[bytes]) -> bytes:
    data = draw(valid)
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        data = draw(mutation(data))
    return data


def _decode_or_protocol_error(decode: Callable[[bytes], Any], data: bytes) -> Any:
    """The decoded value, or None when the decoder rejected the bytes the only allowed way."""
    try:
        return decode(data)
    except ProtocolError:
        return None


def _assert_rewritable(cls: Any, decoded: Any, version: int) -> None:
    """Whatever a decoder accepts is a message this codec can write back, and reads again as written:
    otherwise a corrupted request would pass the connection and blow up later in a handler, far from the
    bytes that caused it. Compared as bytes, since a float64 field may legitimately decode to NaN."""
    again = decoded.encode(version)
    assert cls.decode(again, version).encode(version) == again


def scaled(factor: float, cap: int | None = None) -> int:
    """Examples per test relative to the active profile (conftest: dev 50, ci 150), so CI digs deeper;
    ``cap`` bounds the tests parametrized over hundreds of cases, whose cost multiplies."""
    n = max(2, int(settings.default.max_examples * factor))
    return n if cap is None else min(n, cap)


FUZZ = settings(
    max_examples=scaled(0.25, cap=20),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize(("kind", "api_key", "version"), CASES)
@FUZZ
@given(data=st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_error(
    kind: str, api_key: ApiKey, version: int, data: bytes
) -> None:
    cls = _message_type(kind, api_key)
    _decode_or_protocol_error(lambda b: cls.decode(b, version), data)


@pytest.mark.parametrize(("kind", "api_key", "version"), CASES)
@FUZZ
@given(st.data())
def test_corrupted_valid_messages_raise_only_protocol_error(
    kind: str, api_key: ApiKey, version: int, data: st.DataObject
) -> None:
    cls = _message_type(kind, api_key)
    valid = message_strategy(cls, version).map(lambda message: message.encode(version))
    garbage = data.draw(corrupted(valid))
    decoded = _decode_or_protocol_error(lambda b: cls.decode(b, version), garbage)
    if decoded is not None:
        _assert_rewritable(cls, decoded, version)


# --- headers and whole frames -------------------------------------------------------------------------

API_KEYS = st.sampled_from(list(ApiKey))


@FUZZ
@given(data=st.binary(max_size=64))
def test_request_header_of_random_bytes_raises_only_protocol_error(data: bytes) -> None:
    _decode_or_protocol_error(decode_request_header, data)


@FUZZ
@given(api_key=API_KEYS, version=st.integers(-2, 20), data=st.binary(max_size=32))
def test_response_header_of_random_bytes_raises_only_protocol_error(
    api_key: ApiKey, version: int, data: bytes
) -> None:
    _decode_or_protocol_error(lambda b: decode_response_header(b, api_key, version), data)


@st.composite
def request_frames(draw: st.DrawFn) -> bytes:
    api_key = draw(API_KEYS)
    low, high = valid_versions(api_key)
    version = draw(st.integers(low, high))
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=draw(st.integers(-(2**31), 2**31 - 1)),
        client_id=draw(st.one_of(st.none(), st.text(max_size=8)))
        if request_header_version(api_key, version)
        else "",
    )
    return encode_request(header, draw(message_strategy(request_type(api_key), version)))


@st.composite
def response_frames(draw: st.DrawFn) -> tuple[ApiKey, int, bytes]:
    api_key = draw(API_KEYS)
    low, high = valid_versions(api_key)
    version = draw(st.integers(low, high))
    header = ResponseHeader(correlation_id=draw(st.integers(-(2**31), 2**31 - 1)))
    return (
        api_key,
        version,
        encode_response(header, draw(message_strategy(response_type(api_key), version)), version),
    )


@settings(max_examples=scaled(4), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(frame=corrupted(request_frames()))
def test_corrupted_request_frames_raise_only_protocol_error(frame: bytes) -> None:
    # The broker's first contact with a client's bytes: header first (to learn the API), then the body.
    decoded = _decode_or_protocol_error(decode_request, frame)
    if decoded is not None:
        again = encode_request(*decoded)
        assert encode_request(*decode_request(again)) == again


@settings(max_examples=scaled(4), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_corrupted_response_frames_raise_only_protocol_error(data: st.DataObject) -> None:
    # What a broker reads from another broker (the controller, a leader it follows).
    api_key, version, frame = data.draw(response_frames())
    garbage = data.draw(corrupted(st.just(frame)))
    _decode_or_protocol_error(lambda b: decode_response(b, api_key, version), garbage)


# --- record sets --------------------------------------------------------------------------------------

_BLOBS = st.one_of(st.none(), st.binary(max_size=24))


@st.composite
def record_lists(draw: st.DrawFn, with_headers: bool) -> list[Record]:
    count = draw(st.integers(1, 4))
    first = draw(st.integers(0, 2**40))
    gaps = draw(st.lists(st.integers(1, 3), min_size=count, max_size=count))
    offsets = [first + sum(gaps[:i]) for i in range(count)]
    headers = st.lists(st.tuples(st.text(max_size=6), _BLOBS), max_size=2) if with_headers else st.just([])
    return [
        Record(offset, draw(st.integers(0, 2**41)), draw(_BLOBS), draw(_BLOBS), draw(headers))
        for offset in offsets
    ]


@st.composite
def log_entry(draw: st.DrawFn) -> bytes:
    """One valid entry of any magic and codec, the way producers and old logs write them."""
    magic = draw(st.sampled_from((0, 1, 2)))
    if magic == 2:
        return build_batch(
            draw(record_lists(with_headers=True)),
            compression=draw(st.integers(0, 4)),
            producer_id=draw(st.sampled_from((-1, 0, 2**40))),
            producer_epoch=draw(st.sampled_from((-1, 0, 7))),
            base_sequence=draw(st.sampled_from((-1, 0, 100))),
            is_transactional=draw(st.booleans()),
            partition_leader_epoch=draw(st.sampled_from((-1, 0, 5))),
        )
    return build_message_set(
        draw(record_lists(with_headers=False)), magic=magic, compression=draw(st.integers(0, 3))
    )


RECORD_SETS = st.lists(log_entry(), min_size=1, max_size=3).map(b"".join)


def _reseal(buf: bytes) -> bytes:
    """Recompute the checksum of every entry whose header still parses, so that corruption reaches the
    structural checks and record decoding behind the CRC instead of stopping at it."""
    out = bytearray(buf)
    try:
        for header in iter_batches(out):
            crc_at = header.position + (V2_CRC if header.magic == 2 else LEGACY_CRC)
            struct.pack_into(">I", out, crc_at, compute_crc(out, header))
    except ProtocolError:
        pass
    return bytes(out)


def _read_everything(buf: bytes) -> None:
    """Every reader the log and the produce path run on untrusted record bytes."""
    _decode_or_protocol_error(lambda b: read_batch_header(b, 0, max_size=1 << 20), buf)
    _decode_or_protocol_error(lambda b: peek_batch_header(b, 0), buf)
    try:
        headers = list(iter_batches(buf))
    except ProtocolError:
        return
    for header in headers:
        _decode_or_protocol_error(lambda b, h=header: validate_batch(b, h), buf)
        _decode_or_protocol_error(lambda b, h=header: decode_records(b, h), buf)
        if header.magic < 2 and header.compression:
            _decode_or_protocol_error(lambda b, h=header: validate_inner_messages(b, h), buf)


def _validate_produce(buf: bytes, produce_version: int) -> None:
    # validate_produce answers bad data with the Kafka code a 2.6 broker puts in the Produce response.
    try:
        validate_produce(buf, produce_version=produce_version, check_records=True)
    except (InvalidProduceError, ProtocolError):
        pass


@settings(max_examples=scaled(2), suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300))
def test_record_readers_on_random_bytes_raise_only_protocol_error(data: bytes) -> None:
    _read_everything(data)
    _read_everything(_reseal(data))


@settings(max_examples=scaled(6), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(buf=corrupted(RECORD_SETS), reseal=st.booleans(), produce_version=st.integers(0, 8))
def test_record_readers_on_corrupted_record_sets_raise_only_protocol_error(
    buf: bytes, reseal: bool, produce_version: int
) -> None:
    if reseal:
        buf = _reseal(buf)
    _read_everything(buf)
    _validate_produce(buf, produce_version)


def _every_forgery(data: bytes) -> list[bytes]:
    """Every truncation, and every length/count forgery at every byte position of ``data``.

    Random mutations find a length field only by chance; this walks all of them, so each int16 string
    length, int32 array count and varint compact length of the message is forged at least once.
    """
    out = [data[:cut] for cut in range(len(data))]
    for pos in range(len(data)):
        for forged in (
            struct.pack(">i", -2),
            struct.pack(">i", 0x7FFFFFFF),
            struct.pack(">h", -2),
            struct.pack(">h", 0x7FFF),
            _VARINT_FORGERIES[0],
        ):
            out.append(data[:pos] + forged + data[pos + len(forged) :])
    return out


@pytest.mark.parametrize(("kind", "api_key", "version"), CASES)
@settings(max_examples=2, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_every_forged_length_and_truncation_raises_only_protocol_error(
    kind: str, api_key: ApiKey, version: int, data: st.DataObject
) -> None:
    cls = _message_type(kind, api_key)
    valid = data.draw(message_strategy(cls, version)).encode(version)
    for garbage in _every_forgery(valid):
        decoded = _decode_or_protocol_error(lambda b: cls.decode(b, version), garbage)
        if decoded is not None:
            _assert_rewritable(cls, decoded, version)


@st.composite
def compressed_payloads(draw: st.DrawFn) -> tuple[int, int, bytes]:
    magic = draw(st.sampled_from((0, 1, 2)))
    codec = draw(st.integers(1, 4 if magic == 2 else 3))
    return codec, magic, compress(codec, draw(st.binary(max_size=200)), magic=magic)


@settings(max_examples=scaled(4), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_decompressing_corrupted_payloads_raises_only_protocol_error(data: st.DataObject) -> None:
    # Each codec library reports bad input its own way (zlib.error, RuntimeError, ZstdError, ...); all of
    # them must reach the caller as the one exception the log and the produce path handle.
    codec, magic, payload = data.draw(compressed_payloads())
    garbage = data.draw(st.one_of(corrupted(st.just(payload)), st.binary(max_size=64)))
    _decode_or_protocol_error(lambda b: decompress(codec, b, magic=magic), garbage)
