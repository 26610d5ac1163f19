"""The broker's produce hot path: validate what a client sent, then assign offsets in place.

What a 2.6 broker checks is listed in FORMATS.md §8 (ProduceRequest.validateRecords,
Log.analyzeAndValidateRecords, LogValidator). Most of it is visible in batch headers, so for the common
case (uncompressed v2, default topic configs) validation is per batch: the CRC pass over the bytes is the
only work proportional to the payload, and nothing per record runs in Python.

Kafka looks inside records for these, and so do we, only when they apply:
- compressed magic 0/1: each inner message's own CRC and magic, and nested compression;
- compressed v2: the payload must decompress and hold exactly ``recordsCount`` records (a corrupt stream
  would otherwise be stored and break every fetcher);
- ``cleanup.policy=compact``: every record needs a key;
- a finite ``message.timestamp.difference.max.ms`` with CreateTime: every record timestamp is checked
  (the header's maxTimestamp only bounds it from above);
- ``check_records=True``: decode every record, as Kafka's uncompressed path does while iterating.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c

from sofakafka.protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from sofakafka.protocol.records.buffer import Buffer
from sofakafka.protocol.records.compression import CompressionType
from sofakafka.protocol.records.header import (
    ATTR_TIMESTAMP_TYPE,
    CREATE_TIME,
    MAGIC_V2,
    NO_TIMESTAMP,
    V2_ATTRIBUTES,
    V2_CRC,
    V2_MAX_TIMESTAMP,
    V2_PARTITION_LEADER_EPOCH,
    BatchHeader,
    iter_batches,
    validate_batch,
)
from sofakafka.protocol.records.legacy import (
    decode_legacy_records,
    validate_inner_messages,
)
from sofakafka.protocol.records.v2 import Record, count_v2_records, decode_v2_records

DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka 2.6 max.message.bytes default


class InvalidProduceError(KafkaError):
    """A partition's produce data refused with ``code``; ``position`` is the offending batch, if one.

    ``record_errors`` lists ``(record index within the batch, message)`` for per-record failures, which
    Produce v8+ returns in RecordErrors.
    """

    def __init__(self, code: ErrorCode, reason: str, position: int | None = None,
                 record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(code, reason)
        self.reason = reason
        self.position = position
        self.record_errors = record_errors or []


@dataclass(frozen=True, slots=True)
class ProduceValidation:
    """What the append path needs after validation."""

    batches: list[BatchHeader]
    magic: int
    valid_bytes: int  # Kafka trims a partial trailing entry rather than failing the request
    record_count: int  # v2: sum of header counts; v0/v1: shallow entries unless decoded
    in_place: bool  # True when assign_offsets may rewrite the bytes (v2 in, v2 stored, same codec)
    record_errors: list[tuple[int, str]] = field(default_factory=list)


def validate_produce(
    buf: Buffer,
    *,
    produce_version: int | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    message_format_magic: int = MAGIC_V2,
    target_compression: int | None = None,
    compacted: bool = False,
    timestamp_type: int = CREATE_TIME,
    timestamp_difference_max_ms: int | None = None,
    now_ms: int | None = None,
    check_records: bool = False,
) -> ProduceValidation:
    """Run the broker-side produce checks on one partition's data; raise :class:`InvalidProduceError`.

    ``target_compression`` is the topic's ``compression.type`` as a codec id (None = ``producer``).
    Error codes: CORRUPT_MESSAGE for bytes that fail CRC or structure, MESSAGE_TOO_LARGE for a batch
    over ``max_message_bytes``, INVALID_RECORD for well-formed data the broker refuses,
    UNSUPPORTED_COMPRESSION_TYPE for zstd below Produce v7, UNSUPPORTED_FOR_MESSAGE_FORMAT for producer
    ids on a pre-v2 topic, INVALID_TIMESTAMP for a record timestamp too far from ``now_ms``.
    """
    try:
        batches = list(iter_batches(buf))
    except CorruptRecordError as e:
        raise InvalidProduceError(ErrorCode.CORRUPT_MESSAGE, e.reason, e.position) from e
    if not batches:
        raise InvalidProduceError(ErrorCode.INVALID_RECORD, "produce data holds no complete record batch")
    first = batches[0]
    magic = first.magic

    # ProduceRequest.validateRecords: Produce v3+ carries exactly one v2 batch.
    if produce_version is not None and produce_version >= 3:
        if len(batches) != 1:
            raise InvalidProduceError(ErrorCode.INVALID_RECORD,
                                      f"Produce v{produce_version} must carry exactly one record batch, not {len(batches)}")
        if magic != MAGIC_V2:
            raise InvalidProduceError(ErrorCode.INVALID_RECORD,
                                      f"Produce v{produce_version} requires magic 2, got {magic}", 0)
        if first.compression == CompressionType.ZSTD and produce_version < 7:
            raise InvalidProduceError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                      f"zstd needs Produce v7+, got v{produce_version}", 0)

    # Log.analyzeAndValidateRecords: per batch, header and CRC only.
    for h in batches:
        if h.magic == MAGIC_V2 and h.base_offset != 0:
            raise InvalidProduceError(ErrorCode.INVALID_RECORD,
                                      f"baseOffset of a produced batch must be 0, got {h.base_offset}", h.position)
        if h.size > max_message_bytes:
            raise InvalidProduceError(ErrorCode.MESSAGE_TOO_LARGE,
                                      f"batch of {h.size} bytes exceeds max.message.bytes {max_message_bytes}",
                                      h.position)
        try:
            validate_batch(buf, h)
        except CorruptRecordError as e:
            raise InvalidProduceError(ErrorCode.CORRUPT_MESSAGE, e.reason, e.position) from e

    # LogValidator.
    if any(h.magic != magic for h in batches):
        raise InvalidProduceError(ErrorCode.INVALID_RECORD, "batches of one partition mix magic values")
    if (magic == MAGIC_V2 or first.compression) and len(batches) != 1:
        raise InvalidProduceError(ErrorCode.INVALID_RECORD,
                                  "magic 2 or compressed data must be exactly one batch", batches[1].position)
    record_count = 0
    for h in batches:
        if h.magic == MAGIC_V2:
            span = h.last_offset - h.base_offset + 1
            if span <= 0:
                raise InvalidProduceError(ErrorCode.INVALID_RECORD,
                                          f"invalid offset range [{h.base_offset}, {h.last_offset}]", h.position)
            if h.record_count <= 0:
                raise InvalidProduceError(ErrorCode.INVALID_RECORD, f"invalid record count {h.record_count}",
                                          h.position)
            if span != h.record_count:
                raise InvalidProduceError(
                    ErrorCode.INVALID_RECORD,
                    f"offset range [{h.base_offset}, {h.last_offset}] disagrees with record count {h.record_count}",
                    h.position,
                )
            if h.is_control:
                raise InvalidProduceError(ErrorCode.INVALID_RECORD, "clients may not write control batches",
                                          h.position)
            if h.has_producer_id and h.base_sequence < 0:
                raise InvalidProduceError(ErrorCode.INVALID_RECORD,
                                          f"invalid sequence {h.base_sequence} for producer id {h.producer_id}",
                                          h.position)
            if (h.is_transactional or h.has_producer_id) and message_format_magic < MAGIC_V2:
                raise InvalidProduceError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                                          "idempotent/transactional batches need message format v2", h.position)
        record_count += h.record_count

    deep_ts = (timestamp_type == CREATE_TIME and timestamp_difference_max_ms is not None)
    if deep_ts and now_ms is None:
        raise ValueError("checking timestamps needs now_ms")
    record_errors: list[tuple[int, str]] = []
    for h in batches:
        if h.magic < MAGIC_V2 and h.compression:
            try:
                inner = validate_inner_messages(buf, h)
            except CorruptRecordError as e:
                raise InvalidProduceError(ErrorCode.CORRUPT_MESSAGE, e.reason, h.position) from e
            for i, ih in enumerate(inner):
                if ih.magic != h.magic:
                    record_errors.append((i, f"inner magic {ih.magic} differs from wrapper magic {h.magic}"))
            if record_errors:
                raise InvalidProduceError(ErrorCode.INVALID_RECORD, record_errors[0][1], h.position, record_errors)
        elif h.magic == MAGIC_V2 and h.compression and not (check_records or compacted or deep_ts):
            try:
                n = count_v2_records(buf, h)
            except CorruptRecordError as e:
                raise InvalidProduceError(ErrorCode.CORRUPT_MESSAGE, e.reason, h.position) from e
            if n != h.record_count:
                raise InvalidProduceError(ErrorCode.CORRUPT_MESSAGE,
                                          f"batch declares {h.record_count} records but holds {n}", h.position)
        if check_records or compacted or deep_ts:
            try:
                records = decode_v2_records(buf, h) if h.magic == MAGIC_V2 else decode_legacy_records(buf, h)
            except CorruptRecordError as e:
                raise InvalidProduceError(ErrorCode.CORRUPT_MESSAGE, e.reason, h.position) from e
            errs = _record_errors(records, h, compacted, deep_ts, timestamp_difference_max_ms, now_ms)
            if errs:
                code = ErrorCode.INVALID_TIMESTAMP if all("timestamp" in m for _, m in errs) else ErrorCode.INVALID_RECORD
                raise InvalidProduceError(code, errs[0][1], h.position, errs)

    in_place = (
        magic == MAGIC_V2
        and message_format_magic == MAGIC_V2
        and (target_compression is None or target_compression == first.compression)
    )
    return ProduceValidation(batches, magic, batches[-1].end, record_count, in_place, record_errors)


def _record_errors(records: list[Record], h: BatchHeader, compacted: bool, check_ts: bool,
                   max_diff: int | None, now_ms: int | None) -> list[tuple[int, str]]:
    errs: list[tuple[int, str]] = []
    for i, r in enumerate(records):
        if compacted and r.key is None:
            errs.append((i, "compacted topic cannot accept a record without a key"))
        elif (check_ts and max_diff is not None and now_ms is not None and h.timestamp_type == CREATE_TIME
              and r.timestamp != NO_TIMESTAMP and abs(r.timestamp - now_ms) > max_diff):
            errs.append((i, f"timestamp {r.timestamp} is out of range (now {now_ms}, max difference {max_diff} ms)"))
    return errs


@dataclass(frozen=True, slots=True)
class AssignedOffsets:
    """Result of :func:`assign_offsets`, in LogAppendInfo's terms."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    # v2 batches are indexed by their last offset, so that is where the time index points.
    shallow_offset_of_max_timestamp: int
    batch_count: int


