"""Running Kafka 2.6's command-line tools from the interop tests, and reading what DumpLogSegments prints."""

from __future__ import annotations

import re
import struct
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from sofakafka.protocol.records import CompressionType, decode_records, iter_batches

# The kafka_tool fixture: ``tool(main_class, args, input=None, check=True, timeout=120)``.
Tool = Callable[..., subprocess.CompletedProcess[str]]


_SETTLE_S = 30.0  # a bound on waiting for a change to reach a broker, never a timing assertion
_LOG_TIME = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\]", re.MULTILINE)  # a log4j line's time stamp


def same_output(tool: Tool, bootstrap: str, reference: str, main: str, *args: str,
                normalise: Callable[[str], str] = lambda text: text,
                until: Callable[[str], bool] | None = None) -> str:
    """Run one tool invocation against sofakafka and against Kafka 2.6 (``{b}`` in an argument is the broker's
    address) and require the same stdout and stderr, the addresses and log time stamps aside (and whatever
    ``normalise`` takes out of stdout); returns sofakafka's stdout.

    ``until``: what each broker's stdout must show before the two are compared; the invocation is repeated on a
    broker until it does (within a bound). For what reaches a broker asynchronously after an earlier change:
    Kafka 2.6 applies a dynamic broker config when ZooKeeper's change notification reaches it, so a describe
    right after an alter may not show it yet on a loaded machine."""
    outs = {}
    for name, b in (("sofakafka", bootstrap), ("kafka", reference)):
        r = tool(main, [a.replace("{b}", b) for a in args])
        deadline = time.monotonic() + _SETTLE_S
        while until is not None and not until(r.stdout) and time.monotonic() < deadline:
            time.sleep(0.5)
            r = tool(main, [a.replace("{b}", b) for a in args])
        outs[name] = (normalise(r.stdout.replace(b, "{b}")),
                      _LOG_TIME.sub("[<time>]", r.stderr.replace(b, "{b}")))
    assert outs["sofakafka"] == outs["kafka"], (
        f"{main} {' '.join(args)} printed differently:\n--- sofakafka\n{outs['sofakafka'][0]}{outs['sofakafka'][1]}"
        f"\n--- kafka 2.6\n{outs['kafka'][0]}{outs['kafka'][1]}")
    return outs["sofakafka"][0]


def topics(tool: Tool, bootstrap: str, *args: str) -> str:
    return tool("kafka.admin.TopicCommand", ["--bootstrap-server", bootstrap, *args]).stdout


def produce_lines(tool: Tool, bootstrap: str, topic: str, lines: list[str], *extra: str) -> None:
    tool("kafka.tools.ConsoleProducer", ["--bootstrap-server", bootstrap, "--topic", topic, *extra],
         input="".join(line + "\n" for line in lines))


def consume(tool: Tool, bootstrap: str, topic: str, count: int, *extra: str) -> list[str]:
    out = tool("kafka.tools.ConsoleConsumer", ["--bootstrap-server", bootstrap, "--topic", topic,
                                               "--max-messages", str(count), "--timeout-ms", "30000", *extra]).stdout
    return out.splitlines()


CODEC_NAMES = {CompressionType.NONE: "NONE", CompressionType.GZIP: "GZIP", CompressionType.SNAPPY: "SNAPPY",
               CompressionType.LZ4: "LZ4", CompressionType.ZSTD: "ZSTD"}
_BATCH = re.compile(r"^baseOffset: ")
_FIELD = re.compile(r"(\w+): (\S*)")


def _fields(line: str) -> dict[str, str]:
    """``name: value`` pairs of one DumpLogSegments line; ``payload`` (last, may hold spaces) taken whole."""
    payload = None
    if " payload: " in line:
        line, payload = line.split(" payload: ", 1)
    out = dict(_FIELD.findall(line))
    if payload is not None:
        out["payload"] = payload
    return out


def dump(kafka_tool: Tool, *files: Path, extra: tuple[str, ...] = ()) -> str:
    return kafka_tool("kafka.tools.DumpLogSegments", ["--files", ",".join(map(str, files)), *extra],
                      timeout=180).stdout


