"""Zig-zag varints as used inside v2 records (FORMATS.md §3.1, §6).

Kept apart from the generic primitive-type layer, with a one-byte fast path, because the record walk calls
them per field; the base-128 loops underneath are the ones the request/response layer uses.
Decoders take ``(buf, pos)`` and return ``(value, new_pos)`` so a caller can walk a buffer without slicing.
"""

from __future__ import annotations

from sofakafka.protocol.errors import DecodeError
from sofakafka.protocol.primitives import encode_base128, read_base128
from sofakafka.protocol.records.buffer import Buffer

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed 32-bit value."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return encode_base128((value << 1) ^ (value >> 31))


def encode_varlong(value: int) -> bytes:
    """Zig-zag encode a signed 64-bit value (record timestampDelta uses this form)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return encode_base128((value << 1) ^ (value >> 63))


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zig-zag int32; Java rejects encodings longer than 5 bytes and so do we."""
    b = buf[pos] if pos < len(buf) else -1
    if 0 <= b < 0x80:
        # One-byte fast path: most deltas and short lengths.
        return (b >> 1) ^ -(b & 1), pos + 1
    u, pos = read_base128(buf, pos, 5, "varint")
    if u > 0xFFFFFFFF:
        raise DecodeError("varint overflows int32")
    return (u >> 1) ^ -(u & 1), pos


def decode_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zig-zag int64 (at most 10 bytes)."""
    u, pos = read_base128(buf, pos, 10, "varlong")
    if u > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError("varlong overflows int64")
    return (u >> 1) ^ -(u & 1), pos


def varint_size(value: int) -> int:
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n
