"""Produce and fetch behaviour a client relies on: acks levels, size limits, big polls, long polls, restarts,
fetch sessions, idempotence, and the produce checks Kafka 2.6 makes (per-record errors, timestamps, zstd).

kafka-python here negotiates versions through ApiVersions (no pinned ``api_version``), as most users run it.
Where a stock client cannot be made to send exactly the request that matters (acks=0 followed by another
request, an old Fetch version, a batch with a keyless record), the request goes out raw through ``wire``.
"""

from __future__ import annotations

import select
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import kafka.errors
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from sofakafka.protocol.api import ApiKey, decode_response
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest
from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.messages.produce import ProduceRequest
from sofakafka.protocol.records import (
    V2_HEADER_SIZE,
    CompressionType,
    Record,
    build_batch,
    iter_batches,
    read_batch_header,
)
from tests.integration import wire
from tests.integration.conftest import BrokerProcess
from tests.integration.helpers import Rec, base_timestamp_ms, make_records, wait_for

UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87


def new_topic(broker: BrokerProcess, topic: str, configs: dict[str, str] | None = None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        spec: dict[str, Any] = {"num_partitions": 1, "replication_factor": 1}
        if configs:
            spec["configs"] = configs
        result = admin.create_topics({topic: spec}, wait_for_metadata=True)
        assert [t["error_code"] for t in result["topics"]] == [0], result
    finally:
        admin.close()


def producer(broker: BrokerProcess, **config: Any) -> KafkaProducer:
    config.setdefault("enable_idempotence", False)
    config.setdefault("linger_ms", 5)
    return KafkaProducer(bootstrap_servers=broker.bootstrap, **config)


def send_all(p: KafkaProducer, topic: str, records: list[Rec]) -> list[int]:
    futures = [
        p.send(
            topic, key=r.key, value=r.value, headers=list(r.headers), timestamp_ms=r.timestamp_ms, partition=0
        )
        for r in records
    ]
    p.flush(timeout=60)
    return [f.get(timeout=60).offset for f in futures]


def consumer(broker: BrokerProcess, topic: str, **config: Any) -> KafkaConsumer:
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **config,
    )
    c.assign([TopicPartition(topic, 0)])
    return c


def read_n(
    broker: BrokerProcess, topic: str, n: int, poll_sizes: list[int] | None = None, **config: Any
) -> list[Any]:
    c = consumer(broker, topic, **config)
    try:
        got: list[Any] = []

        def poll() -> list[Any] | None:
            polled = [m for batch in c.poll(timeout_ms=500).values() for m in batch]
            if poll_sizes is not None and polled:
                poll_sizes.append(len(polled))
            got.extend(polled)
            return got if len(got) >= n else None

        wait_for(f"{n} records from {topic} (have {len(got)})", poll, timeout_s=90)
        return got
    finally:
        c.close()


def assert_same(got: list[Any], sent: list[Rec], first_offset: int = 0) -> None:
    assert [m.offset for m in got] == list(range(first_offset, first_offset + len(sent)))
    assert [(m.key, m.value, m.timestamp, list(m.headers)) for m in got] == [
        (r.key, r.value, r.timestamp_ms, list(r.headers)) for r in sent
    ]


def end_offset(broker: BrokerProcess, topic: str) -> int:
    c = consumer(broker, topic)
    try:
        tp = TopicPartition(topic, 0)
        return int(c.end_offsets([tp])[tp])
    finally:
        c.close()


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_every_acks_level_stores_the_records(broker: BrokerProcess, topic_name: str, acks: int) -> None:
    new_topic(broker, topic_name)
    records = make_records(50, tag=f"acks{acks}", with_headers=True)
    p = producer(broker, acks=acks)
    try:
        offsets = send_all(p, topic_name, records)
    finally:
        p.close(timeout=10)
    if acks != 0:
        # (with acks=0 there is no response: kafka-python 3.x then reports made-up offsets from 0)
        assert offsets == list(range(len(records)))
    assert_same(read_n(broker, topic_name, len(records)), records)


