"""Batch reads and writes through ``format("kafka")`` equal what confluent-kafka reads from the same topics.

Every start/end option of the source is checked against librdkafka's view of the same records (key, value,
headers, topic, partition, offset, timestamp): ``subscribe``, ``subscribePattern``, ``assign``,
``startingOffsets``/``endingOffsets`` (earliest, latest, JSON per partition with -2/-1), and the by-time
forms, each at a record's own timestamp, one millisecond before and one after it. The Kafka sink writes rows
that confluent-kafka reads back intact.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.conftest import BrokerProcess
from tests.spark.kafka_io import Row, create_topic, produce, read_all, sample_records, spark_rows

PARTITIONS = 3
COUNT = 90


@pytest.fixture(scope="module")
def source(module_broker: BrokerProcess) -> dict[str, Any]:
    """A 3-partition topic of COUNT records (30 per partition), and a second topic matching the same pattern."""
    bs = module_broker.bootstrap
    base_ts = (int(time.time()) - 3600) * 1000
    topics = {"main": "batch-src-main", "other": "batch-src-other", "unrelated": "unrelated-batch"}
    for t in topics.values():
        create_topic(bs, t, PARTITIONS)
    produce(bs, topics["main"], sample_records(COUNT, partitions=PARTITIONS, base_ts_ms=base_ts, tag="main"))
    produce(bs, topics["other"], sample_records(12, partitions=PARTITIONS, base_ts_ms=base_ts, tag="other"))
    produce(bs, topics["unrelated"], sample_records(6, partitions=PARTITIONS, base_ts_ms=base_ts, tag="x"))
    return {"bootstrap": bs, "base_ts": base_ts, **topics}


def kafka_read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_a_whole_topic_with_headers_equals_confluent_kafka(spark: Any, source: dict[str, Any]) -> None:
    df = kafka_read(spark, source["bootstrap"], subscribe=source["main"], includeHeaders="true")
    got = spark_rows(df, headers=True)
    want = read_all(source["bootstrap"], source["main"])
    assert len(want) == COUNT
    assert got == want
    # The headers survive with their order, repeats and null values.
    assert any(v is None for r in got for _, v in r.headers)
    assert any([k for k, _ in r.headers].count("i") == 2 for r in got)


def test_without_include_headers_there_is_no_headers_column(spark: Any, source: dict[str, Any]) -> None:
    df = kafka_read(spark, source["bootstrap"], subscribe=source["main"])
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert {r["timestampType"] for r in df.select("timestampType").distinct().collect()} == {0}  # CreateTime


@pytest.mark.parametrize(("starting", "ending", "ranges"), [
    ("earliest", "latest", {0: (0, 30), 1: (0, 30), 2: (0, 30)}),
    ({"0": 5, "1": -2, "2": 29}, "latest", {0: (5, 30), 1: (0, 30), 2: (29, 30)}),
    ("earliest", {"0": 10, "1": -1, "2": 0}, {0: (0, 10), 1: (0, 30), 2: (0, 0)}),
    ({"0": 3, "1": 30, "2": 7}, {"0": 4, "1": -1, "2": 8}, {0: (3, 4), 1: (30, 30), 2: (7, 8)}),
], ids=["earliest-latest", "json-start", "json-end", "json-both-edges"])
def test_starting_and_ending_offsets(spark: Any, source: dict[str, Any], starting: Any, ending: Any,
                                     ranges: dict[int, tuple[int, int]]) -> None:
    t = source["main"]

    def spec(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps({t: v})

    df = kafka_read(spark, source["bootstrap"], subscribe=t, startingOffsets=spec(starting),
                    endingOffsets=spec(ending), includeHeaders="true")
    assert spark_rows(df, headers=True) == read_all(source["bootstrap"], t, ranges)


def test_assign_reads_only_the_named_partitions(spark: Any, source: dict[str, Any]) -> None:
    t = source["main"]
    df = kafka_read(spark, source["bootstrap"], assign=json.dumps({t: [0, 2]}))
    want = [r for r in read_all(source["bootstrap"], t) if r.partition in (0, 2)]
    assert spark_rows(df) == [Row(*r.__dict__.values()) for r in (
        Row(w.topic, w.partition, w.offset, w.key, w.value, w.timestamp_ms) for w in want)]
    assert {r.partition for r in spark_rows(df)} == {0, 2}


def test_subscribe_pattern_reads_every_matching_topic_and_no_other(spark: Any, source: dict[str, Any]) -> None:
    df = kafka_read(spark, source["bootstrap"], subscribePattern="batch-src-.*")
    want = sorted(_no_headers(read_all(source["bootstrap"], source["main"]))
                  + _no_headers(read_all(source["bootstrap"], source["other"])))
    assert spark_rows(df) == want
    assert {r.topic for r in spark_rows(df)} == {source["main"], source["other"]}


def test_subscribe_to_several_topics(spark: Any, source: dict[str, Any]) -> None:
    df = kafka_read(spark, source["bootstrap"], subscribe=f"{source['main']},{source['unrelated']}")
    want = sorted(_no_headers(read_all(source["bootstrap"], source["main"]))
                  + _no_headers(read_all(source["bootstrap"], source["unrelated"])))
    assert spark_rows(df) == want


def _no_headers(rows: list[Row]) -> list[Row]:
    return [Row(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp_ms) for r in rows]


def offsets_for_time(bootstrap: str, topic: str, ts: int) -> dict[int, int]:
    """confluent-kafka's offsetsForTimes: partition -> first offset with timestamp >= ts (the end if none)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reference-times"})
    try:
        found = c.offsets_for_times([TopicPartition(topic, p, ts) for p in range(PARTITIONS)], timeout=30)
        out = {}
        for tp in found:
            assert tp.error is None, tp.error
            out[tp.partition] = tp.offset if tp.offset >= 0 else c.get_watermark_offsets(
                TopicPartition(topic, tp.partition), timeout=30)[1]
        return out
    finally:
        c.close()


