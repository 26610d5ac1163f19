"""The console verbs of `sofakafka`: topics, configs, produce, consume, groups (in cli_groups.py), users and
acls (in cli_security.py). Every verb takes ``--command-config`` for a TLS/SASL listener.

They mirror Kafka's own tools (kafka-topics.sh, kafka-configs.sh, kafka-console-producer.sh,
kafka-console-consumer.sh): the same option names and the same output lines, so scripts and habits written
for Kafka carry over. Every verb speaks the Kafka protocol to ``--bootstrap-server`` through
:mod:`sofakafka.client`; nothing here touches a data dir.

Exit codes: 0 success, 1 a request failed (the broker's error is printed to stderr), 2 bad usage.
``cli.py`` delegates to :func:`main` when the first argument is one of :data:`VERBS`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

from sofakafka import cli_groups, cli_security
from sofakafka.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AlterConfigOp,
    ClientError,
    ConfigEntry,
    ConfigResourceResult,
    ConfigResourceType,
    ConfigSource,
    KafkaClient,
    NewTopic,
    TopicInfo,
    UnsupportedApiError,
    partition_for_key,
)
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.records import CompressionType, Record

VERBS = ("topics", "configs", "produce", "consume", "groups", "users", "acls")

_COMPRESSION = {
    "none": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


class UsageError(Exception):
    """A bad combination of options: reported like argparse's own errors, exit code 2."""


# -- option parsing helpers ---------------------------------------------------------------------------


def _key_values(items: Sequence[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what} must be key=value, got {item!r}")
        out[key.strip()] = value
    return out


def _split_config_list(text: str) -> list[str]:
    """kafka-configs.sh syntax: ``k1=v1,k2=[a,b,c],k3=v3``: commas inside square brackets belong to the value
    (list-valued configs), the brackets themselves are dropped."""
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
            continue
        if ch == "]":
            depth -= 1
            continue
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(ch)
    if depth != 0:
        raise UsageError(f"unbalanced brackets in {text!r}")
    items.append("".join(current))
    return [i for i in items if i.strip()]


def _replica_assignment(text: str) -> dict[int, list[int]]:
    """kafka-topics.sh syntax: partitions separated by commas, a partition's replicas by colons."""
    out: dict[int, list[int]] = {}
    for p, part in enumerate(text.split(",")):
        try:
            out[p] = [int(b) for b in part.strip().split(":")]
        except ValueError:
            raise UsageError(f"bad --replica-assignment {text!r}: broker ids must be integers") from None
    return out


def _client(args: argparse.Namespace) -> KafkaClient:
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    return KafkaClient(args.bootstrap_server, client_id=f"sofakafka-{args.verb}",
                       request_timeout_ms=args.request_timeout_ms,
                       security=cli_security.command_config_security(args.command_config))


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", help="host:port[,host:port...] of the brokers to connect to")
    p.add_argument("--request-timeout-ms", type=int, default=30_000, help="deadline of every request")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties for TLS/SASL: security.protocol, sasl.mechanism, sasl.jaas.config, "
                        "ssl.truststore.location, ... (Kafka's names; librdkafka's sasl.username, ssl.ca.location "
                        "too)")


def _err(text: str) -> None:
    print(text, file=sys.stderr)


# -- topics -------------------------------------------------------------------------------------------


def _topics(args: argparse.Namespace) -> int:
    actions = [a for a in ("create", "list", "describe", "delete", "alter") if getattr(args, a)]
    if args.action:
        actions.append(args.action)
    actions = list(dict.fromkeys(actions))
    if len(actions) != 1:
        raise UsageError("exactly one of create, list, describe, delete, alter is required")
    action = actions[0]
    if action in ("create", "delete", "alter") and not args.topic:
        raise UsageError(f"--topic is required to {action} a topic")
    with _client(args) as client:
        if action == "create":
            return _topics_create(client, args)
        if action == "list":
            return _topics_list(client, args)
        if action == "describe":
            return _topics_describe(client, args)
        if action == "delete":
            return _topics_delete(client, args)
        return _topics_alter(client, args)


