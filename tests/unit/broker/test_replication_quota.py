"""Replication throttles (KIP-73): the windowed rate, the throttled-replica lists, and both sides of a fetch.

The rate runs on a fake clock. The leader side is proved twice: its decision on a stand-in broker (ISR in and
out, quota under and over), and end to end through a real broker's Fetch handler, where a follower's fetch of a
throttled, out-of-sync partition comes back without records once the leader rate is exceeded. The follower side
runs the real fetcher loop against the fake leader wire of test_replica_fetch_session.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.broker.config import KafkaConfig
from sofakafka.broker.replica_fetcher import FetcherSettings, FollowedPartition, ReplicaFetcherManager
from sofakafka.broker.replica_manager import FetchPartitionRequest, ReplicaManager, TopicPartition
from sofakafka.broker.replication_quota import (
    UNTHROTTLED,
    ReplicationQuota,
    follower_throttled,
    leader_throttled,
    throttled_partitions,
)
from sofakafka.controller.metadata import ClusterMetadata, PartitionMetadata, TopicMetadata
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.alter_configs import AlterConfigsRequest
from sofakafka.protocol.messages.describe_configs import DescribeConfigsRequest
from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.messages.metadata import MetadataRequest
from sofakafka.protocol.messages.produce import ProduceRequest
from sofakafka.protocol.records import RecordBatchBuilder
from sofakafka.storage.config import LogConfig, throttled_replicas_error
from sofakafka.storage.errors import InvalidLogConfigError
from sofakafka.storage.log_manager import LogManager
from tests.unit.broker.broker_harness import BrokerThread, Client, running_broker
from tests.unit.broker.test_replica_fetch_session import TPS, FakeLeaderWire


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the rate ----------------------------------------------------------------------------------------------------


def test_a_first_record_counts_over_one_whole_window() -> None:
    clock = FakeClock()
    quota = ReplicationQuota(11, 2.0, clock)
    assert quota.rate() == 0.0
    quota.record(1000)
    assert quota.rate() == 500.0
    clock.now += 0.5
    assert quota.rate() == 500.0  # still less than a window since the sample started


def test_a_steady_rate_is_measured_within_one_sample_of_truth() -> None:
    clock = FakeClock()
    quota = ReplicationQuota(11, 1.0, clock)
    for _ in range(50):
        quota.record(100)
        clock.now += 1.0
    # Eleven samples of 100 bytes spanning ten and a bit windows: Kafka's SimpleRate reads slightly high too.
    assert 100.0 <= quota.rate() <= 110.0


def test_the_bound_decides_and_silence_ends_the_throttle() -> None:
    clock = FakeClock()
    quota = ReplicationQuota(3, 1.0, clock)
    quota.record(5000)
    assert not quota.is_quota_exceeded()  # unthrottled by default
    quota.bound = 4999
    assert quota.is_quota_exceeded()
    quota.bound = 5000
    assert not quota.is_quota_exceeded()  # Kafka's upper bound is inclusive
    quota.bound = 10
    clock.now += 3.01  # every sample is older than samples * window
    assert quota.rate() == 0.0 and not quota.is_quota_exceeded()


@given(st.integers(min_value=1, max_value=12), st.sampled_from([0.5, 1.0, 3.0]),
       st.lists(st.tuples(st.floats(min_value=0, max_value=5, allow_nan=False), st.integers(0, 10_000)),
                max_size=60))
def test_the_rate_only_counts_recent_bytes(samples: int, window: float, events: list[tuple[float, int]]) -> None:
    clock = FakeClock()
    quota = ReplicationQuota(samples, window, clock)
    history: list[tuple[float, int]] = []
    for gap, size in events:
        clock.now += gap
        quota.record(size)
        history.append((clock.now, size))
        rate = quota.rate()
        assert rate >= 0
        # Never more than everything ever recorded over one window, never more than the last
        # samples * window worth of bytes (plus the sample in progress) over one window.
        recent = sum(s for t, s in history if t >= clock.now - (samples + 1) * window)
        assert rate <= recent / window + 1e-6
        # The latest record is always counted.
        assert rate * max(window, samples * window) >= size - 1e-6
    clock.now += (samples + 1) * window
    assert quota.rate() == 0.0


# -- the throttled-replica lists ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["*", " * ", "", "0:1", "0:1,1:2", " 0:1 , 3:0 ", "0:1,,2:2", "12:345"])
def test_kafkas_throttled_replica_formats_are_accepted(value: str) -> None:
    assert throttled_replicas_error(value) is None
    LogConfig.from_props({"leader.replication.throttled.replicas": value,
                          "follower.replication.throttled.replicas": value})


@pytest.mark.parametrize("value", ["0", "0:", ":1", "a:1", "0:1:2", "*,0:1", "0-1", "**", "-1:0"])
def test_other_throttled_replica_values_are_refused_naming_kafkas_format(value: str) -> None:
    assert "[partitionId]:[brokerId]" in (throttled_replicas_error(value) or "")
    with pytest.raises(InvalidLogConfigError):
        LogConfig.from_props({"follower.replication.throttled.replicas": value})


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 4)), max_size=20), st.integers(0, 4))
def test_a_broker_throttles_exactly_the_partitions_listed_with_it(pairs: list[tuple[int, int]], broker: int) -> None:
    value = ",".join(f"{p}:{b}" for p, b in pairs)
    throttled = throttled_partitions(value, broker)
    assert {p for p in range(21) if p in throttled} == {p for p, b in pairs if b == broker}
    everything = throttled_partitions("*", broker)
    assert all(p in everything for p in range(21))


# -- the leader's decision ---------------------------------------------------------------------------------------


def _snapshot(isr: tuple[int, ...], topic_configs: dict[str, str], broker_configs: dict[str, str],
              broker_id: int) -> ClusterMetadata:
    p = PartitionMetadata("t", 0, leader=0, leader_epoch=1, replicas=(0, 1, 2), isr=isr, offline_replicas=())
    return ClusterMetadata(topics={"t": TopicMetadata("t", {0: p})}, topic_configs={"t": topic_configs},
                           broker_configs={str(broker_id): broker_configs})


def _fake_leader(isr: tuple[int, ...], throttled: str, rate: int | None) -> Any:
    broker: Any = SimpleNamespace(broker_id=0, config=KafkaConfig.from_properties({"log.dirs": "/nonexistent"}))
    snap = _snapshot(isr, {"leader.replication.throttled.replicas": throttled} if throttled else {},
                     {"leader.replication.throttled.rate": str(rate)} if rate is not None else {}, 0)
    broker.metadata = lambda: snap
    broker.replica_manager = SimpleNamespace(get_partition=lambda tp: SimpleNamespace(isr=list(isr)))
    return broker


REQ = [FetchPartitionRequest("t", 0, 0, 1 << 20)]


@pytest.mark.parametrize(("isr", "throttled", "rate", "recorded", "held"), [
    ((0, 1, 2), "0:0", 10, 1000, False),   # the follower is in sync: never held back
    ((0, 2), "0:0", 10, 1000, True),        # out of sync, throttled here, over the rate
    ((0, 2), "0:0", 10, 0, False),          # under the rate
    ((0, 2), "0:1", 10, 1000, False),       # the list names another broker as the leader
    ((0, 2), "*", 10, 1000, True),
    ((0, 2), "", 10, 1000, False),          # no list: nothing is throttled
    ((0, 2), "0:0", None, 1000, False),     # no rate: unthrottled
])
def test_the_leader_holds_back_only_out_of_sync_throttled_replicas_over_the_rate(
        isr: tuple[int, ...], throttled: str, rate: int | None, recorded: int, held: bool) -> None:
    broker = _fake_leader(isr, throttled, rate)
    quota, throttled_now, held_now = leader_throttled(broker, 1, REQ)
    if quota is not None:
        quota.record(recorded)
    quota, throttled_now, held_now = leader_throttled(broker, 1, REQ)
    assert bool(held_now) is held
    assert bool(throttled_now) is (throttled in ("0:0", "*"))
    assert leader_throttled(broker, -1, REQ)[2] == set()  # consumers are never throttled by this


# -- the leader side through a real broker -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    with running_broker(tmp_path_factory.mktemp("data")) as b:
        yield b


def _until(what: str, predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _alter(client: Client, resource_type: int, name: str, configs: dict[str, str]) -> None:
    res = AlterConfigsRequest.AlterConfigsResource
    resp = client.call(AlterConfigsRequest(resources=[res(resource_type=resource_type, resource_name=name, configs=[
        res.AlterableConfig(name=k, value=v) for k, v in configs.items()])]), 1)
    assert [(r.error_code, r.error_message) for r in resp.responses] == [(0, None)]


def _follower_fetch(client: Client, topic: str, replica_id: int) -> Any:
    t = FetchRequest.FetchableTopic
    resp = client.call(FetchRequest(replica_id=replica_id, max_wait=10, min_bytes=1, max_bytes=1 << 20,
                                    session_id=0, epoch=-1, topics=[t(name=topic, fetch_partitions=[
                                        t.FetchPartition(partition_index=0, fetch_offset=0, max_bytes=1 << 20)])]),
                       11)
    return resp.topics[0].partitions[0]


def test_a_throttled_out_of_sync_follower_gets_no_records_while_the_leader_rate_is_exceeded(
        broker: BrokerThread) -> None:
    b = broker.broker
    assert b is not None
    with Client(broker.port) as client:
        topic = "throttled"
        _until("a leader", lambda: (client.call(MetadataRequest(topics=[
            MetadataRequest.MetadataRequestTopic(name=topic)]), 9).topics[0].partitions or [None])[0] is not None
            and b.replica_manager.get_partition((topic, 0)) is not None)
        builder = RecordBatchBuilder()
        for i in range(10):
            builder.append_record(i, 1_700_000_000_000, None, b"x" * 100)
        tp = ProduceRequest.TopicProduceData
        produced = client.call(ProduceRequest(acks=1, timeout_ms=10_000, topics=[tp(name=topic, partitions=[
            tp.PartitionProduceData(partition_index=0, records=builder.build())])]), 8)
        assert produced.responses[0].partitions[0].error_code == ErrorCode.NONE

        _alter(client, 4, str(b.broker_id), {"leader.replication.throttled.rate": "1"})
        _alter(client, 2, topic, {"leader.replication.throttled.replicas": f"0:{b.broker_id}"})
        _until("the cache to see both", lambda: bool(b.metadata().topic_config(topic).get(
            "leader.replication.throttled.replicas")) and bool(b.metadata().broker_config(b.broker_id)))

        # Broker 1 is not in the ISR of this single-replica partition, so it is an out-of-sync follower.
        first = _follower_fetch(client, topic, 1)
        assert first.error_code == ErrorCode.NONE and len(first.records or b"") > 0  # the quota starts unused
        held = _follower_fetch(client, topic, 1)
        assert held.error_code == ErrorCode.NONE and not held.records and held.high_watermark == 10
        consumer = _follower_fetch(client, topic, -1)
        assert len(consumer.records or b"") > 0  # consumers are not replication traffic

        # Described as Kafka shows a set throttle: the per-broker dynamic value.
        desc = client.call(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=4, resource_name=str(b.broker_id),
            configuration_keys=["leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                "replication.quota.window.num"])]), 1)
        entries = {c.name: (c.value, c.config_source) for c in desc.results[0].configs}
        assert entries == {"leader.replication.throttled.rate": ("1", 2), "replication.quota.window.num": ("11", 5)}

        # No list on the topic: nothing held back.
        _alter(client, 2, topic, {})
        _until("the cache to drop the list", lambda: not b.metadata().topic_config(topic))
        assert len(_follower_fetch(client, topic, 1).records or b"") > 0
        _alter(client, 4, str(b.broker_id), {})


def test_bad_rates_and_lists_are_refused_as_kafka_refuses_them(broker: BrokerThread) -> None:
    res = AlterConfigsRequest.AlterConfigsResource
    with Client(broker.port) as client:
        for rtype, name, key, value in [(4, "0", "leader.replication.throttled.rate", "-1"),
                                        (4, "0", "follower.replication.throttled.rate", "fast"),
                                        (2, "throttled", "leader.replication.throttled.replicas", "0-1")]:
            resp = client.call(AlterConfigsRequest(resources=[res(resource_type=rtype, resource_name=name, configs=[
                res.AlterableConfig(name=key, value=value)])]), 1)
            assert resp.responses[0].error_code == ErrorCode.INVALID_REQUEST
            assert key in (resp.responses[0].error_message or "")


# -- the follower side -------------------------------------------------------------------------------------------


def test_the_follower_leaves_a_throttled_out_of_sync_partition_out_of_its_fetch_while_over_the_rate(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        logs = LogManager([tmp_path / "logs"], broker_id=1)
        logs.startup()
        rm = ReplicaManager(1, logs)
        wire = FakeLeaderWire()
        snap = ClusterMetadata(topic_configs={"t": {"follower.replication.throttled.replicas": "0:1"}},
                               broker_configs={"1": {"follower.replication.throttled.rate": "10"}})
        manager = ReplicaFetcherManager(rm, FetcherSettings(broker_id=1, listener_name="PLAINTEXT",
                                                            fetch_backoff_ms=10), lambda: snap)
        clock = FakeClock()
        manager.follower_quota = ReplicationQuota(11, 1.0, clock)
        fetcher = manager._fetcher(0)
        fetcher._connection = wire.connection  # type: ignore[method-assign,assignment]
        follower_logs = {}
        throttled, free = TPS[0], TPS[1]
        wire.append(throttled, 3)
        try:
            for topic, partition in (throttled, free):
                lg = await rm.become_follower(topic, partition)
                follower_logs[(topic, partition)] = lg
                fetcher.add(FollowedPartition(topic, partition, lg, leader=0, leader_epoch=1))

            async def until(what: str, predicate: Callable[[], bool]) -> None:
                deadline = time.monotonic() + 30
                while not predicate():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    await asyncio.sleep(0.01)

            def sent(r: FetchRequest) -> set[TopicPartition]:
                return {(t.name, p.partition_index) for t in r.topics for p in t.fetch_partitions}

            def forgotten(r: FetchRequest) -> set[TopicPartition]:
                return {(f.name, i) for f in r.forgotten for i in f.forgotten_partition_indexes}

            await until("the first copy", lambda: follower_logs[throttled].log_end_offset == 3)
            assert manager.follower_quota.is_quota_exceeded()  # three batches' bytes against 10 bytes/s
            # Over the rate: the throttled partition leaves the session (forgotten, as Kafka's fetcher drops it
            # from its request builder) while the free one keeps replicating.
            await until("the partition forgotten", lambda: any(throttled in forgotten(r) for r in wire.requests))
            mark = len(wire.requests)
            wire.append(throttled, 2)
            wire.append(free, 4)
            await until("the free partition replicated", lambda: follower_logs[free].log_end_offset == 4)
            await until("more fetches", lambda: len(wire.requests) > mark + 3)
            assert not any(throttled in sent(r) for r in wire.requests[mark:])
            assert follower_logs[throttled].log_end_offset == 3
            assert throttled in fetcher.partitions  # still followed, only left out of the requests

            # The rate falls below the bound: the partition is sent again, in full, and catches up.
            clock.now += 100
            await until("the throttled partition caught up", lambda: follower_logs[throttled].log_end_offset == 5)

            # In sync, a throttled partition is never held back, however high the rate.
            in_sync = ClusterMetadata(
                topics={"t": TopicMetadata("t", {0: PartitionMetadata("t", 0, 0, 1, (0, 1), (0, 1), ())})},
                topic_configs=snap.topic_configs, broker_configs=snap.broker_configs)
            manager.follower_quota.record(10**9)
            assert follower_throttled(in_sync, 1, manager.follower_quota, UNTHROTTLED, [throttled]) == (
                {throttled}, set())
            assert follower_throttled(snap, 1, manager.follower_quota, UNTHROTTLED, [throttled]) == (
                {throttled}, {throttled})
        finally:
            await manager.shutdown()
            rm.begin_shutdown()
            rm.shutdown_executors()
            logs.shutdown()

    asyncio.run(scenario())
