"""Transactional produce throughput against the same load without transactions, on one sofakafka broker.

librdkafka (confluent-kafka) sends ``--messages`` records of ``--record-bytes`` to a topic of ``--partitions``
partitions, three ways, one after the other against the same broker process:

1. plain: an idempotent producer (``enable.idempotence``: acks=all, sequence numbers), which is what a
   transactional producer is underneath, so the comparison isolates the transactions;
2. transactions of 100 records: ``begin_transaction``, 100 ``produce``, ``commit_transaction``, repeated;
3. transactions of 10,000 records, the same way.

msg/s and MB/s run from the first ``produce()`` to the last commit (or ``flush()``) returning. The
per-transaction overhead is (time with transactions - time without) / number of transactions; if it were paid
per record it would be the same total for both transaction sizes, i.e. 100 times larger per transaction for
10,000-record transactions. The median ``commit_transaction`` call (EndTxn, the coordinator's PrepareCommit
append, its answer; the markers follow asynchronously) is printed too.

A second table times the broker's side alone, without librdkafka's own scheduling: our protocol client sends
the requests of one 100-record transaction one after the other (AddPartitionsToTxn for every partition, which
also waits for the previous transaction's markers; one Produce per partition; EndTxn), ``--raw-transactions``
times, and prints the p50/p90 of each step.

The broker is started with ``python -m sofakafka serve`` on a free port and a temporary ``log.dirs``, and
stopped and removed at the end.

``--kafka-peer`` (on by default when the kafka_2.13 2.6.3 jars scripts/test.sh resolves are in
interop/java/target/lib and ``java`` and Debian's ZooKeeper are installed) runs the same loads, in the same run,
against Apache Kafka 2.6, started the way the interop tests start it (``tests.reference.kafka.ReferenceKafka``:
one broker on a ZooKeeper of its own, temporary dirs, ``SHARED_SETTINGS``: transaction.state.log replication
factor 1 and min.isr 1), after the sofakafka broker has stopped, so the two never share the CPU. Both brokers
first get ``--warmup-messages`` records (idempotent, then in transactions of 100) on a topic of their own: Kafka's
JIT compiles its hot paths under the first load. The tables then print both brokers side by side with the
ratio sofakafka/Kafka (msg/s: above 1 means sofakafka is ahead; overhead and latencies: Kafka/sofakafka, above
1 likewise means sofakafka is ahead). What the two have in common (librdkafka, Python's loop around it, the
machine) shows as the same figure on both sides. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_transactions.py [--messages 50000] [--partitions 3] [--no-kafka-peer]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # where it is defined (admin re-exports it implicitly)

from bench.peer import kafka_broker, kafka_peer_available, load
from bench.peer import sofakafka_broker as peer_sofakafka_broker
from sofakafka.client import BrokerConnection
from sofakafka.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from sofakafka.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from sofakafka.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from sofakafka.protocol.messages.produce import ProduceRequest, ProduceResponse
from sofakafka.protocol.records import RecordBatchBuilder

LINGER_MS = 5


def producer(bootstrap: str, txn_id: str | None) -> Producer:
    config = {"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS, "batch.size": 1_000_000,
              "queue.buffering.max.messages": 200_000, "enable.idempotence": True}
    if txn_id is not None:
        config["transactional.id"] = txn_id
    return Producer(config)


def send(p: Producer, topic: str, value: bytes, partitions: int, i: int) -> None:
    while True:
        try:
            p.produce(topic, value, partition=i % partitions)
            return
        except BufferError:
            p.poll(0.01)


def run_plain(bootstrap: str, topic: str, n: int, value: bytes, partitions: int) -> float:
    p = producer(bootstrap, None)
    send(p, topic, value, partitions, 0)
    p.flush(60)  # connection and metadata out of the timing
    t0 = time.perf_counter()
    for i in range(n):
        send(p, topic, value, partitions, i)
    assert p.flush(300) == 0
    return time.perf_counter() - t0


def run_transactions(bootstrap: str, topic: str, n: int, size: int, value: bytes,
                     partitions: int) -> tuple[float, list[float]]:
    p = producer(bootstrap, f"bench-{uuid.uuid4().hex[:8]}")
    p.init_transactions(60)
    p.begin_transaction()  # warm-up transaction: coordinator lookup, partitions added once
    for i in range(partitions):
        send(p, topic, value, partitions, i)
    p.commit_transaction(60)
    commits: list[float] = []
    t0 = time.perf_counter()
    sent = 0
    while sent < n:
        p.begin_transaction()
        for i in range(min(size, n - sent)):
            send(p, topic, value, partitions, sent + i)
        sent += min(size, n - sent)
        c0 = time.perf_counter()
        p.commit_transaction(120)
        commits.append(time.perf_counter() - c0)
    return time.perf_counter() - t0, commits


def run_raw(bootstrap: str, topic: str, partitions: int, count: int, value: bytes) -> dict[str, list[float]]:
    """One transaction at a time over one connection (single broker: coordinator and leader are the same)."""
    host, port = bootstrap.rsplit(":", 1)
    txn_id = f"raw-{uuid.uuid4().hex[:8]}"
    steps: dict[str, list[float]] = {"AddPartitionsToTxn": [], f"Produce x{partitions}": [], "EndTxn": []}
    with BrokerConnection(host, int(port), client_id="bench-raw") as conn:
        while True:
            found = conn.send(FindCoordinatorRequest(key=txn_id, key_type=1), 3)
            assert isinstance(found, FindCoordinatorResponse)
            if found.error_code == 0:
                break
            time.sleep(0.1)
        init = conn.send(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60_000), 3)
        assert isinstance(init, InitProducerIdResponse) and init.error_code == 0, init
        pid, epoch = init.producer_id, init.producer_epoch
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        P = ProduceRequest.TopicProduceData
        per_partition = 100 // partitions
        retries = 0
        for k in range(count):
            t0 = time.perf_counter()
            while True:  # CONCURRENT_TRANSACTIONS (51): the last markers took longer than the broker's wait
                added = conn.send(AddPartitionsToTxnRequest(
                    transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                    topics=[T(name=topic, partitions=list(range(partitions)))]), 1)
                assert isinstance(added, AddPartitionsToTxnResponse)
                codes = {p.error_code for t in added.results for p in t.results}
                if codes != {51}:
                    break
                retries += 1
            assert codes == {0}, added
            t1 = time.perf_counter()
            for p in range(partitions):
                batch = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=k * per_partition,
                                           is_transactional=True)
                now = int(time.time() * 1000)
                for i in range(per_partition):
                    batch.append_record(i, now, None, value)
                produced = conn.send(ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=30_000, topics=[
                    P(name=topic, partitions=[P.PartitionProduceData(partition_index=p, records=batch.build())])]), 8)
                assert isinstance(produced, ProduceResponse)
                assert produced.responses[0].partitions[0].error_code == 0, produced
            t2 = time.perf_counter()
            ended = conn.send(EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                            committed=True), 1)
            assert isinstance(ended, EndTxnResponse) and ended.error_code == 0, ended
            t3 = time.perf_counter()
            for name, dt in zip(steps, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                steps[name].append(dt)
    if retries:
        print(f"({retries} AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS and were sent again)")
    return steps


def sofakafka_broker(tmp: Path) -> contextlib.AbstractContextManager[str]:
    return peer_sofakafka_broker(tmp, {"transaction.state.log.num.partitions": "5",
                                       "offsets.topic.num.partitions": "5"})


@dataclass
class Results:
    plain_s: float = 0.0
    txns: dict[int, tuple[float, list[float]]] = field(default_factory=dict)
    raw: dict[str, list[float]] = field(default_factory=dict)
    raw_error: str = ""


def measure(bootstrap: str, args: argparse.Namespace, sizes: list[int], value: bytes) -> Results:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = {name: NewTopic(name, args.partitions, 1)
              for name in ("warmup-plain", "warmup-txn", "plain", "raw", *(f"txn-{s}" for s in sizes))}
    for f in admin.create_topics(list(topics.values())).values():
        f.result(60)
    if args.warmup_messages > 0:
        run_plain(bootstrap, "warmup-plain", args.warmup_messages, value, args.partitions)
        run_transactions(bootstrap, "warmup-txn", args.warmup_messages, 100, value, args.partitions)
    r = Results(plain_s=run_plain(bootstrap, "plain", args.messages, value, args.partitions))
    for size in sizes:
        r.txns[size] = run_transactions(bootstrap, f"txn-{size}", args.messages, size, value, args.partitions)
    if args.raw_transactions > 0:
        try:
            r.raw = run_raw(bootstrap, "raw", args.partitions, args.raw_transactions, value)
        except AssertionError as e:  # printed, not hidden: the table then says why a column is empty
            r.raw_error = f"{type(e).__name__}: {str(e)[:200]}"
    return r


def ratio(ours: float, theirs: float, more_is_better: bool) -> str:
    if ours <= 0 or theirs <= 0:  # an overhead within noise (negative) has no meaningful ratio
        return "-"
    return f"{(ours / theirs if more_is_better else theirs / ours):.2f}x"


def print_tables(results: dict[str, Results], args: argparse.Namespace, sizes: list[int]) -> None:
    names = list(results)
    n, mb = args.messages, args.messages * args.record_bytes / 1e6
    both = len(names) == 2
    cols = "".join(f"{b + ' msg/s':>17}{'MB/s':>7}{'vs plain':>9}{'overhead/txn':>13}{'commit p50':>11}"
                   for b in names)
    print(f"\n{'load':<28}{'txns':>6}{cols}" + (f"{'msg/s ratio':>12}{'overhead ratio':>15}" if both else ""))
    rows: list[tuple[str, int, list[tuple[float, float | None, float | None]]]] = [
        ("idempotent, no transactions", 0, [(r.plain_s, None, None) for r in results.values()])]
    for size in sizes:
        cells: list[tuple[float, float | None, float | None]] = []
        count = 0
        for r in results.values():
            elapsed, commits = r.txns[size]
            count = len(commits)
            cells.append((elapsed, (elapsed - r.plain_s) / count * 1000, statistics.median(commits) * 1000))
        rows.append((f"transactions of {size:,}", count, cells))
    for label, count, cells in rows:
        line = f"{label:<28}{count or '-':>6}"
        for (elapsed, overhead, commit), r in zip(cells, results.values(), strict=True):
            line += (f"{n / elapsed:>17,.0f}{mb / elapsed:>7.1f}{r.plain_s / elapsed:>8.2f}x"
                     + (f"{overhead:>11.2f}ms{commit:>9.2f}ms" if overhead is not None and commit is not None
                        else f"{'-':>13}{'-':>11}"))
        if both:
            (ours, o_over, _), (theirs, t_over, _) = cells
            line += f"{ratio(theirs, ours, True):>12}"  # msg/s ratio: time is the inverse of rate
            line += f"{ratio(o_over, t_over, False) if o_over is not None and t_over is not None else '-':>15}"
        print(line)
    if args.raw_transactions > 0:
        print(f"\nbroker side, {args.raw_transactions} transactions of 100 records, one request at a time "
              "(p50 / p90):")
        print(f"{'step':<28}" + "".join(f"{b:>22}" for b in names) + (f"{'p50 ratio':>11}" if both else ""))
        step_names = next((list(r.raw) for r in results.values() if r.raw), [])
        p50s: dict[str, list[float]] = {}
        for step in (*step_names, "whole transaction"):
            line = f"{step:<28}"
            for r in results.values():
                if not r.raw:
                    line += f"{'-':>22}"
                    continue
                times = (r.raw[step] if step in r.raw
                         else [sum(parts) for parts in zip(*r.raw.values(), strict=True)])
                ordered = sorted(times)
                p50s.setdefault(step, []).append(ordered[len(ordered) // 2] * 1000)
                line += f"{ordered[len(ordered) // 2] * 1000:>10.2f} / {ordered[int(len(ordered) * 0.9)] * 1000:>6.2f}ms"
            if both and len(p50s.get(step, [])) == 2:
                line += f"{ratio(p50s[step][0], p50s[step][1], False):>11}"
            print(line)
        for b, r in results.items():
            if r.raw_error:
                print(f"({b}: the broker-side table failed: {r.raw_error})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--sizes", default="100,10000", help="records per transaction, comma-separated")
    ap.add_argument("--linger-ms", type=int, default=5, help="the producers' linger.ms")
    ap.add_argument("--raw-transactions", type=int, default=300, help="transactions of the broker-side table")
    ap.add_argument("--warmup-messages", type=int, default=10_000,
                    help="records produced on each broker before it is measured, plain and in transactions of 100")
    ap.add_argument("--kafka-peer", action=argparse.BooleanOptionalAction, default=None,
                    help="also run the loads against Apache Kafka 2.6 (default: when its jars, java and "
                         "ZooKeeper are present)")
    args = ap.parse_args()
    global LINGER_MS
    LINGER_MS = args.linger_ms
    sizes = [int(s) for s in args.sizes.split(",")]
    value = os.urandom(args.record_bytes)
    missing = kafka_peer_available()
    if args.kafka_peer and missing:
        raise SystemExit(f"--kafka-peer: {missing}")
    peer = missing is None if args.kafka_peer is None else args.kafka_peer
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.messages:,} records of {args.record_bytes} B to {args.partitions} partitions, one broker, "
          f"linger.ms={LINGER_MS}; load average {load()} at start", flush=True)
    if not peer:
        print(f"(no Apache Kafka peer: {missing or '--no-kafka-peer'})")
    brokers = {"sofakafka": sofakafka_broker}
    if peer:
        brokers["Kafka 2.6"] = lambda tmp: kafka_broker(tmp, "/bench-txn")
    results: dict[str, Results] = {}
    for name, start in brokers.items():
        tmp = Path(tempfile.mkdtemp(prefix="bench-txn-"))
        try:
            with start(tmp) as bootstrap:
                results[name] = measure(bootstrap, args, sizes, value)
            print(f"({name} measured; load average {load()})", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print_tables(results, args, sizes)


if __name__ == "__main__":
    main()
