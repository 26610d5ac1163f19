"""Stream analytics: orders by region per minute, written exactly once through a checkpoint.

Orders (JSON, see :mod:`~sofakafka.pipelines.generator`) are counted and summed per event-time window and
region. The query keeps its Kafka offsets and aggregation state in ``--checkpoint``, and writes with Spark's
Parquet file sink in append mode: a window is written once the watermark has passed its end, and the sink's
own log (``_spark_metadata``) commits each micro-batch's files together with the batch, so a query killed at
any point and started again on the same checkpoint ends with every window exactly once. With
``--read-committed`` the source reads with ``kafka.isolation.level=read_committed`` (records of aborted
transactions never count; useful once producers write transactionally).

    python -m sofakafka.pipelines orders --bootstrap-server HOST:9092 --out /tmp/orders --available-now
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sofakafka.pipelines.common import job_parser, kafka_options, read_kafka, source_topic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ORDER_SCHEMA = "order_id STRING, region STRING, amount_cents BIGINT, currency STRING, ts TIMESTAMP"
OUTPUT_SCHEMA = "window_start TIMESTAMP, window_end TIMESTAMP, region STRING, orders BIGINT, revenue_cents BIGINT"


def parse_orders(raw: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    parsed = raw.select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o")).select("o.*")
    return parsed.where(F.col("ts").isNotNull() & F.col("region").isNotNull() & F.col("amount_cents").isNotNull())


def orders_per_region(orders: DataFrame, window: str = "1 minute") -> DataFrame:
    from pyspark.sql import functions as F

    return (orders.groupBy(F.window("ts", window).alias("window"), "region")
            .agg(F.count(F.lit(1)).alias("orders"), F.sum("amount_cents").alias("revenue_cents"))
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "region", "orders", "revenue_cents"))


def start(spark: Any, options: dict[str, str], topic: str, args: argparse.Namespace) -> Any:
    more = {"kafka.isolation.level": "read_committed"} if args.read_committed else {}
    raw = read_kafka(spark, {**options, **more}, stream=True, subscribe=topic,
                     startingOffsets=args.starting_offsets, maxOffsetsPerTrigger=args.max_offsets_per_trigger)
    result = orders_per_region(parse_orders(raw).withWatermark("ts", args.watermark), args.window)
    writer = (result.writeStream.queryName("orders_per_region").outputMode("append").format("parquet")
              .option("path", args.out).option("checkpointLocation", args.checkpoint))
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(
        processingTime=args.trigger)
    return writer.start()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="Parquet output folder")
    parser.add_argument("--checkpoint", help="checkpoint folder (default OUT/../<name of OUT>-checkpoint)")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="30 seconds", help="how late an order may arrive and still count")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--trigger", default="5 seconds")
    parser.add_argument("--available-now", action="store_true", help="process what is there now, then stop")
    parser.add_argument("--read-committed", action="store_true",
                        help="read with kafka.isolation.level=read_committed")
    parser.add_argument("--duration", type=float, help="stop after this many seconds")


def main(argv: list[str] | None = None) -> int:
    from sofakafka.pipelines.connector import spark_session
    from sofakafka.pipelines.log_analytics import watch

    parser = job_parser("python -m sofakafka.pipelines orders", "Orders by region per minute with Spark.",
                        "orders")
    add_arguments(parser)
    args = parser.parse_args(argv)
    topic = source_topic(args, parser)
    options = kafka_options(args, parser)
    out = Path(args.out)
    args.checkpoint = args.checkpoint or str(out.parent / f"{out.name}-checkpoint")
    spark = spark_session("sofakafka-stream-analytics", master=args.master, shuffle_partitions=args.shuffle_partitions)
    query = start(spark, options, topic, args)
    return watch([query], args.duration)


if __name__ == "__main__":
    sys.exit(main())
