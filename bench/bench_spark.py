"""Spark reading a big topic from sofakafka and from Apache Kafka 2.6, next to confluent-kafka, in one run.

Per broker, one at a time: one broker process, one topic of ``--partitions`` partitions filled with
``--megabytes`` MB of ``--record-bytes`` records (confluent-kafka, acks=1, no compression; the same record
value, keys and partitioning on every broker). Then, on that topic:

1. confluent-kafka: one consumer assigned every partition from the start, ``consume()`` in batches until each
   partition's end; rows/s and MB/s from the first call to the last record;
2. Spark: ``spark.read.format("kafka")...load().count()`` in local[2] through Spark's own connector
   (spark-sql-kafka-0-10, the jars scripts/test.sh caches), twice with the connector's default fetch sizes
   (the first run includes the JIT warming up, the second is the steady figure), then once with the fetch
   sizes the confluent-kafka reader uses (10 MB per partition, 50 MB per fetch). Spark runs in a fresh Python
   process (so a fresh JVM) per broker: the second broker's first run is as cold as the first broker's. The
   SparkSession is started before the clock starts.

The brokers: sofakafka (``python -m sofakafka serve`` on a free loopback port, a temporary ``log.dirs``), then,
with ``--kafka-peer`` (on by default when the kafka_2.13 2.6.3 jars scripts/test.sh resolves are in
interop/java/target/lib and ``java`` and Debian's ZooKeeper are installed), Apache Kafka 2.6 started the way the
interop tests start it (bench/peer.py: ``ReferenceKafka`` on a ZooKeeper of its own, a 1 GB G1 JVM). Each
broker is stopped and its data removed before the next one starts, so they never share the CPU; also on
Ctrl-C. The table prints every reader against every broker, rows/s and MB/s, and the ratio sofakafka/Kafka
(above 1: sofakafka ahead). The load average is sampled every 5 s while each broker is measured. Run from the
repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_spark.py [--megabytes 1024] [--no-kafka-peer]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.peer import kafka_broker, kafka_peer_available, load, sofakafka_broker

TOPIC = "bench-spark"
# The confluent-kafka reader's fetch sizes; Spark's third run uses the same (the connector's default is 1 MB per
# partition per fetch).
FETCH = {"fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760}
SPARK_RUNS: list[tuple[str, dict[str, str]]] = [
    ("Spark local[2] count(), first run", {}),
    ("Spark local[2] count(), second run", {}),
    ("Spark, fetch sizes as confluent-kafka's", {f"kafka.{k}": str(v) for k, v in FETCH.items()}),
]


def fill(bootstrap: str, partitions: int, count: int, value: bytes) -> float:
    """``count`` records of ``value``, key ``str(i)``, record i to partition i % partitions; seconds taken."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        f.result(60)
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 512 * 1024, "compression.type": "none"})
    started = time.monotonic()
    for i in range(count):
        while True:
            try:
                p.produce(TOPIC, value, key=str(i).encode(), partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(600) == 0, "records left unsent"
    return time.monotonic() - started


def confluent_read(bootstrap: str, partitions: int, expected: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-reference", "enable.auto.commit": False,
                  **FETCH})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    seen = 0
    started = time.monotonic()
    while seen < expected:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                seen += 1
    elapsed = time.monotonic() - started
    c.close()
    return elapsed


def spark_counts(bootstrap: str, expected: int) -> list[float]:
    """Runs in a child process of its own (a fresh JVM): the seconds of each of SPARK_RUNS."""
    from sofakafka.pipelines.connector import spark_session

    spark = spark_session("bench-spark", jars="cache", log_level="ERROR")
    try:
        times = []
        for _, options in SPARK_RUNS:
            started = time.monotonic()
            n = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", TOPIC).options(**options).load().count())
            times.append(time.monotonic() - started)
            assert n == expected, f"Spark counted {n}, {expected} were produced"
        return times
    finally:
        spark.stop()


class LoadSampler:
    """The 1-minute load average every ``period`` seconds while it runs."""

    def __init__(self, period: float = 5.0) -> None:
        self.period = period
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.period):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> str:
        s = self.samples
        return f"{min(s):.1f} / {sum(s) / len(s):.1f} / {max(s):.1f}" if s else "-"