def assign_offsets(
    buf: bytearray,
    base_offset: int,
    *,
    log_append_time: int | None,
    partition_leader_epoch: int,
) -> AssignedOffsets:
    """Stamp v2 batches with offsets from ``base_offset``, the leader epoch and maybe LogAppendTime.

    Works in place on header fields only. baseOffset and partitionLeaderEpoch sit before the CRC range,
    so they never cost a CRC; the CRC is recomputed only when LogAppendTime changes attributes and
    maxTimestamp (Kafka's setMaxTimestamp skips it when nothing changes). Records are never touched.
    Each batch takes ``lastOffsetDelta + 1`` offsets, which validation has matched to its record count.
    """
    offset = base_offset
    max_ts = NO_TIMESTAMP
    max_ts_offset = -1
    count = 0
    for h in iter_batches(buf):
        if h.magic != MAGIC_V2:
            raise ValueError(f"entry at byte {h.position} is magic {h.magic}; convert it before assigning offsets")
        p = h.position
        struct.pack_into(">q", buf, p, offset)
        struct.pack_into(">i", buf, p + V2_PARTITION_LEADER_EPOCH, partition_leader_epoch)
        last = offset + h.last_offset - h.base_offset
        batch_max = h.max_timestamp
        if log_append_time is not None:
            (attrs,) = struct.unpack_from(">h", buf, p + V2_ATTRIBUTES)
            new_attrs = attrs | ATTR_TIMESTAMP_TYPE
            if new_attrs != attrs or h.max_timestamp != log_append_time:
                struct.pack_into(">h", buf, p + V2_ATTRIBUTES, new_attrs)
                struct.pack_into(">q", buf, p + V2_MAX_TIMESTAMP, log_append_time)
                struct.pack_into(">I", buf, p + V2_CRC, crc32c.crc32c(memoryview(buf)[p + V2_ATTRIBUTES : h.end]))
            batch_max = log_append_time
        if batch_max > max_ts or max_ts_offset < 0:
            max_ts = max(batch_max, max_ts)
            max_ts_offset = last
        offset = last + 1
        count += 1
    if count == 0:
        raise ValueError("no complete record batch to assign offsets to")
    return AssignedOffsets(base_offset, offset - 1, max_ts, max_ts_offset, count)

