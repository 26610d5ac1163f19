"""``sofakafka groups``: kafka-consumer-groups.sh over the wire protocol.

Actions (positional, or Kafka's ``--list`` style flags): ``list``, ``describe`` (offsets by default, or
``--members [--verbose]`` / ``--state``), ``delete`` and ``reset-offsets``. Output lines and error texts follow
Kafka 2.6's tool, so scripts written against it keep working.

``reset-offsets`` moves the committed offsets of a group that has no active members (Empty or unknown, as
Kafka requires) for ``--topic t`` / ``--topic t:0,2`` (repeatable) or ``--all-topics`` (every topic the
group has offsets for), to one of: ``--to-earliest``, ``--to-latest``, ``--to-current``, ``--to-offset N``,
``--shift-by N`` (from the committed offset), ``--to-datetime 2020-01-01T00:00:00.000`` (ISO 8601, local
time unless a zone is given: the first offset whose timestamp is at or after it, the log end if there is
none) or ``--by-duration PnDTnHnMnS`` (that long before now). Targets outside a partition's
[log start, log end] are clamped into it, as Kafka does. Without ``--execute`` nothing is committed: the
plan is printed (``--dry-run`` says so explicitly; with neither flag Kafka's warning is printed too).
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
import time
from collections.abc import Callable, Sequence

from sofakafka.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, KafkaClient
from sofakafka.client.groups import CommittedOffset, GroupAdmin, GroupDescription
from sofakafka.protocol.errors import ErrorCode, KafkaError

TopicPartition = tuple[str, int]

ACTIONS = ("list", "describe", "delete", "reset-offsets")
RESET_SCENARIOS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime", "by_duration")

_NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing.In a future major release, the default "
    "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. "
    "You should add the --dry-run option explicitly if you are scripting this command and want to keep the current "
    "default behavior without prompting.")


class GroupsUsageError(Exception):
    """Bad options: the caller reports it like argparse does, exit code 2."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    g = sub.add_parser("groups", help="list, describe, delete consumer groups and reset their offsets "
                                      "(kafka-consumer-groups.sh)")
    g.add_argument("action", nargs="?", choices=ACTIONS)
    for a in ("list", "describe", "delete", "reset-offsets"):
        g.add_argument(f"--{a}", dest=f"flag_{a.replace('-', '_')}", action="store_true", help=argparse.SUPPRESS)
    add_common(g)
    g.add_argument("--group", action="append", help="group id (repeatable)")
    g.add_argument("--all-groups", action="store_true", help="every group (describe, delete, reset-offsets)")
    g.add_argument("--topic", action="append", help="topic or topic:p0,p1,... (repeatable)")
    g.add_argument("--all-topics", action="store_true", help="every topic the group has committed offsets for")
    g.add_argument("--members", action="store_true", help="describe the group's members")
    g.add_argument("--verbose", action="store_true", help="with --members: each member's assignment")
    g.add_argument("--state", nargs="?", const="", default=None,
                   help="describe: the group's state; list: only groups in these states (comma-separated)")
    g.add_argument("--offsets", action="store_true", help="describe the group's offsets (the default)")
    g.add_argument("--to-earliest", action="store_true")
    g.add_argument("--to-latest", action="store_true")
    g.add_argument("--to-current", action="store_true")
    g.add_argument("--to-offset", type=int)
    g.add_argument("--shift-by", type=int)
    g.add_argument("--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone (Z, +01:00)")
    g.add_argument("--by-duration", help="ISO 8601 duration before now, e.g. PT1H or P1DT2H30M")
    g.add_argument("--dry-run", action="store_true", help="print the new offsets without committing them")
    g.add_argument("--execute", action="store_true", help="commit the new offsets")
    g.set_defaults(run=run)


def _action(args: argparse.Namespace) -> str:
    actions = [a for a in ACTIONS if getattr(args, f"flag_{a.replace('-', '_')}")]
    if args.action:
        actions.append(args.action)
    actions = list(dict.fromkeys(actions))
    if len(actions) != 1:
        raise GroupsUsageError("exactly one of list, describe, delete, reset-offsets is required")
    return actions[0]


