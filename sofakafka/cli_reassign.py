"""`sofakafka reassign`: partition reassignments over the wire, like Kafka 2.6's kafka-reassign-partitions.sh with
``--bootstrap-server`` (AlterPartitionReassignments / ListPartitionReassignments, KIP-455).

    sofakafka reassign --bootstrap-server HOST:PORT --reassignment-json-file FILE --execute
    sofakafka reassign --bootstrap-server HOST:PORT --reassignment-json-file FILE --verify
    sofakafka reassign --bootstrap-server HOST:PORT --reassignment-json-file FILE --cancel
    sofakafka reassign --bootstrap-server HOST:PORT --list

FILE is the tool's JSON: ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}``
(``log_dirs``, if present, must be "any": moving replicas between log directories is not supported).
``--execute`` first prints the current assignment in the same format, to save for a rollback, as Kafka's tool
does. Throttles (``--throttle``) are not supported: a move copies at full speed. Exit status 1 when any
partition failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sofakafka.client import ClientError, KafkaClient
from sofakafka.protocol.errors import ErrorCode, KafkaError

Partition = tuple[str, int]


class UsageError(Exception):
    pass


def read_plan(path: str) -> dict[Partition, list[int]]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{path}: expected {{\"version\":1,\"partitions\":[...]}} with at least one partition")
    plan: dict[Partition, list[int]] = {}
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("topic"), str) and isinstance(entry.get("partition"), int)
                and isinstance(entry.get("replicas"), list) and all(isinstance(r, int) for r in entry["replicas"])):
            raise UsageError(f"{path}: each partition needs topic, partition and replicas: {entry!r}")
        if any(d != "any" for d in entry.get("log_dirs", [])):
            raise UsageError(f"{path}: moving replicas between log directories is not supported")
        key = (entry["topic"], entry["partition"])
        if key in plan:
            raise UsageError(f"{path}: partition {key[0]}-{key[1]} is listed twice")
        plan[key] = list(entry["replicas"])
    return plan


def plan_json(assignment: dict[Partition, Sequence[int]]) -> str:
    partitions: list[dict[str, Any]] = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def _current(client: KafkaClient, partitions: Sequence[Partition]) -> dict[Partition, tuple[int, ...]]:
    found: dict[Partition, tuple[int, ...]] = {}
    for topic in sorted({t for t, _ in partitions}):
        info = client.topic(topic)
        for t, p in partitions:
            if t == topic and p in info.partitions:
                found[(t, p)] = info.partitions[p].replicas
    return found


def _report(results: dict[Partition, Any], verb: str) -> int:
    failed = {tp: r for tp, r in results.items() if r.error != ErrorCode.NONE}
    ok = sorted(tp for tp in results if tp not in failed)
    if ok:
        print(f"Successfully {verb} partition reassignments for: " + ",".join(f"{t}-{p}" for t, p in ok))
    for (t, p), r in sorted(failed.items()):
        print(f"Error reassigning partition(s): {t}-{p}: {r.error.name}" + (f": {r.error_message}" if r.error_message else ""),
              file=sys.stderr)
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    actions = [a for a in ("execute", "verify", "cancel", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("give exactly one of --execute, --verify, --cancel, --list")
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    action = actions[0]
    if action != "list" and not args.reassignment_json_file:
        raise UsageError(f"--{action} needs --reassignment-json-file")
    plan = read_plan(args.reassignment_json_file) if action != "list" else {}
    with KafkaClient(args.bootstrap_server, client_id="sofakafka-reassign",
                     request_timeout_ms=args.request_timeout_ms) as client:
        if action == "list":
            ongoing = client.list_partition_reassignments()
            if not ongoing:
                print("No partition reassignments found.")
                return 0
            print("Current partition reassignments:")
            for (t, p), r in sorted(ongoing.items()):
                print(f"{t}-{p}: replicas: {','.join(map(str, r.replicas))}. adding: "
                      f"{','.join(map(str, r.adding_replicas))}. removing: {','.join(map(str, r.removing_replicas))}.")
            return 0
        if action == "execute":
            current = _current(client, list(plan))
            print("Current partition replica assignment\n")
            print(plan_json(dict(current)))
            print("\nSave this to use as the --reassignment-json-file option during rollback")
            return _report(client.alter_partition_reassignments(dict(plan)), "started")
        if action == "cancel":
            return _report(client.alter_partition_reassignments(dict.fromkeys(plan)), "cancelled")
        ongoing = client.list_partition_reassignments(list(plan))
        current = _current(client, list(plan))
        status = 0
        print("Status of partition reassignment:")
        for (t, p), target in sorted(plan.items()):
            if (t, p) in ongoing:
                print(f"Reassignment of partition {t}-{p} is still in progress.")
                status = 1
            elif list(current.get((t, p), ())) == target:
                print(f"Reassignment of partition {t}-{p} is complete.")
            else:
                print(f"There is no active reassignment of partition {t}-{p}, but replica set is "
                      f"{list(current.get((t, p), ()))} rather than {target}.")
                status = 1
        return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sofakafka reassign",
                                     description="Move partition replicas between brokers (kafka-reassign-partitions.sh).")
    parser.add_argument("--bootstrap-server", help="host:port[,host:port...] of the brokers to connect to")
    parser.add_argument("--request-timeout-ms", type=int, default=30_000, help="deadline of every request")
    parser.add_argument("--reassignment-json-file", help="the partitions and their new replicas (the tool's JSON)")
    parser.add_argument("--execute", action="store_true", help="start the reassignments in the file")
    parser.add_argument("--verify", action="store_true", help="say which reassignments in the file are complete")
    parser.add_argument("--cancel", action="store_true", help="cancel the reassignments in the file")
    parser.add_argument("--list", action="store_true", help="list every ongoing reassignment")
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    try:
        return run(args)
    except UsageError as e:
        print(f"sofakafka reassign: error: {e}", file=sys.stderr)
        return 2
    except KafkaError as e:
        print(f"Error: {e.code.name}" + (f": {e.message}" if e.message else ""), file=sys.stderr)
        return 1
    except ClientError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