def _topic_names(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _topics_create(client: KafkaClient, args: argparse.Namespace) -> int:
    configs: dict[str, str | None] = dict(_key_values(args.config or [], "--config"))
    assignment = _replica_assignment(args.replica_assignment) if args.replica_assignment else None
    if assignment and (args.partitions is not None or args.replication_factor is not None):
        raise UsageError("--replica-assignment cannot be combined with --partitions or --replication-factor")
    status = 0
    for name in _topic_names(args.topic):
        topic = NewTopic(name, num_partitions=-1 if args.partitions is None else args.partitions,
                         replication_factor=-1 if args.replication_factor is None else args.replication_factor,
                         assignments=assignment, configs=configs)
        result = client.create_topics([topic], validate_only=args.validate_only)[name]
        if result.error == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            continue
        if result.error != ErrorCode.NONE:
            _err(f"Error while executing topic command : {result.error_message or result.error.name}")
            status = 1
            continue
        print(f"Created topic {name}." if not args.validate_only else f"Topic {name} is valid.")
    return status


def _topics_list(client: KafkaClient, args: argparse.Namespace) -> int:
    cluster = client.metadata()
    wanted = set(_topic_names(args.topic))
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
            f"{e.name}={_shown_value(e)}" for e in r.entries if e.config_source != ConfigSource.DEFAULT_CONFIG)
    return out


def _topics_describe(client: KafkaClient, args: argparse.Namespace) -> int:
    names = _topic_names(args.topic)
    cluster = client.metadata(names or None)
    status = 0
    infos: list[TopicInfo] = []
    for name in names or sorted(cluster.topics):
        info = cluster.topics.get(name)
        if info is None or info.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            _err(f"Error while executing topic command : Topic '{name}' does not exist as expected")
            status = 1
            continue
        if info.error != ErrorCode.NONE:
            _err(f"Error while executing topic command : {name}: {info.error.name}")
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
    names = _topic_names(args.topic)
    results = client.delete_topics(names)
    status = 0
    for name in names:
        r = results.get(name)
        if r is None or r.error == ErrorCode.NONE:
            continue
        if r.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            continue
        if r.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            _err(f"Error while executing topic command : Topic '{name}' does not exist as expected")
        else:
            _err(f"Error while executing topic command : {r.error_message or r.error.name}")
        status = 1
    return status