@dataclass
class Measured:
    seconds: dict[str, float] = field(default_factory=dict)  # reader -> seconds
    load: str = "-"


def measure(bootstrap: str, args: argparse.Namespace, count: int, value: bytes) -> Measured:
    r = Measured()
    r.seconds["confluent-kafka producer (the fill)"] = fill(bootstrap, args.partitions, count, value)
    print(f"  filled: {count} records in {r.seconds['confluent-kafka producer (the fill)']:.1f} s", flush=True)
    r.seconds["confluent-kafka, one consumer"] = confluent_read(bootstrap, args.partitions, count)
    print(f"  confluent-kafka read: {r.seconds['confluent-kafka, one consumer']:.1f} s", flush=True)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        times = pool.submit(spark_counts, bootstrap, count).result()
    for (name, _), secs in zip(SPARK_RUNS, times, strict=True):
        r.seconds[name] = secs
        print(f"  {name}: {secs:.1f} s", flush=True)
    return r


def print_table(results: dict[str, Measured], count: int, mb: float) -> None:
    names = list(results)
    both = len(names) == 2
    print(f"\n{'reader (rows/s, MB/s)':42}" + "".join(f"{b + ' rows/s':>18}{'MB/s':>7}" for b in names)
          + (f"{'ratio':>8}" if both else ""))
    readers = list(next(iter(results.values())).seconds)
    for reader in readers:
        line = f"{reader:42}"
        for r in results.values():
            secs = r.seconds[reader]
            line += f"{count / secs:>18,.0f}{mb / secs:>7.1f}"
        if both:
            ours, theirs = (r.seconds[reader] for r in results.values())
            line += f"{theirs / ours:>7.2f}x"  # rows/s ratio: time is the inverse of rate
        print(line)
    print("\nseconds: " + "; ".join(
        f"{b}: " + ", ".join(f"{s:.1f}" for s in r.seconds.values()) for b, r in results.items()))
    print("load average (1 min) while measured, min / mean / max: "
          + "; ".join(f"{b}: {r.load}" for b, r in results.items()))
    for b, r in results.items():
        first, second = r.seconds[SPARK_RUNS[0][0]], r.seconds[SPARK_RUNS[1][0]]
        print(f"{b}: Spark (second run) / confluent-kafka: {r.seconds['confluent-kafka, one consumer'] / second:.2f}x"
              f" (first run {r.seconds['confluent-kafka, one consumer'] / first:.2f}x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--megabytes", "--mb", dest="megabytes", type=int, default=1024,
                        help="topic size in MB (default 1024)")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--kafka-peer", action=argparse.BooleanOptionalAction, default=None,
                        help="also measure Apache Kafka 2.6 (default: when its jars, java and ZooKeeper are present)")
    args = parser.parse_args()
    missing = kafka_peer_available()
    if args.kafka_peer and missing:
        raise SystemExit(f"--kafka-peer: {missing}")
    peer = missing is None if args.kafka_peer is None else args.kafka_peer
    count = args.megabytes * 1_000_000 // args.record_bytes
    mb = count * args.record_bytes / 1e6
    value = os.urandom(args.record_bytes)  # one value for every record on every broker
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; topic: "
          f"{count} records of {args.record_bytes} B ({mb:.0f} MB) in {args.partitions} partitions; "
          f"load average {load()} at start", flush=True)
    if not peer:
        print(f"(no Apache Kafka peer: {missing or '--no-kafka-peer'})")
    brokers: dict[str, Callable[[Path], contextlib.AbstractContextManager[str]]] = {"sofakafka": sofakafka_broker}
    if peer:
        brokers["Kafka 2.6"] = lambda tmp: kafka_broker(tmp, "/bench-spark")
    results: dict[str, Measured] = {}
    for name, start in brokers.items():
        tmp = Path(tempfile.mkdtemp(prefix="bench-spark-"))
        try:
            print(f"{name}:", flush=True)
            with start(tmp) as bootstrap, LoadSampler() as sampler:
                results[name] = measure(bootstrap, args, count, value)
            results[name].load = sampler.summary()
            print(f"({name} measured and stopped; load average {load()})", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print_table(results, count, mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
