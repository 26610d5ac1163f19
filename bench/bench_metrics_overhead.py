"""What the broker's metrics counting costs a request, measured in one process so the machine's noise cancels.

Two measurements, printed side by side:

1. The replica manager's produce and fetch paths (``ReplicaManager.append_records`` / ``fetch_messages`` over a
   real log in a temporary directory, on the append and read threads as in the broker), with the broker's
   ``BrokerMetrics`` and with a stand-in whose ``record_*`` methods do nothing: blocks of ``--calls`` calls
   alternate between the two (A B A B ...) for ``--rounds`` rounds, and the CPU time of the process per call is
   compared block by block (median of the per-round ratios), so a slow moment of the machine lands on both.
2. The per-request counting the connection does for every request (two ``perf_counter`` reads and
   ``record_request``), timed alone in microseconds, to set against a request's whole cost.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_metrics_overhead.py [--calls 2000] [--rounds 8] [--records 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import timeit
from pathlib import Path

from sofakafka.broker.metrics import FETCH_CONSUMER, BrokerMetrics
from sofakafka.broker.replica_manager import FetchPartitionRequest, ReplicaManager
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.records import RecordBatchBuilder
from sofakafka.storage.config import LogConfig
from sofakafka.storage.log_manager import LogManager

TOPIC = "bench"


class NoMetrics(BrokerMetrics):
    """The same object, counting nothing: the baseline."""

    def record_request(self, api_key: int, api_version: int, total_ms: float, fetch_kind: str | None = None) -> None:
        pass

    def record_produce(self, topic: str, size: int, messages: int) -> None:
        pass

    def record_failed_produce(self, topic: str, error_name: str) -> None:
        pass

    def record_fetch(self, topic: str, size: int, *, replica: bool = False) -> None:
        pass

    def record_failed_fetch(self, topic: str, error_name: str) -> None:
        pass


def batch(records: int, value_bytes: int) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(records):
        builder.append_record(i, 1_700_000_000_000 + i, None, b"v" * value_bytes)
    return builder.build()


async def block(rm: ReplicaManager, calls: int, data: bytes) -> tuple[float, float]:
    """CPU seconds per call of a produce, then of a consumer fetch of what it appended."""
    start = time.process_time()
    for _ in range(calls):
        await rm.append_records(acks=1, timeout_ms=1000, entries=[((TOPIC, 0), bytearray(data))], produce_version=8)
    produced = time.process_time()
    end_offset = rm.get_partition((TOPIC, 0)).log.log_end_offset  # type: ignore[union-attr]
    offset = max(0, end_offset - calls)
    for _ in range(calls):
        await rm.fetch_messages(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                partitions=[FetchPartitionRequest(TOPIC, 0, offset, 1 << 20)])
    fetched = time.process_time()
    return (produced - start) / calls, (fetched - produced) / calls


async def run(args: argparse.Namespace) -> None:
    data = batch(args.records, args.value_bytes)
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        managers = {}
        for name, metrics in (("counting", BrokerMetrics()), ("not counting", NoMetrics())):
            logs = LogManager([Path(tmp) / name.replace(" ", "-")], default_config=LogConfig.from_props({}), broker_id=0)
            logs.startup()
            rm = ReplicaManager(0, logs, metrics=metrics)
            await rm.become_leader(TOPIC, 0, 0, [0], [0], zk_version=0, controller_epoch=1)
            managers[name] = (logs, rm)
        per: dict[str, list[tuple[float, float]]] = {name: [] for name in managers}
        for _, rm in managers.values():  # warm-up, not counted
            await block(rm, args.calls // 4, data)
        for _ in range(args.rounds):
            for name, (_, rm) in managers.items():
                per[name].append(await block(rm, args.calls, data))
        for logs, rm in managers.values():
            rm.begin_shutdown()
            rm.shutdown_executors()
            logs.shutdown()
    counting, baseline = per["counting"], per["not counting"]
    produce_ratio = statistics.median(c[0] / b[0] for c, b in zip(counting, baseline, strict=True))
    fetch_ratio = statistics.median(c[1] / b[1] for c, b in zip(counting, baseline, strict=True))
    print(f"replica manager, {args.records} records of {args.value_bytes} B a batch, {args.rounds} rounds of "
          f"{args.calls} calls, CPU us per call (median):")
    print(f"  {'':14} {'counting':>10} {'not counting':>13} {'ratio':>7}")
    for label, i, ratio in (("produce", 0, produce_ratio), ("fetch", 1, fetch_ratio)):
        print(f"  {label:14} {statistics.median(c[i] for c in counting) * 1e6:10.1f} "
              f"{statistics.median(b[i] for b in baseline) * 1e6:13.1f} {ratio:7.3f}")
    metrics = BrokerMetrics()

    def per_request() -> None:
        started = time.perf_counter()
        metrics.record_request(ApiKey.PRODUCE, 8, (time.perf_counter() - started) * 1000.0)

    def per_fetch() -> None:
        started = time.perf_counter()
        metrics.record_request(ApiKey.FETCH, 11, (time.perf_counter() - started) * 1000.0, FETCH_CONSUMER)

    n = 200_000
    empty = min(timeit.repeat(lambda: None, number=n, repeat=5)) / n
    produce_us = (min(timeit.repeat(per_request, number=n, repeat=5)) / n - empty) * 1e6
    fetch_us = (min(timeit.repeat(per_fetch, number=n, repeat=5)) / n - empty) * 1e6
    print(f"connection, per request (best of 5 x {n}): {produce_us:.2f} us a Produce, {fetch_us:.2f} us a Fetch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="calls per block")
    parser.add_argument("--rounds", type=int, default=8, help="A/B rounds")
    parser.add_argument("--records", type=int, default=20, help="records per produced batch")
    parser.add_argument("--value-bytes", type=int, default=100)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