def _topics_alter(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config and not args.replica_assignment:
        raise UsageError("--alter needs --partitions (and optionally --replica-assignment) or --config")
    status = 0
    names = _topic_names(args.topic)
    if args.partitions is not None or args.replica_assignment:
        assignments = None
        if args.replica_assignment:
            # For --alter, kafka-topics.sh's assignment lists every partition; the new ones are at the end.
            full = _replica_assignment(args.replica_assignment)
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
                _err(f"Error while executing topic command : {r.error_message or r.error.name}")
                status = 1
    if args.config:
        configs = _key_values(args.config, "--config")
        ops: list[tuple[str, int, str | None]] = [(k, AlterConfigOp.SET, v) for k, v in configs.items()]
        for name in names:
            status |= _alter_configs(client, ConfigResourceType.TOPIC, name, ops, args.validate_only, quiet=True)
    return status


# -- configs ------------------------------------------------------------------------------------------

_ENTITY_TYPES = {"topics": ConfigResourceType.TOPIC, "brokers": ConfigResourceType.BROKER,
                 "broker-loggers": ConfigResourceType.BROKER_LOGGER}
_ENTITY_WORD = {ConfigResourceType.TOPIC: "topic", ConfigResourceType.BROKER: "broker",
                ConfigResourceType.BROKER_LOGGER: "broker-logger"}


def _shown_value(entry: ConfigEntry) -> str:
    return "null" if entry.is_sensitive or entry.value is None else entry.value


def _source_name(source: int) -> str:
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN"


def _configs(args: argparse.Namespace) -> int:
    actions = [a for a in ("describe", "alter") if getattr(args, a)]
    if args.action:
        actions.append(args.action)
    actions = list(dict.fromkeys(actions))
    if len(actions) != 1:
        raise UsageError("exactly one of describe, alter is required")
    if args.entity_type == "users":
        with _client(args) as client:
            adds = _split_config_list(",".join(args.add_config or []))
            deletes = [k.strip() for k in ",".join(args.delete_config or []).split(",") if k.strip()]
            return cli_security.configs_users(client, actions[0], args.entity_name, adds, deletes)
    if args.entity_type not in _ENTITY_TYPES:
        raise UsageError(f"--entity-type must be one of {', '.join(_ENTITY_TYPES)}, users")
    rtype = _ENTITY_TYPES[args.entity_type]
    if args.entity_default and rtype != ConfigResourceType.BROKER:
        raise UsageError("--entity-default applies to brokers only")
    names: list[str] | None
    if args.entity_default:
        names = [""]
    elif args.entity_name:
        names = [args.entity_name]
    else:
        names = None
    with _client(args) as client:
        if actions[0] == "describe":
            return _configs_describe(client, rtype, names, args.all)
        if names is None:
            raise UsageError("--alter needs --entity-name or --entity-default")
        ops: list[tuple[str, int, str | None]] = []
        for item in _split_config_list(",".join(args.add_config or [])):
            key, sep, value = item.partition("=")
            if not sep:
                raise UsageError(f"--add-config entries must be key=value, got {item!r}")
            ops.append((key.strip(), AlterConfigOp.SET, value))
        for key in ",".join(args.delete_config or []).split(","):
            if key.strip():
                ops.append((key.strip(), AlterConfigOp.DELETE, None))
        if not ops:
            raise UsageError("--alter needs --add-config or --delete-config")
        return _alter_configs(client, rtype, names[0], ops, False, quiet=False)


def _configs_describe(client: KafkaClient, rtype: int, names: list[str] | None, show_all: bool) -> int:
    if names is None:
        cluster = client.metadata()
        if rtype == ConfigResourceType.TOPIC:
            names = sorted(cluster.topics)
        else:
            names = [str(b) for b in sorted(cluster.brokers)]
    results = client.describe_configs([(rtype, n, None) for n in names], include_synonyms=True)
    by_name = {r.resource_name: r for r in results}
    status = 0
    for name in names:
        r = by_name.get(name)
        if r is None:
            continue
        if r.error != ErrorCode.NONE:
            _err(f"Error while executing config command : {r.error_message or r.error.name}")
            status = 1
            continue
        _print_config_resource(rtype, name, r, show_all)
    return status


def _dynamic_source(rtype: int, name: str) -> set[int]:
    if rtype == ConfigResourceType.TOPIC:
        return {ConfigSource.DYNAMIC_TOPIC_CONFIG}
    if rtype == ConfigResourceType.BROKER_LOGGER:
        return {ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG}
    if name == "":
        return {ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG}
    return {ConfigSource.DYNAMIC_BROKER_CONFIG}


def _print_config_resource(rtype: int, name: str, result: ConfigResourceResult, show_all: bool) -> None:
    word = _ENTITY_WORD[ConfigResourceType(rtype)]
    if name == "" and rtype == ConfigResourceType.BROKER:
        print("Default configs for brokers in the cluster are:" if not show_all
              else "All configs for brokers in the cluster are:")
    else:
        print(f"{'All' if show_all else 'Dynamic'} configs for {word} {name} are:")
    dynamic = _dynamic_source(rtype, name)
    for e in sorted(result.entries, key=lambda e: e.name):
        if not show_all and e.config_source not in dynamic:
            continue
        synonyms = ", ".join(
            f"{_source_name(s.source)}:{s.name}={'null' if e.is_sensitive or s.value is None else s.value}"
            for s in e.synonyms)
        print(f"  {e.name}={_shown_value(e)} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")


def _alter_configs(client: KafkaClient, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
                   validate_only: bool, *, quiet: bool) -> int:
    try:
        results = client.incremental_alter_configs({(rtype, name): ops}, validate_only=validate_only)
    except UnsupportedApiError:
        results = _legacy_alter(client, rtype, name, ops, validate_only)
    status = 0
    for r in results:
        if r.error != ErrorCode.NONE:
            _err(f"Error while executing config command : {r.error_message or r.error.name}")
            status = 1
        elif not quiet:
            what = ("default config for brokers in the cluster" if name == "" and rtype == ConfigResourceType.BROKER
                    else f"config for {_ENTITY_WORD[ConfigResourceType(rtype)]} {name}")
            print(f"Completed updating {what}.")
    return status


def _legacy_alter(client: KafkaClient, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
                  validate_only: bool) -> list[ConfigResourceResult]:
    """Brokers before 2.3 lack IncrementalAlterConfigs; AlterConfigs replaces the whole dynamic set, so
    read it first and apply the operations to it, as kafka-configs.sh did then."""
    current = client.describe_configs([(rtype, name, None)])[0]
    current.raise_for_error()
    dynamic = _dynamic_source(rtype, name)
    configs: dict[str, str | None] = {e.name: e.value for e in current.entries
                                      if e.config_source in dynamic and not e.is_sensitive}
    for key, op, value in ops:
        if op == AlterConfigOp.SET:
            configs[key] = value
        elif op == AlterConfigOp.DELETE:
            configs.pop(key, None)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "APPEND/SUBTRACT need IncrementalAlterConfigs")
    return client.alter_configs({(rtype, name): configs}, validate_only=validate_only)


