"""``sofakafka produce``: kafka-console-producer.sh over the wire protocol.

One record per line of stdin, sent to ``--topic`` (created through Metadata when the broker auto-creates
topics). ``--property parse.key=true`` splits each line at ``key.separator`` (tab by default) into key and
value; a line without it stops the tool (exit 1) after what came before was sent, unless
``ignore.error=true``. Keyed records go to Kafka's murmur2 partition of their key, keyless ones fill one
batch per partition in turn; at a terminal every line is sent at once, from a pipe in batches.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TextIO

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, err, key_values, unescape
from sofakafka.client import partition_for_key
from sofakafka.protocol.errors import KafkaError
from sofakafka.protocol.records import CompressionType, Record

VERB = "produce"
SUMMARY = "records from stdin, one per line (kafka-console-producer.sh)"

_COMPRESSION = {
    "none": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}

# Bytes of record data per produce request: under the default max.message.bytes (1 MB) even uncompressed,
# so a batch of many small lines is never refused as a whole.
_MAX_REQUEST_BYTES = 512 * 1024


def _read_lines(stream: TextIO) -> Iterator[str]:
    for line in stream:
        yield line[:-1] if line.endswith("\n") else line


def run_producer(args: argparse.Namespace) -> int:
    props = key_values(args.property or [], "--property")
    parse_key = props.get("parse.key", "false").lower() == "true"
    separator = unescape(props.get("key.separator", "\t"))
    ignore_error = props.get("ignore.error", "false").lower() == "true"
    if args.compression_type not in _COMPRESSION:
        raise UsageError(f"--compression-type must be one of {', '.join(_COMPRESSION)}")
    compression = _COMPRESSION[args.compression_type]
    acks = int(args.acks) if args.acks != "all" else -1
    interactive = sys.stdin.isatty()
    status = 0
    with common.client(args, VERB) as client:
        info = client.topic(args.topic, allow_auto_topic_creation=True)
        num_partitions = len(info.partitions)
        pending: dict[int, list[Record]] = {}
        pending_records = pending_bytes = 0
        count = 0
        round_robin = 0
        timeout_ms = int(client.request_timeout_s * 1000)

        def flush() -> None:
            nonlocal status, pending_records, pending_bytes
            for partition, records in pending.items():
                try:
                    client.produce(args.topic, partition, records, acks=acks, compression=compression,
                                   timeout_ms=timeout_ms)
                except KafkaError as e:
                    err(f"ERROR when sending message to topic {args.topic} with partition {partition}: {e}")
                    status = 1
            pending.clear()
            pending_records = pending_bytes = 0

        for line in _read_lines(sys.stdin):
            key: bytes | None = None
            value = line
            if parse_key:
                k, sep, v = line.partition(separator)
                if not sep:
                    message = f"No key separator found on line {count + 1}: {line}"
                    if not ignore_error:
                        flush()
                        err(message)
                        return 1
                    err(message)
                    continue
                key, value = k.encode("utf-8"), v
            if args.partition is not None:
                partition = args.partition
            elif key is not None:
                partition = partition_for_key(key, num_partitions)
            else:
                # Keyless records fill one batch per partition in turn (Kafka 2.4+'s sticky idea).
                partition = round_robin % num_partitions
            data = value.encode("utf-8")
            pending.setdefault(partition, []).append(Record(0, int(time.time() * 1000), key, data))
            count += 1
            pending_records += 1
            pending_bytes += len(data) + len(key or b"")
            if interactive or pending_records >= args.batch_size or pending_bytes >= _MAX_REQUEST_BYTES:
                flush()
                round_robin += 1
        flush()
    return status


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Records from stdin, one per line (kafka-console-producer.sh).")
    common.add_connection_options(p, "--producer.config")
    p.add_argument("--broker-list", dest="bootstrap_server", help=argparse.SUPPRESS)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", help="parse.key=true, key.separator=..., ignore.error=true")
    p.add_argument("--acks", "--request-required-acks", default="1", choices=("0", "1", "-1", "all"))
    p.add_argument("--compression-type", "--compression-codec", default="none")
    p.add_argument("--partition", type=int, help="send every record to this partition")
    p.add_argument("--batch-size", type=int, default=500, help="records per produce request")
    return p


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_producer)