# Record 40 (partition 1, offset 13) has timestamp base + 40 s; records are 1 s apart, spread round-robin.
@pytest.mark.parametrize("delta_ms", [-1, 0, 1], ids=["one-ms-before", "equal", "one-ms-after"])
def test_starting_timestamp_is_the_first_offset_at_or_after_it(spark: Any, source: dict[str, Any],
                                                                 delta_ms: int) -> None:
    t, bs = source["main"], source["bootstrap"]
    ts = source["base_ts"] + 40_000 + delta_ms
    starts = offsets_for_time(bs, t, ts)
    if delta_ms <= 0:
        assert starts[1] == 13  # the record stamped exactly ts is included
    else:
        assert starts[1] == 14
    df = kafka_read(spark, bs, subscribe=t, startingTimestamp=str(ts))
    want = read_all(bs, t, {p: (o, 30) for p, o in starts.items()})
    assert spark_rows(df) == _no_headers(want)


@pytest.mark.parametrize("delta_ms", [-1, 0, 1], ids=["one-ms-before", "equal", "one-ms-after"])
def test_offsets_by_timestamp_per_partition_for_start_and_end(spark: Any, source: dict[str, Any],
                                                              delta_ms: int) -> None:
    t, bs, base = source["main"], source["bootstrap"], source["base_ts"]
    start_ts = {"0": base + 30_000 + delta_ms, "1": base + 1_000, "2": base + 2_000}
    end_ts = {"0": base + 60_000 + delta_ms, "1": base + 88_000, "2": base + 89_000}
    starts = {int(p): offsets_for_time(bs, t, ts)[int(p)] for p, ts in start_ts.items()}
    ends = {int(p): offsets_for_time(bs, t, ts)[int(p)] for p, ts in end_ts.items()}
    assert starts[0] == (10 if delta_ms <= 0 else 11) and ends[0] == (20 if delta_ms <= 0 else 21)
    df = kafka_read(spark, bs, subscribe=t, startingOffsetsByTimestamp=json.dumps({t: start_ts}),
                    endingOffsetsByTimestamp=json.dumps({t: end_ts}))
    want = read_all(bs, t, {p: (starts[p], ends[p]) for p in range(PARTITIONS)})
    assert spark_rows(df) == _no_headers(want)


def test_ending_timestamp_for_every_partition(spark: Any, source: dict[str, Any]) -> None:
    t, bs = source["main"], source["bootstrap"]
    ts = source["base_ts"] + 45_000
    ends = offsets_for_time(bs, t, ts)
    df = kafka_read(spark, bs, subscribe=t, endingTimestamp=str(ts))
    assert spark_rows(df) == _no_headers(read_all(bs, t, {p: (0, e) for p, e in ends.items()}))
    assert len(spark_rows(df)) == 45


def test_the_kafka_sink_writes_rows_that_read_back_intact(spark: Any, module_broker: BrokerProcess) -> None:
    from pyspark.sql import types as T

    bs = module_broker.bootstrap
    create_topic(bs, "batch-sink-a", PARTITIONS)
    create_topic(bs, "batch-sink-b", 1)
    header = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
    schema = T.StructType([
        T.StructField("topic", T.StringType()), T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()), T.StructField("partition", T.IntegerType()),
        T.StructField("headers", T.ArrayType(header)),
    ])
    rows = []
    for i in range(60):
        topic = "batch-sink-a" if i % 4 else "batch-sink-b"
        rows.append((topic, None if i % 9 == 0 else f"k{i}".encode(), f"v{i}".encode() + bytes([0, 255]),
                     i % (PARTITIONS if topic == "batch-sink-a" else 1),
                     [("n", str(i).encode()), ("empty", None)] if i % 2 else []))
    spark.createDataFrame(rows, schema).coalesce(1).write.format("kafka").option("kafka.bootstrap.servers", bs).save()
    got = read_all(bs, "batch-sink-a") + read_all(bs, "batch-sink-b")
    assert sorted(((r.topic, r.partition, r.key, r.value, r.headers) for r in got), key=repr) == sorted(
        ((t, p, k, v, tuple(h)) for t, k, v, p, h in rows), key=repr)
    # Within a partition the sink keeps the order of its input rows (one task wrote them).
    in_a0 = [r.value for r in read_all(bs, "batch-sink-a") if r.partition == 0]
    assert in_a0 == [v for t, _, v, p, _ in rows if t == "batch-sink-a" and p == 0]


def test_the_sink_with_a_topic_option_and_keyless_rows(spark: Any, module_broker: BrokerProcess) -> None:
    bs = module_broker.bootstrap
    create_topic(bs, "batch-sink-c", PARTITIONS)
    df = spark.range(0, 300).selectExpr("CAST(id AS STRING) AS value")
    df.write.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", "batch-sink-c").save()
    got = read_all(bs, "batch-sink-c")
    assert sorted(int(r.value or b"") for r in got) == list(range(300))
    assert all(r.key is None for r in got)
    # And Spark reads back exactly what it wrote.
    back = kafka_read(spark, bs, subscribe="batch-sink-c")
    assert spark_rows(back) == _no_headers(got)