def run(args: argparse.Namespace) -> int:
    action = _action(args)
    if not args.bootstrap_server:
        raise GroupsUsageError("--bootstrap-server is required")
    if action != "list" and not args.group and not args.all_groups:
        raise GroupsUsageError(f"--group or --all-groups is required to {action}")
    from sofakafka.cli_security import command_config_security

    with KafkaClient(args.bootstrap_server, client_id="sofakafka-groups",
                     request_timeout_ms=args.request_timeout_ms,
                     security=command_config_security(args.command_config)) as client:
        admin = GroupAdmin(client)
        if action == "list":
            return _list(admin, args)
        groups = list(dict.fromkeys(args.group or []))
        if args.all_groups:
            groups = [g.group_id for g in admin.list_groups()]
        if action == "describe":
            return _describe(client, admin, groups, args)
        if action == "delete":
            return _delete(admin, groups)
        return _reset(client, admin, groups, args)


# -- list -------------------------------------------------------------------------------------------------


def _list(admin: GroupAdmin, args: argparse.Namespace) -> int:
    if args.state is None:
        for g in admin.list_groups():
            print(g.group_id)
        return 0
    states = [s.strip() for s in args.state.split(",") if s.strip()]
    listed = admin.list_groups(_kafka_states(states))
    width = max([len("GROUP")] + [len(g.group_id) for g in listed])
    print(f"{'GROUP':<{width}} STATE")
    for g in listed:
        print(f"{g.group_id:<{width}} {g.state}")
    return 0


