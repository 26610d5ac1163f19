"""How fast a broker's metadata cache follows a burst of partition-state changes on ZooKeeper, with the session's
connection thread (kazoo's) in three set-ups side by side in one run, optionally beside busy threads.

Variants: "kazoo select" (kazoo's own ``select``, a new epoll selector per call, unbuffered sockets), "poll" (one
``poll`` per select, unbuffered sockets: the store before the read-ahead), "buffered" (the store's handler as it
is: ``sofakafka/controller/zk_io.py``, reads ahead and selects without a system call when it can).

A throwaway ZooKeeper (Debian's package, as the tests start it) gets ``--partitions`` partition states (topics of
1,000 partitions). Per round and per variant, in turn: a writer session changes every state at once
(``multi_many``: the ISR writes of a broker coming back), and a ``MetadataCache`` on another session, loaded
first, follows through its watches and ``get_async`` reads. ``--busy-threads N`` runs N threads of pure Python
work in the same process meanwhile, as a loaded broker's request loop and replication threads are: they hold the
interpreter lock, and every system call of the connection thread then waits to take it back. Printed per
variant: the time to write them all, the time until the cache shows every change, a full ``reload`` (what a new
session costs), and how many sessions were lost (ZooKeeper expired them: ``--session-timeout-s``). Medians over
``--rounds``, then the ratios to the first variant. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_zk_follow.py [--partitions 10000] [--rounds 3] [--busy-threads 0]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import selector_select

from sofakafka.controller import zookeeper
from sofakafka.controller.metadata import MetadataCache
from sofakafka.controller.registration import create_top_level_paths
from sofakafka.controller.store import CreateOp, SessionState, SetDataOp
from sofakafka.controller.zk_data import PartitionState, TopicAssignment
from sofakafka.controller.zk_io import PollHandler
from tests.cluster.conftest import free_port, start_zookeeper

PER_TOPIC = 1000
VARIANTS = ("kazoo select", "poll", "buffered")


@contextmanager
def handler_variant(name: str) -> Iterator[None]:
    """Every session opened in the block uses the connection set-up ``name`` (module doc)."""
    saved = {attr: PollHandler.__dict__[attr] for attr in ("select", "create_connection", "create_socket_pair")}
    if name in ("kazoo select", "poll"):
        PollHandler.create_connection = SequentialThreadingHandler.create_connection  # type: ignore[method-assign]
        PollHandler.create_socket_pair = SequentialThreadingHandler.create_socket_pair  # type: ignore[method-assign]
    if name == "kazoo select":
        PollHandler.select = lambda self, *args, **kwargs: selector_select(*args, **kwargs)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for attr, value in saved.items():
            setattr(PollHandler, attr, value)


@contextmanager
def busy_threads(count: int) -> Iterator[None]:
    """``count`` threads of pure Python work until the block ends."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(i * i for i in range(2000))

    threads = [threading.Thread(target=spin, name=f"busy-{i}", daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join()


def one_round(hosts: str, chroot: str, topics: list[str], isr: tuple[int, ...], variant: str, busy: int,
              session_timeout: float) -> tuple[float, float, float, int]:
    with handler_variant(variant):
        return _round(hosts, chroot, topics, isr, busy, session_timeout)


def _round(hosts: str, chroot: str, topics: list[str], isr: tuple[int, ...], busy: int,
           session_timeout: float) -> tuple[float, float, float, int]:
    writer = zookeeper.ZooKeeperMetadataStore.connect(hosts, chroot, session_timeout=30)
    reader = zookeeper.ZooKeeperMetadataStore.connect(hosts, chroot, session_timeout=session_timeout)
    lost: list[SessionState] = []
    reader.add_listener(lambda state: lost.append(state) if state is SessionState.LOST else None)
    cache = MetadataCache(reader)
    try:
        cache.start()
        with busy_threads(busy):
            t0 = time.monotonic()
            cache.reload()
            reload_s = time.monotonic() - t0
            state = PartitionState(1, 0, 1, isr).encode()
            t0 = time.monotonic()
            outcomes = writer.multi_many([[SetDataOp(f"/brokers/topics/{t}/partitions/{p}/state", state)]
                                          for t in topics for p in range(PER_TOPIC)])
            written_s = time.monotonic() - t0
            assert all(isinstance(o, list) for o in outcomes), "a state write failed"

            def followed() -> bool:
                snap = cache.snapshot()
                return all(p.isr == isr for t in topics for p in snap.topics[t].partitions.values())

            deadline = time.monotonic() + 600
            while not followed():
                if lost or time.monotonic() > deadline:
                    return written_s, float("nan"), reload_s, len(lost)  # not followed: the session is gone
                time.sleep(0.02)
            return written_s, time.monotonic() - t0, reload_s, len(lost)
    finally:
        cache.close()
        reader.close()
        writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy-threads", type=int, default=0, help="threads of pure Python work beside the session")
    parser.add_argument("--session-timeout-s", type=float, default=18.0, help="the following session's timeout")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",")]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    topics = [f"t{i:04d}" for i in range(max(1, args.partitions // PER_TOPIC))]
    with tempfile.TemporaryDirectory(prefix="bench-zk-follow-") as tmp:
        server = start_zookeeper(Path(tmp) / "zk", free_port())
        try:
            setup = zookeeper.ZooKeeperMetadataStore.connect(server.hosts, "/bench", session_timeout=30)
            create_top_level_paths(setup)
            first = PartitionState(1, 0, 1, (1,)).encode()
            for t in topics:
                setup.create(f"/brokers/topics/{t}", TopicAssignment({p: [1, 2, 3] for p in range(PER_TOPIC)}).encode())
                setup.create(f"/brokers/topics/{t}/partitions", b"")
                outcomes = setup.multi_many([[CreateOp(f"/brokers/topics/{t}/partitions/{p}", b""),
                                              CreateOp(f"/brokers/topics/{t}/partitions/{p}/state", first)]
                                             for p in range(PER_TOPIC)])
                assert all(isinstance(o, list) for o in outcomes), "creating the states failed"
            setup.close()
            print(f"machine: {platform.platform()}, Python {platform.python_version()}; "
                  f"{len(topics) * PER_TOPIC:,} partition states, {args.rounds} rounds, {args.busy_threads} busy "
                  f"threads, {args.session_timeout_s:g} s session", flush=True)
            results: dict[str, list[tuple[float, float, float, int]]] = {v: [] for v in variants}
            isrs = [(1, 2), (1, 2, 3)]
            for r in range(args.rounds):
                for name in variants[r % len(variants):] + variants[:r % len(variants)]:
                    isr = isrs[len(results[name]) % 2]
                    row = one_round(server.hosts, "/bench", topics, isr, name, args.busy_threads,
                                    args.session_timeout_s)
                    results[name].append(row)
                    print(f"round {r + 1} {name:12}: written {row[0]:6.2f} s, followed {row[1]:6.2f} s, "
                          f"reload {row[2]:6.2f} s, sessions lost {row[3]}", flush=True)
        finally:
            server.stop()
    med = {name: [statistics.median(col) for col in zip(*rows, strict=True)] for name, rows in results.items()}
    lost = {name: sum(row[3] for row in rows) for name, rows in results.items()}
    base = variants[0]
    print()
    header = [f"median of {args.rounds} rounds", *variants, *(f"{v} / {base}" for v in variants[1:])]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for i, label in enumerate(("all states written", "followed by the cache", "reload")):
        cells = [label, *(f"{med[v][i]:.2f} s" for v in variants),
                 *(f"{med[v][i] / med[base][i]:.2f}" for v in variants[1:])]
        print("| " + " | ".join(cells) + " |")
    cells = ["sessions lost (all rounds)", *(str(lost[v]) for v in variants), *("" for _ in variants[1:])]
    print("| " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
