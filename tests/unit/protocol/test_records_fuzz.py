"""Mangled record sets may only ever raise ProtocolError subclasses, never struct/Index/Unicode errors."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sofakafka.protocol.errors import ErrorCode, KafkaError, ProtocolError
from sofakafka.protocol.records import (
    Record,
    build_batch,
    build_message_set,
    decode_records,
    down_convert,
    iter_batches,
    validate_batch,
    validate_inner_messages,
    validate_produce,
)
from sofakafka.protocol.records.produce import InvalidProduceError

_RECS = [Record(0, 10, b"key", b"value" * 3, []), Record(1, 11, None, b"v", []), Record(2, 12, b"k", None, [])]
_HDR_RECS = [Record(r.offset, r.timestamp, r.key, r.value, [("h", b"x")]) for r in _RECS]
SEEDS = (
    [build_batch(_HDR_RECS, compression=c) for c in range(5)]
    + [build_message_set(_RECS, magic=m, compression=c) for m in (0, 1) for c in range(4)]
)


@st.composite
def mangled(draw: st.DrawFn) -> bytes:
    buf = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert"]))
        at = draw(st.integers(0, max(0, len(buf) - 1)))
        if kind == "flip" and buf:
            buf[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del buf[at : at + draw(st.integers(1, 8))]
        else:
            buf[at:at] = draw(st.binary(min_size=1, max_size=4))
    return bytes(buf)


def _read_everything(buf: bytes) -> None:
    for h in iter_batches(buf):
        try:
            validate_batch(buf, h)
        except ProtocolError:
            pass
        decode_records(buf, h)
        if h.magic < 2 and h.compression:
            validate_inner_messages(buf, h)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(mangled())
def test_readers_raise_only_protocol_errors(buf: bytes) -> None:
    try:
        _read_everything(buf)
    except ProtocolError:
        pass


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(mangled())
def test_produce_validation_raises_only_invalid_produce_error(buf: bytes) -> None:
    try:
        validate_produce(buf, check_records=True)
    except InvalidProduceError:
        pass


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(mangled())
def test_down_conversion_raises_only_protocol_errors_or_unsupported_codec(buf: bytes) -> None:
    try:
        down_convert(buf, 1)
    except KafkaError as e:
        assert e.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE  # a (mangled) zstd batch
    except ProtocolError:
        pass
