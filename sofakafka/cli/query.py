"""``sofakafka query``: the web console's message query in the terminal (no Kafka script stands for it).

Exactly one way to find records: ``--partition P --offset N`` (records from offset N), ``--from TIME [--to TIME]``
(ListOffsets by time, one partition or all), or ``--key K`` (a scan of the topic, or of ``--partition`` or the
partition the default partitioner picks, from ``--from`` if given, reading at most ``--max-records``, with its
progress on stderr). Records are a table (partition, offset, timestamp, key, value, headers), or with ``--json``
a document with the records and the notes (why a query stopped where it did). Bad input (an unknown topic, an
offset out of range, a time in the future, a scan beyond the bound) is one line on stderr and exit code 2.
The queries are the console's own (sofakafka/console/query.py): the same bounds and messages in both.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sofakafka.cli import common
from sofakafka.cli.common import UsageError
from sofakafka.client import KafkaClient
from sofakafka.console import query as q
from sofakafka.console.cluster import ConsoleError
from sofakafka.console.offsets import parse_time_ms
from sofakafka.console.records import RecordView

VERB = "query"
SUMMARY = "find records by offset, time range or key (the console's message query)"


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Find records of a topic by offset, by time range or by key, as the web "
                                 "console's message query does.")
    common.add_connection_options(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="one partition (default: all; required with --offset)")
    p.add_argument("--offset", type=int, help="records from this offset of --partition")
    p.add_argument("--from", dest="from_time",
                   help="records at or after this time (UTC ISO 8601 or epoch ms); with --key, where the scan starts")
    p.add_argument("--to", dest="to_time", help="with --from alone: records at or before this time")
    p.add_argument("--key", help="records with this key (text, or hex:00ff): a bounded scan with progress")
    p.add_argument("--max-records", type=int, default=q.KEY_SCAN_DEFAULT,
                   help=f"--key: read at most this many records (default {q.KEY_SCAN_DEFAULT:,}, "
                        f"at most {q.KEY_SCAN_LIMIT:,})")
    p.add_argument("--default-partitioner", action="store_true",
                   help="--key: scan only the partition the default partitioner picks for the key")
    p.add_argument("--count", type=int, default=20,
                   help=f"--offset/--from: at most this many records (default 20, at most {q.MAX_RESULTS})")
    p.add_argument("--view", choices=["auto", "text", "json", "hex"], default="auto", help="how values are shown")
    common.add_output_options(p)
    return p


def _key_scan(args: argparse.Namespace, client: KafkaClient) -> tuple[list[RecordView], list[str]]:
    key = q.parse_key(args.key)
    from_ms = parse_time_ms(args.from_time) if args.from_time is not None else None
    state, ranges = q.plan_scan(client, args.topic, key, args.partition,
                                default_partitioner=args.default_partitioner, from_ms=from_ms,
                                max_records=args.max_records)
    progress = common.Progress()

    def report(s: q.ScanState) -> None:
        progress.report(f"scanned {s.scanned:,}/{s.total:,} records ({s.percent}%), {len(s.matches)} found",
                        final=s.done)

    q.scan_for_key(client, state, ranges, lambda: False, report)
    return state.matches, [state.outcome, *state.errors]


def _find(args: argparse.Namespace) -> tuple[list[RecordView], list[str]]:
    with common.client(args, VERB) as client:
        if args.key is not None:
            return _key_scan(args, client)
        if args.offset is not None:
            if args.partition is None:
                raise UsageError("--partition is required with --offset")
            result = q.by_offset(client, args.topic, args.partition, args.offset, args.count)
        else:
            to_ms = parse_time_ms(args.to_time) if args.to_time else None
            result = q.by_time(client, args.topic, args.partition, parse_time_ms(args.from_time), to_ms, args.count)
        return list(result.records), list(result.notes)


def _shown_value(r: RecordView, view: str) -> str:
    if view == "auto":
        return r.value.shown
    return {"text": r.value.text, "json": r.value.json, "hex": r.value.hex}[view] or r.value.shown


def run_query(args: argparse.Namespace) -> int:
    ways = [bool(args.offset is not None), bool(args.key is not None),
            bool(args.from_time is not None and args.key is None)]
    if sum(ways) != 1:
        raise UsageError("exactly one of --offset, --from, --key is required (--key may take --from as the scan's "
                         "start)")
    if args.to_time is not None and (args.from_time is None or args.key is not None):
        raise UsageError("--to goes with --from (a time query), not with --offset or --key")
    try:
        records, notes = _find(args)
    except ConsoleError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        common.print_json({"notes": notes, "records": [r.to_json() for r in records]})
        return 0
    for n in notes:
        common.err(f"# {n}")
    rows = [["PARTITION", "OFFSET", "TIMESTAMP", "KEY", "VALUE", "HEADERS"]]
    for r in records:
        rows.append([str(r.partition), str(r.offset), r.time, r.key.shown,
                     _shown_value(r, args.view).replace("\n", " "),
                     ",".join(f"{k}={h.shown}" for k, h in r.headers) or "-"])
    common.print_table(rows)
    return 0


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_query)
