"""``sofakafka topics``: kafka-topics.sh over the wire protocol.

Actions (positional, or Kafka's ``--create`` style flags): ``create``, ``list``, ``describe`` (with
``--under-replicated-partitions`` / ``--unavailable-partitions``), ``delete`` and ``alter`` (more partitions,
optionally with ``--replica-assignment``, or ``--config``). The same option names and output lines as Kafka
2.6's tool, so scripts and habits written for it carry over.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, comma_list, err, key_values
from sofakafka.cli.configs import alter_configs, shown_value
from sofakafka.client import (
    AlterConfigOp,
    ConfigResourceType,
    ConfigSource,
    KafkaClient,
    NewTopic,
    TopicInfo,
    UnsupportedApiError,
)
from sofakafka.protocol.errors import ErrorCode

VERB = "topics"
SUMMARY = "create, list, describe, delete or alter topics (kafka-topics.sh)"
ACTIONS = ("create", "list", "describe", "delete", "alter")


def replica_assignment(text: str) -> dict[int, list[int]]:
    """kafka-topics.sh syntax: partitions separated by commas, a partition's replicas by colons."""
    out: dict[int, list[int]] = {}
    for p, part in enumerate(text.split(",")):
        try:
            out[p] = [int(b) for b in part.strip().split(":")]
        except ValueError:
            raise UsageError(f"bad --replica-assignment {text!r}: broker ids must be integers") from None
    return out


def run_topics(args: argparse.Namespace) -> int:
    action = common.chosen_action(args, ACTIONS)
    if action in ("create", "delete", "alter") and not args.topic:
        raise UsageError(f"--topic is required to {action} a topic")
    with common.client(args, VERB) as client:
        if action == "create":
            return _topics_create(client, args)
        if action == "list":
            return _topics_list(client, args)
        if action == "describe":
            return _topics_describe(client, args)
        if action == "delete":
            return _topics_delete(client, args)
        return _topics_alter(client, args)


def _topics_create(client: KafkaClient, args: argparse.Namespace) -> int:
    configs: dict[str, str | None] = dict(key_values(args.config or [], "--config"))
    assignment = replica_assignment(args.replica_assignment) if args.replica_assignment else None
    if assignment and (args.partitions is not None or args.replication_factor is not None):
        raise UsageError("--replica-assignment cannot be combined with --partitions or --replication-factor")
    status = 0
    for name in comma_list(args.topic):
        topic = NewTopic(name, num_partitions=-1 if args.partitions is None else args.partitions,
                         replication_factor=-1 if args.replication_factor is None else args.replication_factor,
                         assignments=assignment, configs=configs)
        result = client.create_topics([topic], validate_only=args.validate_only)[name]
        if result.error == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            continue
        if result.error != ErrorCode.NONE:
            err(f"Error while executing topic command : {result.error_message or result.error.name}")
            status = 1
            continue
        print(f"Created topic {name}." if not args.validate_only else f"Topic {name} is valid.")
    return status


def _topics_list(client: KafkaClient, args: argparse.Namespace) -> int:
    cluster = client.metadata()
    wanted = set(comma_list(args.topic))
    for name in sorted(cluster.topics):
        info = cluster.topics[name]
        if args.exclude_internal and info.is_internal:
            continue
        if wanted and name not in wanted:
            continue
        print(name)
    return 0


def _non_default_configs(client: KafkaClient, topics: Sequence[str]) -> dict[str, str]:
    """Per topic, the `Configs:` column of kafka-topics.sh --describe: every entry not at its default."""
    out: dict[str, str] = {}
    if not topics:
        return out
    try:
        results = client.describe_configs([(ConfigResourceType.TOPIC, t, None) for t in topics])
    except UnsupportedApiError:
        return out
    for r in results:
        if r.error != ErrorCode.NONE:
            continue
        out[r.resource_name] = ",".join(
            f"{e.name}={shown_value(e)}" for e in r.entries if e.config_source != ConfigSource.DEFAULT_CONFIG)
    return out


