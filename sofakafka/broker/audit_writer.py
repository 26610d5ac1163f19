"""The produce audit's writer (``sofakafka.produce.audit.enable``): who appended each batch, kept in the compacted
internal topic ``__sofakafka_produce_audit`` for the console's message trace (the entry format and where an entry
goes are sofakafka/protocol/produce_audit.py's).

Cost on the produce path: the leader's append calls :meth:`ProduceAuditWriter.record` on the event loop with the
partitions it appended; per partition that reads the batch's producer id and epoch from its header and either
extends the entry still open for that partition (the batch continues its offsets, from the same client
connection and producer: a producer streaming into a partition makes one entry per flush, not one per batch) or
opens a new one; nothing per record, no encoding, no I/O. A task flushes the entries every ``FLUSH_INTERVAL_S``
on a thread of its own: it creates the topic once (``cleanup.policy=compact,delete``,
``retention.ms`` from ``sofakafka.produce.audit.retention.ms``, ``offsets.topic.replication.factor`` replicas, as
Kafka sizes its own internal topics) and sends each audit partition's entries as one Produce through a client
of the cluster, since the audit partition of a data partition is usually led by another broker.

When the audit cannot be written (its leader is down, too few brokers are alive to create it), entries wait and
are sent again at the next flush; beyond ``MAX_PENDING`` the oldest are given up and counted
(``sofakafka_produce_audit_entries_dropped_total``), so a broken audit never holds up a producer nor grows the
broker's memory without bound. Clients cannot write the audit topic themselves (the produce handler refuses it
to every client id but this writer's, as Kafka refuses its internal topics).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sofakafka.broker.config import KafkaConfig
from sofakafka.broker.metrics import BrokerMetrics
from sofakafka.broker.replica_manager import ProducePartitionResult, TopicPartition
from sofakafka.client import ClientError, KafkaClient
from sofakafka.client.security import ClientSecurity
from sofakafka.controller.metadata import ClusterMetadata
from sofakafka.controller.topics import NewTopic, TopicAdmin
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.produce_audit import (
    AUDIT_TOPIC,
    AUDIT_TOPIC_PARTITIONS,
    AUDIT_WRITER_CLIENT_ID,
    ProduceAuditEntry,
    audit_key,
    audit_partition,
    encode_entry,
)
from sofakafka.protocol.records import Buffer, Record, batch_producer
from sofakafka.storage.segment import wall_clock_ms

log = logging.getLogger(__name__)

FLUSH_INTERVAL_S = 0.2
MAX_PENDING = 100_000
CLIENT_TIMEOUT_MS = 10_000
WARN_EVERY_S = 30.0


@dataclass(slots=True)
class AuditRun:
    """Consecutive batches of one partition appended for one client connection and producer: one entry."""

    topic: str
    partition: int
    base_offset: int
    last_offset: int
    record_count: int
    append_time_ms: int
    """The first batch's."""
    client_id: str | None
    client_host: str
    producer_id: int
    producer_epoch: int
    api_version: int
    transactional_id: str | None
    principal: str | None = None
    """The authenticated principal (``User:alice``; ``User:ANONYMOUS`` on a PLAINTEXT listener)."""

    def entry(self) -> ProduceAuditEntry:
        return ProduceAuditEntry(
            topic=self.topic, partition=self.partition, base_offset=self.base_offset, last_offset=self.last_offset,
            record_count=self.record_count, append_time_ms=self.append_time_ms, client_id=self.client_id,
            client_host=self.client_host, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            api_version=self.api_version, transactional_id=self.transactional_id,
            principal=self.principal)


