"""``sofakafka ldc``: the LDC model kept in the cluster, physical names, and zone subscriptions (docs/ldc.md).

Actions:

* ``load FILE`` stores a model (TOML, or JSON) as the cluster-wide config ``sofakafka.ldc.model``, after the
  file and then the broker checked it (``--dry-run``: checked only); ``show`` prints the stored model (TOML,
  or ``--json``); ``add-cell NAME --zone Z --city C [--uids 00-49,...]`` and ``remove-cell NAME`` edit it
  (a cell a routing rule names cannot be removed: the broker refuses).
* ``names --cell C --topic T --group G`` prints physical names, from ``--model FILE`` or the stored model.
* ``subscribe --cell C --group G --topic T --mode M`` sets the filter of zone subscription ``M`` (Local, RZone,
  GZone, CZone) on the physical group ``$NS.C.G``, so stock consumers of that group receive only what the
  subscription takes. A group that does not exist yet is created first, with its offsets at the start of the
  physical topics (``--no-create`` refuses instead).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sofakafka.cli import common
from sofakafka.cli.common import UsageError
from sofakafka.client import EARLIEST_TIMESTAMP, KafkaClient
from sofakafka.client.groups import GroupAdmin
from sofakafka.ldc import Cell, LdcError, LdcModel, SubscriptionMode, Zone
from sofakafka.ldc.model import parse_uid_ranges
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.router.store import read_model, require_model, write_group_filter, write_model

VERB = "ldc"
SUMMARY = "the LDC model (instance, cells, zones, cities), physical names and zone subscriptions"
ACTIONS = ("load", "show", "add-cell", "remove-cell", "names", "subscribe")


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "The LDC model kept in the cluster, physical names and zone subscriptions.")
    common.add_actions(p, ACTIONS)
    p.add_argument("target", nargs="?", help="load: the model file; add-cell / remove-cell: the cell")
    common.add_connection_options(p)
    p.add_argument("--json", action="store_true", help="show: the stored JSON instead of TOML")
    p.add_argument("--dry-run", action="store_true", help="load, add-cell, remove-cell: check, store nothing")
    p.add_argument("--model", help="names, subscribe: read the model from this file instead of the cluster")
    p.add_argument("--zone", help="add-cell: RZone, GZone or CZone")
    p.add_argument("--city", help="add-cell: the cell's city")
    p.add_argument("--uids", help="add-cell (RZone): uid ranges, e.g. 00-49,60")
    p.add_argument("--cell", help="names, subscribe: the cell")
    p.add_argument("--topic", action="append", default=[], help="names, subscribe: a logical topic (repeatable)")
    p.add_argument("--group", action="append", default=[], help="names: a logical group (repeatable); "
                                                                  "subscribe: the logical group")
    p.add_argument("--mode", help="subscribe: Local, RZone, GZone or CZone")
    p.add_argument("--no-create", action="store_true", help="subscribe: refuse a group that does not exist")
    return p


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run)


def _model_from(args: argparse.Namespace) -> LdcModel:
    """``--model FILE`` if given, else the cluster's stored model."""
    if args.model:
        return LdcModel.from_text(common.read_text_file(args.model), args.model)
    with common.client(args, VERB) as client:
        return require_model(client)


def run(args: argparse.Namespace) -> int:
    action = common.chosen_action(args, ACTIONS)
    try:
        return _run(action, args)
    except LdcError as exc:
        raise UsageError(str(exc)) from None


def _run(action: str, args: argparse.Namespace) -> int:
    if action == "load":
        if not args.target:
            raise UsageError("load needs the model file: sofakafka ldc load FILE --bootstrap-server ...")
        model = LdcModel.from_text(common.read_text_file(args.target), args.target)
        with common.client(args, VERB) as client:
            write_model(client, model, validate_only=args.dry_run)
        verb = "Checked" if args.dry_run else "Stored"
        print(f"{verb} the LDC model of instance {model.instance}: {len(model.cells)} cells "
              f"({', '.join(model.cell_names)}) in {len(model.cities)} cities.")
        return 0
    if action == "show":
        with common.client(args, VERB) as client:
            stored = read_model(client)
        if stored is None:
            print("No LDC model is stored in this cluster.")
            return 0
        print(stored.to_json() if args.json else stored.to_toml(), end="\n" if args.json else "")
        return 0
    if action in ("add-cell", "remove-cell"):
        if not args.target:
            raise UsageError(f"{action} needs the cell name")
        with common.client(args, VERB) as client:
            model = require_model(client)
            if action == "add-cell":
                if not args.zone or not args.city:
                    raise UsageError("add-cell needs --zone and --city")
                uids = tuple(_uid_ranges(args.uids)) if args.uids else ()
                updated = model.with_cell(Cell(args.target, Zone.parse(args.zone, "--zone"), args.city, uids))
            else:
                updated = model.without_cell(args.target)
            write_model(client, updated, validate_only=args.dry_run)
        print(f"{'Checked' if args.dry_run else 'Stored'} the LDC model of instance {updated.instance}: cells "
              f"{', '.join(updated.cell_names) or 'none'}.")
        return 0
    if action == "names":
        if not args.cell or not (args.topic or args.group):
            raise UsageError("names needs --cell and at least one --topic or --group")
        model = _model_from(args)
        for t in args.topic:
            print(model.physical_topic(args.cell, t))
        for g in args.group:
            print(model.physical_group(args.cell, g))
        return 0
    return _subscribe(args)


def _uid_ranges(text: str) -> list[tuple[int, int]]:
    return list(parse_uid_ranges("--uids", common.comma_list(text)))


def _subscribe(args: argparse.Namespace) -> int:
    if not (args.cell and len(args.group) == 1 and args.topic and args.mode):
        raise UsageError("subscribe needs --cell, one --group, --topic (repeatable) and --mode")
    model = _model_from(args)
    mode = SubscriptionMode.parse(args.mode)
    record_filter = model.subscription_filter(args.cell, mode)
    group = model.physical_group(args.cell, args.group[0])
    topics = [model.physical_topic(args.cell, t) for t in args.topic]
    with common.client(args, VERB) as client:
        created = _ensure_group(client, group, topics, create=not args.no_create)
        write_group_filter(client, group, record_filter)
    if created:
        print(f"Created group {group} with its offsets at the start of {', '.join(topics)}.")
    print(f"Group {group} now takes the {mode.value} subscription of cell {args.cell}: {record_filter.describe()}")
    return 0


def _ensure_group(client: KafkaClient, group: str, topics: Sequence[str], *, create: bool) -> bool:
    """Whether the group had to be created (offsets committed at each partition's log start)."""
    admin = GroupAdmin(client)
    description = admin.describe_group(group)
    if description.error != ErrorCode.NONE:
        raise KafkaError(description.error, f"DescribeGroups of {group} failed")
    if description.state != "Dead" or admin.fetch_offsets(group):
        return False
    if not create:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group} does not exist (and --no-create was given)")
    offsets: dict[tuple[str, int], int] = {}
    for topic in topics:
        info = client.metadata([topic]).topics.get(topic)
        if info is None or info.error != ErrorCode.NONE:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic} does not exist")
        starts = client.list_offsets(topic, dict.fromkeys(info.partitions, EARLIEST_TIMESTAMP))
        offsets.update({(topic, p): r.offset for p, r in starts.items()})
    results = admin.commit_offsets(group, offsets)
    failed = {tp: e for tp, e in results.items() if e != ErrorCode.NONE}
    if failed:
        tp, error = next(iter(failed.items()))
        raise KafkaError(error, f"creating group {group}: committing {tp[0]}-{tp[1]} failed")
    return True
