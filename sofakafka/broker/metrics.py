"""The broker's metrics, named as Kafka's JMX metrics come out of the Prometheus JMX exporter's common Kafka
rules (lower-cased names and label names: ``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t``
becomes ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``), so dashboards and alerts written for a
Kafka cluster read ours unchanged. docs/metrics.md lists every series.

Cost on the hot path: the broker counts per request and per produced/fetched batch set, into plain ints in
dicts on its event loop (no lock, no per-record work, no prometheus_client call). Everything else is read
when Prometheus scrapes: sofakafka/broker/metrics_export.py's collector turns the counters and a
:class:`BrokerGauges` snapshot (taken from the broker's state by a callback, on the event loop, where that
state lives) into metric families, and prometheus_client writes the text format. This module imports neither
prometheus_client nor aiohttp: a broker without ``metrics.listener`` never loads them.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field

from sofakafka.protocol.api import ApiKey

# Kafka's request histograms report these percentiles (the exporter's quantile label is "0.<n>").
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))
LATENCY_RESERVOIR = 1028  # Kafka's (Yammer) exponentially-decaying reservoir keeps 1028 samples


FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"
_REQUEST_NAMES: dict[int, str] = {}


def request_name(api_key: int) -> str:
    """Kafka's ``request`` label: the API's name as Kafka spells it (``Produce``, ``ListOffsets``, ...)."""
    name = _REQUEST_NAMES.get(api_key)
    if name is None:
        try:
            name = "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
        except ValueError:
            name = f"Unknown{api_key}"
        _REQUEST_NAMES[api_key] = name
    return name


@dataclass
class _Latency:
    """The last LATENCY_RESERVOIR total times of one API (ms) and the running count and sum."""

    samples: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_RESERVOIR))
    count: int = 0
    total_ms: float = 0.0


class BrokerMetrics:
    """The counters the broker bumps on its event loop. Not thread-safe by design: one loop owns it."""

    def __init__(self) -> None:
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.messages_in: dict[str, int] = defaultdict(int)
        self.produce_requests: dict[str, int] = defaultdict(int)
        self.failed_produce_requests: dict[str, int] = defaultdict(int)
        self.fetch_requests: dict[str, int] = defaultdict(int)
        self.failed_fetch_requests: dict[str, int] = defaultdict(int)
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.errors: dict[tuple[str, str], int] = defaultdict(int)
        self.latency: dict[str, _Latency] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.connections_created = 0
        self.connections_closed = 0
        self.audit_entries_written = 0
        self.audit_entries_dropped = 0
        self.idle = IdleMeter()

    # -- per request / per batch set (hot path: keep these to dict increments) ---------------------------

    def record_request(self, api_key: int, api_version: int, total_ms: float, fetch_kind: str | None = None) -> None:
        """One answered request. A Fetch also counts as ``FetchConsumer`` or ``FetchFollower`` (``fetch_kind``),
        as Kafka's RequestMetrics count it under both names."""
        self._record(request_name(api_key), api_version, total_ms)
        if fetch_kind is not None:
            self._record(fetch_kind, api_version, total_ms)

    def _record(self, name: str, api_version: int, total_ms: float) -> None:
        self.requests[(name, api_version)] += 1
        lat = self.latency.get(name)
        if lat is None:
            lat = self.latency[name] = _Latency()
        lat.samples.append(total_ms)
        lat.count += 1
        lat.total_ms += total_ms

    def record_error(self, api_key: int, error_name: str) -> None:
        self.errors[(request_name(api_key), error_name)] += 1

    def record_produce(self, topic: str, size: int, messages: int) -> None:
        """One partition's appended batch set (``messages``: the records the append assigned offsets to)."""
        self.bytes_in[topic] += size
        self.messages_in[topic] += messages
        self.produce_requests[topic] += 1

    def record_failed_produce(self, topic: str, error_name: str) -> None:
        self.produce_requests[topic] += 1
        self.failed_produce_requests[topic] += 1
        self.errors[("Produce", error_name)] += 1

    def record_fetch(self, topic: str, size: int, *, replica: bool = False) -> None:
        """Bytes a fetch response carried for one partition: a consumer's count in BytesOut, a follower's in
        ReplicationBytesOut instead (as Kafka's BrokerTopicStats.updateBytesOut splits them); both count a
        fetch request of the topic."""
        self.fetch_requests[topic] += 1
        if replica:
            self.replication_bytes_out += size
        else:
            self.bytes_out[topic] += size

    def record_failed_fetch(self, topic: str, error_name: str) -> None:
        self.fetch_requests[topic] += 1
        self.failed_fetch_requests[topic] += 1
        self.errors[("Fetch", error_name)] += 1


class IdleMeter:
    """The event loop's idle ratio (Kafka's NetworkProcessorAvgIdlePercent: here the loop is the network
    processor): 1 - the loop thread's CPU time over wall time, sampled by a task on the loop itself."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.ratio = 1.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="metrics-idle-meter")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        wall, cpu = time.monotonic(), time.thread_time()
        while True:
            await asyncio.sleep(self.interval_s)
            now_wall, now_cpu = time.monotonic(), time.thread_time()
            elapsed = now_wall - wall
            if elapsed > 0:
                self.ratio = min(1.0, max(0.0, 1.0 - (now_cpu - cpu) / elapsed))
            wall, cpu = now_wall, now_cpu


@dataclass(frozen=True)
class PartitionGauge:
    """One local replica: its log's size and offsets, and whether this broker leads it."""

    topic: str
    partition: int
    size: int
    log_start_offset: int
    log_end_offset: int
    num_segments: int
    is_leader: bool
    under_replicated: bool


@dataclass(frozen=True)
class GroupLag:
    group: str
    topic: str
    partition: int
    committed: int
    lag: int


@dataclass(frozen=True)
class QuotaSensorGauge:
    """One client quota sensor (broker/client_quotas.py) as Kafka's JMX shows it:
    ``kafka.server:type=<quota_type>,user=<user>,client-id=<client_id>``, a tag left out where it is empty."""

    quota_type: str
    """Kafka's QuotaType: ``Produce``, ``Fetch`` or ``Request``."""
    user: str
    """The user as Kafka tags it (sanitized: URL-encoded); "" when the sensor is shared by all of a client id's users."""
    client_id: str
    """"" when the sensor is shared by all of a user's client ids."""
    rate: float
    """``byte-rate`` (bytes/s) of Produce and Fetch, ``request-time`` (percent of one thread) of Request."""
    throttle_time: float
    """``throttle-time``: the mean throttle time (ms) given over the last minute or so, NaN with none."""


@dataclass
class BrokerGauges:
    """What the broker's state says at scrape time (read on the event loop by the broker's callback)."""

    partitions: list[PartitionGauge] = field(default_factory=list)
    active_controller: bool = False
    offline_partitions: int = 0
    """Kafka reports it on the active controller only (0 elsewhere)."""
    global_partitions: int = 0
    global_topics: int = 0
    purgatory: dict[str, int] = field(default_factory=dict)
    """``Produce`` / ``Fetch`` -> delayed operations waiting."""
    group_lags: list[GroupLag] = field(default_factory=list)
    connections: int = 0
    quota_sensors: list[QuotaSensorGauge] = field(default_factory=list)
