"""Kafka's primitive wire types, classic and flexible (KIP-482) forms.

Writers append to a ``bytearray`` (one growing buffer per message beats joining many small ``bytes``);
readers take ``(buf, pos)`` and return ``(value, new_pos)`` so a caller can walk a frame without slicing
it. ``buf`` may be ``bytes``, ``bytearray`` or ``memoryview``. Sizers compute the encoded length without
producing bytes, which lets a message report its size before it is written.

Every reader raises :class:`~sofakafka.protocol.errors.DecodeError` for truncated or invalid input and
never lets ``IndexError``, ``struct.error`` or ``UnicodeDecodeError`` escape: the broker turns a
``DecodeError`` into a closed connection, anything else would be an internal bug.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar, Union

from sofakafka.protocol.errors import DecodeError, EncodeError

Buffer = Union[bytes, bytearray, memoryview]  # noqa: UP007 - used at runtime in isinstance-free code
T = TypeVar("T")

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOLEAN = struct.Struct(">?")

# Kafka caps every string (classic and compact) at Short.MAX_VALUE bytes.
MAX_STRING_LENGTH = 32767

TaggedFields = list[tuple[int, bytes]]
"""Raw tagged fields as ``(tag, value bytes)`` pairs, in increasing tag order."""

_NULL16 = b"\xff\xff"
_NULL32 = b"\xff\xff\xff\xff"


# --- fixed width ------------------------------------------------------------------------------------


def _fixed_reader(s: struct.Struct, name: str) -> Callable[[Buffer, int], tuple[int, int]]:
    unpack_from = s.unpack_from
    width = s.size

    def read(buf: Buffer, pos: int) -> tuple[int, int]:
        if pos < 0 or pos + width > len(buf):
            raise DecodeError(f"truncated {name} at byte {pos}")
        return unpack_from(buf, pos)[0], pos + width

    return read


read_int8 = _fixed_reader(INT8, "int8")
read_int16 = _fixed_reader(INT16, "int16")
read_int32 = _fixed_reader(INT32, "int32")
read_int64 = _fixed_reader(INT64, "int64")
read_uint16 = _fixed_reader(UINT16, "uint16")
read_uint32 = _fixed_reader(UINT32, "uint32")


def read_boolean(buf: Buffer, pos: int) -> tuple[bool, int]:
    """Any non-zero byte is true, as in Kafka's BOOLEAN type."""
    if pos < 0 or pos >= len(buf):
        raise DecodeError(f"truncated boolean at byte {pos}")
    return buf[pos] != 0, pos + 1


def read_float64(buf: Buffer, pos: int) -> tuple[float, int]:
    if pos < 0 or pos + 8 > len(buf):
        raise DecodeError(f"truncated float64 at byte {pos}")
    return FLOAT64.unpack_from(buf, pos)[0], pos + 8


def _fixed_writer(s: struct.Struct, name: str) -> Callable[[bytearray, int], None]:
    pack = s.pack

    def write(out: bytearray, value: int) -> None:
        try:
            out += pack(value)
        except struct.error as e:
            raise EncodeError(f"{value!r} is not a valid {name}") from e

    return write


write_int8 = _fixed_writer(INT8, "int8")
write_int16 = _fixed_writer(INT16, "int16")
write_int32 = _fixed_writer(INT32, "int32")
write_int64 = _fixed_writer(INT64, "int64")
write_uint16 = _fixed_writer(UINT16, "uint16")
write_uint32 = _fixed_writer(UINT32, "uint32")


def write_boolean(out: bytearray, value: bool) -> None:
    out.append(1 if value else 0)


def write_float64(out: bytearray, value: float) -> None:
    try:
        out += FLOAT64.pack(value)
    except struct.error as e:
        raise EncodeError(f"{value!r} is not a valid float64") from e


# --- varints ----------------------------------------------------------------------------------------


