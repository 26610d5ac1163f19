"""Resetting a consumer group's committed offsets, as kafka-consumer-groups.sh --reset-offsets does it.

:func:`plan_reset` computes the new offsets (a dry run changes nothing); :func:`execute_reset` commits a
plan. Kafka's rules: only a group without active members (Empty, or unknown) may be reset; a target outside
a partition's [log start, log end] is clamped into it; a time with no record at or after it resets to the
log end. A time in the future is refused with a message instead (it would silently mean "the log end").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sofakafka.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, KafkaClient
from sofakafka.client.groups import GroupAdmin
from sofakafka.console.cluster import ConsoleError, TopicPartition, list_offsets_at, now_ms, require_topic
from sofakafka.console.records import format_timestamp
from sofakafka.protocol.errors import ErrorCode

SCENARIOS = ("earliest", "latest", "datetime", "offset", "shift-by")


@dataclass(frozen=True)
class ResetRow:
    topic: str
    partition: int
    current: int | None
    new: int
    log_start: int
    log_end: int


@dataclass(frozen=True)
class ResetPlan:
    group_id: str
    scenario: str
    rows: tuple[ResetRow, ...]
    executed: bool = False
    errors: tuple[str, ...] = ()


def parse_time_ms(text: str) -> int:
    """``2020-01-01T00:00:00`` (milliseconds and a zone optional; no zone means UTC, as the console shows
    times) or milliseconds since the epoch."""
    raw = text.strip()
    if not raw:
        raise ConsoleError("no time given")
    if raw.lstrip("-").isdigit():
        return int(raw)
    candidate = raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw
    try:
        parsed = dt.datetime.fromisoformat(candidate)
    except ValueError:
        raise ConsoleError(f"{text!r} is not a time like 2024-05-01T12:00:00 (UTC) or milliseconds since "
                           "the epoch") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


def refuse_future(ms: int) -> None:
    if ms > now_ms():
        raise ConsoleError(f"{format_timestamp(ms)} is in the future (it is now {format_timestamp(now_ms())}): "
                           "no record has such a time yet")


def _partitions(client: KafkaClient, admin: GroupAdmin, group_id: str, topic: str | None
                ) -> list[TopicPartition]:
    if topic:
        require_topic(client, topic)
        return [(topic, p) for p in sorted(client.cluster().topics[topic].partitions)]
    committed = sorted(admin.fetch_offsets(group_id))
    if not committed:
        raise ConsoleError(f"group {group_id!r} has no committed offsets: name a topic to reset")
    return committed


def plan_reset(client: KafkaClient, group_id: str, scenario: str, value: str = "", topic: str | None = None
               ) -> ResetPlan:
    """The offsets a reset would commit; nothing is changed."""
    if scenario not in SCENARIOS:
        raise ConsoleError(f"unknown reset {scenario!r}: one of {', '.join(SCENARIOS)}")
    admin = GroupAdmin(client)
    desc = admin.describe_group(group_id)
    if desc.error != ErrorCode.NONE:
        raise ConsoleError(f"group {group_id!r} cannot be described: {desc.error.name}")
    if desc.state not in ("Empty", "Dead"):
        raise ConsoleError(f"group {group_id!r} has active members (state {desc.state}): offsets can only be "
                           "reset while the group is inactive; stop its consumers first")
    partitions = _partitions(client, admin, group_id, topic)
    starts, errors = list_offsets_at(client, partitions, EARLIEST_TIMESTAMP)
    ends, end_errors = list_offsets_at(client, partitions, LATEST_TIMESTAMP)
    errors.update(end_errors)
    if errors:
        raise ConsoleError("offsets unavailable for " + "; ".join(f"{t}-{p}: {e}" for (t, p), e in errors.items()))
    committed = admin.fetch_offsets(group_id, partitions)

    def clamp(tp: TopicPartition, offset: int) -> int:
        return max(starts[tp], min(ends[tp], offset))

    targets: dict[TopicPartition, int]
    if scenario == "earliest":
        targets = dict(starts)
    elif scenario == "latest":
        targets = dict(ends)
    elif scenario == "offset":
        number = _integer(value, "offset")
        targets = {tp: clamp(tp, number) for tp in partitions}
    elif scenario == "shift-by":
        shift = _integer(value, "shift")
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            raise ConsoleError("cannot shift partitions without a committed offset: "
                               + ", ".join(f"{t}-{p}" for t, p in missing))
        targets = {tp: clamp(tp, committed[tp].offset + shift) for tp in partitions}
    else:
        when = parse_time_ms(value)
        refuse_future(when)
        found, found_errors = list_offsets_at(client, partitions, when)
        if found_errors:
            raise ConsoleError("ListOffsets by time failed for "
                               + "; ".join(f"{t}-{p}: {e}" for (t, p), e in found_errors.items()))
        targets = {tp: found[tp] if found[tp] >= 0 else ends[tp] for tp in partitions}
    rows = tuple(ResetRow(t, p, committed[(t, p)].offset if (t, p) in committed else None, targets[(t, p)],
                          starts[(t, p)], ends[(t, p)]) for t, p in partitions)
    return ResetPlan(group_id, scenario, rows)


def execute_reset(client: KafkaClient, plan: ResetPlan) -> ResetPlan:
    """Commits ``plan`` (recomputed by the caller just before, so it is not stale)."""
    admin = GroupAdmin(client)
    results = admin.commit_offsets(plan.group_id, {(r.topic, r.partition): r.new for r in plan.rows})
    errors = tuple(f"{t}-{p}: {code.name}" for (t, p), code in sorted(results.items()) if code != ErrorCode.NONE)
    return ResetPlan(plan.group_id, plan.scenario, plan.rows, executed=not errors, errors=errors)


def _integer(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConsoleError(f"the {what} must be a whole number, not {text!r}") from None


def describe_rows(rows: Sequence[ResetRow]) -> list[list[str]]:
    out = [["TOPIC", "PARTITION", "CURRENT", "NEW", "LOG-START", "LOG-END"]]
    for r in rows:
        out.append([r.topic, str(r.partition), "-" if r.current is None else str(r.current), str(r.new),
                    str(r.log_start), str(r.log_end)])
    return out
