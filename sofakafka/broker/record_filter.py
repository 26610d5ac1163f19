"""Server-side filtering of fetched records: the bytes a member of a filtered group receives.

:func:`filter_fetched` rewrites the record bytes read for one partition so that only records the group's
filter passes are left, keeping every offset where it was, so commits, lag and seeking stay right:

* a batch whose records all pass is returned byte for byte, untouched;
* a batch with some records left out keeps its header (base offset, first timestamp, producer id, epoch and
  sequence, flags, codec) and the survivors' encoded bytes as they were (gaps, as after compaction): only
  its length, last offset delta, record count and CRC change;
* when a batch's last records are left out (or all of them), a **filtered-records marker** covers them: a
  control batch (no producer id) from the first left-out offset after the last survivor to the batch's last
  offset, holding one control record at that last offset whose type is :data:`FILTERED_CONTROL_TYPE`, a type
  Kafka does not define. Every client steps over control records without showing them, and that is the
  point: the Java client and kafka-python move their position past any batch anyway (KAFKA-5443), but
  librdkafka commits the offset after the last record it *delivered*, and counts a control record as
  delivered (librdkafka 2.3+), so without the marker a group whose newest records are all filtered out
  would commit short of the log end and show lag it cannot consume. Clients ignore control types they do
  not know (KIP-98 made the key versioned for that);
* control batches (transaction markers) pass untouched, since clients need them for read_committed;
* a v0/v1 entry is rebuilt in its own format with its survivors, and a marker covers its left-out tail
  (a Fetch v4+ client reads mixed formats). A v0-3 fetcher gets the result down-converted, where control
  batches have no form: such old clients (before Kafka 0.11) cannot step over a filtered tail;
* a partial entry at the end (cut by the fetch's byte limits) is passed as it is; the client discards it.

This decodes (and decompresses) every record of the partitions it filters: it runs on the replica
manager's read threads, and only for members of groups that have a filter; every other fetch keeps its
stored bytes untouched.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Protocol

import crc32c

from sofakafka.protocol.errors import CorruptRecordError, DecodeError
from sofakafka.protocol.records import (
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_V2,
    V2_HEADER_SIZE,
    BatchHeader,
    Record,
    RecordBatchBuilder,
    build_message_set,
    compress,
    decode_records,
    iter_batches,
)
from sofakafka.protocol.records.buffer import Buffer
from sofakafka.protocol.records.header import (
    V2_ATTRIBUTES,
    V2_CRC,
    V2_LAST_OFFSET_DELTA,
    V2_LENGTH,
    V2_RECORDS_COUNT,
)
from sofakafka.protocol.records.v2 import records_region
from sofakafka.protocol.records.varint import decode_varint, decode_varlong

FILTERED_CONTROL_TYPE = 0x5346
"""The control record type of a filtered-records marker ("SF"); Kafka's own types are small numbers."""
_CONTROL_KEY = struct.pack(">hh", 0, FILTERED_CONTROL_TYPE)


