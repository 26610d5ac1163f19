"""``sofakafka log-dirs``: kafka-log-dirs.sh, the log directories of brokers and the partitions in them.

``--describe`` (the only action, as in Kafka's tool) asks each broker of ``--broker-list`` (default: every live
broker) with DescribeLogDirs and prints one row per partition replica: broker, directory, partition, size on
disk, offset lag and whether it is a future replica (an alter-log-dirs move); ``--topic-list`` keeps those
topics. ``--json`` prints the document Kafka's tool prints (``{"version": 1, "brokers": [...]}``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, comma_list
from sofakafka.protocol.errors import ErrorCode

VERB = "log-dirs"
SUMMARY = "log directories and partition sizes per broker (kafka-log-dirs.sh)"


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Describe the log directories of brokers: each partition replica's size and lag, "
                                 "as kafka-log-dirs.sh does.")
    common.add_connection_options(p)
    p.add_argument("--describe", action="store_true", help="describe the log dirs (the only action)")
    p.add_argument("--broker-list", action="append", help="comma-separated broker ids (default: every live broker)")
    p.add_argument("--topic-list", action="append", help="comma-separated topics (default: all)")
    common.add_output_options(p)
    return p


def _broker_ids(specs: Sequence[str]) -> list[int]:
    try:
        return [int(b) for spec in specs for b in comma_list(spec)]
    except ValueError:
        raise UsageError("--broker-list takes broker ids, e.g. 1,2,3") from None


def run_log_dirs(args: argparse.Namespace) -> int:
    if not args.describe:
        raise UsageError("--describe is required")
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
