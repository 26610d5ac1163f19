"""Structured Streaming through ``format("kafka")``: rate limits, triggers, options, checkpoints, the sink.

- ``maxOffsetsPerTrigger`` splits a backlog into batches of exactly that many offsets, each partition
  advancing by its share (the per-partition start and end offsets of every batch are checked);
- ``minOffsetsPerTrigger`` holds a batch back while fewer rows are waiting (the idle progress reports show
  the source saw them), and ``maxTriggerDelay`` lets a smaller batch through once it has passed;
- ``Trigger.AvailableNow`` reads what was there when it started and stops; run again on its checkpoint it
  reads only what came since;
- a query stopped mid-stream, twice, while a producer keeps writing, and restarted on its checkpoint, ends
  with every record exactly once in its Parquet output;
- ``subscribePattern`` picks up a matching topic created while the query runs; ``startingOffsets`` latest
  and JSON, and ``startingTimestamp``, place a stream's start as for batch;
- the streaming Kafka sink writes keys, values, headers and partitions that read back intact.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.integration.conftest import BrokerProcess
from tests.spark.conftest import LONG
from tests.spark.kafka_io import TIMEOUT_S, create_topic, produce, read_all, sample_records
from tests.spark.streaming import data_batches, finish, kafka_stream, offsets, wait_until

PARTITIONS = 3
OUT_SCHEMA = "partition INT, offset LONG, value STRING"


def fresh_topic(bootstrap: str, prefix: str, partitions: int = PARTITIONS) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    return topic


def values(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"value": str(i).encode(), "partition": i % PARTITIONS} for i in range(start, start + count)]


def memory_rows(spark: Any, name: str) -> list[tuple[int, int, str]]:
    return sorted((r[0], r[1], r[2]) for r in spark.sql(
        f"SELECT partition, offset, CAST(value AS STRING) FROM {name}").collect())


def test_max_offsets_per_trigger_advances_in_steps_of_that_many_offsets(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    t = fresh_topic(bs, "max-offsets")
    produce(bs, t, values(300))  # 100 per partition
    q = (kafka_stream(spark, bs, subscribe=t, startingOffsets="earliest", maxOffsetsPerTrigger="60")
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("memory").queryName("max_offsets").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    finish(q)
    batches = data_batches(q)
    assert [b["numInputRows"] for b in batches] == [60] * 5
    for i, b in enumerate(batches):  # 300 * 60/300 = 20 offsets per partition per batch
        # The first batch reports no start: it begins at the initial offsets (earliest).
        if i > 0:
            assert offsets(b["sources"][0], "startOffset") == {t: {str(p): 20 * i for p in range(PARTITIONS)}}
        assert offsets(b["sources"][0], "endOffset") == {t: {str(p): 20 * (i + 1) for p in range(PARTITIONS)}}
    got = memory_rows(spark, "max_offsets")
    assert got == sorted((i % 3, i // 3, str(i)) for i in range(300))


def test_min_offsets_per_trigger_holds_a_batch_back_until_enough_rows_wait(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    t = fresh_topic(bs, "min-offsets")
    q = (kafka_stream(spark, bs, subscribe=t, startingOffsets="earliest", minOffsetsPerTrigger="100",
                      maxTriggerDelay="10m")
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("memory").queryName("min_offsets").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="100 milliseconds").start())
    try:
        wait_until("the query's first trigger", lambda: q.lastProgress, q)
        produce(bs, t, values(60))

        def saw_60_without_running() -> bool:
            # An idle report (no batch ran) whose source already saw offset 20 on every partition.
            return any(p["numInputRows"] == 0 and offsets(p["sources"][0], "latestOffset") == {
                t: {str(i): 20 for i in range(PARTITIONS)}} for p in q.recentProgress)

        wait_until("an idle trigger that saw the 60 rows", saw_60_without_running, q)
        assert data_batches(q) == [], "a batch ran with fewer than minOffsetsPerTrigger rows"
        produce(bs, t, values(50, start=60))
        wait_until("a batch of all 110 rows", lambda: data_batches(q), q)
        assert [b["numInputRows"] for b in data_batches(q)] == [110]
        assert memory_rows(spark, "min_offsets") == sorted((i % 3, i // 3, str(i)) for i in range(110))
    finally:
        q.stop()


def test_max_trigger_delay_lets_a_smaller_batch_through(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    t = fresh_topic(bs, "max-delay")
    produce(bs, t, values(10))
    q = (kafka_stream(spark, bs, subscribe=t, startingOffsets="earliest", minOffsetsPerTrigger="1000",
                      maxTriggerDelay="2s")
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("memory").queryName("max_delay").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="100 milliseconds").start())
    try:
        wait_until("a batch once maxTriggerDelay passed", lambda: data_batches(q), q)
        assert [b["numInputRows"] for b in data_batches(q)] == [10]
    finally:
        q.stop()


def test_available_now_reads_what_was_there_and_a_rerun_only_what_came_since(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    t = fresh_topic(bs, "available-now")
    produce(bs, t, values(90))
    out, ck = tmp_path / "out", tmp_path / "ck"

    def run() -> Any:
        q = (kafka_stream(spark, bs, subscribe=t, startingOffsets="earliest")
             .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
             .trigger(availableNow=True).start())
        finish(q)
        return q

    first = run()
    assert sum(b["numInputRows"] for b in data_batches(first)) == 90
    produce(bs, t, values(30, start=90))
    second = run()
    assert sum(b["numInputRows"] for b in data_batches(second)) == 30
    rows = sorted((r[0], r[1], r[2]) for r in spark.read.parquet(str(out)).collect())
    assert rows == sorted((i % 3, i // 3, str(i)) for i in range(120))


class BackgroundProducer:
    """Produces ``total`` numbered records in small bursts from a thread; ``acked`` maps (partition, offset)
    to the value confirmed there."""

    def __init__(self, bootstrap: str, topic: str, total: int) -> None:
        self.topic, self.total = topic, total
        self.acked: dict[tuple[int, int], str] = {}
        self.errors: list[str] = []
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "enable.idempotence": True})
        self.thread = threading.Thread(target=self._run, name="spark-test-producer", daemon=True)

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[(msg.partition(), msg.offset())] = msg.value().decode()

    def _run(self) -> None:
        for i in range(self.total):
            self.producer.produce(self.topic, str(i).encode(), partition=i % PARTITIONS, on_delivery=self._report)
            if i % 25 == 24:
                self.producer.poll(0.02)
        self.producer.flush(TIMEOUT_S)

    def __enter__(self) -> BackgroundProducer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.join(TIMEOUT_S)
        # Destroyed now, not at garbage collection after the module's broker is gone (librdkafka would log
        # refused reconnects into the output of later tests).
        del self.producer


def test_a_query_stopped_mid_stream_resumes_from_its_checkpoint_exactly_once(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    t = fresh_topic(bs, "restart")
    # SOFAKAFKA_SPARK_LONG=1: ten times the records and four stops instead of two.
    total = 15_000 if LONG else 1500
    stops = (500, 2000, 5000, 9000) if LONG else (200, 400)
    out, ck = tmp_path / "out", tmp_path / "ck"

    def start() -> Any:
        return (kafka_stream(spark, bs, subscribe=t, startingOffsets="earliest", maxOffsetsPerTrigger="150")
                .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
                .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
                .trigger(processingTime="100 milliseconds").start())

    def rows_read(q: Any) -> int:
        return sum(b["numInputRows"] for b in data_batches(q))

    with BackgroundProducer(bs, t, total) as producer:
        for stop_after in stops:
            q = start()
            wait_until(f"{stop_after} rows through the query",
                       lambda n=stop_after, q=q: rows_read(q) >= n, q)  # type: ignore[misc]
            q.stop()  # mid-stream: the producer is still writing, a batch may be in flight
    assert not producer.errors, producer.errors[:3]
    assert len(producer.acked) == total
    q = start()
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    # Read through the sink's metadata log: only files of committed batches count.
    rows = [(r[0], r[1], r[2]) for r in spark.read.schema(OUT_SCHEMA).parquet(str(out)).collect()]
    assert len(rows) == len(set(rows)), "a record appears twice in the output"
    assert sorted(rows) == sorted((p, o, v) for (p, o), v in producer.acked.items())


def test_subscribe_pattern_picks_up_a_topic_created_while_the_query_runs(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    prefix = f"pattern-{uuid.uuid4().hex[:6]}"
    first = f"{prefix}-a"
    create_topic(bs, first, 2)
    produce(bs, first, [{"value": b"a", "partition": i % 2} for i in range(10)])
    q = (kafka_stream(spark, bs, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
         .selectExpr("topic", "CAST(value AS STRING) AS value")
         .writeStream.format("memory").queryName("pattern").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="200 milliseconds").start())
    try:
        def count_by_topic() -> dict[str, int]:
            return {r[0]: r[1] for r in spark.sql("SELECT topic, count(*) FROM pattern GROUP BY topic").collect()}

        wait_until("the first topic's rows", lambda: count_by_topic() == {first: 10}, q)
        second = f"{prefix}-b"
        create_topic(bs, second, 3)
        produce(bs, second, [{"value": b"b", "partition": i % 3} for i in range(7)])
        create_topic(bs, f"other-{prefix}", 1)  # does not match
        produce(bs, f"other-{prefix}", [{"value": b"x"}])
        wait_until("the new topic's rows", lambda: count_by_topic() == {first: 10, second: 7}, q)
    finally:
        q.stop()


def test_starting_offsets_latest_json_and_timestamp_place_a_stream_start(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    t = fresh_topic(bs, "stream-start")
    base_ts = (int(time.time()) - 600) * 1000
    produce(bs, t, [{"value": str(i).encode(), "partition": i % 3, "timestamp": base_ts + i * 1000}
                    for i in range(30)])

    def run_available_now(name: str, **opts: str) -> list[tuple[int, int, str]]:
        q = (kafka_stream(spark, bs, subscribe=t, **opts)
             .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / name)).trigger(availableNow=True).start())
        finish(q)
        return memory_rows(spark, name)

    assert run_available_now("from_json", startingOffsets=json.dumps({t: {"0": 8, "1": -2, "2": -1}})) == sorted(
        [(0, o, str(o * 3)) for o in range(8, 10)] + [(1, o, str(o * 3 + 1)) for o in range(10)])
    # Record 13 (partition 1, offset 4) is stamped base + 13 s: it and everything after it, per partition.
    assert run_available_now("from_time", startingTimestamp=str(base_ts + 13_000)) == sorted(
        (i % 3, i // 3, str(i)) for i in range(13, 30))

    q = (kafka_stream(spark, bs, subscribe=t, startingOffsets="latest")
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("memory").queryName("from_latest")
         .option("checkpointLocation", str(tmp_path / "latest")).trigger(processingTime="100 milliseconds").start())
    try:
        wait_until("the stream to pick its start", lambda: q.lastProgress, q)
        produce(bs, t, [{"value": str(i).encode(), "partition": i % 3} for i in range(30, 36)])
        wait_until("the new rows", lambda: len(memory_rows(spark, "from_latest")) >= 6, q)
        assert memory_rows(spark, "from_latest") == sorted((i % 3, i // 3, str(i)) for i in range(30, 36))
    finally:
        q.stop()


def test_the_streaming_kafka_sink_copies_keys_values_headers_and_partitions(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    src, dst = fresh_topic(bs, "sink-src"), fresh_topic(bs, "sink-dst")
    produce(bs, src, sample_records(60, partitions=PARTITIONS, base_ts_ms=(int(time.time()) - 60) * 1000))
    q = (kafka_stream(spark, bs, subscribe=src, startingOffsets="earliest", includeHeaders="true")
         .selectExpr("key", "value", "headers", "partition")
         .writeStream.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    finish(q)
    want = read_all(bs, src)
    got = read_all(bs, dst)
    # Same partition, same order within it, same key, value and headers (offsets and timestamps are new).
    assert [(r.partition, r.offset, r.key, r.value, r.headers) for r in got] == [
        (r.partition, r.offset, r.key, r.value, r.headers) for r in want]


