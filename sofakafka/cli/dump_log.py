"""``sofakafka dump-log``: kafka-dump-log.sh, reading segment files directly.

``--files`` names ``.log``, ``.index`` and ``.timeindex`` files (comma-separated or repeated). A ``.log`` prints its
batches with their headers as Kafka's tool does, ``--deep-iteration`` each record too, ``--print-data-log`` keys
and values as well; an index prints its entries; ``--verify-index-only`` / ``--index-sanity-check`` check that every
``.index`` entry points at the boundary of the batch holding its offset. Files are only read (no index is opened
for writing, nothing is mapped), so it is safe on a running broker's directory. ``--json`` prints one document
instead of Kafka's text. A corrupt batch ends that file's dump with a line saying where, and a torn tail is named.
"""

from __future__ import annotations

import argparse
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sofakafka.cli import common
from sofakafka.cli.common import UsageError
from sofakafka.protocol.errors import CorruptRecordError
from sofakafka.protocol.records import CompressionType, decode_records, iter_batches, validate_batch

VERB = "dump-log"
SUMMARY = "print the batches, records and index entries of segment files (kafka-dump-log.sh)"


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Print segment files (.log), offset indexes (.index) and time indexes (.timeindex) "
                                 "as kafka-dump-log.sh does. Read-only: safe beside a running broker.")
    p.add_argument("--files", action="append", required=True, metavar="FILES",
                   help="comma-separated .log/.index/.timeindex files (repeatable)")
    p.add_argument("--deep-iteration", action="store_true", help="every record, not only batch headers")
    p.add_argument("--print-data-log", action="store_true", help="keys and values too (implies --deep-iteration)")
    p.add_argument("--verify-index-only", action="store_true", help="check index entries against the log only")
    p.add_argument("--index-sanity-check", action="store_true", help="check index entries, print no entries")
    common.add_output_options(p)
    return p


def _payload(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.hex()


def dump_log_file(path: Path, deep: bool, print_data: bool, as_json: bool) -> dict[str, Any]:
    """The batches (and with ``deep``/``print_data`` the records) of one segment; printed as Kafka's text
    unless ``as_json``, returned as a document either way."""
    data = path.read_bytes()
    base_offset = int(path.stem) if path.stem.isdigit() else 0
    batches: list[dict[str, Any]] = []
    if not as_json:
        print(f"Dumping {path}")
        print(f"Starting offset: {base_offset}")
    end = 0
    try:
        for h in iter_batches(data):
            end = h.end
            try:
                validate_batch(data, h)
                valid = True
            except CorruptRecordError:
                valid = False
            batch: dict[str, Any] = {
                "baseOffset": h.base_offset, "lastOffset": h.last_offset, "count": h.record_count,
                "baseSequence": h.base_sequence, "lastSequence": h.last_sequence, "producerId": h.producer_id,
                "producerEpoch": h.producer_epoch, "partitionLeaderEpoch": h.partition_leader_epoch,
                "isTransactional": h.is_transactional, "isControl": h.is_control, "position": h.position,
                ("LogAppendTime" if h.timestamp_type == 1 else "CreateTime"): h.max_timestamp, "size": h.size,
                "magic": h.magic, "compresscodec": CompressionType(h.compression).name, "crc": h.crc,
                "isvalid": valid,
            }
            records: list[dict[str, Any]] = []
            if deep or print_data:
                for r in decode_records(data, h):
                    rec: dict[str, Any] = {"offset": r.offset, "CreateTime": r.timestamp,
                                           "keysize": -1 if r.key is None else len(r.key),
                                           "valuesize": -1 if r.value is None else len(r.value),
                                           "headerKeys": [k for k, _ in r.headers]}
                    if print_data:
                        rec["key"] = _payload(r.key)
                        rec["payload"] = _payload(r.value)
                    records.append(rec)
                batch["records"] = records
            batches.append(batch)
            if not as_json:
                print(" ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}"
                               for k, v in batch.items() if k != "records"))
                for rec in records:
                    print("| " + " ".join(f"{k}: [{','.join(v)}]" if isinstance(v, list) else f"{k}: {v}"
                                          for k, v in rec.items()))
    except CorruptRecordError as exc:
        if not as_json:
            print(f"Found a corrupt entry at position {end}: {exc}")
        return {"file": str(path), "batches": batches, "error": f"corrupt entry: {exc}"}
    if end < len(data) and not as_json:
        print(f"Found {len(data) - end} bytes at the end that are not a complete batch (a torn write)")
    return {"file": str(path), "batches": batches, "trailingBytes": len(data) - end}


def index_entries(path: Path) -> list[tuple[int, int]]:
    """(offset, position) pairs of a ``.index``, (timestamp, offset) of a ``.timeindex``; the preallocated zeros
    after the last entry are not entries."""
    data = path.read_bytes()
    base = int(path.stem) if path.stem.isdigit() else 0
    out: list[tuple[int, int]] = []
    if path.suffix == ".index":
        for i in range(len(data) // 8):
            rel, pos = struct.unpack_from(">ii", data, i * 8)
            if i > 0 and rel == 0 and pos == 0:
                break
            out.append((base + rel, pos))
    else:
        for i in range(len(data) // 12):
            ts, rel = struct.unpack_from(">qi", data, i * 12)
            if i > 0 and ts == 0 and rel == 0:
                break
            out.append((ts, base + rel))
    return out


def verify_offset_index(path: Path) -> list[str]:
    """What is wrong with an offset index: each entry must point at the start of the batch holding its offset."""
    log = path.with_suffix(".log")
    if not log.exists():
        return [f"{log} is missing"]
    data = log.read_bytes()
    starts = {h.position: h for h in iter_batches(data)}
    problems = []
    for offset, position in index_entries(path):
        h = starts.get(position)
        if h is None:
            problems.append(f"Index offset {offset} points at position {position}, not a batch boundary")
        elif not h.base_offset <= offset <= h.last_offset:
            problems.append(f"Index offset {offset}, log offset {h.last_offset} at position {position}")
    return problems


def run_dump_log(args: argparse.Namespace) -> int:
    files = [Path(f) for spec in args.files for f in spec.split(",") if f]
    if not files:
        raise UsageError("--files names no file")
    for f in files:  # every name checked before anything is printed
        if not f.is_file():
            raise UsageError(f"{f}: no such file")
        if f.suffix not in (".log", ".index", ".timeindex"):
            raise UsageError(f"{f}: dump-log reads .log, .index and .timeindex files")
    out: list[dict[str, Any]] = []
    for f in files:
        try:
            out.extend(_dump_one(f, args))
        except OSError as e:
            raise UsageError(f"{f}: {e.strerror or e}") from None
    if args.json:
        common.print_json(out)
    return 0


def _dump_one(f: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One file's document (none for a .log under --verify-index-only), printed as text unless --json."""
    if f.suffix == ".log":
        if args.verify_index_only:
            return []
        return [dump_log_file(f, args.deep_iteration, args.print_data_log, args.json)]
    if args.verify_index_only or args.index_sanity_check:
        problems = verify_offset_index(f) if f.suffix == ".index" else []
        if not args.json:
            print(f"Dumping {f}")
            print("\n".join(problems) if problems else f"{f} passed sanity check.")
        return [{"file": str(f), "problems": problems}]
    entries = index_entries(f)
    key, value = ("offset", "position") if f.suffix == ".index" else ("timestamp", "offset")
    if not args.json:
        print(f"Dumping {f}")
        for a, b in entries:
            print(f"{key}: {a} {value}: {b}")
    return [{"file": str(f), "entries": [{key: a, value: b} for a, b in entries]}]


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_dump_log)
