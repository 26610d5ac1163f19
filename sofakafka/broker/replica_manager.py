"""The partitions this broker hosts, and the produce and fetch paths over their logs.

Who calls what, from where:

* The broker makes this node the leader of a partition (``become_leader``) or drops it (``stop_replica``)
  when the cluster metadata says so; both run on the event loop and create or delete logs on the append
  thread.
* Handlers call ``append_records``, ``fetch_messages`` and ``run_read`` on the event loop. Appends run on one
  dedicated thread, so they reach each log in the order their handlers started (that is how one connection's
  Produce requests stay in order while being handled concurrently); reads run on a small pool. The loop
  never blocks on disk.
* Delayed operations (a Produce with acks=-1 waiting for its offsets to be replicated, a Fetch waiting for
  ``min_bytes``) wait in two purgatories keyed by topic-partition. After every append the loop checks the
  appended partitions' watchers, so a waiting fetch wakes when data arrives instead of polling.

The high watermark of a partition is the smallest log end offset among its in-sync replicas; with a single
broker the ISR is the leader alone, so it moves to the log end right after each append. With followers
(issue 6, docs/cluster.md) a Fetch with ``replica_id`` >= 0 reports the follower's log end offset (its fetch
offset) before the read, which may move the high watermark and so complete delayed acks=-1 produces; the
ISR itself changes only through :mod:`sofakafka.broker.isr`, which writes the partition state znode first.
Partitions this broker follows are not in ``partitions``: their logs are in ``follower_logs`` (fed by
:mod:`sofakafka.broker.replica_fetcher`) and clients asking for them get NOT_LEADER_OR_FOLLOWER.

Hot path: produce validation reads batch headers only (``validate_produce``), offsets are assigned in place,
and fetch returns the stored bytes of the log as one copy per partition (``pread``); no Python code runs per
record except where Kafka also looks inside records (compressed legacy data, compacted topics, down-conversion
for fetchers older than v4).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from sofakafka.broker.metrics import BrokerMetrics
from sofakafka.broker.purgatory import DelayedOperation, DelayedOperationPurgatory
from sofakafka.broker.record_filter import RecordMatcher, filter_fetched
from sofakafka.broker.worker_threads import WorkerThreads
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    MAGIC_V2,
    Buffer,
    CompressionType,
    InvalidProduceError,
    ProduceValidation,
    RecordBatchBuilder,
    build_end_txn_marker,
    convert_to_v2,
    decode_records,
    down_convert,
    validate_produce,
)
from sofakafka.storage.config import LONG_MAX
from sofakafka.storage.errors import OffsetOutOfRangeError
from sofakafka.storage.log import FetchIsolation, Log
from sofakafka.storage.log_manager import LogManager
from sofakafka.storage.producer_state import AppendOrigin
from sofakafka.storage.segment import LogOffsetMetadata, wall_clock_ms

log = logging.getLogger(__name__)

T = TypeVar("T")
TopicPartition = tuple[str, int]
MarkerEntry = tuple[TopicPartition, int, int, int, bool]
# Produce v8 accepts every codec (zstd needs v7+) and is what a 2.6 broker's own appends correspond to.
_INTERNAL_PRODUCE_VERSION = 8
"""A transaction marker to write: (partition, producer id, producer epoch, coordinator epoch, commit)."""

_CODEC_IDS: dict[str, int | None] = {
    "producer": None,
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}

ISOLATION_READ_UNCOMMITTED = 0
ISOLATION_READ_COMMITTED = 1


def storage_error_code(exc: BaseException) -> ErrorCode:
    """The code a client sees for a failure of one partition's read or write."""
    if isinstance(exc, KafkaError):
        return exc.code
    if isinstance(exc, OSError):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(frozen=True)
class LeaderState:
    """What the metadata says about a partition this broker is to lead."""

    topic: str
    partition: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    zk_version: int = -1
    controller_epoch: int = -1


# Threads that write many partitions' checkpoints at once (their fsyncs commit together).
_PARALLEL_THREADS = 8


def _in_parallel(fn: Callable[[Any], None], items: Sequence[Any]) -> None:
    """``fn`` over ``items`` on a few threads (blocking work with an fsync each); the first error is raised."""
    if len(items) <= 1:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(max_workers=min(_PARALLEL_THREADS, len(items)), thread_name_prefix="leaders") as pool:
        list(pool.map(fn, items))


def _start_leader_epoch(job: tuple[Partition, int]) -> None:
    """On the append thread: the partition's new leader epoch begins at its log end, in the leader-epoch cache
    and for the appends after this one at once. Were the epoch noted on the loop after this job, a produce queued
    right behind it would be stamped with the old epoch, and appending that batch would re-assign the old epoch
    at its offset, erasing where the old epoch began (LeaderEpochFileCache.assign drops the entries it
    contradicts): a follower asking where its last epoch ends would be told too late and keep records the
    leader does not have."""
    part, epoch = job
    part.log.leader_epoch_cache.assign(epoch, part.log.log_end_offset)
    part.leader_epoch = epoch


class FollowerFetchSession:
    """What a follower's fetch session shares with the partitions it has *parked* (``fetch_session``): partitions
    at the leader's log end with nothing new to tell, left out of the session's fetches until they change.

    ``last_fetch_ms`` is when the session last fetched (the leader's wall clock): a parked partition's follower
    was at the log end then, so that is its caught-up time (Kafka's rule, with one stamp per session instead of
    one per partition per fetch). ``news`` is set when a change unparks one of its partitions, which completes
    the session's waiting fetch (watched under this object as a key) so the partition is answered at once.
    Loop thread only."""

    __slots__ = ("last_fetch_ms", "news")

    def __init__(self) -> None:
        self.last_fetch_ms = -1
        self.news = False