class RecordMatcher(Protocol):
    """What decides which records a filtered fetch keeps (``sofakafka.ldc.RecordFilter`` and combinations)."""

    def matches(self, key: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> bool: ...


def filtered_marker(first_offset: int, last_offset: int, timestamp: int) -> bytes:
    """A control batch over ``first_offset .. last_offset`` with one marker record at ``last_offset``."""
    builder = RecordBatchBuilder(base_offset=first_offset, is_control=True)
    builder.append_record(last_offset, max(timestamp, 0), _CONTROL_KEY, None)
    return builder.build()


def _scan_record(data: bytes, pos: int) -> tuple[int, int, bytes | None, list[tuple[str, bytes | None]]]:
    """``(end, offset delta, key, headers)`` of the v2 record at ``pos``: what a filter looks at, without
    copying the value (``v2.decode_record`` decodes everything)."""
    length, p = decode_varint(data, pos)
    end = p + length
    if length < 0 or end > len(data):
        raise DecodeError(f"record length {length} overruns the batch")
    _ts_delta, p = decode_varlong(data, p + 1)  # attributes byte, then the timestamp delta
    offset_delta, p = decode_varint(data, p)
    n, p = decode_varint(data, p)
    key = None if n < 0 else data[p:p + n]
    p += max(n, 0)
    n, p = decode_varint(data, p)
    p += max(n, 0)
    count, p = decode_varint(data, p)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        n, p = decode_varint(data, p)
        name = data[p:p + n].decode("utf-8")
        p += n
        n, p = decode_varint(data, p)
        headers.append((name, None if n < 0 else data[p:p + n]))
        p += max(n, 0)
    if p != end:
        raise DecodeError(f"record declares {length} bytes but its fields use {length - (end - p)}")
    return end, offset_delta, key, headers


def _filter_v2(view: memoryview, header: BatchHeader, matcher: RecordMatcher) -> tuple[bytes, int, int, int]:
    """``(survivors' batch or b"", kept, dropped, last kept offset or -1)`` for one v2 data batch.

    The survivors' encoded bytes are copied as they are: a record stores its offset and timestamp as deltas
    from the batch's base offset and first timestamp, which the rewritten batch keeps, so nothing is
    re-encoded; only the header's length, last offset delta, record count and CRC change (and the body is
    compressed again with the batch's codec when it was compressed).
    """
    data = records_region(view, header)
    parts: list[bytes] = []
    last_kept = -1
    pos = 0
    try:
        for _ in range(header.record_count):
            start = pos
            pos, offset_delta, key, headers = _scan_record(data, pos)
            if matcher.matches(key, headers):
                parts.append(data[start:pos])
                last_kept = header.base_offset + offset_delta
    except (DecodeError, IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(header.position, f"record {len(parts)}: {exc}") from exc
    kept, dropped = len(parts), header.record_count - len(parts)
    if dropped == 0 or not parts:
        return b"", kept, dropped, last_kept
    body = compress(header.compression, b"".join(parts), magic=MAGIC_V2)
    out = bytearray(view[header.position:header.position + V2_HEADER_SIZE])
    struct.pack_into(">i", out, V2_LENGTH, V2_HEADER_SIZE - LOG_OVERHEAD + len(body))
    struct.pack_into(">i", out, V2_LAST_OFFSET_DELTA, last_kept - header.base_offset)
    struct.pack_into(">i", out, V2_RECORDS_COUNT, kept)
    out += body
    struct.pack_into(">I", out, V2_CRC, crc32c.crc32c(memoryview(out)[V2_ATTRIBUTES:]))
    return bytes(out), kept, dropped, last_kept


def _survivors_legacy(header: BatchHeader, survivors: list[Record]) -> bytes:
    lat = header.timestamp_type == LOG_APPEND_TIME
    return build_message_set(survivors, magic=header.magic, compression=header.compression,
                             timestamp_type=LOG_APPEND_TIME if lat else 0,
                             log_append_time=header.max_timestamp if lat else None)


def filter_fetched(data: Buffer, matcher: RecordMatcher) -> tuple[bytes, int, int]:
    """``(filtered bytes, records kept, records left out)`` for the stored bytes of one partition read."""
    view = memoryview(data)
    out = bytearray()
    kept = dropped = 0
    end = 0
    for header in iter_batches(view):
        end = header.end
        if header.magic == MAGIC_V2 and header.is_control:
            out += view[header.position:header.end]
            continue
        if header.magic == MAGIC_V2:
            rewritten, k, d, last_kept = _filter_v2(view, header, matcher)
            first_record = header.base_offset
        else:
            records = decode_records(view, header)
            survivors = [r for r in records if matcher.matches(r.key, r.headers)]
            k, d = len(survivors), len(records) - len(survivors)
            last_kept = survivors[-1].offset if survivors else -1
            rewritten = _survivors_legacy(header, survivors) if survivors and d else b""
            first_record = records[0].offset if records else header.base_offset
        kept += k
        dropped += d
        if d == 0:
            out += view[header.position:header.end]
            continue
        out += rewritten
        first_left_out = last_kept + 1 if k else first_record
        if first_left_out <= header.last_offset:
            out += filtered_marker(first_left_out, header.last_offset, header.max_timestamp)
    out += view[end:]
    return bytes(out), kept, dropped
