"""The leader's side of replication on one machine: a real ReplicaManager over real logs, follower fetches as
the Fetch handler makes them (``replica_id`` >= 0), and ISR changes written to a real embedded metadata store.

What is proved: the high watermark is the smallest log end offset of the ISR, acks=-1 waits for it (and is
refused below ``min.insync.replicas``), consumers never read past it while followers read to the log end, the
ISR shrinks after ``replica.lag.time.max.ms`` and expands once a follower is caught up, both written to the
state znode first, and a write on a stale znode version changes nothing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from sofakafka.broker import isr, replica_manager
from sofakafka.broker.isr import IsrManager
from sofakafka.broker.replica_manager import FetchPartitionRequest, Partition, ReplicaManager
from sofakafka.controller import zk_paths
from sofakafka.controller.store import MetadataStore
from sofakafka.controller.zk_data import PartitionState
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.records import RecordBatchBuilder, iter_batches
from sofakafka.storage.config import LogConfig
from sofakafka.storage.leader_epoch import EpochEntry
from sofakafka.storage.log import AppendOrigin
from sofakafka.storage.log_manager import LogManager
from tests.unit.broker.conftest import Clock

T = TypeVar("T")
TOPIC = "t"
TP = (TOPIC, 0)
LEADER = 0


def _batch(n: int) -> bytearray:
    builder = RecordBatchBuilder()
    for i in range(n):
        builder.append_record(i, 1_700_000_000_000 + i, None, f"v{i}".encode())
    return bytearray(builder.build())


class Harness:
    def __init__(self, tmp_path: Path, store: MetadataStore, min_isr: int = 2, lag_ms: int = 30_000) -> None:
        config = LogConfig.from_props({"min.insync.replicas": str(min_isr)})
        self.logs = LogManager([tmp_path / "logs"], default_config=config, broker_id=LEADER)
        self.logs.startup()
        self.rm = ReplicaManager(LEADER, self.logs)
        self.store = store
        self.state_path = zk_paths.topic_partition_state_path(TOPIC, 0)
        store.create(self.state_path, PartitionState(LEADER, 0, 1, (0, 1, 2)).encode(), makepath=True)
        self.isr = IsrManager(self.rm, store, LEADER, replica_lag_time_max_ms=lag_ms, run_blocking=self.blocking)

    @staticmethod
    async def blocking(fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    async def lead(self, isr: tuple[int, ...] = (0, 1, 2)) -> Partition:
        self.isr.start()
        return await self.rm.become_leader(TOPIC, 0, 0, [0, 1, 2], list(isr), zk_version=0, controller_epoch=1)

    async def produce(self, n: int, acks: int, timeout_ms: int = 30_000) -> tuple[int, int]:
        result = (await self.rm.append_records(acks=acks, timeout_ms=timeout_ms, entries=[(TP, _batch(n))],
                                               produce_version=8))[TP]
        return result.error_code, result.base_offset

    async def follower_fetch(self, replica: int, offset: int) -> int:
        """A follower's fetch at ``offset``; returns the high watermark the leader answered with."""
        [r] = await self.rm.fetch_messages(replica_id=replica, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                           isolation_level=0, partitions=[FetchPartitionRequest(TOPIC, 0, offset, 1 << 20)])
        assert r.error_code == ErrorCode.NONE
        return r.high_watermark

    async def consumer_read_end(self) -> int:
        [r] = await self.rm.fetch_messages(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                           isolation_level=0, partitions=[FetchPartitionRequest(TOPIC, 0, 0, 1 << 20)])
        return len(r.records)

    def znode(self) -> tuple[PartitionState, int]:
        data, stat = self.store.get(self.state_path)
        return PartitionState.decode(data), stat.version

    async def close(self) -> None:
        await self.isr.stop()
        self.rm.begin_shutdown()
        self.rm.shutdown_executors()
        self.logs.shutdown()


def run(coro_fn: Callable[[Harness], Awaitable[None]], tmp_path: Path, store: MetadataStore, **kwargs: int) -> None:
    async def main() -> None:
        h = Harness(tmp_path, store, **kwargs)
        try:
            await coro_fn(h)
        finally:
            await h.close()

    asyncio.run(main())


