"""``sofakafka configs``: kafka-configs.sh over the wire protocol.

``describe`` (dynamic configs, or ``--all``) and ``alter`` (``--add-config k1=v1,k2=[a,b]``,
``--delete-config k1,k2``) of topics, brokers (``--entity-default``: the cluster-wide default) and broker
loggers, with Kafka 2.6's output lines; ``--entity-type users`` takes kafka-configs' SCRAM syntax (users.py). Alterations go through IncrementalAlterConfigs; a broker older than
2.3 gets AlterConfigs with the whole dynamic set, read first, as the tool of that age did.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sofakafka.cli import common, users
from sofakafka.cli.common import UsageError, err
from sofakafka.client import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResourceResult,
    ConfigResourceType,
    ConfigSource,
    KafkaClient,
    UnsupportedApiError,
)
from sofakafka.protocol.errors import ErrorCode, KafkaError

VERB = "configs"
SUMMARY = "describe or alter topic and broker configs (kafka-configs.sh)"
ACTIONS = ("describe", "alter")


def split_config_list(text: str) -> list[str]:
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


_ENTITY_TYPES = {"topics": ConfigResourceType.TOPIC, "brokers": ConfigResourceType.BROKER,
                 "broker-loggers": ConfigResourceType.BROKER_LOGGER}
_ENTITY_WORD = {ConfigResourceType.TOPIC: "topic", ConfigResourceType.BROKER: "broker",
                ConfigResourceType.BROKER_LOGGER: "broker-logger"}


def shown_value(entry: ConfigEntry) -> str:
    return "null" if entry.is_sensitive or entry.value is None else entry.value


def _source_name(source: int) -> str:
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN"


def run_configs(args: argparse.Namespace) -> int:
    action = common.chosen_action(args, ACTIONS)
    if args.entity_type == "users":
        with common.client(args, VERB) as client:
            return users.configs_users(client, action, args.entity_name,
                                       split_config_list(",".join(args.add_config or [])),
                                       common.comma_list(",".join(args.delete_config or [])))
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
    with common.client(args, VERB) as client:
        if action == "describe":
            return _configs_describe(client, rtype, names, args.all)
        if names is None:
            raise UsageError("--alter needs --entity-name or --entity-default")
        ops: list[tuple[str, int, str | None]] = []
        for item in split_config_list(",".join(args.add_config or [])):
            key, sep, value = item.partition("=")
            if not sep:
                raise UsageError(f"--add-config entries must be key=value, got {item!r}")
            ops.append((key.strip(), AlterConfigOp.SET, value))
        for key in ",".join(args.delete_config or []).split(","):
            if key.strip():
                ops.append((key.strip(), AlterConfigOp.DELETE, None))
        if not ops:
            raise UsageError("--alter needs --add-config or --delete-config")
        return alter_configs(client, rtype, names[0], ops, False, quiet=False)


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
            err(f"Error while executing config command : {r.error_message or r.error.name}")
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
        print(f"  {e.name}={shown_value(e)} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")


def alter_configs(client: KafkaClient, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
                   validate_only: bool, *, quiet: bool) -> int:
    try:
        results = client.incremental_alter_configs({(rtype, name): ops}, validate_only=validate_only)
    except UnsupportedApiError:
        results = _legacy_alter(client, rtype, name, ops, validate_only)
    status = 0
    for r in results:
        if r.error != ErrorCode.NONE:
            err(f"Error while executing config command : {r.error_message or r.error.name}")
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


def build_parser() -> argparse.ArgumentParser:
    c = common.verb_parser(VERB, "Describe or alter topic and broker configs (kafka-configs.sh).")
    common.add_actions(c, ACTIONS)
    common.add_connection_options(c)
    c.add_argument("--entity-type", required=True,
                   help="topics, brokers, broker-loggers or users (SCRAM credentials, see `sofakafka users`)")
    c.add_argument("--entity-name")
    c.add_argument("--entity-default", action="store_true", help="the cluster-wide default broker configs")
    c.add_argument("--add-config", action="append", help="k1=v1,k2=[v1,v2],...")
    c.add_argument("--delete-config", action="append", help="k1,k2,...")
    c.add_argument("--all", action="store_true", help="describe every config, not only dynamic ones")
    return c


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_configs)
