"""``__transaction_state`` on this broker: the transaction coordinator's log, created on first use, loaded on leadership.

The coordinator (:mod:`sofakafka.broker.txn`) is pure logic; this module gives it a world, as
``offsets_topic.py`` does for the group coordinator:

* its writer appends one uncompressed v2 batch per call through the replica manager with acks=all (Kafka
  enforces both for this topic), with the transaction's timeout as the append timeout;
* its timers (timed-out transaction aborts, transactional id expiry, marker retries) run on the event loop;
* its markers go through :class:`~sofakafka.broker.txn_markers.MarkerSender`: locally for partitions this broker
  leads, as WriteTxnMarkers to the other leaders;
* after every metadata change it follows the replica manager: a ``__transaction_state`` partition this broker
  starts leading (or leads again under a new leader epoch, which becomes the coordinator epoch written into the
  markers) is read from its log start to its log end on a read thread and replayed, and transactions found in
  PrepareCommit/PrepareAbort get their markers; a partition that moved away is unloaded. Its ids answer
  COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR once it is gone, so a ZooKeeper cluster's
  coordinator moves with the partition's leadership.

It sees the broker as a :class:`~sofakafka.broker.context.CoordinatorContext`; the broker hands it the group
runtime's ``on_txn_marker`` so a marker in ``__consumer_offsets`` settles the transactional offsets it decides,
and handlers reach it as ``ctx.broker.transaction_runtime`` (context.py's ``TransactionRuntime``).

Creation follows Kafka 2.6: the first FindCoordinator for a transactional id creates the topic with
``transaction.state.log.num.partitions`` partitions, ``transaction.state.log.replication.factor`` replicas and the
enforced configs (``cleanup.policy=compact``, ``compression.type=uncompressed``,
``unclean.leader.election.enable=false``, ``min.insync.replicas=transaction.state.log.min.isr``,
``segment.bytes=transaction.state.log.segment.bytes``), answering COORDINATOR_NOT_AVAILABLE so the client asks
again once leaders exist; with fewer live brokers than the replication factor creation is refused and logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from sofakafka.broker.context import CoordinatorContext
from sofakafka.broker.group import SystemClock
from sofakafka.broker.group.asyncio_bridge import LoopScheduler
from sofakafka.broker.internal_topic import (
    CoordinatorPartitions,
    InternalTopicAppender,
    create_internal_topic,
)
from sofakafka.broker.offsets_topic import LoadedRecords, read_offsets_log
from sofakafka.broker.replica_manager import MarkerEntry, TopicPartition
from sofakafka.broker.txn import TRANSACTION_STATE_TOPIC, TransactionCoordinator, TxnConfig
from sofakafka.broker.txn_markers import (
    MarkerCodes,
    MarkerSender,
    OffsetsMarkerListener,
    TxnVerifier,
    write_markers,
)
from sofakafka.controller.metadata import ClusterMetadata
from sofakafka.controller.topics import NewTopic
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.records import RecordBatchBuilder
from sofakafka.storage.log import Log
from sofakafka.storage.segment import wall_clock_ms

log = logging.getLogger(__name__)



class TransactionLogWriter:
    """The coordinator's TxnLogWriter: one acks=all uncompressed append per call, answered on the loop."""

    def __init__(self, ctx: CoordinatorContext) -> None:
        self._appender = InternalTopicAppender(lambda: ctx.replica_manager, TRANSACTION_STATE_TOPIC)

    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int,
               done: Callable[[ErrorCode], None]) -> None:
        now = wall_clock_ms()
        builder = RecordBatchBuilder()
        for i, (key, value) in enumerate(records):
            builder.append_record(i, now, key, value)
        self._appender.append(partition, builder.build(), done, acks=-1, timeout_ms=timeout_ms)

    async def close(self) -> None:
        await self._appender.close()