def test_high_watermark_is_the_smallest_log_end_of_the_isr_and_consumers_stop_there(
        tmp_path: Path, store: MetadataStore) -> None:
    async def scenario(h: Harness) -> None:
        part = await h.lead()
        assert await h.produce(10, acks=1) == (ErrorCode.NONE, 0)
        assert part.log.high_watermark == 0
        assert await h.consumer_read_end() == 0  # nothing committed yet
        assert await h.follower_fetch(1, 10) == 0  # replica 2 has nothing yet
        assert await h.follower_fetch(2, 4) == 4
        assert await h.follower_fetch(2, 10) == 10
        assert await h.consumer_read_end() > 0

    run(scenario, tmp_path, store)


def test_acks_all_waits_until_every_isr_member_has_fetched_past_it(tmp_path: Path, store: MetadataStore) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead()
        waiting = asyncio.create_task(h.produce(5, acks=-1))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await h.follower_fetch(1, 5)
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await h.follower_fetch(2, 5)
        assert await asyncio.wait_for(waiting, 10) == (ErrorCode.NONE, 0)

    run(scenario, tmp_path, store)


def test_acks_all_is_refused_below_min_insync_replicas_and_acks_1_is_not(tmp_path: Path, store: MetadataStore) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(isr=(0,))
        assert (await h.produce(1, acks=-1))[0] == ErrorCode.NOT_ENOUGH_REPLICAS
        assert await h.produce(1, acks=1) == (ErrorCode.NONE, 0)

    run(scenario, tmp_path, store)


