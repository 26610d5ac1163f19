"""The broker's counters and gauges as Prometheus metric families (Kafka's JMX names, as the Prometheus JMX
exporter's common Kafka rules write them; docs/metrics.md lists every series), built only when Prometheus
scrapes. Imported only by the metrics endpoint (metrics_http.py), so a broker without ``metrics.listener`` never
loads prometheus_client.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sofakafka.broker import gc_pauses
from sofakafka.broker.metrics import (
    LATENCY_RESERVOIR,
    QUANTILES,
    BrokerGauges,
    BrokerMetrics,
    QuotaSensorGauge,
)


class BrokerCollector(Collector):
    """Turns the counters and a gauge snapshot into Kafka-named metric families."""

    def __init__(self, metrics: BrokerMetrics, gauges: Callable[[], BrokerGauges]) -> None:
        self.metrics = metrics
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        yield from self._topic_counters()
        yield _counter("kafka_server_brokertopicmetrics_replicationbytesin", "Bytes this broker fetched as a follower",
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
        pauses = gc_pauses.installed()
        if pauses is not None:
            yield _counter("python_gc_collection_seconds", "Seconds the garbage collector held the interpreter, per "
                           "generation (sofakafka/broker/gc_pauses.py)",
                           [({"generation": str(g)}, pauses.seconds[g]) for g in range(gc_pauses.GENERATIONS)])

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
        yield from _quota_families(g.quota_sensors)
        yield _gauge("kafka_consumergroup_current_offset", "The group's committed offset",
                     [({"consumergroup": x.group, "topic": x.topic, "partition": str(x.partition)}, x.committed)
                      for x in g.group_lags])


def _quota_families(sensors: list[QuotaSensorGauge]) -> Iterable[Metric]:
    """Kafka's quota sensors, as the JMX exporter's quota rules map them: the MBean
    ``kafka.server:type=Produce,user=alice,client-id=app`` with its attributes ``byte-rate`` and ``throttle-time``
    becomes ``kafka_server_quota_byte_rate{resource="Produce",user="alice",clientid="app"}`` and
    ``kafka_server_quota_throttle_time{...}`` (Request's rate is ``request-time``). Kafka leaves an empty tag out
    of the MBean name and the rules give only the labels they matched, so a sensor shared by all of a user's
    client ids has no ``clientid`` label, one shared by a client id's users no ``user``, and one with neither
    (an empty client id without user quotas) matches no rule and is not shown."""
    rates: list[tuple[dict[str, str], float]] = []
    request_times: list[tuple[dict[str, str], float]] = []
    throttles: list[tuple[dict[str, str], float]] = []
    for q in sensors:
        if not q.user and not q.client_id:
            continue
        labels = {"resource": q.quota_type}
        if q.user:
            labels["user"] = q.user
        if q.client_id:
            labels["clientid"] = q.client_id
        (request_times if q.quota_type == "Request" else rates).append((labels, q.rate))
        throttles.append((labels, q.throttle_time))
    yield _gauge("kafka_server_quota_byte_rate", "Bytes/s of a client quota sensor (Produce: requests, Fetch: "
                 "responses), over quota.window.num x quota.window.size.seconds", rates)
    yield _gauge("kafka_server_quota_request_time", "Request handling time of a client quota sensor, in percent "
                 "of one thread", request_times)
    yield _gauge("kafka_server_quota_throttle_time", "Mean throttle time (ms) given to a client quota sensor's "
                 "connections over the last minute, NaN with none", throttles)


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