class Partition:
    """Leader-side state of one hosted partition. Mutated on the event loop, but for ``leader_epoch``, which the
    append thread changes between appends (``_start_leader_epoch``); read from worker threads."""

    def __init__(self, topic: str, partition: int, log_: Log, broker_id: int, leader_epoch: int,
                 replicas: Sequence[int], isr: Sequence[int]) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log_
        self.broker_id = broker_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        # Log end offsets of followers, by broker id, from their fetch offsets.
        self.follower_log_end_offsets: dict[int, int] = {}
        # Kafka's lastCaughtUpTimeMs per follower: the last time it had fetched up to the leader's log end.
        # In-sync members start as caught up now, so a new leader gives them a full lag window.
        now = wall_clock_ms()
        self.last_caught_up_ms: dict[int, int] = {r: now for r in self.isr if r != broker_id}
        # The follower's previous fetch: when, and where the leader's log ended then (Kafka's rule for a
        # follower that keeps up without ever reaching a moving log end).
        self._last_fetch: dict[int, tuple[int, int]] = {}
        # Followers whose fetch session parked this partition (``FollowerFetchSession``): they were at the log end
        # at their session's last fetch, and nothing changed here since (any change unparks it first).
        self.idle_followers: dict[int, FollowerFetchSession] = {}
        # The state znode version our ISR writes are conditioned on, and the controller epoch to keep in it.
        self.zk_version = -1
        self.controller_epoch = -1
        self.isr_update_in_flight = False
        # The ISR an update in flight is writing (None when none is): until it is known to have failed, a replica
        # it adds already counts for the high watermark (KIP-497's "maximal ISR"), because the controller may
        # read it from ZooKeeper and elect that replica before the write's answer reaches us.
        self.pending_isr: list[int] | None = None
        # KIP-890-style verification guards: producer id -> the token a produce took before asking the transaction
        # coordinator whether this partition is in its transaction. A marker for the producer removes it, so a
        # batch verified before its transaction ended (and appended after the marker) is refused, not left hanging.
        self.txn_verifications: dict[int, object] = {}

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a client that knows a newer epoch is ahead of us, an older one is stale."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH,
                             f"{self.topic}-{self.partition}: leader epoch {current_leader_epoch} is older "
                             f"than the current {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH,
                             f"{self.topic}-{self.partition}: leader epoch {current_leader_epoch} is newer "
                             f"than the current {self.leader_epoch}")

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetching from ``fetch_offset`` has everything below it (loop thread)."""
        leader_end = self.log.log_end_offset
        self.follower_log_end_offsets[replica_id] = fetch_offset
        caught_up = self.last_caught_up_ms.get(replica_id, -1)
        if fetch_offset >= leader_end:
            caught_up = max(caught_up, now_ms)
        else:
            previous = self._last_fetch.get(replica_id)
            if previous is not None and fetch_offset >= previous[1]:
                caught_up = max(caught_up, previous[0])
        if caught_up >= 0:
            self.last_caught_up_ms[replica_id] = caught_up
        self._last_fetch[replica_id] = (now_ms, leader_end)

    def park_follower(self, replica_id: int, session: FollowerFetchSession) -> None:
        """The follower's session stops fetching this partition: the follower is at the log end (checked by the
        caller), and until something changes here its caught-up time is its session's last fetch."""
        self.idle_followers[replica_id] = session

    def unpark_follower(self, replica_id: int, session: FollowerFetchSession) -> None:
        """Something changed (or the session is going): the caught-up time becomes per partition again. The
        follower's last fetch at the log end is its session's last fetch, and the log ended at its fetch offset
        then (nothing was appended while it was parked), exactly what ``update_follower_fetch_state`` would have
        noted had the partition been fetched each time."""
        if self.idle_followers.get(replica_id) is not session:
            return
        del self.idle_followers[replica_id]
        at = session.last_fetch_ms
        if at < 0:
            return
        self.last_caught_up_ms[replica_id] = max(self.last_caught_up_ms.get(replica_id, -1), at)
        offset = self.follower_log_end_offsets.get(replica_id)
        if offset is not None:
            self._last_fetch[replica_id] = (at, offset)

    def caught_up_ms(self, replica_id: int, default: int) -> int:
        """Kafka's lastCaughtUpTimeMs of ``replica_id`` (``default`` when never noted)."""
        caught_up = self.last_caught_up_ms.get(replica_id, default)
        session = self.idle_followers.get(replica_id)
        if session is not None and session.last_fetch_ms > caught_up:
            return session.last_fetch_ms
        return caught_up

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """In-sync followers that have not caught up with the log end for ``max_lag_ms``."""
        return [r for r in self.isr
                if r != self.broker_id and now_ms - self.caught_up_ms(r, now_ms) > max_lag_ms]

    def can_join_isr(self, replica_id: int) -> bool:
        """Kafka's rule: a follower rejoins once it has reached the high watermark and the current epoch's start,
        so an ISR member never lacks a record a producer was told is committed."""
        if replica_id in self.isr or replica_id not in self.replicas:
            return False
        end = self.follower_log_end_offsets.get(replica_id, -1)
        epoch_start = self.log.leader_epoch_cache.entries
        current_epoch_start = next((e.start_offset for e in reversed(epoch_start) if e.epoch == self.leader_epoch),
                                   0)
        return end >= self.log.high_watermark and end >= current_epoch_start

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR and any replica an update in flight adds to it: the replicas that may be elected leader."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    def maybe_increment_high_watermark(self) -> bool:
        """HW = the smallest log end offset of the replicas of the maximal ISR (the leader's own is its log's):
        a replica being added to the ISR holds the HW back from the moment its addition is written, so when it
        is elected it has every record a producer or consumer was told is committed."""
        leo = self.log.log_end_offset
        new_hw = leo
        for replica in self.maximal_isr:
            if replica != self.broker_id:
                new_hw = min(new_hw, self.follower_log_end_offsets.get(replica, 0))
        return self.log.maybe_increment_high_watermark(new_hw) is not None


@dataclass(slots=True)
class ProducePartitionResult:
    error_code: int = ErrorCode.NONE
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str]] = field(default_factory=list)
    error_message: str | None = None


AppendedCallback = Callable[
    [Sequence[tuple[TopicPartition, Buffer | None]], dict[TopicPartition, "ProducePartitionResult"]], None]


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(slots=True)
class FetchPartitionResult:
    error_code: int = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted: list[tuple[int, int]] | None = None
    records: bytes = b""
    # Where the fetch offset is in the log, so a delayed fetch can count the bytes appended since.
    fetch_offset_metadata: LogOffsetMetadata | None = None


