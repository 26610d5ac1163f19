"""Protocol fuzzing of a live broker at scale: the long form, a figure at the end. The short form is
tests/fuzz/test_fuzz_broker.py (CI). Run from the repository root::

    .venv/bin/python -m tests.fuzz.run --frames 10000000 --workers 2 --dir /tmp/fuzz

Starts one broker (``auto.create.topics.enable=false``: random topic names would otherwise create topics
without end; at most 100 partitions a topic, so that CreatePartitions and CreateTopics cannot grow its state
without end either; ``--log-level WARNING``, so that every connection it closes has its reason in its log), asks
it which APIs and versions it advertises, and has ``--workers`` processes send frames through
tests/fuzz/driver.py: tests/fuzz/frames.py's stream of hypothesis-drawn well-formed requests of every advertised
API and version, each followed by ``--per-example`` damaged copies, all of it a function of ``--seed``. Prints
progress, then: frames sent, answered, handled without an answer, closed, slow, hangs, crashes (the broker died:
restarted, counted), internal errors (tracebacks in the broker's log), closes whose reason the log lacks, and the
CPU time of the broker and the drivers. ``--minutes`` ends the sending early at that wall time (the figures are
then of the frames sent). Exit status 0 when there were no hangs, no crashes, no internal errors
and no close without its logged reason.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import struct
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz.driver import Counts, Driver, probe
from tests.fuzz.frames import fuzz_frames
from tests.integration.conftest import BrokerProcess

FUZZ_BROKER_SETTINGS = {
    "auto.create.topics.enable": "false",
    # The fuzz frames' own connections come and go by the hundred thousand.
    "connections.max.idle.ms": "60000",
    # CreatePartitions of `fuzz` or `__consumer_offsets` to a drawn count would otherwise grow them by the
    # thousand partitions a request: the broker's data and metadata grow without end and every request slows
    # down. Counts above this still reach the check that refuses them (INVALID_PARTITIONS).
    "sofakafka.max.partitions.per.topic": "100",
}
#: Connections at once per worker. Some frames are held for seconds by design (a StopReplica deleting a topic
#: the broker still serves waits 5 s for its metadata before refusing; requests behind it on its connection
#: wait too), and the lanes holding them must be few among many for the rest to keep the broker busy.
LANES = 64
#: What the broker logs when it closes a connection (broker/connection.py's close_for).
CLOSE_LOGGED = "closing connection from"


def prepare(broker: BrokerProcess) -> None:
    """The topic ``KNOWN_NAMES`` aims at, with some records in it."""
    from sofakafka.client import KafkaClient, NewTopic
    from sofakafka.protocol.records import Record

    with KafkaClient(broker.bootstrap) as client:
        client.create_topics([NewTopic("fuzz", 3, 1)])
        for p in range(3):
            client.produce("fuzz", p, [Record(0, -1, b"k", b"v" * 10) for _ in range(5)])


def advertised(host: str, port: int) -> list[tuple[int, int]]:
    """(api key, version) for every version of every API the broker's ApiVersions v0 lists."""
    import socket

    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(probe(0))
        reader = s.makefile("rb")
        (size,) = struct.unpack(">i", reader.read(4))
        response = reader.read(size)
    error, count = struct.unpack_from(">hi", response, 4)
    assert error == 0
    out = []
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", response, 10 + 6 * i)
        out += [(key, v) for v in range(lo, hi + 1)]
    return out


@dataclass
class LogScan:
    """What the broker's log says: closes with their reason, and the internal errors."""

    closes: int = 0
    errors: list[str] = field(default_factory=list)


def scan_log(lines: Iterable[str]) -> LogScan:
    """Read line by line: the long form's log holds a line per closed connection, millions of them."""
    scan = LogScan()
    for line in lines:
        if CLOSE_LOGGED in line:
            scan.closes += 1
        elif "Traceback" in line or (" ERROR " in line and "unexpected" in line):
            scan.errors.append(line.rstrip("\n"))
    return scan


def scan_log_file(path: Path) -> LogScan:
    with open(path, errors="replace") as f:
        return scan_log(f)


def _reporting(frames: Iterator[bytes], counts: Counts, label: str, every: float,
               deadline: float | None) -> Iterator[bytes]:
    """``frames`` with a progress line every ``every`` seconds, ending at ``deadline`` (``time.time()``)."""
    last = time.monotonic()
    for i, frame in enumerate(frames):
        if i % 1000 == 0:
            if deadline is not None and time.time() >= deadline:
                return
            if label and time.monotonic() - last >= every:
                last = time.monotonic()
                print(f"{label}: {counts.line()}", flush=True)
        yield frame


