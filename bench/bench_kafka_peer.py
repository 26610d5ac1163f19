"""sofakafka and Apache Kafka 2.6 side by side, in one run on one machine, measured by Kafka's own perf tools.

Each setup runs against a sofakafka and a Kafka 2.6 (kafka_2.13 2.6.3, the jars scripts/test.sh resolves) with
the same settings:

- ``single``: one broker each (Kafka on a ZooKeeper of its own, sofakafka with its embedded metadata store),
  a topic of 3 partitions, RF 1, acks=1;
- ``cluster``: three brokers each (sofakafka: ``sofakafka cluster up``'s; Kafka: the same server.properties
  from the launcher's template), a topic of 3 partitions, RF 3, min.insync.replicas 2, acks=all.

Measured, each with a fresh topic:

- ``kafka-producer-perf-test`` (org.apache.kafka.tools.ProducerPerformance) flat out: records/s, MB/s;
- ``kafka-consumer-perf-test`` (kafka.tools.ConsumerPerformance) reading those records: records/s, MB/s;
- ``kafka-producer-perf-test`` paced at ``--rate`` records/s: the send-to-ack latency p50/p99;
- ``kafka.tools.EndToEndLatency``: one record at a time produced and consumed, p50/p99 of the round trip.

Each broker first gets ``--warmup-records`` produced and consumed (Kafka's JIT compiles its hot paths under
the first load; measured cold, Kafka looks several times slower than it is). Printed as one table per setup, sofakafka | Kafka 2.6 | ratio (sofakafka/Kafka for rates, Kafka/sofakafka for
latencies: above 1 means sofakafka is ahead). Run from the repository root after scripts/test.sh::

    PYTHONPATH=. .venv/bin/python bench/bench_kafka_peer.py [--records 200000] [--rate 2000] [--setups single,cluster]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from sofakafka.client import KafkaClient, NewTopic
from tests.cluster.conftest import start_zookeeper
from tests.cluster.test_failover import running_cluster
from tests.integration.conftest import BrokerProcess, free_port
from tests.reference.java import run_main
from tests.reference.kafka import SHARED_SETTINGS, ReferenceCluster, ReferenceKafka

PERF_JVM = ("-Xms256m", "-Xmx1g", "-XX:+UseG1GC")  # the perf tools' own JVM: a steady one, not the tests' quick one
_topics = iter(range(1, 1_000_000))


def create_topic(bootstrap: str, rf: int) -> str:
    name = f"perf-{next(_topics)}"
    configs = {"min.insync.replicas": "2"} if rf == 3 else {}
    with KafkaClient(bootstrap, request_timeout_ms=30_000) as c:
        result = c.create_topics([NewTopic(name, 3, rf, configs=configs)])
        assert result[name].error == 0, result
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            parts = c.metadata([name]).topics[name].partitions
            if len(parts) == 3 and all(p.leader >= 0 and len(p.isr) == rf for p in parts.values()):
                break
            time.sleep(0.2)
    return name


def tool(main: str, *args: str) -> str:
    return run_main(main, list(args), jvm_flags=PERF_JVM, timeout=1800).stdout


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str, rate: int = -1) -> dict[str, float]:
    out = tool("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(records),
               "--record-size", str(size), "--throughput", str(rate), "--producer-props",
               f"bootstrap.servers={bootstrap}", f"acks={acks}", "linger.ms=5", "batch.size=65536")
    m = re.search(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                  r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th", out, re.MULTILINE)
    assert m, out
    return {"records/s": float(m[2]), "MB/s": float(m[3]), "p50 ms": float(m[6]), "p99 ms": float(m[8])}


def consume(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    out = tool("kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
               "--messages", str(records), "--timeout", "60000")
    header, values = out.strip().splitlines()[-2:]
    row = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=False))
    assert int(row["data.consumed.in.nMsg"]) >= records, out
    return {"records/s": float(row["nMsg.sec"]), "MB/s": float(row["MB.sec"])}


def end_to_end(bootstrap: str, topic: str, records: int, acks: str) -> dict[str, float]:
    out = tool("kafka.tools.EndToEndLatency", bootstrap, topic, str(records), acks, "100")
    m = re.search(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+)", out)
    assert m, out
    return {"p50 ms": float(m[1]), "p99 ms": float(m[2])}


def measure(bootstrap: str, rf: int, acks: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    if args.warmup_records:
        # Kafka's JIT compiles its hot paths in the first seconds of load: measure the broker warm, as in use.
        warm = create_topic(bootstrap, rf)
        produce(bootstrap, warm, args.warmup_records, args.record_size, acks)
        consume(bootstrap, warm, args.warmup_records)
    topic = create_topic(bootstrap, rf)
    results = {"produce": produce(bootstrap, topic, args.records, args.record_size, acks)}
    results["consume"] = consume(bootstrap, topic, args.records)
    paced = create_topic(bootstrap, rf)
    results["produce paced"] = produce(bootstrap, paced, args.rate * args.paced_seconds, args.record_size, acks,
                                       rate=args.rate)
    single = create_topic(bootstrap, rf)
    results["end to end"] = end_to_end(bootstrap, single, args.e2e_records, acks)
    return results


@contextlib.contextmanager
def single_brokers(base: Path) -> Iterator[dict[str, str]]:
    zk = start_zookeeper(base / "zookeeper", free_port())
    kafka = ReferenceKafka(base / "kafka", zk.hosts + "/bench", heap="1g",
                           jvm_flags=("-Xms1g", "-Xmx1g", "-XX:+UseG1GC"))
    sofakafka = BrokerProcess(base / "sofakafka", dict(SHARED_SETTINGS))
    try:
        kafka.start()
        sofakafka.start()
        yield {"sofakafka": sofakafka.bootstrap, "kafka": kafka.bootstrap}
    finally:
        sofakafka.stop()
        kafka.kill()
        zk.stop()


@contextlib.contextmanager
def three_broker_clusters(base: Path) -> Iterator[dict[str, str]]:
    zk = start_zookeeper(base / "zookeeper", free_port())
    settings = {"group.initial.rebalance.delay.ms": "0"}
    kafka = ReferenceCluster(base / "kafka", zk.hosts + "/bench-cluster", overrides=settings)
    for b in kafka.brokers:
        b.jvm_flags = ("-Xms512m", "-Xmx512m", "-XX:+UseG1GC")
    try:
        kafka.start()
        with running_cluster(base / "sofakafka", settings) as cluster:
            yield {"sofakafka": cluster.all_bootstrap, "kafka": kafka.bootstrap}
    finally:
        kafka.kill()
        zk.stop()


def table(setup: str, results: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = [f"\n{setup}", f"{'measure':<34}{'sofakafka':>12}{'Kafka 2.6':>12}{'ratio':>8}"]
    for step, metrics in results["kafka"].items():
        for metric, theirs in metrics.items():
            ours = results["sofakafka"][step][metric]
            faster_is_more = not metric.endswith("ms")
            ratio = (ours / theirs if faster_is_more else theirs / ours) if ours and theirs else float("nan")
            lines.append(f"{step + ' ' + metric:<34}{ours:>12.2f}{theirs:>12.2f}{ratio:>7.2f}x")
    return "\n".join(lines)


def machine() -> str:
    """The box the figures come from: CPU model and count, memory, and the load it was under (a shared machine)."""
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:", 1)[1].split()[0])
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    return f"{os.cpu_count()} x {model}, {mem} RAM, {platform.system()} {platform.release()}"


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=200_000, help="records for the flat-out produce and the consume")
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--rate", type=int, default=2000, help="records/s of the paced produce")
    p.add_argument("--paced-seconds", type=int, default=10)
    p.add_argument("--e2e-records", type=int, default=2000, help="round trips of EndToEndLatency")
    p.add_argument("--warmup-records", type=int, default=100_000,
                   help="produced and consumed on each broker before it is measured (0: none)")
    p.add_argument("--setups", default="single,cluster")
    args = p.parse_args()
    print(f"machine: {machine()}; python {platform.python_version()}; {load()} at start", flush=True)
    print(f"{args.records} records of {args.record_size} B, paced at {args.rate}/s for {args.paced_seconds} s, "
          f"{args.e2e_records} end-to-end round trips", flush=True)
    setups = {"single": (single_brokers, 1, "1"), "cluster": (three_broker_clusters, 3, "all")}
    for name in args.setups.split(","):
        start, rf, acks = setups[name]
        with tempfile.TemporaryDirectory(prefix=f"bench-peer-{name}-") as tmp, start(Path(tmp)) as bootstraps:
            results = {broker: measure(b, rf, acks, args) for broker, b in bootstraps.items()}
            print(table(f"{name}: {'1 broker, RF 1, acks=1' if rf == 1 else '3 brokers, RF 3, acks=all'}", results),
                  flush=True)
            print(f"({load()} after {name})", flush=True)


if __name__ == "__main__":
    main()
