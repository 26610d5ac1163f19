"""A broker process with ``metrics.listener`` and the produce audit on, driven by stock clients: /health, /ready
and /metrics over real HTTP with the named series holding what was produced and consumed, the console's trace
naming the producer from the audit the broker wrote, the audit topic closed to clients, and a metrics listener
that cannot be used stopping start-up with a message naming the key. The 3-broker scrape (replication,
under-replicated partitions after a kill) is tests/cluster/test_metrics_scrape.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from sofakafka.client import KafkaClient
from sofakafka.console.trace import trace
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.produce_audit import AUDIT_TOPIC
from sofakafka.protocol.records import Record
from tests.integration.conftest import BrokerProcess, free_port

RECORDS = 300
COMMITTED = 120
DEADLINE_S = 60.0

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(base: str) -> Samples:
    status, text = get(base + "/metrics")
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def wait_for(what: str, predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    broker = BrokerProcess(tmp_path_factory.mktemp("metered"), {
        "metrics.listener": f"http://127.0.0.1:{port}", "sofakafka.produce.audit.enable": "true",
        "offsets.topic.num.partitions": "3"}).start()
    try:
        yield broker, f"http://127.0.0.1:{port}"
    finally:
        broker.kill()


@pytest.fixture(scope="module")
def produced(metered: tuple[BrokerProcess, str]) -> str:
    broker, _ = metered
    topic = "metered"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "audit-probe", "linger.ms": 20,
                         "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=b"x" * 200)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metered-group",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, COMMITTED)], asynchronous=False)
    consumer.close()
    return topic


def test_health_and_ready_answer(metered: tuple[BrokerProcess, str]) -> None:
    _, base = metered
    assert get(base + "/health") == (200, "ok\n")
    assert get(base + "/ready") == (200, "ready\n")
    assert get(base + "/nothing")[0] == 404


def test_the_named_series_hold_what_was_produced_and_consumed(metered: tuple[BrokerProcess, str],
                                                             produced: str) -> None:
    _, base = metered
    topic = produced
    t = (("topic", topic),)
    tp = (("partition", "0"), ("topic", topic))
    s = scrape(base)
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", t)] == RECORDS
    # Every byte a producer sent was appended as it came: the topic's bytes in is its log's size.
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", t)] == s[("kafka_log_log_size", tp)] > RECORDS * 200
    assert s[("kafka_log_log_logendoffset", tp)] == RECORDS and s[("kafka_log_log_logstartoffset", tp)] == 0
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", ())] >= s[("kafka_log_log_size", tp)]
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "8")))] >= 1
    assert s[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] >= 1
    assert s[("kafka_network_requestmetrics_totaltimems", (("quantile", "0.99"), ("request", "Produce")))] > 0
    assert s[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert s[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0
    assert s[("kafka_server_replicamanager_leadercount", ())] == s[("kafka_server_replicamanager_partitioncount", ())]
    assert s[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    assert s[("kafka_server_socketservermetrics_connection_count", ())] >= 0
    assert 0 <= s[("kafka_network_socketserver_networkprocessoravgidlepercent", ())] <= 1
    assert s[("process_resident_memory_bytes", ())] > 0
    group = (("consumergroup", "metered-group"), ("partition", "0"), ("topic", topic))
    assert s[("kafka_consumergroup_current_offset", group)] == COMMITTED
    assert s[("kafka_consumergroup_lag", group)] == RECORDS - COMMITTED
    # A consumer reading the whole log (one fetch, well within its max bytes) moves bytes out by the log's size.
    before = s.get(("kafka_server_brokertopicmetrics_bytesout_total", t), 0.0)
    with KafkaClient(metered[0].bootstrap) as client:
        fetched = client.fetch(topic, 0, 0, max_wait_ms=0, max_bytes=1 << 22)
    assert len(fetched.records) == RECORDS
    after = scrape(base)[("kafka_server_brokertopicmetrics_bytesout_total", t)]
    assert after - before == s[("kafka_log_log_size", tp)]


def test_the_trace_names_the_producer_from_the_audit(metered: tuple[BrokerProcess, str], produced: str) -> None:
    broker, base = metered
    wait_for("the audit entries to be written",
             lambda: scrape(base).get(("sofakafka_produce_audit_entries_written_total", ()), 0) >= 1)
    with KafkaClient(broker.bootstrap) as client:
        traced = trace(client, produced, 0, RECORDS - 1)
    assert traced.audit is not None, traced.audit_note
    assert traced.audit.client_id == "audit-probe" and traced.audit.client_host == "127.0.0.1"
    assert traced.audit.base_offset <= RECORDS - 1 <= traced.audit.last_offset
    assert traced.batch is not None and traced.audit.producer_id == traced.batch.producer_id >= 0
    assert traced.groups is not None
    assert [(g.group_id, g.consumed) for g in traced.groups.positions] == [("metered-group", False)]
    assert scrape(base)[("sofakafka_produce_audit_entries_dropped_total", ())] == 0


def test_clients_cannot_write_the_audit_topic(metered: tuple[BrokerProcess, str], produced: str) -> None:
    broker, base = metered
    wait_for("the audit topic", lambda: scrape(base).get(("sofakafka_produce_audit_entries_written_total", ()), 0) >= 1)
    with KafkaClient(broker.bootstrap, client_id="forger") as client, pytest.raises(KafkaError) as refused:
        client.produce(AUDIT_TOPIC, 0, [Record(0, 0, b"metered/0/0", b'{"client_id": "someone-else"}')])
    assert refused.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


def _serve(tmp: str, *overrides: str) -> subprocess.CompletedProcess[str]:
    args = ["broker.id=0", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", f"log.dirs={tmp}", *overrides]
    return subprocess.run([sys.executable, "-m", "sofakafka", "serve", *(x for a in args for x in ("--override", a))],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_a_bad_or_busy_metrics_listener_stops_start_up_naming_the_key(tmp_path_factory: pytest.TempPathFactory) -> None:
    bad = _serve(str(tmp_path_factory.mktemp("bad")), "metrics.listener=127.0.0.1:9308")
    assert bad.returncode == 2 and "metrics.listener" in bad.stderr and "Traceback" not in bad.stderr
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = _serve(str(tmp_path_factory.mktemp("busy")), f"metrics.listener=http://127.0.0.1:{holder.getsockname()[1]}")
    assert busy.returncode == 2 and "metrics.listener: cannot listen" in busy.stderr
    assert "Traceback" not in busy.stderr