# -- produce ------------------------------------------------------------------------------------------


# Bytes of record data per produce request: under the default max.message.bytes (1 MB) even uncompressed,
# so a batch of many small lines is never refused as a whole.
_MAX_REQUEST_BYTES = 512 * 1024


def _unescape(text: str) -> str:
    """Separators given on a command line arrive with backslash escapes (``\\t``) spelled out."""
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


def _read_lines(stream: TextIO) -> Iterator[str]:
    for line in stream:
        yield line[:-1] if line.endswith("\n") else line


def _produce(args: argparse.Namespace) -> int:
    props = _key_values(args.property or [], "--property")
    parse_key = props.get("parse.key", "false").lower() == "true"
    separator = _unescape(props.get("key.separator", "\t"))
    ignore_error = props.get("ignore.error", "false").lower() == "true"
    if args.compression_type not in _COMPRESSION:
        raise UsageError(f"--compression-type must be one of {', '.join(_COMPRESSION)}")
    compression = _COMPRESSION[args.compression_type]
    acks = int(args.acks) if args.acks != "all" else -1
    interactive = sys.stdin.isatty()
    status = 0
    with _client(args) as client:
        info = client.topic(args.topic, allow_auto_topic_creation=True)
        num_partitions = len(info.partitions)
        pending: dict[int, list[Record]] = {}
        pending_records = pending_bytes = 0
        count = 0
        round_robin = 0

        def flush() -> None:
            nonlocal status, pending_records, pending_bytes
            for partition, records in pending.items():
                try:
                    client.produce(args.topic, partition, records, acks=acks, compression=compression,
                                   timeout_ms=args.request_timeout_ms)
                except KafkaError as e:
                    _err(f"ERROR when sending message to topic {args.topic} with partition {partition}: {e}")
                    status = 1
            pending.clear()
            pending_records = pending_bytes = 0

        for line in _read_lines(sys.stdin):
            key: bytes | None = None
            value = line
            if parse_key:
                k, sep, v = line.partition(separator)
                if not sep:
                    message = f"No key separator found on line {count + 1}: {line}"
                    if not ignore_error:
                        flush()
                        _err(message)
                        return 1
                    _err(message)
                    continue
                key, value = k.encode("utf-8"), v
            if args.partition is not None:
                partition = args.partition
            elif key is not None:
                partition = partition_for_key(key, num_partitions)
            else:
                # Keyless records fill one batch per partition in turn (Kafka 2.4+'s sticky idea).
                partition = round_robin % num_partitions
            data = value.encode("utf-8")
            pending.setdefault(partition, []).append(Record(0, int(time.time() * 1000), key, data))
            count += 1
            pending_records += 1
            pending_bytes += len(data) + len(key or b"")
            if interactive or pending_records >= args.batch_size or pending_bytes >= _MAX_REQUEST_BYTES:
                flush()
                round_robin += 1
        flush()
    return status


