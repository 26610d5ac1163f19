"""What the jobs share: the command-line options every job takes, and the Kafka source they read from."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from sofakafka.pipelines.naming import physical_topic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def job_parser(prog: str, description: str, default_topic: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092",
                        help="kafka.bootstrap.servers: the sofakafka (or Kafka) cluster to read")
    parser.add_argument("--topic", default=default_topic, help=f"logical topic name (default {default_topic})")
    parser.add_argument("--instance", help="LDC instance (namespace): read the physical topic $INSTANCE.$CELL.$TOPIC")
    parser.add_argument("--cell", help="LDC cell; with --instance names the cell's physical topic")
    parser.add_argument("--master", help="Spark master when not run by spark-submit (default local[2])")
    parser.add_argument("--shuffle-partitions", type=int, default=4,
                        help="spark.sql.shuffle.partitions (default 4; a streaming query keeps the number it "
                             "started with in its checkpoint)")
    parser.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra option of the Kafka source, e.g. kafka.security.protocol=SASL_SSL "
                             "(repeatable)")
    return parser


def source_topic(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """The physical topic the options name; a bad combination is a usage error naming the option."""
    try:
        return physical_topic(args.topic, instance=args.instance, cell=args.cell)
    except ValueError as exc:
        parser.error(str(exc))
        raise


def kafka_options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": args.bootstrap_server}
    for item in args.kafka_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--kafka-option {item!r}: expected KEY=VALUE")
        options[key] = value
    return options


def read_kafka(spark: SparkSession, options: dict[str, str], *, stream: bool, **more: Any) -> DataFrame:
    """``format("kafka")`` with ``options`` and ``more`` (None values left out), batch or streaming."""
    reader: Any = spark.readStream if stream else spark.read
    reader = reader.format("kafka")
    for key, value in {**options, **more}.items():
        if value is not None:
            reader = reader.option(key, str(value))
    df: DataFrame = reader.load()
    return df
