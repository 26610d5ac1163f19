"""Protocol fuzzing of a live broker at scale: the long form, a figure at the end. The short form is
tests/fuzz/test_fuzz_broker.py (CI). Run from the repository root::

    .venv/bin/python -m tests.fuzz.run --frames 10000000 --workers 2 --dir /tmp/fuzz

Starts one broker (``auto.create.topics.enable=false``: random topic names would otherwise create topics
without end; ``--log-level ERROR`` keeps millions of "closing connection" lines out of its log, which still has
every internal error), asks it which APIs and versions it advertises, and has ``--workers`` processes send frames
(tests/fuzz/frames.py: hypothesis-drawn well-formed requests of every advertised API and version, each followed
by ``--per-example`` damaged copies) through tests/fuzz/driver.py. Prints progress, then: frames sent, answered,
handled without an answer, closed, slow, hangs, crashes (the broker died: restarted, counted) and internal errors
(tracebacks in the broker's log). Exit status 0 when there were no hangs, no crashes and no internal errors.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import struct
import sys
import time
import warnings
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.fuzz.driver import AsyncDriver, Counts, Driver, probe
from tests.fuzz.frames import mutations, wellformed
from tests.integration.conftest import BrokerProcess

FUZZ_BROKER_SETTINGS = {
    "auto.create.topics.enable": "false",
    # The fuzz frames' own connections come and go by the hundred thousand.
    "connections.max.idle.ms": "60000",
}


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
    d = Driver(host, port)
    s = d._connect()
    try:
        s.sendall(probe(0))
        response = d._read_frame(s)
    finally:
        s.close()
    assert response is not None
    error, count = struct.unpack_from(">hi", response, 4)
    assert error == 0
    out = []
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", response, 10 + 6 * i)
        out += [(key, v) for v in range(lo, hi + 1)]
    return out


def fuzz(host: str, port: int, apis: list[tuple[int, int]], examples: int, per_example: int, seed: int,
         report_every: float = 30.0, label: str = "", lanes: int = 16, chunk: int = 20) -> Counts:
    """``examples`` hypothesis examples, each a well-formed frame of a drawn API and version followed by
    ``per_example - 1`` frames derived from it; the frames of ``chunk`` examples at a time go out over ``lanes``
    connections at once."""
    rng = random.Random(seed)
    driver = AsyncDriver(host, port, lanes)
    total = Counts()
    last = time.monotonic()
    pending: list[bytes] = []
    drawn = 0

    def flush() -> None:
        nonlocal last
        if pending:
            total.add(driver.send(list(pending)))
            pending.clear()
        if label and time.monotonic() - last >= report_every:
            last = time.monotonic()
            print(f"{label}: {total.line()}", flush=True)

    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        nonlocal drawn
        api_key, version = data.draw(st.sampled_from(apis), label="api")
        good = data.draw(wellformed(api_key, version), label="frame")
        pending.extend(mutations(good, rng, per_example))
        drawn += 1
        if drawn % chunk == 0:
            flush()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one()
    flush()
    return total


def _worker(args: tuple[str, int, list[tuple[int, int]], int, int, int, int]) -> Counts:
    host, port, apis, examples, per_example, seed, index = args
    return fuzz(host, port, apis, examples, per_example, seed, label=f"worker {index}")


def internal_errors(log_text: str) -> list[str]:
    return [line for line in log_text.splitlines() if "Traceback" in line or (" ERROR " in line and "unexpected" in line)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=10_000_000)
    parser.add_argument("--per-example", type=int, default=100, help="frames derived from one hypothesis example")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", default="fuzz-run", help="the broker's data and log")
    args = parser.parse_args(argv)
    directory = Path(args.dir).resolve()
    broker = BrokerProcess(directory / "broker", dict(FUZZ_BROKER_SETTINGS))
    broker.command = lambda: [*BrokerProcess.command(broker), "--log-level", "ERROR"]  # type: ignore[method-assign]
    broker.start()
    prepare(broker)
    started = time.monotonic()
    crashes = 0
    total = Counts()
    try:
        apis = advertised(broker.host, broker.port)
        print(f"broker at {broker.bootstrap} advertises {len(apis)} (API, version) pairs; {args.frames} frames "
              f"from {args.workers} workers", flush=True)
        examples = max(1, args.frames // args.per_example // args.workers)
        rounds = 0
        while total.sent < args.frames:
            rounds += 1
            jobs = [(broker.host, broker.port, apis, examples, args.per_example, args.seed * 1000 + rounds * 10 + i, i)
                    for i in range(args.workers)]
            with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
                for counts in pool.imap_unordered(_worker, jobs):
                    total.add(counts)
            if not broker.alive():
                crashes += 1
                print(f"THE BROKER DIED (exit {broker.proc.returncode if broker.proc else '?'}); restarting",
                      flush=True)
                broker.start()
            print(f"after round {rounds}: {total.line()}; {time.monotonic() - started:.0f} s", flush=True)
            if total.sent == 0:
                break
    finally:
        log_text = broker.log_text()
        broker.kill()
    errors = internal_errors(log_text)
    seconds = time.monotonic() - started
    print(f"\n{total.line()}\ncrashes {crashes}, internal errors {len(errors)}, {seconds:.0f} s "
          f"({total.sent / max(seconds, 1):.0f} frames/s)")
    for line in errors[:20]:
        print(f"  {line}")
    for example in total.examples[:10]:
        print(f"  {example}")
    return 0 if total.hung == 0 and crashes == 0 and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
