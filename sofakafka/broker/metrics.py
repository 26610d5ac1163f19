"""The broker's metrics, named as Kafka's JMX metrics come out of the Prometheus JMX exporter's common Kafka
rules (lower-cased names and label names: ``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t``
becomes ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``), so dashboards and alerts written for a
Kafka cluster read ours unchanged. docs/metrics.md lists every series.

Cost on the hot path: the broker counts per request and per produced/fetched batch set, into plain ints in
dicts on its event loop (no lock, no per-record work, no prometheus_client call). Everything else is read
when Prometheus scrapes: :class:`BrokerCollector` turns the counters and a :class:`BrokerGauges` snapshot
(taken from the broker's state by a callback, on the event loop, where that state lives) into metric
families, and prometheus_client writes the text format. Process CPU and memory come from
prometheus_client's own process collector.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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


class BrokerCollector(Collector):
    """Turns the counters and a gauge snapshot into Kafka-named metric families."""

    def __init__(self, metrics: BrokerMetrics, gauges: Callable[[], BrokerGauges]) -> None:
        self.metrics = metrics
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        yield from self._topic_counters()
        yield _counter("kafka_server_brokertopicmetrics_replicationbytesin", "Bytes followers fetched into this broker",
                       [({}, m.replication_bytes_in)])
        yield _counter("kafka_server_brokertopicmetrics_replicationbytesout", "Bytes followers fetched from this broker",
                       [({}, m.replication_bytes_out)])
        yield _counter("kafka_network_requestmetrics_requests", "Requests answered, per API and version",
                       [({"request": name, "version": str(v)}, n) for (name, v), n in sorted(m.requests.items())])
        yield _counter("kafka_network_requestmetrics_errors", "Error codes in responses, per API",
                       [({"request": name, "error": err}, n) for (name, err), n in sorted(m.errors.items())])
        yield self._latency()
        yield _counter("kafka_server_replicamanager_isrshrinks", "Times an ISR led here lost a replica",
                       [({}, m.isr_shrinks)])
        yield _counter("kafka_server_replicamanager_isrexpands", "Times an ISR led here regained a replica",
                       [({}, m.isr_expands)])
        yield _gauge("kafka_network_socketserver_networkprocessoravgidlepercent",
                     "Fraction of time the broker's event loop was idle (last second)", [({}, m.idle.ratio)])
        yield _counter("kafka_server_socketservermetrics_connection_creation", "Connections accepted",
                       [({}, m.connections_created)])
        yield _counter("kafka_server_socketservermetrics_connection_close", "Connections closed",
                       [({}, m.connections_closed)])
        yield _counter("sofakafka_produce_audit_entries_written", "Produce audit entries written to "
                       "__sofakafka_produce_audit (sofakafka.produce.audit.enable)", [({}, m.audit_entries_written)])
        yield _counter("sofakafka_produce_audit_entries_dropped", "Produce audit entries given up (the audit topic "
                       "could not be written for too long)", [({}, m.audit_entries_dropped)])
        yield from self._state(self.gauges())

    def _topic_counters(self) -> Iterable[Metric]:
        m = self.metrics
        for name, doc, per_topic in (
            ("bytesin", "Bytes appended by producers", m.bytes_in),
            ("bytesout", "Bytes sent to consumers in fetch responses", m.bytes_out),
            ("messagesin", "Records appended by producers", m.messages_in),
            ("totalproducerequests", "Produce requests, per topic partition", m.produce_requests),
            ("failedproducerequests", "Failed produce requests, per topic partition", m.failed_produce_requests),
            ("totalfetchrequests", "Fetch requests, per topic partition", m.fetch_requests),
            ("failedfetchrequests", "Failed fetch requests, per topic partition", m.failed_fetch_requests),
        ):
            # Kafka has both the all-topics meter (no topic label) and one per topic.
            samples: list[tuple[dict[str, str], float]] = [({}, sum(per_topic.values()))]
            samples += [({"topic": t}, v) for t, v in sorted(per_topic.items())]
            yield _counter(f"kafka_server_brokertopicmetrics_{name}", doc, samples)

    def _latency(self) -> Metric:
        family = Metric("kafka_network_requestmetrics_totaltimems",
                        "Request total time in ms (receive to response written), percentiles of the last "
                        f"{LATENCY_RESERVOIR} requests, per API", "summary")
        for name, lat in sorted(self.metrics.latency.items()):
            ordered = sorted(lat.samples)
            for label, q in QUANTILES:
                family.add_sample("kafka_network_requestmetrics_totaltimems",
                                  {"request": name, "quantile": label}, _percentile(ordered, q))
            family.add_sample("kafka_network_requestmetrics_totaltimems_count", {"request": name}, lat.count)
            family.add_sample("kafka_network_requestmetrics_totaltimems_sum", {"request": name}, lat.total_ms)
        return family

    def _state(self, g: BrokerGauges) -> Iterable[Metric]:
        leaders = [p for p in g.partitions if p.is_leader]
        yield _gauge("kafka_server_replicamanager_partitioncount", "Replicas hosted by this broker",
                     [({}, len(g.partitions))])
        yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads", [({}, len(leaders))])
        yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                     "Partitions led here whose ISR is smaller than their replica list",
                     [({}, sum(1 for p in leaders if p.under_replicated))])
        yield _gauge("kafka_controller_kafkacontroller_activecontrollercount",
                     "1 on the active controller, else 0", [({}, 1 if g.active_controller else 0)])
        yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                     "Partitions without a leader (reported by the active controller)", [({}, g.offline_partitions)])
        yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster "
                     "(reported by the active controller)", [({}, g.global_partitions if g.active_controller else 0)])
        yield _gauge("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster (reported by "
                     "the active controller)", [({}, g.global_topics if g.active_controller else 0)])
        for name, doc, attr in (("size", "Bytes of the partition's log on this broker", "size"),
                                ("logstartoffset", "The log's first offset", "log_start_offset"),
                                ("logendoffset", "The log's end offset", "log_end_offset"),
                                ("numlogsegments", "Segments of the log", "num_segments")):
            yield _gauge(f"kafka_log_log_{name}", doc,
                         [({"topic": p.topic, "partition": str(p.partition)}, getattr(p, attr))
                          for p in sorted(g.partitions, key=lambda p: (p.topic, p.partition))])
        yield _gauge("kafka_cluster_partition_underreplicated", "1 for a partition led here whose ISR is short",
                     [({"topic": p.topic, "partition": str(p.partition)}, 1 if p.under_replicated else 0)
                      for p in sorted(leaders, key=lambda p: (p.topic, p.partition))])
        yield _gauge("kafka_server_delayedoperationpurgatory_purgatorysize",
                     "Delayed operations waiting (acks=all produces, long-polling fetches)",
                     [({"delayedoperation": op}, n) for op, n in sorted(g.purgatory.items())])
        yield _gauge("kafka_server_socketservermetrics_connection_count", "Open client connections",
                     [({}, g.connections)])
        yield _gauge("kafka_consumergroup_lag", "Records a group has not consumed (log end minus committed offset) "
                     "on partitions this broker hosts, for the groups it coordinates",
                     [({"consumergroup": x.group, "topic": x.topic, "partition": str(x.partition)}, x.lag)
                      for x in g.group_lags])
        yield _gauge("kafka_consumergroup_current_offset", "The group's committed offset",
                     [({"consumergroup": x.group, "topic": x.topic, "partition": str(x.partition)}, x.committed)
                      for x in g.group_lags])


def _percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def _counter(name: str, doc: str, samples: Iterable[tuple[dict[str, str], float]]) -> Metric:
    samples = list(samples)
    labels = sorted({k for s, _ in samples for k in s})
    family = CounterMetricFamily(name, doc, labels=labels)
    for sample_labels, value in samples:
        family.add_sample(f"{name}_total", sample_labels, value)
    return family


def _gauge(name: str, doc: str, samples: Iterable[tuple[dict[str, str], float]]) -> Metric:
    samples = list(samples)
    labels = sorted({k for s, _ in samples for k in s})
    family = GaugeMetricFamily(name, doc, labels=labels)
    for sample_labels, value in samples:
        family.add_sample(name, sample_labels, value)
    return family


def make_registry(metrics: BrokerMetrics, gauges: Callable[[], BrokerGauges]) -> CollectorRegistry:
    """A registry of this broker's own (not prometheus_client's global one: tests run several brokers in
    one process): the Kafka-named families plus process, platform and GC collectors."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(metrics, gauges))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
