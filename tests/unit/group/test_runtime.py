"""The coordinator's runtime: hand-driven time, completions, the asyncio bridge, config, every API version."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from sofakafka.broker.config import KafkaConfig
from sofakafka.broker.group import (
    Completion,
    GroupConfig,
    GroupCoordinator,
    ManualTime,
    OffsetsRecord,
    SystemClock,
)
from sofakafka.broker.group.asyncio_bridge import LoopScheduler, wait_for
from sofakafka.broker.group.consumer_protocol import decode_assignment, encode_assignment
from sofakafka.protocol.errors import ErrorCode as E
from sofakafka.protocol.messages.join_group import JoinGroupRequest
from sofakafka.protocol.messages.sync_group import SyncGroupRequest
from tests.unit.group.harness import Harness, consumer_metadata


def test_manual_time_fires_timers_in_deadline_order_at_their_own_time() -> None:
    t = ManualTime(start_ms=0)
    fired: list[tuple[str, int]] = []
    t.call_later(30, lambda: fired.append(("b", t.now_ms())))
    t.call_later(10, lambda: (fired.append(("a", t.now_ms())), t.call_later(5, lambda: fired.append(("c", t.now_ms())))))
    cancelled = t.call_later(20, lambda: fired.append(("x", t.now_ms())))
    cancelled.cancel()
    t.advance(100)
    assert fired == [("a", 10), ("c", 15), ("b", 30)]
    assert t.now_ms() == 100


def test_completion_runs_callbacks_once_and_refuses_a_second_result() -> None:
    c: Completion[int] = Completion()
    seen: list[int] = []
    c.add_done_callback(seen.append)
    assert not c.done()
    with pytest.raises(RuntimeError):
        c.result()
    c.complete(3)
    c.add_done_callback(seen.append)
    assert seen == [3, 3] and c.result() == 3
    with pytest.raises(RuntimeError):
        c.complete(4)


def test_group_config_reads_kafka_keys() -> None:
    config = KafkaConfig.from_properties({
        "offsets.topic.num.partitions": "7",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "100",
        "group.max.session.timeout.ms": "200",
        "group.max.size": "5",
        "offsets.retention.minutes": "2",
        "offsets.retention.check.interval.ms": "1000",
        "offset.metadata.max.bytes": "10",
    })
    assert GroupConfig.from_config(config) == GroupConfig(
        offsets_topic_num_partitions=7, group_min_session_timeout_ms=100, group_max_session_timeout_ms=200,
        group_initial_rebalance_delay_ms=0, group_max_size=5, offsets_retention_minutes=2,
        offsets_retention_check_interval_ms=1000, offset_metadata_max_bytes=10)
    assert GroupConfig.from_config(KafkaConfig.from_properties({})) == GroupConfig()


class LoopWriter:
    """Acknowledges appends on a later loop iteration, as a replicated append does."""

    def __init__(self) -> None:
        self.records: list[tuple[int, OffsetsRecord]] = []

    def append(self, partition: int, records: Sequence[OffsetsRecord], done: Callable[[E], None]) -> None:
        self.records.extend((partition, r) for r in records)
        asyncio.get_running_loop().call_soon(done, E.NONE)


def test_a_group_forms_on_an_event_loop_through_the_bridge() -> None:
    async def scenario() -> list[tuple[str, int]]:
        loop = asyncio.get_running_loop()
        coordinator = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=10),
                                       SystemClock(), LoopScheduler(loop), LoopWriter())
        coordinator.load_partition(0, [])
        coordinator.start()

        def join(member_id: str) -> Completion:  # type: ignore[type-arg]
            return coordinator.join_group(JoinGroupRequest(
                group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member_id,
                protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=consumer_metadata(["t"]))],
            ), 4, "cid", "/127.0.0.1")

        first = await wait_for(join(""))
        assert first.error_code == E.MEMBER_ID_REQUIRED
        joined = await wait_for(join(first.member_id))  # completes when the initial delay's timer fires
        synced = await wait_for(coordinator.sync_group(SyncGroupRequest(
            group_id="g", generation_id=joined.generation_id, member_id=joined.member_id,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=joined.member_id, assignment=encode_assignment({"t": [0, 1]}))]), 3))
        coordinator.shutdown()
        return decode_assignment(synced.assignment).topic_partitions()

    assert asyncio.run(scenario()) == [("t", 0), ("t", 1)]


@pytest.mark.parametrize("join_version", range(8))
def test_every_join_and_sync_version_forms_a_group(join_version: int) -> None:
    h = Harness()
    r = h.join_new("g", version=join_version).result()
    assert r.error_code == 0 and r.generation_id == 1
    for sync_version in range(6):
        s = h.sync("g", 1, r.member_id, {r.member_id: b"a"}, version=sync_version).result()
        assert (s.error_code, s.assignment) == (0, b"a")
        assert s.protocol_name == ("range" if sync_version >= 5 else None)
    for hb_version in range(5):
        assert h.heartbeat("g", 1, r.member_id, version=hb_version) == 0
