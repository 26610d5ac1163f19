"""The broker schedules the log manager's compaction pass (``log.cleaner.enable``, ``log.cleaner.backoff.ms``):
a compacted topic produced to over the wire ends up with one record per key below its active segment."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.create_topics import CreateTopicsRequest
from sofakafka.protocol.messages.metadata import MetadataRequest
from sofakafka.protocol.messages.produce import ProduceRequest
from sofakafka.protocol.records import RecordBatchBuilder, decode_records
from tests.unit.broker.broker_harness import Client, running_broker

T = TypeVar("T")


def wait_for(what: str, poll: Callable[[], T | None], timeout_s: float = 60.0) -> T:
    """Bounds a wait that would otherwise hang; nothing is asserted about how long it took."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = poll()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def create_compacted_topic(client: Client, name: str) -> None:
    t = CreateTopicsRequest.CreatableTopic
    c = t.CreateableTopicConfig
    configs = [c(name="cleanup.policy", value="compact"), c(name="segment.bytes", value="2048"),
               c(name="min.cleanable.dirty.ratio", value="0.01")]
    resp = client.call(CreateTopicsRequest(topics=[t(name=name, num_partitions=1, replication_factor=1,
                                                     configs=configs)], timeout_ms=30_000), 5)
    assert resp.topics[0].error_code == ErrorCode.NONE

    def led() -> bool | None:
        (topic,) = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 9).topics
        return True if topic.error_code == 0 and topic.partitions and topic.partitions[0].leader_id >= 0 else None

    wait_for(f"a leader for {name}", led)


def produce(client: Client, topic: str, round_: int) -> None:
    b = RecordBatchBuilder()
    for i in range(4):
        b.append_record(i, 1_700_000_000_000 + round_, b"key-%d" % i, b"round-%03d-" % round_ + b"x" * 100)
    p = ProduceRequest.TopicProduceData
    resp = client.call(ProduceRequest(acks=1, timeout_ms=10_000, topics=[
        p(name=topic, partitions=[p.PartitionProduceData(partition_index=0, records=b.build())])]), 8)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.NONE


def test_the_broker_compacts_a_compacted_topic_on_its_cleaner_schedule(tmp_path: Path) -> None:
    with running_broker(tmp_path, {"log.cleaner.backoff.ms": "50"}) as b, Client(b.port) as client:
        create_compacted_topic(client, "compacted")
        for round_ in range(20):  # ~600 B per batch, 2 KiB segments: several inactive segments
            produce(client, "compacted", round_)
        assert b.broker is not None
        lg = b.broker.log_manager.get_log("compacted", 0)
        assert lg is not None and lg.number_of_segments > 3
        cleaner = b.broker.log_manager.cleaner
        active_base = lg.active_segment.base_offset

        def cleaned_up_to_the_active_segment() -> int | None:
            # A pass may already have run while the rounds were still arriving; later ones catch up.
            clean_point = cleaner.last_clean_offset(lg)
            return clean_point if clean_point == active_base else None

        clean_point = wait_for("a cleaner pass up to the active segment", cleaned_up_to_the_active_segment)
        cleaned = [(r.offset, r.key) for seg in lg.log_segments()[:-1] for buf, h in seg.batches()
                   for r in decode_records(buf, h)]
        # Below the clean point each key appears once, at its latest offset there.
        keys = [key for _, key in cleaned]
        assert sorted(keys) == sorted(set(keys))
        assert len(cleaned) < clean_point
