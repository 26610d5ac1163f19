"""Storage engine benchmarks: append throughput against a raw sequential write, and read-by-offset latency
as the log grows.

1. **Append throughput.** The same v2 batches (~16 KiB: 100 records of 150 bytes; then ~1 MiB: 1,000
   records of 1,000 bytes) are appended through
   ``Log.append_as_leader`` (CRC check, offset assignment, segment and index maintenance, producer state) and
   written with plain ``os.write`` to a file in the same directory, in the same run, page cache only (no
   fsync in either: Kafka's default flush policy). Reported: MB/s of each and the ratio.
2. **Read-by-offset latency.** A log of each requested size (default 1 GiB and 10 GiB, 1 GiB segments, the
   default 4 KiB index interval) is filled and fsynced, then random offsets are looked up with ``Log.read`` (segment
   bisect + index floor + header scan, returning a file slice) and the first 64 KiB of the slice copied.
   Reported: p50/p90/p99 of both; flat means the lookup does not grow with the log.

Checks free disk (``shutil.disk_usage``, the same figure ``df -h`` prints) before writing and deletes its
data afterwards. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_storage.py [--append-mb 512] [--sizes-gb 1,10] [--reads 2000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from sofakafka.protocol.records import RecordBatchBuilder
from sofakafka.storage.config import LogConfig
from sofakafka.storage.log import Log

RECORDS_PER_BATCH = 100
VALUE_SIZE = 150


def template_batch(records: int = RECORDS_PER_BATCH, value_size: int = VALUE_SIZE) -> bytes:
    b = RecordBatchBuilder()
    now = 1_700_000_000_000
    for i in range(records):
        b.append_record(i, now + i, b"key-%05d" % i, bytes([i % 251]) * value_size)
    return b.build()


def bench_append(root: Path, total_mb: int, records: int, value_size: int) -> None:
    batch = template_batch(records, value_size)
    count = total_mb * (1 << 20) // len(batch)
    raw_path = root / "raw.bin"
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start, start_cpu = time.perf_counter(), time.thread_time()
    for _ in range(count):
        os.write(fd, bytearray(batch))  # same per-batch copy the log path makes
    raw_s, raw_cpu = time.perf_counter() - start, time.thread_time() - start_cpu
    os.close(fd)
    raw_path.unlink()

    log = Log(root / "bench-0", LogConfig.from_props({"max.message.bytes": 2 << 20}))
    start, start_cpu = time.perf_counter(), time.thread_time()
    for _ in range(count):
        log.append_as_leader(bytearray(batch), 0)
    log_s, log_cpu = time.perf_counter() - start, time.thread_time() - start_cpu
    log.close()
    shutil.rmtree(root / "bench-0")
    mb = count * len(batch) / 1e6
    # CPU time of this thread as well as wall time: on a shared machine the wall figures swing with other
    # load, while the per-batch CPU cost (and the overhead over a raw write) stays comparable between runs.
    print(f"append: {count} batches of {len(batch)} B = {mb:.0f} MB")
    print(f"  raw os.write      {mb / raw_s:8.1f} MB/s  ({raw_s:.2f} s)  cpu {raw_cpu / count * 1e6:7.1f} us/batch")
    print(f"  Log.append_leader {mb / log_s:8.1f} MB/s  ({log_s:.2f} s)  cpu {log_cpu / count * 1e6:7.1f} us/batch")
    print(f"  ratio log/raw     {raw_s / log_s:8.2f}x (cpu {raw_cpu / log_cpu:.2f}x, "
          f"overhead {(log_cpu - raw_cpu) / count * 1e6:.1f} us/batch)")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def fill_log(root: Path, size_gb: float) -> Log:
    batch = template_batch()
    count = int(size_gb * (1 << 30)) // len(batch)
    log = Log(root / f"read{size_gb:g}-0", LogConfig())
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(bytearray(batch), 0)
    fill_s = time.perf_counter() - start
    # fsync first, so that background writeback of the fill does not pollute the read figures.
    log.flush()
    print(f"filled {size_gb:g} GiB: {log.number_of_segments} segments, {log.log_end_offset} offsets, "
          f"{fill_s:.0f} s")
    return log


def bench_reads(root: Path, sizes: list[float], reads: int) -> None:
    """Reads alternate between the logs, so CPU contention from other processes hits every size alike."""
    logs = [fill_log(root, size) for size in sizes]
    rng = random.Random(42)
    for log in logs:
        for _ in range(200):  # warm-up: map every segment's indexes once
            log.read(rng.randrange(0, log.log_end_offset), 1 << 20)
    lookup_us: list[list[float]] = [[] for _ in logs]
    copy_us: list[list[float]] = [[] for _ in logs]
    for _ in range(reads):
        for i, log in enumerate(logs):
            offset = rng.randrange(0, log.log_end_offset)
            t0 = time.perf_counter()
            info = log.read(offset, 1 << 20)
            t1 = time.perf_counter()
            data = info.records.file.read(info.records.position, 1 << 16) if info.records.file else b""
            t2 = time.perf_counter()
            assert data
            lookup_us[i].append((t1 - t0) * 1e6)
            copy_us[i].append((t2 - t1) * 1e6)
    for i, size in enumerate(sizes):
        look, copy = lookup_us[i], copy_us[i]
        print(f"read-by-offset at {size:g} GiB, {reads} random offsets:")
        print(f"  lookup (Log.read -> slice) min {min(look):6.1f}  p50 {statistics.median(look):6.1f}  "
              f"p90 {percentile(look, 0.9):7.1f}  p99 {percentile(look, 0.99):7.1f} us")
        print(f"  copy 64 KiB of the slice   min {min(copy):6.1f}  p50 {statistics.median(copy):6.1f}  "
              f"p90 {percentile(copy, 0.9):7.1f}  p99 {percentile(copy, 0.99):7.1f} us")
    for log in logs:
        log.close()
        shutil.rmtree(log.dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--append-mb", type=int, default=512)
    parser.add_argument("--sizes-gb", default="1,10", help="comma-separated log sizes for the read benchmark")
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir under /work or /tmp)")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes_gb.split(",") if s]
    base = Path(args.dir) if args.dir else (Path("/work") if Path("/work").is_dir() else Path(tempfile.gettempdir()))
    root = Path(tempfile.mkdtemp(prefix="bench-storage-", dir=base))
    need = max(args.append_mb / 1024, sum(sizes)) * (1 << 30) * 1.1
    free = shutil.disk_usage(root).free
    print(f"free disk at {root}: {free / (1 << 30):.1f} GiB, need about {need / (1 << 30):.1f} GiB")
    if free < need:
        shutil.rmtree(root)
        raise SystemExit("not enough free disk for the requested sizes")
    try:
        bench_append(root, args.append_mb, RECORDS_PER_BATCH, VALUE_SIZE)  # ~16 KiB: a typical linger batch
        bench_append(root, args.append_mb, 1000, 1000)  # ~1 MiB: the per-batch cost amortised
        if sizes:
            bench_reads(root, sizes, args.reads)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
