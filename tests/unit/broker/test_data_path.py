"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch through a real broker, with our codec on the wire."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.messages.list_offset import ListOffsetRequest
from sofakafka.protocol.messages.metadata import MetadataRequest
from sofakafka.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from sofakafka.protocol.messages.produce import ProduceRequest
from sofakafka.protocol.records import (
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    CompressionType,
    Record,
    RecordBatchBuilder,
    build_message_set,
    decode_records,
    iter_batches,
)
from tests.unit.broker.broker_harness import BrokerThread, Client, running_broker

MAX_MESSAGE_BYTES = 4096


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    # The read_committed test writes a raw transactional batch with no coordinator behind it, to see the last
    # stable offset stop at an open transaction; with KIP-890-style verification on (the default) the broker
    # refuses exactly that batch, which test_txn_handlers.py checks.
    with running_broker(tmp_path_factory.mktemp("data"), {"message.max.bytes": str(MAX_MESSAGE_BYTES),
                                                          "transaction.partition.verification.enable": "false"}) as b:
        yield b


@pytest.fixture
def client(broker: BrokerThread) -> Iterator[Client]:
    with Client(broker.port) as c:
        yield c


_topics = iter(range(1_000_000))


def led_topic(client: Client, name: str) -> str:
    """``name``, once a Metadata request (which creates it) shows its first partition led."""
    for _ in range(600):
        (t,) = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 9).topics
        if t.error_code == ErrorCode.NONE and t.partitions[0].leader_id >= 0:
            return name
        time.sleep(0.05)
    raise AssertionError("no leader")


@pytest.fixture
def topic(client: Client) -> str:
    return led_topic(client, f"data-{next(_topics)}")


def batch(n: int, *, first_ts: int = 1_600_000_000_000, value: bytes = b"v", codec: int = 0) -> bytes:
    b = RecordBatchBuilder(compression=codec)
    for i in range(n):
        b.append_record(i, first_ts + i, b"k%d" % i, value)
    return b.build()


def produce(client: Client, topic: str, records: bytes, *, version: int = 8, acks: int = 1, partition: int = 0
            ) -> ProduceRequest.TopicProduceData:
    t = ProduceRequest.TopicProduceData
    resp = client.call(ProduceRequest(acks=acks, timeout_ms=10_000, topics=[
        t(name=topic, partitions=[t.PartitionProduceData(partition_index=partition, records=records)])]), version)
    return resp.responses[0].partitions[0]


def fetch(client: Client, topic: str, offset: int = 0, *, version: int = 11, max_bytes: int = 1 << 20,
          response_max_bytes: int = 0x7FFFFFFF, isolation_level: int = 0) -> object:
    t = FetchRequest.FetchableTopic
    resp = client.call(FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, max_bytes=response_max_bytes,
                                    isolation_level=isolation_level, topics=[
        t(name=topic, fetch_partitions=[t.FetchPartition(partition_index=0, fetch_offset=offset,
                                                         max_bytes=max_bytes)])]), version)
    return resp.topics[0].partitions[0]


def records_of(data: bytes) -> list[Record]:
    return [r for h in iter_batches(data) for r in decode_records(data, h)]


def test_produced_batches_come_back_byte_for_byte_with_offsets_assigned(client: Client, topic: str) -> None:
    first = produce(client, topic, batch(3))
    second = produce(client, topic, batch(2, codec=CompressionType.LZ4))
    assert (first.error_code, first.base_offset, second.base_offset) == (0, 0, 3)
    assert first.log_start_offset == 0 and first.log_append_time_ms == -1
    p = fetch(client, topic)
    data = bytes(p.records)
    assert p.high_watermark == 5 and p.last_stable_offset == 5 and p.log_start_offset == 0
    assert [h.base_offset for h in iter_batches(data)] == [0, 3]
    assert [(r.offset, r.key) for r in records_of(data)] == [(0, b"k0"), (1, b"k1"), (2, b"k2"), (3, b"k0"),
                                                            (4, b"k1")]


@pytest.mark.parametrize("magic,version", [(MAGIC_V0, 0), (MAGIC_V1, 2)])
def test_legacy_message_sets_are_stored_as_v2_and_down_converted_for_old_fetchers(
        client: Client, topic: str, magic: int, version: int) -> None:
    ts = -1 if magic == MAGIC_V0 else 1_600_000_000_123
    legacy = build_message_set([Record(i, ts, b"k%d" % i, b"v%d" % i) for i in range(3)], magic=magic)
    assert produce(client, topic, legacy, version=version).error_code == ErrorCode.NONE
    stored = bytes(fetch(client, topic).records)
    assert [h.magic for h in iter_batches(stored)] == [MAGIC_V2]
    for fetch_version, expected_magic in ((0, MAGIC_V0), (2, MAGIC_V1), (4, MAGIC_V2)):
        data = bytes(fetch(client, topic, version=fetch_version).records)
        assert {h.magic for h in iter_batches(data)} == {expected_magic}
        got = records_of(data)
        assert [(r.offset, r.key, r.value) for r in got] == [(i, b"k%d" % i, b"v%d" % i) for i in range(3)]
        if expected_magic >= MAGIC_V1 and magic == MAGIC_V1:
            assert [r.timestamp for r in got] == [ts] * 3