def _printable(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\n" in text or "\r" in text else text


def dump_agrees_with_our_reading(kafka_tool: Tool, segments: Sequence[Path]) -> int:
    """DumpLogSegments (deep iteration, payloads) on segment files agrees with our own reading of them on every
    batch and record field it prints; returns how many records were compared."""
    out = dump(kafka_tool, *segments, extra=("--deep-iteration", "--print-data-log"))
    dumped: dict[str, list[dict[str, str]]] = {}
    current: list[dict[str, str]] = []
    for line in out.split("\n"):  # not splitlines(): a payload may hold \x0c or \x1c, which it splits on
        if line.startswith("Dumping "):
            current = dumped.setdefault(line.removeprefix("Dumping ").strip(), [])
        elif _BATCH.match(line) or line.startswith("| offset: "):
            current.append(_fields(line.removeprefix("| ")))
    assert "isvalid: false" not in out
    records_seen = 0
    for segment in segments:
        data = segment.read_bytes()
        ours: list[dict[str, str]] = []
        for h in iter_batches(data):
            ours.append({
                "baseOffset": str(h.base_offset), "lastOffset": str(h.last_offset), "count": str(h.record_count),
                "baseSequence": str(h.base_sequence), "lastSequence": str(h.last_sequence),
                "producerId": str(h.producer_id), "producerEpoch": str(h.producer_epoch),
                "partitionLeaderEpoch": str(h.partition_leader_epoch),
                "isTransactional": str(h.is_transactional).lower(), "isControl": str(h.is_control).lower(),
                "position": str(h.position), "CreateTime": str(h.max_timestamp), "size": str(h.size),
                "magic": str(h.magic), "compresscodec": CODEC_NAMES[CompressionType(h.compression)],
                "crc": str(h.crc), "isvalid": "true"})
            for i, rec in enumerate(decode_records(data, h)):
                one = {"offset": str(rec.offset), "CreateTime": str(rec.timestamp),
                       "keysize": str(-1 if rec.key is None else len(rec.key)),
                       "valuesize": str(-1 if rec.value is None else len(rec.value)),
                       "sequence": str(-1 if h.base_sequence < 0 else h.base_sequence + i),
                       "headerKeys": "[" + ",".join(k for k, _ in rec.headers) + "]"}
                # Kafka prints key and payload as UTF-8 text, and nothing for a null one; binary ones (or with a
                # line break) are left to valuesize and the batch CRC Kafka checked (isvalid).
                for name, raw in (("key", rec.key), ("payload", rec.value)):
                    text = _printable(raw)
                    if text is not None and not (name == "key" and " " in text):
                        one[name] = text
                ours.append(one)
                records_seen += 1
        theirs = dumped[str(segment)]
        assert len(theirs) == len(ours), f"{segment.name}: DumpLogSegments saw {len(theirs)} entries, we {len(ours)}"
        for mine, kafka in zip(ours, theirs, strict=True):
            assert {k: kafka.get(k) for k in mine} == mine, (segment.name, mine, kafka)
    return records_seen


def index_dump_agrees_with_our_reading(kafka_tool: Tool, directory: Path) -> None:
    """DumpLogSegments on a partition directory's offset and time indexes (with its sanity check) finds them
    sound and prints exactly the entries we read from them."""
    indexes = sorted(directory.glob("*.index"))
    time_indexes = sorted(directory.glob("*.timeindex"))
    out = dump(kafka_tool, *indexes, *time_indexes, extra=("--index-sanity-check",))
    assert "mismatch" not in out.lower() and "Found out of order" not in out, out
    out = dump(kafka_tool, *indexes, *time_indexes)
    assert "mismatch" not in out.lower() and "Found out of order" not in out and "is corrupt" not in out.lower(), out
    printed = {
        "offset": [(int(o), int(p)) for o, p in re.findall(r"^offset: (\d+) position: (\d+)$", out, re.MULTILINE)],
        "time": [(int(t), int(o)) for t, o in re.findall(r"^timestamp: (\d+) offset: (\d+)$", out, re.MULTILINE)],
    }
    ours: dict[str, list[tuple[int, int]]] = {"offset": [], "time": []}
    for index in indexes:
        base = int(index.stem)
        raw = index.read_bytes()
        ours["offset"] += [(base + rel, pos) for rel, pos in struct.iter_unpack(">ii", raw)]
    for index in time_indexes:
        base = int(index.stem)
        raw = index.read_bytes()
        ours["time"] += [(ts, base + rel) for ts, rel in struct.iter_unpack(">qi", raw)]
    assert ours["offset"] and ours["time"]
    assert printed == ours
