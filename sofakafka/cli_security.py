"""`sofakafka users` (SCRAM credentials, like kafka-configs --entity-type users) and `sofakafka acls`
(like kafka-acls.sh), both over the Kafka protocol to ``--bootstrap-server``.

users
    ``users add NAME --password P [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N]`` derives the
    credential here (scramp; salt, stored key, server key: the password itself never leaves this process) and
    stores it through IncrementalAlterConfigs on sofakafka's user resource type (see
    sofakafka/broker/handlers/_scram_users.py: Kafka 2.6 has no SCRAM admin API). ``users delete NAME [--mechanism M]``
    removes one mechanism's credential, or every one the user has; ``users list [NAME]`` prints each user's
    mechanisms and iteration counts.
acls
    ``acls add|remove|list`` with kafka-acls.sh's options: ``--allow-principal``/``--deny-principal``,
    ``--allow-host``/``--deny-host`` (default ``*``), ``--operation`` (repeatable), one resource of
    ``--topic``/``--group``/``--cluster``/``--transactional-id``/``--delegation-token``,
    ``--resource-pattern-type`` (LITERAL, PREFIXED; ANY and MATCH for list/remove), the ``--producer``
    (WRITE, DESCRIBE, CREATE on topics; IDEMPOTENT_WRITE with ``--idempotent``) and ``--consumer`` (READ,
    DESCRIBE on topics, READ on the group) shortcuts, and ``--principal`` to filter a listing.

Both take ``--command-config`` (client properties: security.protocol, sasl.mechanism, sasl.jaas.config,
ssl.truststore.location, ...), like every verb.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from sofakafka.client import AlterConfigOp, ConfigResourceType, KafkaClient
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.security import SecurityConfigError
from sofakafka.security.acl import (
    CLUSTER_NAME,
    VALID_OPERATIONS,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from sofakafka.security.client import ClientSecurity
from sofakafka.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredentialError, make_credential


class SecurityUsageError(Exception):
    pass


def command_config_security(path: str | None) -> ClientSecurity | None:
    """``--command-config FILE``: client properties (Kafka's names, or librdkafka's) -> TLS/SASL settings.
    A problem is a SecurityUsageError naming the file and the key."""
    if not path:
        return None
    from sofakafka.broker.config import ConfigError, read_properties_file

    try:
        props = read_properties_file(path)
    except OSError as exc:
        raise SecurityUsageError(f"--command-config {path}: {exc.strerror or exc}") from None
    except ConfigError as exc:
        raise SecurityUsageError(f"--command-config {path}: {exc}") from None
    try:
        return ClientSecurity.from_properties(props)
    except SecurityConfigError as exc:
        raise SecurityUsageError(f"--command-config {path}: {exc}") from None


ClientFactory = Callable[[argparse.Namespace], KafkaClient]

# ------------------------------------------------------------------------------------------------- users


def _users(args: argparse.Namespace, client_for: ClientFactory) -> int:
    action = args.action
    with client_for(args) as client:
        if action == "add":
            if not args.name:
                raise SecurityUsageError("users add needs a user NAME")
            if args.password is None:
                raise SecurityUsageError("users add needs --password")
            mechanism = args.mechanism or "SCRAM-SHA-256"
            try:
                credential = make_credential(mechanism, args.password, iterations=args.iterations)
            except ScramCredentialError as exc:
                raise SecurityUsageError(str(exc)) from None
            result = client.incremental_alter_configs({(ConfigResourceType.USER, args.name): [
                (mechanism, AlterConfigOp.SET, credential.to_kafka_string())]})
            _raise_first(result)
            print(f"Completed updating config for user {args.name}.")
            return 0
        if action == "delete":
            if not args.name:
                raise SecurityUsageError("users delete needs a user NAME")
            mechanisms = [args.mechanism] if args.mechanism else _user_mechanisms(client, args.name)
            if not mechanisms:
                print(f"Error: user {args.name} has no SCRAM credentials", file=sys.stderr)
                return 1
            result = client.incremental_alter_configs({(ConfigResourceType.USER, args.name): [
                (m, AlterConfigOp.DELETE, None) for m in mechanisms]})
            _raise_first(result)
            print(f"Completed updating config for user {args.name}.")
            return 0
        results = client.describe_configs([(ConfigResourceType.USER, args.name or "", None)])
        _raise_first(results)
        for r in results:
            if not r.entries and args.name:
                print(f"SCRAM credential configs for user-principal '{r.resource_name}' are ")
                continue
            creds = ",".join(f"{e.name}={e.value}" for e in r.entries)
            print(f"SCRAM credential configs for user-principal '{r.resource_name}' are {creds}")
        return 0


def configs_users(client: KafkaClient, action: str, name: str | None, add: Sequence[str], delete: Sequence[str]) -> int:
    """``sofakafka configs --entity-type users``, kafka-configs.sh's SCRAM syntax:
    ``--add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`` and ``--delete-config SCRAM-SHA-256``.
    ``add`` holds the split items (``SCRAM-SHA-256=iterations=8192,password=...``: brackets already removed)."""
    if action == "describe":
        results = client.describe_configs([(ConfigResourceType.USER, name or "", None)])
        _raise_first(results)
        for r in results:
            creds = ",".join(f"{e.name}={e.value}" for e in r.entries)
            print(f"SCRAM credential configs for user-principal '{r.resource_name}' are {creds}")
        return 0
    if not name:
        raise SecurityUsageError("--alter of users needs --entity-name")
    ops: list[tuple[str, int, str | None]] = []
    for item in add:
        mechanism, sep, value = item.partition("=")
        if not sep or mechanism.strip() not in MECHANISMS:
            raise SecurityUsageError(f"users take {' or '.join(MECHANISMS)}=[iterations=N,password=P], got {item!r}")
        fields = dict(part.partition("=")[::2] for part in value.split(","))
        if "password" not in fields:
            raise SecurityUsageError(f"{mechanism.strip()} needs password=...")
        try:
            iterations = int(fields.get("iterations", MIN_ITERATIONS))
            credential = make_credential(mechanism.strip(), fields["password"], iterations=iterations)
        except (ValueError, ScramCredentialError) as exc:
            raise SecurityUsageError(f"{mechanism.strip()}: {exc}") from None
        ops.append((mechanism.strip(), AlterConfigOp.SET, credential.to_kafka_string()))
    ops += [(key, AlterConfigOp.DELETE, None) for key in delete]
    if not ops:
        raise SecurityUsageError("--alter needs --add-config or --delete-config")
    _raise_first(client.incremental_alter_configs({(ConfigResourceType.USER, name): ops}))
    print(f"Completed updating config for user {name}.")
    return 0


def _user_mechanisms(client: KafkaClient, name: str) -> list[str]:
    results = client.describe_configs([(ConfigResourceType.USER, name, None)])
    _raise_first(results)
    return [e.name for r in results for e in r.entries]


def _raise_first(results: Sequence[object]) -> None:
    for r in results:
        error = getattr(r, "error", ErrorCode.NONE)
        if error != ErrorCode.NONE:
            raise KafkaError(error, getattr(r, "error_message", None))


# -------------------------------------------------------------------------------------------------- acls

_RESOURCE_OPTIONS = (("topic", ResourceType.TOPIC), ("group", ResourceType.GROUP),
                     ("transactional_id", ResourceType.TRANSACTIONAL_ID),
                     ("delegation_token", ResourceType.DELEGATION_TOKEN))


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out: list[tuple[ResourceType, str]] = []
    for attr, rtype in _RESOURCE_OPTIONS:
        for name in getattr(args, attr) or []:
            out.append((rtype, name))
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _pattern_type(args: argparse.Namespace, *, filtering: bool) -> PatternType:
    text = (args.resource_pattern_type or "LITERAL").upper()
    try:
        ptype = PatternType(PatternType.from_name(text))
    except ValueError:
        raise SecurityUsageError(f"--resource-pattern-type must be LITERAL, PREFIXED, ANY or MATCH, got {text}") from None
    if not filtering and ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise SecurityUsageError("acls add takes --resource-pattern-type LITERAL or PREFIXED")
    if ptype == PatternType.UNKNOWN:
        raise SecurityUsageError("--resource-pattern-type UNKNOWN is not allowed")
    return ptype


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    ops: list[AclOperation] = []
    for text in args.operation or []:
        try:
            op = AclOperation(AclOperation.from_name(text))
        except ValueError:
            raise SecurityUsageError(f"unknown --operation {text}") from None
        if op in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise SecurityUsageError(f"--operation {text} is not allowed here")
        ops.append(op)
    return ops


def _entries(args: argparse.Namespace, ops: Sequence[AclOperation]) -> list[AccessControlEntry]:
    allow_hosts = args.allow_host or ["*"]
    deny_hosts = args.deny_host or ["*"]
    out: list[AccessControlEntry] = []
    for principal in args.allow_principal or []:
        out += [AccessControlEntry(principal, h, op, AclPermissionType.ALLOW) for h in allow_hosts for op in ops]
    for principal in args.deny_principal or []:
        out += [AccessControlEntry(principal, h, op, AclPermissionType.DENY) for h in deny_hosts for op in ops]
    for e in out:
        if ":" not in e.principal:
            raise SecurityUsageError(f"principal {e.principal!r} must be Type:name, e.g. User:alice")
    return out


def _bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    resources = _resources(args)
    ptype = _pattern_type(args, filtering=False)
    ops = _operations(args)
    bindings: list[AclBinding] = []
    if args.producer or args.consumer:
        topics = [n for t, n in resources if t == ResourceType.TOPIC]
        if not topics:
            raise SecurityUsageError("--producer and --consumer need --topic")
        per_resource: list[tuple[ResourceType, str, list[AclOperation]]] = []
        if args.producer:
            per_resource += [(ResourceType.TOPIC, t, [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE])
                             for t in topics]
            if args.idempotent:
                per_resource.append((ResourceType.CLUSTER, CLUSTER_NAME, [AclOperation.IDEMPOTENT_WRITE]))
            per_resource += [(ResourceType.TRANSACTIONAL_ID, n, [AclOperation.WRITE, AclOperation.DESCRIBE])
                             for t, n in resources if t == ResourceType.TRANSACTIONAL_ID]
        if args.consumer:
            groups = [n for t, n in resources if t == ResourceType.GROUP]
            if not groups:
                raise SecurityUsageError("--consumer needs --group")
            per_resource += [(ResourceType.TOPIC, t, [AclOperation.READ, AclOperation.DESCRIBE]) for t in topics]
            per_resource += [(ResourceType.GROUP, g, [AclOperation.READ]) for g in groups]
        for rtype, name, rops in per_resource:
            p = ptype if rtype != ResourceType.CLUSTER else PatternType.LITERAL
            bindings += [AclBinding(ResourcePattern(rtype, name, p), e) for e in _entries(args, rops)]
        return bindings
    if not resources:
        raise SecurityUsageError("name a resource: --topic, --group, --cluster, --transactional-id or "
                                 "--delegation-token")
    if not ops:
        raise SecurityUsageError("acls add needs --operation (or --producer / --consumer)")
    entries = _entries(args, ops)
    if not entries:
        raise SecurityUsageError("acls add needs --allow-principal or --deny-principal")
    for rtype, name in resources:
        for op in ops:
            if op not in VALID_OPERATIONS[rtype]:
                allowed = ", ".join(sorted(o.pascal for o in VALID_OPERATIONS[rtype]))
                raise SecurityUsageError(f"ResourceType {rtype.pascal} only supports operations {allowed}")
        bindings += [AclBinding(ResourcePattern(rtype, name, ptype), e) for e in entries]
    return bindings


def _filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    resources: list[tuple[ResourceType, str | None]] = list(_resources(args))
    if not resources:
        resources = [(ResourceType.ANY, None)]
    ptype = _pattern_type(args, filtering=True)
    if args.resource_pattern_type is None:
        ptype = PatternType.ANY if args.action == "list" else PatternType.LITERAL
    principals: list[str | None] = list(args.principal or args.allow_principal or args.deny_principal or []) or [None]
    ops = _operations(args) or [AclOperation.ANY]
    out: list[AclBindingFilter] = []
    for rtype, name in resources:
        for principal in principals:
            for op in ops:
                out.append(AclBindingFilter(ResourcePatternFilter(rtype, name, ptype),
                                            AccessControlEntryFilter(principal, None, op, AclPermissionType.ANY)))
    return out


def _entry_text(e: AccessControlEntry) -> str:
    return (f"(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
            f"permissionType={e.permission_type.name})")


def _print_grouped(title: str, bindings: Sequence[AclBinding]) -> None:
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        grouped.setdefault(b.pattern, []).append(b.entry)
    for pattern, entries in sorted(grouped.items()):
        print(f"{title} `{pattern}`: ")
        for e in sorted(entries):
            print(f" \t{_entry_text(e)} ")
        print()


def _acls(args: argparse.Namespace, client_for: ClientFactory) -> int:
    with client_for(args) as client:
        if args.action == "add":
            bindings = _bindings_to_add(args)
            _print_grouped("Adding ACLs for resource", bindings)
            failed = [r for r in client.create_acls(bindings) if r.error != ErrorCode.NONE]
            for r in failed:
                print(f"Error while adding ACLs: {r.error.name}: {r.error_message} ({r.name})", file=sys.stderr)
            return 1 if failed else 0
        if args.action == "remove":
            deleted = client.delete_acls(_filters(args))
            flat = sorted({b for group in deleted for b in group})
            if not flat:
                print("No ACLs matched.")
            _print_grouped("Removed ACLs from resource", flat)
            return 0
        found: set[AclBinding] = set()
        for flt in _filters(args):
            found.update(client.describe_acls(flt))
        _print_grouped("Current ACLs for resource", sorted(found))
        return 0


# ------------------------------------------------------------------------------------------------ parser


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                add_common: Callable[[argparse.ArgumentParser], None], client_for: ClientFactory) -> None:
    u = sub.add_parser("users", help="add, delete or list SCRAM users (kafka-configs --entity-type users)")
    u.add_argument("action", choices=("add", "delete", "list"))
    u.add_argument("name", nargs="?", help="the user name")
    add_common(u)
    u.add_argument("--password", help="the user's password (users add)")
    u.add_argument("--mechanism", choices=MECHANISMS, help="SCRAM mechanism (add: SCRAM-SHA-256 by default; "
                                                           "delete: every mechanism the user has by default)")
    u.add_argument("--iterations", type=int, default=MIN_ITERATIONS,
                   help=f"PBKDF2 iterations (at least {MIN_ITERATIONS})")
    u.set_defaults(run=lambda args: _users(args, client_for))

    a = sub.add_parser("acls", help="add, remove or list ACLs (kafka-acls.sh)")
    a.add_argument("action", nargs="?", choices=("add", "remove", "list"))
    for flag in ("add", "remove", "list"):
        a.add_argument(f"--{flag}", dest=f"flag_{flag}", action="store_true", help=argparse.SUPPRESS)
    add_common(a)
    a.add_argument("--allow-principal", action="append", help="Type:name, e.g. User:alice (repeatable)")
    a.add_argument("--deny-principal", action="append", help="Type:name (repeatable)")
    a.add_argument("--allow-host", action="append", help="host (IP) the allow applies to (default *)")
    a.add_argument("--deny-host", action="append", help="host (IP) the deny applies to (default *)")
    a.add_argument("--principal", action="append", help="list/remove: only this principal's ACLs")
    a.add_argument("--operation", action="append",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                        "AlterConfigs, IdempotentWrite, All (repeatable)")
    a.add_argument("--topic", action="append")
    a.add_argument("--group", action="append")
    a.add_argument("--transactional-id", action="append")
    a.add_argument("--delegation-token", action="append")
    a.add_argument("--cluster", action="store_true")
    a.add_argument("--resource-pattern-type", help="LITERAL (default for add/remove), PREFIXED, ANY (default "
                                                   "for list), MATCH")
    a.add_argument("--producer", action="store_true", help="WRITE, DESCRIBE, CREATE on the --topic(s)")
    a.add_argument("--consumer", action="store_true", help="READ, DESCRIBE on the --topic(s), READ on the --group")
    a.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    a.add_argument("--force", action="store_true", help="accepted for kafka-acls.sh scripts (we never prompt)")

    def run_acls(args: argparse.Namespace) -> int:
        flags = [f for f in ("add", "remove", "list") if getattr(args, f"flag_{f}")]
        actions = list(dict.fromkeys(([args.action] if args.action else []) + flags))
        if len(actions) != 1:
            raise SecurityUsageError("exactly one of add, remove, list is required")
        args.action = actions[0]
        return _acls(args, client_for)

    a.set_defaults(run=run_acls)
