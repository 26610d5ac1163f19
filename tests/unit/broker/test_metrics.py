"""The broker's metrics registry and HTTP endpoint: Kafka's JMX names as the Prometheus JMX exporter maps them,
percentiles of request times, and /metrics, /health, /ready served by a real aiohttp server on a real socket."""

from __future__ import annotations

import asyncio
import math
import urllib.error
import urllib.request

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sofakafka.broker.config import ConfigError, KafkaConfig, parse_metrics_listener
from sofakafka.broker.metrics import (
    FETCH_CONSUMER,
    FETCH_FOLLOWER,
    BrokerGauges,
    BrokerMetrics,
    GroupLag,
    PartitionGauge,
    QuotaSensorGauge,
    request_name,
)
from sofakafka.broker.metrics_export import make_registry
from sofakafka.broker.metrics_http import MetricsServer
from sofakafka.protocol.api import ApiKey


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_request_names_are_kafkas() -> None:
    assert request_name(ApiKey.PRODUCE) == "Produce"
    assert request_name(ApiKey.LIST_OFFSETS) == "ListOffsets"
    assert request_name(ApiKey.API_VERSIONS) == "ApiVersions"
    assert request_name(ApiKey.OFFSET_COMMIT) == "OffsetCommit"


def test_counters_gauges_and_percentiles_carry_kafkas_names() -> None:
    m = BrokerMetrics()
    for ms in range(1, 101):
        m.record_request(ApiKey.PRODUCE, 8, float(ms))
    m.record_produce("orders", 1000, 10)
    m.record_produce("orders", 500, 5)
    m.record_produce("payments", 7, 1)
    m.record_fetch("orders", 300)
    m.isr_shrinks += 1
    gauges = BrokerGauges(
        partitions=[PartitionGauge("orders", 0, 1500, 0, 15, 1, True, True),
                    PartitionGauge("orders", 1, 7, 0, 1, 1, False, False)],
        active_controller=True, offline_partitions=2, purgatory={"Produce": 3, "Fetch": 4},
        group_lags=[GroupLag("billing", "orders", 0, 10, 5)])
    s = _samples(generate_latest(make_registry(m, lambda: gauges)).decode())
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "orders"),))] == 1500
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", ())] == 1507
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "orders"),))] == 15
    assert s[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "orders"),))] == 300
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "8")))] == 100
    assert s[("kafka_network_requestmetrics_totaltimems", (("quantile", "0.50"), ("request", "Produce")))] == 50
    assert s[("kafka_network_requestmetrics_totaltimems", (("quantile", "0.99"), ("request", "Produce")))] == 99
    assert s[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 100
    assert s[("kafka_server_replicamanager_isrshrinks_total", ())] == 1
    assert s[("kafka_server_replicamanager_leadercount", ())] == 1
    assert s[("kafka_server_replicamanager_partitioncount", ())] == 2
    assert s[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 1
    assert s[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert s[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 2
    assert s[("kafka_log_log_size", (("partition", "0"), ("topic", "orders")))] == 1500
    assert s[("kafka_server_delayedoperationpurgatory_purgatorysize", (("delayedoperation", "Fetch"),))] == 4
    assert s[("kafka_consumergroup_lag", (("consumergroup", "billing"), ("partition", "0"), ("topic", "orders")))] == 5
    assert ("process_resident_memory_bytes", ()) in s and ("process_cpu_seconds_total", ()) in s
    assert 0 <= s[("kafka_network_socketserver_networkprocessoravgidlepercent", ())] <= 1


def test_metrics_listener_is_validated_and_named_in_the_error() -> None:
    assert parse_metrics_listener("http://127.0.0.1:9308") == ("127.0.0.1", 9308)
    assert parse_metrics_listener("http://:9308/") == ("", 9308)
    assert parse_metrics_listener("http://[::1]:9308") == ("::1", 9308)
    for bad in ("127.0.0.1:9308", "https://h:1", "http://h:99999", "http://h"):
        try:
            KafkaConfig.load(None, [f"metrics.listener={bad}"])
        except ConfigError as exc:
            assert "metrics.listener" in str(exc)
        else:
            raise AssertionError(f"{bad} accepted")


def test_endpoint_serves_metrics_health_and_readiness() -> None:
    ready: list[str | None] = ["not registered yet"]

    async def run() -> None:
        m = BrokerMetrics()
        m.record_produce("t", 1, 1)
        server = MetricsServer("127.0.0.1", 0, make_registry(m, BrokerGauges), lambda: ready[0])
        await server.start()
        base = f"http://127.0.0.1:{server.bound_port}"

        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(base + path, timeout=10) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()

        try:
            status, body = await asyncio.to_thread(get, "/metrics")
            assert status == 200 and 'kafka_server_brokertopicmetrics_bytesin_total{topic="t"} 1.0' in body
            assert await asyncio.to_thread(get, "/health") == (200, "ok\n")
            assert await asyncio.to_thread(get, "/ready") == (503, "not ready: not registered yet\n")
            ready[0] = None
            assert await asyncio.to_thread(get, "/ready") == (200, "ready\n")
        finally:
            await server.stop()

    asyncio.run(run())


def test_fetches_count_under_fetch_and_their_kind_and_audit_counters_are_served() -> None:
    m = BrokerMetrics()
    m.record_request(ApiKey.FETCH, 11, 500.0, FETCH_CONSUMER)
    m.record_request(ApiKey.FETCH, 11, 2.0, FETCH_FOLLOWER)
    m.record_failed_fetch("orders", "NOT_LEADER_OR_FOLLOWER")
    m.audit_entries_written, m.audit_entries_dropped = 7, 2
    s = _samples(generate_latest(make_registry(m, BrokerGauges)).decode())
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "Fetch"), ("version", "11")))] == 2
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "FetchConsumer"), ("version", "11")))] == 1
    assert s[("kafka_network_requestmetrics_totaltimems", (("quantile", "0.50"), ("request", "FetchFollower")))] == 2
    assert s[("kafka_network_requestmetrics_errors_total", (("error", "NOT_LEADER_OR_FOLLOWER"),
                                                            ("request", "Fetch")))] == 1
    assert s[("kafka_server_brokertopicmetrics_failedfetchrequests_total", (("topic", "orders"),))] == 1
    assert s[("sofakafka_produce_audit_entries_written_total", ())] == 7
    assert s[("sofakafka_produce_audit_entries_dropped_total", ())] == 2


