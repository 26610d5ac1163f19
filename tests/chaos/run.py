"""One chaos run: a 3-broker cluster in network namespaces, producers and consumers, a schedule of faults, then
the whole history checked (tests/chaos/checker.py). The short form runs in CI (tests/chaos/test_chaos.py); the
long form is this module's command line, which prints the figures docs/reliability.md reports::

    .venv/bin/python -m tests.chaos.run --leader-kills 100 --each 5 --dir /tmp/chaos-long

``--leader-kills N`` kill -9s N partition leaders; ``--each M`` runs every other fault (broker pause, ZooKeeper
kill and pause, partitions leader/brokers and broker/ZooKeeper, isolation, clock skew, disk full, one failed log
dir) M times; the faults are shuffled with ``--seed``. Beside the idempotent producers (``--producers``, ``--rate``) run
``--txn-producers`` transactional ones (default 1, ``--txn-rate`` transactions a second each, a quarter aborted
on purpose) and, with them, a read_committed consumer next to the read_uncommitted ones; ``--txn-producers 0``
runs without transactions. Needs root (namespaces, tmpfs), Java and Debian's zookeeper package. The history,
every process's log and the report stay in ``--dir``.
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
from tests.chaos.workload import (
    ConsumerWorker,
    ProducerWorker,
    TransactionalProducerWorker,
    final_read,
    final_read_committed,
    last_stable_offsets,
)

TOPIC = "chaos"
PARTITIONS = 3
SESSION_TIMEOUT_MS = 4000
TRANSACTION_STATE = "__transaction_state"
STABLE_WAIT_S = 90.0  # for the last stable offsets to reach the high watermarks after the run (a transaction
# left open by a producer that gave up is aborted by its coordinator after transaction.timeout.ms, 20 s)
FAULTS = ["pause-broker", "kill-zookeeper", "pause-zookeeper", "partition-leader", "partition-zookeeper",
          "isolate", "clock-skew", "disk-full", "fail-log-dir"]


@dataclass
class Plan:
    leader_kills: int = 2
    each: int = 1
    faults: list[str] = field(default_factory=lambda: list(FAULTS))
    producers: int = 2
    consumers: int = 1
    rate: float = 40.0  # sends per second per producer
    seed: int = 1
    txn_producers: int = 1
    txn_rate: float = 4.0  # transactions per second per transactional producer

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
        # Kafka's 50 partitions of __transaction_state are 150 replicas for three brokers to load and follow
        # through every fault; the run's few transactional ids need a few.
        "transaction.state.log.num.partitions": "3",
    }) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, PARTITIONS, {"min.insync.replicas": "2"})
        say(f"cluster up at {cluster.bootstrap()}; {len(steps)} faults: {', '.join(steps)}")
        stop = threading.Event()
        bootstrap = cluster.bootstrap
        producers = [ProducerWorker(i, bootstrap, TOPIC, PARTITIONS, history, plan.rate, stop)
                     for i in range(plan.producers)]
        txn_producers = [TransactionalProducerWorker(i, bootstrap, TOPIC, PARTITIONS, history, plan.txn_rate, stop,
                                                     seed=plan.seed) for i in range(plan.txn_producers)]
        consumers = [ConsumerWorker(i, bootstrap, TOPIC, PARTITIONS, history, stop) for i in range(plan.consumers)]
        if txn_producers:
            consumers.append(ConsumerWorker(0, bootstrap, TOPIC, PARTITIONS, history, stop, "read_committed"))
        workers: list[threading.Thread] = [*producers, *txn_producers, *consumers]
        for w in workers:
            w.start()
        internal = (TRANSACTION_STATE,) if txn_producers else ()
        nemesis = Nemesis(cluster, history, TOPIC, random.Random(plan.seed), SESSION_TIMEOUT_MS / 1000, internal)
        actions = {
            "kill-leader": nemesis.kill_leader, "pause-broker": nemesis.pause_broker,
            "kill-zookeeper": nemesis.kill_zookeeper, "pause-zookeeper": nemesis.pause_zookeeper,
            "partition-leader": nemesis.partition_leader, "partition-zookeeper": nemesis.partition_zookeeper,
            "isolate": nemesis.isolate, "clock-skew": nemesis.clock_skew, "disk-full": nemesis.disk_full,
            "fail-log-dir": nemesis.fail_log_dir,
        }
        try:
            # The first init_transactions creates __transaction_state: every replica of it in its ISR before the
            # first fault, as the nemesis waits for after each.
            for t in txn_producers:
                if not t.ready.wait(120):
                    raise AssertionError(f"{t.name}: init_transactions did not succeed: {t.errors[-3:]}")
            if internal:
                cluster.wait_full_isr(list(internal))
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
            for w in workers:
                w.join(240)
        nemesis.settle()
        ends: dict[int, tuple[int, int]] = {}
        with cluster.client(30_000) as client:
            total = final_read(client, TOPIC, PARTITIONS, history)
            say(f"final read: {total} records")
            if txn_producers:
                ends = last_stable_offsets(client, TOPIC, PARTITIONS)
                deadline = time.monotonic() + STABLE_WAIT_S
                while any(lso < hw for lso, hw in ends.values()) and time.monotonic() < deadline:
                    time.sleep(0.5)
                    ends = last_stable_offsets(client, TOPIC, PARTITIONS)
        if txn_producers:
            # Read to the last stable offset even if it stays behind: the checker reports the hanging transaction
            # and whatever committed data it hides.
            committed = final_read_committed(cluster.bootstrap(), TOPIC, PARTITIONS, history, ends)
            say(f"final read_committed: {committed} records; transactions: "
                + "; ".join(f"{t.transactional_id} {t.outcomes} in {t.instances} instances" for t in txn_producers))
        for p in producers:
            for error in p.errors:
                history.record(f"producer-{p.index}", "info", "note", error=error)
        for t in txn_producers:
            for error in t.errors:
                history.record(f"txn-producer-{t.index}", "info", "note", error=error)
    report = check(read_history(history_path), expect_partitions=PARTITIONS)
    outcome = Outcome(report, time.monotonic() - started, steps, directory)
    (directory / "report.txt").write_text(outcome.summary() + "\n")
    (directory / "report.json").write_text(json.dumps({
        "valid": report.valid, "acknowledged": report.acknowledged, "indeterminate": report.indeterminate,
        "lost": len(report.lost), "duplicates": len(report.duplicates), "reordered": len(report.reordered),
        "moved": len(report.moved), "divergent": len(report.divergent), "unexpected": len(report.unexpected),
        "transactions": report.transactions, "aborted_reads": len(report.aborted_reads),
        "dirty_reads": len(report.dirty_reads),
        "committed_lost": len(report.committed_lost), "torn": len(report.torn),
        "committed_duplicates": len(report.committed_duplicates), "half_visible": len(report.half_visible),
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
    parser.add_argument("--txn-producers", type=int, default=1, help="transactional producers (0: none)")
    parser.add_argument("--txn-rate", type=float, default=4.0, help="transactions per second per one")
    parser.add_argument("--dir", default="chaos-run", help="where the cluster, history and report go")
    args = parser.parse_args(argv)
    plan = Plan(args.leader_kills, args.each, [f for f in args.faults.split(",") if f], args.producers,
                args.consumers, args.rate, args.seed, args.txn_producers, args.txn_rate)
    outcome = run(Path(args.dir).resolve(), plan)
    print(outcome.summary())
    return 0 if outcome.report.valid else 1


if __name__ == "__main__":
    sys.exit(main())
