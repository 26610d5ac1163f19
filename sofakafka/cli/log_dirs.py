"""``sofakafka log-dirs``: kafka-log-dirs.sh, the log directories of brokers and the partitions in them, and moves
of replicas between a broker's log dirs (JBOD).

``--describe`` (Kafka's tool's action) asks each broker of ``--broker-list`` (default: every live broker) with
DescribeLogDirs and prints one row per partition replica: broker, directory, partition, size on disk, offset lag
and whether it is a future replica (the copy a move is filling; its lag is how far it is behind); an offline dir
is a row with its error; ``--topic-list`` keeps those topics. ``--json`` prints the document Kafka's tool prints
(``{"version": 1, "brokers": [...]}``).

``--move TOPIC:PARTITION=DIR`` (ours; Kafka moves replicas between dirs only through kafka-reassign-partitions'
``log_dirs``, which ``sofakafka reassign`` honours too) asks the one broker of ``--broker-list`` to move those
replicas with AlterReplicaLogDirs, DIR as ``--describe`` names it; ``--wait`` then follows the moves with
DescribeLogDirs until each replica is in its new dir with no copy left. Exit status 1 when a move was refused
(each refusal printed with Kafka's error name) or did not finish within ``--timeout-ms``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, comma_list, err
from sofakafka.client import KafkaClient
from sofakafka.protocol.errors import ErrorCode

VERB = "log-dirs"
SUMMARY = "log directories and partition sizes per broker, and moves between them (kafka-log-dirs.sh)"


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Describe the log directories of brokers: each partition replica's size and lag, "
                                 "as kafka-log-dirs.sh does; or move replicas between a broker's log dirs.")
    common.add_connection_options(p)
    p.add_argument("--describe", action="store_true", help="describe the log dirs")
    p.add_argument("--move", action="append", metavar="TOPIC:PARTITION=DIR",
                   help="move a replica of the --broker-list broker to another of its log dirs (repeatable)")
    p.add_argument("--broker-list", action="append", help="comma-separated broker ids (default: every live broker)")
    p.add_argument("--topic-list", action="append", help="comma-separated topics (default: all)")
    p.add_argument("--wait", action="store_true", help="with --move: wait until every move has completed")
    p.add_argument("--timeout-ms", type=int, default=300_000, help="with --wait: give up after this long")
    common.add_output_options(p)
    return p


def parse_moves(specs: Sequence[str]) -> dict[tuple[str, int], str]:
    moves: dict[tuple[str, int], str] = {}
    for spec in specs:
        replica, sep, log_dir = spec.partition("=")
        topic, colon, partition = replica.rpartition(":")
        if not sep or not colon or not topic or not partition.isdigit() or not log_dir:
            raise UsageError(f"--move takes TOPIC:PARTITION=DIR, got {spec!r}")
        moves[(topic, int(partition))] = log_dir
    return moves


def replica_dirs(client: KafkaClient, broker: int, partitions: Sequence[tuple[str, int]]
                 ) -> dict[tuple[str, int], tuple[str | None, str | None]]:
    """(current dir, future dir) of each of ``partitions`` on ``broker``."""
    topics: dict[str, list[int]] = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    out: dict[tuple[str, int], tuple[str | None, str | None]] = {tp: (None, None) for tp in partitions}
    for d in client.describe_log_dirs(broker, topics):
        for part in d.partitions:
            tp = (part.topic, part.partition)
            if tp in out:
                current, future = out[tp]
                out[tp] = (current, d.log_dir) if part.is_future else (d.log_dir, future)
    return out


def run_moves(args: argparse.Namespace) -> int:
    moves = parse_moves(args.move)
    brokers = _broker_ids(args.broker_list) if args.broker_list else []
    if len(brokers) != 1:
        raise UsageError("--move needs the one broker whose replicas move: --broker-list ID")
    broker = brokers[0]
    with common.client(args, VERB) as client:
        if broker not in client.metadata([]).brokers:
            raise UsageError(f"--broker-list: no live broker {broker}")
        results = client.alter_replica_log_dirs(broker, moves)
        status = 0
        for (t, p), code in sorted(results.items()):
            if code == ErrorCode.NONE:
                print(f"Moving {t}-{p} on broker {broker} to {moves[(t, p)]}")
            else:
                err(f"Cannot move {t}-{p} on broker {broker} to {moves[(t, p)]}: {code.name}")
                status = 1
        started = sorted(tp for tp, code in results.items() if code == ErrorCode.NONE)
        if not args.wait or not started:
            return status
        deadline = time.monotonic() + args.timeout_ms / 1000
        while True:
            where = replica_dirs(client, broker, started)
            pending = [tp for tp in started if where[tp] != (moves[tp], None)]
            if not pending:
                print("Every move has completed.")
                return status
            if time.monotonic() > deadline:
                for t, p in pending:
                    err(f"{t}-{p} on broker {broker} is not in {moves[(t, p)]} yet (now: {where[(t, p)][0]}, "
                        f"copy: {where[(t, p)][1]})")
                return 1
            time.sleep(0.5)


def _broker_ids(specs: Sequence[str]) -> list[int]:
    try:
        return [int(b) for spec in specs for b in comma_list(spec)]
    except ValueError:
        raise UsageError("--broker-list takes broker ids, e.g. 1,2,3") from None


def run_log_dirs(args: argparse.Namespace) -> int:
    if bool(args.describe) == bool(args.move):
        raise UsageError("give one of --describe and --move")
    if args.move:
        return run_moves(args)
    topics = {t for spec in args.topic_list or [] for t in comma_list(spec)}
    wanted = _broker_ids(args.broker_list) if args.broker_list else None
    with common.client(args, VERB) as client:
        brokers = sorted(client.metadata([]).brokers)
        if wanted is not None:
            unknown = sorted(set(wanted) - set(brokers))
            if unknown:
                raise UsageError(f"--broker-list: no live broker {', '.join(map(str, unknown))} "
                                 f"(live: {', '.join(map(str, brokers))})")
            brokers = wanted
        result: list[dict[str, Any]] = []
        for b in brokers:
            dirs = []
            for d in client.describe_log_dirs(b):
                dirs.append({"logDir": d.log_dir, "error": None if d.error == ErrorCode.NONE else d.error.name,
                             "partitions": [{"partition": f"{p.topic}-{p.partition}", "size": p.size,
                                             "offsetLag": p.offset_lag, "isFuture": p.is_future}
                                            for p in sorted(d.partitions, key=lambda p: (p.topic, p.partition))
                                            if not topics or p.topic in topics]})
            result.append({"broker": b, "logDirs": dirs})
    if args.json:
        common.print_json({"version": 1, "brokers": result})
        return 0
    rows = [["BROKER", "LOG-DIR", "PARTITION", "SIZE", "OFFSET-LAG", "FUTURE"]]
    for broker in result:
        for d in broker["logDirs"]:
            if d["error"]:
                rows.append([str(broker["broker"]), d["logDir"], f"({d['error']})", "-", "-", "-"])
            for p in d["partitions"]:
                rows.append([str(broker["broker"]), d["logDir"], p["partition"], str(p["size"]),
                             str(p["offsetLag"]), str(p["isFuture"]).lower()])
    common.print_table(rows)
    return 0


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_log_dirs)
