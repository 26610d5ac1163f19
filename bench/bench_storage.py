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

3. **Per-call cost of the segment file layer** (``--calls N``): what one ``FileRecords.append`` (16 KiB),
   ``FileRecords.read`` (a 61-byte header peek, what a lookup's scan does per batch) and ``OffsetIndex.lookup``
   cost in CPU, next to the bare ``os.pwrite``/``os.pread`` in the same run: the descriptor cache's pin and
   the descriptor-free index mapping are on these paths. Best of 5 rounds (the least disturbed by other load).
4. **Many partitions over a small descriptor cache** (``--partitions P``): appends round-robin over P logs
   with a cache of P (every file stays open) and of P/10 (nine in ten appends reopen their file), CPU per
   append: what thrashing the cache costs.

Checks free disk (``shutil.disk_usage``, the same figure ``df -h`` prints) before writing and deletes its
data afterwards. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_storage.py [--append-mb 512] [--sizes-gb 1,10] [--reads 2000]
        [--calls 20000] [--partitions 2000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
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


def _best_cpu_us(fn: Callable[[], None], calls: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time() - t0) / calls * 1e6)
    return best


def bench_calls(root: Path, calls: int) -> None:
    """Per-call CPU of the file layer next to the bare system calls (see the module doc, part 3)."""
    from sofakafka.storage.index import OffsetIndex
    from sofakafka.storage.segment import FileRecords

    data = bytes(16 * 1024)
    raw_fd = os.open(root / "raw.bin", os.O_RDWR | os.O_CREAT, 0o644)
    pos = [0]

    def raw_write() -> None:
        os.pwrite(raw_fd, data, pos[0] % (64 << 20))
        pos[0] += len(data)

    records = FileRecords(root / "00000000000000000000.log")
    for _ in range(4096):  # 64 MiB to read from
        records.append(data)
    os.pwrite(raw_fd, bytes(64 << 20), 0)

    def layer_write() -> None:
        if records.size >= 128 << 20:
            records.truncate_to(0)
        records.append(data)

    offsets = [random.Random(7).randrange(0, 60 << 20) for _ in range(1024)]
    i = [0]

    def raw_read() -> None:
        i[0] += 1
        os.pread(raw_fd, 61, offsets[i[0] & 1023])

    def layer_read() -> None:
        i[0] += 1
        records.read(offsets[i[0] & 1023], 61)

    index = OffsetIndex(root / "00000000000000000000.index", 0, 10 << 20)
    index.resize(10 << 20)
    for n in range(100_000):
        index.append(n * 100, n * 4096)

    def lookup() -> None:
        i[0] += 1
        index.lookup(offsets[i[0] & 1023] // 400)

    print(f"per call, best of 5 rounds of {calls} (cpu us):")
    print(f"  os.pwrite 16 KiB        {_best_cpu_us(raw_write, calls):7.2f}   FileRecords.append  "
          f"{_best_cpu_us(layer_write, calls):7.2f}")
    print(f"  os.pread 61 B           {_best_cpu_us(raw_read, calls):7.2f}   FileRecords.read    "
          f"{_best_cpu_us(layer_read, calls):7.2f}")
    print(f"  OffsetIndex.lookup (100k entries) {_best_cpu_us(lookup, calls):7.2f}")
    index.close()
    records.close()
    os.close(raw_fd)


def bench_partitions(root: Path, partitions: int) -> None:
    """Round-robin appends over many logs with a cache that holds them all, then a tenth of them (part 4)."""
    from sofakafka.storage.file_cache import DescriptorCache

    batch = template_batch(10, 100)
    for capacity in (partitions, max(1, partitions // 10)):
        cache = DescriptorCache(capacity)
        # No index entries during the run: the first write to a page of a fresh (sparse) index mapping costs
        # a block allocation, milliseconds on a busy ext4, and would drown what this part measures.
        config = LogConfig.from_props({"index.interval.bytes": 1 << 30})
        logs = [Log(root / f"many{capacity}-{p}", config, descriptor_cache=cache) for p in range(partitions)]
        for lg in logs:  # one append each first: the active segments exist and the cache is full
            lg.append_as_leader(bytearray(batch), 0)
        rounds = 5
        opens = cache.opens
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(rounds):
            for lg in logs:
                lg.append_as_leader(bytearray(batch), 0)
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        n = rounds * partitions
        print(f"{partitions} partitions, cache of {capacity}: {cpu / n * 1e6:6.1f} us cpu per append "
              f"({wall / n * 1e6:6.1f} us wall), {cache.opens - opens} reopens in {n} appends, "
              f"{cache.open_count} open at the end")
        for lg in logs:
            lg.close()
            shutil.rmtree(lg.dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--append-mb", type=int, default=512)
    parser.add_argument("--sizes-gb", default="1,10", help="comma-separated log sizes for the read benchmark")
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=0, help="per-call cost of the file layer (part 3)")
    parser.add_argument("--partitions", type=int, default=0, help="appends over many partitions (part 4)")
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
        if args.append_mb:
            bench_append(root, args.append_mb, RECORDS_PER_BATCH, VALUE_SIZE)  # ~16 KiB: a typical linger batch
            bench_append(root, args.append_mb, 1000, 1000)  # ~1 MiB: the per-batch cost amortised
        if sizes:
            bench_reads(root, sizes, args.reads)
        if args.calls:
            bench_calls(root, args.calls)
        if args.partitions:
            bench_partitions(root, args.partitions)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
