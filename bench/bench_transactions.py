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
stopped and removed at the end. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_transactions.py [--messages 50000] [--partitions 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

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

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_broker(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = open(data / "broker.log", "wb")  # the broker writes it as long as it runs
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.Popen([sys.executable, "-m", "sofakafka", "serve", "--log-level", "WARNING",
                             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                             "--override", f"log.dirs={data / 'logs'}",
                             "--override", "transaction.state.log.num.partitions=5",
                             "--override", "offsets.topic.num.partitions=5"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    bootstrap = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, bootstrap
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the broker did not start")


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--sizes", default="100,10000", help="records per transaction, comma-separated")
    ap.add_argument("--linger-ms", type=int, default=5, help="the producers' linger.ms")
    ap.add_argument("--raw-transactions", type=int, default=300, help="transactions of the broker-side table")
    args = ap.parse_args()
    global LINGER_MS
    LINGER_MS = args.linger_ms
    sizes = [int(s) for s in args.sizes.split(",")]
    value = os.urandom(args.record_bytes)
    tmp = Path(tempfile.mkdtemp(prefix="bench-txn-"))
    proc, bootstrap = start_broker(tmp)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = {name: NewTopic(name, args.partitions, 1)
                  for name in ("plain", "raw", *(f"txn-{s}" for s in sizes))}
        for f in admin.create_topics(list(topics.values())).values():
            f.result(60)
        n, mb = args.messages, args.messages * args.record_bytes / 1e6
        plain_s = run_plain(bootstrap, "plain", n, value, args.partitions)
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
              f"{n:,} records of {args.record_bytes} B to {args.partitions} partitions, one broker, "
              f"linger.ms={LINGER_MS}")
        header = f"{'load':<28}{'msg/s':>10}{'MB/s':>8}{'vs plain':>10}{'txns':>7}{'overhead/txn':>14}{'commit p50':>12}"
        print(header)
        print(f"{'idempotent, no transactions':<28}{n / plain_s:>10,.0f}{mb / plain_s:>8.1f}{'1.00x':>10}"
              f"{'-':>7}{'-':>14}{'-':>12}")
        for size in sizes:
            elapsed, commits = run_transactions(bootstrap, f"txn-{size}", n, size, value, args.partitions)
            overhead_ms = (elapsed - plain_s) / len(commits) * 1000
            print(f"{f'transactions of {size:,}':<28}{n / elapsed:>10,.0f}{mb / elapsed:>8.1f}"
                  f"{plain_s / elapsed:>9.2f}x{len(commits):>7}{overhead_ms:>12.2f}ms"
                  f"{statistics.median(commits) * 1000:>10.2f}ms")
        if args.raw_transactions > 0:
            steps = run_raw(bootstrap, "raw", args.partitions, args.raw_transactions, value)
            totals = [sum(parts) for parts in zip(*steps.values(), strict=True)]
            print(f"\nbroker side, {args.raw_transactions} transactions of 100 records, one request at a time:")
            print(f"{'step':<28}{'p50':>10}{'p90':>10}")
            for name, times in (*steps.items(), ("whole transaction", totals)):
                ordered = sorted(times)
                print(f"{name:<28}{ordered[len(ordered) // 2] * 1000:>8.2f}ms"
                      f"{ordered[int(len(ordered) * 0.9)] * 1000:>8.2f}ms")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
