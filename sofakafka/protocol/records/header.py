"""Shallow view of a record set: one :class:`BatchHeader` per log entry, records left encoded.

A "log entry" is a v2 record batch or a v0/v1 message (a compressed wrapper counts as one entry). Both
start with int64 offset + int32 size and keep ``magic`` at byte 16 (FORMATS.md §2-3), so one walker reads
all three magics. Nothing here decompresses: storage and the produce path work from headers alone.

v0/v1 offsets: a compressed wrapper's offset is the offset of its LAST inner message (FORMATS.md §2.1) and
the first inner offset is only known after decompressing. So for magic 0/1 ``base_offset`` and
``last_offset`` are both the entry's own offset; readers that search by offset must compare against
``last_offset`` (as Kafka's log does), never assume ``base_offset`` is the first record's offset.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from sofakafka.protocol.errors import CorruptRecordError
from sofakafka.protocol.records.buffer import Buffer

LOG_OVERHEAD = 12  # int64 offset + int32 size
"""Bytes before the size-counted part of every entry, for all magics."""

MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2
CURRENT_MAGIC = MAGIC_V2

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

NO_TIMESTAMP_TYPE = -1  # what Kafka reports for magic 0, which has no timestamp at all
CREATE_TIME = 0
LOG_APPEND_TIME = 1

# v2 batch layout (FORMATS.md §3)
V2_BASE_OFFSET = 0
V2_LENGTH = 8
V2_PARTITION_LEADER_EPOCH = 12
V2_MAGIC = 16
V2_CRC = 17
V2_ATTRIBUTES = 21
V2_LAST_OFFSET_DELTA = 23
V2_FIRST_TIMESTAMP = 27
V2_MAX_TIMESTAMP = 35
V2_PRODUCER_ID = 43
V2_PRODUCER_EPOCH = 51
V2_BASE_SEQUENCE = 53
V2_RECORDS_COUNT = 57
V2_HEADER_SIZE = 61  # RECORD_BATCH_OVERHEAD

V2_HEADER = struct.Struct(">qiibIhiqqqhii")
assert V2_HEADER.size == V2_HEADER_SIZE

ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

# Legacy message layout (FORMATS.md §2): offset, size, crc, magic, attributes [, timestamp]
LEGACY_PREFIX = struct.Struct(">qiIbb")
LEGACY_CRC = 12
LEGACY_MAGIC = 16
LEGACY_ATTRIBUTES = 17
LEGACY_TIMESTAMP = 18
LEGACY_RECORD_OVERHEAD = {MAGIC_V0: 14, MAGIC_V1: 22}  # message_size minimum: crc..value lengths
LEGACY_KEY_LENGTH = {MAGIC_V0: 18, MAGIC_V1: 26}  # from the entry start

# The smallest size field any entry may carry: a v0 message with null key and value.
_MIN_SIZE_FIELD = LEGACY_RECORD_OVERHEAD[MAGIC_V0]
_MIN_SIZE_FIELD_BY_MAGIC = {
    MAGIC_V0: LEGACY_RECORD_OVERHEAD[MAGIC_V0],
    MAGIC_V1: LEGACY_RECORD_OVERHEAD[MAGIC_V1],
    MAGIC_V2: V2_HEADER_SIZE - LOG_OVERHEAD,
}

# Bytes from the entry start that the shallow header parse reads, per magic.
_FIXED_HEADER_BYTES = {MAGIC_V0: LEGACY_TIMESTAMP, MAGIC_V1: LEGACY_TIMESTAMP + 8, MAGIC_V2: V2_HEADER_SIZE}

# Smallest possible encoded v2 record: seven one-byte varints/fields (length, attributes, timestamp
# delta, offset delta, key length, value length, header count).
MIN_V2_RECORD_SIZE = 7

_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """Fixed header of one log entry; see the module docstring for the v0/v1 offset convention."""

    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    first_timestamp: int
    timestamp_type: int
    compression: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    record_count: int
    crc: int

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap past Int32.MAX to 0 like Kafka's."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        delta = self.last_offset - self.base_offset
        return (self.base_sequence + delta) % (_INT32_MAX + 1)

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def is_compressed(self) -> bool:
        return self.compression != 0

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


_V2_PRODUCER = struct.Struct(">qh")


def batch_producer(buf: Buffer, position: int = 0) -> tuple[int, int]:
    """(producer id, producer epoch) of the v2 batch at ``position``, read from the two header fields alone;
    (-1, -1) for a v0/v1 message set (they carry none) or bytes too short to hold them. For a caller that wants
    only these on a hot path (the produce audit), where building a whole :class:`BatchHeader` costs more."""
    if len(buf) - position < V2_HEADER_SIZE or buf[position + V2_MAGIC] != MAGIC_V2:
        return NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    producer_id, producer_epoch = _V2_PRODUCER.unpack_from(buf, position + V2_PRODUCER_ID)
    return producer_id, producer_epoch


def read_batch_header(buf: Buffer, position: int = 0, *, max_size: int | None = None) -> BatchHeader | None:
    """Parse the entry at ``position``; ``None`` when the buffer ends before the entry does.

    Raises :class:`CorruptRecordError` when the size field or magic cannot belong to any valid entry,
    which is how a torn tail of garbage differs from a merely short one. ``max_size`` (total entry bytes,
    e.g. a segment's remaining length or max.message.bytes + LOG_OVERHEAD) turns an absurd size field
    into corruption instead of a "wait for more bytes" ``None``.
    """
    return _read_header(buf, position, max_size, whole_entry=True)


def peek_batch_header(buf: Buffer, position: int = 0, *, max_size: int | None = None) -> BatchHeader | None:
    """Like :func:`read_batch_header` but needs only the fixed header bytes, not the whole entry.

    For scans that read a segment header by header (index rebuilds, offset lookups) without pulling every
    batch body into memory. The returned ``size``/``end`` still describe the whole entry; nothing beyond the
    header has been seen, so :func:`validate_batch` needs the full bytes.
    """
    return _read_header(buf, position, max_size, whole_entry=False)


def _read_header(buf: Buffer, position: int, max_size: int | None, *, whole_entry: bool) -> BatchHeader | None:
    avail = len(buf) - position
    if avail < LOG_OVERHEAD:
        return None
    (size_field,) = struct.unpack_from(">i", buf, position + 8)
    if size_field < _MIN_SIZE_FIELD:
        raise CorruptRecordError(position, f"entry size {size_field} is smaller than any record ({_MIN_SIZE_FIELD})")
    if max_size is not None and size_field + LOG_OVERHEAD > max_size:
        raise CorruptRecordError(position, f"entry size {size_field + LOG_OVERHEAD} exceeds the limit {max_size}")
    if avail < LOG_OVERHEAD + 5:
        return None
    magic = buf[position + 16]
    if magic > 127:
        magic -= 256
    minimum = _MIN_SIZE_FIELD_BY_MAGIC.get(magic)
    if minimum is None:
        raise CorruptRecordError(position, f"unknown magic {magic}")
    if size_field < minimum:
        raise CorruptRecordError(position, f"size {size_field} below the minimum {minimum} for magic {magic}")
    size = size_field + LOG_OVERHEAD
    needed = size if whole_entry else _FIXED_HEADER_BYTES[magic]
    if avail < needed:
        return None
    if magic == MAGIC_V2:
        return _v2_header(buf, position, size)
    return _legacy_header(buf, position, size, magic)


def _v2_header(buf: Buffer, position: int, size: int) -> BatchHeader:
    (
        base_offset,
        _length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        first_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = V2_HEADER.unpack_from(buf, position)
    return BatchHeader(
        position=position,
        size=size,
        magic=magic,
        base_offset=base_offset,
        last_offset=base_offset + last_offset_delta,
        max_timestamp=max_timestamp,
        first_timestamp=first_timestamp,
        timestamp_type=LOG_APPEND_TIME if attributes & ATTR_TIMESTAMP_TYPE else CREATE_TIME,
        compression=attributes & ATTR_CODEC_MASK,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=leader_epoch,
        is_transactional=bool(attributes & ATTR_TRANSACTIONAL),
        is_control=bool(attributes & ATTR_CONTROL),
        record_count=count,
        crc=crc,
    )


def _legacy_header(buf: Buffer, position: int, size: int, magic: int) -> BatchHeader:
    offset, _size, crc, _magic, attributes = LEGACY_PREFIX.unpack_from(buf, position)
    if magic == MAGIC_V1:
        (timestamp,) = struct.unpack_from(">q", buf, position + LEGACY_TIMESTAMP)
        timestamp_type = LOG_APPEND_TIME if attributes & ATTR_TIMESTAMP_TYPE else CREATE_TIME
    else:
        timestamp = NO_TIMESTAMP
        timestamp_type = NO_TIMESTAMP_TYPE
    return BatchHeader(
        position=position,
        size=size,
        magic=magic,
        base_offset=offset,
        last_offset=offset,
        max_timestamp=timestamp,
        first_timestamp=timestamp,
        timestamp_type=timestamp_type,
        compression=attributes & ATTR_CODEC_MASK,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        is_transactional=False,
        is_control=False,
        record_count=1,
        crc=crc,
    )


def iter_batches(buf: Buffer, start: int = 0, end: int | None = None, *,
                 max_size: int | None = None) -> Iterator[BatchHeader]:
    """Walk entries by their size fields between ``start`` and ``end``.

    Stops silently before a partial trailing entry: compare the last header's ``end`` with the limit to
    detect a torn tail. Raises :class:`CorruptRecordError` for an impossible size or an unknown magic
    (and for an entry larger than ``max_size``, see :func:`read_batch_header`).
    """
    view = memoryview(buf)
    if end is not None:
        view = view[:end]
    position = start
    while True:
        header = read_batch_header(view, position, max_size=max_size)
        if header is None:
            return
        yield header
        position = header.end


def compute_crc(buf: Buffer, header: BatchHeader) -> int:
    """The checksum the entry should carry: CRC-32C from attributes to the end (v2), CRC-32 from magic (v0/v1)."""
    view = memoryview(buf)
    if header.magic == MAGIC_V2:
        return crc32c.crc32c(view[header.position + V2_ATTRIBUTES : header.end])
    return zlib.crc32(view[header.position + LEGACY_MAGIC : header.end])


def validate_batch(buf: Buffer, header: BatchHeader) -> None:
    """Check the checksum and the structure the header alone can prove; records stay encoded.

    Raises :class:`CorruptRecordError` with the entry's position.
    """
    pos = header.position
    if compute_crc(buf, header) != header.crc:
        raise CorruptRecordError(pos, f"checksum mismatch (stored crc {header.crc})")
    if header.magic == MAGIC_V2:
        _validate_v2_structure(buf, header)
    else:
        _validate_legacy_structure(buf, header)


def _validate_v2_structure(buf: Buffer, h: BatchHeader) -> None:
    pos = h.position
    if h.compression > 4:
        raise CorruptRecordError(pos, f"unknown compression codec {h.compression}")
    if h.record_count < 0:
        raise CorruptRecordError(pos, f"negative record count {h.record_count}")
    delta = h.last_offset - h.base_offset
    if delta < 0:
        raise CorruptRecordError(pos, f"negative lastOffsetDelta {delta}")
    if h.record_count > delta + 1:
        raise CorruptRecordError(pos, f"{h.record_count} records cannot fit offsets [{h.base_offset}, {h.last_offset}]")
    body = h.size - V2_HEADER_SIZE
    if h.compression == 0 and h.record_count * MIN_V2_RECORD_SIZE > body:
        raise CorruptRecordError(pos, f"{h.record_count} records cannot fit in {body} bytes")


def _validate_legacy_structure(buf: Buffer, h: BatchHeader) -> None:
    pos = h.position
    if h.compression > 3:
        raise CorruptRecordError(pos, f"codec {h.compression} is not valid for magic {h.magic}")
    at = pos + LEGACY_KEY_LENGTH[h.magic]
    (key_len,) = struct.unpack_from(">i", buf, at)
    if key_len < -1 or at + 4 + max(key_len, 0) + 4 > h.end:
        raise CorruptRecordError(pos, f"key length {key_len} overruns the message")
    at += 4 + max(key_len, 0)
    (value_len,) = struct.unpack_from(">i", buf, at)
    at += 4
    if value_len < -1 or at + max(value_len, 0) != h.end:
        raise CorruptRecordError(pos, f"value length {value_len} does not end at the message end")
    if h.compression and value_len < 0:
        raise CorruptRecordError(pos, "compressed wrapper message has a null value")
