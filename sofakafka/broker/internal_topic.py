"""What the group coordinator's ``__consumer_offsets`` (offsets_topic.py) and the transaction coordinator's
``__transaction_state`` (transaction_topic.py) share: creating the topic on first use, and appending to it.

* :func:`create_internal_topic` is Kafka 2.6's ``createInternalTopic``: the first FindCoordinator that needs the
  topic creates it; with fewer live brokers than its replication factor creation is refused and logged with
  Kafka's words. Either way the asking client is answered COORDINATOR_NOT_AVAILABLE and asks again once the
  partitions have leaders.
* :class:`InternalTopicAppender` appends a coordinator's batches through the replica manager as an internal
  client, in the order the coordinator issued them, and answers each on the event loop with its error code.
* :class:`CoordinatorPartitions` follows the leadership of the topic's partitions: loads what this broker
  starts leading (or leads again under a new leader epoch), unloads what moves away.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Generic, TypeVar

from sofakafka.broker.context import CoordinatorContext
from sofakafka.broker.replica_manager import ProducePartitionResult, ReplicaManager, TopicPartition
from sofakafka.controller.topics import NewTopic
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.storage.log import Log
from sofakafka.storage.producer_state import AppendOrigin

log = logging.getLogger(__name__)

_LOAD_RETRY_MS = 5000


async def create_internal_topic(ctx: CoordinatorContext, new: NewTopic, *, description: str,
                                replication_factor_key: str, requested_by: str | None) -> ErrorCode:
    """Create ``new`` unless too few brokers are alive for its replication factor (``description`` and
    ``replication_factor_key`` name the topic and its config in the log line); the answer for the asking client."""
    alive = len(ctx.metadata().alive_broker_ids())
    if alive < new.replication_factor:
        log.error("Number of alive brokers '%d' does not meet the required replication factor '%d' for the %s "
                  "(configured via '%s'). This error can be ignored if the cluster is starting up and not all "
                  "brokers are up yet.", alive, new.replication_factor, description, replication_factor_key)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    admin = ctx.topic_admin
    try:
        created = await ctx.run_blocking(lambda: admin.create_topic(new))
        log.info("created %s with %d partitions, replication factor %d (first requested by %s)",
                 new.name, created.num_partitions, created.replication_factor, requested_by)
    except KafkaError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("creating %s failed: %s", new.name, exc)
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


class InternalTopicAppender:
    """One batch per call to a partition of ``topic``, answered on the loop; ``close`` lets issued appends finish.

    The append is queued on the append thread within the call (ReplicaManager.append_records_then), so the
    coordinator's appends reach the log in the order it issued them, with no task or loop turn in between."""

    def __init__(self, replica_manager: Callable[[], ReplicaManager], topic: str) -> None:
        self._replica_manager = replica_manager
        self._topic = topic
        self._in_flight: set[asyncio.Future[None]] = set()
        self.closed = False

    def append(self, partition: int, batch: bytes, done: Callable[[ErrorCode], None], *, acks: int,
               timeout_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        if self.closed:
            done(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        tp = (self._topic, partition)
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._in_flight.add(finished)

        def answered(results: dict[TopicPartition, ProducePartitionResult]) -> None:
            self._in_flight.discard(finished)
            finished.set_result(None)
            result = results[tp]
            code = ErrorCode.for_code(result.error_code)
            if code is not ErrorCode.NONE:
                log.warning("appending to %s-%d failed: %s %s", tp[0], partition, code.name,
                            result.error_message or "")
            done(code)

        try:
            self._replica_manager().append_records_then(acks=acks, timeout_ms=timeout_ms, entries=[(tp, batch)],
                                                        origin=origin, done=answered)
        except Exception:
            log.exception("appending to %s-%d failed", tp[0], partition)
            self._in_flight.discard(finished)
            done(ErrorCode.UNKNOWN_SERVER_ERROR)

    async def close(self) -> None:
        """Let appends already issued finish (whoever waits gets the answer), refuse new ones."""
        self.closed = True
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)


L = TypeVar("L")


class CoordinatorPartitions(ABC, Generic[L]):
    """Which partitions of a coordinator's internal topic this broker leads, and their loading.

    After every metadata change (:meth:`follow_leadership`) the replica manager says which partitions of
    ``topic`` this broker leads and at which leader epoch. A partition it starts leading, or leads again under a
    new epoch, is read from its log start to its log end on a read thread (:meth:`_read`) and handed to the
    coordinator on the loop (:meth:`_apply`); its keys answer COORDINATOR_LOAD_IN_PROGRESS meanwhile. A
    partition that moved away is unloaded. A failed read is tried again after ``_LOAD_RETRY_MS``, the partition
    staying in loading rather than serving a state that misses what the log holds.
    """

    topic: str
    what: str  # what a partition holds, for the log lines ("groups", "transactions")

    def __init__(self, ctx: CoordinatorContext) -> None:
        self._ctx = ctx
        self._loads: dict[int, asyncio.Task[None]] = {}
        # The leader epoch each partition was (or is being) loaded under.
        self._epochs: dict[int, int] = {}
        self._stopped = False

    # -- what a coordinator provides ---------------------------------------------------------------------------------
    @abstractmethod
    def _partition_count(self) -> int: ...

    @abstractmethod
    def _owns(self, partition: int) -> bool: ...

    def _is_loading(self, partition: int) -> bool:
        return False

    @abstractmethod
    def _begin_loading(self, partition: int, epoch: int, reloading: bool) -> None:
        """The partition is being (re)loaded at ``epoch``; ``reloading``: it was loaded under an older one."""

    @abstractmethod
    def _unload(self, partition: int) -> None: ...

    def _left(self, partition: int) -> None:
        """This broker does not lead the partition (called for every such partition, loaded or not)."""

    @abstractmethod
    def _read(self, lg: Log) -> L:
        """On a read thread: what the coordinator needs of the partition's log."""

    @abstractmethod
    def _apply(self, partition: int, epoch: int, loaded: L) -> None:
        """On the loop, once read (and still wanted): hand it to the coordinator."""

    @abstractmethod
    def _buffer_size(self) -> int: ...

    # -- following leadership ----------------------------------------------------------------------------------------
    def follow_leadership(self) -> None:
        """Load what this broker now leads, unload what it no longer leads."""
        if self._stopped:
            return
        # The topic's partitions looked up one by one (a few dozen), not every partition this broker leads: this
        # runs after every metadata change. One added to the topic later (beyond the count) is left alone: Kafka
        # never maps a key there either.
        count = self._partition_count()
        rm = self._ctx.replica_manager
        led: dict[int, int] = {}
        for partition in range(count):
            part = rm.get_partition((self.topic, partition))
            if part is not None:
                led[partition] = part.leader_epoch
        for partition in sorted(led):
            epoch = led[partition]
            known = self._epochs.get(partition)
            if known == epoch and (partition in self._loads or self._owns(partition)):
                continue
            stale = self._loads.pop(partition, None)
            if stale is not None:
                stale.cancel()
            reloading = known is not None and known != epoch
            log.info("%s %s-%d at leader epoch %d", "reloading" if reloading else "loading", self.topic, partition,
                     epoch)
            self._epochs[partition] = epoch
            self._begin_loading(partition, epoch, reloading)
            self._loads[partition] = asyncio.get_running_loop().create_task(
                self._load(partition, epoch), name=f"load {self.topic}-{partition}")
        for partition in range(count):
            if partition in led:
                continue
            self._epochs.pop(partition, None)
            self._left(partition)
            loading = self._loads.pop(partition, None)
            if loading is not None:
                loading.cancel()
            if loading is not None or self._owns(partition) or self._is_loading(partition):
                log.info("no longer the coordinator of %s-%d: unloading its %s", self.topic, partition, self.what)
                self._unload(partition)

    async def _load(self, partition: int, epoch: int) -> None:
        rm = self._ctx.replica_manager
        try:
            part = rm.get_partition((self.topic, partition))
            if part is None:
                return
            loaded = await rm.run_read(lambda: self._read(part.log))
            if self._loads.get(partition) is not asyncio.current_task() or self._stopped:
                return  # unloaded (or reloaded) while reading
            self._apply(partition, epoch, loaded)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed; retrying in %d ms", self.topic, partition, _LOAD_RETRY_MS)
            self._epochs.pop(partition, None)
            asyncio.get_running_loop().call_later(_LOAD_RETRY_MS / 1000, self._retry_loads)
        finally:
            if self._loads.get(partition) is asyncio.current_task():
                del self._loads[partition]

    def _retry_loads(self) -> None:
        if not self._stopped:
            self.follow_leadership()

    def _stop_loading(self) -> None:
        """Shutdown: no more loads, the running ones cancelled."""
        self._stopped = True
        for task in self._loads.values():
            task.cancel()
        self._loads.clear()
