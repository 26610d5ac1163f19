"""``__transaction_state`` record formats, byte-compatible with Kafka 2.6 (INTERNAL-TOPICS.md section 2).

Key and value each start with an int16 schema version followed by that version's fields in the classic
(non-flexible) encoding. Kafka 2.6 knows only version 0 of both, so a log written here and one written by a
2.6 broker read alike:

* key v0: ``transactional_id`` STRING;
* value v0: ``producer_id`` INT64, ``producer_epoch`` INT16, ``transaction_timeout`` INT32,
  ``transaction_status`` INT8 (the state byte), ``transaction_partitions`` nullable ARRAY of
  {``topic`` STRING, ``partition_ids`` ARRAY of INT32} (null exactly when the state is Empty),
  ``transaction_entry_timestamp`` INT64 (last update), ``transaction_start_timestamp`` INT64.

A null value is a tombstone, written when an idle transactional id expires. The previous producer id and
epoch that KIP-360 retries rely on are not in v0; like Kafka 2.6 the coordinator keeps them in memory only
(a reload starts them at -1).
"""

from __future__ import annotations

from sofakafka.broker.group.records import java_string_hash
from sofakafka.broker.txn.state import TransactionState, TxnLogValue
from sofakafka.protocol.errors import DecodeError
from sofakafka.protocol.primitives import (
    Buffer,
    read_array_length,
    read_int8,
    read_int16,
    read_int32,
    read_int64,
    read_string,
    write_array_length,
    write_int8,
    write_int16,
    write_int32,
    write_int64,
    write_string,
)

TXN_KEY_VERSION = 0
TXN_VALUE_VERSION = 0
TRANSACTION_STATE_TOPIC = "__transaction_state"

TopicPartition = tuple[str, int]


def partition_for(transactional_id: str, partition_count: int) -> int:
    """``Utils.abs(transactionalId.hashCode) % partitions``: Java's String hash, Integer.MIN_VALUE mapped to 0."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(2**31) else abs(h)) % partition_count


def encode_key(transactional_id: str) -> bytes:
    out = bytearray()
    write_int16(out, TXN_KEY_VERSION)
    write_string(out, transactional_id)
    return bytes(out)


def decode_key(buf: Buffer) -> str:
    version, pos = read_int16(buf, 0)
    if version != TXN_KEY_VERSION:
        raise DecodeError(f"unknown __transaction_state key version {version}")
    transactional_id, _ = read_string(buf, pos)
    return transactional_id


def encode_value(value: TxnLogValue) -> bytes:
    out = bytearray()
    write_int16(out, TXN_VALUE_VERSION)
    write_int64(out, value.producer_id)
    write_int16(out, value.producer_epoch)
    write_int32(out, value.transaction_timeout_ms)
    write_int8(out, int(value.state))
    if value.state is TransactionState.EMPTY:
        if value.partitions:
            raise ValueError(f"an Empty transaction has no partitions, got {sorted(value.partitions)}")
        write_array_length(out, None)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        write_array_length(out, len(by_topic))
        for topic, partitions in by_topic.items():
            write_string(out, topic)
            write_array_length(out, len(partitions))
            for p in partitions:
                write_int32(out, p)
    write_int64(out, value.last_update_timestamp)
    write_int64(out, value.start_timestamp)
    return bytes(out)


def decode_value(buf: Buffer | None) -> TxnLogValue | None:
    """None for a tombstone. Raises DecodeError for an unknown version or state byte, as 2.6's loader fails."""
    if buf is None:
        return None
    version, pos = read_int16(buf, 0)
    if version != TXN_VALUE_VERSION:
        raise DecodeError(f"unknown __transaction_state value version {version}")
    producer_id, pos = read_int64(buf, pos)
    producer_epoch, pos = read_int16(buf, pos)
    timeout_ms, pos = read_int32(buf, pos)
    state_byte, pos = read_int8(buf, pos)
    try:
        state = TransactionState(state_byte)
    except ValueError:
        raise DecodeError(f"unknown transaction state byte {state_byte}") from None
    count, pos = read_array_length(buf, pos)
    partitions: set[TopicPartition] = set()
    for _ in range(count or 0):
        topic, pos = read_string(buf, pos)
        n, pos = read_array_length(buf, pos)
        for _ in range(n or 0):
            p, pos = read_int32(buf, pos)
            partitions.add((topic, p))
    last_update, pos = read_int64(buf, pos)
    start, pos = read_int64(buf, pos)
    # 2.6 reads the partition array only when the state is not Empty.
    if state is TransactionState.EMPTY:
        partitions.clear()
    return TxnLogValue(producer_id, producer_epoch, timeout_ms, state, frozenset(partitions), last_update, start)