def test_a_batch_over_max_message_bytes_is_refused(client: Client, topic: str) -> None:
    p = produce(client, topic, batch(1, value=b"x" * (MAX_MESSAGE_BYTES + 1)))
    assert p.error_code == ErrorCode.MESSAGE_TOO_LARGE and p.base_offset == -1
    assert fetch(client, topic).high_watermark == 0


def test_a_corrupt_batch_is_refused(client: Client, topic: str) -> None:
    data = bytearray(batch(3))
    data[-1] ^= 0xFF  # inside the CRC-covered records
    p = produce(client, topic, bytes(data))
    assert p.error_code == ErrorCode.CORRUPT_MESSAGE
    assert p.error_message  # v8 says why


def test_invalid_acks_and_unknown_partitions(client: Client, topic: str) -> None:
    assert produce(client, topic, batch(1), acks=2).error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert produce(client, topic, batch(1), partition=7).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(client, "never-created-topic").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_fetch_beyond_the_log_end_is_offset_out_of_range(client: Client, topic: str) -> None:
    produce(client, topic, batch(2))
    p = fetch(client, topic, offset=5)
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and p.high_watermark == -1


def test_a_first_batch_larger_than_max_bytes_is_returned_whole_from_v3_only(client: Client, topic: str) -> None:
    """KIP-74: consumers must make progress; v0-2 fetchers keep the hard limit (a partial batch)."""
    big = batch(4, value=b"y" * 500)
    produce(client, topic, big)
    assert len(bytes(fetch(client, topic, version=4, max_bytes=100).records)) == len(big)
    partial = bytes(fetch(client, topic, version=2, max_bytes=100).records)
    assert len(partial) <= 100 and not list(iter_batches(partial))


def test_response_max_bytes_limits_later_partitions(client: Client, topic: str) -> None:
    produce(client, topic, batch(3, value=b"z" * 300))
    produce(client, topic, batch(3, value=b"z" * 300))
    data = bytes(fetch(client, topic, response_max_bytes=10).records)
    assert [h.base_offset for h in iter_batches(data)] == [0]  # one whole batch, not two


def test_list_offsets_by_time_earliest_and_latest(client: Client, topic: str) -> None:
    produce(client, topic, batch(3, first_ts=1000))
    produce(client, topic, batch(3, first_ts=5000))
    lt = ListOffsetRequest.ListOffsetTopic

    def lookup(ts: int, version: int = 5, max_num: int = 0) -> object:
        return client.call(ListOffsetRequest(replica_id=-1, topics=[lt(name=topic, partitions=[
            lt.ListOffsetPartition(partition_index=0, timestamp=ts, current_leader_epoch=-1 if version >= 4 else 0,
                                   max_num_offsets=max_num)])]), version).topics[0].partitions[0]

    assert (lookup(-2).offset, lookup(-1).offset) == (0, 6)
    assert (lookup(1001).offset, lookup(1001).timestamp) == (1, 1001)
    assert (lookup(4000).offset, lookup(4000).timestamp) == (3, 5000)
    assert lookup(99_999).offset == -1
    assert lookup(-1).leader_epoch == 0
    assert lookup(-1, version=0, max_num=5).old_style_offsets == [6, 0]
    assert lookup(-2, version=0, max_num=5).old_style_offsets == [0]


def test_list_offsets_latest_carries_the_current_leader_epoch_even_on_an_empty_log(client: Client, topic: str) -> None:
    """Kafka answers -1 with the partition's leader epoch whatever the offset; we gave -1 for an empty log (the
    epoch of a last record that does not exist), found by tests/conformance."""
    lt = ListOffsetRequest.ListOffsetTopic
    p = client.call(ListOffsetRequest(replica_id=-1, topics=[lt(name=topic, partitions=[
        lt.ListOffsetPartition(partition_index=0, timestamp=-1, current_leader_epoch=-1)])]), 5).topics[0].partitions[0]
    assert (p.error_code, p.offset, p.leader_epoch) == (0, 0, 0)


