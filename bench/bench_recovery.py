"""Unclean recovery of many small logs, through the storage layer alone (no broker, no network).

``--partitions`` logs (one topic, ``LogManager.get_or_create_logs``) each get ``--records`` one-record batches
from a non-idempotent producer (``append_as_leader``, as an acks=1 produce does), with ``--idempotent``
from one idempotent producer per log instead. The log manager is then abandoned as ``kill -9`` leaves it: no
flush, no recovery-point checkpoint, no clean-shutdown marker, so every log is recovered from offset 0. The
figure is the time of ``LogManager(...).startup()`` on that directory, which is what a restarted broker
spends before it listens. ``--runs`` repeats write and restart on a fresh directory each time (a restart writes
producer snapshots, which would change the next one's work, and copying a directory of preallocated indexes
costs more than writing it again). The page cache is written back (``os.sync``) between write and restart. ``--profile`` prints a cProfile of the last run's log loading (serialised, so use it with
``--threads 1``).

    PYTHONPATH=. .venv/bin/python bench/bench_recovery.py --partitions 5000,20000 [--threads 1]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sofakafka.protocol.records import RecordBatchBuilder
from sofakafka.storage.log_manager import LogManager


def batch(offset: int, producer_id: int, sequence: int) -> bytearray:
    b = RecordBatchBuilder(base_offset=0, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                           base_sequence=sequence if producer_id >= 0 else -1)
    b.append_record(0, 1_700_000_000_000 + offset, b"key", b"v" * 100)
    return bytearray(b.build())


def write_state(root: Path, partitions: int, records: int, idempotent: bool) -> None:
    manager = LogManager([root])
    manager.startup()
    logs = manager.get_or_create_logs([("t", p) for p in range(partitions)])
    for p, lg in logs.items():
        for i in range(records):
            lg.append_as_leader(batch(i, 1000 + p[1] if idempotent else -1, i), 0)
    manager.abandon()


def restart(root: Path, threads: int, profile: bool) -> float:
    manager = LogManager([root], recovery_threads_per_data_dir=threads)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        # The logs load on the recovery threads, which a profiler enabled here would not see.
        load_log = manager._load_log
        lock = threading.Lock()

        def profiled(*args: Any) -> Any:
            with lock:  # one cProfile.Profile, one thread in it at a time
                return profiler.runcall(load_log, *args)

        manager._load_log = profiled  # type: ignore[method-assign]
    t0 = time.perf_counter()
    manager.startup()
    elapsed = time.perf_counter() - t0
    assert len(manager.all_logs) > 0
    manager.abandon()
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
        if os.environ.get("BENCH_CALLERS"):
            pstats.Stats(profiler).sort_stats("tottime").print_callers(os.environ["BENCH_CALLERS"])
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", default="5000,20000")
    parser.add_argument("--records", type=int, default=1)
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="num.recovery.threads.per.data.dir")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--dir", default=None, help="parent of the temporary directories (default: $TMPDIR)")
    args = parser.parse_args()
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    for n in (int(x) for x in args.partitions.split(",")):
        times, written = [], []
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bench-recovery-", dir=args.dir) as tmp:
                t0 = time.perf_counter()
                write_state(Path(tmp), n, args.records, args.idempotent)
                written.append(time.perf_counter() - t0)
                os.sync()  # the restart does not pay for writing back what the write phase left dirty
                times.append(restart(Path(tmp), args.threads, args.profile and run == args.runs - 1))
        written_s = statistics.median(written)
        print(f"{n:>7,} logs x {args.records} record(s){' idempotent' if args.idempotent else ''}, "
              f"{args.threads} recovery thread(s): written in {written_s:.1f} s; restart "
              f"{', '.join(f'{t:.2f}' for t in times)} s (median {statistics.median(times):.2f} s, "
              f"{statistics.median(times) / n * 1e6:.0f} us per log)", flush=True)


if __name__ == "__main__":
    main()
