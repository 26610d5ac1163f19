"""Per-partition producer state: idempotence (sequence numbers, epochs) and open transactions.

An idempotent producer numbers its batches; the partition leader must refuse gaps, recognise retried batches
and fence producers whose epoch was bumped. A transactional producer's records stay invisible to
``read_committed`` consumers until a COMMIT marker, so the log needs to know the first offset of every open
transaction (the first unstable offset bounds the last stable offset, LSO). All of that is state derived from
the log itself; this module keeps it in memory, snapshots it to ``<offset>.snapshot`` files so a restart does
not re-read the whole log, and tells the Log from which offset it must replay batches after loading.

Semantics follow Kafka 2.6's ``ProducerStateManager`` / ``ProducerAppendInfo``:

- per producer id: the epoch, the metadata of its last 5 data batches (enough to answer a client's retry of any
  of its in-flight requests, ``max.in.flight.requests.per.connection`` <= 5), the coordinator epoch of the
  last transaction marker, the first offset of its open transaction and a last-write timestamp;
- a batch whose epoch is older than the known one is fenced (INVALID_PRODUCER_EPOCH, 2.6's mapping of
  ProducerFencedException); a new epoch must start at sequence 0; within an epoch sequences must follow
  on (OUT_OF_ORDER_SEQUENCE_NUMBER), except that a producer the partition knows no batches for may
  start anywhere: 2.6 no longer answers UNKNOWN_PRODUCER_ID from the log (KIP-360 removed that);
- a retried batch with exactly the sequence range of a retained batch is a duplicate: the append is skipped
  and the client gets the original offsets (no error code);
- idle producers expire after ``transactional.id.expiration.ms`` (2.6 passes that setting as the
  producer-id expiry; ``producer.id.expiration.ms`` only appeared in 3.4), never while a transaction is open.

Snapshot layout (FORMATS.md section 7), big-endian::

    int16 version (1) | uint32 crc32c(everything after the crc) | int32 entry count |
    entries: int64 producer_id, int16 epoch, int32 last_sequence, int64 last_offset, int32 offset_delta,
             int64 timestamp, int32 coordinator_epoch, int64 current_txn_first_offset (-1: none)

Only the last batch of each producer is persisted, as in Kafka; after a restart only that batch is recognised
as a duplicate.

Threading: not thread-safe; its owning ``Log`` calls it under the log's lock. Snapshot writes, loads and
deletions do blocking file I/O (a snapshot is written on every segment roll).
"""

from __future__ import annotations

import enum
import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import crc32c

from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.storage.transaction_index import AbortedTxn

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1

#: How many recent batches per producer are kept for duplicate detection (Kafka's NumBatchesToRetain).
NUM_BATCHES_TO_RETAIN = 5
#: ``transactional.id.expiration.ms`` default, the producer-state expiry a 2.6 broker uses.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 604_800_000
#: How often a 2.6 broker runs the expiry (LogManager.ProducerIdExpirationCheckIntervalMs).
PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000

CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the crc covers everything after version and crc


def snapshot_file_name(offset: int) -> str:
    """``00000000000000001234.snapshot``: named by the map end offset it captures, 20 digits like segments."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Sequence numbers wrap from INT32_MAX to 0; walk back over that wrap."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class ProducerBatch(Protocol):
    """The batch-header fields producer state reads; ``sofakafka.protocol.records.BatchHeader`` has them."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...


class AppendOrigin(enum.Enum):
    """Who appends decides how much is checked (Kafka's AppendOrigin).

    Client produce requests get the full sequence and epoch checks; the group/transaction coordinators write
    batches without sequences (offset commits, markers) and only get epoch checks; replication and log loading
    replay what a leader already accepted and check nothing.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class CorruptSnapshotError(Exception):
    """A ``.snapshot`` file that fails its CRC, version or length checks."""


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one appended data batch; also the answer to a duplicate produce."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id in this partition."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset, deque(self.batch_metadata))

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        """A different epoch invalidates the remembered sequences (a new epoch restarts at 0)."""
        if self.producer_epoch != epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for metadata in self.batch_metadata:
            if metadata.first_seq == first_seq and metadata.last_seq == last_seq:
                return metadata
        return None

    def find_duplicate_batch(self, batch: ProducerBatch) -> BatchMetadata | None:
        if batch.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(batch.base_sequence, _last_sequence(batch))


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker at ``last_offset``; aborted ones go into the segment's txnindex."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class LastRecord:
    """What the cleaner must keep for an active producer: the batch holding its last data offset, or, when
    its last write was a marker, that marker (it carries the epoch that fences zombies)."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(slots=True)
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None


