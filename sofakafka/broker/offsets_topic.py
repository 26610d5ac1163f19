"""``__consumer_offsets`` on this broker: the group coordinator's log, created on first use, loaded on leadership.

The coordinator (:mod:`sofakafka.broker.group`) is pure logic; this module gives it a world:

* its :class:`~sofakafka.broker.group.RecordWriter` appends one v2 batch per call through the replica manager,
  as an internal client with ``offsets.commit.required.acks`` (-1 by default) and ``offsets.commit.timeout.ms``,
  so a commit is acknowledged only once its records are as durable as any acks=all produce;
* its timers run on the event loop (``LoopScheduler``);
* it learns which offsets partitions it coordinates by following the replica manager after every metadata
  change (:meth:`GroupCoordinatorRuntime.on_metadata_applied`): a partition this broker starts leading (or
  leads again under a new leader epoch) is read from its log start to its log end on a read thread, and
  replayed; a partition that moved away is unloaded. Groups of a partition still loading answer COORDINATOR_LOAD_IN_PROGRESS meanwhile.
* topics that vanish from the metadata have their committed offsets tombstoned (Kafka's
  ``handleDeletedPartitions``).

Creation follows Kafka 2.6's ``createInternalTopic``: the first FindCoordinator for a group creates the topic
with ``offsets.topic.num.partitions`` partitions, ``offsets.topic.replication.factor`` replicas,
``cleanup.policy=compact``, ``compression.type=producer`` and ``segment.bytes=offsets.topic.segment.bytes``,
and answers COORDINATOR_NOT_AVAILABLE so the client asks again once leaders exist. With fewer live brokers than
the replication factor the topic is not created and the error is logged, exactly as Kafka refuses it: a single
broker needs ``offsets.topic.replication.factor=1`` (Kafka's sample server.properties sets it so too).

Threading: everything here runs on the event loop except the log reads, which run on the replica manager's
read pool and hand plain tuples back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from sofakafka.broker.context import CoordinatorContext
from sofakafka.broker.group import GroupConfig, GroupCoordinator, OffsetsRecord, SystemClock
from sofakafka.broker.group.asyncio_bridge import LoopScheduler
from sofakafka.broker.internal_topic import (
    CoordinatorPartitions,
    InternalTopicAppender,
    create_internal_topic,
)
from sofakafka.broker.replica_manager import ReplicaManager
from sofakafka.controller.metadata import ClusterMetadata
from sofakafka.controller.topics import NewTopic
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.records import (
    MAGIC_V2,
    ControlRecordType,
    RecordBatchBuilder,
    decode_control_key,
    decode_records,
    iter_batches,
)
from sofakafka.storage.log import FetchIsolation, Log
from sofakafka.storage.producer_state import AppendOrigin
from sofakafka.storage.segment import wall_clock_ms

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC = "__consumer_offsets"


LoadedRecords = list[tuple[bytes | None, bytes | None]]


def read_offsets_log(lg: Log, buffer_size: int) -> LoadedRecords:
    """The committed key/value pairs of ``lg`` (see :func:`read_offsets_log_and_pending`)."""
    return read_offsets_log_and_pending(lg, buffer_size)[0]


def read_offsets_log_and_pending(lg: Log, buffer_size: int
                                 ) -> tuple[LoadedRecords, dict[int, LoadedRecords], int]:
    """Key/value pairs of ``lg`` from its log start to its log end, in the order they take effect.

    To the log end, not the high watermark, as Kafka's doLoadGroupsAndOffsets reads: a newly elected leader's
    high watermark may lag until its followers fetch again, while every acknowledged commit is in its log.

    Transactional offset commits take effect at their COMMIT marker and vanish at an ABORT, as in Kafka's
    GroupMetadataManager.doLoadGroupsAndOffsets; control records themselves carry no group state. Transactional
    records with no marker after them yet come back apart, per producer id: they are still pending (their marker
    may come after a coordinator move). The third value is the offset the read reached: a marker appended at or
    after it is not in what was read. Runs on a read thread; Log.read works on a snapshot of the segment list,
    so concurrent appends are harmless.
    """
    out: LoadedRecords = []
    pending: dict[int, LoadedRecords] = {}
    offset = lg.log_start_offset
    end = lg.log_end_offset
    while offset < end:
        info = lg.read(offset, buffer_size, isolation=FetchIsolation.LOG_END, min_one_message=True)
        data = info.records.read_bytes()
        if not data:
            break
        progressed = False
        for header in iter_batches(data):
            if header.next_offset <= offset:
                continue
            progressed = True
            offset = header.next_offset
            records = decode_records(data, header)
            if header.is_control:
                if header.magic == MAGIC_V2 and records:
                    committed = pending.pop(header.producer_id, [])
                    if decode_control_key(records[0].key) == ControlRecordType.COMMIT:
                        out.extend(committed)
                continue
            pairs = [(r.key, r.value) for r in records]
            if header.is_transactional:
                pending.setdefault(header.producer_id, []).extend(pairs)
            else:
                out.extend(pairs)
        if not progressed:
            break
    return out, pending, offset


class OffsetsTopicWriter:
    """The coordinator's RecordWriter: one internal append per call (``offsets.commit.required.acks``), answered
    on the loop."""

    def __init__(self, replica_manager: Callable[[], ReplicaManager], *, compression_codec: int,
                 timeout_ms: int, required_acks: int = -1) -> None:
        self._appender = InternalTopicAppender(replica_manager, GROUP_METADATA_TOPIC)
        self._compression = compression_codec
        self._timeout_ms = timeout_ms
        self._required_acks = required_acks

    @property
    def closed(self) -> bool:
        return self._appender.closed

    def append(self, partition: int, records: Sequence[OffsetsRecord], done: Callable[[ErrorCode], None]) -> None:
        self._write(partition, records, done, RecordBatchBuilder(compression=self._compression))

    def append_transactional(self, partition: int, records: Sequence[OffsetsRecord], producer_id: int,
                             producer_epoch: int, done: Callable[[ErrorCode], None]) -> None:
        """TxnOffsetCommit's batch: the producer's id and epoch, transactional, sequence 0 (as Kafka writes it;
        a coordinator append checks the epoch, not sequences)."""
        self._write(partition, records, done, RecordBatchBuilder(
            compression=self._compression, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
            is_transactional=True), origin=AppendOrigin.COORDINATOR)

    def _write(self, partition: int, records: Sequence[OffsetsRecord], done: Callable[[ErrorCode], None],
               builder: RecordBatchBuilder, origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        if not records:
            done(ErrorCode.NOT_LEADER_OR_FOLLOWER if self.closed else ErrorCode.NONE)
            return
        now = wall_clock_ms()
        for i, record in enumerate(records):
            builder.append_record(i, now, record.key, record.value)
        self._appender.append(partition, builder.build(), done, acks=self._required_acks,
                              timeout_ms=self._timeout_ms, origin=origin)

    async def close(self) -> None:
        """Let appends already issued finish (their members are waiting for the answer), refuse new ones."""
        await self._appender.close()


class GroupCoordinatorRuntime(CoordinatorPartitions[tuple[LoadedRecords, dict[int, LoadedRecords], int]]):
    """The coordinator, its writer, and which offsets partitions are loaded (internal_topic.py's
    CoordinatorPartitions)."""

    topic = GROUP_METADATA_TOPIC
    what = "groups"

    def __init__(self, broker: CoordinatorContext, coordinator: GroupCoordinator, writer: OffsetsTopicWriter) -> None:
        super().__init__(broker)
        self.coordinator = coordinator
        self._writer = writer
        self._known_topics: set[str] | None = None
        # Transaction markers appended to a partition while it loads: (producer id, commit, marker offset).
        self._markers_while_loading: dict[int, list[tuple[int, bool, int]]] = {}

    @classmethod
    def start(cls, broker: CoordinatorContext) -> GroupCoordinatorRuntime:
        """Build and start the coordinator on the running loop (before the first metadata is applied)."""
        config = broker.config
        loop = asyncio.get_running_loop()
        writer = OffsetsTopicWriter(
            lambda: broker.replica_manager,
            compression_codec=config.get_int("offsets.topic.compression.codec"),
            timeout_ms=config.get_int("offsets.commit.timeout.ms"),
            # Kafka 2.6 appends group metadata and offsets alike with offsets.commit.required.acks (default -1).
            required_acks=config.get_int("offsets.commit.required.acks"),
        )
        existing = broker.metadata().topics.get(GROUP_METADATA_TOPIC)
        # The topic's real partition count decides where groups live; the config only matters at creation.
        partition_count = len(existing.partitions) if existing is not None and existing.partitions else None

        def partition_exists(topic: str, partition: int) -> bool:
            return broker.metadata().partition(topic, partition) is not None

        coordinator = GroupCoordinator(
            config=GroupConfig.from_config(config),
            clock=SystemClock(),
            scheduler=LoopScheduler(loop),
            writer=writer,
            partition_count=partition_count,
            partition_exists=partition_exists,
        )
        coordinator.start()
        return cls(broker, coordinator, writer)

    # -- leadership of offsets partitions -------------------------------------------------------------------------
    def on_metadata_applied(self, snapshot: ClusterMetadata) -> None:
        """Load what we now lead, unload what we no longer lead, forget the offsets of deleted topics."""
        if self._stopped:
            return
        self.follow_leadership()
        topics = set(snapshot.topics)
        if self._known_topics is not None:
            deleted = sorted(t for t in self._known_topics - topics if t != GROUP_METADATA_TOPIC)
            if deleted:
                self.coordinator.on_topics_deleted(deleted)
        self._known_topics = topics

    def _partition_count(self) -> int:
        return self.coordinator.partition_count

    def _owns(self, partition: int) -> bool:
        return self.coordinator.owns(partition)

    def _begin_loading(self, partition: int, epoch: int, reloading: bool) -> None:
        if reloading:
            # Led again under a new epoch: whatever happened meanwhile is in the log, not in our memory.
            self.coordinator.unload_partition(partition)
        self.coordinator.begin_loading(partition)

    def _unload(self, partition: int) -> None:
        self.coordinator.unload_partition(partition)

    def _left(self, partition: int) -> None:
        self._markers_while_loading.pop(partition, None)

    def _buffer_size(self) -> int:
        return self._ctx.config.get_int("offsets.load.buffer.size")

    def _read(self, lg: Log) -> tuple[LoadedRecords, dict[int, LoadedRecords], int]:
        return read_offsets_log_and_pending(lg, self._buffer_size())

    def _apply(self, partition: int, epoch: int, loaded: tuple[LoadedRecords, dict[int, LoadedRecords], int]) -> None:
        records, pending, read_to = loaded
        self.coordinator.load_partition(partition, records, pending)
        # Markers written while the partition was being read, past what the read saw, settle now.
        for producer_id, commit, offset in self._markers_while_loading.pop(partition, []):
            if offset >= read_to:
                self.coordinator.complete_txn_offsets(producer_id, partition, commit)
        if records:
            log.info("loaded %d records of %s-%d", len(records), GROUP_METADATA_TOPIC, partition)

    def on_txn_marker(self, producer_id: int, partition: int, commit: bool, offset: int) -> None:
        """A COMMIT/ABORT marker is in ``__consumer_offsets``/``partition`` at ``offset``: settle the producer's
        pending offsets there now, or once the partition's load has run if it is loading (the read may or may not
        have reached the marker; the offset says which)."""
        if partition in self._loads:
            self._markers_while_loading.setdefault(partition, []).append((producer_id, commit, offset))
        else:
            self.coordinator.complete_txn_offsets(producer_id, partition, commit)

    # -- creation on first use -----------------------------------------------------------------------------------------
    async def create_topic(self, requested_by: str | None) -> ErrorCode:
        """Create ``__consumer_offsets`` as Kafka's createInternalTopic does; the answer for the asking client."""
        config = self._ctx.config
        new = NewTopic(
            GROUP_METADATA_TOPIC,
            num_partitions=config.get_int("offsets.topic.num.partitions"),
            replication_factor=config.get_int("offsets.topic.replication.factor"),
            configs={
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(config.get_int("offsets.topic.segment.bytes")),
            },
        )
        return await create_internal_topic(self._ctx, new, description="offsets topic",
                                           replication_factor_key="offsets.topic.replication.factor",
                                           requested_by=requested_by)

    # -- shutdown -------------------------------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Answer every waiting member NOT_COORDINATOR, stop the timers, let issued appends finish."""
        self._stop_loading()
        self.coordinator.shutdown()
        await self._writer.close()
