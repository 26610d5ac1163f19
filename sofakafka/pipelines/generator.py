"""Realistic web access logs and orders, produced to a topic at a chosen rate.

Two event streams, both deterministic for a seed (the tests compute their pandas reference from the very
events produced):

- **access logs**, one line per request in the Combined Log Format's first fields plus the response time
  in milliseconds (what nginx's ``$request_time`` logs, in ms)::

      203.0.113.7 - - [25/Nov/2026:13:45:01 +0000] "GET /api/orders HTTP/1.1" 200 512 37

  Clients follow a skewed popularity (a few heavy clients, a long tail), paths a fixed mix, latencies a
  log-normal per path; now and then a burst of 5xx answers on one path; a fraction of lines arrives late
  (its event time minutes behind the others), as logs shipped from a host that was cut off do.
- **orders**, one JSON object per order: ``{"order_id", "region", "amount_cents", "currency", "ts"}``, keyed by
  order id, with a region mix that drifts over the day.

Event time comes from a clock the generator keeps: ``start_ms`` plus ``i / events_per_s`` for event ``i``
(``time_scale`` > 1 makes event time run faster than the wall clock, so that one-minute windows close within
seconds in a demo). Producing uses sofakafka's own wire client (no Kafka library to install): records are
partitioned by key with Kafka's murmur2, sent in batches, and paced to ``rate`` records per second of wall
time (or as fast as the broker takes them when no rate is given).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sofakafka.client import KafkaClient, NewTopic, partition_for_key
from sofakafka.pipelines.naming import physical_topic
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.records.v2 import Record

ACCESS_LOG_PATTERN = (
    r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) (\d+)$'
)
"""Fields: client, time (``%d/%b/%Y:%H:%M:%S %z``), method, path, status, bytes, latency ms. One regex that
Python's ``re`` and Java's ``java.util.regex`` (Spark's regexp_extract) read alike."""
ACCESS_LOG_TIME_FORMAT = "%d/%b/%Y:%H:%M:%S %z"
SPARK_ACCESS_LOG_TIME_FORMAT = "dd/MMM/yyyy:HH:mm:ss Z"

PATHS: Sequence[tuple[str, str, float, float]] = (
    # path, method, share of requests, median latency ms
    ("/", "GET", 0.20, 12.0),
    ("/api/products", "GET", 0.25, 35.0),
    ("/api/orders", "POST", 0.12, 80.0),
    ("/api/orders", "GET", 0.10, 45.0),
    ("/api/cart", "PUT", 0.10, 25.0),
    ("/static/app.js", "GET", 0.15, 4.0),
    ("/login", "POST", 0.05, 120.0),
    ("/admin/reports", "GET", 0.03, 400.0),
)
REGIONS: Sequence[str] = ("cn-north", "cn-east", "cn-south", "eu-west", "us-east", "ap-southeast")


@dataclass(frozen=True)
class Event:
    """One record to produce: its event time (also the record's timestamp), key and value."""

    timestamp_ms: int
    key: bytes
    value: bytes


class _Clock:
    def __init__(self, start_ms: int, events_per_s: float) -> None:
        if events_per_s <= 0:
            raise ValueError(f"events_per_s must be positive, not {events_per_s}")
        self.start_ms = start_ms
        self.step_ms = 1000.0 / events_per_s

    def at(self, i: int) -> int:
        return self.start_ms + int(i * self.step_ms)


class AccessLogs:
    """Access-log events; ``late_fraction`` of them lag the clock by up to ``max_lateness_s`` seconds."""

    def __init__(self, *, seed: int = 1, start_ms: int | None = None, events_per_s: float = 100.0,
                 clients: int = 500, late_fraction: float = 0.02, max_lateness_s: float = 180.0,
                 burst_every: int = 3000, burst_length: int = 300) -> None:
        self.rng = random.Random(seed)
        self.clock = _Clock(int(time.time() * 1000) if start_ms is None else start_ms, events_per_s)
        # Skewed popularity: client k is picked with weight 1/(k+1) (Zipf-like, a few heavy hitters).
        self.clients = [f"198.51.{k // 250}.{k % 250 + 1}" for k in range(clients)]
        self.client_weights = [1.0 / (k + 1) for k in range(clients)]
        self.paths = list(PATHS)
        self.path_weights = [p[2] for p in PATHS]
        self.late_fraction = late_fraction
        self.max_lateness_ms = int(max_lateness_s * 1000)
        self.burst_every, self.burst_length = burst_every, burst_length
        self.i = 0

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        i, rng = self.i, self.rng
        self.i += 1
        ts = self.clock.at(i)
        if rng.random() < self.late_fraction:
            ts -= rng.randint(self.max_lateness_ms // 3, self.max_lateness_ms)
        path, method, _, median = rng.choices(self.paths, self.path_weights)[0]
        client = rng.choices(self.clients, self.client_weights)[0]
        in_burst = self.burst_every > 0 and i % self.burst_every >= self.burst_every - self.burst_length
        if in_burst and path.startswith("/api/"):
            status = rng.choice((500, 502, 503))
        else:
            status = rng.choices((200, 201, 204, 301, 304, 400, 401, 404, 500, 503),
                                 (70, 5, 3, 2, 8, 3, 2, 5, 1, 1))[0]
        latency = max(1, int(rng.lognormvariate(math.log(median), 0.6)))
        size = 0 if status in (204, 304) else int(rng.lognormvariate(7, 1))
        line = access_log_line(client, ts, method, path, status, size, latency)
        return Event(ts, client.encode(), line.encode())


def access_log_line(client: str, ts_ms: int, method: str, path: str, status: int, size: int,
                    latency_ms: int) -> str:
    when = datetime.fromtimestamp(ts_ms // 1000, UTC).strftime(ACCESS_LOG_TIME_FORMAT)
    return f'{client} - - [{when}] "{method} {path} HTTP/1.1" {status} {size} {latency_ms}'


class Orders:
    """Order events: amounts in cents (exact sums), regions weighted with a slow drift."""

    def __init__(self, *, seed: int = 1, start_ms: int | None = None, events_per_s: float = 50.0) -> None:
        self.rng = random.Random(seed)
        self.clock = _Clock(int(time.time() * 1000) if start_ms is None else start_ms, events_per_s)
        self.i = 0

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        i, rng = self.i, self.rng
        self.i += 1
        ts = self.clock.at(i)
        minute = ts // 60_000
        weights = [1.0 + 0.5 * math.sin(minute / 7.0 + k) for k in range(len(REGIONS))]
        region = rng.choices(REGIONS, weights)[0]
        order_id = f"o-{rng.getrandbits(48):012x}"
        amount = int(rng.lognormvariate(math.log(4500), 0.8))
        when = datetime.fromtimestamp(ts / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        value = json.dumps({"order_id": order_id, "region": region, "amount_cents": amount,
                            "currency": "CNY", "ts": when}, separators=(",", ":"))
        return Event(ts, order_id.encode(), value.encode())


def take(events: Iterable[Event], count: int) -> list[Event]:
    return list(itertools.islice(events, count))


def ensure_topic(client: KafkaClient, topic: str, partitions: int, replication: int = 1) -> int:
    """Create ``topic`` unless it exists; returns its partition count."""
    result = client.create_topics([NewTopic(topic, partitions, replication)])[topic]
    if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        raise RuntimeError(f"cannot create topic {topic}: {result.error.name} {result.error_message or ''}")
    deadline = time.monotonic() + 30
    while True:
        info = client.metadata([topic]).topics.get(topic)
        if info is not None and info.partitions and all(p.leader >= 0 for p in info.partitions.values()):
            return len(info.partitions)
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} has partitions without a leader after 30 s")
        time.sleep(0.1)


def produce(client: KafkaClient, topic: str, events: Iterable[Event], *, rate: float | None = None,
            batch_size: int = 500, acks: int = -1, progress: bool = False,
            stop: Iterable[bool] | None = None) -> int:
    """Send ``events`` to ``topic``, keyed, each partition's records in order; returns how many were sent.

    With ``rate``, no more than ``rate`` records per second of wall time leave (sent in bursts of a tenth of
    a second). Every batch is acknowledged (``acks``) before the next is sent, so a return means they all are."""
    partitions = len(client.topic(topic).partitions)
    started = time.monotonic()
    sent = 0
    last_report = started
    pending: dict[int, list[Record]] = {}
    burst = batch_size if rate is None else max(1, min(batch_size, int(rate / 10) or 1))
    stop_flags = iter(stop) if stop is not None else None

    def flush() -> None:
        for partition, records in pending.items():
            if records:
                client.produce(topic, partition, records, acks=acks)
        pending.clear()

    chunk = 0
    for event in events:
        p = partition_for_key(event.key, partitions)
        pending.setdefault(p, []).append(Record(0, event.timestamp_ms, event.key, event.value))
        sent += 1
        chunk += 1
        if chunk >= burst:
            flush()
            chunk = 0
            if stop_flags is not None and next(stop_flags, False):
                break
            if rate is not None:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            if progress and time.monotonic() - last_report >= 5:
                last_report = time.monotonic()
                elapsed = last_report - started
                print(f"generator: {sent} records to {topic} ({sent / elapsed:.0f}/s)", file=sys.stderr)
    flush()
    return sent


def add_topic_options(parser: argparse.ArgumentParser, default_topic: str) -> None:
    parser.add_argument("--topic", default=default_topic, help=f"logical topic name (default {default_topic})")
    parser.add_argument("--instance", help="LDC instance (namespace): the topic is $INSTANCE.$CELL.$TOPIC")
    parser.add_argument("--cell", help="LDC cell; with --instance names the cell's physical topic")


def topic_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    try:
        return physical_topic(args.topic, instance=args.instance, cell=args.cell)
    except ValueError as exc:
        parser.error(str(exc))
        raise  # parser.error exits; this keeps type checkers content


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sofakafka.pipelines generate",
        description="Produce realistic access logs or orders to a topic at a chosen rate.")
    parser.add_argument("kind", choices=("logs", "orders"))
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    add_topic_options(parser, "<kind>")
    parser.add_argument("--rate", type=float, default=200.0,
                        help="records per second of wall time (0: as fast as the broker takes them)")
    parser.add_argument("--count", type=int, help="stop after this many records (default: run until Ctrl-C)")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="event time runs this many times faster than the wall clock (default 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=3, help="when the topic has to be created")
    args = parser.parse_args(argv)
    if args.topic == "<kind>":
        args.topic = "access-logs" if args.kind == "logs" else "orders"
    if args.rate < 0 or (args.count is not None and args.count < 0) or args.time_scale <= 0:
        parser.error("--rate and --count must not be negative, --time-scale must be positive")
    topic = topic_from(args, parser)
    per_s = (args.rate or 1000.0) * args.time_scale
    source: Iterator[Event] = (AccessLogs(seed=args.seed, events_per_s=per_s) if args.kind == "logs"
                               else Orders(seed=args.seed, events_per_s=per_s))
    events: Iterable[Event] = source if args.count is None else itertools.islice(source, args.count)
    with KafkaClient(args.bootstrap_server) as client:
        ensure_topic(client, topic, args.partitions)
        try:
            sent = produce(client, topic, events, rate=args.rate or None, progress=True)
        except KeyboardInterrupt:
            print("generator: interrupted", file=sys.stderr)
            return 130
    print(f"generator: {sent} records to {topic}", file=sys.stderr)
    return 0
