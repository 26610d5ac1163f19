"""Cluster produce benchmark: 3 brokers on this machine (`sofakafka cluster up`), a topic with RF=3 and
min.insync.replicas=2, 1 KB records, acks=all, produced by librdkafka (confluent-kafka).

Reported: messages/s and MB/s from the first send to the last delivery report, and the latency of each
record from `produce()` to its delivery report (the broker's acks=all answer: the ISR has it), p50/p99/max.
Latency includes librdkafka's batching (``linger.ms``), as an application sees it.

The cluster is started in a temporary directory on free ports and stopped (and deleted) at the end, also on
Ctrl-C. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_cluster.py [--messages 200000] [--partitions 6] [--linger-ms 5]
    PYTHONPATH=. .venv/bin/python bench/bench_cluster.py --rate 10000 --messages 100000   # latency, paced
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer

from sofakafka.cli import cluster as cl
from sofakafka.client import KafkaClient, NewTopic
from sofakafka.protocol.errors import ErrorCode

BROKERS = 3


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports() -> tuple[int, int]:
    for _ in range(200):
        # Below Linux's ephemeral range (32768+), where client sockets could take a port between the check
        # and the bind.
        base = random.randrange(20000, 32768 - cl.METRICS_PORT_OFFSET - BROKERS)
        if all(_free(p) for p in [*cl.broker_ports(base, BROKERS), base + 200]):
            return base, base + 200
    raise SystemExit("no free port block")


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def run(args: argparse.Namespace, bootstrap: str) -> dict[str, object]:
    topic = "bench-cluster"
    with KafkaClient(bootstrap) as client:
        result = client.create_topics([NewTopic(topic, args.partitions, 3, configs={"min.insync.replicas": "2"})])
        if result[topic].error != ErrorCode.NONE:
            raise SystemExit(f"create topic: {result[topic]}")
        leaders = sorted(p.leader for p in client.metadata([topic]).topics[topic].partitions.values())
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": args.linger_ms,
        "batch.num.messages": 10000, "batch.size": args.batch_bytes, "compression.type": "none",
        "queue.buffering.max.messages": 200000, "queue.buffering.max.kbytes": 1048576,
        "enable.idempotence": args.idempotence,
    })
    value = random.randbytes(args.record_bytes)
    latencies: list[float] = []
    failures: list[str] = []

    def delivered(err: KafkaError | None, msg: Message, start: float) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            latencies.append(time.perf_counter() - start)

    # Warm-up: metadata, connections, the first batches, outside the measurement.
    for _ in range(1000):
        producer.produce(topic, value)
    producer.flush(60)
    began = time.perf_counter()
    sent = 0
    deadline = began + args.max_seconds
    interval = 1.0 / args.rate if args.rate else 0.0
    while sent < args.messages and time.perf_counter() < deadline:
        start = time.perf_counter()
        if interval:
            # Paced: record n is due at began + n * interval; never ahead of schedule, so the latency
            # measured is the cluster's, not the wait behind a backlog in librdkafka's queue.
            due = began + sent * interval
            if start < due:
                producer.poll(min(due - start, 0.01))
                continue
        try:
            producer.produce(topic, value, on_delivery=lambda e, m, s=start: delivered(e, m, s))
            sent += 1
        except BufferError:
            producer.poll(0.01)
            continue
        if sent % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - began
    latencies.sort()
    done = len(latencies)
    return {
        "brokers": BROKERS, "partitions": args.partitions, "replication_factor": 3, "min_insync_replicas": 2,
        "leaders": leaders, "record_bytes": args.record_bytes, "linger_ms": args.linger_ms,
        "batch_bytes": args.batch_bytes, "idempotence": args.idempotence,
        "rate_limit": args.rate or None,
        "sent": sent, "acknowledged": done, "failed": len(failures), "unflushed": remaining,
        "first_failures": failures[:3],
        "seconds": round(elapsed, 2),
        "msg_per_s": round(done / elapsed),
        "mb_per_s": round(done * args.record_bytes / elapsed / 1e6, 1),
        "latency_ms": {
            "p50": round(percentile(latencies, 0.50) * 1000, 1),
            "p99": round(percentile(latencies, 0.99) * 1000, 1),
            "max": round(latencies[-1] * 1000, 1),
            "mean": round(statistics.fmean(latencies) * 1000, 1),
        } if latencies else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--max-seconds", type=float, default=120.0, help="stop sending after this long")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-bytes", type=int, default=1_000_000)
    parser.add_argument("--idempotence", action="store_true")
    parser.add_argument("--rate", type=int, default=0,
                        help="records per second (0: as fast as the producer's queue allows)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    base, zk = free_ports()
    state = None
    try:
        state = cl.up(cl.ClusterSpec(BROKERS, directory, base, zk))
        report = run(args, state.bootstrap_servers)
        report["python"] = platform.python_version()
        print(json.dumps(report, indent=2))
    finally:
        if state is not None:
            cl.down(directory)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