def test_quota_sensors_carry_the_jmx_exporters_quota_names_and_only_the_tags_kafka_has() -> None:
    """kafka.server:type=<Produce|Fetch|Request>,user=..,client-id=.. -> kafka_server_quota_<attribute>{resource,
    user, clientid}; an empty tag is not in Kafka's MBean name, so it is not a label; no tag at all: no series."""
    gauges = BrokerGauges(quota_sensors=[
        QuotaSensorGauge("Produce", "alice", "", 1000.0, math.nan),
        QuotaSensorGauge("Fetch", "", "reports", 2000.0, 150.0),
        QuotaSensorGauge("Request", "alice", "app", 12.5, 40.0),
        QuotaSensorGauge("Produce", "", "", 99.0, 1.0),
    ])
    s = _samples(generate_latest(make_registry(BrokerMetrics(), lambda: gauges)).decode())
    quota = {k: v for k, v in s.items() if k[0].startswith("kafka_server_quota_")}
    alice = (("resource", "Produce"), ("user", "alice"))
    reports = (("clientid", "reports"), ("resource", "Fetch"))
    pair = (("clientid", "app"), ("resource", "Request"), ("user", "alice"))
    assert quota.keys() == {("kafka_server_quota_byte_rate", alice), ("kafka_server_quota_throttle_time", alice),
                            ("kafka_server_quota_byte_rate", reports), ("kafka_server_quota_throttle_time", reports),
                            ("kafka_server_quota_request_time", pair), ("kafka_server_quota_throttle_time", pair)}
    assert quota[("kafka_server_quota_byte_rate", alice)] == 1000
    assert math.isnan(quota[("kafka_server_quota_throttle_time", alice)])  # Kafka's Avg of nothing
    assert quota[("kafka_server_quota_throttle_time", reports)] == 150
    assert quota[("kafka_server_quota_request_time", pair)] == 12.5
