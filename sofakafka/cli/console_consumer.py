"""``sofakafka consume``: kafka-console-consumer.sh over the wire protocol.

Prints the records of ``--topic`` (every partition, or ``--partition`` from ``--offset``), from the log end or
``--from-beginning``, until ``--max-messages`` or ``--timeout-ms`` without a record (or Ctrl-C), then
"Processed a total of N messages" on stderr, as Kafka's tool. ``--property print.key=true`` and its siblings
choose the fields of each line, with Kafka's names and separators.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, err, key_values, unescape
from sofakafka.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, KafkaClient
from sofakafka.protocol.errors import ErrorCode, KafkaError

VERB = "consume"
SUMMARY = "print records (kafka-console-consumer.sh)"


def run_consumer(args: argparse.Namespace) -> int:
    props = key_values(args.property or [], "--property")

    def flag(name: str) -> bool:
        return props.get(name, "false").lower() == "true"

    print_key, print_ts, print_part, print_off, print_headers = (
        flag("print.key"), flag("print.timestamp"), flag("print.partition"), flag("print.offset"),
        flag("print.headers"))
    key_sep = unescape(props.get("key.separator", "\t"))
    line_sep = unescape(props.get("line.separator", "\n"))
    headers_sep = unescape(props.get("headers.separator", ","))
    null_literal = props.get("null.literal", "null")
    if args.offset is not None and args.partition is None:
        raise UsageError("--offset requires --partition")
    if args.offset is not None and args.from_beginning:
        raise UsageError("--from-beginning cannot be combined with --offset")

    def text(b: bytes | None) -> str:
        return null_literal if b is None else b.decode("utf-8", errors="replace")

    out = sys.stdout
    consumed = 0
    status = 0
    try:
        with common.client(args, VERB) as client:
            info = client.topic(args.topic)
            partitions = [args.partition] if args.partition is not None else sorted(info.partitions)
            if args.partition is not None and args.partition not in info.partitions:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{args.topic} has no partition {args.partition}")
            positions = _start_offsets(client, args, partitions)
            last_data = time.monotonic()
            while args.max_messages is None or consumed < args.max_messages:
                wait = 500
                if args.timeout_ms is not None:
                    left = args.timeout_ms - (time.monotonic() - last_data) * 1000
                    if left <= 0:
                        break
                    wait = max(0, min(wait, int(left)))
                results = client.fetch_many(args.topic, positions, max_wait_ms=wait)
                for partition in sorted(results):
                    result = results[partition]
                    if isinstance(result, KafkaError):
                        if result.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                            # Kafka's console consumer resets with auto.offset.reset; ours follows --from-beginning.
                            reset = EARLIEST_TIMESTAMP if args.from_beginning else LATEST_TIMESTAMP
                            found = client.list_offsets(args.topic, {partition: reset})
                            positions[partition] = found[partition].offset
                        elif not result.retriable:
                            raise result
                        else:
                            time.sleep(client.retry_backoff_s)  # a leader moving: let the metadata catch up
                        continue
                    positions[partition] = result.next_offset
                    if result.records:
                        last_data = time.monotonic()
                    for record in result.records:
                        if args.max_messages is not None and consumed >= args.max_messages:
                            break
                        parts: list[str] = []
                        if print_ts:
                            parts.append(f"CreateTime:{record.timestamp}" if record.timestamp >= 0 else "NO_TIMESTAMP")
                        if print_part:
                            parts.append(f"Partition:{partition}")
                        if print_off:
                            parts.append(f"Offset:{record.offset}")
                        if print_headers:
                            parts.append(headers_sep.join(f"{k}:{text(v)}" for k, v in record.headers) or "NO_HEADERS")
                        if print_key:
                            parts.append(text(record.key))
                        parts.append(text(record.value))
                        out.write(key_sep.join(parts) + line_sep)
                        consumed += 1
                out.flush()
    except KeyboardInterrupt:
        # Ctrl-C is how a console consumer without --max-messages ends; the total still matters.
        status = 130
    err(f"Processed a total of {consumed} messages")
    return status


def _start_offsets(client: KafkaClient, args: argparse.Namespace, partitions: list[int]) -> dict[int, int]:
    if args.offset is not None:
        where = str(args.offset).lower()
        if where == "earliest":
            ts = EARLIEST_TIMESTAMP
        elif where == "latest":
            ts = LATEST_TIMESTAMP
        else:
            try:
                return {partitions[0]: int(where)}
            except ValueError:
                raise UsageError("--offset must be earliest, latest or a number") from None
    else:
        ts = EARLIEST_TIMESTAMP if args.from_beginning else LATEST_TIMESTAMP
    found = client.list_offsets(args.topic, {p: ts for p in partitions})
    return {p: found[p].offset for p in partitions}


def build_parser() -> argparse.ArgumentParser:
    k = common.verb_parser(VERB, "Print records (kafka-console-consumer.sh).")
    common.add_connection_options(k, "--consumer.config")
    k.add_argument("--topic", required=True)
    k.add_argument("--from-beginning", action="store_true")
    k.add_argument("--partition", type=int)
    k.add_argument("--offset", help="earliest, latest or an offset (needs --partition)")
    k.add_argument("--max-messages", type=int)
    k.add_argument("--timeout-ms", type=int, help="exit when no record arrived for this long")
    k.add_argument("--property", action="append",
                   help="print.key, print.timestamp, print.partition, print.offset, print.headers, "
                        "key.separator, line.separator, null.literal")
    return k


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_consumer)
