"""The LDC producer and consumer over confluent-kafka and kafka-python, against a real broker.

The producer maps logical to physical topics and sets the unit headers; the consumer takes only what its
subscription mode takes, commits past what it skipped (so a restart resumes after it and the lag is 0), and
the model is kept in the cluster as a dynamic config, refused there when bad.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as ConfluentConsumer

from sofakafka.client.client import ConfigResourceType, KafkaClient, NewTopic
from sofakafka.ldc import (
    UNIT_ORIUNIT,
    UNIT_TARGET_C,
    UNIT_TARGET_G,
    UNIT_TARGET_R,
    LdcError,
    LdcModel,
    SubscriptionMode,
)
from sofakafka.protocol.errors import ErrorCode
from sofakafka.router.ldc_client import Backend, Delivered, LdcConsumer, LdcProducer, LdcRecord
from sofakafka.router.store import read_model, write_model
from tests.integration.conftest import BrokerProcess, _start
from tests.ldc_data import BROKER_SETTINGS, MIXED, bill_model

_instances = itertools.count()
BACKENDS: list[Backend] = ["confluent", "kafka-python"]


@pytest.fixture(scope="module")
def ldc_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = _start(tmp_path_factory.mktemp("ldc-broker"), BROKER_SETTINGS)
    try:
        yield b
    finally:
        b.kill()


@pytest.fixture
def model() -> LdcModel:
    return LdcModel.from_toml(bill_model(f"LDC{next(_instances)}"))


def producer_config(backend: Backend, bootstrap: str) -> dict[str, object]:
    if backend == "confluent":
        return {"bootstrap.servers": bootstrap, "linger.ms": 5}
    return {"bootstrap_servers": bootstrap, "linger_ms": 5}


def consumer_config(backend: Backend, bootstrap: str) -> dict[str, object]:
    if backend == "confluent":
        return {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    return {"bootstrap_servers": bootstrap, "auto_offset_reset": "earliest", "enable_auto_commit": False}


def create(bootstrap: str, *topics: str) -> None:
    with KafkaClient(bootstrap) as client:
        results = client.create_topics([NewTopic(t, 2, 1) for t in topics])
        assert all(r.error == ErrorCode.NONE for r in results.values()), results


def send_all(producer: LdcProducer, sends: list[dict[str, object]]) -> list[Delivered]:
    delivered: list[Delivered] = []
    failed: list[Exception] = []

    def report(exc: Exception | None, where: Delivered | None) -> None:
        if exc is not None:
            failed.append(exc)
        else:
            assert where is not None
            delivered.append(where)

    for s in sends:
        producer.send(on_delivery=report, **s)  # type: ignore[arg-type]
    assert producer.flush(30) == 0
    assert not failed, failed
    return delivered


def drain(consumer: LdcConsumer, expected: int, timeout_s: float = 30.0) -> list[LdcRecord]:
    """Poll until ``expected`` records came and one more quiet poll brought nothing else."""
    got: list[LdcRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        got += consumer.poll(1.0)
    got += consumer.poll(1.0)
    return got


def raw_headers(bootstrap: str, topic: str) -> list[tuple[bytes | None, dict[str, bytes]]]:
    """(key, headers) of every record in ``topic``, read by a plain librdkafka consumer without LDC code."""
    c = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": f"raw-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out: list[tuple[bytes | None, dict[str, bytes]]] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                if out:
                    break
                continue
            if msg.error() is None:
                out.append((msg.key(), dict(msg.headers() or [])))
    finally:
        c.close()
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_producer_writes_physical_topics_with_unit_headers(ldc_broker: BrokerProcess, model: LdcModel,
                                                           backend: Backend) -> None:
    create(ldc_broker.bootstrap, f"{model.instance}.R1.bills")
    producer = LdcProducer(model, "R1", backend=backend, config=producer_config(backend, ldc_broker.bootstrap))
    try:
        delivered = send_all(producer, [
            {"topic": "bills", "value": b"own", "key": b"A"},
            {"topic": "bills", "value": b"for R2", "key": b"B", "uid": 57,
             "headers": [("app", b"x"), (UNIT_ORIUNIT, b"forged")]},
        ])
    finally:
        producer.close()
    assert {d.topic for d in delivered} == {f"{model.instance}.R1.bills"}
    records = dict(raw_headers(ldc_broker.bootstrap, f"{model.instance}.R1.bills"))
    assert records[b"A"] == {UNIT_ORIUNIT: b"R1", UNIT_TARGET_G: b"GZ00", UNIT_TARGET_C: b"CZ01"}
    # the application's own header is kept; a unit header it set itself is replaced by the model's
    assert records[b"B"] == {"app": b"x", UNIT_ORIUNIT: b"R1", UNIT_TARGET_G: b"GZ00", UNIT_TARGET_C: b"CZ01",
                             UNIT_TARGET_R: b"R2"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_subscription_mode_takes_its_records_and_commits_past_the_rest(
        ldc_broker: BrokerProcess, model: LdcModel, backend: Backend) -> None:
    ns = model.instance
    create(ldc_broker.bootstrap, f"{ns}.R1.bills", f"{ns}.GZ00.bills", f"{ns}.CZ01.bills")
    cfg = producer_config(backend, ldc_broker.bootstrap)
    # Records from R1 (uids of both RZones) and R2, all written to R1's physical topic by cell R1's producer
    # except where noted: the subscription decides by header, not by who wrote the topic.
    r1 = LdcProducer(model, "R1", backend=backend, config=cfg)
    sends = [{"topic": "bills", "value": f"r1-{i}".encode(), "key": f"k{i}".encode(), "uid": i * 10}
             for i in range(10)]
    try:
        send_all(r1, sends)
    finally:
        r1.close()
    expected_r1 = {f"r1-{i}".encode() for i in range(10) if i * 10 <= 49}
    consumer = LdcConsumer(model, "R1", "billing", ["bills"], SubscriptionMode.RZONE, backend=backend,
                           config=consumer_config(backend, ldc_broker.bootstrap))
    try:
        got = drain(consumer, len(expected_r1))
        assert {r.value for r in got} == expected_r1
        assert {r.topic for r in got} == {"bills"} and {r.physical_topic for r in got} == {f"{ns}.R1.bills"}
        consumer.commit()
    finally:
        consumer.close()
    assert consumer.group == f"{ns}.R1.billing"
    with KafkaClient(ldc_broker.bootstrap) as client:
        committed = _committed(client, consumer.group, f"{ns}.R1.bills")
        ends = client.list_offsets(f"{ns}.R1.bills", {0: -1, 1: -1})
    # every record was consumed (taken or skipped): the committed offsets are the log ends, the lag 0
    assert committed == {p: r.offset for p, r in ends.items()}

    # Local in R1 takes all ten (they came from R1); a restart of the group resumes after them.
    local = LdcConsumer(model, "R1", "local", ["bills"], SubscriptionMode.LOCAL, backend=backend,
                        config=consumer_config(backend, ldc_broker.bootstrap))
    try:
        assert len(drain(local, 10)) == 10
        local.commit()
    finally:
        local.close()
    r1 = LdcProducer(model, "R1", backend=backend, config=cfg)
    try:
        send_all(r1, [{"topic": "bills", "value": b"later"}])
    finally:
        r1.close()
    local = LdcConsumer(model, "R1", "local", ["bills"], SubscriptionMode.LOCAL, backend=backend,
                        config=consumer_config(backend, ldc_broker.bootstrap))
    try:
        assert [r.value for r in drain(local, 1)] == [b"later"]
    finally:
        local.close()

    with pytest.raises(LdcError, match="starts only in a GZone"):
        LdcConsumer(model, "R1", "g", ["bills"], SubscriptionMode.GZONE, backend=backend,
                    config=consumer_config(backend, ldc_broker.bootstrap))




@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("cell", "mode", "expected"), [
    ("R1", SubscriptionMode.LOCAL, {b"ori-R1", b"c-CZ"}),
    ("GZ00", SubscriptionMode.LOCAL, {b"ori-GZ"}),
    ("R1", SubscriptionMode.RZONE, {b"r-R1", b"r-R1-dup"}),
    ("GZ00", SubscriptionMode.GZONE, {b"ori-GZ", b"g-GZ"}),
    ("CZ01", SubscriptionMode.CZONE, {b"c-CZ"}),
])
def test_subscription_modes_over_a_mixed_topic(ldc_broker: BrokerProcess, model: LdcModel, backend: Backend,
                                               cell: str, mode: SubscriptionMode, expected: set[bytes]) -> None:
    from confluent_kafka import Producer

    topic = model.physical_topic(cell, "mixed")
    create(ldc_broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": ldc_broker.bootstrap})
    for key, headers in MIXED:
        p.produce(topic, b"v", key, headers=headers)
    assert p.flush(30) == 0
    c = LdcConsumer(model, cell, "mixed", ["mixed"], mode, backend=backend,
                    config=consumer_config(backend, ldc_broker.bootstrap))
    try:
        assert {r.key for r in drain(c, len(expected))} == expected
    finally:
        c.close()


def _committed(client: KafkaClient, group: str, topic: str) -> dict[int, int]:
    from sofakafka.client.groups import GroupAdmin

    offsets = GroupAdmin(client).fetch_offsets(group)
    return {tp[1]: o.offset for tp, o in offsets.items() if tp[0] == topic and o.offset >= 0}


def test_model_is_kept_in_the_cluster_and_a_bad_one_is_refused_there(ldc_broker: BrokerProcess,
                                                                       model: LdcModel) -> None:
    with KafkaClient(ldc_broker.bootstrap) as client:
        write_model(client, model)
        assert read_model(client) == model
        # a stock-shaped write of a bad model: refused by the broker naming the part, the stored one stays
        bad = model.to_json().replace('"GZone"', '"Gzone2"')
        (result,) = client.alter_configs({(ConfigResourceType.BROKER, ""): {"sofakafka.ldc.model": bad}})
        assert result.error == ErrorCode.INVALID_REQUEST
        assert "sofakafka.ldc.model" in (result.error_message or "")
        assert "cells.GZ00.zone: 'Gzone2' is not a zone" in (result.error_message or "")
        assert read_model(client) == model
        write_model(client, None)
        assert read_model(client) is None
