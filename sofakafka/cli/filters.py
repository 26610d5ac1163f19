"""``sofakafka filters``: server-side filters of consumer groups (docs/ldc.md).

Actions: ``set`` (replace a group's filter: ``--header NAME=VALUE``, ``--key K``, ``--key-prefix P``, each
repeatable), ``remove`` and ``list`` (every listed group with a filter, or ``--group G``). A filter is kept as
the configs of Kafka's GROUP config resource and written at the group's coordinator, which refuses a group
that does not exist and a bad value, naming them, with nothing stored. Its members get only matching records
from their next fetch on; see sofakafka/broker/group_filters.py for how a fetch is matched to its group.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sofakafka.cli import common
from sofakafka.cli.common import UsageError
from sofakafka.ldc import FilterError, RecordFilter
from sofakafka.router.store import list_group_filters, read_group_filter, write_group_filter

VERB = "filters"
SUMMARY = "set, remove or list server-side filters of consumer groups (by key or header)"
ACTIONS = ("set", "remove", "list")


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Set, remove or list the server-side filter of a consumer group: its members "
                                 "receive only the records that pass it.")
    common.add_actions(p, ACTIONS)
    common.add_connection_options(p)
    common.add_output_options(p)
    p.add_argument("--group", help="the (physical) consumer group")
    p.add_argument("--header", action="append", default=[], metavar="NAME=VALUE",
                   help="records must carry this header with one of the values given for NAME (repeatable)")
    p.add_argument("--key", action="append", default=[], help="the record key equals this (repeatable)")
    p.add_argument("--key-prefix", action="append", default=[], help="the record key starts with this (repeatable)")
    p.add_argument("--validate-only", action="store_true", help="set: have the coordinator check, store nothing")
    return p


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run)


def filter_from_options(args: argparse.Namespace) -> RecordFilter:
    headers: list[tuple[str, str]] = []
    for item in args.header:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--header must be NAME=VALUE, got {item!r}")
        headers.append((name, value))
    try:
        record_filter = RecordFilter.build(key_equals=args.key, key_prefixes=args.key_prefix, headers=headers)
    except FilterError as exc:
        raise UsageError(str(exc)) from None
    if record_filter.is_empty:
        raise UsageError("set needs at least one --header, --key or --key-prefix (remove clears a filter)")
    return record_filter


def run(args: argparse.Namespace) -> int:
    action = common.chosen_action(args, ACTIONS)
    if action in ("set", "remove") and not args.group:
        raise UsageError(f"--group is required to {action}")
    if action != "set" and (args.header or args.key or args.key_prefix):
        raise UsageError("--header, --key and --key-prefix apply to set only")
    record_filter = filter_from_options(args) if action == "set" else RecordFilter()
    with common.client(args, VERB) as client:
        if action == "set":
            write_group_filter(client, args.group, record_filter, validate_only=args.validate_only)
            verb = "would be" if args.validate_only else "is now"
            print(f"The filter of group {args.group} {verb}: {record_filter.describe()}")
        elif action == "remove":
            write_group_filter(client, args.group, RecordFilter())
            print(f"Group {args.group} has no filter now.")
        else:
            found = ({args.group: read_group_filter(client, args.group)} if args.group
                     else list_group_filters(client))
            rows = [["GROUP", "FILTER"]] + [[g, f.describe()] for g, f in sorted(found.items())]
            common.print_table(rows, as_json=args.json)
    return 0
