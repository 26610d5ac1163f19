"""`sofakafka reassign`: partition reassignments over the wire, like Kafka 2.6's kafka-reassign-partitions.sh with
``--bootstrap-server`` (AlterPartitionReassignments / ListPartitionReassignments, KIP-455).

    sofakafka reassign --bootstrap-server HOST:PORT --reassignment-json-file FILE --execute
    sofakafka reassign --bootstrap-server HOST:PORT --reassignment-json-file FILE --verify
    sofakafka reassign --bootstrap-server HOST:PORT --reassignment-json-file FILE --cancel
    sofakafka reassign --bootstrap-server HOST:PORT --list

FILE is the tool's JSON: ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],
"log_dirs":["any","/data/b"]}]}``: ``log_dirs`` (optional, one per replica, "any" for no choice) names the log dir
each replica is to live in on its broker, as Kafka's tool reads it. ``--execute`` first prints the current
assignment in the same format, to save for a rollback, as Kafka's tool does, starts the reassignments, then asks
each broker to put its replicas in the dirs named (AlterReplicaLogDirs), again every 100 ms for replicas not on
their broker yet (REPLICA_NOT_AVAILABLE: the broker remembers the dir for when the replica arrives) until
``--timeout`` ms (10000) have passed. ``--execute --throttle BYTES_PER_S`` bounds the copying (KIP-73) as Kafka's
tool does: on every broker holding a current or a new replica of a listed partition it sets
``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``, and on every topic it names
``leader.replication.throttled.replicas`` (``partition:broker`` of the current replicas, the sources) and
``follower.replication.throttled.replicas`` (the added replicas, the destinations);
``--replica-alter-log-dirs-throttle BYTES_PER_S`` sets ``replica.alter.log.dirs.io.max.bytes.per.second`` on
the brokers whose replicas move between dirs. ``--verify`` says, per partition and per replica move, what is
done (in Kafka's words); once everything listed is complete it removes the rates from every broker of the cluster
and the lists from the topics, because the tool cannot know which brokers an earlier run throttled; run it until
it does. ``--cancel`` cancels the reassignments and stops the replica moves under way (each replica stays in the
dir it is in). Exit status 1 when any partition failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, err
from sofakafka.client import ClientError, KafkaClient
from sofakafka.client.client import AlterConfigOp, ConfigResourceResult, ConfigResourceType
from sofakafka.protocol.errors import ErrorCode

VERB = "reassign"
SUMMARY = "move partition replicas between brokers (kafka-reassign-partitions.sh)"

Partition = tuple[str, int]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
ANY_LOG_DIR = "any"


Replica = tuple[str, int, int]  # topic, partition, broker


def read_plan(path: str) -> tuple[dict[Partition, list[int]], dict[Replica, str]]:
    """The partitions' new replicas, and the log dir wanted for each replica whose ``log_dirs`` entry is not
    "any"."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{path}: expected {{\"version\":1,\"partitions\":[...]}} with at least one partition")
    plan: dict[Partition, list[int]] = {}
    dirs: dict[Replica, str] = {}
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("topic"), str) and isinstance(entry.get("partition"), int)
                and isinstance(entry.get("replicas"), list) and all(isinstance(r, int) for r in entry["replicas"])):
            raise UsageError(f"{path}: each partition needs topic, partition and replicas: {entry!r}")
        key = (entry["topic"], entry["partition"])
        if key in plan:
            raise UsageError(f"{path}: partition {key[0]}-{key[1]} is listed twice")
        replicas = list(entry["replicas"])
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise UsageError(f"{path}: log_dirs of {key[0]}-{key[1]} must be a list of strings")
        if len(log_dirs) != len(replicas):
            raise UsageError(f"Size of replicas list {replicas} is different from size of log dirs list {log_dirs} "
                             f"for partition {key[0]}-{key[1]}")
        plan[key] = replicas
        dirs.update({(key[0], key[1], b): d for b, d in zip(replicas, log_dirs, strict=True) if d != ANY_LOG_DIR})
    return plan, dirs


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
                 rate: int | None, dirs: dict[Replica, str], log_dir_rate: int | None) -> None:
    set_op = AlterConfigOp.SET
    topics: dict[tuple[int, str], Sequence[tuple[str, int, str | None]]] = {
        (ConfigResourceType.TOPIC, t): [(LEADER_REPLICAS, set_op, leader), (FOLLOWER_REPLICAS, set_op, follower)]
        for t, (leader, follower) in throttled_replicas(plan, current).items()}
    _check(client.incremental_alter_configs(topics))
    ops: dict[tuple[int, str], list[tuple[str, int, str | None]]] = {}
    if rate is not None:
        for b in sorted({b for r in plan.values() for b in r} | {b for r in current.values() for b in r}):
            ops.setdefault((ConfigResourceType.BROKER, str(b)), []).extend(
                [(LEADER_RATE, set_op, str(rate)), (FOLLOWER_RATE, set_op, str(rate))])
    if log_dir_rate is not None:
        for b in sorted({b for _, _, b in dirs}):
            ops.setdefault((ConfigResourceType.BROKER, str(b)), []).append((LOG_DIR_RATE, set_op, str(log_dir_rate)))
    _check(client.incremental_alter_configs(dict(ops)))
    if rate is not None:
        print(f"The inter-broker throttle limit was set to {rate} B/s")
    if log_dir_rate is not None:
        print(f"The replica-alter-dir throttle limit was set to {log_dir_rate} B/s")


