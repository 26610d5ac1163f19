"""Message sets v0 and v1 (magic 0 and 1), including compressed wrapper messages (FORMATS.md §2).

A compressed set is one wrapper message whose value is a compressed inner message set. Inner offsets are
absolute for magic 0 and relative (0..n-1) for magic 1; the wrapper carries the last inner offset.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable

from sofakafka.protocol.errors import CorruptRecordError, DecodeError, EncodeError
from sofakafka.protocol.records.buffer import Buffer
from sofakafka.protocol.records.compression import compress, decompress
from sofakafka.protocol.records.header import (
    ATTR_TIMESTAMP_TYPE,
    CREATE_TIME,
    LOG_APPEND_TIME,
    MAGIC_V0,
    MAGIC_V1,
    NO_TIMESTAMP,
    BatchHeader,
    iter_batches,
    validate_batch,
)
from sofakafka.protocol.records.v2 import Record


def encode_message(magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    """The message bytes after the log overhead: crc, magic, attributes, [timestamp], key, value."""
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise EncodeError(f"magic {magic} is not a message set format")
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == MAGIC_V1:
        parts.append(struct.pack(">q", timestamp))
    for b in (key, value):
        parts.append(struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b)
    body = b"".join(parts)
    return struct.pack(">I", zlib.crc32(body)) + body


def encode_entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def build_message_set(
    records: Iterable[Record],
    *,
    magic: int,
    compression: int = 0,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
) -> bytes:
    """Encode records (absolute increasing offsets) as a v0/v1 message set.

    Uncompressed: one entry per record at its own offset. Compressed: one wrapper at the last offset.
    Records with headers cannot be carried by these formats; callers converting down strip them first.
    """
    recs = list(records)
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise EncodeError(f"magic {magic} is not a message set format")
    if not 0 <= compression <= 3:
        raise EncodeError(f"codec {compression} is not valid for magic {magic}")
    if timestamp_type == LOG_APPEND_TIME and log_append_time is None:
        raise EncodeError("LogAppendTime message sets need the broker's log_append_time")
    ts_attr = ATTR_TIMESTAMP_TYPE if magic == MAGIC_V1 and timestamp_type == LOG_APPEND_TIME else 0
    previous: int | None = None
    for r in recs:
        if r.headers:
            raise EncodeError(f"magic {magic} messages cannot carry headers")
        if previous is not None and r.offset <= previous:
            raise EncodeError(f"offset {r.offset} is not above the previous offset {previous}")
        previous = r.offset

    def ts(r: Record) -> int:
        return log_append_time if ts_attr and log_append_time is not None else r.timestamp

    if compression == 0:
        return b"".join(encode_entry(r.offset, encode_message(magic, ts_attr, ts(r), r.key, r.value)) for r in recs)
    if not recs:
        raise EncodeError("a compressed message set needs at least one message")
    base = recs[0].offset
    inner = b"".join(
        encode_entry(r.offset - base if magic == MAGIC_V1 else r.offset,
                     encode_message(magic, ts_attr, ts(r), r.key, r.value))
        for r in recs
    )
    if ts_attr:
        assert log_append_time is not None
        wrapper_ts = log_append_time
    else:
        wrapper_ts = max(r.timestamp for r in recs)
    payload = compress(compression, inner, magic=magic)
    return encode_entry(recs[-1].offset, encode_message(magic, compression | ts_attr, wrapper_ts, None, payload))


def _key_value(buf: Buffer, h: BatchHeader) -> tuple[bytes | None, bytes | None]:
    at = h.position + (18 if h.magic == MAGIC_V0 else 26)
    out: list[bytes | None] = []
    for _ in range(2):
        (n,) = struct.unpack_from(">i", buf, at)
        at += 4
        if n < 0:
            out.append(None)
        else:
            if at + n > h.end:
                raise CorruptRecordError(h.position, "key or value overruns the message")
            out.append(bytes(buf[at : at + n]))
            at += n
    return out[0], out[1]


def inner_message_set(buf: Buffer, wrapper: BatchHeader) -> tuple[bytes, list[BatchHeader]]:
    """Decompress a wrapper and parse the shallow headers of its inner messages (offsets as stored)."""
    _, value = _key_value(buf, wrapper)
    if value is None:
        raise CorruptRecordError(wrapper.position, "compressed wrapper message has a null value")
    try:
        inner = decompress(wrapper.compression, value, magic=wrapper.magic)
    except DecodeError as e:
        raise CorruptRecordError(wrapper.position, str(e)) from e
    try:
        headers = list(iter_batches(inner))
    except CorruptRecordError as e:
        raise CorruptRecordError(wrapper.position, f"inner message at byte {e.position}: {e.reason}") from e
    consumed = headers[-1].end if headers else 0
    if consumed != len(inner):
        raise CorruptRecordError(wrapper.position, "truncated inner message set")
    if not headers:
        raise CorruptRecordError(wrapper.position, "compressed wrapper holds no messages")
    for h in headers:
        if h.compression:
            raise CorruptRecordError(wrapper.position, f"nested compressed message at inner byte {h.position}")
        if h.magic > MAGIC_V1:
            raise CorruptRecordError(wrapper.position, f"inner message has magic {h.magic}")
    return inner, headers


def validate_inner_messages(buf: Buffer, wrapper: BatchHeader) -> list[BatchHeader]:
    """Check each inner message's CRC and structure (what the broker does for compressed v0/v1 input).

    Returns the inner headers (positions within the decompressed set) for further checks.
    """
    inner, headers = inner_message_set(buf, wrapper)
    for h in headers:
        try:
            validate_batch(inner, h)
        except CorruptRecordError as e:
            raise CorruptRecordError(wrapper.position, f"inner message at byte {h.position}: {e.reason}") from e
    return headers


def decode_legacy_records(buf: Buffer, header: BatchHeader) -> list[Record]:
    if not header.compression:
        key, value = _key_value(buf, header)
        return [Record(header.base_offset, header.max_timestamp, key, value, [])]
    inner, headers = inner_message_set(buf, header)
    wrapper_offset = header.last_offset
    if header.magic == MAGIC_V1:
        last_relative = headers[-1].last_offset
        if wrapper_offset == 0:
            # librdkafka writes 0 as the wrapper offset; Kafka then treats inner offsets as absolute.
            base = 0
        else:
            base = wrapper_offset - last_relative
            if base < 0:
                raise CorruptRecordError(
                    header.position, f"wrapper offset {wrapper_offset} below last inner offset {last_relative}"
                )
    else:
        base = 0
    use_wrapper_ts = header.magic == MAGIC_V1 and header.timestamp_type == LOG_APPEND_TIME
    out: list[Record] = []
    for h in headers:
        key, value = _key_value(inner, h)
        ts = header.max_timestamp if use_wrapper_ts else (h.max_timestamp if h.magic == MAGIC_V1 else NO_TIMESTAMP)
        out.append(Record(base + h.last_offset, ts, key, value, []))
    return out

