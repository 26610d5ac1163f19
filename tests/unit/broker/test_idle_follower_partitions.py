"""Idle partitions of a follower's fetch session cost nothing per fetch, and the ISR still follows Kafka's rule.

A real ReplicaManager over real logs leads one or two partitions with replicas [0, 1, 2]; followers fetch them
through the leader's real FetchSessionCache (attached to the replica manager as the broker attaches it), in the
steps the Fetch handler takes for a follower (``follower_fetch``); ISR changes go through a real IsrManager to an
embedded metadata store. The leader's wall clock is the test's.

What is proved: a partition at the log end with nothing new is parked (later fetches of the session do not read
it) and its follower stays in the ISR for as long as its session keeps fetching, whatever the number of such
fetches; Kafka's lag rule holds at its edges (exactly ``replica.lag.time.max.ms`` since the session's last fetch is
still in sync, one ms more is not); a change (an append, the follower leaving the ISR, leadership lost, the
partition forgotten) unparks it, and an append wakes a waiting fetch of the session, which answers the records at
once; a partition that is behind, or out of the ISR, is never parked, unless the follower's addition to the ISR
is being written, and the end of that write wakes it whatever its outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from sofakafka.broker.fetch_session import INITIAL_EPOCH, FetchContext, FetchSessionCache
from sofakafka.broker.isr import IsrManager
from sofakafka.broker.replica_manager import (
    FetchPartitionRequest,
    FetchPartitionResult,
    Partition,
    ReplicaManager,
)
from sofakafka.controller import zk_paths
from sofakafka.controller.store import MetadataStore
from sofakafka.controller.zk_data import PartitionState
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.records import RecordBatchBuilder
from sofakafka.storage.log_manager import LogManager
from tests.unit.broker.conftest import Clock
from tests.unit.broker.test_replication_leader import GatedWrites

T = TypeVar("T")
TOPIC = "t"
TP0, TP1 = (TOPIC, 0), (TOPIC, 1)
LEADER = 0
LAG_MS = 1000


def _batch(n: int) -> bytearray:
    builder = RecordBatchBuilder()
    for i in range(n):
        builder.append_record(i, 1_700_000_000_000 + i, None, f"v{i}".encode())
    return bytearray(builder.build())


class FollowerSession:
    """One follower's session with the leader, driven as the follower's fetcher drives it."""

    def __init__(self, leader: Leader, replica_id: int) -> None:
        self.leader = leader
        self.replica_id = replica_id
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.last: FetchContext | None = None

    async def fetch(self, changed: dict[tuple[str, int], int], *, forgotten: tuple[tuple[str, int], ...] = (),
                    max_wait_ms: int = 0, max_bytes: int = 1 << 20
                    ) -> dict[tuple[str, int], FetchPartitionResult]:
        """A Fetch naming ``changed`` (partition -> fetch offset); returns the partitions answered."""
        requested = [FetchPartitionRequest(t, p, offset, 1 << 20) for (t, p), offset in changed.items()]
        ctx = await self.leader.follower_fetch(self.replica_id, self.session_id, self.epoch, requested,
                                               list(forgotten), max_wait_ms, max_bytes)
        assert ctx[0].error == ErrorCode.NONE and ctx[0].session_id != 0
        self.last = ctx[0]
        self.session_id = ctx[0].session_id
        self.epoch += 1
        return {req.tp: result for req, result in ctx[1]}

    def parked(self) -> frozenset[tuple[str, int]]:
        return self.leader.sessions.parked_partitions(self.session_id)

    def read(self) -> list[tuple[str, int]]:
        """The partitions the last fetch read."""
        assert self.last is not None
        return [req.tp for req in self.last.partitions]


class Leader:
    def __init__(self, tmp_path: Path, store: MetadataStore) -> None:
        self.logs = LogManager([tmp_path / "logs"], broker_id=LEADER)
        self.logs.startup()
        self.rm = ReplicaManager(LEADER, self.logs)
        self.sessions = FetchSessionCache(10)
        self.sessions.attach(self.rm)
        self.store = store
        for p in (0, 1):
            store.create(zk_paths.topic_partition_state_path(TOPIC, p), PartitionState(LEADER, 0, 1, (0, 1, 2)).encode(),
                         makepath=True)
        self.isr = IsrManager(self.rm, store, LEADER, replica_lag_time_max_ms=LAG_MS, run_blocking=self.blocking)

    @staticmethod
    async def blocking(fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    async def lead(self, partition: int = 0, isr: tuple[int, ...] = (0, 1, 2)) -> Partition:
        if not self.isr._tasks:
            self.isr.start()
        return await self.rm.become_leader(TOPIC, partition, 0, [0, 1, 2], list(isr), zk_version=0,
                                           controller_epoch=1)

    async def produce(self, tp: tuple[str, int], n: int) -> None:
        result = (await self.rm.append_records(acks=1, timeout_ms=30_000, entries=[(tp, _batch(n))],
                                               produce_version=8))[tp]
        assert result.error_code == ErrorCode.NONE

    async def follower_fetch(self, replica_id: int, session_id: int, epoch: int,
                             requested: list[FetchPartitionRequest], forgotten: list[tuple[str, int]],
                             max_wait_ms: int, max_bytes: int
                             ) -> tuple[FetchContext, list[tuple[FetchPartitionRequest, FetchPartitionResult]]]:
        """What the Fetch handler does with a follower's request (handlers/fetch.py)."""
        ctx = self.sessions.new_context(session_id, epoch, requested, forgotten, privileged=True,
                                        replica_id=replica_id)
        if ctx.error != ErrorCode.NONE:
            return ctx, []
        follower = ctx.session.follower if ctx.session is not None else None

        async def fetch(partitions: list[FetchPartitionRequest], wait: int, min_bytes: int
                        ) -> list[FetchPartitionResult]:
            return await self.rm.fetch_messages(replica_id=replica_id, max_wait_ms=wait, min_bytes=min_bytes,
                                                max_bytes=max_bytes, isolation_level=0, partitions=partitions,
                                                session=follower)

        results = await fetch(ctx.partitions, max_wait_ms, 1)
        woken = ctx.take_woken()
        if woken:
            results = [*results, *await fetch(woken, 0, 0)]
        pairs = ctx.response_partitions(results)
        self.sessions.park_idle(ctx, results)
        return ctx, pairs

    async def settle(self) -> None:
        for _ in range(3000):
            if not self.isr._writes:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("ISR writes did not finish")

    def znode_isr(self, partition: int = 0) -> tuple[int, ...]:
        data, _ = self.store.get(zk_paths.topic_partition_state_path(TOPIC, partition))
        return PartitionState.decode(data).isr

    async def close(self) -> None:
        await self.isr.stop()
        self.rm.begin_shutdown()
        self.rm.shutdown_executors()
        self.logs.shutdown()