def alter_dirs(client: KafkaClient, moves: dict[Replica, str]) -> set[Replica]:
    """Ask each broker for its replicas' dirs; the replicas it took (REPLICA_NOT_AVAILABLE: not there yet, ask
    again). Another error fails the tool, as Kafka's does."""
    taken: set[Replica] = set()
    for broker in sorted({b for _, _, b in moves}):
        mine = {(t, p): d for (t, p, b), d in moves.items() if b == broker}
        for (t, p), code in client.alter_replica_log_dirs(broker, mine).items():
            if code == ErrorCode.NONE:
                taken.add((t, p, broker))
            elif code != ErrorCode.REPLICA_NOT_AVAILABLE:
                raise ClientError(f"Failed to alter dir for {t}-{p}-{broker}: {code.name}")
    return taken


def execute_moves(client: KafkaClient, moves: dict[Replica, str], timeout_ms: int) -> None:
    """Kafka's executeMoves: until every replica's move is taken, or ``timeout_ms``."""
    deadline = time.monotonic() + timeout_ms / 1000
    pending = dict(moves)
    while True:
        taken = alter_dirs(client, pending)
        if taken:
            print("Successfully started log directory move" + ("s" if len(taken) > 1 else "") + " for: "
                  + ",".join(f"{t}-{p}-{b}" for t, p, b in sorted(taken)))
        for replica in taken:
            del pending[replica]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise ClientError("Timed out before log directory move" + ("s" if len(pending) > 1 else "")
                              + " could be started for: " + ",".join(f"{t}-{p}-{b}" for t, p, b in sorted(pending)))
        time.sleep(0.1)


def move_states(client: KafkaClient, moves: dict[Replica, str]) -> dict[Replica, tuple[str | None, str | None]]:
    """(current dir, future dir) of each replica of ``moves`` (Kafka's describeReplicaLogDirs)."""
    out: dict[Replica, tuple[str | None, str | None]] = dict.fromkeys(moves, (None, None))
    for broker in sorted({b for _, _, b in moves}):
        for d in client.describe_log_dirs(broker):
            if d.error != ErrorCode.NONE:
                continue
            for part in d.partitions:
                replica = (part.topic, part.partition, broker)
                if replica in out:
                    current, future = out[replica]
                    out[replica] = (current, d.log_dir) if part.is_future else (d.log_dir, future)
    return out