def test_offset_for_leader_epoch_answers_the_log_end_for_the_current_epoch(client: Client, topic: str) -> None:
    produce(client, topic, batch(4))
    ot = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    for version in range(4):
        resp = client.call(OffsetForLeaderEpochRequest(replica_id=-1, topics=[ot(name=topic, partitions=[
            ot.OffsetForLeaderPartition(partition_index=0, leader_epoch=0, current_leader_epoch=-1)])]), version)
        p = resp.topics[0].partitions[0]
        assert (p.error_code, p.end_offset) == (0, 4)
        if version >= 1:
            assert p.leader_epoch == 0
    resp = client.call(OffsetForLeaderEpochRequest(topics=[ot(name=topic, partitions=[
        ot.OffsetForLeaderPartition(partition_index=0, leader_epoch=0, current_leader_epoch=3)])]), 2)
    assert resp.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_incremental_fetch_sessions_over_the_wire(client: Client, topic: str) -> None:
    produce(client, topic, batch(2))
    t = FetchRequest.FetchableTopic

    def session_fetch(session_id: int, epoch: int, partitions: list[t.FetchPartition]) -> object:
        return client.call(FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, session_id=session_id, epoch=epoch,
                                        topics=[t(name=topic, fetch_partitions=partitions)] if partitions else []),
                           11)

    full = session_fetch(0, 0, [t.FetchPartition(partition_index=0, fetch_offset=0, max_bytes=1 << 20)])
    assert full.error_code == 0 and full.session_id != 0 and full.topics[0].partitions[0].high_watermark == 2
    # The client moves its offset past what it got; nothing else changed, so nothing comes back.
    quiet = session_fetch(full.session_id, 1, [t.FetchPartition(partition_index=0, fetch_offset=2, max_bytes=1 << 20)])
    assert quiet.error_code == 0 and quiet.session_id == full.session_id and quiet.topics == []
    produce(client, topic, batch(1))
    news = session_fetch(full.session_id, 2, [])
    (p,) = news.topics[0].partitions
    assert p.high_watermark == 3 and len(bytes(p.records)) > 0
    assert session_fetch(full.session_id, 9, []).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_log_append_time_topics_stamp_the_broker_time(tmp_path: Path) -> None:
    with running_broker(tmp_path, {"log.message.timestamp.type": "LogAppendTime"}) as b, Client(b.port) as c:
        name = "lat"
        for _ in range(600):
            (t,) = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 9).topics
            if t.error_code == ErrorCode.NONE and t.partitions[0].leader_id >= 0:
                break
            time.sleep(0.05)
        before = int(time.time() * 1000)
        p = produce(c, name, batch(2, first_ts=1000))
        assert p.error_code == 0 and p.log_append_time_ms >= before
        got = records_of(bytes(fetch(c, name).records))
        assert [r.timestamp for r in got] == [p.log_append_time_ms] * 2


def test_read_committed_stops_at_the_first_open_transaction(client: Client, topic: str) -> None:
    produce(client, topic, batch(3))
    txn = RecordBatchBuilder(producer_id=4242, producer_epoch=0, base_sequence=0, is_transactional=True)
    for i in range(2):
        txn.append_record(i, 1_600_000_000_000, b"t", b"open")
    assert produce(client, topic, txn.build()).error_code == ErrorCode.NONE
    produce(client, topic, batch(1))
    committed = fetch(client, topic, isolation_level=1)
    assert (committed.high_watermark, committed.last_stable_offset) == (6, 3)
    assert committed.aborted == []
    assert [h.base_offset for h in iter_batches(bytes(committed.records))] == [0]
    uncommitted = fetch(client, topic, isolation_level=0)
    assert uncommitted.aborted is None
    assert [h.base_offset for h in iter_batches(bytes(uncommitted.records))] == [0, 3, 5]


def test_acks_all_needs_min_insync_replicas(tmp_path: Path) -> None:
    with running_broker(tmp_path, {"min.insync.replicas": "2"}) as b, Client(b.port) as c:
        name = "isr"
        for _ in range(600):
            (t,) = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 9).topics
            if t.error_code == ErrorCode.NONE and t.partitions[0].leader_id >= 0:
                break
            time.sleep(0.05)
        assert produce(c, name, batch(1), acks=-1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert produce(c, name, batch(1), acks=1).error_code == ErrorCode.NONE
        assert fetch(c, name).high_watermark == 1


def test_a_waiting_fetch_counts_appended_bytes_against_min_bytes(broker: BrokerThread, client: Client,
                                                                  topic: str) -> None:
    """Woken by each append, the fetch answers only once ``min_bytes`` are there; the purgatory shows it is
    still waiting after the small append (checked right after that append's acknowledgement, which is sent
    only after the purgatory has been checked)."""
    assert broker.broker is not None
    purgatory = broker.broker.replica_manager.fetch_purgatory
    t = FetchRequest.FetchableTopic
    with Client(broker.port, timeout=30) as consumer:
        consumer.send(FetchRequest(replica_id=-1, max_wait=600_000, min_bytes=5000, topics=[
            t(name=topic, fetch_partitions=[t.FetchPartition(partition_index=0, fetch_offset=0,
                                                             max_bytes=1 << 20)])]), 11)
        for _ in range(600):  # the fetch reaches the purgatory asynchronously
            if purgatory.watched((topic, 0)) == 1:
                break
            time.sleep(0.05)
        assert purgatory.watched((topic, 0)) == 1
        assert produce(client, topic, batch(1)).error_code == ErrorCode.NONE
        assert purgatory.watched((topic, 0)) == 1
        assert produce(client, topic, batch(1, value=b"w" * 3000)).error_code == ErrorCode.NONE
        assert purgatory.watched((topic, 0)) == 1  # about 3.1 kB of the 5 kB asked for
        assert produce(client, topic, batch(1, value=b"w" * 3000)).error_code == ErrorCode.NONE
        _, resp = consumer.receive()
        data = bytes(resp.topics[0].partitions[0].records)
        assert [h.base_offset for h in iter_batches(data)] == [0, 1, 2]
        assert purgatory.watched((topic, 0)) == 0
