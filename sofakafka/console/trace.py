"""Message trace: for one record (topic, partition, offset), who produced it, when, and which groups have
consumed past it.

The record's own batch names the producer id and epoch (idempotent and transactional producers; -1 for
others). The client id and address come from the produce audit (:mod:`sofakafka.protocol.produce_audit`),
which brokers keep only when ``sofakafka.produce.audit.enable`` is on; without it the page says so.
Consumption is read from the groups' committed offsets: a group whose committed offset on the partition is
past the record has consumed it (Kafka's definition of "consumed" for a group).
"""

from __future__ import annotations

from dataclasses import dataclass

from sofakafka.client import EARLIEST_TIMESTAMP, ClientError, KafkaClient
from sofakafka.console.cluster import ConsoleError, GroupsPast, describe_failure, groups_past
from sofakafka.console.query import _bounds, _partitions
from sofakafka.console.records import RecordView
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.produce_audit import AUDIT_TOPIC, ProduceAuditEntry, audit_partition, decode_entry
from sofakafka.protocol.records import BatchHeader

# The audit entry is written when the batch is appended (broker time); a producer's CreateTime may be ahead
# of or behind that, so the search starts this long before the record's timestamp.
AUDIT_CLOCK_SLACK_MS = 10 * 60 * 1000
AUDIT_SCAN_LIMIT = 200_000


@dataclass(frozen=True)
class Trace:
    record: RecordView
    batch: BatchHeader | None
    audit: ProduceAuditEntry | None
    audit_note: str
    groups: GroupsPast | None
    groups_error: str | None = None


def trace(client: KafkaClient, topic: str, partition: int, offset: int) -> Trace:
    _partitions(client, topic, partition)
    start, end = _bounds(client, topic, partition)
    if not start <= offset < end:
        raise ConsoleError(f"offset {offset} is out of range: {topic}-{partition} holds offsets {start} to {end - 1}"
                           if end > start else f"{topic}-{partition} holds no records")
    fetched = client.fetch(topic, partition, offset, max_wait_ms=0)
    found = [r for r in fetched.records if r.offset == offset]
    if not found:
        raise ConsoleError(f"no record at offset {offset} of {topic}-{partition} (it may have been compacted away "
                           "or be a transaction marker)")
    record = RecordView.of(topic, partition, found[0])
    batch = next((b for b in fetched.batches if b.base_offset <= offset <= b.last_offset), None)
    audit, note = _find_audit(client, topic, partition, offset, record.timestamp)
    try:
        groups: GroupsPast | None = groups_past(client, topic, partition, offset)
        groups_error = None
    except (KafkaError, ClientError) as exc:
        groups, groups_error = None, describe_failure(exc)
    return Trace(record, batch, audit, note, groups, groups_error)


def _find_audit(client: KafkaClient, topic: str, partition: int, offset: int, timestamp: int
                ) -> tuple[ProduceAuditEntry | None, str]:
    try:
        info = client.metadata([AUDIT_TOPIC]).topics.get(AUDIT_TOPIC)
    except (KafkaError, ClientError) as exc:
        return None, f"the produce audit could not be read: {describe_failure(exc)}"
    if info is None or info.error != ErrorCode.NONE or not info.partitions:
        return None, ("tracing is off: the brokers keep no produce audit (set sofakafka.produce.audit.enable=true "
                      "on every broker to record who produces each batch from then on)")
    ap = audit_partition(topic, partition, len(info.partitions))
    try:
        if timestamp >= 0:
            position = client.list_offsets(AUDIT_TOPIC, {ap: max(0, timestamp - AUDIT_CLOCK_SLACK_MS)})[ap].offset
        else:
            position = -1
        if position < 0:
            position = client.list_offsets(AUDIT_TOPIC, {ap: EARLIEST_TIMESTAMP})[ap].offset
        _, end = _bounds(client, AUDIT_TOPIC, ap)
        read = 0
        while position < end and read < AUDIT_SCAN_LIMIT:
            result = client.fetch(AUDIT_TOPIC, ap, position, max_wait_ms=0)
            for r in result.records:
                read += 1
                entry = decode_entry(r.value)
                if entry is not None and entry.covers(topic, partition, offset):
                    return entry, "from the produce audit"
                if entry is not None and entry.topic == topic and entry.partition == partition \
                        and entry.base_offset > offset:
                    return None, ("the produce audit has no entry for this record (it was produced before tracing "
                                  "was switched on, or its entry was removed by retention)")
            if result.next_offset <= position:
                break
            position = result.next_offset
    except (KafkaError, ClientError) as exc:
        return None, f"the produce audit could not be read: {describe_failure(exc)}"
    return None, "the produce audit has no entry for this record"