def run(coro_fn: Callable[[Leader], Awaitable[None]], tmp_path: Path, store: MetadataStore) -> None:
    async def main() -> None:
        leader = Leader(tmp_path, store)
        try:
            await coro_fn(leader)
        finally:
            await leader.close()

    asyncio.run(main())


async def _caught_up(leader: Leader, part: Partition) -> tuple[FollowerSession, FollowerSession]:
    """Followers 1 and 2 fetch ``part`` to its log end and learn its high watermark: both park it."""
    f1, f2 = FollowerSession(leader, 1), FollowerSession(leader, 2)
    end = part.log.log_end_offset
    await f1.fetch({part.tp: end})
    await f2.fetch({part.tp: end})  # the high watermark reaches the log end here
    await f1.fetch({})  # and follower 1 learns it
    assert part.log.high_watermark == end
    assert f1.parked() == f2.parked() == {part.tp}
    return f1, f2


def test_an_idle_partition_is_not_read_and_its_follower_stays_in_the_isr_while_its_session_fetches(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    async def scenario(leader: Leader) -> None:
        part = await leader.lead()
        await leader.produce(TP0, 3)
        f1, f2 = await _caught_up(leader, part)
        for _ in range(20):  # ten lag windows of empty incremental fetches
            clock.advance(LAG_MS // 2)
            assert await f1.fetch({}) == {} and await f2.fetch({}) == {}
            assert f1.read() == f2.read() == []  # parked: not read, not even looked at
            await leader.isr.maybe_shrink()
            await leader.settle()
        assert part.isr == [0, 1, 2] and leader.znode_isr() == (0, 1, 2)
        assert leader.rm.metrics.isr_shrinks == 0

        # Follower 2's session stops fetching: after the lag it leaves the ISR, follower 1 does not.
        clock.advance(LAG_MS // 2)
        await f1.fetch({})
        clock.advance(LAG_MS // 2 + 1)
        await f1.fetch({})
        await leader.isr.maybe_shrink()
        await leader.settle()
        assert part.isr == [0, 1] and leader.znode_isr() == (0, 1)
        # Out of the ISR, follower 2's partition is fetched again (it must be seen catching up to rejoin).
        assert TP0 not in f2.parked()

    run(scenario, tmp_path, store)


@pytest.mark.parametrize(("since_last_fetch_ms", "stays"), [(LAG_MS - 1, True), (LAG_MS, True), (LAG_MS + 1, False)])
def test_a_parked_follower_is_in_sync_up_to_exactly_the_lag_since_its_sessions_last_fetch(
        tmp_path: Path, store: MetadataStore, clock: Clock, since_last_fetch_ms: int, stays: bool) -> None:
    async def scenario(leader: Leader) -> None:
        part = await leader.lead()
        await leader.produce(TP0, 3)
        f1, f2 = await _caught_up(leader, part)
        clock.advance(LAG_MS // 2)
        await f1.fetch({})
        await f2.fetch({})
        fetched_at = clock.now_ms
        assert part.caught_up_ms(1, -1) == part.caught_up_ms(2, -1) == fetched_at
        clock.advance(since_last_fetch_ms)
        await leader.isr.maybe_shrink()
        await leader.settle()
        assert part.isr == ([0, 1, 2] if stays else [0])

    run(scenario, tmp_path, store)


def test_an_append_unparks_wakes_the_waiting_fetch_and_keeps_kafkas_caught_up_time(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    async def scenario(leader: Leader) -> None:
        part = await leader.lead()
        await leader.produce(TP0, 3)
        f1, _ = await _caught_up(leader, part)
        clock.advance(300)
        await f1.fetch({})
        last_fetch = clock.now_ms
        # A fetch of the session waits (nothing to read, the partition is parked) until the append wakes it.
        waiting = asyncio.create_task(f1.fetch({}, max_wait_ms=600_000))
        await asyncio.sleep(0)
        clock.advance(100)
        assert not waiting.done()
        await leader.produce(TP0, 2)
        answered = await asyncio.wait_for(waiting, 30)
        assert set(answered) == {TP0} and len(answered[TP0].records) > 0 and f1.read() == [TP0]
        assert TP0 not in f1.parked()
        # The follower was at the log end as of its session's last fetch (before the append, the waiting fetch
        # began at last_fetch + 0): that is its caught-up time, as in Kafka, not the time of the append.
        assert part.caught_up_ms(1, -1) == last_fetch
        clock.advance(LAG_MS)
        await leader.isr.maybe_shrink()
        await leader.settle()
        assert 1 not in part.isr  # it did not fetch the new records for longer than the lag

    run(scenario, tmp_path, store)


def test_a_follower_fetching_without_reaching_a_moving_log_end_counts_its_previous_fetch(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    """Kafka's second rule, across a parked stretch: a fetch below the log end that reaches where the log ended at
    the previous fetch counts that previous fetch as caught up, the previous fetch being the session's last."""
    async def scenario(leader: Leader) -> None:
        part = await leader.lead()
        await leader.produce(TP0, 3)
        f1, _ = await _caught_up(leader, part)
        clock.advance(200)
        await f1.fetch({})  # parked: not read
        previous = clock.now_ms
        clock.advance(200)
        await leader.produce(TP0, 2)  # unparks
        clock.advance(50)
        await f1.fetch({TP0: 3})  # still at 3 (the records are in this answer): behind the log end of 5
        assert part.caught_up_ms(1, -1) == previous
        clock.advance(50)
        await f1.fetch({TP0: 5})
        assert part.caught_up_ms(1, -1) == clock.now_ms

    run(scenario, tmp_path, store)


def test_a_partition_the_follower_is_behind_on_is_not_parked_even_when_answered_without_records(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    async def scenario(leader: Leader) -> None:
        await leader.lead(0)
        await leader.lead(1)
        await leader.produce(TP0, 5)
        await leader.produce(TP1, 5)
        f1 = FollowerSession(leader, 1)
        # The response's max_bytes is spent on the first partition: the second answers no records (and nothing
        # news about it either) although the follower is behind on it. Neither is parked.
        answered = await f1.fetch({TP0: 0, TP1: 0}, max_bytes=1)
        assert len(answered[TP0].records) > 0 and answered[TP1].records == b""
        assert f1.parked() == frozenset()
        assert f1.read() == [TP0, TP1]
        answered = await f1.fetch({TP0: 5})
        assert len(answered[TP1].records) > 0  # read again, and answered its records this time

    run(scenario, tmp_path, store)


def test_a_follower_out_of_the_isr_is_never_parked(tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    async def scenario(leader: Leader) -> None:
        p0 = await leader.lead(0)
        p1 = await leader.lead(1, isr=(0, 2))
        # Follower 1's expansion into the ISR of partition 1 is held off: the write would add it (and then it
        # could park).
        leader.rm.isr_expansion_listener = None
        f1 = FollowerSession(leader, 1)
        await f1.fetch({TP0: 0, TP1: 0})
        await f1.fetch({})
        assert 1 not in p1.isr and f1.parked() == {TP0}
        for _ in range(3):
            clock.advance(10)
            await f1.fetch({})
            assert f1.read() == [TP1]  # still read at every fetch, so its catching up is seen
        assert p0.caught_up_ms(1, -1) == p1.caught_up_ms(1, -1) == clock.now_ms

    run(scenario, tmp_path, store)


def test_leadership_lost_forgetting_and_a_new_session_unpark(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    async def scenario(leader: Leader) -> None:
        p0 = await leader.lead(0)
        await leader.lead(1)
        f1 = FollowerSession(leader, 1)
        f2 = FollowerSession(leader, 2)
        for f in (f1, f2, f1):
            await f.fetch({TP0: 0, TP1: 0} if f.session_id == 0 else {})
        assert f1.parked() == {TP0, TP1}
        clock.advance(100)
        await f1.fetch({})
        last = clock.now_ms

        # Forgotten by the follower: unparked, its caught-up time kept from the session.
        await f1.fetch({}, forgotten=(TP0,))
        assert f1.parked() == {TP1} and 1 not in p0.idle_followers and p0.caught_up_ms(1, -1) == last

        # Leadership moves away: the partition answers its error at the next fetch (UNKNOWN_TOPIC_OR_PARTITION:
        # this replica manager has no metadata to tell it the partition exists, a broker's answers
        # NOT_LEADER_OR_FOLLOWER).
        await leader.rm.stop_replica(TOPIC, 1, delete=False)
        assert f1.parked() == frozenset()
        answered = await f1.fetch({})
        assert answered[TP1].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        # A session closed by a new full fetch leaves nothing parked behind.
        await f2.fetch({})
        assert f2.parked() == {TP0}
        old = f2.session_id
        old_session = leader.sessions.get(old)
        assert old_session is not None and p0.idle_followers[2] is old_session.follower
        f2.epoch = INITIAL_EPOCH
        await f2.fetch({TP0: 0})
        assert f2.session_id != old and leader.sessions.get(old) is None
        assert p0.idle_followers.get(2) is not old_session.follower

    run(scenario, tmp_path, store)


@pytest.mark.parametrize("write_fails", [False, True])
def test_a_follower_whose_addition_to_the_isr_is_in_flight_parks_and_is_woken_when_the_write_ends(
        tmp_path: Path, store: MetadataStore, clock: Clock, write_fails: bool) -> None:
    """A broker back from a restart catches up on thousands of partitions whose ISR additions queue up: each is
    parked from the fetch that started its addition, not read at every fetch until the write is done. The write's
    end wakes it either way; a failed one (the controller wrote the state meanwhile) is tried again from the
    follower's next fetch, and a successful one leaves it parked in the ISR from then on."""
    async def scenario(leader: Leader) -> None:
        part = await leader.lead(0, isr=(0, 2))
        held = GatedWrites()
        leader.isr._run_blocking = held
        f1 = FollowerSession(leader, 1)
        await f1.fetch({TP0: 0})  # at the log end: its addition is written, and held
        assert part.isr_update_in_flight and part.maximal_isr == [0, 2, 1] and held.started == 1
        await f1.fetch({})
        assert f1.parked() == {TP0}
        for _ in range(3):
            clock.advance(10)
            await f1.fetch({})
            assert f1.read() == []  # not read while the write is in flight
        if write_fails:
            # The controller writes the partition's state first: the leader's write is refused (BadVersion).
            path = zk_paths.topic_partition_state_path(TOPIC, 0)
            store.set(path, PartitionState(LEADER, 0, 1, (0, 2)).encode())
        held.gate.set()
        await leader.settle()
        assert f1.parked() == frozenset()  # woken, whatever the outcome
        assert part.isr == ([0, 2] if write_fails else [0, 2, 1])
        if write_fails:
            part.zk_version = store.get(zk_paths.topic_partition_state_path(TOPIC, 0))[1].version
            await f1.fetch({})
            assert f1.read() == [TP0]  # fetched again, and its addition tried again from this fetch
            await leader.settle()
            assert part.isr == [0, 2, 1] and leader.znode_isr() == (0, 2, 1)
        await f1.fetch({})
        await f1.fetch({})
        assert f1.parked() == {TP0} and f1.read() == []

    run(scenario, tmp_path, store)
