"""Server-side filtering of fetched records: the bytes a member of a filtered group receives.

:func:`filter_fetched` rewrites the record bytes read for one partition so that only records the group's
filter passes are left, keeping every offset where it was, so commits, lag and seeking stay right:

* a batch whose records all pass is returned byte for byte, untouched;
* a batch with some records left out is re-encoded with the survivors at their offsets (gaps, as after
  compaction), keeping its base offset, producer id/epoch/sequence, flags and codec;
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

from sofakafka.protocol.records import (
    LOG_APPEND_TIME,
    MAGIC_V2,
    BatchHeader,
    Record,
    RecordBatchBuilder,
    build_message_set,
    decode_records,
    iter_batches,
)
from sofakafka.protocol.records.buffer import Buffer

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


def _survivors_v2(header: BatchHeader, survivors: list[Record]) -> bytes:
    """The batch re-encoded with its survivors, spanning from its base offset to the last survivor."""
    builder = RecordBatchBuilder(
        base_offset=header.base_offset,
        compression=header.compression,
        timestamp_type=header.timestamp_type,
        log_append_time=header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    for record in survivors:
        builder.append(record)
    return builder.build()


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
        records = decode_records(view, header)
        survivors = [r for r in records if matcher.matches(r.key, r.headers)]
        kept += len(survivors)
        dropped += len(records) - len(survivors)
        if len(survivors) == len(records):
            out += view[header.position:header.end]
            continue
        if survivors:
            out += _survivors_v2(header, survivors) if header.magic == MAGIC_V2 else _survivors_legacy(header,
                                                                                                      survivors)
        first_left_out = survivors[-1].offset + 1 if survivors else (
            header.base_offset if header.magic == MAGIC_V2 else records[0].offset)
        if first_left_out <= header.last_offset:
            out += filtered_marker(first_left_out, header.last_offset, header.max_timestamp)
    out += view[end:]
    return bytes(out), kept, dropped
