"""How fast a broker's metadata cache follows a burst of partition-state changes on ZooKeeper, with kazoo's own
``select`` in the session's connection thread next to the poll-based one the store uses, in the same run.

A throwaway ZooKeeper (Debian's package, as the tests start it) gets ``--partitions`` partition states (topics of
1,000 partitions). Per round and per variant, alternating: a writer session changes every state at once
(``multi_many``: the ISR writes of a broker coming back), and a ``MetadataCache`` on another session, loaded
first, follows through its watches and ``get_async`` reads. Printed per variant: the time to write them all, the
time until the cache shows every change, and a full ``reload`` (what a new session costs). Medians over
``--rounds``, then the ratios. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_zk_follow.py [--partitions 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kazoo.handlers.utils import selector_select

from sofakafka.controller import zookeeper
from sofakafka.controller.metadata import MetadataCache
from sofakafka.controller.registration import create_top_level_paths
from sofakafka.controller.store import CreateOp, SetDataOp
from sofakafka.controller.zk_data import PartitionState, TopicAssignment
from tests.cluster.conftest import free_port, start_zookeeper

PER_TOPIC = 1000


@contextmanager
def kazoo_select(stock: bool) -> Iterator[None]:
    """With ``stock``, every session's connection thread uses kazoo's own select (a new epoll selector per call)
    until the block ends."""
    poll_select = zookeeper._PollHandler.select
    if stock:
        zookeeper._PollHandler.select = lambda self, *args, **kwargs: selector_select(*args, **kwargs)  # type: ignore[method-assign]
    try:
        yield
    finally:
        zookeeper._PollHandler.select = poll_select  # type: ignore[method-assign]


def one_round(hosts: str, chroot: str, topics: list[str], isr: tuple[int, ...], stock: bool) -> tuple[float, float, float]:
    with kazoo_select(stock):
        return _round(hosts, chroot, topics, isr)


def _round(hosts: str, chroot: str, topics: list[str], isr: tuple[int, ...]) -> tuple[float, float, float]:
    writer = zookeeper.ZooKeeperMetadataStore.connect(hosts, chroot, session_timeout=30)
    reader = zookeeper.ZooKeeperMetadataStore.connect(hosts, chroot, session_timeout=30)
    cache = MetadataCache(reader)
    try:
        cache.start()
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
            assert time.monotonic() < deadline, "the cache did not follow within 600 s"
            time.sleep(0.02)
        return written_s, time.monotonic() - t0, reload_s
    finally:
        cache.close()
        reader.close()
        writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
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
                  f"{len(topics) * PER_TOPIC:,} partition states, {args.rounds} rounds", flush=True)
            results: dict[str, list[tuple[float, float, float]]] = {"kazoo select": [], "poll": []}
            isrs = [(1, 2), (1, 2, 3)]
            for r in range(args.rounds):
                for name in (("kazoo select", "poll") if r % 2 == 0 else ("poll", "kazoo select")):
                    isr = isrs[len(results[name]) % 2]
                    row = one_round(server.hosts, "/bench", topics, isr, name == "kazoo select")
                    results[name].append(row)
                    print(f"round {r + 1} {name:12}: written {row[0]:6.2f} s, followed {row[1]:6.2f} s, "
                          f"reload {row[2]:6.2f} s", flush=True)
        finally:
            server.stop()
    med = {name: [statistics.median(col) for col in zip(*rows, strict=True)] for name, rows in results.items()}
    print()
    print("| median of rounds | kazoo select | poll | poll / kazoo |")
    print("|---|---:|---:|---:|")
    for i, label in enumerate(("all states written", "followed by the cache", "reload")):
        a, b = med["kazoo select"][i], med["poll"][i]
        print(f"| {label} | {a:.2f} s | {b:.2f} s | {b / a:.2f} |")


if __name__ == "__main__":
    main()