# -- consume ------------------------------------------------------------------------------------------


def _consume(args: argparse.Namespace) -> int:
    props = _key_values(args.property or [], "--property")

    def flag(name: str) -> bool:
        return props.get(name, "false").lower() == "true"

    print_key, print_ts, print_part, print_off, print_headers = (
        flag("print.key"), flag("print.timestamp"), flag("print.partition"), flag("print.offset"),
        flag("print.headers"))
    key_sep = _unescape(props.get("key.separator", "\t"))
    line_sep = _unescape(props.get("line.separator", "\n"))
    headers_sep = _unescape(props.get("headers.separator", ","))
    null_literal = props.get("null.literal", "null")
    if args.offset is not None and args.partition is None:
        raise UsageError("--offset requires --partition")
    if args.offset is not None and args.from_beginning:
        raise UsageError("--from-beginning cannot be combined with --offset")

    def text(b: bytes | None) -> str:
        return null_literal if b is None else b.decode("utf-8", errors="replace")

    out = sys.stdout
    consumed = 0
    status = 0
    try:
        with _client(args) as client:
            info = client.topic(args.topic)
            partitions = [args.partition] if args.partition is not None else sorted(info.partitions)
            if args.partition is not None and args.partition not in info.partitions:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{args.topic} has no partition {args.partition}")
            positions = _start_offsets(client, args, partitions)
            last_data = time.monotonic()
            while args.max_messages is None or consumed < args.max_messages:
                wait = 500
                if args.timeout_ms is not None:
                    left = args.timeout_ms - (time.monotonic() - last_data) * 1000
                    if left <= 0:
                        break
                    wait = max(0, min(wait, int(left)))
                results = client.fetch_many(args.topic, positions, max_wait_ms=wait)
                for partition in sorted(results):
                    result = results[partition]
                    if isinstance(result, KafkaError):
                        if result.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                            # Kafka's console consumer resets with auto.offset.reset; ours follows --from-beginning.
                            reset = EARLIEST_TIMESTAMP if args.from_beginning else LATEST_TIMESTAMP
                            found = client.list_offsets(args.topic, {partition: reset})
                            positions[partition] = found[partition].offset
                        elif not result.retriable:
                            raise result
                        else:
                            time.sleep(client.retry_backoff_s)  # a leader moving: let the metadata catch up
                        continue
                    positions[partition] = result.next_offset
                    if result.records:
                        last_data = time.monotonic()
                    for record in result.records:
                        if args.max_messages is not None and consumed >= args.max_messages:
                            break
                        parts: list[str] = []
                        if print_ts:
                            parts.append(f"CreateTime:{record.timestamp}" if record.timestamp >= 0 else "NO_TIMESTAMP")
                        if print_part:
                            parts.append(f"Partition:{partition}")
                        if print_off:
                            parts.append(f"Offset:{record.offset}")
                        if print_headers:
                            parts.append(headers_sep.join(f"{k}:{text(v)}" for k, v in record.headers) or "NO_HEADERS")
                        if print_key:
                            parts.append(text(record.key))
                        parts.append(text(record.value))
                        out.write(key_sep.join(parts) + line_sep)
                        consumed += 1
                out.flush()
    except KeyboardInterrupt:
        # Ctrl-C is how a console consumer without --max-messages ends; the total still matters.
        status = 130
    _err(f"Processed a total of {consumed} messages")
    return status


