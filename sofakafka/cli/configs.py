"""``sofakafka configs``: kafka-configs.sh over the wire protocol.

``describe`` (dynamic configs, or ``--all``) and ``alter`` (``--add-config k1=v1,k2=[a,b]``,
``--delete-config k1,k2``) of topics, brokers (``--entity-default``: the cluster-wide default) and broker
loggers, with Kafka 2.6's output lines; ``--entity-type users`` takes kafka-configs' SCRAM syntax (users.py), and
``--entity-type users``/``clients`` (alone or both) take client quota keys (quotas.py, through AlterClientQuotas). Alterations go through IncrementalAlterConfigs; a broker older than
2.3 gets AlterConfigs with the whole dynamic set, read first, as the tool of that age did.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sofakafka.cli import common, quotas, users
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
from sofakafka.security.quotas import QUOTA_KEYS

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
    types: list[str] = args.entity_type
    names: list[str | None] = args.entity_names or []
    add = split_config_list(",".join(args.add_config or []))
    delete = common.comma_list(",".join(args.delete_config or []))
    if len(names) > len(types):
        raise UsageError("more --entity-name/--entity-default than --entity-type")
    if "clients" in types or len(types) > 1:
        if sorted(types) not in (["clients"], ["clients", "users"]):
            raise UsageError("only users and clients combine (--entity-type users --entity-type clients)")
        with common.client(args, VERB) as client:
            return quotas.configs_quotas(client, action, types, names, add, delete)
    (entity_type,) = types
    name = names[0] if names else None
    if entity_type == "users":
        quota_add = [i for i in add if i.partition("=")[0].strip() in QUOTA_KEYS]
        quota_delete = [k for k in delete if k in QUOTA_KEYS]
        scram_add = [i for i in add if i not in quota_add]
        scram_delete = [k for k in delete if k not in quota_delete]
        default_user = bool(names) and names[0] is None
        with common.client(args, VERB) as client:
            if action == "describe":
                # SCRAM lines for users with credentials, then quota lines; a user with neither gets kafka-configs'
                # empty SCRAM line.
                scram = [] if default_user else users.describe_users(client, name)
                quota_lines = quotas.configs_describe_lines(client, types, names)
                users.print_users([r for r in scram if r.entries] if quota_lines else scram)
                for line in quota_lines:
                    print(line)
                return 0
            code = 0
            if scram_add or scram_delete or not (quota_add or quota_delete):
                if default_user:
                    raise UsageError("SCRAM credentials belong to a named user, not --entity-default")
                code = users.configs_users(client, action, name, scram_add, scram_delete)
            if code == 0 and (quota_add or quota_delete):
                code = quotas.configs_quotas(client, action, types, names, quota_add, quota_delete)
            return code
    if entity_type not in _ENTITY_TYPES:
        raise UsageError(f"--entity-type must be one of {', '.join(_ENTITY_TYPES)}, users, clients")
    rtype = _ENTITY_TYPES[entity_type]
    entity_default = bool(names) and names[0] is None
    if entity_default and rtype != ConfigResourceType.BROKER:
        raise UsageError("--entity-default applies to brokers only")
    resource_names: list[str] | None
    if entity_default:
        resource_names = [""]
    elif name:
        resource_names = [name]
    else:
        resource_names = None
    with common.client(args, VERB) as client:
        if action == "describe":
            return _configs_describe(client, rtype, resource_names, args.all)
        if resource_names is None:
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
        return alter_configs(client, rtype, resource_names[0], ops, False, quiet=False)


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
    c.add_argument("--entity-type", required=True, action="append",
                   help="topics, brokers, broker-loggers, users (SCRAM credentials and quotas) or clients (quotas); "
                        "users and clients may be given both, for a user's quota for one client id")
    c.add_argument("--entity-name", dest="entity_names", action="append",
                   help="the entity of the --entity-type in the same position")
    c.add_argument("--entity-default", dest="entity_names", action="append_const", const=None,
                   help="the default entity of the --entity-type in the same position (brokers: the cluster-wide "
                        "default configs; users, clients: the default quota entity)")
    c.add_argument("--add-config", action="append", help="k1=v1,k2=[v1,v2],...")
    c.add_argument("--delete-config", action="append", help="k1,k2,...")
    c.add_argument("--all", action="store_true", help="describe every config, not only dynamic ones")
    return c


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_configs)
