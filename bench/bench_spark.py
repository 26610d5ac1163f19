"""Spark reading a big topic from sofakafka, next to confluent-kafka reading the same topic, in one run.

One sofakafka broker (``python -m sofakafka serve`` on a free loopback port, a temporary ``log.dirs``), one
topic of ``--partitions`` partitions filled with ``--mb`` MB of ``--record-bytes`` records (confluent-kafka,
acks=1, no compression). Then, on that same topic:

1. confluent-kafka: one consumer assigned every partition from the start, ``consume()`` in batches until each
   partition's end; rows/s and MB/s from the first call to the last record;
2. Spark: ``spark.read.format("kafka")...load().count()`` in local[2] through Spark's own connector
   (spark-sql-kafka-0-10, the jars scripts/test.sh caches), twice with the connector's default fetch sizes
   (the first run includes the JIT warming up, the second is the steady figure), then once with the fetch
   sizes the confluent-kafka reader uses (10 MB per partition, 50 MB per fetch). The SparkSession is started
   before the clock starts.

The broker and its data are removed at the end, also on Ctrl-C. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_spark.py --mb 1024
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_broker(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = open(work / "broker.log", "ab")  # lives as long as the broker
    proc = subprocess.Popen([sys.executable, "-m", "sofakafka", "serve", "--override",
                             f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={work / 'data'}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    bootstrap = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)
            return proc, bootstrap
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"broker did not start; see {work / 'broker.log'}")


def fill(bootstrap: str, topic: str, partitions: int, total_bytes: int, record_bytes: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(60)
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 512 * 1024, "compression.type": "none"})
    value = os.urandom(record_bytes)
    count = total_bytes // record_bytes
    started = time.monotonic()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, key=str(i).encode(), partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(600) == 0, "records left unsent"
    elapsed = time.monotonic() - started
    print(f"filled {topic}: {count} records, {count * record_bytes / 1e6:.0f} MB in {elapsed:.1f} s", flush=True)
    return count


def confluent_read(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-reference", "enable.auto.commit": False,
                  "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    started = time.monotonic()
    while seen < expected:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                seen += 1
    elapsed = time.monotonic() - started
    c.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=1024, help="topic size in MB (default 1024)")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()
    from sofakafka.pipelines.connector import spark_session

    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    proc, bootstrap = start_broker(work)
    try:
        topic = "bench-spark"
        rows = fill(bootstrap, topic, args.partitions, args.mb * 1_000_000, args.record_bytes)
        mb = rows * args.record_bytes / 1e6
        ck = confluent_read(bootstrap, topic, args.partitions, rows)
        spark = spark_session("bench-spark", jars="cache", log_level="ERROR")
        spark_times = []
        # Twice with the connector's defaults (1 MB per partition per fetch), then with the fetch sizes the
        # confluent-kafka reader above uses, so that the last line compares like with like.
        for options in ({}, {}, {"kafka.max.partition.fetch.bytes": "10485760", "kafka.fetch.max.bytes": "52428800"}):
            started = time.monotonic()
            n = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic).options(**options).load().count())
            spark_times.append(time.monotonic() - started)
            assert n == rows, f"Spark counted {n}, {rows} were produced"
        spark.stop()
        print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"load average before reading {os.getloadavg()[0]:.1f}")
        print(f"topic: {rows} records of {args.record_bytes} B ({mb:.0f} MB) in {args.partitions} partitions\n")
        print(f"{'reader':42} {'seconds':>8} {'rows/s':>10} {'MB/s':>7}")
        lines = [("confluent-kafka, one consumer", ck),
                 ("Spark local[2] count(), first run", spark_times[0]),
                 ("Spark local[2] count(), second run", spark_times[1]),
                 ("Spark, fetch sizes as confluent-kafka's", spark_times[2])]
        for name, secs in lines:
            print(f"{name:42} {secs:8.1f} {rows / secs:10.0f} {mb / secs:7.1f}")
        print(f"\nSpark (second run) / confluent-kafka: {ck / spark_times[1]:.2f}x")
        return 0
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