def verify_moves(client: KafkaClient, moves: dict[Replica, str]) -> bool:
    """Print each move's state in Kafka's words; True when all are done."""
    done = True
    for (t, p, b), (current, future) in sorted(move_states(client, moves).items()):
        target = moves[(t, p, b)]
        if current is None:
            print(f"Partition {t}-{p} cannot be found in any live log directory on broker {b}.")
            done = False
        elif future is not None:
            print(f"Reassignment of replica {t}-{p}-{b} is still in progress." if future == target else
                  f"Partition {t}-{p} on broker {b} is being moved to log dir {future} instead of {target}.")
            done = False
        elif current == target:
            print(f"Reassignment of replica {t}-{p}-{b} completed successfully.")
        else:
            print(f"Partition {t}-{p} on broker {b} is not being moved from log dir {current} to {target}.")
            done = False
    return done


def clear_throttles(client: KafkaClient, plan: dict[Partition, list[int]]) -> None:
    delete = AlterConfigOp.DELETE
    brokers = sorted(client.cluster().brokers)
    print("Clearing broker-level throttles on brokers " + ",".join(map(str, brokers)))
    _check(client.incremental_alter_configs({
        (ConfigResourceType.BROKER, str(b)): [(LEADER_RATE, delete, None), (FOLLOWER_RATE, delete, None),
                                              (LOG_DIR_RATE, delete, None)]
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
        err(f"Error reassigning partition(s): {t}-{p}: {r.error.name}" + (f": {r.error_message}" if r.error_message else ""))
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
    for option, value in (("--throttle", args.throttle),
                          ("--replica-alter-log-dirs-throttle", args.replica_alter_log_dirs_throttle)):
        if value is not None and action != "execute":
            raise UsageError(f"{option} is only allowed with --execute")
        if value is not None and value < 0:
            raise UsageError(f"{option} must be a non-negative number of bytes per second")
    plan, dirs = read_plan(args.reassignment_json_file) if action != "list" else ({}, {})
    with common.client(args, VERB) as client:
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
            if args.throttle is not None or args.replica_alter_log_dirs_throttle is not None:
                print("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
                      "the throttle is removed.")
                set_throttle(client, plan, current, args.throttle, dirs, args.replica_alter_log_dirs_throttle)
            status = _report(client.alter_partition_reassignments(dict(plan)), "started")
            if dirs and status == 0:
                execute_moves(client, dirs, args.timeout)
            return status
        if action == "cancel":
            status = _report(client.alter_partition_reassignments(dict.fromkeys(plan)), "cancelled")
            # Moves under way stop where they are: each replica is asked for the dir it is in now (Kafka's cancel).
            active = {r: current for r, (current, future) in move_states(client, dirs).items()
                      if current is not None and future is not None}
            if active:
                execute_moves(client, active, args.timeout)
            else:
                print("None of the specified partition moves are active.")
            return status
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
        if dirs and not verify_moves(client, dirs):
            status = 1
        if status == 0:
            clear_throttles(client, plan)
        return status


def build_parser() -> argparse.ArgumentParser:
    parser = common.verb_parser(VERB, "Move partition replicas between brokers (kafka-reassign-partitions.sh).")
    common.add_connection_options(parser)
    parser.add_argument("--reassignment-json-file", help="the partitions and their new replicas (the tool's JSON)")
    parser.add_argument("--execute", action="store_true", help="start the reassignments in the file")
    parser.add_argument("--verify", action="store_true", help="say which reassignments in the file are complete")
    parser.add_argument("--cancel", action="store_true", help="cancel the reassignments in the file")
    parser.add_argument("--list", action="store_true", help="list every ongoing reassignment")
    parser.add_argument("--throttle", type=int, default=None, metavar="BYTES_PER_S",
                        help="with --execute: bound the replication of the moving replicas (bytes/s); "
                             "--verify removes the throttle once every move is complete")
    parser.add_argument("--replica-alter-log-dirs-throttle", type=int, default=None, metavar="BYTES_PER_S",
                        help="with --execute: bound the copying of replicas moved between log dirs of a broker")
    parser.add_argument("--timeout", type=int, default=10_000, metavar="MS",
                        help="how long --execute keeps asking for the log dirs of replicas not on their broker yet")
    return parser


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run)