def _last_sequence(batch: ProducerBatch) -> int:
    if batch.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(batch.base_sequence, batch.last_offset - batch.base_offset)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """Producer ids -> :class:`ProducerStateEntry`, plus open and not-yet-replicated transactions.

    ``map_end_offset`` is the log offset up to which (exclusive) the state reflects the log. The owning Log keeps
    it in step: each appended batch of an idempotent/transactional producer goes through :meth:`update`, and
    after any append the Log sets ``map_end_offset`` to its new end offset.
    """

    def __init__(self, log_dir: Path, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.log_dir = Path(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._map_end_offset = 0
        self._last_snap_offset = 0
        self._log_start_offset = 0
        # Keyed by first offset; Python dicts keep insertion order but transactions may be re-inserted on
        # load, so the first one is found with min() (there are few open transactions at a time).
        self._ongoing_txns: dict[int, TxnMetadata] = {}
        # Transactions whose marker is above the high watermark: they still hold the LSO back.
        self._unreplicated_txns: dict[int, TxnMetadata] = {}

    # -- offsets ---------------------------------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        return self._map_end_offset

    @map_end_offset.setter
    def map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    def update_map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    def first_unstable_offset(self) -> int | None:
        """Lowest first offset of a transaction that is undecided or decided above the high watermark."""
        candidates = [*self._ongoing_txns, *self._unreplicated_txns]
        return min(candidates) if candidates else None

    def first_undecided_offset(self) -> int | None:
        return min(self._ongoing_txns) if self._ongoing_txns else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is now below the high watermark no longer hold the LSO back."""
        self._remove_unreplicated_transactions(high_watermark)

    def _remove_unreplicated_transactions(self, offset: int) -> None:
        for first_offset, txn in list(self._unreplicated_txns.items()):
            if txn.last_offset is not None and txn.last_offset < offset:
                del self._unreplicated_txns[first_offset]

    # -- producers -------------------------------------------------------------------------------------------

    @property
    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self._producers)

    @property
    def is_empty(self) -> bool:
        return not self._producers and not self._unreplicated_txns

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        return {
            pid: LastRecord(entry.last_data_offset if entry.last_data_offset >= 0 else None, entry.producer_epoch)
            for pid, entry in self._producers.items()
        }

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int) -> None:
        """Forget producers idle for ``producer_id_expiration_ms``; the Log runs this every 10 minutes."""
        for pid in [pid for pid, e in self._producers.items() if self._is_expired(now_ms, e)]:
            del self._producers[pid]

    # -- validation (client appends) -------------------------------------------------------------------------

    def check_append(
        self,
        batch: ProducerBatch,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        control_type: int | None = None,
        coordinator_epoch: int = -1,
    ) -> BatchMetadata | None:
        """Validate a batch before it is appended; nothing changes here, :meth:`update` applies it afterwards.

        Returns the metadata of the original batch when a client retried one it already wrote (the produce
        then succeeds with those offsets without appending); None when the batch may be appended.
        Raises :class:`KafkaError` with INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE
        or TRANSACTION_COORDINATOR_FENCED.
        """
        if batch.producer_id == NO_PRODUCER_ID or origin is AppendOrigin.REPLICATION:
            return None
        current = self._producers.get(batch.producer_id)
        if origin is AppendOrigin.CLIENT and current is not None:
            duplicate = current.find_duplicate_batch(batch)
            if duplicate is not None:
                return duplicate
        if current is None:
            current = ProducerStateEntry(batch.producer_id)
        self._check_producer_epoch(current, batch)
        if batch.is_control:
            if control_type is not None and current.coordinator_epoch > coordinator_epoch:
                raise KafkaError(
                    ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                    f"coordinator epoch {coordinator_epoch} of marker for producer {batch.producer_id} at "
                    f"offset {batch.base_offset} is older than {current.coordinator_epoch}",
                )
            return None
        if origin is AppendOrigin.CLIENT:
            self._check_sequence(current, batch)
        if current.current_txn_first_offset is not None and not batch.is_transactional:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"expected a transactional write from producer {batch.producer_id} at offset {batch.base_offset}",
            )
        return None

    @staticmethod
    def _check_producer_epoch(current: ProducerStateEntry, batch: ProducerBatch) -> None:
        if batch.producer_epoch < current.producer_epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch {batch.producer_epoch} of producer {batch.producer_id} at offset {batch.base_offset} is "
                f"older than the last seen epoch {current.producer_epoch}",
            )

    @staticmethod
    def _check_sequence(current: ProducerStateEntry, batch: ProducerBatch) -> None:
        first_seq = batch.base_sequence
        if batch.producer_epoch != current.producer_epoch:
            if first_seq != 0 and current.producer_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {batch.producer_epoch} of producer {batch.producer_id} must start at sequence 0, "
                    f"not {first_seq}",
                )
            return
        # No known epoch (every batch of the producer was removed by retention or DeleteRecords):
        # accept any sequence, as 2.6 does.
        if current.producer_epoch == NO_PRODUCER_EPOCH:
            return
        if not _in_sequence(current.last_seq, first_seq):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence {first_seq} for producer {batch.producer_id} at offset "
                f"{batch.base_offset}; last sequence is {current.last_seq}",
            )

    # -- applying appended batches ---------------------------------------------------------------------------

    def update(
        self,
        batch: ProducerBatch,
        control_type: int | None = None,
        *,
        coordinator_epoch: int = -1,
        timestamp: int | None = None,
    ) -> CompletedTxn | None:
        """Apply a batch that is now in the log (appended, replicated or replayed on load).

        For a control batch pass the decoded marker's ``control_type`` and ``coordinator_epoch`` (see
        ``sofakafka.protocol.records.EndTransactionMarker``); ``control_type=None`` on a control batch means
        the cleaner emptied it and it changes nothing. The returned :class:`CompletedTxn` is already marked complete: the Log writes an
        :class:`AbortedTxn` (see :meth:`aborted_txn`) for an aborted one. Never raises for a stale epoch:
        what reaches the log was accepted by a leader, whose word is final.
        """
        self._map_end_offset = max(self._map_end_offset, batch.last_offset + 1)
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(pid)
        if entry is None:
            entry = ProducerStateEntry(pid)
            self._producers[pid] = entry
        if batch.producer_epoch < entry.producer_epoch:
            log.warning("producer %d at offset %d has epoch %d, older than %d", pid, batch.base_offset,
                        batch.producer_epoch, entry.producer_epoch)
        if batch.is_control:
            if control_type is None:
                return None
            return self._append_end_txn_marker(entry, batch, control_type, coordinator_epoch,
                                               batch.max_timestamp if timestamp is None else timestamp)
        entry.add_batch(batch.producer_epoch, _last_sequence(batch), batch.last_offset,
                        batch.last_offset - batch.base_offset, batch.max_timestamp)
        if batch.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = batch.base_offset
            self._ongoing_txns[batch.base_offset] = TxnMetadata(pid, batch.base_offset)
        return None

    def _append_end_txn_marker(self, entry: ProducerStateEntry, batch: ProducerBatch, control_type: int,
                               coordinator_epoch: int, timestamp: int) -> CompletedTxn:
        offset = batch.base_offset
        first_offset = entry.current_txn_first_offset
        if first_offset is None:
            # A marker with no data before it (the producer wrote nothing here in this transaction, or the
            # cleaner removed it): it still completes a transaction covering just itself, as in 2.6.
            first_offset = offset
            self._ongoing_txns[offset] = TxnMetadata(entry.producer_id, offset)
        entry.maybe_update_producer_epoch(batch.producer_epoch)
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        completed = CompletedTxn(entry.producer_id, first_offset, offset, control_type == CONTROL_TYPE_ABORT)
        self._complete_txn(completed)
        return completed

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO to record with an aborted transaction: the first open transaction of another producer."""
        others = [o for o, txn in self._ongoing_txns.items() if txn.producer_id != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def aborted_txn(self, completed: CompletedTxn) -> AbortedTxn:
        return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                          self.last_stable_offset(completed))

    def _complete_txn(self, completed: CompletedTxn) -> None:
        txn = self._ongoing_txns.get(completed.first_offset)
        if txn is None:
            raise ValueError(f"completed transaction {completed} was never started")
        txn.last_offset = completed.last_offset
        # Unreplicated before it stops being ongoing: a fetch on another thread computes the last stable offset
        # from both without the log's lock, and must never see the transaction in neither (the LSO would jump to
        # the high watermark over data whose ABORT is not yet in the transaction index).
        self._unreplicated_txns[completed.first_offset] = txn
        del self._ongoing_txns[completed.first_offset]

    # -- snapshots -------------------------------------------------------------------------------------------

    def _snapshots(self, *, remove_stale: bool = False) -> list[tuple[int, Path]]:
        """(offset, path) of each snapshot file in the directory, oldest first, from one listing of it;
        ``remove_stale`` also deletes the ``.snapshot.tmp`` files an interrupted write left."""
        try:
            with os.scandir(self.log_dir) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for entry in entries:
            name = entry.name
            if name.endswith(SNAPSHOT_SUFFIX):
                try:
                    offset = int(name[: -len(SNAPSHOT_SUFFIX)])
                except ValueError:
                    continue
                if entry.is_file():
                    found.append((offset, Path(entry.path)))
            elif remove_stale and name.endswith(SNAPSHOT_SUFFIX + ".tmp"):
                Path(entry.path).unlink(missing_ok=True)
        found.sort(key=lambda snapshot: snapshot[0])
        return found

    def snapshot_offsets(self) -> list[int]:
        return [offset for offset, _path in self._snapshots()]

    @property
    def latest_snapshot_offset(self) -> int | None:
        snapshots = self._snapshots()
        return snapshots[-1][0] if snapshots else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        snapshots = self._snapshots()
        return snapshots[0][0] if snapshots else None

    def take_snapshot(self, *, force: bool = False) -> None:
        """Persist the state at ``map_end_offset`` unless a snapshot there already exists (Log calls on roll);
        ``force`` writes it anyway (the log moved to a directory whose snapshots another copy wrote)."""
        if self._map_end_offset <= self._last_snap_offset and not force:
            return
        path = self.log_dir / snapshot_file_name(self._map_end_offset)
        write_snapshot(path, self._producers.values())
        self._last_snap_offset = self._map_end_offset

    def delete_snapshots_before(self, offset: int) -> None:
        self._delete_snapshots_where(lambda o: o < offset)

    def _delete_snapshots_where(self, predicate: Callable[[int], bool],
                                snapshots: list[tuple[int, Path]] | None = None) -> list[tuple[int, Path]]:
        """Delete the snapshots (listed now, unless given) whose offset ``predicate`` accepts; returns the
        others."""
        kept = []
        for offset, path in self._snapshots() if snapshots is None else snapshots:
            if predicate(offset):
                path.unlink(missing_ok=True)
            else:
                kept.append((offset, path))
        return kept

    # -- loading and truncation ------------------------------------------------------------------------------

    def load(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int:
        """Bring the state in line with a log holding ``[log_start_offset, log_end_offset)``.

        Snapshots outside that range are deleted; unless the in-memory state already ends at
        ``log_end_offset``, it is rebuilt from the newest readable snapshot (corrupt ones are deleted and the
        next older one is tried). Returns the offset from which the Log must replay its batches through
        :meth:`update` up to ``log_end_offset``, after which it calls ``update_map_end_offset(log_end_offset)``
        and :meth:`take_snapshot`. Kafka's ``truncateAndReload``.
        """
        # One listing of the directory for the whole load (at start-up it runs twice for each of the
        # broker's logs).
        snapshots = self._snapshots(remove_stale=True)
        self._log_start_offset = log_start_offset
        snapshots = self._delete_snapshots_where(lambda o: o > log_end_offset or o <= log_start_offset, snapshots)
        if log_end_offset != self._map_end_offset:
            self._producers.clear()
            self._ongoing_txns.clear()
            # The Log truncates only to offsets at or below the high watermark, so these are replicated.
            self._unreplicated_txns.clear()
            self._load_from_snapshot(log_start_offset, now_ms, snapshots)
        else:
            self.truncate_head(log_start_offset, snapshots)
        return self._map_end_offset

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int, snapshots: list[tuple[int, Path]]) -> None:
        """Load the newest readable of ``snapshots`` (oldest first), deleting corrupt ones on the way."""
        while snapshots:
            offset, path = snapshots.pop()
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError as e:
                log.warning("deleting corrupt producer snapshot %s: %s", path, e)
                path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self._load_entry(entry)
            self._last_snap_offset = offset
            self._map_end_offset = offset
            return
        self._last_snap_offset = log_start_offset
        self._map_end_offset = log_start_offset

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._ongoing_txns[entry.current_txn_first_offset] = TxnMetadata(
                entry.producer_id, entry.current_txn_first_offset)

    def truncate_to(self, offset: int, now_ms: int = 0) -> int:
        """The Log was truncated to end at ``offset``: drop later snapshots and reload.

        Returns the offset to replay from, as :meth:`load` does. ``now_ms`` only matters for expiring producers
        read back from the snapshot; 0 keeps them all.
        """
        return self.load(self._log_start_offset, offset, now_ms)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The Log discarded everything (a follower far behind the leader's start): start empty at ``offset``."""
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        self._delete_snapshots_where(lambda o: True)
        self._last_snap_offset = 0
        self._map_end_offset = offset
        self._log_start_offset = offset

    def truncate_head(self, log_start_offset: int, snapshots: list[tuple[int, Path]] | None = None) -> None:
        """The log start offset moved up (retention, DeleteRecords): drop what lies below it.

        Producers are kept, as in 2.6, so a producer whose batches were deleted can keep writing.
        ``snapshots``: the directory's snapshots as just listed (by :meth:`load`), else they are listed here.
        """
        self._log_start_offset = max(self._log_start_offset, log_start_offset)
        self._remove_unreplicated_transactions(log_start_offset)
        if self._map_end_offset < log_start_offset:
            self._map_end_offset = log_start_offset
        kept = self._delete_snapshots_where(lambda o: o < log_start_offset, snapshots)
        self._last_snap_offset = kept[-1][0] if kept else log_start_offset

    def update_parent_dir(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)


# -- snapshot file codec -------------------------------------------------------------------------------------


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Kafka's version-1 snapshot bytes. Entries are written in producer-id order so equal states give equal
    files (Kafka writes hash-map order; readers do not care)."""
    ordered = sorted(entries, key=lambda e: e.producer_id)
    body = bytearray(struct.pack(">i", len(ordered)))
    for e in ordered:
        body += _SNAPSHOT_ENTRY.pack(
            e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta,
            e.last_timestamp, e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
    crc = crc32c.crc32c(bytes(body))
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, stored_crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c.crc32c(data[_CRC_START:])
    if computed != stored_crc:
        raise CorruptSnapshotError(f"CRC mismatch: stored {stored_crc}, computed {computed}")
    if count < 0 or len(data) != _HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"snapshot length {len(data)} does not fit {count} entries")
    entries = []
    for i in range(count):
        (pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first) = _SNAPSHOT_ENTRY.unpack_from(data, _HEADER.size + i * _SNAPSHOT_ENTRY.size)
        batches: deque[BatchMetadata] = deque()
        if last_offset >= 0:
            batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        entries.append(ProducerStateEntry(pid, epoch, coordinator_epoch, timestamp,
                                          txn_first if txn_first >= 0 else None, batches))
    return entries


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    return decode_snapshot(Path(path).read_bytes())


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry]) -> None:
    """Write via a temporary file and rename, so a crash never leaves a half-written snapshot under the real
    name (a torn one would only cost a CRC failure and an older snapshot, but this avoids the replay)."""
    data = encode_snapshot(entries)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
