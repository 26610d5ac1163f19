"""Record formats: message sets v0/v1, record batches v2, compression, offset assignment (sans-IO).

The stable surface other layers code against is re-exported here; see FORMATS.md §1-4 and §8.
"""

from __future__ import annotations

from sofakafka.protocol.errors import CorruptRecordError
from sofakafka.protocol.records.buffer import Buffer
from sofakafka.protocol.records.compression import CompressionType, compress, decompress
from sofakafka.protocol.records.convert import convert_to_v2, down_convert
from sofakafka.protocol.records.header import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    V2_HEADER_SIZE,
    BatchHeader,
    batch_producer,
    compute_crc,
    iter_batches,
    peek_batch_header,
    read_batch_header,
    validate_batch,
)
from sofakafka.protocol.records.legacy import (
    build_message_set,
    decode_legacy_records,
    validate_inner_messages,
)
from sofakafka.protocol.records.produce import (
    DEFAULT_MAX_MESSAGE_BYTES,
    AssignedOffsets,
    InvalidProduceError,
    ProduceValidation,
    assign_offsets,
    validate_produce,
)
from sofakafka.protocol.records.v2 import (
    ControlRecordType,
    EndTransactionMarker,
    Record,
    RecordBatchBuilder,
    build_batch,
    build_end_txn_marker,
    decode_control_key,
    decode_v2_records,
    encode_control_key,
)


def decode_records(buf: Buffer, header: BatchHeader) -> list[Record]:
    """All records of one entry with absolute offsets, decompressing when needed.

    Raises :class:`CorruptRecordError` (with the entry position) for anything undecodable. Does not check
    the CRC: call :func:`validate_batch` first when the bytes are untrusted.
    """
    if header.magic == MAGIC_V2:
        return decode_v2_records(buf, header)
    return decode_legacy_records(buf, header)


__all__ = [
    "CREATE_TIME",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAGIC_V0",
    "MAGIC_V1",
    "MAGIC_V2",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "NO_TIMESTAMP_TYPE",
    "V2_HEADER_SIZE",
    "AssignedOffsets",
    "BatchHeader",
    "Buffer",
    "CompressionType",
    "ControlRecordType",
    "CorruptRecordError",
    "EndTransactionMarker",
    "InvalidProduceError",
    "ProduceValidation",
    "Record",
    "RecordBatchBuilder",
    "assign_offsets",
    "batch_producer",
    "build_batch",
    "build_end_txn_marker",
    "build_message_set",
    "compress",
    "compute_crc",
    "convert_to_v2",
    "decode_control_key",
    "decode_records",
    "decompress",
    "down_convert",
    "encode_control_key",
    "iter_batches",
    "peek_batch_header",
    "read_batch_header",
    "validate_batch",
    "validate_inner_messages",
    "validate_produce",
]
