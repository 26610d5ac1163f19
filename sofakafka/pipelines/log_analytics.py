"""Log analytics: web access logs in a topic -> per-window statistics, over history (batch) or live (stream).

Metrics, each per event-time window (the time inside the log line, not the record's):

- ``requests``: request counts by status and path;
- ``latency``: request count, p50/p95/p99 (exact percentiles, linear interpolation) and max response time;
- ``top_clients``: the ``--top`` clients by request count (batch only: ranking inside a window is not a
  streaming operation in Spark);
- ``error_bursts``: short windows (``--burst-window``, 10 s) where 5xx answers are at least
  ``--burst-min-errors`` and at least ``--burst-min-ratio`` of all requests.

Batch mode reads the topic from earliest to latest and overwrites ``OUT/<metric>``. Stream mode runs one
query per metric with a watermark: a window is written once the watermark passes its end, and lines that
arrive after that (late data) are dropped, as Spark does; output goes to ``OUT/<metric>/batch_id=N`` (one
folder per micro-batch, overwritten when a batch is replayed after a restart, so the Parquet output is
exactly-once) and, with ``--results-topic``, as JSON to that topic (at-least-once: Spark's Kafka sink is).

    python -m sofakafka.pipelines logs --mode batch --bootstrap-server HOST:9092 --out /tmp/logstats
    spark-submit --jars ... sofakafka/pipelines/log_analytics.py --mode stream ...
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sofakafka.pipelines.common import job_parser, kafka_options, read_kafka, source_topic
from sofakafka.pipelines.generator import ACCESS_LOG_PATTERN, SPARK_ACCESS_LOG_TIME_FORMAT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

STREAM_METRICS = ("requests", "latency", "error_bursts")
BATCH_METRICS = (*STREAM_METRICS, "top_clients")


def parse(raw: DataFrame) -> DataFrame:
    """Kafka rows -> (ts, client, method, path, status, bytes, latency_ms); lines that do not parse are
    left out (Spark 4 runs in ANSI mode, where casting a bad field would fail the whole job)."""
    from pyspark.sql import functions as F

    line = F.col("value").cast("string")

    def field(i: int) -> Any:
        return F.regexp_extract(F.col("line"), ACCESS_LOG_PATTERN, i)

    return (raw.select(line.alias("line"))
            .where(F.col("line").rlike(ACCESS_LOG_PATTERN))
            .select(F.to_timestamp(field(2), SPARK_ACCESS_LOG_TIME_FORMAT).alias("ts"),
                    field(1).alias("client"), field(3).alias("method"), field(4).alias("path"),
                    field(5).cast("int").alias("status"), field(6).cast("long").alias("bytes"),
                    field(7).cast("int").alias("latency_ms")))


def _flat(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    rest = [c for c in df.columns if c != "window"]
    return df.select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), *rest)


def request_counts(logs: DataFrame, window: str = "1 minute") -> DataFrame:
    from pyspark.sql import functions as F

    return _flat(logs.groupBy(F.window("ts", window).alias("window"), "status", "path")
                 .agg(F.count(F.lit(1)).alias("requests")))


def latency(logs: DataFrame, window: str = "1 minute") -> DataFrame:
    from pyspark.sql import functions as F

    return _flat(logs.groupBy(F.window("ts", window).alias("window")).agg(
        F.count(F.lit(1)).alias("requests"),
        F.percentile("latency_ms", F.lit(0.5)).alias("p50_ms"),
        F.percentile("latency_ms", F.lit(0.95)).alias("p95_ms"),
        F.percentile("latency_ms", F.lit(0.99)).alias("p99_ms"),
        F.max("latency_ms").alias("max_ms")))


def top_clients(logs: DataFrame, window: str = "1 minute", top: int = 5) -> DataFrame:
    """The ``top`` clients of each window by requests (ties broken by client address, ascending)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    counts = _flat(logs.groupBy(F.window("ts", window).alias("window"), "client")
                   .agg(F.count(F.lit(1)).alias("requests")))
    rank = F.row_number().over(Window.partitionBy("window_start").orderBy(F.desc("requests"), F.asc("client")))
    return counts.withColumn("rank", rank).where(F.col("rank") <= top)


def error_bursts(logs: DataFrame, window: str = "10 seconds", min_errors: int = 10,
                 min_ratio: float = 0.1) -> DataFrame:
    from pyspark.sql import functions as F

    counted = logs.groupBy(F.window("ts", window).alias("window")).agg(
        F.count(F.lit(1)).alias("requests"),
        F.sum(F.when(F.col("status") >= 500, 1).otherwise(0)).alias("errors"))
    return _flat(counted.where((F.col("errors") >= min_errors)
                               & (F.col("errors") >= F.col("requests") * F.lit(min_ratio))))


def metrics(logs: DataFrame, args: argparse.Namespace, *, stream: bool) -> dict[str, DataFrame]:
    if stream:
        logs = logs.withWatermark("ts", args.watermark)
    out = {
        "requests": request_counts(logs, args.window),
        "latency": latency(logs, args.window),
        "error_bursts": error_bursts(logs, args.burst_window, args.burst_min_errors, args.burst_min_ratio),
    }
    if not stream:
        out["top_clients"] = top_clients(logs, args.window, args.top)
    return out


