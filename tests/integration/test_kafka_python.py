"""kafka-python at every broker release it can pin, from 0.10.0 to 2.6, against one real broker.

Pinning ``api_version`` makes kafka-python use that release's request versions without asking ApiVersions,
so each parameter drives a different mix: 0.10.x produces and fetches message format v1 (the broker converts
it to v2 for storage and back down for the fetch), 0.11+ record batches v2 with headers, 2.1+ adds zstd.

kafka-python 3.x notes (checked in its source, 3.0.12):
- its release table is keyed (0, 10, 0), (0, 10, 1), (0, 10, 2), then (0, 11), (1, 0), ... (2, 6): a
  three-part (0, 11, 0) is accepted but mapped down with a logged warning, so the test pins the table's own
  keys and checks what the client resolved;
- producers are idempotent by default from 0.11 (like the Java client 3.0), which needs InitProducerId;
  these tests turn it off (``enable_idempotence=False``) because the round trip is about produce/fetch;
- CreateTopics exists from 0.10.1; at 0.10.0 the topic is created the way such clients did it, by
  ``auto.create.topics.enable`` on a Metadata request;
- consumers without ``group_id`` use manual assignment and no offset commits (no group coordinator needed);
- snappy needs python-snappy (in the test extra).
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.records import MAGIC_V2, BatchHeader, CompressionType, iter_batches
from tests.integration import wire
from tests.integration.conftest import BrokerProcess
from tests.integration.helpers import Rec, base_timestamp_ms, make_records, wait_for

# (what the issue names, kafka-python 3.x's key for that release)
RELEASES = [
    ((0, 10, 0), (0, 10, 0)),
    ((0, 10, 1), (0, 10, 1)),
    ((0, 10, 2), (0, 10, 2)),
    ((0, 11, 0), (0, 11)),
    ((1, 0, 0), (1, 0)),
    ((1, 1, 0), (1, 1)),
    ((2, 0, 0), (2, 0)),
    ((2, 1, 0), (2, 1)),
    ((2, 2, 0), (2, 2)),
    ((2, 3, 0), (2, 3)),
    ((2, 4, 0), (2, 4)),
    ((2, 5, 0), (2, 5)),
    ((2, 6, 0), (2, 6)),
]
RECORDS_PER_CODEC = 6


def codecs_for(release: tuple[int, ...]) -> list[str | None]:
    codecs: list[str | None] = [None, "gzip", "snappy", "lz4"]
    if release >= (2, 1):
        codecs.append("zstd")
    return codecs


def create_topic(broker: BrokerProcess, topic: str, api_version: tuple[int, ...]) -> None:
    if api_version < (0, 10, 1):
        return  # auto-created by the producer's first Metadata request
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=api_version)
    try:
        result = admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
        assert [t["error_code"] for t in result["topics"]] == [0], result
    finally:
        admin.close()


def produce(
    broker: BrokerProcess,
    topic: str,
    api_version: tuple[int, ...],
    codec: str | None,
    records: list[Rec],
    timestamps: bool = True,
) -> list[int]:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        api_version=api_version,
        compression_type=codec,
        enable_idempotence=False,
        acks=-1,
        linger_ms=50,  # lets the records of one codec share a batch, so compression really applies
    )
    try:
        assert producer.config["api_version"] == api_version
        futures = [
            producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers) if api_version >= (0, 11) else None,
                timestamp_ms=r.timestamp_ms if timestamps else None,
                partition=0,
            )
            for r in records
        ]
        producer.flush(timeout=30)
        return [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(timeout=10)


def consume_all(
    broker: BrokerProcess, topic: str, api_version: tuple[int, ...], count: int, **config: object
) -> list[Any]:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        api_version=api_version,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **config,
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[Any] = []

        def poll() -> list[Any] | None:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
            return got if len(got) >= count else None

        wait_for(f"{count} records from {topic} (have {len(got)})", poll, timeout_s=60)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("release,api_version", RELEASES, ids=lambda v: ".".join(map(str, v)))
def test_round_trip_every_codec_at_release(
    broker: BrokerProcess, topic_name: str, release: tuple[int, ...], api_version: tuple[int, ...]
) -> None:
    create_topic(broker, topic_name, api_version)
    with_headers = api_version >= (0, 11)
    sent: list[Rec] = []
    ts0 = base_timestamp_ms()
    for codec in codecs_for(release):
        records = make_records(
            RECORDS_PER_CODEC, tag=f"{codec}", with_headers=with_headers, base_ts=ts0 + len(sent)
        )
        offsets = produce(broker, topic_name, api_version, codec, records)
        assert offsets == list(range(len(sent), len(sent) + len(records))), (codec, offsets)
        sent += records

    got = consume_all(broker, topic_name, api_version, len(sent))
    assert len(got) == len(sent)
    assert [m.offset for m in got] == list(range(len(sent)))
    assert [(m.key, m.value, m.timestamp, m.timestamp_type) for m in got] == [
        (r.key, r.value, r.timestamp_ms, 0) for r in sent
    ]
    if with_headers:
        assert [list(m.headers) for m in got] == [list(r.headers) for r in sent]
    # What the log holds: v2 batches (converted from v1 for 0.10.x producers), each codec kept as sent.
    stored = stored_batches(broker, topic_name)
    assert {b.magic for b in stored} == {MAGIC_V2}
    assert sorted({b.compression for b in stored}) == sorted(CODEC_IDS[c] for c in codecs_for(release))
    assert stored[-1].last_offset == len(sent) - 1


CODEC_IDS = {
    None: CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


def stored_batches(broker: BrokerProcess, topic: str) -> list[BatchHeader]:
    """The batch headers a Fetch v11 returns from offset 0: the stored batches, byte for byte."""
    fetch = FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        topics=[
            FetchRequest.FetchableTopic(
                name=topic,
                fetch_partitions=[
                    FetchRequest.FetchableTopic.FetchPartition(
                        partition_index=0, fetch_offset=0, max_bytes=1 << 22
                    )
                ],
            )
        ],
    )
    with socket.create_connection((broker.host, broker.port), timeout=30) as s:
        response = wire.call(s, fetch, 11)
    (partition,) = response.topics[0].partitions
    assert partition.error_code == 0
    return list(iter_batches(bytes(partition.records or b"")))


@pytest.mark.parametrize(
    "producer_version,consumer_version",
    [((2, 6), (0, 10, 0)), ((2, 6), (0, 10, 2)), ((0, 10, 0), (2, 6)), ((0, 11), (0, 10, 1))],
    ids=lambda v: ".".join(map(str, v)),
)
def test_records_cross_message_formats_between_releases(
    broker: BrokerProcess,
    topic_name: str,
    producer_version: tuple[int, ...],
    consumer_version: tuple[int, ...],
) -> None:
    """A new producer's batches reach an old consumer down-converted to message format v1 (headers dropped,
    as Kafka does), and an old producer's messages reach a new consumer as batches; keys, values,
    timestamps and offsets survive both ways."""
    create_topic(broker, topic_name, max(producer_version, (0, 10, 1)))
    with_headers = producer_version >= (0, 11)
    sent: list[Rec] = []
    ts0 = base_timestamp_ms()
    for codec in [None, "gzip", "snappy", "lz4"]:
        records = make_records(4, tag=f"x-{codec}", with_headers=with_headers, base_ts=ts0 + len(sent))
        assert produce(broker, topic_name, producer_version, codec, records) == list(
            range(len(sent), len(sent) + len(records))
        )
        sent += records
    got = consume_all(broker, topic_name, consumer_version, len(sent))
    assert [m.offset for m in got] == list(range(len(sent)))
    assert [(m.key, m.value, m.timestamp) for m in got] == [(r.key, r.value, r.timestamp_ms) for r in sent]
    if consumer_version >= (0, 11):
        assert all(list(m.headers) == [] for m in got)


@pytest.mark.parametrize(
    "producer_version,consumer_version",
    [((2, 6), (0, 9)), ((0, 9), (2, 6))],
    ids=lambda v: ".".join(map(str, v)),
)
def test_message_format_v0_both_ways(
    broker: BrokerProcess,
    topic_name: str,
    producer_version: tuple[int, ...],
    consumer_version: tuple[int, ...],
) -> None:
    """0.9-era clients (Produce/Fetch v0-1, message format v0, no timestamps) are older than the issue's
    range but still spoken by 2.6: their messages are stored as v2 batches without timestamps, and stored
    batches reach them as v0 messages."""
    create_topic(broker, topic_name, (2, 6))
    sent: list[Rec] = []
    for codec in [None, "gzip", "snappy"]:
        records = make_records(3, tag=f"v0-{codec}", with_headers=False)
        offsets = produce(
            broker, topic_name, producer_version, codec, records, timestamps=producer_version >= (0, 10)
        )
        assert offsets == list(range(len(sent), len(sent) + len(records)))
        sent += records
    got = consume_all(broker, topic_name, consumer_version, len(sent))
    assert [(m.offset, m.key, m.value) for m in got] == [(i, r.key, r.value) for i, r in enumerate(sent)]
    # No timestamp: a v2 record carries -1; kafka-python shows a v0 message's absent field as None.
    no_timestamp = None if consumer_version < (0, 10) else -1
    assert [m.timestamp for m in got] == [no_timestamp] * len(sent)
