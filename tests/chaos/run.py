"""One chaos run: a 3-broker cluster in network namespaces, producers and consumers, a schedule of faults, then
the whole history checked (tests/chaos/checker.py). The short form runs in CI (tests/chaos/test_chaos.py); the
long form is this module's command line, which prints the figures docs/reliability.md reports::

    .venv/bin/python -m tests.chaos.run --leader-kills 100 --each 5 --dir /tmp/chaos-long

``--leader-kills N`` kill -9s N partition leaders; ``--each M`` runs every other fault (broker pause, ZooKeeper
kill and pause, partitions leader/brokers and broker/ZooKeeper, isolation, clock skew, disk full) M times; the
faults are shuffled with ``--seed``. Needs root (namespaces, tmpfs), Java and Debian's zookeeper package.
The history, every process's log and the report stay in ``--dir``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.checker import Report, check
from tests.chaos.cluster import ChaosCluster
from tests.chaos.history import History, read_history
from tests.chaos.nemesis import Nemesis
from tests.chaos.workload import ConsumerWorker, ProducerWorker, final_read

TOPIC = "chaos"
PARTITIONS = 3
SESSION_TIMEOUT_MS = 4000
FAULTS = ["pause-broker", "kill-zookeeper", "pause-zookeeper", "partition-leader", "partition-zookeeper",
          "isolate", "clock-skew", "disk-full"]


@dataclass
class Plan:
    leader_kills: int = 2
    each: int = 1
    faults: list[str] = field(default_factory=lambda: list(FAULTS))
    producers: int = 2
    consumers: int = 1
    rate: float = 40.0  # sends per second per producer
    seed: int = 1

    def schedule(self) -> list[str]:
        steps = ["kill-leader"] * self.leader_kills + [f for f in self.faults for _ in range(self.each)]
        random.Random(self.seed).shuffle(steps)
        return steps


@dataclass
class Outcome:
    report: Report
    seconds: float
    steps: list[str]
    directory: Path

    def summary(self) -> str:
        return f"{len(self.steps)} faults in {self.seconds:.0f} s ({self.directory})\n{self.report.summary()}"


def run(directory: Path, plan: Plan, log: object = print) -> Outcome:
    directory.mkdir(parents=True, exist_ok=True)
    say = log if callable(log) else print
    started = time.monotonic()
    steps = plan.schedule()
    history_path = directory / "history.jsonl"
    history_path.unlink(missing_ok=True)
    with History(history_path) as history, ChaosCluster(directory / "cluster", overrides={
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        # A follower that stops fetching (paused, cut off) leaves the ISR after 4 s, not Kafka's 30 s, so acks=all
        # resumes within the fault.
        "replica.lag.time.max.ms": "4000",
        "auto.leader.rebalance.enable": "false",
        "log.segment.bytes": str(256 * 1024),  # many segments: rolls, truncations across them
    }) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, PARTITIONS, {"min.insync.replicas": "2"})
        say(f"cluster up at {cluster.bootstrap()}; {len(steps)} faults: {', '.join(steps)}")
        stop = threading.Event()
        bootstrap = cluster.bootstrap
        producers = [ProducerWorker(i, bootstrap, TOPIC, PARTITIONS, history, plan.rate, stop)
                     for i in range(plan.producers)]
        consumers = [ConsumerWorker(i, bootstrap, TOPIC, PARTITIONS, history, stop) for i in range(plan.consumers)]
        for w in [*producers, *consumers]:
            w.start()
        nemesis = Nemesis(cluster, history, TOPIC, random.Random(plan.seed), SESSION_TIMEOUT_MS / 1000)
        actions = {
            "kill-leader": nemesis.kill_leader, "pause-broker": nemesis.pause_broker,
            "kill-zookeeper": nemesis.kill_zookeeper, "pause-zookeeper": nemesis.pause_zookeeper,
            "partition-leader": nemesis.partition_leader, "partition-zookeeper": nemesis.partition_zookeeper,
            "isolate": nemesis.isolate, "clock-skew": nemesis.clock_skew, "disk-full": nemesis.disk_full,
        }
        try:
            time.sleep(2)  # some traffic before the first fault
            for i, step in enumerate(steps, start=1):
                t0 = time.monotonic()
                actions[step]()
                say(f"[{i}/{len(steps)}] {step} done in {time.monotonic() - t0:.1f} s")
            time.sleep(2)  # some traffic after the last one
        except BaseException:
            say(cluster.logs(60))
            raise
        finally:
            stop.set()
            for w in [*producers, *consumers]:
                w.join(240)
        nemesis.settle()
        with cluster.client(30_000) as client:
            total = final_read(client, TOPIC, PARTITIONS, history)
        say(f"final read: {total} records")
        for p in producers:
            for error in p.errors:
                history.record(f"producer-{p.index}", "info", "note", error=error)
    report = check(read_history(history_path), expect_partitions=PARTITIONS)
    outcome = Outcome(report, time.monotonic() - started, steps, directory)
    (directory / "report.txt").write_text(outcome.summary() + "\n")
    (directory / "report.json").write_text(json.dumps({
        "valid": report.valid, "acknowledged": report.acknowledged, "indeterminate": report.indeterminate,
        "lost": len(report.lost), "duplicates": len(report.duplicates), "reordered": len(report.reordered),
        "moved": len(report.moved), "divergent": len(report.divergent), "unexpected": len(report.unexpected),
        "faults": report.faults, "seconds": round(outcome.seconds),
    }, indent=2) + "\n")
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--leader-kills", type=int, default=100)
    parser.add_argument("--each", type=int, default=5, help="how many times every other fault runs")
    parser.add_argument("--faults", default=",".join(FAULTS), help="which other faults (comma-separated)")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--rate", type=float, default=40.0, help="sends per second per producer")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", default="chaos-run", help="where the cluster, history and report go")
    args = parser.parse_args(argv)
    plan = Plan(args.leader_kills, args.each, [f for f in args.faults.split(",") if f], args.producers,
                args.consumers, args.rate, args.seed)
    outcome = run(Path(args.dir).resolve(), plan)
    print(outcome.summary())
    return 0 if outcome.report.valid else 1


if __name__ == "__main__":
    sys.exit(main())
