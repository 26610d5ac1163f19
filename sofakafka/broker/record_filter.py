"""Server-side filtering of fetched records: the bytes a member of a filtered group receives.

:func:`filter_fetched` rewrites the record bytes read for one partition so that only records the group's
:class:`~sofakafka.ldc.filters.RecordFilter` passes are left, the way log compaction leaves a log:

* a batch whose records all pass is returned byte for byte, untouched;
* a batch with some records left out is re-encoded with the survivors, keeping its base offset, last offset
  delta, producer id/epoch/sequence, flags and codec (``storage.cleaner.rebuild_batch``): the survivors keep
  their offsets, so the client sees gaps as after compaction;
* a batch with no survivor becomes an empty batch header spanning the same offsets
  (``storage.cleaner.empty_batch_header``): clients move their position past a batch's last offset, so a
  group whose newest records are all filtered out still reaches the log end (commits and lag stay right)
  instead of fetching the same offset forever;
* control batches (transaction markers) pass untouched, since clients need them for read_committed;
* a v0/v1 entry is rebuilt in its own format when records survive, and replaced by an empty v2 batch header
  spanning its offsets when none does (a Fetch v4+ client reads mixed formats; a v0-3 fetcher gets the
  result down-converted, where an empty batch has no form: such old clients cannot skip a filtered tail);
* a partial entry at the end (cut by the fetch's byte limits) is passed as it is; the client discards it.

This decodes (and decompresses) every record of the partitions it filters: it runs on the replica
manager's read threads, and only for members of groups that have a filter; every other fetch keeps its
stored bytes untouched.
"""

from __future__ import annotations

from sofakafka.ldc import RecordFilter
from sofakafka.protocol.records import MAGIC_V2, BatchHeader, decode_records, iter_batches
from sofakafka.protocol.records.buffer import Buffer
from sofakafka.storage.cleaner import empty_batch_header, rebuild_batch


def _empty_span(header: BatchHeader, first_offset: int) -> bytes:
    """An empty v2 batch header over ``first_offset .. header.last_offset`` (for a legacy entry)."""
    span = BatchHeader(
        position=0, size=0, magic=MAGIC_V2, base_offset=first_offset, last_offset=header.last_offset,
        max_timestamp=max(header.max_timestamp, -1), first_timestamp=-1,
        timestamp_type=max(header.timestamp_type, 0), compression=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, partition_leader_epoch=-1, is_transactional=False, is_control=False, record_count=0,
        crc=0,
    )
    return empty_batch_header(span)


def filter_fetched(data: Buffer, record_filter: RecordFilter) -> tuple[bytes, int, int]:
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
        survivors = [r for r in records if record_filter.matches(r.key, r.headers)]
        kept += len(survivors)
        dropped += len(records) - len(survivors)
        if len(survivors) == len(records):
            out += view[header.position:header.end]
        elif survivors:
            out += rebuild_batch(header, survivors)
        elif header.magic == MAGIC_V2:
            out += empty_batch_header(header)
        elif records:
            out += _empty_span(header, records[0].offset)
    out += view[end:]
    return bytes(out), kept, dropped