def _topics_describe(client: KafkaClient, args: argparse.Namespace) -> int:
    names = comma_list(args.topic)
    cluster = client.metadata(names or None)
    status = 0
    infos: list[TopicInfo] = []
    for name in names or sorted(cluster.topics):
        info = cluster.topics.get(name)
        if info is None or info.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            err(f"Error while executing topic command : Topic '{name}' does not exist as expected")
            status = 1
            continue
        if info.error != ErrorCode.NONE:
            err(f"Error while executing topic command : {name}: {info.error.name}")
            status = 1
            continue
        if args.exclude_internal and info.is_internal:
            continue
        infos.append(info)
    configs = _non_default_configs(client, [i.name for i in infos])
    for info in infos:
        parts = [info.partitions[p] for p in sorted(info.partitions)]
        if args.under_replicated_partitions:
            parts = [p for p in parts if len(p.isr) < len(p.replicas)]
        if args.unavailable_partitions:
            parts = [p for p in parts if p.leader < 0]
        if (args.under_replicated_partitions or args.unavailable_partitions) and not parts:
            continue
        rf = len(parts[0].replicas) if parts else 0
        if not (args.under_replicated_partitions or args.unavailable_partitions):
            print(f"Topic: {info.name}\tPartitionCount: {len(info.partitions)}\tReplicationFactor: {rf}\t"
                  f"Configs: {configs.get(info.name, '')}")
        for p in parts:
            line = (f"\tTopic: {info.name}\tPartition: {p.partition}\t"
                    f"Leader: {p.leader if p.leader >= 0 else 'none'}\t"
                    f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
            if p.offline_replicas:
                line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
            print(line)
    return status


def _topics_delete(client: KafkaClient, args: argparse.Namespace) -> int:
    names = comma_list(args.topic)
    results = client.delete_topics(names)
    status = 0
    for name in names:
        r = results.get(name)
        if r is None or r.error == ErrorCode.NONE:
            continue
        if r.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            continue
        if r.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            err(f"Error while executing topic command : Topic '{name}' does not exist as expected")
        else:
            err(f"Error while executing topic command : {r.error_message or r.error.name}")
        status = 1
    return status


def _topics_alter(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config and not args.replica_assignment:
        raise UsageError("--alter needs --partitions (and optionally --replica-assignment) or --config")
    status = 0
    names = comma_list(args.topic)
    if args.partitions is not None or args.replica_assignment:
        assignments = None
        if args.replica_assignment:
            # For --alter, kafka-topics.sh's assignment lists every partition; the new ones are at the end.
            full = replica_assignment(args.replica_assignment)
            count = args.partitions if args.partitions is not None else len(full)
            assignments = {}
            for n in names:
                current = len(client.topic(n).partitions)
                assignments[n] = [full[p] for p in range(current, count) if p in full]
        else:
            count = args.partitions
        results = client.create_partitions({n: count for n in names}, assignments=assignments,
                                           validate_only=args.validate_only)
        for name in names:
            r = results[name]
            if r.error != ErrorCode.NONE:
                err(f"Error while executing topic command : {r.error_message or r.error.name}")
                status = 1
    if args.config:
        configs = key_values(args.config, "--config")
        ops: list[tuple[str, int, str | None]] = [(k, AlterConfigOp.SET, v) for k, v in configs.items()]
        for name in names:
            status |= alter_configs(client, ConfigResourceType.TOPIC, name, ops, args.validate_only, quiet=True)
    return status


def build_parser() -> argparse.ArgumentParser:
    t = common.verb_parser(VERB, "Create, list, describe, delete or alter topics (kafka-topics.sh).")
    common.add_actions(t, ACTIONS)
    common.add_connection_options(t)
    t.add_argument("--topic", help="topic name (comma-separated for several)")
    t.add_argument("--partitions", type=int)
    t.add_argument("--replication-factor", type=int)
    t.add_argument("--replica-assignment", help="p0r1:p0r2,p1r1:p1r2,... broker ids")
    t.add_argument("--config", action="append", help="topic config key=value (repeatable)")
    t.add_argument("--if-not-exists", action="store_true")
    t.add_argument("--if-exists", action="store_true")
    t.add_argument("--exclude-internal", action="store_true")
    t.add_argument("--under-replicated-partitions", action="store_true")
    t.add_argument("--unavailable-partitions", action="store_true")
    t.add_argument("--validate-only", action="store_true", help="ask the broker to validate without changing")
    return t


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_topics)