def read_base128(buf: Buffer, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    """The raw base-128 value at ``pos`` (no zig-zag, no range check); shared with the v2 record walk."""
    n = len(buf)
    result = 0
    shift = 0
    for i in range(max_bytes):
        p = pos + i
        if p >= n or p < 0:
            raise DecodeError(f"truncated {what} at byte {pos}")
        b = buf[p]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, p + 1
        shift += 7
    raise DecodeError(f"{what} at byte {pos} is longer than {max_bytes} bytes")


def read_unsigned_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """An unsigned 32-bit base-128 varint (at most 5 bytes, value below 2**32)."""
    try:
        b = buf[pos]
    except IndexError:
        raise DecodeError(f"truncated unsigned varint at byte {pos}") from None
    if b < 0x80 and pos >= 0:
        return b, pos + 1
    value, end = read_base128(buf, pos, 5, "unsigned varint")
    if value > 0xFFFFFFFF:
        raise DecodeError(f"unsigned varint at byte {pos} exceeds 32 bits")
    return value, end


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zig-zag signed 32-bit varint."""
    u, end = read_base128(buf, pos, 5, "varint")
    if u > 0xFFFFFFFF:
        raise DecodeError(f"varint at byte {pos} exceeds 32 bits")
    return (u >> 1) ^ -(u & 1), end


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zig-zag signed 64-bit varint."""
    u, end = read_base128(buf, pos, 10, "varlong")
    if u > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError(f"varlong at byte {pos} exceeds 64 bits")
    return (u >> 1) ^ -(u & 1), end


def encode_base128(u: int) -> bytes:
    """``u`` (not negative) in base 128, least significant group first; shared with the v2 record writer."""
    if u < 0x80:
        return bytes((u,))
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


# Small lengths dominate (compact lengths, tag counts): precompute them.
_UVARINT_CACHE = [bytes((i,)) for i in range(0x80)]


def encode_unsigned_varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _UVARINT_CACHE[value]
    if not 0 <= value <= 0xFFFFFFFF:
        raise EncodeError(f"{value!r} does not fit an unsigned varint")
    return encode_base128(value)


def encode_varint(value: int) -> bytes:
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise EncodeError(f"{value!r} does not fit a varint")
    return encode_base128(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise EncodeError(f"{value!r} does not fit a varlong")
    return encode_base128(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def write_unsigned_varint(out: bytearray, value: int) -> None:
    out += encode_unsigned_varint(value)


def write_varint(out: bytearray, value: int) -> None:
    out += encode_varint(value)


def write_varlong(out: bytearray, value: int) -> None:
    out += encode_varlong(value)


def size_unsigned_varint(value: int) -> int:
    if value < 0x80:
        return 1
    if value < 0x4000:
        return 2
    if value < 0x200000:
        return 3
    if value < 0x10000000:
        return 4
    return 5


def size_varint(value: int) -> int:
    return size_unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def size_varlong(value: int) -> int:
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


# --- strings ----------------------------------------------------------------------------------------


def _utf8(value: str) -> bytes:
    try:
        data = value.encode("utf-8")
    except AttributeError:
        raise EncodeError(f"expected a string, got {type(value).__name__}") from None
    except UnicodeEncodeError as e:
        raise EncodeError(f"string is not encodable as UTF-8: {e}") from None
    if len(data) > MAX_STRING_LENGTH:
        raise EncodeError(f"string of {len(data)} bytes exceeds {MAX_STRING_LENGTH}")
    return data


def _utf8_len(value: str) -> int:
    if value.isascii():
        n = len(value)
    else:
        try:
            n = len(value.encode("utf-8"))
        except UnicodeEncodeError as e:
            raise EncodeError(f"string is not encodable as UTF-8: {e}") from None
    if n > MAX_STRING_LENGTH:
        raise EncodeError(f"string of {n} bytes exceeds {MAX_STRING_LENGTH}")
    return n


def _text(buf: Buffer, start: int, end: int) -> str:
    if end > len(buf):
        raise DecodeError(f"truncated string at byte {start}: needs {end - start} bytes")
    try:
        return str(buf[start:end], "utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"invalid UTF-8 in string at byte {start}: {e.reason}") from None


def write_string(out: bytearray, value: str) -> None:
    data = _utf8(value)
    out += INT16.pack(len(data))
    out += data


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _NULL16
    else:
        write_string(out, value)


def write_compact_string(out: bytearray, value: str) -> None:
    data = _utf8(value)
    out += encode_unsigned_varint(len(data) + 1)
    out += data


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_string(out, value)


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    n, pos = read_int16(buf, pos)
    if n < 0:
        raise DecodeError(f"negative length {n} for a non-nullable string at byte {pos - 2}")
    end = pos + n
    return _text(buf, pos, end), end


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    n, pos = read_int16(buf, pos)
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid string length {n} at byte {pos - 2}")
        return None, pos
    end = pos + n
    return _text(buf, pos, end), end


def read_compact_string(buf: Buffer, pos: int) -> tuple[str, int]:
    start = pos
    n, pos = read_unsigned_varint(buf, pos)
    if n == 0:
        raise DecodeError(f"null for a non-nullable compact string at byte {start}")
    end = pos + n - 1
    return _text(buf, pos, end), end


def read_compact_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    n, pos = read_unsigned_varint(buf, pos)
    if n == 0:
        return None, pos
    end = pos + n - 1
    return _text(buf, pos, end), end


def size_string(value: str) -> int:
    return 2 + _utf8_len(value)


def size_nullable_string(value: str | None) -> int:
    return 2 if value is None else 2 + _utf8_len(value)


def size_compact_string(value: str) -> int:
    n = _utf8_len(value)
    return size_unsigned_varint(n + 1) + n


def size_compact_nullable_string(value: str | None) -> int:
    return 1 if value is None else size_compact_string(value)


# --- bytes ------------------------------------------------------------------------------------------


def _blob(buf: Buffer, start: int, end: int) -> bytes:
    if end > len(buf):
        raise DecodeError(f"truncated bytes at byte {start}: needs {end - start} bytes")
    return bytes(buf[start:end])


def _view(buf: Buffer, start: int, end: int) -> memoryview:
    if end > len(buf):
        raise DecodeError(f"truncated records at byte {start}: needs {end - start} bytes")
    return memoryview(buf)[start:end]


def _bytes_len(value: Buffer) -> int:
    try:
        return len(value) if not isinstance(value, memoryview) else value.nbytes
    except TypeError:
        raise EncodeError(f"expected bytes, got {type(value).__name__}") from None


def write_bytes(out: bytearray, value: Buffer) -> None:
    n = _bytes_len(value)
    if n > 0x7FFFFFFF:
        raise EncodeError("bytes longer than 2**31-1")
    out += INT32.pack(n)
    out += value


def write_nullable_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out += _NULL32
    else:
        write_bytes(out, value)


def write_compact_bytes(out: bytearray, value: Buffer) -> None:
    n = _bytes_len(value)
    out += encode_unsigned_varint(n + 1)
    out += value


def write_compact_nullable_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_bytes(out, value)


def read_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    n, pos = read_int32(buf, pos)
    if n < 0:
        raise DecodeError(f"negative length {n} for non-nullable bytes at byte {pos - 4}")
    end = pos + n
    return _blob(buf, pos, end), end


def read_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_int32(buf, pos)
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid bytes length {n} at byte {pos - 4}")
        return None, pos
    end = pos + n
    return _blob(buf, pos, end), end


def read_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    start = pos
    n, pos = read_unsigned_varint(buf, pos)
    if n == 0:
        raise DecodeError(f"null for non-nullable compact bytes at byte {start}")
    end = pos + n - 1
    return _blob(buf, pos, end), end


def read_compact_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_unsigned_varint(buf, pos)
    if n == 0:
        return None, pos
    end = pos + n - 1
    return _blob(buf, pos, end), end


def read_records(buf: Buffer, pos: int) -> tuple[memoryview, int]:
    """Record data as a zero-copy view: the produce/fetch paths pass it on without copying."""
    n, pos = read_int32(buf, pos)
    if n < 0:
        raise DecodeError(f"negative length {n} for non-nullable records at byte {pos - 4}")
    end = pos + n
    return _view(buf, pos, end), end


def read_nullable_records(buf: Buffer, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_int32(buf, pos)
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid records length {n} at byte {pos - 4}")
        return None, pos
    end = pos + n
    return _view(buf, pos, end), end


def read_compact_records(buf: Buffer, pos: int) -> tuple[memoryview, int]:
    start = pos
    n, pos = read_unsigned_varint(buf, pos)
    if n == 0:
        raise DecodeError(f"null for non-nullable compact records at byte {start}")
    end = pos + n - 1
    return _view(buf, pos, end), end


def read_compact_nullable_records(buf: Buffer, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_unsigned_varint(buf, pos)
    if n == 0:
        return None, pos
    end = pos + n - 1
    return _view(buf, pos, end), end


def size_bytes(value: Buffer) -> int:
    return 4 + _bytes_len(value)


def size_nullable_bytes(value: Buffer | None) -> int:
    return 4 if value is None else 4 + _bytes_len(value)


def size_compact_bytes(value: Buffer) -> int:
    n = _bytes_len(value)
    return size_unsigned_varint(n + 1) + n


def size_compact_nullable_bytes(value: Buffer | None) -> int:
    return 1 if value is None else size_compact_bytes(value)


# --- UUID -------------------------------------------------------------------------------------------

ZERO_UUID = uuid.UUID(int=0)


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    try:
        out += value.bytes
    except AttributeError:
        raise EncodeError(f"expected a UUID, got {type(value).__name__}") from None


def read_uuid(buf: Buffer, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if pos < 0 or end > len(buf):
        raise DecodeError(f"truncated uuid at byte {pos}")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


# --- array lengths ----------------------------------------------------------------------------------


def write_array_length(out: bytearray, count: int | None) -> None:
    """Classic array: int32 count, -1 for null."""
    out += _NULL32 if count is None else INT32.pack(count)


def write_compact_array_length(out: bytearray, count: int | None) -> None:
    """Compact array: unsigned varint count+1, 0 for null."""
    if count is None:
        out.append(0)
    else:
        out += encode_unsigned_varint(count + 1)


def read_array_length(buf: Buffer, pos: int) -> tuple[int | None, int]:
    """Returns None for a null array; the caller decides whether null is allowed.

    A count larger than the bytes left is rejected here, since every element takes at least one byte:
    that stops a forged count from making the caller loop or allocate for nothing.
    """
    n, end = read_int32(buf, pos)
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid array length {n} at byte {pos}")
        return None, end
    if n > len(buf) - end:
        raise DecodeError(f"array of {n} elements at byte {pos} overruns the buffer")
    return n, end


def read_compact_array_length(buf: Buffer, pos: int) -> tuple[int | None, int]:
    n, end = read_unsigned_varint(buf, pos)
    if n == 0:
        return None, end
    n -= 1
    if n > len(buf) - end:
        raise DecodeError(f"array of {n} elements at byte {pos} overruns the buffer")
    return n, end


def write_array(
    out: bytearray, items: Sequence[T] | None, write_item: Callable[[bytearray, T], None], compact: bool
) -> None:
    if items is None:
        (write_compact_array_length if compact else write_array_length)(out, None)
        return
    (write_compact_array_length if compact else write_array_length)(out, len(items))
    for item in items:
        write_item(out, item)


def read_array(
    buf: Buffer, pos: int, read_item: Callable[[Buffer, int], tuple[T, int]], compact: bool
) -> tuple[list[T] | None, int]:
    n, pos = (read_compact_array_length if compact else read_array_length)(buf, pos)
    if n is None:
        return None, pos
    items: list[T] = []
    for _ in range(n):
        item, pos = read_item(buf, pos)
        items.append(item)
    return items, pos


# --- tagged fields ----------------------------------------------------------------------------------


def read_tagged_fields(buf: Buffer, pos: int) -> tuple[TaggedFields, int]:
    """Reads a whole tagged-field section, keeping every field raw (tags strictly increasing)."""
    count, pos = read_unsigned_varint(buf, pos)
    if count == 0:
        return [], pos
    fields: TaggedFields = []
    last = -1
    for _ in range(count):
        tag, pos = read_unsigned_varint(buf, pos)
        if tag <= last:
            raise DecodeError(f"tagged field {tag} out of order at byte {pos}")
        last = tag
        size, pos = read_unsigned_varint(buf, pos)
        end = pos + size
        fields.append((tag, _blob(buf, pos, end)))
        pos = end
    return fields, pos


def write_tagged_fields(out: bytearray, fields: Sequence[tuple[int, Buffer]]) -> None:
    out += encode_unsigned_varint(len(fields))
    for tag, value in fields:
        out += encode_unsigned_varint(tag)
        out += encode_unsigned_varint(_bytes_len(value))
        out += value


def size_tagged_fields(fields: Sequence[tuple[int, Buffer]]) -> int:
    size = size_unsigned_varint(len(fields))
    for tag, value in fields:
        n = _bytes_len(value)
        size += size_unsigned_varint(tag) + size_unsigned_varint(n) + n
    return size
