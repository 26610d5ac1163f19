"""Record batch v2 (magic 2): records with varint fields, headers, producer state, control batches.

FORMATS.md §3. The builder writes exactly the bytes a Kafka 2.6 client would for the same records and
settings (apart from compressed payloads, whose bytes depend on the codec library), so a batch built here
and a batch rewritten in place by :mod:`.produce` can be compared byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import crc32c

from sofakafka.protocol.errors import CorruptRecordError, DecodeError, EncodeError
from sofakafka.protocol.records.buffer import Buffer
from sofakafka.protocol.records.compression import compress, decompress
from sofakafka.protocol.records.header import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CREATE_TIME,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_V2_RECORD_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    V2_ATTRIBUTES,
    V2_CRC,
    V2_HEADER,
    V2_HEADER_SIZE,
    BatchHeader,
)
from sofakafka.protocol.records.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    """One record as applications see it; ``offset`` is absolute, ``timestamp`` -1 when absent."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


# -- record encoding ----------------------------------------------------------------------------------


def _bytes_field(b: bytes | None) -> bytes:
    if b is None:
        return b"\x01"  # zig-zag -1
    return encode_varint(len(b)) + b


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Sequence[Header]) -> bytes:
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta), _bytes_field(key),
             _bytes_field(value), encode_varint(len(headers))]
    for hkey, hvalue in headers:
        if hkey is None:
            raise EncodeError("record header keys may not be null")
        parts.append(_bytes_field(hkey.encode("utf-8")))
        parts.append(_bytes_field(hvalue))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _read_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    n, pos = decode_varint(buf, pos)
    if n < 0:
        if n != -1:
            raise DecodeError(f"negative length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise DecodeError("field overruns the record")
    return bytes(buf[pos:end]), end


def decode_record(buf: Buffer, pos: int, base_offset: int, first_timestamp: int,
                  log_append_time: int | None) -> tuple[Record, int]:
    """Decode one record at ``pos``; returns it and the position after it."""
    length, pos = decode_varint(buf, pos)
    end = pos + length
    if length < 0 or end > len(buf):
        raise DecodeError(f"record length {length} overruns the batch")
    view = memoryview(buf)[:end]
    pos += 1  # attributes: unused in 2.6
    ts_delta, pos = decode_varlong(view, pos)
    offset_delta, pos = decode_varint(view, pos)
    key, pos = _read_bytes(view, pos)
    value, pos = _read_bytes(view, pos)
    count, pos = decode_varint(view, pos)
    if count < 0:
        raise DecodeError(f"negative header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        hkey, pos = _read_bytes(view, pos)
        if hkey is None:
            raise DecodeError("null header key")
        hvalue, pos = _read_bytes(view, pos)
        try:
            headers.append((hkey.decode("utf-8"), hvalue))
        except UnicodeDecodeError as e:
            raise DecodeError(f"header key is not UTF-8: {e}") from e
    if pos != end:
        raise DecodeError(f"record declares {length} bytes but its fields use {length - (end - pos)}")
    timestamp = first_timestamp + ts_delta if log_append_time is None else log_append_time
    return Record(base_offset + offset_delta, timestamp, key, value, headers), end


def records_region(buf: Buffer, header: BatchHeader) -> bytes:
    """The (decompressed) bytes holding the records of a v2 batch."""
    raw = memoryview(buf)[header.position + V2_HEADER_SIZE : header.end]
    try:
        return decompress(header.compression, raw, magic=MAGIC_V2)
    except DecodeError as e:
        raise CorruptRecordError(header.position, str(e)) from e


def decode_v2_records(buf: Buffer, header: BatchHeader) -> list[Record]:
    data = records_region(buf, header)
    lat = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    out: list[Record] = []
    pos = 0
    try:
        for _ in range(header.record_count):
            rec, pos = decode_record(data, pos, header.base_offset, header.first_timestamp, lat)
            out.append(rec)
    except (DecodeError, IndexError) as e:
        raise CorruptRecordError(header.position, f"record {len(out)}: {e}") from e
    if pos != len(data):
        raise CorruptRecordError(header.position, f"{len(data) - pos} bytes left after {header.record_count} records")
    return out


def count_v2_records(buf: Buffer, header: BatchHeader) -> int:
    """Number of records in a v2 batch, found by walking length prefixes only (decompressing if needed).

    Cheaper than decoding: proves the records region is framed as ``recordsCount`` says without building
    any :class:`Record`.
    """
    if header.compression:
        data: Buffer = records_region(buf, header)
        pos, end = 0, len(data)
    else:
        data, pos, end = buf, header.position + V2_HEADER_SIZE, header.end
    n = 0
    try:
        while pos < end:
            length, pos = decode_varint(data, pos)
            if length < MIN_V2_RECORD_SIZE - 1:
                raise DecodeError(f"record length {length} too small")
            pos += length
            n += 1
    except (DecodeError, IndexError) as e:
        raise CorruptRecordError(header.position, f"record {n}: {e}") from e
    if pos != end:
        raise CorruptRecordError(header.position, f"record {n - 1} overruns the end of the records")
    return n


# -- batch building -----------------------------------------------------------------------------------


class RecordBatchBuilder:
    """Accumulates records (absolute, increasing offsets) and encodes one v2 batch.

    With ``timestamp_type=LOG_APPEND_TIME`` the batch's maxTimestamp is ``log_append_time`` and record
    timestamps stay as given (deltas from the first); readers then report ``log_append_time`` for every
    record. That is also the result of stamping a CreateTime batch in place (:func:`assign_offsets`).
    """

    def __init__(
        self,
        *,
        base_offset: int = 0,
        compression: int = 0,
        timestamp_type: int = CREATE_TIME,
        log_append_time: int | None = None,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        if timestamp_type == LOG_APPEND_TIME and log_append_time is None:
            raise EncodeError("LogAppendTime batches need the broker's log_append_time")
        if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise EncodeError(f"timestamp type {timestamp_type} is not valid for magic 2")
        if not 0 <= compression <= 4:
            raise EncodeError(f"unknown compression codec {compression}")
        self.base_offset = base_offset
        self.compression = compression
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self._records: list[bytes] = []
        self._first_timestamp: int | None = None
        self._max_timestamp = NO_TIMESTAMP
        self._last_offset: int | None = None

    def __len__(self) -> int:
        return len(self._records)

    def append(self, record: Record) -> None:
        self.append_record(record.offset, record.timestamp, record.key, record.value, record.headers)

    def append_record(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None,
                      headers: Sequence[Header] = ()) -> None:
        if offset < self.base_offset or (self._last_offset is not None and offset <= self._last_offset):
            raise EncodeError(f"offset {offset} is not above the previous offset in the batch")
        if offset - self.base_offset > 0x7FFFFFFF:
            raise EncodeError("offset delta exceeds int32")
        if self._first_timestamp is None:
            self._first_timestamp = timestamp
        self._max_timestamp = max(self._max_timestamp, timestamp)
        self._last_offset = offset
        self._records.append(
            encode_record(offset - self.base_offset, timestamp - self._first_timestamp, key, value, headers)
        )

    def build(self, *, last_offset_delta: int | None = None) -> bytes:
        """Encode the batch. ``last_offset_delta`` may widen the span (compaction keeps emptied spans)."""
        if last_offset_delta is None:
            last_offset_delta = 0 if self._last_offset is None else self._last_offset - self.base_offset
        attributes = self.compression
        if self.timestamp_type == LOG_APPEND_TIME:
            attributes |= ATTR_TIMESTAMP_TYPE
        if self.is_transactional:
            attributes |= ATTR_TRANSACTIONAL
        if self.is_control:
            attributes |= ATTR_CONTROL
        first_ts = NO_TIMESTAMP if self._first_timestamp is None else self._first_timestamp
        if self.timestamp_type == LOG_APPEND_TIME:
            assert self.log_append_time is not None
            max_ts = self.log_append_time
        else:
            max_ts = self._max_timestamp
        body = compress(self.compression, b"".join(self._records), magic=MAGIC_V2)
        out = bytearray(V2_HEADER_SIZE)
        V2_HEADER.pack_into(
            out, 0,
            self.base_offset,
            V2_HEADER_SIZE - LOG_OVERHEAD + len(body),
            self.partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            first_ts,
            max_ts,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            len(self._records),
        )
        out += body
        struct.pack_into(">I", out, V2_CRC, crc32c.crc32c(memoryview(out)[V2_ATTRIBUTES:]))
        return bytes(out)


def build_batch(records: Iterable[Record], **settings: object) -> bytes:
    """One-shot :class:`RecordBatchBuilder`; ``base_offset`` defaults to the first record's offset."""
    recs = list(records)
    if "base_offset" not in settings:
        settings["base_offset"] = recs[0].offset if recs else 0
    builder = RecordBatchBuilder(**settings)  # type: ignore[arg-type]
    for r in recs:
        builder.append(r)
    return builder.build()


# -- control batches ----------------------------------------------------------------------------------


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


def encode_control_key(control_type: int) -> bytes:
    return struct.pack(">hh", CONTROL_KEY_VERSION, control_type)


def decode_control_key(key: bytes | None) -> int:
    """The control type in a control record key. Unknown types are returned as-is for callers to ignore."""
    if key is None or len(key) < 4:
        raise DecodeError("control record key needs at least 4 bytes")
    version, control_type = struct.unpack_from(">hh", key)
    if version < 0:
        raise DecodeError(f"negative control record key version {version}")
    return int(control_type)


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """Value of a COMMIT/ABORT control record."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def encode_value(self) -> bytes:
        return struct.pack(">hi", END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def decode(cls, record: Record) -> EndTransactionMarker:
        control_type = decode_control_key(record.key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise DecodeError(f"control type {control_type} is not a transaction marker")
        value = record.value
        if value is None or len(value) < 6:
            raise DecodeError("transaction marker value needs 6 bytes")
        version, epoch = struct.unpack_from(">hi", value)
        if version < 0:
            raise DecodeError(f"negative transaction marker version {version}")
        return cls(ControlRecordType(control_type), epoch)


def build_end_txn_marker(
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """The control batch a partition leader appends when a transaction ends (one record, no sequence)."""
    control_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    marker = EndTransactionMarker(control_type, coordinator_epoch)
    builder.append_record(base_offset, timestamp, encode_control_key(control_type), marker.encode_value())
    return builder.build()
