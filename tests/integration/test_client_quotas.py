"""Client quotas on a real broker process, seen by stock clients (kafka-python, confluent-kafka/librdkafka).

One broker for the module, with ``quota.window.num=3`` x ``quota.window.size.seconds=1`` so that a few seconds
of traffic reach the steady state (Kafka's default of 11 one-second samples would let a new client burst ten
seconds' worth first). Quotas are set over the wire (AlterClientQuotas, through our client and through
``sofakafka quotas``) while the broker runs, never in its config: every change takes effect without a restart.

Rates are measured from the client side over the whole run; the bounds are generous on purpose
(no timing assertions: a loaded CI machine only makes clients slower, which the upper bounds allow).
"""

from __future__ import annotations

import json
import math
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from sofakafka.cli.main import main as cli_main
from sofakafka.client import KafkaClient, NewTopic
from sofakafka.protocol.api import decode_response, encode_request, size_prefixed
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.headers import RequestHeader
from sofakafka.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sofakafka.protocol.messages.produce import ProduceRequest, ProduceResponse
from sofakafka.protocol.records import Record, build_batch
from sofakafka.protocol.schema import Request, Response
from tests.integration import wire
from tests.integration.conftest import REPO, BrokerProcess, free_port
from tests.integration.helpers import base_timestamp_ms, wait_for

QUOTA = 100_000  # bytes/s
VALUE = b"q" * 1000
TRAFFIC_S = 4.0


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("quotas"),
                      {"quota.window.num": "3", "quota.window.size.seconds": "1",
                       "metrics.listener": f"http://127.0.0.1:{free_port()}"}).start()
    try:
        yield b
    finally:
        b.kill()


