"""``failOnDataLoss`` against sofakafka: real loss fails a query (or is skipped, when asked), gaps do not.

As against Kafka: a query whose next offsets were deleted by retention while it was stopped fails on restart
with ``failOnDataLoss=true`` and skips ahead to the log start with ``false``; a log start moved by
DeleteRecords to exactly the query's position is no loss, one offset further is. The offsets compaction
removed, and the offsets transaction markers take, are gaps a consumer skips: they never trip
``failOnDataLoss=true``, even when a batch boundary falls inside one.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from pyspark.errors import StreamingQueryException

from tests.integration.conftest import BrokerProcess
from tests.spark.kafka_io import TIMEOUT_S, create_topic, produce, read_all
from tests.spark.streaming import data_batches, kafka_stream, wait_until

OUT_SCHEMA = "partition INT, offset LONG, value STRING"


@pytest.fixture(scope="module")
def lossy_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Retention checked every 200 ms and a cleaner that looks for work every 100 ms (Kafka's defaults are 5
    minutes and 15 s), so that deletion and compaction happen within a test."""
    b = BrokerProcess(tmp_path_factory.mktemp("lossy"), {
        "log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "100"}).start()
    try:
        yield b
    finally:
        b.kill()


def low_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "low-watermarks"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)[0] for p in range(partitions)}
    finally:
        c.close()


