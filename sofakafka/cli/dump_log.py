"""``sofakafka dump-log``: kafka-dump-log.sh, reading segment files directly.

``--files`` names ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` files (comma-separated or repeated). A
``.log`` prints its batches with their headers as Kafka's tool does, ``--deep-iteration`` each record too,
``--print-data-log`` keys and values as well; an index prints its entries (a ``.txnindex`` its aborted
transactions); ``--verify-index-only`` / ``--index-sanity-check`` check that every
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
from sofakafka.protocol.errors import CorruptRecordError, DecodeError
from sofakafka.protocol.records import (
    MAGIC_V2,
    CompressionType,
    ControlRecordType,
    EndTransactionMarker,
    Record,
    decode_control_key,
    decode_records,
    iter_batches,
    validate_batch,
)
from sofakafka.storage.transaction_index import ENTRY_SIZE, AbortedTxn

VERB = "dump-log"
SUMMARY = "print the batches, records and index entries of segment files (kafka-dump-log.sh)"


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Print segment files (.log), offset indexes (.index), time indexes (.timeindex) "
                                 "and aborted-transaction indexes (.txnindex) as kafka-dump-log.sh does. "
                                 "Read-only: safe beside a running broker.")
    p.add_argument("--files", action="append", required=True, metavar="FILES",
                   help="comma-separated .log/.index/.timeindex/.txnindex files (repeatable)")
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


def _control(record: Record) -> dict[str, Any]:
    """A control record as kafka-dump-log.sh names it: a transaction marker with its coordinator epoch, any other
    control type by its number."""
    try:
        marker = EndTransactionMarker.decode(record)
        return {"endTxnMarker": marker.control_type.name, "coordinatorEpoch": marker.coordinator_epoch}
    except DecodeError:
        try:
            type_id = decode_control_key(record.key)
        except DecodeError:
            return {"controlType": "UNKNOWN(-1)"}
        try:
            name = ControlRecordType(type_id).name
        except ValueError:
            name = "UNKNOWN"
        return {"controlType": f"{name}({type_id})"}


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
            time_key = "LogAppendTime" if h.timestamp_type == 1 else "CreateTime"
            batch: dict[str, Any] = {
                "baseOffset": h.base_offset, "lastOffset": h.last_offset, "count": h.record_count,
                "baseSequence": h.base_sequence, "lastSequence": h.last_sequence, "producerId": h.producer_id,
                "producerEpoch": h.producer_epoch, "partitionLeaderEpoch": h.partition_leader_epoch,
                "isTransactional": h.is_transactional, "isControl": h.is_control, "position": h.position,
                time_key: h.max_timestamp, "size": h.size,
                "magic": h.magic, "compresscodec": CompressionType(h.compression).name, "crc": h.crc,
                "isvalid": valid,
            }
            records: list[dict[str, Any]] = []
            if deep or print_data:
                for i, r in enumerate(decode_records(data, h)):
                    rec: dict[str, Any] = {"offset": r.offset, time_key: r.timestamp,
                                           "keysize": -1 if r.key is None else len(r.key),
                                           "valuesize": -1 if r.value is None else len(r.value)}
                    if h.magic >= MAGIC_V2:
                        rec["sequence"] = -1 if h.base_sequence < 0 else h.base_sequence + i
                    rec["headerKeys"] = [k for k, _ in r.headers]
                    if h.is_control:
                        rec.update(_control(r))
                    elif print_data:
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


def aborted_transactions(path: Path) -> list[AbortedTxn]:
    """The entries of a ``.txnindex``, in marker order; a torn trailing entry is not one."""
    data = path.read_bytes()
    return [AbortedTxn.decode(data, i) for i in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE)]


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
        if f.suffix not in (".log", ".index", ".timeindex", ".txnindex"):
            raise UsageError(f"{f}: dump-log reads .log, .index, .timeindex and .txnindex files")
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
    if f.suffix == ".txnindex":
        txns = aborted_transactions(f)
        if not args.json:
            print(f"Dumping {f}")
            for t in txns:
                print(f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                      f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")
        return [{"file": str(f), "abortedTransactions": [
            {"version": t.version, "producerId": t.producer_id, "firstOffset": t.first_offset,
             "lastOffset": t.last_offset, "lastStableOffset": t.last_stable_offset} for t in txns]}]
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
