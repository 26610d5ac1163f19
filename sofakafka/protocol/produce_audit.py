"""The produce audit: who appended which batch, kept by the brokers when tracing is on (sans-IO format).

With ``sofakafka.produce.audit.enable=true`` a partition leader appends one entry per batch it accepted to
the compacted internal topic ``__sofakafka_produce_audit``: the batch's topic, partition and offset range,
and who sent it (client id, client address, producer id and epoch, the Produce version). The entry's key
names the batch (``topic/partition/base_offset``), so compaction never merges two batches' entries and a
batch that a retried Produce appended again is recorded under its own offset. All entries of one data
partition go to the same audit partition (:func:`audit_partition`), in append order, so the console finds
the entry of an offset by starting at the audit offset for the record's time and reading forward.

Both the broker (writing) and the console (reading) use this module; the value is JSON so any consumer
(kcat, a script) can read it too.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass

AUDIT_TOPIC = "__sofakafka_produce_audit"
AUDIT_WRITER_CLIENT_ID = "__sofakafka_produce_audit_writer"
"""The client id of the brokers' audit writer: the only producer the brokers let write the audit topic."""
AUDIT_TOPIC_PARTITIONS = 8
AUDIT_FORMAT_VERSION = 1


@dataclass(frozen=True)
class ProduceAuditEntry:
    topic: str
    partition: int
    base_offset: int
    last_offset: int
    record_count: int
    append_time_ms: int
    client_id: str | None
    client_host: str | None
    producer_id: int
    producer_epoch: int
    api_version: int
    principal: str | None = None
    transactional_id: str | None = None

    def covers(self, topic: str, partition: int, offset: int) -> bool:
        return self.topic == topic and self.partition == partition and self.base_offset <= offset <= self.last_offset


def audit_key(topic: str, partition: int, base_offset: int) -> bytes:
    return f"{topic}/{partition}/{base_offset}".encode()


def audit_partition(topic: str, partition: int, num_partitions: int) -> int:
    """The audit partition holding every entry of ``topic-partition`` (a stable hash of the two)."""
    return zlib.crc32(f"{topic}/{partition}".encode()) % num_partitions


def encode_entry(entry: ProduceAuditEntry) -> bytes:
    return json.dumps({"v": AUDIT_FORMAT_VERSION, **asdict(entry)}, separators=(",", ":")).encode()


def decode_entry(data: bytes | None) -> ProduceAuditEntry | None:
    """The entry, or None for bytes that are not one (a tombstone, another writer's record)."""
    if not data:
        return None
    try:
        raw = json.loads(data)
        return ProduceAuditEntry(
            topic=str(raw["topic"]), partition=int(raw["partition"]), base_offset=int(raw["base_offset"]),
            last_offset=int(raw["last_offset"]), record_count=int(raw["record_count"]),
            append_time_ms=int(raw["append_time_ms"]), client_id=raw.get("client_id"),
            client_host=raw.get("client_host"), producer_id=int(raw.get("producer_id", -1)),
            producer_epoch=int(raw.get("producer_epoch", -1)), api_version=int(raw.get("api_version", -1)),
            principal=raw.get("principal"), transactional_id=raw.get("transactional_id"))
    except (ValueError, KeyError, TypeError):
        return None