class TransactionCoordinatorRuntime(CoordinatorPartitions[LoadedRecords]):
    """The coordinator, its writer and marker sender, the verifier, and which partitions are loaded
    (internal_topic.py's CoordinatorPartitions)."""

    topic = TRANSACTION_STATE_TOPIC
    what = "transactions"

    def __init__(self, ctx: CoordinatorContext, on_offsets_marker: OffsetsMarkerListener) -> None:
        super().__init__(ctx)
        self._on_offsets_marker = on_offsets_marker
        config = ctx.config
        self._executor = ThreadPoolExecutor(4, thread_name_prefix="txn-inter-broker")
        self._writer = TransactionLogWriter(ctx)
        self._markers = MarkerSender(ctx, self._write_markers, self._executor)
        existing = ctx.metadata().topics.get(TRANSACTION_STATE_TOPIC)
        # The topic's real partition count decides where ids live; the config only matters at creation.
        partition_count = len(existing.partitions) if existing is not None and existing.partitions else None
        self.coordinator = TransactionCoordinator(
            config=TxnConfig.from_config(config), clock=SystemClock(),
            scheduler=LoopScheduler(asyncio.get_running_loop()), writer=self._writer, markers=self._markers,
            partition_count=partition_count)
        self._verifier = TxnVerifier(ctx, self.coordinator.verify_partitions, self._executor)

    @classmethod
    def start(cls, ctx: CoordinatorContext, on_offsets_marker: OffsetsMarkerListener) -> TransactionCoordinatorRuntime:
        """The runtime, its coordinator's timers started; ``on_offsets_marker`` settles transactional offsets."""
        runtime = cls(ctx, on_offsets_marker)
        runtime.coordinator.start()
        return runtime

    # -- what handlers use (context.py's TransactionRuntime) ----------------------------------------------------
    async def write_markers(self, markers: Sequence[MarkerEntry]) -> list[ErrorCode]:
        """The partition side of WriteTxnMarkers."""
        answered: asyncio.Future[list[ErrorCode]] = asyncio.get_running_loop().create_future()
        self._write_markers(markers, answered.set_result)
        return await answered

    def _write_markers(self, markers: Sequence[MarkerEntry], done: MarkerCodes) -> None:
        """The coordinator's markers to the partitions this broker leads (and WriteTxnMarkers' through the above)."""
        write_markers(self._ctx, markers, self._on_offsets_marker, done)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Whether the partitions are in the producer's ongoing transaction, asked of the id's coordinator."""
        return await self._verifier.verify(transactional_id, producer_id, producer_epoch, partitions)

    # -- leadership of __transaction_state partitions -----------------------------------------------------------
    def on_metadata_applied(self, snapshot: ClusterMetadata) -> None:
        if self._stopped:
            return
        coordinator = self.coordinator
        topic = snapshot.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is not None and topic.partitions and len(topic.partitions) != coordinator.partition_count \
                and not coordinator.transactions() and not self._loads:
            # Created after this broker started (by another broker, or with another count than our config).
            coordinator.partition_count = len(topic.partitions)
        self.follow_leadership()

    def _partition_count(self) -> int:
        return self.coordinator.partition_count

    def _owns(self, partition: int) -> bool:
        return self.coordinator.owns(partition)

    def _is_loading(self, partition: int) -> bool:
        return self.coordinator.is_loading(partition)

    def _begin_loading(self, partition: int, epoch: int, reloading: bool) -> None:
        # The leader epoch is the coordinator epoch its markers carry; a reload replaces what was loaded.
        self.coordinator.begin_loading(partition, epoch)

    def _unload(self, partition: int) -> None:
        self.coordinator.unload_partition(partition)

    def _buffer_size(self) -> int:
        return self._ctx.config.get_int("transaction.state.log.load.buffer.size")

    def _read(self, lg: Log) -> LoadedRecords:
        return read_offsets_log(lg, self._buffer_size())

    def _apply(self, partition: int, epoch: int, loaded: LoadedRecords) -> None:
        self.coordinator.load_partition(partition, epoch, loaded)
        log.info("loaded %d records of %s-%d", len(loaded), TRANSACTION_STATE_TOPIC, partition)

    # -- creation on first use ----------------------------------------------------------------------------------
    async def create_topic(self, requested_by: str | None) -> ErrorCode:
        """Create ``__transaction_state`` as Kafka's createInternalTopic does; the answer for the asking client."""
        config = self._ctx.config
        new = NewTopic(
            TRANSACTION_STATE_TOPIC,
            num_partitions=config.get_int("transaction.state.log.num.partitions"),
            replication_factor=config.get_int("transaction.state.log.replication.factor"),
            configs={
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "unclean.leader.election.enable": "false",
                "min.insync.replicas": str(config.get_int("transaction.state.log.min.isr")),
                "segment.bytes": str(config.get_int("transaction.state.log.segment.bytes")),
            },
        )
        return await create_internal_topic(self._ctx, new, description="transactions state topic",
                                           replication_factor_key="transaction.state.log.replication.factor",
                                           requested_by=requested_by)

    # -- shutdown ---------------------------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        self._stop_loading()
        self.coordinator.shutdown()
        await self._writer.close()
        await self._markers.close()
        await self._verifier.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
