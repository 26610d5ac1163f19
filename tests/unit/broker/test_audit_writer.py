"""The produce audit writer's loop-side part, without a cluster: which appended partitions become entries and
what each says (the batch's producer id from its header, the append time, the client), that a batch continuing
a partition's open entry from the same client and producer extends it (and any other one does not), and that
a writer whose topic cannot be written keeps at most MAX_PENDING entries, dropping the oldest and counting them.
Writing the entries to a real cluster and reading them back in the console's trace is
tests/integration/test_broker_metrics.py's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sofakafka.broker import audit_writer
from sofakafka.broker.audit_writer import AuditRun, ProduceAuditWriter
from sofakafka.broker.config import KafkaConfig
from sofakafka.broker.metrics import BrokerMetrics
from sofakafka.broker.replica_manager import ProducePartitionResult
from sofakafka.controller.metadata import ClusterMetadata
from sofakafka.controller.topics import TopicAdmin
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.records import Record, RecordBatchBuilder, build_message_set


def _writer(tmp_path: Path) -> tuple[ProduceAuditWriter, BrokerMetrics]:
    metrics = BrokerMetrics()
    config = KafkaConfig.load(None, [f"log.dirs={tmp_path}"])

    def no_metadata() -> ClusterMetadata:
        raise AssertionError("not read by these tests")

    def no_admin() -> TopicAdmin:
        raise AssertionError("not used by these tests")

    return ProduceAuditWriter(config, metrics, metadata=no_metadata, topic_admin=no_admin,
                              bootstrap=lambda: "127.0.0.1:1"), metrics


def _v2(producer_id: int, epoch: int, n: int = 2) -> bytearray:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=0)
    for i in range(n):
        builder.append_record(i, 1_700_000_000_000 + i, b"k", b"v")
    return bytearray(builder.build())


def test_each_appended_partition_becomes_one_entry_naming_its_producer(tmp_path: Path) -> None:
    writer, _ = _writer(tmp_path)
    legacy = build_message_set([Record(0, 1_700_000_000_000, b"k", b"v")], magic=1)
    entries = [(("orders", 0), _v2(4242, 3)), (("orders", 1), legacy), (("orders", 2), _v2(1, 1)),
               (("__consumer_offsets", 0), _v2(5, 5)), (("orders", 3), None)]
    results = {
        ("orders", 0): ProducePartitionResult(ErrorCode.NONE, base_offset=10, last_offset=11),
        ("orders", 1): ProducePartitionResult(ErrorCode.NONE, base_offset=0, last_offset=0, log_append_time=123),
        ("orders", 2): ProducePartitionResult(ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ("__consumer_offsets", 0): ProducePartitionResult(ErrorCode.NONE, base_offset=0, last_offset=1),
        ("orders", 3): ProducePartitionResult(ErrorCode.CORRUPT_MESSAGE),
    }
    writer.record(client_id="billing", client_host="10.0.0.7", api_version=8, transactional_id="tx-1",
                  entries=entries, results=results)
    first, second = writer._pending
    assert writer.pending == 2, "failed partitions and internal topics are not audited"
    assert (first.topic, first.partition, first.base_offset, first.last_offset, first.record_count) == \
        ("orders", 0, 10, 11, 2)
    assert (first.producer_id, first.producer_epoch) == (4242, 3)
    assert (first.client_id, first.client_host, first.api_version, first.transactional_id) == \
        ("billing", "10.0.0.7", 8, "tx-1")
    assert first.append_time_ms > 1_700_000_000_000, "CreateTime topics: the broker's clock at the append"
    assert (second.producer_id, second.producer_epoch, second.append_time_ms) == (-1, -1, 123)


def test_an_unwritable_audit_keeps_at_most_max_pending_entries_dropping_the_oldest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer, metrics = _writer(tmp_path)
    monkeypatch.setattr(audit_writer, "MAX_PENDING", 3)
    monkeypatch.setattr(writer, "_send", lambda batch: batch)  # the audit topic's leader is down: nothing goes

    def entry(offset: int) -> AuditRun:
        return AuditRun("t", 0, offset, offset, 1, 0, None, "127.0.0.1", -1, -1, 8, None)

    async def scenario() -> None:
        writer._pending = [entry(0), entry(1)]
        await writer.flush()
        assert [e.base_offset for e in writer._pending] == [0, 1] and metrics.audit_entries_dropped == 0
        writer._pending += [entry(2)]
        await writer.flush()
        assert [e.base_offset for e in writer._pending] == [0, 1, 2] and metrics.audit_entries_dropped == 0
        writer._pending += [entry(3)]
        await writer.flush()
        assert [e.base_offset for e in writer._pending] == [1, 2, 3]
        assert metrics.audit_entries_dropped == 1 and metrics.audit_entries_written == 0
        monkeypatch.setattr(writer, "_send", lambda batch: [])  # it is back
        await writer.flush()
        assert writer.pending == 0 and metrics.audit_entries_written == 3
        writer._executor.shutdown()

    asyncio.run(scenario())


def test_a_batch_continuing_a_partitions_entry_from_the_same_producer_extends_it(tmp_path: Path) -> None:
    writer, _ = _writer(tmp_path)
    tp = ("orders", 0)

    def append(base: int, last: int, producer_id: int = 7, client_id: str = "billing") -> None:
        writer.record(client_id=client_id, client_host="10.0.0.7", api_version=8, transactional_id=None,
                      entries=[(tp, _v2(producer_id, 0, last - base + 1))],
                      results={tp: ProducePartitionResult(ErrorCode.NONE, base_offset=base, last_offset=last)})

    append(0, 1)
    append(2, 4)  # continues offset 1: the same entry, now 0-4
    append(6, 6)  # a gap (offset 5 was another connection's batch): a new entry
    append(7, 7, producer_id=8)  # the next offset, another producer: a new entry
    append(8, 9, producer_id=8, client_id="other")  # the same producer id from another client id: a new entry
    spans = [(r.base_offset, r.last_offset, r.record_count, r.producer_id, r.client_id) for r in writer._pending]
    assert spans == [(0, 4, 5, 7, "billing"), (6, 6, 1, 7, "billing"), (7, 7, 1, 8, "billing"), (8, 9, 2, 8, "other")]