class DelayedProduce(DelayedOperation):
    """acks=-1: waits until the high watermark of every appended partition passes its last offset."""

    def __init__(self, delay_ms: int, required: dict[TopicPartition, int], results: dict[TopicPartition,
                 ProducePartitionResult], manager: ReplicaManager) -> None:
        super().__init__(delay_ms)
        self.required = dict(required)
        self.results = results
        self.manager = manager

    def try_complete(self) -> bool:
        for tp, required_offset in list(self.required.items()):
            part = self.manager.get_partition(tp)
            if part is None:
                self.results[tp] = ProducePartitionResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                del self.required[tp]
            elif part.log.high_watermark >= required_offset:
                del self.required[tp]
                if len(part.isr) < part.log.config.min_insync_replicas:
                    # Replicated to every in-sync replica, but the ISR shrank below the minimum meanwhile.
                    self.results[tp] = ProducePartitionResult(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        if not self.required:
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        self.refuse(ErrorCode.REQUEST_TIMED_OUT, "acks=-1 timed out waiting for replication")

    def refuse(self, error: ErrorCode, message: str) -> None:
        """Every partition not replicated yet gets ``error``: its records are not acknowledged."""
        for tp in self.required:
            self.results[tp] = ProducePartitionResult(error, error_message=message)


class DelayedFetch(DelayedOperation):
    """Waits until ``min_bytes`` are readable across the fetched partitions (Kafka's DelayedFetch rules)."""

    def __init__(self, delay_ms: int, min_bytes: int, isolation: FetchIsolation,
                 partitions: list[tuple[FetchPartitionRequest, LogOffsetMetadata | None]],
                 manager: ReplicaManager, follower_reads: bool = False,
                 session: FollowerFetchSession | None = None) -> None:
        super().__init__(delay_ms)
        self.min_bytes = min_bytes
        self.isolation = isolation
        self.partitions = partitions
        self.manager = manager
        self.follower_reads = follower_reads
        self.session = session

    def try_complete(self) -> bool:
        if self.session is not None and self.session.news:
            return self.force_complete()  # a parked partition of the session changed: answer it now
        accumulated = 0
        for req, metadata in self.partitions:
            lg = self.manager.readable_log(req.tp, self.follower_reads)
            if lg is None:
                return self.force_complete()  # the partition moved away: answer with the error now
            if self.isolation is FetchIsolation.LOG_END:
                end = lg.log_end_offset
            elif self.isolation is FetchIsolation.HIGH_WATERMARK:
                end = lg.high_watermark
            else:
                end = lg.last_stable_offset
            if end == req.fetch_offset:
                continue
            if end < req.fetch_offset:
                return self.force_complete()  # truncated below the fetch offset: answer now
            leo = lg.log_end_offset_metadata
            if metadata is None or metadata.segment_base_offset < 0 or end != leo.message_offset:
                # Where the bound lies in bytes is unknown; some data is there, which is all a fetcher with
                # min_bytes=1 asks for and a reasonable reading of anything larger.
                accumulated += self.min_bytes
            elif leo.segment_base_offset != metadata.segment_base_offset:
                return self.force_complete()  # a roll happened: the old segment's tail is readable
            else:
                accumulated += min(max(0, leo.relative_position_in_segment - metadata.relative_position_in_segment),
                                   req.max_bytes)
            if accumulated >= self.min_bytes:
                return self.force_complete()
        return False


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, *, read_threads: int = 2,
                 metrics: BrokerMetrics | None = None,
                 known_partition: Callable[[TopicPartition], bool] | None = None) -> None:
        """``known_partition(tp)``: whether the broker's metadata has the partition (its topic, not being deleted,
        and a partition of that number), which decides between NOT_LEADER_OR_FOLLOWER and
        UNKNOWN_TOPIC_OR_PARTITION for a partition not led here (see :meth:`partition_or_error`). Without it, only
        what this broker hosts is known."""
        self.broker_id = broker_id
        self.log_manager = log_manager
        self._known_partition = known_partition
        # Bytes and messages in and out per topic, counted here on the loop per partition of each request
        # (never per record); the ISR manager and the replica fetchers count theirs into the same object.
        self.metrics = metrics if metrics is not None else BrokerMetrics()
        self._partitions: dict[TopicPartition, Partition] = {}
        # Per topic, how many times a partition of it started or stopped being led here: what a reader that keeps
        # something derived from which partitions are served (the Metadata handler's encoded topics) compares.
        self._hosted_changes: dict[str, int] = {}
        # Logs of the partitions this broker follows (replica_fetcher fills and empties it).
        self.follower_logs: dict[TopicPartition, Log] = {}
        # The leader epoch each followed partition is followed at (for KIP-320 checks on KIP-392 reads).
        self.follower_epochs: dict[TopicPartition, int] = {}
        # Called on the loop when a follower that is out of the ISR may join it (isr.IsrManager).
        self.isr_expansion_listener: Callable[[Partition, int], None] | None = None
        self._append_executor = WorkerThreads(1, "append")
        self._read_executor = WorkerThreads(read_threads, "read")
        self.produce_purgatory: DelayedOperationPurgatory[TopicPartition] = DelayedOperationPurgatory("Produce")
        # Keyed by partition, and by follower fetch session (FollowerFetchSession) for a session's parked partitions.
        self.fetch_purgatory: DelayedOperationPurgatory[Hashable] = DelayedOperationPurgatory("Fetch")
        self._change_listeners: list[Callable[[TopicPartition], None]] = []
        self._shutting_down = False
        # transaction.partition.verification.enable: the broker sets it from its config.
        self.txn_verification = False

    # -- partitions ---------------------------------------------------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def hosted_version(self, topic: str) -> int:
        """Changes each time a partition of ``topic`` starts or stops being led here (and only then)."""
        return self._hosted_changes.get(topic, 0)

    def _hosted_changed(self, topic: str) -> None:
        self._hosted_changes[topic] = self._hosted_changes.get(topic, 0) + 1

    def check_known(self, topic: str, partition: int) -> None:
        """UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not have: a topic it does not know (or
        whose deletion started), or a partition number out of range. Kafka's handlers check this before anything
        else, whether or not the partition is still hosted here."""
        if self._known_partition is not None and not self._known_partition((topic, partition)):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"This server does not host this topic-partition: {topic}-{partition}")

    def partition_or_error(self, topic: str, partition: int) -> Partition:
        """The partition this broker leads, or Kafka 2.6's error: UNKNOWN_TOPIC_OR_PARTITION for a partition the
        metadata does not have, NOT_LEADER_OR_FOLLOWER (2.6's NOT_LEADER_FOR_PARTITION, code 6) for one it has but
        another broker leads, whether this one follows it or holds no replica at all (a client with stale
        metadata, or one asking during a reassignment, refreshes its metadata and goes to the leader)."""
        self.check_known(topic, partition)
        part = self._partitions.get((topic, partition))
        if self.log_manager.is_offline(topic, partition):
            # Its log directory failed (disk full, I/O error): Kafka answers KAFKA_STORAGE_ERROR until the
            # partition is led elsewhere or the broker restarts with the directory back.
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{partition} is in an offline log directory")
        if part is None:
            if (topic, partition) in self.follower_logs:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} is led by another broker")
            if self._known_partition is not None:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 f"This broker holds no replica of {topic}-{partition}")
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} is not hosted here")
        return part

    @property
    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def readable_log(self, tp: TopicPartition, follower_reads: bool) -> Log | None:
        """The log a fetch of ``tp`` reads: the led partition's, or with ``follower_reads`` (KIP-392 consumers)
        also a followed one's."""
        if self.log_manager.is_offline(*tp):
            return None  # its log directory failed: the read answers KAFKA_STORAGE_ERROR (partition_or_error)
        part = self._partitions.get(tp)
        if part is not None:
            return part.log
        return self.follower_logs.get(tp) if follower_reads else None

    async def become_leader(self, topic: str, partition: int, leader_epoch: int, replicas: Sequence[int],
                            isr: Sequence[int], *, zk_version: int = -1, controller_epoch: int = -1) -> Partition:
        """Host the partition as its leader (creating its log if needed) or update its epoch and ISR."""
        parts = await self.become_leaders([LeaderState(topic, partition, leader_epoch, tuple(replicas), tuple(isr),
                                                       zk_version, controller_epoch)])
        if not parts:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log of {topic}-{partition} could not be opened")
        return parts[0]

    async def become_leaders(self, states: Sequence[LeaderState]) -> list[Partition]:
        """Lead every partition of ``states``: create the missing logs, start each new leader epoch, update ISR
        and replicas. Returns the partitions led (a log that could not be created is left out, logged).

        A new epoch starts in the leader-epoch cache at the log end now, as Kafka's makeLeader does: a follower
        asking where its older epoch ended then learns it ended here, even before anything is appended. Those
        checkpoint writes (fsynced) and the logs' creation are what takes time when a thousand partitions arrive
        at once; they run in one job on the append thread, spread over a few threads (storage's
        ``get_or_create_logs``), instead of one thread hop and three fsyncs after another per partition.
        """
        new: list[LeaderState] = []
        changed: list[tuple[Partition, LeaderState]] = []
        for st in states:
            tp = (st.topic, st.partition)
            self.follower_logs.pop(tp, None)
            self.follower_epochs.pop(tp, None)
            part = self._partitions.get(tp)
            if part is None:
                new.append(st)
            else:
                changed.append((part, st))
        epoch_moves = [(part, st.leader_epoch) for part, st in changed if st.leader_epoch != part.leader_epoch]
        if epoch_moves:
            await self.run_append(lambda: _in_parallel(_start_leader_epoch, epoch_moves))
        out: list[Partition] = []
        moved: list[TopicPartition] = []
        now = wall_clock_ms()
        for part, st in changed:
            if any(moving is part for moving, _ in epoch_moves):
                part.last_caught_up_ms = {r: now for r in st.isr if r != self.broker_id}
            part.replicas = list(st.replicas)
            part.isr = list(st.isr)
            part.zk_version = st.zk_version
            part.controller_epoch = st.controller_epoch
            if part.maybe_increment_high_watermark():
                moved.append(part.tp)
            out.append(part)
        if moved:
            self.partitions_changed(moved)
        # Epoch, ISR or replicas may have changed: fetch sessions must look at these partitions again.
        self.notify_changed([part.tp for part, _ in changed if part.tp not in moved])
        if not new:
            return out
        epochs = {(st.topic, st.partition): st.leader_epoch for st in new}

        def open_logs() -> list[Partition]:
            fresh: set[TopicPartition] = set()

            def start_epoch(lg: Log) -> None:
                lg.leader_epoch_cache.assign(epochs[(lg.topic, lg.partition)], lg.log_end_offset)
                fresh.add((lg.topic, lg.partition))

            logs = self.log_manager.get_or_create_logs(list(epochs), prepare=start_epoch)
            # Logs that existed already (this broker followed them) start the new epoch here.
            _in_parallel(lambda tp: start_epoch(logs[tp]), [tp for tp in logs if tp not in fresh])
            parts = []
            for st in new:
                lg = logs.get((st.topic, st.partition))
                if lg is None:
                    continue
                part = Partition(st.topic, st.partition, lg, self.broker_id, st.leader_epoch, st.replicas, st.isr)
                part.zk_version = st.zk_version
                part.controller_epoch = st.controller_epoch
                part.maybe_increment_high_watermark()
                parts.append(part)
            return parts

        fresh = await self.run_append(open_logs)
        for part in fresh:
            self._partitions[part.tp] = part
            self._hosted_changed(part.topic)
            out.append(part)
        self.notify_changed([part.tp for part in fresh])
        return out

    async def become_follower(self, topic: str, partition: int) -> Log:
        """Stop leading the partition (if we did) and keep its log, created if needed, for the fetcher."""
        tp = (topic, partition)
        if tp in self._partitions:
            await self.stop_replica(topic, partition, delete=False)
        lg = self.follower_logs.get(tp)
        if lg is None:
            lg = await self.run_append(lambda: self.log_manager.get_or_create_log(topic, partition))
            self.follower_logs[tp] = lg
        return lg

    async def open_follower_logs(self, tps: Sequence[TopicPartition]) -> None:
        """Create the logs of partitions about to be followed in one job (see ``become_leaders``), so that
        ``become_follower`` finds them; partitions this broker leads are left alone."""
        missing = [tp for tp in tps if tp not in self.follower_logs and tp not in self._partitions]
        if len(missing) < 2:
            return
        logs = await self.run_append(lambda: self.log_manager.get_or_create_logs(missing))
        for tp, lg in logs.items():
            if tp not in self._partitions:
                self.follower_logs.setdefault(tp, lg)

    async def stop_replica(self, topic: str, partition: int, *, delete: bool) -> None:
        """Stop hosting the partition; with ``delete`` its log goes too (topic deletion)."""
        if self._partitions.pop((topic, partition), None) is not None:
            self._hosted_changed(topic)
            self.notify_changed([(topic, partition)])
        if delete:
            self.follower_logs.pop((topic, partition), None)
            self.follower_epochs.pop((topic, partition), None)
        self.produce_purgatory.check_and_complete((topic, partition))
        self.fetch_purgatory.check_and_complete((topic, partition))
        if delete:
            await self.run_append(lambda: self.log_manager.delete_log(topic, partition))

    def add_change_listener(self, listener: Callable[[TopicPartition], None]) -> None:
        """``listener(tp)`` runs on the event loop after anything a fetch of ``tp`` from this leader could see
        changed: an append, a move of its high watermark or log start, a change of its leader epoch or ISR, its
        leadership lost or its log directory failed (the fetch sessions' parked partitions rely on it)."""
        self._change_listeners.append(listener)

    def notify_changed(self, tps: Iterable[TopicPartition]) -> None:
        """Tell the change listeners (without waking purgatories: for changes no delayed operation waits on)."""
        listeners = self._change_listeners
        if listeners:
            for tp in tps:
                for listener in listeners:
                    listener(tp)

    # -- executors ---------------------------------------------------------------------------------------------------
    async def run_append(self, fn: Callable[[], T]) -> T:
        """Run blocking log-mutating work on the append thread, after every append already queued."""
        return await self._append_executor.run(fn)

    async def run_read(self, fn: Callable[[], T]) -> T:
        return await self._read_executor.run(fn)

    def partitions_changed(self, tps: Iterable[TopicPartition]) -> None:
        """Wake delayed operations on ``tps`` (after appends, high-watermark or log-start moves)."""
        for tp in tps:
            self.produce_purgatory.check_and_complete(tp)
            self.fetch_purgatory.check_and_complete(tp)
            for listener in self._change_listeners:
                listener(tp)

    # -- produce -----------------------------------------------------------------------------------------------------
    async def append_records(
        self,
        *,
        acks: int,
        timeout_ms: int,
        entries: Sequence[tuple[TopicPartition, Buffer | None]],
        produce_version: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verified: Mapping[TopicPartition, object] | None = None,
        on_appended: AppendedCallback | None = None,
    ) -> dict[TopicPartition, ProducePartitionResult]:
        """Append each partition's record data as its leader; acks=-1 waits until the high watermark passes it.

        ``origin`` COORDINATOR is the group coordinator's transactional offset commits (epochs checked, no
        sequences). ``verified`` holds, per partition, the verification token a transactional produce took
        (:meth:`txn_verification_token`) when the transaction coordinator confirmed the partition is in the
        producer's transaction; with ``txn_verification`` on, a client batch that would open a transaction on a
        partition without a still-valid token is refused with INVALID_TXN_STATE. ``on_appended(entries, results)``
        runs on the loop right after the append, before the acks=-1 wait (the produce audit's hook)."""
        if acks not in (-1, 0, 1):
            return {tp: ProducePartitionResult(ErrorCode.INVALID_REQUIRED_ACKS,
                                               error_message=f"acks must be -1, 0 or 1, not {acks}")
                    for tp, _ in entries}
        tokens = verified or {}
        results = await self.run_append(lambda: self._append_all(entries, produce_version, acks, origin, tokens))
        self._count_produce(entries, results)
        if on_appended is not None:
            on_appended(entries, results)
        replicated = self._replicated(results, acks, timeout_ms)
        if replicated is not None:
            await replicated
        return results

    def append_records_then(self, *, acks: int, timeout_ms: int, entries: Sequence[tuple[TopicPartition, Buffer]],
                            origin: AppendOrigin, done: Callable[[dict[TopicPartition, ProducePartitionResult]], None]
                            ) -> None:
        """:meth:`append_records` (produce v8) for the coordinators' own appends, which continue in a callback:
        queued on the append thread at once, in call order (no task between the call and the queue), ``done``
        called on the loop with the results once replicated as ``acks`` asks. A failure of the append work itself
        is UNKNOWN_SERVER_ERROR for every entry."""
        def appended(future: asyncio.Future[dict[TopicPartition, ProducePartitionResult]]) -> None:
            if future.cancelled() or future.exception() is not None:
                if not future.cancelled():
                    log.error("internal append failed", exc_info=future.exception())
                done({tp: ProducePartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR) for tp, _ in entries})
                return
            results = future.result()
            self._then_replicated(results, acks, timeout_ms, lambda: done(results))

        self._append_executor.submit(
            lambda: self._append_all(entries, _INTERNAL_PRODUCE_VERSION, acks, origin)).add_done_callback(appended)

    def _replicated(self, results: dict[TopicPartition, ProducePartitionResult], acks: int,
                    timeout_ms: int) -> asyncio.Future[bool] | None:
        """Wake what waits on the appended partitions; with acks=-1 the wait for the high watermark to pass them,
        or None when there is nothing to wait for (already replicated, other acks, nothing appended)."""
        appended = [tp for tp, r in results.items() if r.error_code == ErrorCode.NONE]
        self.partitions_changed(appended)
        if acks == -1 and appended:
            required = {tp: results[tp].last_offset + 1 for tp in appended}
            op = DelayedProduce(timeout_ms, required, results, self)
            if self._shutting_down:
                # Nothing is replicated any more (the fetchers and the fetch purgatory are done), and nothing may
                # wait: what the ISR already has is acknowledged, the rest refused. Answering it NONE would
                # acknowledge records no other replica has, and they are lost when a follower takes over (a
                # produce held behind an unanswered acks=all one of its connection is appended only now).
                if not op.try_complete():
                    op.refuse(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                              "the broker is shutting down before the records were replicated")
                return None
            if not self.produce_purgatory.try_complete_else_watch(op, appended):
                return op.completion
        return None

    def _then_replicated(self, results: dict[TopicPartition, ProducePartitionResult], acks: int, timeout_ms: int,
                         then: Callable[[], None]) -> None:
        replicated = self._replicated(results, acks, timeout_ms)
        if replicated is None:
            then()
        else:
            replicated.add_done_callback(lambda _: then())

    def _count_produce(self, entries: Sequence[tuple[TopicPartition, Buffer | None]],
                       results: dict[TopicPartition, ProducePartitionResult]) -> None:
        metrics = self.metrics
        for tp, records in entries:
            r = results[tp]
            if r.error_code == ErrorCode.NONE:
                metrics.record_produce(tp[0], len(records) if records is not None else 0,
                                       r.last_offset - r.base_offset + 1)
            else:
                metrics.record_failed_produce(tp[0], ErrorCode.for_code(r.error_code).name)

    def _append_all(self, entries: Sequence[tuple[TopicPartition, Buffer | None]], produce_version: int,
                    acks: int, origin: AppendOrigin = AppendOrigin.CLIENT,
                    verified: Mapping[TopicPartition, object] | None = None
                    ) -> dict[TopicPartition, ProducePartitionResult]:
        now = wall_clock_ms()
        out: dict[TopicPartition, ProducePartitionResult] = {}
        for tp, records in entries:
            try:
                out[tp] = self._append_partition(tp, records, produce_version, now, acks, origin,
                                                 None if verified is None else verified.get(tp))
            except InvalidProduceError as exc:
                out[tp] = ProducePartitionResult(exc.code, record_errors=exc.record_errors, error_message=exc.reason)
            except KafkaError as exc:
                out[tp] = ProducePartitionResult(exc.code, error_message=exc.message)
            except Exception as exc:  # one partition's failure must not fail its neighbours
                log.exception("append to %s-%d failed", tp[0], tp[1])
                out[tp] = ProducePartitionResult(storage_error_code(exc), error_message=str(exc))
        return out

    # -- transactions ----------------------------------------------------------------------------------------------
    def needs_txn_verification(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> bool:
        """Whether a transactional batch of this producer would open a transaction here (so the coordinator must
        confirm the partition is in it first): no transaction of the producer at this epoch is open in the log.
        Read on the loop as a hint; the append thread checks again."""
        part = self._partitions.get(tp)
        if part is None or not self.txn_verification:
            return False
        entry = part.log.producer_state.last_entry(producer_id)
        return not (entry is not None and entry.current_txn_first_offset is not None
                    and entry.producer_epoch == producer_epoch)

    def txn_verification_token(self, tp: TopicPartition, producer_id: int) -> object | None:
        """Take (or share) the producer's guard on the partition before asking the coordinator; None when the
        partition is not led here."""
        part = self._partitions.get(tp)
        if part is None:
            return None
        return part.txn_verifications.setdefault(producer_id, object())

    def drop_txn_verification(self, tp: TopicPartition, producer_id: int, token: object) -> None:
        part = self._partitions.get(tp)
        if part is not None and part.txn_verifications.get(producer_id) is token:
            del part.txn_verifications[producer_id]

    async def append_txn_markers(self, markers: Sequence[MarkerEntry],
                                 timeout_ms: int) -> list[ProducePartitionResult]:
        """Write COMMIT/ABORT control batches as the partitions' leader, acks=all (WriteTxnMarkers' partition side).

        Each entry is (partition, producer id, producer epoch, coordinator epoch, commit); one result per entry,
        in order (one partition may get markers of several producers). A marker of an older producer epoch is
        INVALID_PRODUCER_EPOCH, of an older coordinator epoch TRANSACTION_COORDINATOR_FENCED (the log's producer
        state decides). The producer's verification guard goes with the marker."""
        answered: asyncio.Future[list[ProducePartitionResult]] = asyncio.get_running_loop().create_future()
        self.append_txn_markers_then(markers, timeout_ms, answered.set_result)
        return await answered

    def append_txn_markers_then(self, markers: Sequence[MarkerEntry], timeout_ms: int,
                                done: Callable[[list[ProducePartitionResult]], None]) -> None:
        """:meth:`append_txn_markers` for a caller that continues in a callback (the coordinator's markers to the
        partitions this broker leads): every marker in one job of the append thread, queued at once."""
        def append_all() -> list[ProducePartitionResult]:
            now = wall_clock_ms()
            out: list[ProducePartitionResult] = []
            for tp, producer_id, producer_epoch, coordinator_epoch, commit in markers:
                try:
                    out.append(self._append_marker(tp, producer_id, producer_epoch, coordinator_epoch, commit, now))
                except KafkaError as exc:
                    out.append(ProducePartitionResult(exc.code, error_message=exc.message))
                except Exception as exc:
                    log.exception("marker append to %s-%d failed", tp[0], tp[1])
                    out.append(ProducePartitionResult(storage_error_code(exc), error_message=str(exc)))
            return out

        def appended(future: asyncio.Future[list[ProducePartitionResult]]) -> None:
            if future.cancelled() or future.exception() is not None:
                if not future.cancelled():
                    log.error("marker append failed", exc_info=future.exception())
                done([ProducePartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR) for _ in markers])
                return
            results = future.result()
            # Wait, per partition, for the last marker appended there; a partition whose wait fails fails all.
            last: dict[TopicPartition, ProducePartitionResult] = {}
            for (tp, *_), r in zip(markers, results, strict=True):
                if r.error_code == ErrorCode.NONE:
                    last[tp] = r
            waited = dict(last)

            def answer() -> None:
                done([waited[tp] if r.error_code == ErrorCode.NONE and waited[tp].error_code != ErrorCode.NONE else r
                      for (tp, *_), r in zip(markers, results, strict=True)])

            self._then_replicated(waited, -1, timeout_ms, answer)

        self._append_executor.submit(append_all).add_done_callback(appended)

    def _append_marker(self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                       commit: bool, now: int) -> ProducePartitionResult:
        part = self.partition_or_error(*tp)
        lg = part.log
        if len(part.isr) < lg.config.min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"{tp[0]}-{tp[1]} has {len(part.isr)} in-sync replicas, min.insync.replicas is "
                             f"{lg.config.min_insync_replicas}")
        part.txn_verifications.pop(producer_id, None)
        buf = bytearray(build_end_txn_marker(producer_id=producer_id, producer_epoch=producer_epoch,
                                             coordinator_epoch=coordinator_epoch, commit=commit, timestamp=now))
        info = lg.append_as_leader(buf, part.leader_epoch, origin=AppendOrigin.COORDINATOR)
        part.maybe_increment_high_watermark()
        return ProducePartitionResult(ErrorCode.NONE, base_offset=info.first_offset, last_offset=info.last_offset,
                                      log_start_offset=info.log_start_offset)

    def _append_partition(self, tp: TopicPartition, records: Buffer | None, produce_version: int, now: int,
                          acks: int, origin: AppendOrigin = AppendOrigin.CLIENT,
                          verification: object | None = None) -> ProducePartitionResult:
        part = self.partition_or_error(*tp)
        if records is None:
            raise InvalidProduceError(ErrorCode.CORRUPT_MESSAGE, "produce data is null")
        lg = part.log
        cfg = lg.config
        if acks == -1 and len(part.isr) < cfg.min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"{tp[0]}-{tp[1]} has {len(part.isr)} in-sync replicas, min.insync.replicas is "
                             f"{cfg.min_insync_replicas}")
        target = _CODEC_IDS.get(cfg.compression_type)
        max_diff = cfg.message_timestamp_difference_max_ms
        validation = validate_produce(
            records,
            produce_version=produce_version,
            max_message_bytes=cfg.max_message_bytes,
            message_format_magic=MAGIC_V2,
            target_compression=target,
            compacted=cfg.compact,
            timestamp_type=LOG_APPEND_TIME if cfg.log_append_time else CREATE_TIME,
            timestamp_difference_max_ms=None if max_diff >= LONG_MAX else max_diff,
            now_ms=now,
        )
        for h in validation.batches:
            if h.size > cfg.segment_bytes:
                raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                                 f"batch of {h.size} bytes exceeds segment.bytes {cfg.segment_bytes}")
            if h.is_transactional and origin is AppendOrigin.CLIENT and self.txn_verification:
                self._check_txn_verification(part, h.producer_id, h.producer_epoch, verification)
        view = memoryview(records)[: validation.valid_bytes]
        if validation.magic < MAGIC_V2:
            buf = bytearray(convert_to_v2(view, compression=target))
        elif not validation.in_place:
            buf = _recompress(view, validation, target)
        elif view.readonly:
            buf = bytearray(view)
        else:
            # The request frame is this request's own bytearray (see connection.py): offsets are stamped into
            # it in place instead of into a copy. Log only needs a writable buffer, which a memoryview of a
            # bytearray is.
            buf = cast(bytearray, view)
        info = lg.append_as_leader(buf, part.leader_epoch, origin=origin)
        part.maybe_increment_high_watermark()
        return ProducePartitionResult(
            ErrorCode.NONE,
            base_offset=info.first_offset,
            last_offset=info.last_offset,
            log_append_time=info.log_append_time,
            log_start_offset=info.log_start_offset,
        )

    @staticmethod
    def _check_txn_verification(part: Partition, producer_id: int, producer_epoch: int,
                                verification: object | None) -> None:
        """On the append thread: a transactional batch may join its producer's open transaction here, or open one
        if the coordinator confirmed the partition is in it and no marker came since (the guard is intact)."""
        entry = part.log.producer_state.last_entry(producer_id)
        if entry is not None and entry.current_txn_first_offset is not None and entry.producer_epoch == producer_epoch:
            return
        if verification is not None and part.txn_verifications.get(producer_id) is verification:
            return
        raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                         f"Partition {part.topic}-{part.partition} was not added to the transaction of producer "
                         f"{producer_id} (epoch {producer_epoch})")

    # -- fetch ---------------------------------------------------------------------------------------------------------
    async def fetch_messages(
        self,
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation_level: int,
        partitions: Sequence[FetchPartitionRequest],
        hard_max_bytes_limit: bool = False,
        to_magic: int | None = None,
        zstd_readable: bool = True,
        follower_reads: bool = False,
        filters: Callable[[], Mapping[TopicPartition, RecordMatcher] | None] | None = None,
        session: FollowerFetchSession | None = None,
    ) -> list[FetchPartitionResult]:
        """Read every partition now; if fewer than ``min_bytes`` came back, wait in purgatory and read again.

        ``session`` (a follower's fetch session, see ``fetch_session``): its fetch time is noted (the caught-up
        time of the partitions it parked), and a wait also ends when one of those partitions changes, so a
        session whose partitions are all parked still waits (``partitions`` empty) and wakes on the first news.

        ``filters`` (a member of a filtered consumer group, see ``group_filters``): asked at each read (so a
        filter set while the fetch waits in purgatory applies to what it returns), it names the partitions
        whose records are rewritten to the ones their matcher passes (``record_filter``), on the read threads.

        ``zstd_readable`` False (Fetch before v10): partitions of topics whose ``compression.type`` is zstd are
        answered UNSUPPORTED_COMPRESSION_TYPE, as Kafka 2.6 decides by the topic config.
        ``follower_reads`` (a consumer's Fetch v11+, KIP-392): partitions this broker follows are read too, up
        to the follower's high watermark, as Kafka 2.6 serves consumers that send client metadata.
        """
        results = await self._fetch_messages(replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level,
                                             partitions, hard_max_bytes_limit, to_magic, zstd_readable,
                                             follower_reads, filters, session)
        metrics = self.metrics
        replica = replica_id >= 0
        for req, r in zip(partitions, results, strict=True):
            if r.error_code == ErrorCode.NONE:
                metrics.record_fetch(req.topic, len(r.records), replica=replica)
            else:
                metrics.record_failed_fetch(req.topic, ErrorCode.for_code(r.error_code).name)
        return results

    async def _fetch_messages(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                              isolation_level: int, partitions: Sequence[FetchPartitionRequest],
                              hard_max_bytes_limit: bool, to_magic: int | None, zstd_readable: bool,
                              follower_reads: bool,
                              filters: Callable[[], Mapping[TopicPartition, RecordMatcher] | None] | None,
                              session: FollowerFetchSession | None = None) -> list[FetchPartitionResult]:
        if replica_id >= 0:
            isolation = FetchIsolation.LOG_END
        elif isolation_level == ISOLATION_READ_COMMITTED:
            isolation = FetchIsolation.TXN_COMMITTED
        else:
            isolation = FetchIsolation.HIGH_WATERMARK

        if replica_id >= 0:
            self._update_follower_positions(replica_id, partitions, session)
        else:
            session = None

        def read() -> list[FetchPartitionResult]:
            return self._read_all(partitions, isolation, max_bytes, hard_max_bytes_limit, to_magic, zstd_readable,
                                  follower_reads and replica_id < 0, None if filters is None else filters())

        results = await self.run_read(read) if partitions else []
        if max_wait_ms <= 0 or (not partitions and session is None) or min_bytes <= 0 or self._shutting_down:
            return results
        total = 0
        for r in results:
            if r.error_code != ErrorCode.NONE:
                return results
            total += len(r.records)
        if total >= min_bytes:
            return results
        op = DelayedFetch(max_wait_ms, min_bytes, isolation,
                          [(req, r.fetch_offset_metadata) for req, r in zip(partitions, results, strict=True)],
                          self, follower_reads and replica_id < 0, session)
        keys: list[Hashable] = [req.tp for req in partitions]
        if session is not None:
            keys.append(session)
        if not self.fetch_purgatory.try_complete_else_watch(op, keys):
            await op.completion
        return await self.run_read(read) if partitions else []

    def _update_follower_positions(self, replica_id: int, partitions: Sequence[FetchPartitionRequest],
                                   session: FollowerFetchSession | None = None) -> None:
        """A follower's fetch offsets are its log end offsets: record them before the read, so the high
        watermark in this very response already counts them, and wake the acks=-1 produces they complete.
        The partitions its session parked are not listed: their follower is caught up as of this fetch."""
        now = wall_clock_ms()
        if session is not None:
            session.last_fetch_ms = now
        moved: list[TopicPartition] = []
        for req in partitions:
            part = self._partitions.get(req.tp)
            if part is None or replica_id not in part.replicas or replica_id == self.broker_id:
                continue
            part.update_follower_fetch_state(replica_id, req.fetch_offset, now)
            if part.maybe_increment_high_watermark():
                moved.append(req.tp)
            listener = self.isr_expansion_listener
            if listener is not None and part.can_join_isr(replica_id):
                listener(part, replica_id)
        if moved:
            self.partitions_changed(moved)

    def _read_all(self, partitions: Sequence[FetchPartitionRequest], isolation: FetchIsolation, max_bytes: int,
                  hard_max_bytes_limit: bool, to_magic: int | None, zstd_readable: bool, follower_reads: bool = False,
                  filters: Mapping[TopicPartition, RecordMatcher] | None = None) -> list[FetchPartitionResult]:
        out: list[FetchPartitionResult] = []
        remaining = max(0, max_bytes)
        min_one_message = not hard_max_bytes_limit
        for req in partitions:
            try:
                result = self._read_partition(req, isolation, remaining, min_one_message, to_magic, zstd_readable,
                                              follower_reads, None if filters is None else filters.get(req.tp))
            except KafkaError as exc:
                result = FetchPartitionResult(exc.code)
            except Exception as exc:  # one partition's failure must not fail its neighbours
                log.exception("read of %s-%d failed", req.topic, req.partition)
                result = FetchPartitionResult(storage_error_code(exc))
            if result.records:
                min_one_message = False
                remaining = max(0, remaining - len(result.records))
            out.append(result)
        return out

    def _read_partition(self, req: FetchPartitionRequest, isolation: FetchIsolation, remaining: int,
                        min_one_message: bool, to_magic: int | None, zstd_readable: bool,
                        follower_reads: bool = False, matcher: RecordMatcher | None = None) -> FetchPartitionResult:
        self.check_known(req.topic, req.partition)
        followed = self.follower_logs.get(req.tp) if follower_reads and req.tp not in self._partitions else None
        if followed is not None:
            lg = followed
            if log.isEnabledFor(logging.DEBUG):
                # What an operator (and the local-first tests) look at to see consumers read in their own room.
                log.debug("consumer fetch of %s-%d at offset %d served by this follower (KIP-392)", req.topic,
                          req.partition, req.fetch_offset)
            epoch = self.follower_epochs.get(req.tp, -1)
            if 0 <= req.current_leader_epoch < epoch:
                raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH, f"{req.topic}-{req.partition}: leader epoch "
                                 f"{req.current_leader_epoch} is older than the current {epoch}")
            if req.current_leader_epoch > epoch:
                raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH, f"{req.topic}-{req.partition}: leader epoch "
                                 f"{req.current_leader_epoch} is newer than the current {epoch}")
        else:
            part = self.partition_or_error(req.topic, req.partition)
            part.check_leader_epoch(req.current_leader_epoch)
            lg = part.log
        if not zstd_readable and lg.config.compression_type == "zstd":
            raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                             f"{req.topic} is stored with zstd, which this fetch version cannot read")
        end_metadata = lg.log_end_offset_metadata
        limit = min(req.max_bytes, remaining)
        try:
            info = lg.read(req.fetch_offset, max(0, limit), isolation=isolation, min_one_message=min_one_message)
        except OffsetOutOfRangeError:
            if isolation is not FetchIsolation.LOG_END:
                # A consumer told its position is not in the log resets it (or stops, with auto.offset.reset
                # none): rare and consequential, so say where the log stood when it was told.
                log.info("consumer fetch of %s-%d at offset %d (%s, leader epoch %d) is out of range: log start "
                         "%d, high watermark %d, last stable offset %d, log end %d%s", req.topic, req.partition,
                         req.fetch_offset, isolation.name.lower(), req.current_leader_epoch, lg.log_start_offset,
                         lg.high_watermark, lg.last_stable_offset, lg.log_end_offset,
                         " (served as a follower)" if followed is not None else "")
            raise
        metadata = info.fetch_offset_metadata
        if metadata.segment_base_offset < 0 and req.fetch_offset == end_metadata.message_offset:
            metadata = end_metadata
        data = info.records.read_bytes()
        if matcher is not None and data:
            data, _kept, _dropped = filter_fetched(data, matcher)
        if to_magic is not None and data:
            if not lg.config.message_downconversion_enable:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                                 "message.downconversion.enable is false for this topic")
            data = down_convert(data, to_magic, first_offset=req.fetch_offset)
        aborted = None
        if info.aborted_transactions is not None:
            aborted = [(a.producer_id, a.first_offset) for a in info.aborted_transactions]
        return FetchPartitionResult(
            ErrorCode.NONE,
            high_watermark=lg.high_watermark,
            last_stable_offset=lg.last_stable_offset,
            log_start_offset=lg.log_start_offset,
            aborted=aborted,
            records=data,
            fetch_offset_metadata=metadata,
        )

    # -- shutdown -------------------------------------------------------------------------------------------------------
    def begin_shutdown(self) -> None:
        """Answer every delayed operation now and delay no new one, so in-flight requests finish quickly: an acks=-1
        produce appended from now on is acknowledged only if the ISR already has it, and refused otherwise."""
        self._shutting_down = True
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()

    def shutdown_executors(self) -> None:
        self._append_executor.shutdown()
        self._read_executor.shutdown()


def _recompress(view: memoryview, validation: ProduceValidation, target: int | None) -> bytearray:
    """A v2 batch rebuilt with the topic's ``compression.type``: the one produce path that re-encodes records."""
    h = validation.batches[0]
    records = decode_records(view, h)
    builder = RecordBatchBuilder(
        base_offset=0,
        compression=h.compression if target is None else target,
        timestamp_type=h.timestamp_type,
        log_append_time=h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else None,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        is_transactional=h.is_transactional,
    )
    for r in records:
        builder.append(r)
    return bytearray(builder.build())
