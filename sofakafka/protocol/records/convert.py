"""Format conversion between message sets v0/v1 and record batches v2.

Up-conversion is what a 2.6 broker stores when an old producer (Produce v0-2) writes to a topic whose
message format is v2: every record of the request becomes one v2 batch (LogValidator's convert path).
Down-conversion is what a Fetch v0-3 client receives when the stored data is newer than it can read
(RecordsUtil.downConvert): control batches vanish, headers are dropped, offsets and timestamps are kept.
"""

from __future__ import annotations

from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.records.buffer import Buffer
from sofakafka.protocol.records.compression import CompressionType
from sofakafka.protocol.records.header import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_TIMESTAMP,
    iter_batches,
)
from sofakafka.protocol.records.legacy import build_message_set, decode_legacy_records
from sofakafka.protocol.records.v2 import Record, RecordBatchBuilder, decode_v2_records


def convert_to_v2(
    buf: Buffer,
    *,
    base_offset: int | None = None,
    compression: int | None = None,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One v2 batch holding every record of a v0/v1 message set.

    ``base_offset=None`` keeps the records' own offsets (a stored set being migrated); a number renumbers
    them consecutively from it, as the broker does on append. ``compression=None`` keeps the codec of the
    first entry (the topic's ``compression.type=producer``). v0 records have no timestamp and stay at -1
    under CreateTime. Producer id/epoch/sequence are absent in v0/v1 and stay -1.
    """
    records: list[Record] = []
    codec = 0
    for i, h in enumerate(iter_batches(buf)):
        if h.magic == MAGIC_V2:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"entry at byte {h.position} is already magic 2")
        if i == 0:
            codec = h.compression
        records.extend(decode_legacy_records(buf, h))
    if base_offset is not None:
        records = [Record(base_offset + i, r.timestamp, r.key, r.value, []) for i, r in enumerate(records)]
    start = records[0].offset if records else (base_offset or 0)
    builder = RecordBatchBuilder(
        base_offset=start,
        compression=codec if compression is None else compression,
        timestamp_type=timestamp_type,
        log_append_time=log_append_time,
        partition_leader_epoch=partition_leader_epoch,
    )
    for r in records:
        builder.append(r)
    return builder.build()


def down_convert(buf: Buffer, to_magic: int, *, first_offset: int = 0) -> bytes:
    """Rewrite stored entries newer than ``to_magic`` for an old fetcher; older or equal entries pass as-is.

    Follows RecordsUtil.downConvert: control batches are dropped for magic < 2; headers are dropped;
    each converted batch keeps its codec, timestamp type and record offsets. For uncompressed output,
    records below ``first_offset`` (the fetch offset) are skipped because old consumers cannot skip them
    inside a batch. A LogAppendTime batch keeps its stored append time (Kafka would stamp the time of the
    conversion). zstd cannot be expressed below magic 2: the caller answers UNSUPPORTED_COMPRESSION_TYPE,
    which this raises as a :class:`KafkaError`.
    """
    if to_magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"down-conversion target must be magic 0 or 1, not {to_magic}")
    out = bytearray()
    view = memoryview(buf)
    for h in iter_batches(buf):
        if h.magic <= to_magic:
            out += view[h.position : h.end]
            continue
        if h.magic == MAGIC_V2 and h.is_control:
            continue
        if h.compression == CompressionType.ZSTD:
            raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                             f"zstd batch at offset {h.base_offset} cannot be converted to magic {to_magic}")
        records = decode_v2_records(buf, h) if h.magic == MAGIC_V2 else decode_legacy_records(buf, h)
        if not h.compression:
            records = [r for r in records if r.offset >= first_offset]
        if not records:
            continue
        lat = h.timestamp_type == LOG_APPEND_TIME
        if to_magic == MAGIC_V0:
            records = [Record(r.offset, NO_TIMESTAMP, r.key, r.value, []) for r in records]
        else:
            records = [Record(r.offset, r.timestamp, r.key, r.value, []) for r in records]
        out += build_message_set(
            records,
            magic=to_magic,
            compression=h.compression,
            timestamp_type=LOG_APPEND_TIME if lat and to_magic == MAGIC_V1 else CREATE_TIME,
            log_append_time=h.max_timestamp if lat else None,
        )
    return bytes(out)
