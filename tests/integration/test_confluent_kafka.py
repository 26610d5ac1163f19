"""confluent-kafka (the librdkafka bundled in its wheel) against a real broker: admin calls and a round trip.

librdkafka negotiates versions through ApiVersions. Its consumer insists on a ``group.id`` even for manual
assignment; with ``assign`` and no commits the group coordinator is never needed for fetching.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from tests.integration.conftest import BrokerProcess
from tests.integration.helpers import Rec, base_timestamp_ms, make_records, wait_for

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TIMEOUT_S = 30


def resolve(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {k: f.result(timeout=TIMEOUT_S) for k, f in futures.items()}


def partitions_of(admin: AdminClient, topic: str) -> list[int]:
    metadata = admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
    return [] if metadata is None or metadata.error is not None else sorted(metadata.partitions)


def produce(
    broker: BrokerProcess, topic: str, partition: int, codec: str, recs: list[Rec], **config: Any
) -> list[Any]:
    """Returns the delivery reports' (error, offset) in send order."""
    reports: list[Any] = []
    p = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.codec": codec, "acks": "all", "linger.ms": 20}
        | config
    )
    for r in recs:
        p.produce(
            topic,
            key=r.key,
            value=r.value,
            headers=list(r.headers),
            timestamp=r.timestamp_ms,
            partition=partition,
            on_delivery=lambda err, msg: reports.append((err, msg.offset())),
        )
    assert p.flush(TIMEOUT_S) == 0
    return reports


def consume(broker: BrokerProcess, topic: str, partition: int, start: int, count: int) -> list[Any]:
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "sofakafka-integration-unused",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, partition, start)])
        got: list[Any] = []

        def poll() -> list[Any] | None:
            for m in c.consume(num_messages=1000, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m)
            return got if len(got) >= count else None

        wait_for(f"{count} records of {topic}[{partition}]", poll, timeout_s=60)
        return got
    finally:
        c.close()


def as_tuples(msgs: list[Any]) -> list[tuple[Any, ...]]:
    return [(m.offset(), m.key(), m.value(), m.timestamp(), m.headers() or []) for m in msgs]


def expected(recs: list[Rec], first_offset: int = 0) -> list[tuple[Any, ...]]:
    # (timestamp type 1 = CreateTime, as librdkafka reports it)
    return [
        (first_offset + i, r.key, r.value, (1, r.timestamp_ms), list(r.headers)) for i, r in enumerate(recs)
    ]


def test_confluent_kafka_admin_and_round_trip(broker: BrokerProcess, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = topic_name

    resolve(admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "86400000"})]))
    # Metadata reaches brokers after CreateTopics answers, in Kafka too: wait for it, don't race it.
    wait_for("the new topic in metadata", lambda: partitions_of(admin, topic) or None)
    assert partitions_of(admin, topic) == [0]

    resource = ConfigResource("topic", topic)
    (configs,) = resolve(admin.describe_configs([resource])).values()
    assert configs["retention.ms"].value == "86400000"
    assert configs["cleanup.policy"].value == "delete"

    alter = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "172800000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    resolve(admin.incremental_alter_configs([alter]))
    (configs,) = resolve(admin.describe_configs([resource])).values()
    assert configs["retention.ms"].value == "172800000"

    resolve(admin.create_partitions([NewPartitions(topic, 3)]))
    wait_for("3 partitions in metadata", lambda: True if partitions_of(admin, topic) == [0, 1, 2] else None)

    ts0 = base_timestamp_ms()
    sent: list[Rec] = []
    for codec in CODECS:
        recs = make_records(5, tag=f"confluent-{codec}", with_headers=True, base_ts=ts0 + len(sent))
        reports = produce(broker, topic, 2, codec, recs)
        assert reports == [(None, len(sent) + i) for i in range(len(recs))]
        sent += recs
    assert as_tuples(consume(broker, topic, 2, OFFSET_BEGINNING, len(sent))) == expected(sent)

    tp = TopicPartition(topic, 2)
    (by_time,) = resolve(admin.list_offsets({tp: OffsetSpec.for_timestamp(sent[7].timestamp_ms)})).values()
    assert (by_time.offset, by_time.timestamp) == (7, sent[7].timestamp_ms)
    (latest,) = resolve(admin.list_offsets({tp: OffsetSpec.latest()})).values()
    assert latest.offset == len(sent)

    (deleted,) = resolve(admin.delete_records([TopicPartition(topic, 2, 10)])).values()
    assert deleted.low_watermark == 10
    (earliest,) = resolve(admin.list_offsets({tp: OffsetSpec.earliest()})).values()
    assert earliest.offset == 10
    assert as_tuples(consume(broker, topic, 2, OFFSET_BEGINNING, len(sent) - 10)) == expected(sent[10:], 10)

    resolve(admin.delete_topics([topic]))
    wait_for(
        "the deleted topic to leave the metadata",
        lambda: True if topic not in admin.list_topics(timeout=TIMEOUT_S).topics else None,
    )


def test_confluent_kafka_sees_message_too_large(broker: BrokerProcess, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resolve(admin.create_topics([NewTopic(topic_name, 1, 1, config={"max.message.bytes": "2000"})]))
    reports = produce(
        broker, topic_name, 0, "none", make_records(1, tag="huge", with_headers=False, value_size=10_000)
    )
    assert len(reports) == 1
    err, _ = reports[0]
    assert isinstance(err, KafkaError) and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
    ok = make_records(1, tag="small", with_headers=False)
    assert produce(broker, topic_name, 0, "none", ok) == [(None, 0)]


def test_confluent_kafka_describe_topics(broker: BrokerProcess, topic_name: str) -> None:
    """librdkafka's DescribeTopics: partitions and leaders as Metadata reports them."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resolve(admin.create_topics([NewTopic(topic_name, 2, 1)]))
    try:
        (description,) = resolve(admin.describe_topics(TopicCollection([topic_name]))).values()
    except KafkaException as exc:
        raise AssertionError(f"describe_topics failed: {exc}") from exc
    assert description.name == topic_name
    assert [p.id for p in description.partitions] == [0, 1]
    assert all(p.leader is not None and p.leader.id == 0 for p in description.partitions)


def test_confluent_kafka_idempotent_producer(broker: BrokerProcess, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resolve(admin.create_topics([NewTopic(topic_name, 1, 1)]))
    recs = make_records(20, tag="idem", with_headers=True)
    reports = produce(broker, topic_name, 0, "lz4", recs, **{"enable.idempotence": True})
    assert reports == [(None, i) for i in range(len(recs))]
    assert as_tuples(consume(broker, topic_name, 0, OFFSET_BEGINNING, len(recs))) == expected(recs)