def as_kafka_rows(metric: str, df: DataFrame) -> DataFrame:
    """One JSON record per result row, keyed ``metric|window_start|...`` so a compacted results topic keeps
    the latest answer per window and dimension."""
    from pyspark.sql import functions as F

    dims = [c for c in ("status", "path", "client") if c in df.columns]
    key = F.concat_ws("|", F.lit(metric), F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'"),
                      *[F.col(d).cast("string") for d in dims])
    value = F.to_json(F.struct(F.lit(metric).alias("metric"), *[F.col(c) for c in df.columns]))
    return df.select(key.alias("key"), value.alias("value"))


def run_batch(spark: SparkSession, options: dict[str, str], topic: str, args: argparse.Namespace) -> dict[str, int]:
    raw = read_kafka(spark, options, stream=False, subscribe=topic, startingOffsets="earliest",
                     endingOffsets="latest")
    logs = parse(raw).cache()
    counts: dict[str, int] = {}
    for name, df in metrics(logs, args, stream=False).items():
        df.write.mode("overwrite").parquet(str(Path(args.out) / name))
        if args.results_topic:
            as_kafka_rows(name, df).write.format("kafka").options(**_sink_options(options)).option(
                "topic", args.results_topic).save()
        counts[name] = spark.read.parquet(str(Path(args.out) / name)).count()
    logs.unpersist()
    return counts


def _sink_options(options: dict[str, str]) -> dict[str, str]:
    """The source's connection options (kafka.*) without the source-only ones."""
    return {k: v for k, v in options.items() if k.startswith("kafka.") and k != "kafka.isolation.level"}


def start_stream(spark: SparkSession, options: dict[str, str], topic: str, args: argparse.Namespace) -> list[Any]:
    """One streaming query per metric, each with its checkpoint under ``args.checkpoint/<metric>``."""
    raw = read_kafka(spark, options, stream=True, subscribe=topic, startingOffsets=args.starting_offsets,
                     maxOffsetsPerTrigger=args.max_offsets_per_trigger)
    queries = []
    for name, df in metrics(parse(raw), args, stream=True).items():
        writer = (df.writeStream.queryName(f"logs_{name}").outputMode("append")
                  .option("checkpointLocation", str(Path(args.checkpoint) / name))
                  .foreachBatch(_batch_writer(name, Path(args.out) / name, args.results_topic,
                                              _sink_options(options))))
        writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(
            processingTime=args.trigger)
        queries.append(writer.start())
    return queries


def _batch_writer(name: str, out: Path, results_topic: str | None, sink_options: dict[str, str]) -> Any:
    def write(df: DataFrame, batch_id: int) -> None:
        # Overwriting this batch's own folder makes a replayed batch (same offsets, same state, same rows
        # after a restart) replace its earlier attempt instead of adding to it.
        df.write.mode("overwrite").parquet(str(out / f"batch_id={batch_id}"))
        if results_topic:
            as_kafka_rows(name, df).write.format("kafka").options(**sink_options).option(
                "topic", results_topic).save()
    return write


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=("batch", "stream"), default="batch")
    parser.add_argument("--out", required=True, help="folder for the Parquet output, one subfolder per metric")
    parser.add_argument("--results-topic", help="also write every result row as JSON to this topic")
    parser.add_argument("--checkpoint", help="stream mode: checkpoint folder (default OUT/_checkpoints)")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="2 minutes",
                        help="stream mode: how late a line may arrive and still count")
    parser.add_argument("--burst-window", default="10 seconds")
    parser.add_argument("--burst-min-errors", type=int, default=10)
    parser.add_argument("--burst-min-ratio", type=float, default=0.1)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--trigger", default="5 seconds", help="stream mode: processing-time trigger interval")
    parser.add_argument("--available-now", action="store_true",
                        help="stream mode: process what is in the topic now, then stop")
    parser.add_argument("--duration", type=float, help="stream mode: stop after this many seconds")


def main(argv: list[str] | None = None) -> int:
    from sofakafka.pipelines.connector import spark_session

    parser = job_parser("python -m sofakafka.pipelines logs", "Access-log statistics with Spark.", "access-logs")
    add_arguments(parser)
    args = parser.parse_args(argv)
    topic = source_topic(args, parser)
    options = kafka_options(args, parser)
    args.checkpoint = args.checkpoint or str(Path(args.out) / "_checkpoints")
    spark = spark_session("sofakafka-log-analytics", master=args.master, shuffle_partitions=args.shuffle_partitions)
    if args.mode == "batch":
        counts = run_batch(spark, options, topic, args)
        for name in BATCH_METRICS:
            print(f"{name}: {counts[name]} rows -> {Path(args.out) / name}")
        spark.read.parquet(str(Path(args.out) / "latency")).orderBy("window_start").show(10, truncate=False)
        return 0
    queries = start_stream(spark, options, topic, args)
    return watch(queries, args.duration)


def watch(queries: list[Any], duration: float | None) -> int:
    """Print each query's progress every few seconds until they end (or ``duration`` passes); the exit code
    is 1 when one of them failed."""
    started = time.monotonic()
    try:
        while any(q.isActive for q in queries):
            if duration is not None and time.monotonic() - started > duration:
                break
            time.sleep(5)
            for q in queries:
                p = q.lastProgress
                if p is not None:
                    print(f"{q.name}: batch {p['batchId']}, {p['numInputRows']} rows "
                          f"({p.get('processedRowsPerSecond') or 0:.0f} rows/s)", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        for q in queries:
            q.stop()
    failed = [q for q in queries if q.exception() is not None]
    for q in failed:
        print(f"{q.name} failed: {q.exception()}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