def alter_topic(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(timeout=TIMEOUT_S)


def one_by_one(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    """One batch per record, so that small segments roll every few records."""
    produce(bootstrap, topic, [{"value": str(i).encode(), "partition": i % partitions}
                               for i in range(start, start + count)], **{"linger.ms": 0, "batch.num.messages": 1})


def to_parquet(spark: Any, bs: str, topic: str, out: Path, ck: Path, **opts: str) -> Any:
    q = (kafka_stream(spark, bs, subscribe=topic, startingOffsets="earliest", **opts)
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(240), "query still running after 240 s"
    except StreamingQueryException:
        pass  # the caller looks at q.exception()
    return q


def output(spark: Any, out: Path) -> list[tuple[int, int, str]]:
    return sorted((r[0], r[1], r[2]) for r in spark.read.schema(OUT_SCHEMA).parquet(str(out)).collect())


def test_retention_deleting_what_a_stopped_query_needed_fails_it_or_is_skipped(
        spark: Any, lossy_broker: BrokerProcess, tmp_path: Path) -> None:
    bs, parts = lossy_broker.bootstrap, 2
    t = f"retention-{uuid.uuid4().hex[:8]}"
    create_topic(bs, t, parts, config={"segment.bytes": "1024"})
    one_by_one(bs, t, 0, 60, parts)
    out, ck = tmp_path / "out", tmp_path / "ck"
    first = to_parquet(spark, bs, t, out, ck)
    assert first.exception() is None, first.exception()
    assert len(output(spark, out)) == 60  # the query stopped at offset 30 of each partition

    one_by_one(bs, t, 60, 60, parts)
    alter_topic(bs, t, retention_ms="1000")  # every closed segment is older than that within a second
    wait_until("retention to delete past offset 30 on every partition",
               lambda: all(low > 30 for low in low_watermarks(bs, t, parts).values()))
    alter_topic(bs, t, retention_ms="-1")  # keeps what is left for the rest of the test
    lows = low_watermarks(bs, t, parts)

    failed = to_parquet(spark, bs, t, out, ck, failOnDataLoss="true")
    error = str(failed.exception())
    assert failed.exception() is not None, "the query read past deleted offsets without complaint"
    assert "failOnDataLoss" in error and "lost" in error, error
    assert len(output(spark, out)) == 60, "a failed batch committed output"

    skipped = to_parquet(spark, bs, t, out, ck, failOnDataLoss="false")
    assert skipped.exception() is None, skipped.exception()
    survivors = read_all(bs, t)
    assert {r.partition: r.offset for r in reversed(survivors)} == lows  # the first survivor is the log start
    want = sorted([(i % parts, i // parts, str(i)) for i in range(60)]
                  + [(r.partition, r.offset, (r.value or b"").decode()) for r in survivors])
    assert output(spark, out) == want


@pytest.mark.parametrize(("moved_to", "lost"), [(20, False), (21, True)], ids=["log-start-equal", "one-above"])
def test_a_log_start_moved_to_the_query_position_is_no_loss_one_further_is(
        spark: Any, lossy_broker: BrokerProcess, tmp_path: Path, moved_to: int, lost: bool) -> None:
    bs = lossy_broker.bootstrap
    t = f"delete-records-{uuid.uuid4().hex[:8]}"
    create_topic(bs, t, 1)
    produce(bs, t, [{"value": str(i).encode(), "partition": 0} for i in range(20)])
    out, ck = tmp_path / "out", tmp_path / "ck"
    assert to_parquet(spark, bs, t, out, ck).exception() is None
    produce(bs, t, [{"value": str(i).encode(), "partition": 0} for i in range(20, 30)])
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.delete_records([TopicPartition(t, 0, moved_to)]).values():
        f.result(timeout=TIMEOUT_S)
    q = to_parquet(spark, bs, t, out, ck, failOnDataLoss="true")
    if lost:
        assert q.exception() is not None and "failOnDataLoss" in str(q.exception())
        assert len(output(spark, out)) == 20
    else:
        assert q.exception() is None, q.exception()
        assert output(spark, out) == [(0, i, str(i)) for i in range(30)]


def test_compaction_gaps_do_not_trip_fail_on_data_loss(
        spark: Any, lossy_broker: BrokerProcess, tmp_path: Path) -> None:
    bs, parts = lossy_broker.bootstrap, 2
    t = f"compacted-{uuid.uuid4().hex[:8]}"
    create_topic(bs, t, parts, config={"cleanup.policy": "compact", "segment.bytes": "1024",
                                       "min.cleanable.dirty.ratio": "0.01"})
    # Five keys per partition rewritten over and over, and every 7th record a key of its own: compaction
    # keeps the last value of each key, so the survivors are scattered with gaps between them.
    produce(bs, t, [{"key": (f"once-{i}" if i % 7 == 0 else f"k{i % 10}").encode(), "value": str(i).encode(),
                     "partition": i % parts} for i in range(200)], **{"linger.ms": 0, "batch.num.messages": 1})

    def cleaned_to_the_active_segment() -> bool:
        # The broker's cleaner-offset-checkpoint (Kafka's format) names, per partition, where its last pass
        # ended; once that is the active segment's base offset, nothing is left to clean and the survivors
        # no longer change under the test.
        data = lossy_broker.data_dir
        checkpoint = data / "cleaner-offset-checkpoint"
        if not checkpoint.exists():
            return False
        cleaned = {}
        for line in checkpoint.read_text().splitlines()[2:]:
            topic, partition, offset = line.rsplit(" ", 2)
            cleaned[(topic, int(partition))] = int(offset)
        for p in range(parts):
            active = max(int(f.stem) for f in (data / f"{t}-{p}").glob("*.log"))
            if cleaned.get((t, p)) != active:
                return False
        return True

    wait_until("the cleaner to compact the topic up to its active segments", cleaned_to_the_active_segment)
    survivors = read_all(bs, t)
    assert len(survivors) < 100
    assert any(b.offset - a.offset > 1 for a, b in itertools.pairwise(survivors)
               if a.partition == b.partition), "no gap in the offsets"
    want = [(r.partition, r.offset, (r.value or b"").decode()) for r in survivors]

    batch = (spark.read.format("kafka").option("kafka.bootstrap.servers", bs).option("subscribe", t)
             .option("failOnDataLoss", "true").load()
             .selectExpr("partition", "offset", "CAST(value AS STRING) AS value").collect())
    assert sorted((r[0], r[1], r[2]) for r in batch) == want
    # Batches of 30 offsets: boundaries fall inside the gaps.
    out, ck = tmp_path / "out", tmp_path / "ck"
    q = to_parquet(spark, bs, t, out, ck, failOnDataLoss="true", maxOffsetsPerTrigger="30")
    assert q.exception() is None, q.exception()
    assert len(data_batches(q)) > 3
    assert output(spark, out) == want


def transactional_producer(bs: str) -> Producer:
    """A transactional confluent-kafka producer (the broker's transaction coordinator, issue 11)."""
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"spark-test-{uuid.uuid4().hex[:6]}",
                  "transaction.timeout.ms": 60_000})
    p.init_transactions(30)
    return p


def test_transaction_markers_do_not_trip_fail_on_data_loss_and_read_committed_hides_aborts(
        spark: Any, lossy_broker: BrokerProcess, tmp_path: Path) -> None:
    bs = lossy_broker.bootstrap
    t = f"transactional-{uuid.uuid4().hex[:8]}"
    create_topic(bs, t, 1)
    p = transactional_producer(bs)
    expected_committed = []
    for txn in range(6):
        p.begin_transaction()
        for i in range(5):
            p.produce(t, f"{txn}-{i}".encode(), partition=0)
        if txn % 3 == 2:
            # librdkafka's abort purges what it has not sent yet: flush first, so the aborted records are in the
            # log (read_uncommitted must see them, read_committed must skip them and their marker).
            p.flush(30)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            expected_committed += [f"{txn}-{i}" for i in range(5)]

    def read(isolation: str, name: str) -> list[str]:
        out, ck = tmp_path / name, tmp_path / f"{name}-ck"
        q = to_parquet(spark, bs, t, out, ck, failOnDataLoss="true", maxOffsetsPerTrigger="4",
                       **{"kafka.isolation.level": isolation})
        assert q.exception() is None, q.exception()
        return [v for _, _, v in output(spark, out)]

    assert read("read_committed", "committed") == expected_committed
    assert len(read("read_uncommitted", "uncommitted")) == 30
