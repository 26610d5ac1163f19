"""``sofakafka acls``: kafka-acls.sh over the wire protocol (CreateAcls, DescribeAcls, DeleteAcls).

``acls add|remove|list`` (or Kafka's ``--add``, ``--remove``, ``--list``) with kafka-acls.sh's options:
``--allow-principal``/``--deny-principal``, ``--allow-host``/``--deny-host`` (default ``*``), ``--operation``
(repeatable), resources from ``--topic``/``--group``/``--cluster``/``--transactional-id``/``--delegation-token``,
``--resource-pattern-type`` (LITERAL, PREFIXED; ANY and MATCH for list/remove), the ``--producer`` (WRITE,
DESCRIBE, CREATE on topics; IDEMPOTENT_WRITE with ``--idempotent``) and ``--consumer`` (READ, DESCRIBE on topics,
READ on the group) shortcuts, and ``--principal`` to filter a listing. As kafka-acls.sh, an operation a resource
type does not support is refused here (the broker would store it). The output lines are the tool's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, err
from sofakafka.protocol import acl
from sofakafka.protocol.errors import ErrorCode
from sofakafka.security.acl import VALID_OPERATIONS

VERB = "acls"
SUMMARY = "add, remove or list ACLs (kafka-acls.sh)"
ACTIONS = ("add", "remove", "list")

_RESOURCE_OPTIONS = (("topic", acl.ResourceType.TOPIC), ("group", acl.ResourceType.GROUP),
                     ("transactional_id", acl.ResourceType.TRANSACTIONAL_ID),
                     ("delegation_token", acl.ResourceType.DELEGATION_TOKEN))


def _resources(args: argparse.Namespace) -> list[tuple[acl.ResourceType, str]]:
    out: list[tuple[acl.ResourceType, str]] = []
    for attr, rtype in _RESOURCE_OPTIONS:
        for name in getattr(args, attr) or []:
            out.append((rtype, name))
    if args.cluster:
        out.append((acl.ResourceType.CLUSTER, acl.CLUSTER_NAME))
    return out


def _pattern_type(args: argparse.Namespace, *, filtering: bool) -> acl.PatternType:
    text = (args.resource_pattern_type or "LITERAL").upper()
    try:
        ptype = acl.PatternType(acl.PatternType.from_name(text))
    except ValueError:
        raise UsageError(f"--resource-pattern-type must be LITERAL, PREFIXED, ANY or MATCH, got {text}") from None
    if not filtering and ptype not in (acl.PatternType.LITERAL, acl.PatternType.PREFIXED):
        raise UsageError("acls add takes --resource-pattern-type LITERAL or PREFIXED")
    if ptype == acl.PatternType.UNKNOWN:
        raise UsageError("--resource-pattern-type UNKNOWN is not allowed")
    return ptype


def _operations(args: argparse.Namespace) -> list[acl.AclOperation]:
    ops: list[acl.AclOperation] = []
    for text in args.operation or []:
        try:
            op = acl.AclOperation(acl.AclOperation.from_name(text))
        except ValueError:
            raise UsageError(f"unknown --operation {text}") from None
        if op in (acl.AclOperation.UNKNOWN, acl.AclOperation.ANY):
            raise UsageError(f"--operation {text} is not allowed here")
        ops.append(op)
    return ops


def _entries(args: argparse.Namespace, ops: Sequence[acl.AclOperation]) -> list[acl.AccessControlEntry]:
    allow_hosts = args.allow_host or ["*"]
    deny_hosts = args.deny_host or ["*"]
    out: list[acl.AccessControlEntry] = []
    for principal in args.allow_principal or []:
        out += [acl.AccessControlEntry(principal, h, op, acl.AclPermissionType.ALLOW) for h in allow_hosts for op in ops]
    for principal in args.deny_principal or []:
        out += [acl.AccessControlEntry(principal, h, op, acl.AclPermissionType.DENY) for h in deny_hosts for op in ops]
    for e in out:
        if ":" not in e.principal:
            raise UsageError(f"principal {e.principal!r} must be Type:name, e.g. User:alice")
    return out


def _bindings_to_add(args: argparse.Namespace) -> list[acl.AclBinding]:
    resources = _resources(args)
    ptype = _pattern_type(args, filtering=False)
    ops = _operations(args)
    bindings: list[acl.AclBinding] = []
    if args.producer or args.consumer:
        topics = [n for t, n in resources if t == acl.ResourceType.TOPIC]
        if not topics:
            raise UsageError("--producer and --consumer need --topic")
        per_resource: list[tuple[acl.ResourceType, str, list[acl.AclOperation]]] = []
        if args.producer:
            per_resource += [(acl.ResourceType.TOPIC, t, [acl.AclOperation.WRITE, acl.AclOperation.DESCRIBE, acl.AclOperation.CREATE])
                             for t in topics]
            if args.idempotent:
                per_resource.append((acl.ResourceType.CLUSTER, acl.CLUSTER_NAME, [acl.AclOperation.IDEMPOTENT_WRITE]))
            per_resource += [(acl.ResourceType.TRANSACTIONAL_ID, n, [acl.AclOperation.WRITE, acl.AclOperation.DESCRIBE])
                             for t, n in resources if t == acl.ResourceType.TRANSACTIONAL_ID]
        if args.consumer:
            groups = [n for t, n in resources if t == acl.ResourceType.GROUP]
            if not groups:
                raise UsageError("--consumer needs --group")
            per_resource += [(acl.ResourceType.TOPIC, t, [acl.AclOperation.READ, acl.AclOperation.DESCRIBE]) for t in topics]
            per_resource += [(acl.ResourceType.GROUP, g, [acl.AclOperation.READ]) for g in groups]
        for rtype, name, rops in per_resource:
            p = ptype if rtype != acl.ResourceType.CLUSTER else acl.PatternType.LITERAL
            bindings += [acl.AclBinding(acl.ResourcePattern(rtype, name, p), e) for e in _entries(args, rops)]
        return bindings
    if not resources:
        raise UsageError("name a resource: --topic, --group, --cluster, --transactional-id or "
                                 "--delegation-token")
    if not ops:
        raise UsageError("acls add needs --operation (or --producer / --consumer)")
    entries = _entries(args, ops)
    if not entries:
        raise UsageError("acls add needs --allow-principal or --deny-principal")
    for rtype, name in resources:
        for op in ops:
            if op not in VALID_OPERATIONS[rtype]:
                allowed = ", ".join(sorted(o.pascal for o in VALID_OPERATIONS[rtype]))
                raise UsageError(f"acl.ResourceType {rtype.pascal} only supports operations {allowed}")
        bindings += [acl.AclBinding(acl.ResourcePattern(rtype, name, ptype), e) for e in entries]
    return bindings


def _filters(args: argparse.Namespace) -> list[acl.AclBindingFilter]:
    resources: list[tuple[acl.ResourceType, str | None]] = list(_resources(args))
    if not resources:
        resources = [(acl.ResourceType.ANY, None)]
    ptype = _pattern_type(args, filtering=True)
    if args.resource_pattern_type is None:
        ptype = acl.PatternType.ANY if args.action == "list" else acl.PatternType.LITERAL
    principals: list[str | None] = list(args.principal or args.allow_principal or args.deny_principal or []) or [None]
    ops = _operations(args) or [acl.AclOperation.ANY]
    out: list[acl.AclBindingFilter] = []
    for rtype, name in resources:
        for principal in principals:
            for op in ops:
                out.append(acl.AclBindingFilter(acl.ResourcePatternFilter(rtype, name, ptype),
                                            acl.AccessControlEntryFilter(principal, None, op, acl.AclPermissionType.ANY)))
    return out


def _print_grouped(title: str, bindings: Sequence[acl.AclBinding]) -> None:
    grouped: dict[acl.ResourcePattern, list[acl.AccessControlEntry]] = {}
    for b in bindings:
        grouped.setdefault(b.pattern, []).append(b.entry)
    for pattern, entries in sorted(grouped.items()):
        print(f"{title} `{pattern}`: ")
        for e in sorted(entries):
            print(f" \t{e} ")  # (principal=..., host=..., operation=..., permissionType=...)
        print()


def run_acls(args: argparse.Namespace) -> int:
    args.action = common.chosen_action(args, ACTIONS)
    with common.client(args, VERB) as client:
        if args.action == "add":
            bindings = _bindings_to_add(args)
            _print_grouped("Adding ACLs for resource", bindings)
            failed = [r for r in client.create_acls(bindings) if r.error != ErrorCode.NONE]
            for r in failed:
                err(f"Error while adding ACLs: {r.error.name}: {r.error_message} ({r.name})")
            return 1 if failed else 0
        if args.action == "remove":
            deleted = client.delete_acls(_filters(args))
            flat = sorted({b for group in deleted for b in group})
            if not flat:
                print("No ACLs matched.")
            _print_grouped("Removed ACLs from resource", flat)
            return 0
        found: set[acl.AclBinding] = set()
        for flt in _filters(args):
            found.update(client.describe_acls(flt))
        _print_grouped("Current ACLs for resource", sorted(found))
        return 0


def build_parser() -> argparse.ArgumentParser:
    a = common.verb_parser(VERB, "Add, remove or list ACLs (kafka-acls.sh).")
    common.add_actions(a, ACTIONS)
    common.add_connection_options(a)
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
    return a


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_acls)
