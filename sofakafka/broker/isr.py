"""The leader's side of the in-sync replica set: shrink after ``replica.lag.time.max.ms``, expand on catch-up.

As in Kafka 2.6, the leader itself changes the ISR of the partitions it leads, by writing their state znode
``/brokers/topics/<t>/partitions/<p>/state`` conditioned on the znode version it last knew (the version the
controller's election wrote, or its own last write). A failed condition means the controller (or a newer
leader) wrote meanwhile: the new state arrives through the metadata cache, and the change is retried then if it
still applies. The local ISR changes only after the znode did, so the ISR in the tree (which the controller
elects from) always contains every replica the high watermark was computed over:

* shrink: the znode loses the replica first, then the leader stops waiting for it (the high watermark may then
  advance without it, which is safe because the controller can no longer elect it);
* expand: the replica has already reached the high watermark when the znode gains it.

Each change is also announced under ``/isr_change_notification`` (persistent sequential znodes holding the
changed partitions, batched like Kafka's ``isr.change.notification`` every few seconds), which is what Kafka's
controller watches to refresh other brokers (and then deletes). Our brokers read partition state straight from
the tree, so the notification carries no duty here beyond keeping the layout Kafka's tools expect; the controller reads and
deletes them (sofakafka/controller/admin_notifications.py).

Threads: ``maybe_expand`` and the periodic shrink run on the event loop; store writes run on the broker's
blocking executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sofakafka.broker.replica_manager import Partition, ReplicaManager
from sofakafka.controller import zk_data, zk_paths
from sofakafka.controller.store import (
    BadVersionError,
    MetadataStore,
    OpResult,
    SetDataOp,
    StoreError,
    ZnodeStat,
)
from sofakafka.controller.zk_data import PartitionState, TopicPartition
from sofakafka.storage.segment import wall_clock_ms

log = logging.getLogger(__name__)


@dataclass
class _IsrWrite:
    part: Partition
    new_isr: list[int]
    state: PartitionState
    expected: int  # the state znode version the write is conditioned on

# Kafka 2.6 propagates ISR change notifications at most every 2.5 s (ReplicaManager.IsrChangePropagationInterval).
ISR_CHANGE_PROPAGATION_MS = 2500
# Partitions per /isr_change_notification znode (about 40 bytes each in Kafka's JSON).
ISR_CHANGES_PER_NOTIFICATION = 5000


class IsrManager:
    def __init__(self, replica_manager: ReplicaManager, store: MetadataStore, broker_id: int, *,
                 replica_lag_time_max_ms: int, run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]]) -> None:
        self._rm = replica_manager
        self._store = store
        self.broker_id = broker_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._run_blocking = run_blocking
        self._pending_notifications: set[TopicPartition] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._writes: set[asyncio.Task[None]] = set()
        self._queued: list[_IsrWrite] = []
        self._writer: asyncio.Task[None] | None = None
        self._stopped = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._rm.isr_expansion_listener = self.maybe_expand
        # Kafka checks every half lag window, so a stuck follower leaves within 1.5 windows at most.
        self._tasks.append(loop.create_task(self._every(max(1, self.replica_lag_time_max_ms // 2), self.maybe_shrink),
                                            name="isr shrink"))
        self._tasks.append(loop.create_task(self._every(ISR_CHANGE_PROPAGATION_MS, self._propagate),
                                            name="isr change notification"))

    async def stop(self) -> None:
        self._stopped = True
        self._rm.isr_expansion_listener = None
        for task in [*self._tasks, *self._writes]:
            task.cancel()
        for task in [*self._tasks, *self._writes]:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _every(self, interval_ms: int, work: Callable[[], Awaitable[None]]) -> None:
        while not self._stopped:
            await asyncio.sleep(interval_ms / 1000.0)
            try:
                await work()
            except Exception:
                log.exception("ISR maintenance failed")

    # -- changes ------------------------------------------------------------------------------------------------
    def maybe_expand(self, part: Partition, replica_id: int) -> None:
        """A follower reached the high watermark: add it to the ISR (loop thread, from its fetch)."""
        if self._stopped or part.isr_update_in_flight or not part.can_join_isr(replica_id):
            return
        new_isr = [*part.isr, replica_id]
        log.info("%s-%d: expanding ISR from %s to %s", part.topic, part.partition, part.isr, new_isr)
        self._start_write(part, new_isr)

    async def maybe_shrink(self) -> None:
        now = wall_clock_ms()
        for part in self._rm.partitions:
            if part.isr_update_in_flight:
                continue
            lagging = part.out_of_sync_replicas(now, self.replica_lag_time_max_ms)
            if not lagging:
                continue
            new_isr = [r for r in part.isr if r not in lagging]
            log.info("%s-%d: shrinking ISR from %s to %s (%s not caught up for %d ms)", part.topic,
                     part.partition, part.isr, new_isr, lagging, self.replica_lag_time_max_ms)
            self._start_write(part, new_isr)

    def _start_write(self, part: Partition, new_isr: list[int]) -> None:
        """Queue the ISR change; one writer sends whatever is queued together (``multi_many``: pipelined on
        ZooKeeper), so a broker returning to the ISR of thousands of partitions costs their leaders a few batches,
        not a round trip each. The state and the version it is conditioned on are taken now, as a write sent at
        once would have: a controller write in between makes it fail rather than undo the controller's ISR."""
        part.isr_update_in_flight = True
        part.pending_isr = list(new_isr)
        state = PartitionState(self.broker_id, part.leader_epoch, part.controller_epoch, tuple(new_isr))
        self._queued.append(_IsrWrite(part, list(new_isr), state, part.zk_version))
        if self._writer is None or self._writer.done():
            task = asyncio.get_running_loop().create_task(self._write_queued(), name="isr writes")
            self._writer = task
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    async def _write_queued(self) -> None:
        while self._queued and not self._stopped:
            batch, self._queued = self._queued, []
            try:
                await self._write_isr(batch)
            except Exception:  # the writer must outlive a bug, or every later ISR change would wait forever
                log.exception("writing %d ISR changes failed", len(batch))
            finally:
                for write in batch:
                    write.part.isr_update_in_flight = False
                    write.part.pending_isr = None
                # Every partition of the batch is fetched again by the sessions that parked it: a follower that
                # left the ISR must be seen catching up, and one whose addition was in flight, whatever became of
                # the write, must be too (a failed addition is tried again from its next fetch).
                self._rm.notify_changed([w.part.tp for w in batch])

    async def _write_isr(self, batch: list[_IsrWrite]) -> None:
        def write() -> list[list[OpResult] | StoreError]:
            return self._store.multi_many([
                [SetDataOp(zk_paths.topic_partition_state_path(w.part.topic, w.part.partition), w.state.encode(),
                           w.expected)] for w in batch])

        try:
            outcomes = await self._run_blocking(write)
        except StoreError as exc:
            outcomes = [exc] * len(batch)
        for w, outcome in zip(batch, outcomes, strict=True):
            part, new_isr, state = w.part, w.new_isr, w.state
            if isinstance(outcome, BadVersionError):
                # The controller (or a newer leader) wrote first; its state reaches us through the metadata
                # cache and a still-needed change is made again then.
                log.info("%s-%d: ISR update skipped, the state znode moved past version %d", part.topic,
                         part.partition, w.expected)
                continue
            if isinstance(outcome, StoreError):
                log.warning("%s-%d: ISR update to %s failed: %s", part.topic, part.partition, new_isr, outcome)
                continue
            stat = outcome[0]
            assert isinstance(stat, ZnodeStat)
            if self._rm.get_partition(part.tp) is not part or part.leader_epoch != state.leader_epoch:
                continue
            part.zk_version = stat.version
            if len(new_isr) < len(part.isr):
                self._rm.metrics.isr_shrinks += 1
            elif len(new_isr) > len(part.isr):
                self._rm.metrics.isr_expands += 1
            part.isr = list(new_isr)
            now = wall_clock_ms()
            for r in new_isr:
                if r != self.broker_id:
                    part.last_caught_up_ms.setdefault(r, now)
            self._pending_notifications.add(TopicPartition(part.topic, part.partition))
            if part.maybe_increment_high_watermark():
                self._rm.partitions_changed([part.tp])
            else:
                # A shrink below min.insync.replicas must fail waiting acks=-1 produces now. (Fetch sessions hear
                # of the new ISR from _write_queued, which wakes every partition of the batch.)
                self._rm.produce_purgatory.check_and_complete(part.tp)

    async def _propagate(self) -> None:
        if not self._pending_notifications:
            return
        changed = sorted(self._pending_notifications)
        self._pending_notifications.clear()

        def write() -> None:
            self._store.ensure_path(zk_paths.ISR_CHANGE_NOTIFICATION_PATH)
            # A few hundred kB a znode: 40,000 changes in one window (100,000 partitions on three brokers) made
            # one of 1.3 MB, over ZooKeeper's request limit, and the notification was lost.
            for start in range(0, len(changed), ISR_CHANGES_PER_NOTIFICATION):
                self._store.create(zk_paths.isr_change_prefix_path(), zk_data.encode_isr_change_notification(
                    changed[start:start + ISR_CHANGES_PER_NOTIFICATION]), sequence=True)

        try:
            await self._run_blocking(write)
        except StoreError as exc:
            log.warning("writing an ISR change notification failed: %s", exc)
