"""How much does the produce hot path cost per batch, and does it grow with the number of records?

Builds a ~1 MB uncompressed v2 batch twice, once with 10 records of ~100 KB and once with 10,000 records of
~100 bytes, then times ``validate_produce`` + ``assign_offsets`` on a fresh copy of each, as the broker
would run them on a produced partition. If the path is header-only the two figures should be close (the
CRC pass over 1 MB dominates); a per-record path would make the 10,000-record case far slower, which the
``check_records=True`` rows show for contrast.

Run (from the repository root, sofakafka importable):
    PYTHONPATH=. .venv/bin/python bench/bench_batch_assign.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from sofakafka.protocol.records import Record, assign_offsets, build_batch, validate_produce

BATCH_BYTES = 1 << 20


def make_batch(n_records: int, compression: int = 0) -> bytes:
    value_size = BATCH_BYTES // n_records - 20  # leave room for the key and per-record overhead
    now = 1_700_000_000_000
    recs = [Record(i, now + i, b"key-%06d" % i, bytes([i % 251]) * value_size, []) for i in range(n_records)]
    return build_batch(recs, compression=compression, producer_id=1000, producer_epoch=0, base_sequence=0)


def run_once(batch: bytes, *, log_append_time: int | None, check_records: bool) -> None:
    buf = bytearray(batch)
    # max.message.bytes defaults to 1 MiB + 12; the benchmark batch is a little above 1 MiB.
    validate_produce(buf, produce_version=8, check_records=check_records, max_message_bytes=2 * BATCH_BYTES)
    assign_offsets(buf, 123_456_789, log_append_time=log_append_time, partition_leader_epoch=7)


def measure(fn: Callable[[], None], repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    batches = {n: make_batch(n) for n in (10, 10_000)}
    print("batch sizes: " + ", ".join(f"{n} records = {len(b):,} bytes" for n, b in batches.items()))
    cases = [
        ("validate + assign, CreateTime", dict(log_append_time=None, check_records=False)),
        ("validate + assign, LogAppendTime (CRC recomputed)", dict(log_append_time=1_700_000_000_999,
                                                                  check_records=False)),
        ("validate(check_records=True) + assign", dict(log_append_time=None, check_records=True)),
    ]
    print(f"{'case':52} {'10 records':>12} {'10,000 records':>15} {'ratio':>7}")
    for name, kw in cases:
        repeat = args.repeat if not kw["check_records"] else max(3, args.repeat // 10)
        t = {n: measure(lambda b=b, kw=kw: run_once(b, **kw), repeat) for n, b in batches.items()}  # type: ignore[misc]
        print(f"{name:52} {t[10] * 1e3:10.3f}ms {t[10_000] * 1e3:13.3f}ms {t[10_000] / t[10]:6.2f}x")


if __name__ == "__main__":
    main()