def scrape_quotas(broker: BrokerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The broker's kafka_server_quota_* series, read over HTTP from its /metrics."""
    listener = broker.overrides["metrics.listener"]
    with urllib.request.urlopen(f"{listener}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("kafka_server_quota_")}


@pytest.fixture
def admin(quota_broker: BrokerProcess) -> Iterator[KafkaClient]:
    with KafkaClient(quota_broker.bootstrap) as client:
        yield client


def sofakafka(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The command-line tool, in this process (a subprocess costs seconds of start-up on a loaded machine): its
    stdout, after checking it succeeded."""
    capsys.readouterr()
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out.strip()


def make_topic(admin: KafkaClient, name: str) -> str:
    result = admin.create_topics([NewTopic(name, 1, 1)])[name]
    assert result.error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS), result
    return name


def set_quota(admin: KafkaClient, entity: tuple[tuple[str, str | None], ...], key: str, value: float | None) -> None:
    (result,) = admin.alter_client_quotas([(entity, [(key, value)])])
    result.raise_for_error()


def throttle_max(metrics: dict[str, dict[str, Any]]) -> float:
    """The largest 'throttle-time-max' kafka-python reports in any group (it records each response's)."""
    values = [v for group in metrics.values() for k, v in group.items() if k.endswith("throttle-time-max")]
    return max((v for v in values if isinstance(v, (int, float)) and v == v), default=0.0)


def send_chunk(producer: KafkaProducer, topic: str) -> int:
    """Send a 20 KB chunk and wait for it to be acknowledged; its size."""
    for _ in range(20):
        producer.send(topic, VALUE)
    producer.flush(timeout=60)
    return 20 * len(VALUE)


def produce_for(producer: KafkaProducer, topic: str, seconds: float) -> list[tuple[float, int]]:
    """Send 20 KB chunks and wait for each to be acknowledged; (time, acked bytes so far) after each chunk."""
    start = time.monotonic()
    acked = 0
    points = [(0.0, 0)]
    while time.monotonic() - start < seconds:
        acked += send_chunk(producer, topic)
        points.append((time.monotonic() - start, acked))
    return points


def overall_rate(points: list[tuple[float, int]]) -> float:
    """Bytes/s over the whole run. A throttled client moves in bursts (a sample leaving the window frees room),
    so the rate is only meaningful over the whole run: at most about QUOTA x (run + quota.window.num x
    quota.window.size.seconds) / run, the window's worth a new client may send at once included."""
    (t1, b1) = points[-1]
    assert t1 > 0 and len(points) > 2, f"too few acknowledged chunks: {points}"
    return b1 / t1


def test_a_producer_over_its_byte_rate_is_throttled_and_an_unthrottled_one_is_not(
        quota_broker: BrokerProcess, admin: KafkaClient) -> None:
    topic = make_topic(admin, "quota-produce")
    set_quota(admin, (("client-id", "slow-producer"),), "producer_byte_rate", QUOTA)
    slow = KafkaProducer(bootstrap_servers=quota_broker.bootstrap, client_id="slow-producer", linger_ms=5)
    fast = KafkaProducer(bootstrap_servers=quota_broker.bootstrap, client_id="free-producer", linger_ms=5)
    try:
        rate = overall_rate(produce_for(slow, topic, TRAFFIC_S))
        assert throttle_max(slow.metrics()) > 0, "kafka-python saw no throttle time"
        # Near the quota, generously (the bound above allows 1.75x for a 4 s run): no runaway, no stall.
        assert 0.3 * QUOTA < rate < 3 * QUOTA, rate
        produce_for(fast, topic, 1.0)
        assert throttle_max(fast.metrics()) == 0, "a client without a quota was throttled"
    finally:
        slow.close(timeout=10)
        fast.close(timeout=10)


def test_librdkafka_reports_the_throttle_time(quota_broker: BrokerProcess, admin: KafkaClient) -> None:
    topic = make_topic(admin, "quota-librdkafka")
    set_quota(admin, (("client-id", "slow-rdkafka"),), "producer_byte_rate", QUOTA)
    throttles: list[int] = []

    def stats(text: str) -> None:
        for b in json.loads(text).get("brokers", {}).values():
            throttles.append(int(b.get("throttle", {}).get("max", 0)))

    p = Producer({"bootstrap.servers": quota_broker.bootstrap, "client.id": "slow-rdkafka", "linger.ms": 5,
                  "statistics.interval.ms": 500, "stats_cb": stats})
    deadline = time.monotonic() + 30  # a bound, not a timing assertion
    while time.monotonic() < deadline and not any(throttles):
        for _ in range(50):
            p.produce(topic, VALUE)
        p.flush(30)
        p.poll(0.1)
    assert any(throttles), "librdkafka reported no throttle time"


@pytest.fixture(scope="module")
def filled_topic(quota_broker: BrokerProcess) -> str:
    """1.5 MB for the consumers to read: 15 s of a 100 KB/s quota."""
    with KafkaClient(quota_broker.bootstrap) as admin:
        topic = make_topic(admin, "quota-consume")
    fill = KafkaProducer(bootstrap_servers=quota_broker.bootstrap, client_id="filler", linger_ms=5)
    try:
        for _ in range(1500):
            fill.send(topic, VALUE)
        fill.flush(timeout=60)
    finally:
        fill.close(timeout=10)
    return topic


def test_a_consumer_over_its_byte_rate_is_throttled(quota_broker: BrokerProcess, admin: KafkaClient,
                                                     filled_topic: str) -> None:
    topic = filled_topic
    set_quota(admin, (("user", "ANONYMOUS"), ("client-id", "slow-reader")), "consumer_byte_rate", QUOTA)
    consumer = KafkaConsumer(bootstrap_servers=quota_broker.bootstrap, client_id="slow-reader",
                             enable_auto_commit=False, fetch_max_bytes=64 * 1024,
                             max_partition_fetch_bytes=64 * 1024)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        start = time.monotonic()
        received = 0
        points = [(0.0, 0)]
        while time.monotonic() - start < TRAFFIC_S:
            for records in consumer.poll(timeout_ms=200).values():
                received += sum(len(r.value) for r in records)
            points.append((time.monotonic() - start, received))
        assert throttle_max(consumer.metrics()) > 0, "kafka-python's consumer saw no throttle time"
        rate = overall_rate(points)
        assert rate < 3 * QUOTA, rate
        assert received > 0
    finally:
        consumer.close()


def test_librdkafkas_consumer_reports_the_throttle_time(quota_broker: BrokerProcess, admin: KafkaClient,
                                                       filled_topic: str) -> None:
    set_quota(admin, (("client-id", "slow-rdkafka-reader"),), "consumer_byte_rate", QUOTA)
    throttles: list[int] = []

    def stats(text: str) -> None:
        for b in json.loads(text).get("brokers", {}).values():
            throttles.append(int(b.get("throttle", {}).get("max", 0)))

    consumer = Consumer({"bootstrap.servers": quota_broker.bootstrap, "client.id": "slow-rdkafka-reader",
                         "group.id": "slow-rdkafka-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "statistics.interval.ms": 500, "stats_cb": stats})
    try:
        consumer.assign([ConfluentPartition(filled_topic, 0, OFFSET_BEGINNING)])
        received = 0
        deadline = time.monotonic() + 30  # a bound, not a timing assertion
        while time.monotonic() < deadline and not any(throttles):
            for message in consumer.consume(100, timeout=0.2):
                if message.error() is None:
                    received += len(message.value() or b"")
        assert any(throttles), f"librdkafka's consumer reported no throttle time ({received} bytes read)"
        assert received > 0
    finally:
        consumer.close()


def test_quota_sensors_are_scraped_with_kafkas_names(quota_broker: BrokerProcess, admin: KafkaClient) -> None:
    """/metrics of the running broker shows the sensors of a throttled producer and of an unthrottled one as
    the JMX exporter names Kafka's: kafka_server_quota_byte_rate / _throttle_time{resource, user, clientid}.
    Each scrape follows traffic at once: a rate forgets samples older than the window (3 s here)."""
    topic = make_topic(admin, "quota-metrics")
    set_quota(admin, (("user", "ANONYMOUS"), ("client-id", "metered")), "producer_byte_rate", QUOTA)
    set_quota(admin, (("client-id", "absent"),), "producer_byte_rate", QUOTA)  # client-id quotas exist too
    # A user and client-id quota: the sensor carries both tags.
    throttled = (("clientid", "metered"), ("resource", "Produce"), ("user", "ANONYMOUS"))
    # No quota of its own, and client-id quotas on this broker too: tagged by its client id alone (Kafka's
    # precedence walk ends at the client-id levels), never throttled.
    free = (("clientid", "unmetered"), ("resource", "Produce"))
    metered = KafkaProducer(bootstrap_servers=quota_broker.bootstrap, client_id="metered", linger_ms=5)
    unmetered = KafkaProducer(bootstrap_servers=quota_broker.bootstrap, client_id="unmetered", linger_ms=5)

    def seen(producer: KafkaProducer, labels: tuple[tuple[str, str], ...], throttle: bool) -> dict[Any, float] | None:
        produce_for(producer, topic, 0.3)
        series = scrape_quotas(quota_broker)
        rate = series.get(("kafka_server_quota_byte_rate", labels), 0.0)
        given = series.get(("kafka_server_quota_throttle_time", labels), math.nan)
        return series if rate > 0 and (given > 0 if throttle else math.isnan(given)) else None

    try:
        series = wait_for("the metered producer's throttled sensor", lambda: seen(metered, throttled, True))
        assert series[("kafka_server_quota_byte_rate", throttled)] < 10 * QUOTA, series
        assert throttle_max(metered.metrics()) > 0  # what the broker counted is what the client was told
        series = wait_for("the unmetered producer's sensor, never throttled", lambda: seen(unmetered, free, False))
    finally:
        metered.close(timeout=10)
        unmetered.close(timeout=10)
    # Every request is recorded against the request-time sensors once quotas are on.
    assert series[("kafka_server_quota_request_time", (("clientid", "unmetered"), ("resource", "Request")))] >= 0


def test_a_quota_set_while_a_client_runs_throttles_it_without_a_restart(
        quota_broker: BrokerProcess, admin: KafkaClient, capsys: pytest.CaptureFixture[str]) -> None:
    topic = make_topic(admin, "quota-change")
    producer = KafkaProducer(bootstrap_servers=quota_broker.bootstrap, client_id="changing", linger_ms=5)
    try:
        # A bounded amount before the quota, not a time's worth: the throttle after the change is proportional to
        # how far over the quota the window already is, so a fast machine's half second at full speed (MBs) earned
        # a throttle past a minute, longer than the producer's flush waits (Kafka 2.6 computes it alike).
        send_chunk(producer, topic)
        assert throttle_max(producer.metrics()) == 0
        # Through the command-line tool this time: sofakafka quotas alter.
        assert sofakafka(capsys, "quotas", "alter", "--bootstrap-server", quota_broker.bootstrap,
                         "--client-id", "changing", "--add-config", f"producer_byte_rate={QUOTA // 2}") == (
            "Completed updating config for client-id 'changing'.")
        wait_for("the new quota to throttle the running producer",
                 lambda: (send_chunk(producer, topic) and throttle_max(producer.metrics()) > 0) or None)
    finally:
        producer.close(timeout=10)
    assert sofakafka(capsys, "quotas", "describe", "--bootstrap-server", quota_broker.bootstrap,
                     "--client-id", "changing") == "Quota configs for client-id 'changing' are producer_byte_rate=50000.0"


def test_bad_quota_changes_are_refused_with_kafkas_errors_and_store_nothing(admin: KafkaClient) -> None:
    bad = [
        ((("user", "mallory"),), [("producer_byte_rate", -1.0)]),
        ((("user", "mallory"), ("client-id", "x")), [("request_percentage", -0.5)]),
        ((("ip", "10.0.0.1"),), [("producer_byte_rate", 1000.0)]),
        ((("user", "mallory"), ("client-id", "y")), [("controller_mutation_rate", 5.0)]),
        ((("user", "mallory"), ("client-id", "z")), [("consumer_byte_rate", 10.5)]),
        ((), [("producer_byte_rate", 1000.0)]),
    ]
    results = admin.alter_client_quotas(bad)
    assert [r.error for r in results] == [ErrorCode.INVALID_REQUEST] * len(bad)
    assert results[0].error_message == "Quota producer_byte_rate must not be negative"
    assert results[2].error_message == "Unhandled client quota entity type: ip"
    assert results[3].error_message == "Invalid configuration key controller_mutation_rate"
    assert results[4].error_message == "Configuration consumer_byte_rate must be a Long value"
    assert results[5].error_message == "Invalid empty client quota entity"
    assert admin.describe_client_quotas([("user", 0, "mallory")]) == []
    # validate_only checks a good change and stores nothing either.
    (ok,) = admin.alter_client_quotas([((("user", "mallory"),), [("producer_byte_rate", 1000.0)])],
                                      validate_only=True)
    assert ok.error == ErrorCode.NONE
    assert admin.describe_client_quotas([("user", 0, "mallory")]) == []
    with pytest.raises(KafkaError) as refused:
        admin.describe_client_quotas([("ip", 0, "10.0.0.1")])
    assert refused.value.code == ErrorCode.UNSUPPORTED_VERSION  # Kafka 2.6's answer to a custom entity type


def test_kafka_configs_syntax_sets_user_and_client_quotas(quota_broker: BrokerProcess,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    def configs(*args: str) -> str:
        return sofakafka(capsys, "configs", "--bootstrap-server", quota_broker.bootstrap, *args)

    configs("--alter", "--entity-type", "users", "--entity-name", "dora", "--entity-type", "clients",
            "--entity-default", "--add-config", "producer_byte_rate=1048576,request_percentage=25")
    configs("--alter", "--entity-type", "users", "--entity-name", "dora",
            "--add-config", "consumer_byte_rate=2097152")
    assert configs("--describe", "--entity-type", "users", "--entity-name", "dora", "--entity-type", "clients",
                   "--entity-default") == (
        "Quota configs for user-principal 'dora', the default client-id are "
        "producer_byte_rate=1048576.0,request_percentage=25.0")
    assert configs("--describe", "--entity-type", "users", "--entity-name", "dora") == (
        "Quota configs for user-principal 'dora' are consumer_byte_rate=2097152.0")


def test_the_quota_apis_are_advertised_at_kafka_2_6s_ranges(quota_broker: BrokerProcess) -> None:
    reference = json.loads((Path(REPO) / "tests/data/kafka-2.6/api_versions.json").read_text())
    ranges = {a["key"]: tuple(a["accepted_by_2_6"]) for a in reference["apis"]}
    with KafkaClient(quota_broker.bootstrap) as client:
        versions = client.any_connection().api_versions
    for key in (48, 49):
        assert versions[key] == ranges[key] == (0, 0)


def wire_call(s: socket.socket, body: Request, version: int, client_id: str, correlation_id: int) -> Response:
    wire.send(s, body, version, correlation_id, client_id)
    header, response = decode_response(wire.recv_frame(s), body.API_KEY, version)
    assert header.correlation_id == correlation_id
    return response


def test_a_request_time_quota_throttles_any_api(quota_broker: BrokerProcess, admin: KafkaClient) -> None:
    """request_percentage (KIP-124) applies to every API with a throttle time, here Metadata v9."""
    set_quota(admin, (("client-id", "busy"),), "request_percentage", 0.01)
    with socket.create_connection((quota_broker.host, quota_broker.port), timeout=30) as s:
        def throttled(n: list[int] = [0]) -> bool | None:  # noqa: B006 - a counter kept across polls
            n[0] += 1
            response = wire_call(s, MetadataRequest(topics=None), 9, "busy", n[0])
            assert isinstance(response, MetadataResponse)
            return response.throttle_time_ms > 0 or None
        wait_for("a Metadata response with a throttle time", throttled)
        # The throttle is capped at one quota.window.size.seconds (Kafka's request quota cap).
        response = wire_call(s, MetadataRequest(topics=None), 9, "busy", 1000)
        assert isinstance(response, MetadataResponse)
        assert 0 < response.throttle_time_ms <= 1000


def test_a_client_older_than_kip_219_gets_the_throttle_time_too(quota_broker: BrokerProcess,
                                                                 admin: KafkaClient) -> None:
    """Produce v5 predates client-side throttling: the broker holds the response back instead (no timing is
    asserted); the response still says how long, and the records are appended."""
    topic = make_topic(admin, "quota-old-produce")
    set_quota(admin, (("client-id", "old-producer"),), "producer_byte_rate", 3000)  # ~10 KB in 2 s: ~1.4 s
    records = build_batch([Record(i, base_timestamp_ms(), None, VALUE) for i in range(10)])
    T = ProduceRequest.TopicProduceData
    with socket.create_connection((quota_broker.host, quota_broker.port), timeout=60) as s:
        request = ProduceRequest(acks=1, timeout_ms=10_000, topics=[T(name=topic, partitions=[
            T.PartitionProduceData(partition_index=0, records=records)])])
        response = wire_call(s, request, 5, "old-producer", 1)
    assert isinstance(response, ProduceResponse)
    assert response.throttle_time_ms > 0
    assert response.responses[0].partitions[0].error_code == ErrorCode.NONE


def test_a_throttled_clients_pipelined_requests_wait_for_the_mute(quota_broker: BrokerProcess,
                                                                   admin: KafkaClient) -> None:
    """A client with a quota has its requests handled one at a time, as Kafka handles every connection's: five
    Produce requests that reach the broker together (one write of 20 KB, read at once), the first one already far
    over the quota, leave four unhandled while the first one's throttle lasts (about 40 s here), so the broker has
    recorded one request and one throttle time. Handled all at once, they would all have been appended and each
    given a longer throttle."""
    topic = make_topic(admin, "quota-pipelined")
    set_quota(admin, (("client-id", "pipelined"),), "producer_byte_rate", 100)
    records = build_batch([Record(i, base_timestamp_ms(), None, VALUE) for i in range(4)])
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest(acks=1, timeout_ms=10_000, topics=[T(name=topic, partitions=[
        T.PartitionProduceData(partition_index=0, records=records)])])
    frames = b"".join(size_prefixed(encode_request(RequestHeader(
        request_api_key=request.API_KEY, request_api_version=8, correlation_id=c, client_id="pipelined"), request))
        for c in range(1, 6))
    with socket.create_connection((quota_broker.host, quota_broker.port), timeout=60) as s:
        s.sendall(frames)
        header, response = decode_response(wire.recv_frame(s), request.API_KEY, 8)
        assert header.correlation_id == 1 and isinstance(response, ProduceResponse)
        assert response.throttle_time_ms > 20_000, response.throttle_time_ms
        series = scrape_quotas(quota_broker)
    labels = (("clientid", "pipelined"), ("resource", "Produce"))
    # The mean of the throttle times given: the first request's alone (the others wait unread).
    assert series[("kafka_server_quota_throttle_time", labels)] == response.throttle_time_ms
    # One request's bytes over the 2 s the rate counts at least (0 once its sample is 3 s old).
    assert series[("kafka_server_quota_byte_rate", labels)] < len(records), series