def _start_offsets(client: KafkaClient, args: argparse.Namespace, partitions: list[int]) -> dict[int, int]:
    if args.offset is not None:
        where = str(args.offset).lower()
        if where == "earliest":
            ts = EARLIEST_TIMESTAMP
        elif where == "latest":
            ts = LATEST_TIMESTAMP
        else:
            try:
                return {partitions[0]: int(where)}
            except ValueError:
                raise UsageError("--offset must be earliest, latest or a number") from None
    else:
        ts = EARLIEST_TIMESTAMP if args.from_beginning else LATEST_TIMESTAMP
    found = client.list_offsets(args.topic, {p: ts for p in partitions})
    return {p: found[p].offset for p in partitions}


# -- parser -------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sofakafka", description="Kafka console tools over the wire protocol.")
    sub = parser.add_subparsers(dest="verb", required=True)

    t = sub.add_parser("topics", help="create, list, describe, delete or alter topics (kafka-topics.sh)")
    t.add_argument("action", nargs="?", choices=("create", "list", "describe", "delete", "alter"))
    for a in ("create", "list", "describe", "delete", "alter"):
        t.add_argument(f"--{a}", action="store_true", help=argparse.SUPPRESS)
    _add_common(t)
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
    t.set_defaults(run=_topics)

    c = sub.add_parser("configs", help="describe or alter topic and broker configs (kafka-configs.sh)")
    c.add_argument("action", nargs="?", choices=("describe", "alter"))
    for a in ("describe", "alter"):
        c.add_argument(f"--{a}", action="store_true", help=argparse.SUPPRESS)
    _add_common(c)
    c.add_argument("--entity-type", required=True, help="topics, brokers, broker-loggers or users (SCRAM credentials)")
    c.add_argument("--entity-name")
    c.add_argument("--entity-default", action="store_true", help="the cluster-wide default broker configs")
    c.add_argument("--add-config", action="append", help="k1=v1,k2=[v1,v2],...")
    c.add_argument("--delete-config", action="append", help="k1,k2,...")
    c.add_argument("--all", action="store_true", help="describe every config, not only dynamic ones")
    c.set_defaults(run=_configs)

    p = sub.add_parser("produce", help="records from stdin, one per line (kafka-console-producer.sh)")
    _add_common(p)
    p.add_argument("--broker-list", dest="bootstrap_server", help=argparse.SUPPRESS)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", help="parse.key=true, key.separator=..., ignore.error=true")
    p.add_argument("--acks", "--request-required-acks", default="1", choices=("0", "1", "-1", "all"))
    p.add_argument("--compression-type", "--compression-codec", default="none")
    p.add_argument("--partition", type=int, help="send every record to this partition")
    p.add_argument("--batch-size", type=int, default=500, help="records per produce request")
    p.set_defaults(run=_produce)

    k = sub.add_parser("consume", help="print records (kafka-console-consumer.sh)")
    _add_common(k)
    k.add_argument("--topic", required=True)
    k.add_argument("--from-beginning", action="store_true")
    k.add_argument("--partition", type=int)
    k.add_argument("--offset", help="earliest, latest or an offset (needs --partition)")
    k.add_argument("--max-messages", type=int)
    k.add_argument("--timeout-ms", type=int, help="exit when no record arrived for this long")
    k.add_argument("--property", action="append",
                   help="print.key, print.timestamp, print.partition, print.offset, print.headers, "
                        "key.separator, line.separator, null.literal")
    k.set_defaults(run=_consume)

    cli_groups.add_parser(sub, _add_common)
    cli_security.add_parsers(sub, _add_common, _client)
    return parser


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except (UsageError, cli_groups.GroupsUsageError, cli_security.SecurityUsageError) as e:
        _err(f"sofakafka {args.verb}: error: {e}")
        return 2
    except KafkaError as e:
        _err(f"Error: {e.code.name}" + (f": {e.message}" if e.message else ""))
        return 1
    except ClientError as e:
        _err(f"Error: {e}")
        return 1
    except BrokenPipeError:
        # `sofakafka consume ... | head` closes our stdout early; that is the reader's choice, not an error.
        return 0
    except KeyboardInterrupt:
        return 130