def test_a_lagging_follower_leaves_the_isr_through_the_state_znode_and_a_caught_up_one_returns(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    async def scenario(h: Harness) -> None:
        part = await h.lead()
        await h.produce(3, acks=1)
        await h.follower_fetch(1, 3)
        clock.advance(100)  # replica 2 has not caught up for longer than the 50 ms lag allowed here
        await h.follower_fetch(1, 3)
        await h.isr.maybe_shrink()
        await _settle(h)
        state, version = h.znode()
        assert state.isr == (0, 1)
        assert (state.leader, state.leader_epoch, state.controller_epoch) == (LEADER, 0, 1)
        assert part.isr == [0, 1] and part.zk_version == version == 1
        assert part.log.high_watermark == 3  # no longer waiting for replica 2

        await h.follower_fetch(2, 1)  # behind the high watermark: not yet
        await _settle(h)
        assert h.znode()[0].isr == (0, 1)
        await h.follower_fetch(2, 3)
        await _settle(h)
        state, version = h.znode()
        assert state.isr == (0, 1, 2)
        assert part.isr == [0, 1, 2] and part.zk_version == version == 2

    run(scenario, tmp_path, store, lag_ms=50)


def test_an_isr_write_on_a_stale_znode_version_changes_nothing(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    async def scenario(h: Harness) -> None:
        part = await h.lead()
        # The controller moves leadership meanwhile: the state znode is no longer the version the leader knows.
        h.store.set(h.state_path, PartitionState(1, 1, 1, (1, 2)).encode())
        clock.advance(100)
        await h.isr.maybe_shrink()
        await _settle(h)
        assert h.znode()[0] == PartitionState(1, 1, 1, (1, 2))
        assert part.isr == [0, 1, 2]

    run(scenario, tmp_path, store, lag_ms=50)


class GatedWrites:
    """run_blocking for the IsrManager that holds every ISR write until the test opens the gate, so the test can
    act while an expansion is written to ZooKeeper but its answer has not reached the leader."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = 0

    async def __call__(self, fn: Callable[[], T]) -> T:
        self.started += 1
        await self.gate.wait()
        return await asyncio.get_running_loop().run_in_executor(None, fn)


@pytest.mark.parametrize("write_succeeds", [True, False])
def test_a_replica_being_added_to_the_isr_holds_the_high_watermark_until_the_write_is_answered(
        tmp_path: Path, store: MetadataStore, clock: Clock, write_succeeds: bool) -> None:
    """The leader of [0] adds follower 1 once it reaches the HW; while that write is in flight the controller may
    already elect 1 from ZooKeeper, so records appended meanwhile must not become visible to consumers (or be
    acknowledged) beyond what 1 has: they would be lost when 1 takes over (chaos seed 5029 lost a read record)."""
    async def scenario(h: Harness) -> None:
        gated = GatedWrites()
        h.isr._run_blocking = gated
        part = await h.lead(isr=(0,))
        await h.produce(3, acks=1)
        assert part.log.high_watermark == 3
        await h.follower_fetch(1, 3)  # caught up with the HW: the expansion to [0, 1] starts, and waits
        assert gated.started == 1 and part.isr_update_in_flight
        await h.produce(2, acks=1)
        assert part.log.log_end_offset == 5
        assert part.log.high_watermark == 3  # held at what replica 1 has
        [r] = await h.rm.fetch_messages(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                        isolation_level=0, partitions=[FetchPartitionRequest(TOPIC, 0, 3, 1 << 20)])
        assert (r.high_watermark, len(r.records)) == (3, 0)  # a consumer sees nothing past it
        await h.follower_fetch(1, 4)
        assert part.log.high_watermark == 4
        if not write_succeeds:
            # The controller wrote the state znode meanwhile: the expansion fails and 1 counts no longer.
            h.store.set(h.state_path, PartitionState(LEADER, 0, 1, (0,)).encode())
        gated.gate.set()
        await _settle(h)
        if write_succeeds:
            assert h.znode()[0].isr == (0, 1) and part.isr == [0, 1]
            assert part.log.high_watermark == 4
            await h.follower_fetch(1, 5)
        else:
            assert part.isr == [0] and part.pending_isr is None
            part.maybe_increment_high_watermark()
        assert part.log.high_watermark == 5

    run(scenario, tmp_path, store, min_isr=1)


def test_a_shrink_below_min_insync_replicas_fails_waiting_acks_all(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    async def scenario(h: Harness) -> None:
        part = await h.lead(isr=(0, 1))
        waiting = asyncio.create_task(h.produce(2, acks=-1))
        # The produce must be appended (and wait for replica 1) before the shrink, else it is refused up front.
        for _ in range(3000):
            if part.log.log_end_offset == 2:
                break
            await asyncio.sleep(0.01)
        assert part.log.log_end_offset == 2 and not waiting.done()
        clock.advance(100)
        await h.isr.maybe_shrink()  # replica 1 never fetched: out after 50 ms
        await _settle(h)
        assert h.znode()[0].isr == (0,)
        assert (await asyncio.wait_for(waiting, 10))[0] == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    run(scenario, tmp_path, store, lag_ms=50)


async def _settle(h: Harness) -> None:
    """Let the ISR writes started so far finish (they run on an executor)."""
    for _ in range(3000):
        if not h.isr._writes:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("ISR writes did not finish")


def test_metrics_count_bytes_and_messages_per_batch_set_replication_apart_and_isr_changes(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    """BytesIn/MessagesIn per appended partition (the batch's own size), BytesOut for consumers only and
    ReplicationBytesOut for followers (Kafka's split), failed produces with their error, ISR shrinks/expands."""
    async def scenario(h: Harness) -> None:
        m = h.rm.metrics
        await h.lead(isr=(0, 1))
        batch = _batch(4)
        assert (await h.rm.append_records(acks=1, timeout_ms=1000, entries=[(TP, batch)], produce_version=8))[TP] \
            .error_code == ErrorCode.NONE
        assert (m.bytes_in[TOPIC], m.messages_in[TOPIC], m.produce_requests[TOPIC]) == (len(batch), 4, 1)
        await h.follower_fetch(1, 0)  # the follower reads all 4 records
        assert await h.follower_fetch(1, 4) == 4  # and has them: the high watermark moves
        assert m.replication_bytes_out == len(batch) and m.bytes_out[TOPIC] == 0
        assert await h.consumer_read_end() == len(batch)
        assert m.bytes_out[TOPIC] == len(batch) and m.fetch_requests[TOPIC] == 3
        unknown = ("no-such-topic", 0)
        await h.rm.append_records(acks=1, timeout_ms=1000, entries=[(unknown, _batch(1))], produce_version=8)
        assert m.failed_produce_requests["no-such-topic"] == 1
        assert m.errors[("Produce", "UNKNOWN_TOPIC_OR_PARTITION")] == 1
        clock.advance(100)  # replica 1 has not fetched for longer than the 50 ms lag: out; back once caught up
        await h.isr.maybe_shrink()
        await _settle(h)
        assert (m.isr_shrinks, m.isr_expands) == (1, 0)
        await h.follower_fetch(1, 4)
        await _settle(h)
        assert (m.isr_shrinks, m.isr_expands) == (1, 1)

    run(scenario, tmp_path, store, lag_ms=50)


def test_the_appended_hook_runs_after_the_append_before_the_acks_all_wait(tmp_path: Path, store: MetadataStore) -> None:
    """The produce audit's hook sees the append's own result even when replication then times out."""
    async def scenario(h: Harness) -> None:
        await h.lead(isr=(0, 1))
        seen: list[tuple[int, int, int]] = []

        def hook(entries: object, results: dict[tuple[str, int], replica_manager.ProducePartitionResult]) -> None:
            r = results[TP]
            seen.append((r.error_code, r.base_offset, r.last_offset))

        results = await h.rm.append_records(acks=-1, timeout_ms=50, entries=[(TP, _batch(3))], produce_version=8,
                                            on_appended=hook)
        assert seen == [(ErrorCode.NONE, 0, 2)]
        assert results[TP].error_code == ErrorCode.REQUEST_TIMED_OUT  # replica 1 never fetched

    run(scenario, tmp_path, store)


def test_isr_changes_of_many_partitions_are_written_together(
        tmp_path: Path, store: MetadataStore, clock: Clock) -> None:
    """A follower catching up on many partitions at once (a broker back after a restart) adds itself to their ISRs in
    a few batched writes (pipelined on ZooKeeper), not one round trip each; every partition's write is still its
    own, conditioned on its own version. Counted, not timed."""
    partitions = 40

    async def scenario(h: Harness) -> None:
        for p in range(1, partitions):
            store.create(zk_paths.topic_partition_state_path(TOPIC, p), PartitionState(LEADER, 0, 1, (0,)).encode(),
                         makepath=True)
        h.isr.start()
        parts = [await h.rm.become_leader(TOPIC, p, 0, [0, 1], [0], zk_version=0, controller_epoch=1)
                 for p in range(partitions)]
        writes: list[int] = []
        real = store.multi_many

        def counting(transactions: Any) -> Any:
            writes.append(len(transactions))
            return real(transactions)

        store.multi_many = counting  # type: ignore[method-assign]
        gated = GatedWrites()
        h.isr._run_blocking = gated
        for p in range(partitions):  # caught up (nothing written yet): each expansion queues
            await h.rm.fetch_messages(replica_id=1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                      partitions=[FetchPartitionRequest(TOPIC, p, 0, 1 << 20)])
        assert all(part.isr_update_in_flight for part in parts)
        gated.gate.set()
        await _settle(h)
        assert sum(writes) == partitions and len(writes) <= 2
        for p, part in enumerate(parts):
            data, _ = store.get(zk_paths.topic_partition_state_path(TOPIC, p))
            assert PartitionState.decode(data).isr == (0, 1) and part.isr == [0, 1]

    run(scenario, tmp_path, store)


def test_a_produce_queued_right_behind_a_new_leader_epoch_is_stamped_with_it(
        tmp_path: Path, store: MetadataStore) -> None:
    """The controller gives the partition a new leader epoch while this broker keeps leading it. The epoch starts
    in the leader-epoch cache at the log end, on the append thread; a produce queued on that thread right behind
    it must carry the new epoch. It carried the old one while the loop had not yet resumed to note the new epoch,
    and appending it re-assigned the old epoch at its offset, which erased where that epoch had begun: a
    follower then asking where its last epoch ended was answered with an offset too high, kept two records the
    leader did not have and, elected later, served them instead of two acknowledged ones (chaos run, seed 3,
    isolate: two acknowledged records lost, two transactional ones duplicated)."""
    async def scenario(h: Harness) -> None:
        part = await h.lead()  # epoch 0
        await h.produce(3, acks=1)
        await h.rm.become_leader(TOPIC, 0, 1, [0, 1, 2], [0, 1, 2], zk_version=0, controller_epoch=1)
        await h.produce(2, acks=1)  # epoch 1 begins at 3
        moving = asyncio.ensure_future(
            h.rm.become_leader(TOPIC, 0, 2, [0, 1, 2], [0, 1, 2], zk_version=0, controller_epoch=1))
        await asyncio.sleep(0)  # the new epoch is queued on the append thread
        results: list[object] = []
        h.rm.append_records_then(acks=1, timeout_ms=1000, entries=[(TP, _batch(1))], origin=AppendOrigin.CLIENT,
                                 done=results.append)
        appended = threading.Event()
        h.rm._append_executor.submit(appended.set)  # behind the produce, on the one append thread
        assert appended.wait(10)  # the loop waits here: become_leader cannot resume before the produce is in
        await moving
        assert part.leader_epoch == 2
        assert part.log.leader_epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(1, 3), EpochEntry(2, 5)]
        assert part.log.end_offset_for_epoch(1) == (1, 5)  # a follower of epoch 1 with more truncates to 5

    run(scenario, tmp_path, store)


def test_isr_change_notifications_are_split_so_none_passes_the_request_limit(
        tmp_path: Path, store: MetadataStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """40,000 ISR changes in one 2.5 s window made a 1.3 MB notification, over ZooKeeper's request limit: it was
    refused and lost. They go in several sequential znodes, each partition in exactly one."""
    from sofakafka.controller import zk_data
    from sofakafka.controller.zk_data import TopicPartition as ZkTopicPartition

    monkeypatch.setattr(isr, "ISR_CHANGES_PER_NOTIFICATION", 3)

    async def scenario(h: Harness) -> None:
        changed = {ZkTopicPartition(TOPIC, p) for p in range(7)}
        h.isr._pending_notifications.update(changed)
        await h.isr._propagate()
        children = sorted(h.store.get_children(zk_paths.ISR_CHANGE_NOTIFICATION_PATH))
        notified = [zk_data.decode_isr_change_notification(
            h.store.get(f"{zk_paths.ISR_CHANGE_NOTIFICATION_PATH}/{c}")[0]) for c in children]
        assert [len(n) for n in notified] == [3, 3, 1]
        assert sorted(tp for n in notified for tp in n) == sorted(changed)

    run(scenario, tmp_path, store)


@pytest.mark.parametrize("isolation_level", [1, 0], ids=["read_committed", "read_uncommitted"])
def test_a_consumer_fetch_during_an_append_ends_at_the_log_end_and_the_next_one_is_in_range(
        tmp_path: Path, store: MetadataStore, isolation_level: int) -> None:
    """A produce is appended while a fetch reads: its batch is in the segment file before the log end moves. The
    fetch must end at the log end it saw (Kafka's read ends at the log end's position), so the fetcher's next
    offset is in the log. A read_committed librdkafka consumer of the chaos suite was given such a batch and
    was then told OFFSET_OUT_OF_RANGE by the same leader for the offset after it: nothing was lost, but the
    consumer had to reset its position. Here the leader alone is in the ISR, so the high watermark and last
    stable offset are the log end, and the append is held between its write and the log end's move by the
    leader-epoch cache's lock, which it takes in between. (A follower's fetch cannot be made here: recording
    its fetch offset takes the log's lock, which the held append has; tests/unit/storage covers its read.)"""
    async def scenario(h: Harness) -> None:
        part = await h.lead(isr=(0,))
        assert await h.produce(3, acks=1) == (ErrorCode.NONE, 0)
        assert part.log.high_watermark == part.log.last_stable_offset == 3

        async def fetch(offset: int) -> replica_manager.FetchPartitionResult:
            [r] = await h.rm.fetch_messages(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                            isolation_level=isolation_level,
                                            partitions=[FetchPartitionRequest(TOPIC, 0, offset, 1 << 20)])
            return r

        size = part.log.active_segment.size
        with part.log.leader_epoch_cache._lock:  # holds the append between its write and the end
            producing = asyncio.ensure_future(h.produce(2, acks=1))
            while part.log.active_segment.size == size and not producing.done():
                await asyncio.sleep(0.001)  # until the batch is in the file
            assert part.log.log_end_offset == 3
            first = await fetch(0)
            assert first.error_code == ErrorCode.NONE
            batches = list(iter_batches(first.records))
            following = batches[-1].last_offset + 1
            second = await fetch(following)
            # What the consumer was told: OFFSET_OUT_OF_RANGE, having been given offsets 3 and 4 the log did
            # not have yet.
            assert ErrorCode(second.error_code) == ErrorCode.NONE, f"at {following}, the log ending at 3"
            assert following == 3
            assert second.records == b""
        assert await asyncio.wait_for(producing, 10) == (ErrorCode.NONE, 3)

    run(scenario, tmp_path, store)


def test_a_consumer_told_out_of_range_is_logged_with_where_the_log_stood(
        tmp_path: Path, store: MetadataStore, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka answers it silently; here the broker says at INFO where the log stood (start, high watermark,
    last stable offset, end), which the chaos suite's broker logs lacked when a consumer was told it."""
    async def scenario(h: Harness) -> None:
        await h.lead(isr=(0,))
        await h.produce(3, acks=1)
        with caplog.at_level("INFO", logger=replica_manager.__name__):
            [r] = await h.rm.fetch_messages(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                            isolation_level=1,
                                            partitions=[FetchPartitionRequest(TOPIC, 0, 7, 1 << 20, 0)])
        assert r.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert ("consumer fetch of t-0 at offset 7 (txn_committed, leader epoch 0) is out of range: log start 0, "
                "high watermark 3, last stable offset 3, log end 3") in caplog.messages

    run(scenario, tmp_path, store)


def test_a_shutting_down_leader_never_acknowledges_acks_all_records_the_isr_lacks(
        tmp_path: Path, store: MetadataStore) -> None:
    # Chaos (tests.cluster.chaos, seed 8004): a produce held behind an unanswered acks=all produce of its
    # connection was appended only once the broker was shutting down, and answered NONE at once, though no
    # follower had it; the follower that took over lacked those acknowledged records.
    async def scenario(h: Harness) -> None:
        await h.lead()
        waiting = asyncio.create_task(h.produce(3, acks=-1))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        h.rm.begin_shutdown()
        assert (await asyncio.wait_for(waiting, 10))[0] == ErrorCode.REQUEST_TIMED_OUT
        # Appended while shutting down, and no follower has it: refused, not acknowledged.
        assert (await h.produce(1, acks=-1))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await h.produce(1, acks=1) == (ErrorCode.NONE, 4)  # acks=1 asks for the leader's append only
        # Both followers have everything before it, but not the new record: still refused.
        assert await h.follower_fetch(1, 5) == 0
        assert await h.follower_fetch(2, 5) == 5
        assert (await h.produce(1, acks=-1))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        part = h.rm.get_partition(TP)
        assert part is not None and part.log.log_end_offset == 6 and part.log.high_watermark == 5

    run(scenario, tmp_path, store)


def test_a_shutting_down_leader_acknowledges_acks_all_records_its_isr_already_has(
        tmp_path: Path, store: MetadataStore) -> None:
    async def scenario(h: Harness) -> None:
        await h.lead(isr=(0,))  # the leader alone is the ISR, and min.insync.replicas is 1
        h.rm.begin_shutdown()
        assert await h.produce(4, acks=-1) == (ErrorCode.NONE, 0)

    run(scenario, tmp_path, store, min_isr=1)