def fuzz(host: str, port: int, apis: list[tuple[int, int]], frames: int, per_example: int, seed: object,
         label: str = "", lanes: int = LANES, report_every: float = 30.0, deadline: float | None = None) -> Counts:
    """``frames`` frames of ``fuzz_frames``'s stream for ``seed`` over ``lanes`` connections at once, fewer if
    ``deadline`` (``time.time()``) comes first."""
    counts = Counts()
    driver = Driver(host, port, lanes)
    try:
        stream = itertools.islice(fuzz_frames(apis, per_example, seed), frames)
        driver.send(_reporting(stream, counts, label, report_every, deadline), counts)
    finally:
        driver.close()
    return counts


def _worker(args: tuple[str, int, list[tuple[int, int]], int, int, str, int, int, float | None]
            ) -> tuple[Counts, float]:
    host, port, apis, frames, per_example, seed, index, lanes, deadline = args
    cpu = time.process_time()
    counts = fuzz(host, port, apis, frames, per_example, seed, label=f"worker {index}", lanes=lanes,
                  deadline=deadline)
    return counts, time.process_time() - cpu


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a live process and its threads (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=10_000_000)
    parser.add_argument("--per-example", type=int, default=100, help="frames derived from one hypothesis example")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lanes", type=int, default=LANES, help="connections at once per worker")
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop sending after this long even if fewer than --frames went out")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", default="fuzz-run", help="the broker's data and log")
    args = parser.parse_args(argv)
    directory = Path(args.dir).resolve()
    broker = BrokerProcess(directory / "broker", dict(FUZZ_BROKER_SETTINGS))
    broker.command = lambda: [*BrokerProcess.command(broker), "--log-level", "WARNING"]  # type: ignore[method-assign]
    broker.start()
    prepare(broker)
    started = time.monotonic()
    deadline = None if args.minutes is None else time.time() + 60 * args.minutes
    crashes = 0
    total = Counts()
    broker_cpu = driver_cpu = 0.0
    try:
        apis = advertised(broker.host, broker.port)
        print(f"broker at {broker.bootstrap} advertises {len(apis)} (API, version) pairs; {args.frames} frames "
              f"from {args.workers} workers, seed {args.seed}", flush=True)
        rounds = 0
        while total.sent < args.frames:
            rounds += 1
            left = args.frames - total.sent
            jobs = [(broker.host, broker.port, apis, left // args.workers + (i < left % args.workers),
                     args.per_example, f"{args.seed}/{rounds}/{i}", i, args.lanes, deadline)
                    for i in range(args.workers)]
            sent_before = total.sent
            with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
                for counts, cpu in pool.imap_unordered(_worker, jobs):
                    total.add(counts)
                    driver_cpu += cpu
            if not broker.alive():
                crashes += 1
                print(f"THE BROKER DIED (exit {broker.proc.returncode if broker.proc else '?'}); restarting",
                      flush=True)
                broker.start()
            print(f"after round {rounds}: {total.line()}; {time.monotonic() - started:.0f} s", flush=True)
            if total.sent == sent_before or (deadline is not None and time.time() >= deadline):
                break
    finally:
        if broker.alive():
            assert broker.proc is not None
            broker_cpu = cpu_seconds(broker.proc.pid)  # since its last start
        broker.kill()
    seconds = time.monotonic() - started
    scan = scan_log_file(broker.log_path)
    unlogged = max(0, total.closed - scan.closes)
    print(f"\n{total.line()}\ncrashes {crashes}, internal errors {len(scan.errors)}, closes without a logged reason "
          f"{unlogged} ({scan.closes} logged), {seconds:.0f} s ({total.sent / max(seconds, 1):.0f} frames/s)\n"
          f"CPU: broker {broker_cpu:.0f} s, drivers {driver_cpu:.0f} s "
          f"({1e6 * (broker_cpu + driver_cpu) / max(total.sent, 1):.0f} µs a frame)")
    for line in scan.errors[:20]:
        print(f"  {line}")
    for example in total.examples[:10]:
        print(f"  {example}")
    return 0 if total.hung == 0 and crashes == 0 and not scan.errors and unlogged == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
