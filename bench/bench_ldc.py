"""LDC benchmarks: fetch throughput of server-side filtered groups next to an unfiltered one, and the router.

One ``python -m sofakafka serve`` on a temporary directory; librdkafka (confluent-kafka) on both sides.

1. **Filtered fetch.** ``--messages`` records of ``--record-bytes`` go into one topic (``--partitions``), each
   with a header ``tag`` = ``i % 10``. Three groups read the whole topic from the start with stock
   consumers (no LDC code), each created first with committed offsets at 0:

   - ``unfiltered``: no filter, the stored bytes go out untouched (the path every other group takes);
   - ``match-10``: filter ``tag = 0`` (10% of the records pass);
   - ``match-90``: filter ``tag`` in ``1..9`` (90% pass).

   Each is timed from its consumer's creation until it has received every record its filter passes; MB/s
   is the topic's record bytes scanned (the same for all three: a filtered group steps over the whole log)
   per second, and the delivered records per second are printed too. The three run one after the other,
   ``--rounds`` times in turn (so machine noise hits all alike); medians are reported.
2. **Router.** A rule copies ``ANT.R1.<topic>`` to ``ANT.R2.<topic>`` (``--router-match`` percent of the
   records pass its predicate); the router (in this process, a thread) is timed from start until the
   target holds every copy. ``--exactly-once`` runs it with transactions (needs a broker with transactions).

Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_ldc.py [--messages 100000] [--record-bytes 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sofakafka.client.client import KafkaClient, NewTopic  # noqa: E402
from sofakafka.client.groups import GroupAdmin  # noqa: E402
from sofakafka.ldc import LdcModel, RecordFilter, RoutingRules  # noqa: E402
from sofakafka.router.store import write_group_filter  # noqa: E402
from sofakafka.router.worker import Router, RouterConfig  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_broker(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    log = open(directory / "broker.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sofakafka", "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={directory / 'data'}", "--override", "group.initial.rebalance.delay.ms=0"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    bootstrap = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, bootstrap
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("broker did not start")


def produce(bootstrap: str, topic: str, messages: int, record_bytes: int, partitions: int) -> int:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 500_000})
    value = b"x" * record_bytes
    for i in range(messages):
        while True:
            try:
                p.produce(topic, value, b"key-%d" % i, partition=i % partitions, headers=[("tag", str(i % 10))])
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    return messages * record_bytes


def consume_all(bootstrap: str, group: str, topic: str, expected: int, timeout_s: float) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"bench-{group}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.max.bytes": 52428800})
    start = time.perf_counter()
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + timeout_s
    try:
        while got < expected:
            if time.monotonic() > deadline:
                raise SystemExit(f"{group}: only {got} of {expected} records in {timeout_s} s")
            for msg in c.consume(10_000, 0.5):
                if msg.error() is None:
                    got += 1
        return time.perf_counter() - start
    finally:
        c.close()


def filtered_fetch(bootstrap: str, args: argparse.Namespace) -> None:
    topic = "bench-filtered"
    with KafkaClient(bootstrap) as kc:
        kc.create_topics([NewTopic(topic, args.partitions, 1)])
    stored = produce(bootstrap, topic, args.messages, args.record_bytes, args.partitions)
    cases = {
        "unfiltered": (RecordFilter(), args.messages),
        "match-10": (RecordFilter.build(headers=[("tag", "0")]), args.messages // 10),
        "match-90": (RecordFilter.build(headers=[("tag", str(t)) for t in range(1, 10)]),
                     args.messages - args.messages // 10),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(args.rounds):
        for name, (record_filter, expected) in cases.items():
            group = f"{name}-{r}"
            with KafkaClient(bootstrap) as kc:
                GroupAdmin(kc).commit_offsets(group, {(topic, p): 0 for p in range(args.partitions)})
                if not record_filter.is_empty:
                    write_group_filter(kc, group, record_filter)
            times[name].append(consume_all(bootstrap, group, topic, expected, args.max_seconds))
    mb = stored / 1e6
    print(f"\nfiltered fetch: {args.messages} records x {args.record_bytes} B = {mb:.0f} MB in {args.partitions} "
          f"partition(s), {args.rounds} round(s), medians")
    print(f"{'group':<12} {'seconds':>8} {'MB/s scanned':>13} {'records/s delivered':>20} {'vs unfiltered':>14}")
    base = statistics.median(times["unfiltered"])
    for name, (_f, expected) in cases.items():
        t = statistics.median(times[name])
        print(f"{name:<12} {t:>8.2f} {mb / t:>13.1f} {expected / t:>20.0f} {base / t:>13.2f}x")
        print(f"{'':<12} runs: " + ", ".join(f"{x:.2f}" for x in times[name]))


def router_rate(bootstrap: str, args: argparse.Namespace) -> None:
    model = LdcModel.from_toml('instance = "ANT"\n[cells.R1]\nzone = "RZone"\ncity = "a"\n'
                               '[cells.R2]\nzone = "RZone"\ncity = "b"\n')
    match = "" if args.router_match >= 100 else (
        "[rules.match]\nheaders = { tag = [" + ", ".join(f'"{t}"' for t in range(args.router_match // 10)) + "] }\n")
    rules = RoutingRules.from_text(f"[[rules]]\nname = 'bench'\nfrom = 'R1'\ntopic = 'rb'\nto = ['R2']\n{match}")
    with KafkaClient(bootstrap) as kc:
        kc.create_topics([NewTopic("ANT.R1.rb", args.partitions, 1), NewTopic("ANT.R2.rb", args.partitions, 1)])
    produce(bootstrap, "ANT.R1.rb", args.router_messages, args.record_bytes, args.partitions)
    expected = args.router_messages if args.router_match >= 100 else (
        args.router_messages * (args.router_match // 10) // 10)
    router = Router(model, rules, RouterConfig(bootstrap, group_id="bench-router",
                                               exactly_once=args.exactly_once, batch_size=2000))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            router.run()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failure.append(exc)

    start = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + args.max_seconds
    try:
        with KafkaClient(bootstrap) as kc:
            while True:
                ends = kc.list_offsets("ANT.R2.rb", dict.fromkeys(range(args.partitions), -1))
                if sum(r.offset for r in ends.values()) >= expected:
                    break
                if failure or time.monotonic() > deadline:
                    raise SystemExit(f"router did not finish: {failure}")
                time.sleep(0.05)
        took = time.perf_counter() - start
    finally:
        router.stop()
        thread.join(60)
    mode = "exactly once" if args.exactly_once else "at least once"
    print(f"\nrouter ({mode}): {args.router_messages} source records x {args.record_bytes} B, "
          f"{args.router_match}% matching -> {expected} copies in {took:.2f} s: "
          f"{args.router_messages / took:.0f} source records/s, {expected / took:.0f} copies/s, "
          f"{expected * args.record_bytes / took / 1e6:.1f} MB/s copied")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--record-bytes", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--router-messages", type=int, default=50_000)
    ap.add_argument("--router-match", type=int, default=100, help="percent of records the rule copies (x10)")
    ap.add_argument("--exactly-once", action="store_true")
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--skip-router", action="store_true")
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpu, Python "
          f"{platform.python_version()}")
    directory = Path(tempfile.mkdtemp(prefix="bench-ldc-"))
    proc, bootstrap = start_broker(directory)
    try:
        filtered_fetch(bootstrap, args)
        if not args.skip_router:
            router_rate(bootstrap, args)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