_STATES = {s.lower(): s for s in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")}


def _kafka_states(states: Sequence[str]) -> list[str]:
    out = []
    for s in states:
        found = _STATES.get(s.lower())
        if found is None:
            raise GroupsUsageError(f"unknown group state {s!r}: one of {', '.join(_STATES.values())}")
        out.append(found)
    return out


# -- describe ---------------------------------------------------------------------------------------------


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print()
    for r in rows:
        print(" ".join(f"{c:<{w}}" for c, w in zip(r[:-1], widths, strict=False)) + " " + r[-1])


def _log_end_offsets(client: KafkaClient, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    return _list_offsets(client, partitions, LATEST_TIMESTAMP)


def _list_offsets(client: KafkaClient, partitions: Sequence[TopicPartition], timestamp: int
                  ) -> dict[TopicPartition, int]:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    out: dict[TopicPartition, int] = {}
    for topic, ps in by_topic.items():
        for p, r in client.list_offsets(topic, {p: timestamp for p in ps}).items():
            out[(topic, p)] = r.offset
    return out


def _describe(client: KafkaClient, admin: GroupAdmin, groups: list[str], args: argparse.Namespace) -> int:
    status = 0
    for group_id in groups:
        desc = admin.describe_group(group_id)
        if desc.error != ErrorCode.NONE:
            _err(f"Error: Executing consumer group command failed due to {desc.error.name}")
            status = 1
            continue
        if args.state is not None:
            _describe_state(client, desc)
        elif args.members:
            _describe_members(desc, args.verbose)
        else:
            status |= _describe_offsets(client, admin, desc)
    return status


def _missing(desc: GroupDescription) -> bool:
    if desc.state == "Dead":
        _err(f"Error: Consumer group '{desc.group_id}' does not exist.")
        return True
    return False


def _describe_state(client: KafkaClient, desc: GroupDescription) -> None:
    if _missing(desc):
        return
    broker = client.cluster().brokers.get(desc.coordinator)
    where = f"{broker.host}:{broker.port}" if broker is not None else "?"
    _table([["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [desc.group_id, f"{where} ({desc.coordinator})", desc.protocol, desc.state, str(len(desc.members))]])


def _describe_members(desc: GroupDescription, verbose: bool) -> None:
    if _missing(desc):
        return
    if not desc.members:
        print(f"\nConsumer group '{desc.group_id}' has no active members.")
        return
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        header.append("ASSIGNMENT")
    rows = [header]
    for m in desc.members:
        row = [desc.group_id, m.member_id, m.client_host, m.client_id, str(len(m.assignment))]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for t, p in m.assignment:
                by_topic.setdefault(t, []).append(p)
            row.append(",".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))
                       or "-")
        rows.append(row)
    _table(rows)


def _describe_offsets(client: KafkaClient, admin: GroupAdmin, desc: GroupDescription) -> int:
    if _missing(desc):
        return 1
    committed = admin.fetch_offsets(desc.group_id)
    owner: dict[TopicPartition, tuple[str, str, str]] = {}
    for m in desc.members:
        for tp in m.assignment:
            owner[tp] = (m.member_id, m.client_host, m.client_id)
    partitions = sorted(set(committed) | set(owner))
    if not desc.members:
        print(f"\nConsumer group '{desc.group_id}' has no active members.")
    if not partitions:
        return 0
    ends = _log_end_offsets(client, partitions)
    rows = [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
             "CLIENT-ID"]]
    for tp in partitions:
        c = committed.get(tp)
        end = ends.get(tp, -1)
        lag = str(end - c.offset) if c is not None and end >= 0 else "-"
        member_id, host, client_id = owner.get(tp, ("-", "-", "-"))
        rows.append([desc.group_id, tp[0], str(tp[1]), str(c.offset) if c is not None else "-",
                     str(end) if end >= 0 else "-", lag, member_id, host, client_id])
    _table(rows)
    return 0


# -- delete -----------------------------------------------------------------------------------------------


def _delete(admin: GroupAdmin, groups: list[str]) -> int:
    results = admin.delete_groups(groups)
    failed = {g: e for g, e in results.items() if e != ErrorCode.NONE}
    ok = [g for g in groups if g not in failed]
    if ok:
        print("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in ok) + ") was successful.")
    if failed:
        _err("Deletion of some consumer groups failed:")
        for g, e in failed.items():
            _err(f"* Group '{g}' could not be deleted due to: {_error_text(e)}")
        return 1
    return 0


def _error_text(code: ErrorCode) -> str:
    return {
        ErrorCode.NON_EMPTY_GROUP: "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.",
        ErrorCode.GROUP_ID_NOT_FOUND: "org.apache.kafka.common.errors.GroupIdNotFoundException: "
                                      "The group id does not exist.",
    }.get(code, code.name)


# -- reset-offsets ----------------------------------------------------------------------------------------


def parse_datetime_ms(text: str) -> int:
    """Kafka's accepted forms (``2020-01-01T00:00:00.000``, with ``Z`` or ``+hh:mm``/``+hhmm`` zones) in ms."""
    candidate = text.strip()
    match = re.fullmatch(r"(.*[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?)([+-]\d\d)(\d\d)", candidate)
    if match:
        candidate = f"{match.group(1)}{match.group(2)}:{match.group(3)}"
    try:
        parsed = dt.datetime.fromisoformat(candidate)
    except ValueError:
        raise GroupsUsageError(f"--to-datetime {text!r} is not a date-time like 2020-01-01T00:00:00.000") from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # local time, as Kafka's tool reads a zone-less value
    return int(parsed.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """An ISO 8601 duration (``PnDTnHnMnS``), as Kafka's ``--by-duration`` takes it."""
    match = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text.strip().upper())
    if not match or text.strip().upper() in ("P", "PT"):
        raise GroupsUsageError(f"--by-duration {text!r} is not an ISO 8601 duration like PT1H or P1DT2H")
    days, hours, minutes, seconds = match.groups()
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 1000
    return total + int(float(seconds or 0) * 1000)


def _scenario(args: argparse.Namespace) -> str:
    chosen = [s for s in RESET_SCENARIOS if getattr(args, s) not in (None, False)]
    if len(chosen) != 1:
        raise GroupsUsageError("exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
                               "--shift-by, --to-datetime, --by-duration is required")
    return chosen[0]


def _reset_partitions(client: KafkaClient, admin: GroupAdmin, group_id: str, args: argparse.Namespace
                      ) -> list[TopicPartition]:
    if args.all_topics and args.topic:
        raise GroupsUsageError("--all-topics cannot be combined with --topic")
    if args.all_topics:
        return sorted(admin.fetch_offsets(group_id))
    if not args.topic:
        raise GroupsUsageError("one of --topic or --all-topics is required to reset offsets")
    out: list[TopicPartition] = []
    for spec in args.topic:
        topic, sep, parts = spec.partition(":")
        if sep and parts.strip():
            try:
                out += [(topic, int(p)) for p in parts.split(",") if p.strip()]
            except ValueError:
                raise GroupsUsageError(f"bad --topic {spec!r}: partitions must be integers") from None
        else:
            info = client.topic(topic)
            out += [(topic, p) for p in sorted(info.partitions)]
    return sorted(set(out))


def _reset(client: KafkaClient, admin: GroupAdmin, groups: list[str], args: argparse.Namespace) -> int:
    scenario = _scenario(args)
    if args.dry_run and args.execute:
        raise GroupsUsageError("--dry-run and --execute cannot be used together")
    if not args.dry_run and not args.execute:
        print(_NO_EXECUTE_WARNING)
    status = 0
    for group_id in groups:
        desc = admin.describe_group(group_id)
        if desc.error != ErrorCode.NONE:
            raise KafkaError(desc.error, f"describing group {group_id}")
        if desc.state not in ("Empty", "Dead"):
            _err(f"Error: Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                 f"state is {desc.state}.")
            status = 1
            continue
        partitions = _reset_partitions(client, admin, group_id, args)
        plan = _plan(client, admin, group_id, partitions, scenario, args)
        if args.execute:
            errors = admin.commit_offsets(group_id, plan)
            failed = {tp: e for tp, e in errors.items() if e != ErrorCode.NONE}
            for (topic, partition), e in sorted(failed.items()):
                _err(f"Error: committing {topic}-{partition} for group {group_id} failed: {e.name}")
                status = 1
        rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
        rows += [[group_id, t, str(p), str(offset)] for (t, p), offset in sorted(plan.items())]
        _table(rows)
    return status


def _plan(client: KafkaClient, admin: GroupAdmin, group_id: str, partitions: list[TopicPartition], scenario: str,
          args: argparse.Namespace) -> dict[TopicPartition, int]:
    if not partitions:
        return {}
    earliest = _list_offsets(client, partitions, EARLIEST_TIMESTAMP)
    latest = _list_offsets(client, partitions, LATEST_TIMESTAMP)

    def clamp(tp: TopicPartition, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    if scenario == "to_earliest":
        return {tp: earliest[tp] for tp in partitions}
    if scenario == "to_latest":
        return {tp: latest[tp] for tp in partitions}
    if scenario == "to_offset":
        return {tp: clamp(tp, args.to_offset) for tp in partitions}
    if scenario in ("to_current", "shift_by"):
        committed: dict[TopicPartition, CommittedOffset] = admin.fetch_offsets(group_id, partitions)
        out: dict[TopicPartition, int] = {}
        for tp in partitions:
            c = committed.get(tp)
            if c is None:
                if scenario == "shift_by":
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"cannot shift offset for partition {tp[0]}-{tp[1]} of group {group_id}: "
                                     "it has no committed offset")
                out[tp] = latest[tp]  # Kafka's --to-current falls back to the log end for such partitions
            else:
                out[tp] = c.offset if scenario == "to_current" else clamp(tp, c.offset + args.shift_by)
        return out
    if scenario == "to_datetime":
        timestamp = parse_datetime_ms(args.to_datetime)
    else:
        timestamp = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
    found = _list_offsets(client, partitions, timestamp)
    # No record at or after the time: the log end, so the next consumer waits for new records.
    return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in partitions}


def _err(text: str) -> None:
    print(text, file=sys.stderr)