def test_acks_0_produce_gets_no_response_on_the_wire(broker: BrokerProcess, topic_name: str) -> None:
    """Kafka sends nothing back for acks=0; a response would be read as the answer to the next request."""
    new_topic(broker, topic_name)
    batch = build_batch([Record(0, base_timestamp_ms(), b"k", b"fire-and-forget")])
    produce = ProduceRequest(
        transactional_id=None,
        acks=0,
        timeout_ms=30_000,
        topics=[
            ProduceRequest.TopicProduceData(
                name=topic_name,
                partitions=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(partition_index=0, records=batch)
                ],
            )
        ],
    )
    with socket.create_connection((broker.host, broker.port), timeout=30) as s:
        wire.send(s, produce, 3, correlation_id=1)
        wire.send(s, ApiVersionsRequest(), 0, correlation_id=2)
        (correlation_id,) = struct.unpack_from(">i", wire.recv_frame(s))
    assert correlation_id == 2, "the first response on the connection must be ApiVersions'"
    assert [m.value for m in read_n(broker, topic_name, 1)] == [b"fire-and-forget"]


@pytest.mark.parametrize("fetch_version", [3, 9])
def test_zstd_topic_refused_to_fetchers_older_than_v10(
    broker: BrokerProcess, topic_name: str, fetch_version: int
) -> None:
    """Fetch v10 (2.1) is where zstd became readable. Kafka 2.6 decides by the topic's compression.type:
    a zstd topic answers older fetchers UNSUPPORTED_COMPRESSION_TYPE rather than bytes they cannot read.
    The producer sends uncompressed batches, so this also shows the broker recompressing to the topic's codec."""
    new_topic(broker, topic_name, {"compression.type": "zstd"})
    p = producer(broker, acks=1)
    try:
        assert send_all(p, topic_name, make_records(3, tag="zstd", with_headers=False)) == [0, 1, 2]
    finally:
        p.close(timeout=10)
    fetch = FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        topics=[
            FetchRequest.FetchableTopic(
                name=topic_name,
                fetch_partitions=[
                    FetchRequest.FetchableTopic.FetchPartition(
                        partition_index=0, fetch_offset=0, max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    with socket.create_connection((broker.host, broker.port), timeout=30) as s:
        old = wire.call(s, fetch, fetch_version, correlation_id=1)
        new = wire.call(s, fetch, 10, correlation_id=2)
    (old_partition,) = old.topics[0].partitions
    assert old_partition.error_code == UNSUPPORTED_COMPRESSION_TYPE
    (new_partition,) = new.topics[0].partitions
    assert new_partition.error_code == 0 and new_partition.high_watermark == 3
    records = bytes(new_partition.records or b"")
    assert len(records) > V2_HEADER_SIZE
    header = read_batch_header(records, 0)
    assert header is not None
    assert (header.base_offset, header.last_offset, header.compression) == (0, 2, CompressionType.ZSTD)


def test_record_over_max_message_bytes_is_refused_with_message_too_large(
    broker: BrokerProcess, topic_name: str
) -> None:
    new_topic(broker, topic_name, {"max.message.bytes": "2000"})
    p = producer(broker, acks=1, retries=0)
    try:
        small = make_records(1, tag="fits", with_headers=False)
        big = make_records(1, tag="too-big", with_headers=False, value_size=5000)
        with pytest.raises(kafka.errors.MessageSizeTooLargeError):
            send_all(p, topic_name, big)
        # The topic is still writable and the refused batch left nothing behind.
        assert send_all(p, topic_name, small) == [0]
    finally:
        p.close(timeout=10)
    assert_same(read_n(broker, topic_name, 1), small)
    assert end_offset(broker, topic_name) == 1


def test_ten_thousand_records_in_one_consumer_poll(broker: BrokerProcess, topic_name: str) -> None:
    new_topic(broker, topic_name)
    records = make_records(10_000, tag="bulk", with_headers=True)
    p = producer(broker, acks=1, batch_size=256 * 1024, compression_type="lz4")
    try:
        offsets = send_all(p, topic_name, records)
    finally:
        p.close(timeout=10)
    assert offsets == list(range(len(records)))
    poll_sizes: list[int] = []
    got = read_n(
        broker,
        topic_name,
        len(records),
        poll_sizes,
        max_poll_records=10_000,
        fetch_max_bytes=64 * 1024 * 1024,
        max_partition_fetch_bytes=64 * 1024 * 1024,
    )
    assert_same(got, records)
    assert poll_sizes == [10_000], "all 10,000 records should come back from a single poll"


def test_fetch_waiting_for_data_wakes_when_it_is_produced(broker: BrokerProcess, topic_name: str) -> None:
    """A stock consumer blocked in poll gets a record produced later. Its fetch may wait 120 s, past this
    test's 60 s bound, so a broker that parks fetches but never wakes them fails here; that the fetch really
    waits (rather than answering empty at once) is what the raw-wire test below pins down."""
    new_topic(broker, topic_name)
    c = consumer(broker, topic_name, fetch_max_wait_ms=120_000, fetch_min_bytes=1, request_timeout_ms=180_000)
    got: list[Any] = []
    polling = threading.Event()
    done = threading.Event()
    errors: list[BaseException] = []

    def poll_until_a_record() -> None:
        try:
            c.poll(timeout_ms=0)  # metadata, offset reset, then the first (waiting) fetch goes out
            polling.set()
            while not got and not done.is_set():
                for batch in c.poll(timeout_ms=1000).values():
                    got.extend(batch)
        except Exception as exc:  # noqa: BLE001 - handed to the test thread, which fails with it
            errors.append(exc)
        finally:
            done.set()

    t = threading.Thread(target=poll_until_a_record, daemon=True)
    t.start()
    try:
        assert polling.wait(30), "consumer did not start polling"
        # The consumer is (very likely) already parked in the broker's fetch purgatory; even if the
        # produce overtakes it, what is asserted stays true, it just proves less that time.
        time.sleep(1.0)
        assert not got
        record = make_records(1, tag="late", with_headers=True)
        p = producer(broker, acks=1)
        try:
            assert send_all(p, topic_name, record) == [0]
        finally:
            p.close(timeout=10)
        assert done.wait(60), "the waiting fetch was not woken by the append"
    finally:
        done.set()
        t.join(30)
        c.close()
    assert not errors, errors
    assert_same(got, record)


def restart(b: BrokerProcess, *, clean: bool) -> None:
    """Stop (SIGTERM, exit code 0) or kill -9, check the clean-shutdown marker says which, start again."""
    marker = b.data_dir / ".kafka_cleanshutdown"
    if clean:
        assert b.stop() == 0, b.log_tail()
        assert marker.exists(), "a clean shutdown must leave the marker that lets start-up skip recovery"
    else:
        b.kill()
        assert not marker.exists(), "a running broker must not have a clean-shutdown marker on disk"
    b.start()


def test_fetch_is_held_until_an_append_then_answered_with_it(broker: BrokerProcess, topic_name: str) -> None:
    """Fetch v11, min_bytes 1, max_wait 120 s on an empty partition: no answer while there is no data, then
    the append of another client completes it with that record, long before max_wait."""
    new_topic(broker, topic_name)
    fetch = FetchRequest(
        replica_id=-1,
        max_wait=120_000,
        min_bytes=1,
        topics=[
            FetchRequest.FetchableTopic(
                name=topic_name,
                fetch_partitions=[
                    FetchRequest.FetchableTopic.FetchPartition(
                        partition_index=0, fetch_offset=0, max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    with socket.create_connection((broker.host, broker.port), timeout=60) as s:
        wire.send(s, fetch, 11, correlation_id=1)
        readable, _, _ = select.select([s], [], [], 1.0)
        assert not readable, "the fetch was answered although there was no data and max_wait is 120 s"
        p = producer(broker, acks=1)
        try:
            record = make_records(1, tag="wake", with_headers=True)
            assert send_all(p, topic_name, record) == [0]
        finally:
            p.close(timeout=10)
        header, response = decode_response(wire.recv_frame(s), ApiKey.FETCH, 11)
    assert header.correlation_id == 1
    (partition,) = response.topics[0].partitions
    assert partition.error_code == 0 and partition.high_watermark == 1
    batch = read_batch_header(bytes(partition.records or b""), 0)
    assert batch is not None and (batch.base_offset, batch.record_count) == (0, 1)


def test_fetch_waits_for_min_bytes(broker: BrokerProcess, topic_name: str) -> None:
    """A small append does not complete a fetch asking for min_bytes 4000; the append that brings the
    readable bytes past it does, and the answer holds both."""
    new_topic(broker, topic_name)
    fetch = FetchRequest(
        replica_id=-1,
        max_wait=120_000,
        min_bytes=4000,
        topics=[
            FetchRequest.FetchableTopic(
                name=topic_name,
                fetch_partitions=[
                    FetchRequest.FetchableTopic.FetchPartition(
                        partition_index=0, fetch_offset=0, max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    p = producer(broker, acks=1)
    try:
        with socket.create_connection((broker.host, broker.port), timeout=60) as s:
            wire.send(s, fetch, 11, correlation_id=1)
            assert send_all(p, topic_name, make_records(1, tag="small", with_headers=False)) == [0]
            readable, _, _ = select.select([s], [], [], 1.0)
            assert not readable, "answered below min_bytes before max_wait"
            big = make_records(1, tag="big", with_headers=False, value_size=5000)
            assert send_all(p, topic_name, big) == [1]
            _, response = decode_response(wire.recv_frame(s), ApiKey.FETCH, 11)
    finally:
        p.close(timeout=10)
    (partition,) = response.topics[0].partitions
    records = bytes(partition.records or b"")
    assert partition.error_code == 0 and len(records) >= 4000
    assert [b.base_offset for b in iter_batches(records)] == [0, 1]


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill-9"])
def test_restart_keeps_every_acknowledged_record(
    broker_factory: Callable[..., BrokerProcess], clean: bool
) -> None:
    b = broker_factory({"log.segment.bytes": str(64 * 1024)})  # several segments, so recovery walks them
    topic = "restart-" + ("clean" if clean else "kill")
    new_topic(b, topic)
    first = make_records(2000, tag="before", with_headers=True, value_size=100)
    for acks, chunk in ((1, first[:1000]), (-1, first[1000:])):
        p = producer(b, acks=acks)
        try:
            offsets = send_all(p, topic, chunk)
        finally:
            p.close(timeout=10)
        assert offsets == list(range(offsets[0], offsets[0] + len(chunk)))

    restart(b, clean=clean)
    assert_same(read_n(b, topic, len(first)), first)

    # The log goes on where it stopped, and a second restart of the other kind keeps both parts.
    second = make_records(500, tag="after", with_headers=True, base_ts=first[-1].timestamp_ms + 1)
    p = producer(b, acks=-1)
    try:
        assert send_all(p, topic, second) == list(range(len(first), len(first) + len(second)))
    finally:
        p.close(timeout=10)
    restart(b, clean=not clean)
    assert_same(read_n(b, topic, len(first) + len(second)), first + second)
    assert end_offset(b, topic) == len(first) + len(second)


def test_incremental_fetch_session_follows_every_partition(broker: BrokerProcess, topic_name: str) -> None:
    """kafka-python keeps a KIP-227 fetch session: after the first full fetch it sends only what changed, and
    the broker answers only partitions with news. Records appended later to any partition, one partition
    at a time, must all arrive through the same session, each partition's in order."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics(
            {topic_name: {"num_partitions": 3, "replication_factor": 1}}, wait_for_metadata=True
        )
    finally:
        admin.close()
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    tps = [TopicPartition(topic_name, i) for i in range(3)]
    c.assign(tps)
    p = producer(broker, acks=1)
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    expected: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    try:
        for round_ in range(6):
            partition = [0, 2, 2, 1, 0, 2][round_]
            values = [f"r{round_}-{i}".encode() for i in range(3)]
            for v in values:
                p.send(topic_name, value=v, partition=partition)
            p.flush(timeout=30)
            expected[partition] += values

            def poll() -> bool | None:
                for tp, batch in c.poll(timeout_ms=500).items():
                    got[tp.partition].extend(m.value for m in batch)
                return True if got == expected else None

            wait_for(f"round {round_} on partition {partition}: have {got}, want {expected}", poll)
    finally:
        p.close(timeout=10)
        c.close()


def test_idempotent_producer_by_default(broker: BrokerProcess, topic_name: str) -> None:
    """kafka-python 3.x is idempotent unless told otherwise (InitProducerId, then sequenced batches):
    its defaults must work, and the stored batches carry the producer id it was given."""
    new_topic(broker, topic_name)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    records = make_records(30, tag="idempotent", with_headers=True)
    try:
        assert p.config["enable_idempotence"] is True
        assert send_all(p, topic_name, records) == list(range(len(records)))
    finally:
        p.close(timeout=10)
    assert_same(read_n(broker, topic_name, len(records)), records)
    fetch = FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        topics=[
            FetchRequest.FetchableTopic(
                name=topic_name,
                fetch_partitions=[
                    FetchRequest.FetchableTopic.FetchPartition(
                        partition_index=0, fetch_offset=0, max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    with socket.create_connection((broker.host, broker.port), timeout=30) as s:
        response = wire.call(s, fetch, 11)
    data = bytes(response.topics[0].partitions[0].records or b"")
    header = read_batch_header(data, 0)
    assert header is not None and header.producer_id >= 0 and header.base_sequence == 0


def test_sigterm_answers_a_waiting_fetch_and_exits_cleanly(
    broker_factory: Callable[..., BrokerProcess], topic_name: str
) -> None:
    """Shutdown finishes the requests it took: a fetch parked for 120 s is answered (empty) rather than
    dropped, and the broker exits 0 without waiting those 120 s (the stop helper allows 30)."""
    b = broker_factory()
    new_topic(b, topic_name)
    fetch = FetchRequest(
        replica_id=-1,
        max_wait=120_000,
        min_bytes=1,
        topics=[
            FetchRequest.FetchableTopic(
                name=topic_name,
                fetch_partitions=[
                    FetchRequest.FetchableTopic.FetchPartition(
                        partition_index=0, fetch_offset=0, max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    with socket.create_connection((b.host, b.port), timeout=60) as s:
        wire.send(s, fetch, 11, correlation_id=1)
        time.sleep(0.5)  # let the broker park it (if not, it is answered at once and the test proves less)
        assert b.stop() == 0, b.log_tail()
        header, response = decode_response(wire.recv_frame(s), ApiKey.FETCH, 11)
    assert header.correlation_id == 1
    (partition,) = response.topics[0].partitions
    assert partition.error_code == 0 and not partition.records


def produce_raw(broker: BrokerProcess, topic: str, records: list[Record], version: int) -> Any:
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topics=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partitions=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        partition_index=0, records=build_batch(records)
                    )
                ],
            )
        ],
    )
    with socket.create_connection((broker.host, broker.port), timeout=30) as s:
        response = wire.call(s, request, version)
    (partition,) = response.responses[0].partitions
    return partition


def test_keyless_record_on_compacted_topic_is_an_invalid_record_with_its_index(
    broker: BrokerProcess, topic_name: str
) -> None:
    """Produce v8 (KIP-467) names the offending record of the batch; nothing of the batch is appended."""
    new_topic(broker, topic_name, {"cleanup.policy": "compact"})
    ts = base_timestamp_ms()
    batch = [Record(0, ts, b"a", b"1"), Record(1, ts, None, b"no key"), Record(2, ts, b"c", b"3")]
    partition = produce_raw(broker, topic_name, batch, 8)
    assert partition.error_code == INVALID_RECORD
    assert [e.batch_index for e in partition.record_errors] == [1]
    assert end_offset(broker, topic_name) == 0
    # The same records with keys are fine.
    fixed = [Record(i, ts, b"k%d" % i, b"v") for i in range(3)]
    ok = produce_raw(broker, topic_name, fixed, 8)
    assert (ok.error_code, ok.base_offset) == (0, 0)


def test_timestamp_out_of_range_is_invalid_timestamp(broker: BrokerProcess, topic_name: str) -> None:
    new_topic(broker, topic_name, {"message.timestamp.difference.max.ms": "60000"})
    stale = base_timestamp_ms()  # an hour ago, beyond the topic's one minute
    partition = produce_raw(broker, topic_name, [Record(0, stale, b"k", b"old")], 8)
    assert partition.error_code == INVALID_TIMESTAMP
    assert end_offset(broker, topic_name) == 0
    now = int(time.time() * 1000)
    assert produce_raw(broker, topic_name, [Record(0, now, b"k", b"new")], 8).error_code == 0


def test_record_larger_than_the_fetch_limits_is_still_delivered(
    broker: BrokerProcess, topic_name: str
) -> None:
    """KIP-74 (Fetch v3+): the first batch is returned whole even past max_partition_fetch_bytes and the
    response's max bytes, or a consumer would be stuck forever on a big record."""
    new_topic(broker, topic_name)
    records = [
        *make_records(2, tag="before", with_headers=False),
        *make_records(1, tag="big", with_headers=False, value_size=900_000),
        *make_records(2, tag="after", with_headers=False),
    ]
    p = producer(broker, acks=1, linger_ms=0, max_request_size=2_000_000)
    try:
        offsets = [send_all(p, topic_name, [r])[0] for r in records]  # one batch per record
    finally:
        p.close(timeout=10)
    assert offsets == list(range(len(records)))
    got = read_n(
        broker, topic_name, len(records), max_partition_fetch_bytes=64 * 1024, fetch_max_bytes=128 * 1024
    )
    assert [(m.offset, m.value) for m in got] == [(i, r.value) for i, r in enumerate(records)]


def test_sigint_is_a_clean_shutdown_too(broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = broker_factory()
    new_topic(b, topic_name)
    records = make_records(20, tag="ctrl-c", with_headers=True)
    p = producer(b, acks=-1)
    try:
        assert send_all(p, topic_name, records) == list(range(len(records)))
    finally:
        p.close(timeout=10)
    assert b.stop(signal.SIGINT) == 0, b.log_tail()
    assert (b.data_dir / ".kafka_cleanshutdown").exists()
    b.start()
    assert_same(read_n(b, topic_name, len(records)), records)
