"""`sofakafka reassign`: partition reassignments over the wire, like Kafka 2.6's kafka-reassign-partitions.sh with
``--bootstrap-server`` (AlterPartitionReassignments / ListPartitionReassignments, KIP-455).

    sofakafka reassign --bootstrap-server HOST:PORT --reassignment-json-file FILE --execute
    sofakafka reassign --bootstrap-server HOST:PORT --reassignment-json-file FILE --verify
    sofakafka reassign --bootstrap-server HOST:PORT --reassignment-json-file FILE --cancel
    sofakafka reassign --bootstrap-server HOST:PORT --list

FILE is the tool's JSON: ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}``
(``log_dirs``, if present, must be "any": moving replicas between log directories is not supported).
``--execute`` first prints the current assignment in the same format, to save for a rollback, as Kafka's tool
does. ``--execute --throttle BYTES_PER_S`` bounds the copying (KIP-73) as Kafka's tool does: on every broker
holding a current or a new replica of a listed partition it sets ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate``, and on every topic it names ``leader.replication.throttled.replicas``
(``partition:broker`` of the current replicas, the sources) and ``follower.replication.throttled.replicas``
(the added replicas, the destinations). A ``--verify`` that finds every listed reassignment complete removes
the rates from every broker of the cluster and the lists from the topics, because the tool cannot know which
brokers an earlier run throttled; run it until it does. Moving replicas between log directories
(``--replica-alter-log-dirs-throttle``) is not supported. Exit status 1 when any partition failed, 2 on bad
usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sofakafka.cli_security import SecurityUsageError, command_config_security
from sofakafka.client import ClientError, KafkaClient
from sofakafka.client.client import AlterConfigOp, ConfigResourceResult, ConfigResourceType
from sofakafka.protocol.errors import ErrorCode, KafkaError

Partition = tuple[str, int]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


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


def throttled_replicas(plan: dict[Partition, list[int]], current: dict[Partition, tuple[int, ...]]
                       ) -> dict[str, tuple[str, str]]:
    """topic -> (leader list, follower list): sources are the current replicas, destinations the added ones,
    each item ``partition:broker``, sorted as text as Kafka's tool sorts them."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    for (t, p), target in plan.items():
        sources = current.get((t, p), ())
        leaders.setdefault(t, set()).update(f"{p}:{b}" for b in sources)
        followers.setdefault(t, set()).update(f"{p}:{b}" for b in target if b not in sources)
    return {t: (",".join(sorted(leaders[t])), ",".join(sorted(followers[t]))) for t in leaders}


def _check(results: list[ConfigResourceResult]) -> None:
    for r in results:
        r.raise_for_error()


def set_throttle(client: KafkaClient, plan: dict[Partition, list[int]], current: dict[Partition, tuple[int, ...]],
                 rate: int) -> None:
    set_op = AlterConfigOp.SET
    topics: dict[tuple[int, str], Sequence[tuple[str, int, str | None]]] = {
        (ConfigResourceType.TOPIC, t): [(LEADER_REPLICAS, set_op, leader), (FOLLOWER_REPLICAS, set_op, follower)]
        for t, (leader, follower) in throttled_replicas(plan, current).items()}
    _check(client.incremental_alter_configs(topics))
    brokers = sorted({b for r in plan.values() for b in r} | {b for r in current.values() for b in r})
    _check(client.incremental_alter_configs({
        (ConfigResourceType.BROKER, str(b)): [(LEADER_RATE, set_op, str(rate)), (FOLLOWER_RATE, set_op, str(rate))]
        for b in brokers}))
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def clear_throttles(client: KafkaClient, plan: dict[Partition, list[int]]) -> None:
    delete = AlterConfigOp.DELETE
    brokers = sorted(client.cluster().brokers)
    print("Clearing broker-level throttles on brokers " + ",".join(map(str, brokers)))
    _check(client.incremental_alter_configs({
        (ConfigResourceType.BROKER, str(b)): [(LEADER_RATE, delete, None), (FOLLOWER_RATE, delete, None)]
        for b in brokers}))
    topics = sorted({t for t, _ in plan})
    print("Clearing topic-level throttles on topic(s) " + ",".join(topics))
    _check(client.incremental_alter_configs({
        (ConfigResourceType.TOPIC, t): [(LEADER_REPLICAS, delete, None), (FOLLOWER_REPLICAS, delete, None)]
        for t in topics}))


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
    if args.throttle is not None and action != "execute":
        raise UsageError("--throttle is only allowed with --execute")
    if args.throttle is not None and args.throttle < 0:
        raise UsageError("--throttle must be a non-negative number of bytes per second")
    plan = read_plan(args.reassignment_json_file) if action != "list" else {}
    with KafkaClient(args.bootstrap_server, client_id="sofakafka-reassign",
                     request_timeout_ms=args.request_timeout_ms,
                     security=command_config_security(args.command_config)) as client:
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
            if args.throttle is not None:
                print("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
                      "the throttle is removed.")
                set_throttle(client, plan, current, args.throttle)
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
        if status == 0:
            clear_throttles(client, plan)
        return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sofakafka reassign",
                                     description="Move partition replicas between brokers (kafka-reassign-partitions.sh).")
    parser.add_argument("--bootstrap-server", help="host:port[,host:port...] of the brokers to connect to")
    parser.add_argument("--command-config", metavar="FILE", help="client properties for TLS/SASL listeners")
    parser.add_argument("--request-timeout-ms", type=int, default=30_000, help="deadline of every request")
    parser.add_argument("--reassignment-json-file", help="the partitions and their new replicas (the tool's JSON)")
    parser.add_argument("--execute", action="store_true", help="start the reassignments in the file")
    parser.add_argument("--verify", action="store_true", help="say which reassignments in the file are complete")
    parser.add_argument("--cancel", action="store_true", help="cancel the reassignments in the file")
    parser.add_argument("--list", action="store_true", help="list every ongoing reassignment")
    parser.add_argument("--throttle", type=int, default=None, metavar="BYTES_PER_S",
                        help="with --execute: bound the replication of the moving replicas (bytes/s); "
                             "--verify removes the throttle once every move is complete")
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    try:
        return run(args)
    except (UsageError, SecurityUsageError) as e:
        print(f"sofakafka reassign: error: {e}", file=sys.stderr)
        return 2
    except KafkaError as e:
        print(f"Error: {e.code.name}" + (f": {e.message}" if e.message else ""), file=sys.stderr)
        return 1
    except ClientError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
