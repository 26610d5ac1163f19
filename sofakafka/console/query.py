"""Message query: by topic + partition + offset range, by time range (ListOffsets by time), by key.

Reads are ordinary consumer Fetches (no group, nothing committed), one request at a time of at most
``FETCH_MAX_BYTES``, so a query costs a broker what any consumer costs it. Every query is bounded:
offset and time queries return at most ``MAX_RESULTS`` records; a key scan reads at most the number of
records the operator allows (never more than ``KEY_SCAN_LIMIT``) and reports its progress as it goes, so a
scan of a huge topic is a bounded, visible, cancellable job instead of a hung page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sofakafka.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ClientError, FetchResult, KafkaClient
from sofakafka.client.partitioner import partition_for_key
from sofakafka.console.cluster import ConsoleError, describe_failure, require_topic
from sofakafka.console.offsets import refuse_future
from sofakafka.console.records import RecordView, format_timestamp
from sofakafka.protocol.errors import ErrorCode, KafkaError

MAX_RESULTS = 500
KEY_SCAN_DEFAULT = 100_000
KEY_SCAN_LIMIT = 2_000_000
MAX_MATCHES = 200
FETCH_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class QueryResult:
    records: tuple[RecordView, ...]
    notes: tuple[str, ...] = ()


def _partitions(client: KafkaClient, topic: str, partition: int | None) -> list[int]:
    require_topic(client, topic)
    known = sorted(client.cluster().topics[topic].partitions)
    if partition is None:
        return known
    if partition not in known:
        raise ConsoleError(f"topic {topic!r} has no partition {partition} (it has {len(known)}: "
                           f"0 to {len(known) - 1})")
    return [partition]


def _bounds(client: KafkaClient, topic: str, partition: int) -> tuple[int, int]:
    start = client.list_offsets(topic, {partition: EARLIEST_TIMESTAMP})[partition].offset
    end = client.list_offsets(topic, {partition: LATEST_TIMESTAMP})[partition].offset
    return start, end


def _count(count: int) -> int:
    if count < 1:
        raise ConsoleError("ask for at least one record")
    if count > MAX_RESULTS:
        raise ConsoleError(f"at most {MAX_RESULTS} records a query; page through larger ranges")
    return count


def _read(client: KafkaClient, topic: str, partition: int, start: int, end: int, limit: int) -> list[RecordView]:
    """Records of ``[start, end)`` (at most ``limit``), fetched from the leader."""
    out: list[RecordView] = []
    position = start
    stalls = 0
    while position < end and len(out) < limit:
        result = client.fetch(topic, partition, position, max_wait_ms=0, max_bytes=FETCH_MAX_BYTES)
        for r in result.records:
            if r.offset >= end or len(out) >= limit:
                break
            out.append(RecordView.of(topic, partition, r))
        if result.next_offset <= position:
            stalls += 1
            if stalls >= 3:
                break
        else:
            stalls = 0
        position = max(position, result.next_offset)
    return out


def by_offset(client: KafkaClient, topic: str, partition: int, offset: int, count: int = 20) -> QueryResult:
    """``count`` records of one partition from ``offset`` on."""
    _count(count)
    _partitions(client, topic, partition)
    start, end = _bounds(client, topic, partition)
    if end <= start:
        raise ConsoleError(f"{topic}-{partition} holds no records (log start and end are both {end})")
    if not start <= offset < end:
        raise ConsoleError(f"offset {offset} is out of range: {topic}-{partition} holds offsets {start} to "
                           f"{end - 1}")
    records = _read(client, topic, partition, offset, min(end, offset + count), count)
    notes = []
    if offset + count < end:
        notes.append(f"{end - offset - len(records)} more records after these (log end {end})")
    return QueryResult(tuple(records), tuple(notes))


def by_time(client: KafkaClient, topic: str, partition: int | None, from_ms: int, to_ms: int | None = None,
            count: int = 50) -> QueryResult:
    """Records with a timestamp in ``[from_ms, to_ms]`` (to the end when None), found with ListOffsets by
    time, oldest first; one partition or all of them."""
    _count(count)
    refuse_future(from_ms)
    if to_ms is not None and to_ms < from_ms:
        raise ConsoleError(f"the range ends ({format_timestamp(to_ms)}) before it starts "
                           f"({format_timestamp(from_ms)})")
    found: list[RecordView] = []
    notes: list[str] = []
    for p in _partitions(client, topic, partition):
        first = client.list_offsets(topic, {p: from_ms})[p].offset
        if first < 0:
            continue
        _, end = _bounds(client, topic, p)
        if to_ms is not None:
            after = client.list_offsets(topic, {p: to_ms + 1})[p].offset
            if after >= 0:
                end = after
        records = [r for r in _read(client, topic, p, first, end, count)
                   if r.timestamp >= from_ms and (to_ms is None or r.timestamp <= to_ms)]
        found += records
    found.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    if not found:
        notes.append(f"no record of {topic} has a timestamp at or after {format_timestamp(from_ms)}"
                     + (f" and at or before {format_timestamp(to_ms)}" if to_ms is not None else ""))
    if len(found) > count:
        notes.append(f"showing the first {count} records of the range; narrow it to see the rest")
        found = found[:count]
    return QueryResult(tuple(found), tuple(notes))


# -- key scan --------------------------------------------------------------------------------------------


def parse_key(text: str) -> bytes:
    """The key as typed: UTF-8 text, or ``hex:`` followed by hex digits for binary keys."""
    if text.startswith("hex:"):
        try:
            return bytes.fromhex(text[4:])
        except ValueError:
            raise ConsoleError(f"{text!r} is not hex: write hex:00ff... with an even number of digits") from None
    if not text:
        raise ConsoleError("no key given")
    return text.encode()


def check_scan_bound(max_records: int) -> int:
    if max_records < 1:
        raise ConsoleError("a key scan must read at least one record")
    if max_records > KEY_SCAN_LIMIT:
        raise ConsoleError(f"a key scan reads at most {KEY_SCAN_LIMIT:,} records; {max_records:,} is too many. "
                           "Narrow it: one partition (the one the default partitioner picks for the key), "
                           "or a start time")
    return max_records


@dataclass
class ScanState:
    """A key scan's progress, read by the page polling it while the scan runs in a worker thread."""

    topic: str
    key: bytes
    max_records: int
    total: int = 0
    scanned: int = 0
    matches: list[RecordView] = field(default_factory=list)
    done: bool = False
    cancelled: bool = False
    outcome: str = ""
    errors: list[str] = field(default_factory=list)
    positions: dict[int, int] = field(default_factory=dict)

    @property
    def percent(self) -> int:
        if self.done:
            return 100
        return min(99, self.scanned * 100 // self.total) if self.total else 0


def plan_scan(client: KafkaClient, topic: str, key: bytes, partition: int | None, *, default_partitioner: bool,
              from_ms: int | None, max_records: int) -> tuple[ScanState, dict[int, tuple[int, int]]]:
    """The partitions to scan and their [start, end) ranges (end: the log end when the scan starts)."""
    check_scan_bound(max_records)
    if default_partitioner and partition is None:
        require_topic(client, topic)
        count = len(client.cluster().topics[topic].partitions)
        partition = partition_for_key(key, count)
    partitions = _partitions(client, topic, partition)
    if from_ms is not None:
        refuse_future(from_ms)
    ranges: dict[int, tuple[int, int]] = {}
    for p in partitions:
        start, end = _bounds(client, topic, p)
        if from_ms is not None:
            at = client.list_offsets(topic, {p: from_ms})[p].offset
            start = end if at < 0 else max(start, at)
        if end > start:
            ranges[p] = (start, end)
    state = ScanState(topic, key, max_records, total=min(max_records, sum(e - s for s, e in ranges.values())),
                      positions={p: s for p, (s, _) in ranges.items()})
    return state, ranges


def scan_for_key(client: KafkaClient, state: ScanState, ranges: dict[int, tuple[int, int]],
                 cancelled: Callable[[], bool], on_progress: Callable[[ScanState], None] | None = None) -> ScanState:
    """Reads the ranges (all partitions in turn, a fetch each) until the bound, the end, or a cancel;
    records whose key equals ``state.key`` are kept (at most ``MAX_MATCHES``)."""
    active = {p: s for p, (s, e) in ranges.items() if s < e}
    stalls: dict[int, int] = {}
    while active and state.scanned < state.max_records:
        if cancelled():
            state.cancelled = True
            break
        try:
            results = client.fetch_many(state.topic, dict(active), max_wait_ms=0, max_bytes=FETCH_MAX_BYTES,
                                        partition_max_bytes=FETCH_MAX_BYTES // max(1, len(active)))
        except (KafkaError, ClientError) as exc:
            state.errors.append(describe_failure(exc))
            break
        for p, result in sorted(results.items()):
            position = active.get(p)
            if position is None:
                continue
            end = ranges[p][1]
            if isinstance(result, KafkaError):
                if result.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    # Retention removed the start while we scanned: go on from the new log start.
                    try:
                        active[p] = max(position, client.list_offsets(state.topic, {p: EARLIEST_TIMESTAMP})[p].offset)
                    except (KafkaError, ClientError) as exc:
                        state.errors.append(f"partition {p}: {describe_failure(exc)}")
                        del active[p]
                    continue
                state.errors.append(f"partition {p}: {describe_failure(result)}")
                del active[p]
                continue
            _consume(state, p, result, end)
            if result.next_offset <= position:
                stalls[p] = stalls.get(p, 0) + 1
                if stalls[p] >= 3:
                    state.errors.append(f"partition {p}: no progress at offset {position}")
                    del active[p]
                    continue
            else:
                stalls[p] = 0
            new_position = max(position, result.next_offset)
            state.positions[p] = new_position
            if new_position >= end:
                del active[p]
            else:
                active[p] = new_position
            if state.scanned >= state.max_records:
                break
        if on_progress is not None:
            on_progress(state)
    if state.cancelled:
        state.outcome = f"cancelled after {state.scanned:,} records"
    elif not active:
        state.outcome = f"scanned all {state.scanned:,} records in range"
    else:
        state.outcome = (f"stopped at the bound of {state.max_records:,} records; the rest of the range was not "
                         "read (raise the bound or narrow the scan)")
    state.done = True
    if on_progress is not None:
        on_progress(state)
    return state


def _consume(state: ScanState, partition: int, result: FetchResult, end: int) -> None:
    for r in result.records:
        if r.offset >= end or state.scanned >= state.max_records:
            break
        state.scanned += 1
        if r.key == state.key and len(state.matches) < MAX_MATCHES:
            state.matches.append(RecordView.of(state.topic, partition, r))


def parse_partition(text: str | None) -> int | None:
    """'' or 'all' -> None (every partition); else a partition number."""
    if text is None or text.strip() in ("", "all", "*"):
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise ConsoleError(f"partition must be a number, not {text!r}") from None
    if value < 0:
        raise ConsoleError(f"partition must not be negative ({value})")
    return value


def parse_int(text: str | None, what: str, default: int | None = None) -> int:
    if text is None or not text.strip():
        if default is None:
            raise ConsoleError(f"no {what} given")
        return default
    try:
        return int(text.strip().replace(",", "").replace("_", ""))
    except ValueError:
        raise ConsoleError(f"{what} must be a whole number, not {text!r}") from None


def views_to_json(records: Sequence[RecordView]) -> list[dict[str, object]]:
    return [r.to_json() for r in records]