class ProduceAuditWriter:
    """Loop thread: :meth:`record`, :meth:`start`, :meth:`stop`. The writer thread: everything it sends."""

    def __init__(self, config: KafkaConfig, metrics: BrokerMetrics, *, metadata: Callable[[], ClusterMetadata],
                 topic_admin: Callable[[], TopicAdmin], bootstrap: Callable[[], str],
                 security: ClientSecurity | None = None) -> None:
        """``metadata``: the broker's current snapshot; ``topic_admin``: its topic writer (blocking, called on
        the writer thread); ``bootstrap``: where the writer's client connects (this broker's inter-broker
        listener); ``security``: that listener's TLS and the broker's own SASL login, as the replica fetchers
        use them (None: PLAINTEXT)."""
        self._config = config
        self._metadata = metadata
        self._topic_admin = topic_admin
        self._metrics = metrics
        self._bootstrap = bootstrap
        self._security = security
        self._pending: list[AuditRun] = []
        # The last run of each partition among the pending ones: the one a following batch may extend.
        self._open: dict[TopicPartition, AuditRun] = {}
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="produce-audit")
        self._client: KafkaClient | None = None  # made and used on the writer thread only
        self._topic_ready = False
        self._last_warning = float("-inf")

    @property
    def pending(self) -> int:
        return len(self._pending)

    # -- the produce path (event loop) ------------------------------------------------------------------------
    def record(self, *, client_id: str | None, client_host: str, api_version: int, transactional_id: str | None,
               entries: Sequence[tuple[TopicPartition, Buffer | None]],
               results: dict[TopicPartition, ProducePartitionResult], principal: str | None = None) -> None:
        """The partitions one Produce appended (called by the replica manager right after the append, before any
        acks=-1 wait, so a batch whose replication times out is still on record)."""
        now = -1
        for tp, records in entries:
            r = results[tp]
            if r.error_code != ErrorCode.NONE or records is None or tp[0].startswith("__"):
                continue
            producer_id, producer_epoch = batch_producer(records)
            run = self._open.get(tp)
            if (run is not None and run.last_offset + 1 == r.base_offset and run.producer_id == producer_id
                    and run.producer_epoch == producer_epoch and run.client_id == client_id
                    and run.client_host == client_host and run.api_version == api_version
                    and run.transactional_id == transactional_id and run.principal == principal):
                run.record_count += r.last_offset - run.last_offset
                run.last_offset = r.last_offset
                continue
            append_time = r.log_append_time
            if append_time < 0:
                if now < 0:
                    now = wall_clock_ms()
                append_time = now
            run = AuditRun(tp[0], tp[1], r.base_offset, r.last_offset, r.last_offset - r.base_offset + 1, append_time,
                           client_id, client_host, producer_id, producer_epoch, api_version, transactional_id,
                           principal)
            self._pending.append(run)
            self._open[tp] = run

    # -- flushing -------------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="produce-audit")

    async def stop(self, flush_timeout_s: float = 5.0) -> None:
        """Stop flushing; what is pending gets one last try, bounded by ``flush_timeout_s``."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._pending:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.flush(), flush_timeout_s)
        loop = asyncio.get_running_loop()
        with contextlib.suppress(RuntimeError):
            await loop.run_in_executor(self._executor, self._close_client)
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            if self._pending:
                await self.flush()

    async def flush(self) -> None:
        batch, self._pending, self._open = self._pending, [], {}
        try:
            unsent = await asyncio.get_running_loop().run_in_executor(self._executor, self._send, batch)
        except asyncio.CancelledError:
            self._pending = batch + self._pending
            raise
        except Exception:  # the writer must outlive any one failure; the entries are tried again
            log.exception("writing the produce audit failed")
            unsent = batch
        self._metrics.audit_entries_written += len(batch) - len(unsent)
        if unsent:
            pending = unsent + self._pending
            dropped = len(pending) - MAX_PENDING
            if dropped > 0:
                self._metrics.audit_entries_dropped += dropped
                self._warn(f"gave up {dropped} produce audit entries: {AUDIT_TOPIC} has not been writable for "
                           f"{MAX_PENDING} entries")
                pending = pending[dropped:]
            self._pending = pending

    # -- the writer thread ----------------------------------------------------------------------------------------
    def _send(self, batch: list[AuditRun]) -> list[AuditRun]:
        """Send ``batch``; returns what could not be sent."""
        if not self._topic_ready and not self._create_topic():
            return batch
        client = self._client
        if client is None:
            client = self._client = KafkaClient(self._bootstrap(), client_id=AUDIT_WRITER_CLIENT_ID,
                                                request_timeout_ms=CLIENT_TIMEOUT_MS, security=self._security)
        try:
            info = client.metadata([AUDIT_TOPIC]).topics.get(AUDIT_TOPIC)
        except (KafkaError, ClientError, OSError) as exc:
            self._warn(f"produce audit: no metadata for {AUDIT_TOPIC}: {exc}")
            return batch
        if info is None or info.error != ErrorCode.NONE or not info.partitions:
            self._warn(f"produce audit: {AUDIT_TOPIC} is not available yet")
            return batch
        count = len(info.partitions)
        by_partition: dict[int, list[AuditRun]] = {}
        for run in batch:
            by_partition.setdefault(audit_partition(run.topic, run.partition, count), []).append(run)
        unsent: list[AuditRun] = []
        for ap, entries in by_partition.items():
            records = [Record(0, e.append_time_ms, audit_key(e.topic, e.partition, e.base_offset), encode_entry(e.entry()))
                       for e in entries]
            try:
                client.produce(AUDIT_TOPIC, ap, records, acks=1, timeout_ms=CLIENT_TIMEOUT_MS)
            except (KafkaError, ClientError, OSError) as exc:
                self._warn(f"produce audit: writing {AUDIT_TOPIC}-{ap} failed: {exc}")
                unsent.extend(entries)
        return unsent

    def _create_topic(self) -> bool:
        config = self._config
        replication_factor = config.get_int("offsets.topic.replication.factor")
        snapshot = self._metadata()
        if AUDIT_TOPIC in snapshot.topics:
            self._topic_ready = True
            return True
        alive = len(snapshot.alive_broker_ids())
        if alive < replication_factor:
            self._warn(f"produce audit: {alive} brokers alive, {AUDIT_TOPIC} needs {replication_factor} "
                       "(offsets.topic.replication.factor); entries wait")
            return False
        new = NewTopic(AUDIT_TOPIC, num_partitions=AUDIT_TOPIC_PARTITIONS, replication_factor=replication_factor,
                       configs={"cleanup.policy": "compact,delete",
                                "retention.ms": str(config.get_int("sofakafka.produce.audit.retention.ms"))})
        try:
            self._topic_admin().create_topic(new)
            log.info("created %s (%d partitions, replication factor %d) for the produce audit", AUDIT_TOPIC,
                     AUDIT_TOPIC_PARTITIONS, replication_factor)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                self._warn(f"produce audit: creating {AUDIT_TOPIC} failed: {exc}")
                return False
        self._topic_ready = True
        return True

    def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _warn(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= WARN_EVERY_S:
            self._last_warning = now
            log.warning("%s", text)
