"""TransactionCoordinator: Kafka 2.6's transaction coordinator as pure logic.

The world is injected, as for the group coordinator: a :class:`~sofakafka.broker.group.runtime.Clock` and a
``Scheduler`` (the broker's event loop, or ``ManualTime`` in tests), a :class:`TxnLogWriter` that appends to
``__transaction_state`` with acks=all, and a :class:`MarkerChannel` that writes COMMIT/ABORT markers to the
leaders of a transaction's partitions. Everything runs on one thread; nothing locks.

How a request becomes state (``state.py`` holds the per-id machine and its table):

* the operation checks the request against the id's metadata (Kafka's error codes, in Kafka's order), asks the
  metadata to *prepare* the transition (the id is then pending: others get CONCURRENT_TRANSACTIONS) and hands
  the resulting record to the writer;
* when the writer reports the record written, and this broker still coordinates the id's partition at the same
  coordinator epoch (the ``__transaction_state`` leader epoch it loaded under), the record is replayed onto the
  metadata and the client answered; a failed write changes nothing but the answer.

Ending a transaction is two writes with the markers between them: EndTxn writes PrepareCommit (PrepareAbort)
and answers the client, then the markers go to every partition of the transaction (retried with
``marker_retry_backoff_ms`` while a leader is missing or moving), and once each partition has its marker the
coordinator writes CompleteCommit (CompleteAbort). Until then the id stays pending, so the producer's next
AddPartitionsToTxn, EndTxn or InitProducerId is answered CONCURRENT_TRANSACTIONS and retried. A coordinator
that loads a partition (this broker became its leader) finds transactions left in PrepareCommit/PrepareAbort by
the previous one and finishes them the same way.

Fencing: InitProducerId bumps the epoch (KIP-360: a producer that gives its current id and epoch may bump it
again; the previous epoch is remembered in memory so a lost answer can be retried). InitProducerId while a
transaction is open, and a transaction open longer than its ``transaction.timeout.ms``
(``abort_timed_out_transactions``, every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``), abort
it at the next epoch, fencing the old producer. Ids idle for ``transactional.id.expiration.ms`` are tombstoned
(``expire_transactional_ids``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sofakafka.broker.group.runtime import Cancellable, Clock, Completion, Scheduler
from sofakafka.broker.txn.records import decode_key as decode_txn_key
from sofakafka.broker.txn.records import decode_value as decode_txn_value
from sofakafka.broker.txn.records import encode_key, encode_value, partition_for
from sofakafka.broker.txn.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
    is_epoch_exhausted,
)
from sofakafka.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

E = ErrorCode
S = TransactionState


class _IntConfig(Protocol):
    def get_int(self, key: str) -> int: ...


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """The broker keys the coordinator obeys, with Kafka 2.6's defaults."""

    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    abort_timed_out_transactions_interval_ms: int = 10_000
    remove_expired_transactional_ids_interval_ms: int = 3_600_000
    request_timeout_ms: int = 30_000
    # How long a marker write that failed for a retriable reason (no leader, leader moving, not enough
    # replicas) waits before it is sent again; Kafka's send thread simply loops on its poll timeout.
    marker_retry_backoff_ms: int = 100
    # sofakafka.transaction.add.partitions.wait.ms: how long AddPartitionsToTxn waits for the previous transaction
    # of the same producer to complete (markers written) before answering CONCURRENT_TRANSACTIONS, as Kafka 2.6
    # answers at once. A producer starts its next transaction as soon as EndTxn returns, usually while the markers
    # are still being written; answering at once costs it a client-side retry backoff (librdkafka's is 20 ms and
    # more) per transaction. 0 is Kafka's behaviour exactly.
    add_partitions_wait_ms: int = 100

    @classmethod
    def from_config(cls, config: _IntConfig) -> TxnConfig:
        return cls(
            transaction_state_log_num_partitions=config.get_int("transaction.state.log.num.partitions"),
            transaction_max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            transactional_id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
            abort_timed_out_transactions_interval_ms=config.get_int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_transactional_ids_interval_ms=config.get_int(
                "transaction.remove.expired.transaction.cleanup.interval.ms"),
            request_timeout_ms=config.get_int("request.timeout.ms"),
            add_partitions_wait_ms=config.get_int("sofakafka.transaction.add.partitions.wait.ms"),
        )


class TxnLogWriter(Protocol):
    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int,
               done: Callable[[ErrorCode], None]) -> None:
        """Append ``(key, value)`` records (None value = tombstone) to ``__transaction_state``/``partition`` as one
        uncompressed batch with acks=all; call ``done`` exactly once, on the coordinator's thread, with the
        append's error (NONE, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...)."""
        ...


@dataclass(frozen=True, slots=True)
class TxnMarkers:
    """COMMIT or ABORT markers of one transaction, for some of its partitions (WriteTxnMarkers' entry)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


class MarkerChannel(Protocol):
    def send(self, markers: TxnMarkers, done: Callable[[Mapping[TopicPartition, ErrorCode]], None]) -> None:
        """Write the markers at each partition's leader (WriteTxnMarkers, or a local append); call ``done`` once, on
        the coordinator's thread, with one result per partition: NONE when written (or when the partition no
        longer exists, so nothing is left to mark), else the error (retriable ones are sent again)."""
        ...


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


def _append_error(error: ErrorCode) -> ErrorCode:
    """TransactionStateManager.appendTransactionToLog's mapping of log append errors to coordinator errors."""
    if error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return error


#: Marker results after which the partition needs no marker any more (written, or it cannot hold one).
_MARKER_DONE = frozenset({E.NONE, E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})
#: Results meaning a newer producer epoch or coordinator already moved on: this coordinator stops sending.
_MARKER_OBSOLETE = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})


@dataclass(slots=True)
class _TxnPartition:
    coordinator_epoch: int
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(slots=True)
class _MarkerJob:
    """A transaction whose markers are being written; ``complete`` is the prepared CompleteCommit/Abort record."""

    transactional_id: str
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    remaining: set[TopicPartition]
    complete: TxnTransit
    retry: Cancellable | None = None


class TransactionCoordinator:
    def __init__(self, *, config: TxnConfig, clock: Clock, scheduler: Scheduler, writer: TxnLogWriter,
                 markers: MarkerChannel, partition_count: int | None = None) -> None:
        self.config = config
        self._clock = clock
        self._scheduler = scheduler
        self._writer = writer
        self._markers = markers
        self.partition_count = partition_count or config.transaction_state_log_num_partitions
        self._owned: dict[int, _TxnPartition] = {}
        self._loading: dict[int, int] = {}
        self._jobs: dict[str, _MarkerJob] = {}
        # Requests waiting for an id's marker job to end (add_partitions_wait_ms), called when it does.
        self._waiters: dict[str, list[Callable[[], None]]] = {}
        self._timers: list[Cancellable] = []
        self._active = False

    # -- life cycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Schedule the timed-out transaction aborts and the expiry of idle transactional ids."""
        self._active = True
        self._every(self.config.abort_timed_out_transactions_interval_ms, self.abort_timed_out_transactions)
        self._every(self.config.remove_expired_transactional_ids_interval_ms, self.expire_transactional_ids)

    def _every(self, interval_ms: int, work: Callable[[], object]) -> None:
        def tick() -> None:
            if not self._active:
                return
            try:
                work()
            finally:
                self._timers.append(self._scheduler.call_later(interval_ms, tick))
        self._timers.append(self._scheduler.call_later(interval_ms, tick))

    def shutdown(self) -> None:
        self._active = False
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        for transactional_id in list(self._jobs):
            self._end_job(transactional_id)
        self._owned.clear()
        self._loading.clear()

    def _now(self) -> int:
        return self._clock.now_ms()

    # -- ownership of __transaction_state partitions -----------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """Its ids answer COORDINATOR_LOAD_IN_PROGRESS from now until :meth:`load_partition`."""
        self._drop_partition(partition)
        self._loading[partition] = coordinator_epoch

    def load_partition(self, partition: int, coordinator_epoch: int,
                       records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        """Replay the partition's records (in log order) and serve its ids; finish what the last coordinator left
        in PrepareCommit/PrepareAbort. Ignored when another epoch's load or an unload came meanwhile."""
        if self._loading.get(partition) != coordinator_epoch:
            return
        txns: dict[str, TransactionMetadata] = {}
        for key, value in records:
            if key is None:
                continue
            transactional_id = decode_txn_key(key)
            decoded = decode_txn_value(value)
            if decoded is None:
                txns.pop(transactional_id, None)
            else:
                txns[transactional_id] = TransactionMetadata.from_log(transactional_id, decoded)
        del self._loading[partition]
        self._owned[partition] = _TxnPartition(coordinator_epoch, txns)
        now = self._now()
        for md in txns.values():
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info("transactional id %s was left in %s: writing its markers", md.transactional_id,
                         md.state.display_name)
                self._start_markers(md, coordinator_epoch, md.prepare_complete(now))

    def unload_partition(self, partition: int) -> None:
        """No longer the leader: forget the partition's ids and stop writing their markers."""
        self._loading.pop(partition, None)
        self._drop_partition(partition)

    def _drop_partition(self, partition: int) -> None:
        owned = self._owned.pop(partition, None)
        if owned is None:
            return
        for transactional_id in owned.txns:
            self._end_job(transactional_id)

    def _lookup(self, transactional_id: str) -> tuple[ErrorCode, _TxnPartition | None]:
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        owned = self._owned.get(partition)
        if owned is None:
            return E.NOT_COORDINATOR, None
        return E.NONE, owned

    def _producer_txn(self, transactional_id: str, producer_id: int, producer_epoch: int
                      ) -> tuple[ErrorCode, _TxnPartition | None, TransactionMetadata | None]:
        """The id's metadata when this coordinator serves it and the producer is its current one (Kafka's checks
        of a client's request, in Kafka's order), else the error the request gets."""
        if not transactional_id:
            return E.INVALID_REQUEST, None, None
        error, owned = self._lookup(transactional_id)
        if owned is None:
            return error, None, None
        md = owned.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, None, None
        if md.producer_epoch != producer_epoch:
            return E.INVALID_PRODUCER_EPOCH, None, None
        return E.NONE, owned, md

    def transactions(self) -> dict[str, TransactionMetadata]:
        """Every id this coordinator serves now (read-only view for tests and tools)."""
        return {t: md for owned in self._owned.values() for t, md in owned.txns.items()}

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        _error, owned = self._lookup(transactional_id)
        return owned.txns.get(transactional_id) if owned is not None else None

    # -- writing ---------------------------------------------------------------------------------------------------
    def _append(self, md: TransactionMetadata, coordinator_epoch: int, transit: TxnTransit,
                done: Callable[[ErrorCode], None], *, retry_on: ErrorCode | None = None) -> None:
        """Write ``transit``; replay it on success (still the coordinator at that epoch), else clear the pending
        state unless the error is ``retry_on`` (the caller tries the same record again later)."""
        transactional_id = md.transactional_id
        error, owned = self._lookup(transactional_id)
        if owned is None or owned.txns.get(transactional_id) is not md:
            done(error if error is not E.NONE else E.NOT_COORDINATOR)
            return
        if owned.coordinator_epoch != coordinator_epoch:
            done(E.NOT_COORDINATOR)
            return

        def written(append_error: ErrorCode) -> None:
            mapped = E.NONE if append_error is E.NONE else _append_error(append_error)
            _error_now, owned_now = self._lookup(transactional_id)
            current = owned_now.txns.get(transactional_id) if owned_now is not None else None
            if current is not md or owned_now is None or owned_now.coordinator_epoch != coordinator_epoch:
                # Moved or reloaded meanwhile: the log holds the truth and a new load will have replayed it.
                done(mapped if mapped is not E.NONE else E.NOT_COORDINATOR)
                return
            if mapped is E.NONE:
                md.complete(transit)
            elif mapped is not retry_on:
                md.abandon()
                if md.producer_epoch == NO_PRODUCER_EPOCH and md.state is S.EMPTY:
                    # Created by this request and never written: it must not outlive the failure.
                    owned_now.txns.pop(transactional_id, None)
            done(mapped)

        key = encode_key(transactional_id)
        value = encode_value(transit.log_value())
        self._writer.append(self.partition_for(transactional_id), [(key, value)], transit.timeout_ms, written)

    # -- InitProducerId --------------------------------------------------------------------------------------------
    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int,
                         expected: tuple[int, int] | None,
                         new_producer_id: Callable[[], int]) -> Completion[InitProducerIdResult]:
        """InitProducerId. ``expected`` is the (producer id, epoch) a v3 request carries (KIP-360), None when it
        sent -1/-1; ``new_producer_id`` hands out a fresh id when one is needed (a new transactional id, or
        an exhausted epoch)."""
        if transactional_id is None:
            return Completion.of(InitProducerIdResult(E.NONE, new_producer_id(), 0))
        if not transactional_id:
            return Completion.of(InitProducerIdResult(E.INVALID_REQUEST))
        if not self.validate_transaction_timeout_ms(transaction_timeout_ms):
            return Completion.of(InitProducerIdResult(E.INVALID_TRANSACTION_TIMEOUT))
        error, owned = self._lookup(transactional_id)
        if owned is None:
            return Completion.of(InitProducerIdResult(error))
        md = owned.txns.get(transactional_id)
        if md is None:
            md = TransactionMetadata.new(transactional_id, new_producer_id(), transaction_timeout_ms, self._now())
            owned.txns[transactional_id] = md
        result: Completion[InitProducerIdResult] = Completion()
        outcome = self._prepare_init(md, transaction_timeout_ms, expected, new_producer_id)
        if isinstance(outcome, ErrorCode):
            if md.producer_epoch == NO_PRODUCER_EPOCH and not md.pending_transition_in_progress:
                owned.txns.pop(transactional_id, None)  # created for this request, never written
            return Completion.of(InitProducerIdResult(outcome))
        transit = outcome
        if transit.state is S.PREPARE_ABORT:
            # An open transaction: abort it at a new epoch (fencing the old producer) and have the client retry,
            # which bumps the epoch once more once the abort is complete.
            def fenced(end_error: ErrorCode) -> None:
                result.complete(InitProducerIdResult(E.CONCURRENT_TRANSACTIONS if end_error is E.NONE else end_error))
            self._write_prepare(md, owned.coordinator_epoch, transit, fenced)
            return result

        def written(append_error: ErrorCode) -> None:
            if append_error is E.NONE:
                log.info("initialized transactional id %s with producer id %d and epoch %d on %s-%d", transactional_id,
                         transit.producer_id, transit.producer_epoch, "__transaction_state",
                         self.partition_for(transactional_id))
                result.complete(InitProducerIdResult(E.NONE, transit.producer_id, transit.producer_epoch))
            else:
                result.complete(InitProducerIdResult(append_error))

        self._append(md, owned.coordinator_epoch, transit, written)
        return result

    def _prepare_init(self, md: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                      new_producer_id: Callable[[], int]) -> TxnTransit | ErrorCode:
        if md.pending_transition_in_progress:
            return E.CONCURRENT_TRANSACTIONS
        if expected is not None:
            expected_id, expected_epoch = expected
            valid = (md.producer_epoch == NO_PRODUCER_EPOCH or expected_id == md.producer_id
                     or (expected_id == md.last_producer_id and is_epoch_exhausted(expected_epoch)))
            if not valid:
                return E.INVALID_PRODUCER_EPOCH
        state = md.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return E.CONCURRENT_TRANSACTIONS
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if md.is_producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                return md.prepare_producer_id_rotation(new_producer_id(), timeout_ms, self._now(), expected is not None)
            transit = md.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1],
                                                          self._now())
            return E.INVALID_PRODUCER_EPOCH if transit is None else transit
        if state is S.ONGOING:
            return md.prepare_fence_and_abort(self._now())
        raise AssertionError(f"transactional id {md.transactional_id} found in state {state.display_name}")

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------------------
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> Completion[ErrorCode]:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's ``__consumer_offsets`` partition)."""
        added = frozenset(partitions)
        error, owned, md = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if owned is None or md is None:
            return Completion.of(error)
        if md.pending_transition_in_progress or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            waiting: Completion[ErrorCode] = Completion()

            def again() -> None:
                self.add_partitions(transactional_id, producer_id, producer_epoch, added).add_done_callback(
                    waiting.complete)

            if md.pending_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and self._wait_for_job(
                    transactional_id, again, lambda: waiting.complete(E.CONCURRENT_TRANSACTIONS)):
                return waiting
            return Completion.of(E.CONCURRENT_TRANSACTIONS)
        if md.state is S.ONGOING and added <= md.partitions:
            return Completion.of(E.NONE)
        result: Completion[ErrorCode] = Completion()
        self._append(md, owned.coordinator_epoch, md.prepare_add_partitions(added, self._now()), result.complete)
        return result

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Whether each partition belongs to the producer's ongoing transaction (the partition leader's check
        before it accepts the first transactional batch of a transaction, KIP-890 style). Read-only."""
        wanted = list(partitions)
        error, _owned, md = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if md is None:
            return dict.fromkeys(wanted, error)
        if md.pending_state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(wanted, E.CONCURRENT_TRANSACTIONS)
        if md.state is not S.ONGOING:
            return dict.fromkeys(wanted, E.INVALID_TXN_STATE)
        return {tp: E.NONE if tp in md.partitions else E.INVALID_TXN_STATE for tp in wanted}

    # -- EndTxn ----------------------------------------------------------------------------------------------------
    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool) -> Completion[ErrorCode]:
        """EndTxn from the producer: PrepareCommit/PrepareAbort, answered once written; markers follow."""
        error, owned, md = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if owned is None or md is None:
            return Completion.of(error)
        if md.pending_transition_in_progress:
            return Completion.of(E.CONCURRENT_TRANSACTIONS)
        state = md.state
        asked = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if state is S.ONGOING:
            result: Completion[ErrorCode] = Completion()
            self._write_prepare(md, owned.coordinator_epoch, md.prepare_abort_or_commit(asked, self._now()),
                                result.complete)
            return result
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            # A retry of an EndTxn that completed: the same outcome again is fine, the other one is not.
            done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
            return Completion.of(E.NONE if state is done else self._invalid(md, commit))
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return Completion.of(E.CONCURRENT_TRANSACTIONS if state is asked else self._invalid(md, commit))
        if state is S.EMPTY:
            return Completion.of(self._invalid(md, commit))
        raise AssertionError(f"transactional id {transactional_id} found in state {state.display_name}")

    @staticmethod
    def _invalid(md: TransactionMetadata, commit: bool) -> ErrorCode:
        log.debug("transactional id %s is %s, asked to %s", md.transactional_id, md.state.display_name,
                  "commit" if commit else "abort")
        return E.INVALID_TXN_STATE

    def _write_prepare(self, md: TransactionMetadata, coordinator_epoch: int, transit: TxnTransit,
                       done: Callable[[ErrorCode], None]) -> None:
        """Write PrepareCommit/PrepareAbort; once written (and still ours), answer and start the markers."""
        transactional_id = md.transactional_id

        def written(error: ErrorCode) -> None:
            if error is not E.NONE:
                log.info("ending the transaction of %s failed: %s", transactional_id, error.name)
                done(error)
                return
            error_now, owned = self._lookup(transactional_id)
            current = owned.txns.get(transactional_id) if owned is not None else None
            if owned is None or current is None or owned.coordinator_epoch != coordinator_epoch:
                done(error_now if error_now is not E.NONE else E.NOT_COORDINATOR)
                return
            if current.producer_id != transit.producer_id:
                done(E.INVALID_PRODUCER_ID_MAPPING)
            elif current.producer_epoch != transit.producer_epoch:
                done(E.INVALID_PRODUCER_EPOCH)
            elif current.pending_transition_in_progress or current.state is not transit.state:
                done(E.CONCURRENT_TRANSACTIONS)
            else:
                complete = current.prepare_complete(self._now())
                done(E.NONE)
                self._start_markers(current, coordinator_epoch, complete)

        self._append(md, coordinator_epoch, transit, written)

    # -- markers ----------------------------------------------------------------------------------------------------
    def _start_markers(self, md: TransactionMetadata, coordinator_epoch: int, complete: TxnTransit) -> None:
        job = _MarkerJob(md.transactional_id, coordinator_epoch, md.producer_id, md.producer_epoch,
                         md.state is S.PREPARE_COMMIT, set(md.partitions), complete)
        self._jobs[md.transactional_id] = job
        if job.remaining:
            self._send(job, frozenset(job.remaining))
        else:
            self._write_complete(job)

    def _send(self, job: _MarkerJob, partitions: frozenset[TopicPartition]) -> None:
        markers = TxnMarkers(job.transactional_id, job.producer_id, job.producer_epoch, job.coordinator_epoch,
                             job.commit, partitions)
        self._markers.send(markers, lambda results: self._on_marker_results(job, results))

    def _current_job(self, job: _MarkerJob) -> bool:
        """Still the job of a coordinator that owns the id at the job's epoch."""
        if self._jobs.get(job.transactional_id) is not job:
            return False
        error, owned = self._lookup(job.transactional_id)
        if owned is None or owned.coordinator_epoch != job.coordinator_epoch:
            log.info("no longer the coordinator of %s at epoch %d (%s): its markers stop here", job.transactional_id,
                     job.coordinator_epoch, error.name)
            self._end_job(job.transactional_id)
            return False
        return True

    def _on_marker_results(self, job: _MarkerJob, results: Mapping[TopicPartition, ErrorCode]) -> None:
        if not self._current_job(job):
            return
        retry: set[TopicPartition] = set()
        for tp, error in results.items():
            if error in _MARKER_DONE:
                job.remaining.discard(tp)
            elif error in _MARKER_OBSOLETE:
                log.info("marker for %s-%d of %s failed with %s: a newer epoch took over, no more markers", tp[0],
                         tp[1], job.transactional_id, error.name)
                self._end_job(job.transactional_id)
                return
            else:
                if error not in (E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                                 E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.NETWORK_EXCEPTION,
                                 E.KAFKA_STORAGE_ERROR, E.BROKER_NOT_AVAILABLE, E.LEADER_NOT_AVAILABLE):
                    log.warning("marker for %s-%d of %s failed with unexpected %s; retrying", tp[0], tp[1],
                                job.transactional_id, error.name)
                retry.add(tp)
        retry &= job.remaining
        if retry:
            self._retry_later(job, lambda: self._send(job, frozenset(retry)))
        elif not job.remaining:
            self._write_complete(job)

    def _retry_later(self, job: _MarkerJob, action: Callable[[], None]) -> None:
        def fire() -> None:
            job.retry = None
            if self._active and self._current_job(job):
                action()
        job.retry = self._scheduler.call_later(self.config.marker_retry_backoff_ms, fire)

    def _write_complete(self, job: _MarkerJob) -> None:
        """Every marker is in: CompleteCommit/CompleteAbort (retried while the log is unavailable)."""
        _error, owned = self._lookup(job.transactional_id)
        md = owned.txns.get(job.transactional_id) if owned is not None else None
        if md is None:
            self._end_job(job.transactional_id)
            return

        def written(append_error: ErrorCode) -> None:
            if self._jobs.get(job.transactional_id) is not job:
                return
            if append_error is E.COORDINATOR_NOT_AVAILABLE:
                log.info("completing the transaction of %s: log not available, retrying", job.transactional_id)
                self._retry_later(job, lambda: self._write_complete(job))
                return
            self._end_job(job.transactional_id)
            if append_error is not E.NONE:
                log.info("completing the transaction of %s failed with %s; the next coordinator finishes it",
                         job.transactional_id, append_error.name)

        self._append(md, job.coordinator_epoch, job.complete, written, retry_on=E.COORDINATOR_NOT_AVAILABLE)

    def _end_job(self, transactional_id: str) -> None:
        """The id's marker job is over (completed, obsolete, or no longer ours): wake whoever waits for it."""
        job = self._jobs.pop(transactional_id, None)
        if job is not None and job.retry is not None:
            job.retry.cancel()
        for wake in self._waiters.pop(transactional_id, []):
            wake()

    def _wait_for_job(self, transactional_id: str, retry: Callable[[], None], give_up: Callable[[], None]) -> bool:
        """Call ``retry`` when the id's marker job ends, or ``give_up`` after ``add_partitions_wait_ms``; False
        (nothing scheduled) when there is no job or no waiting."""
        wait_ms = self.config.add_partitions_wait_ms
        if wait_ms <= 0 or transactional_id not in self._jobs:
            return False
        settled = False

        def on_end() -> None:
            nonlocal settled
            if not settled:
                settled = True
                timer.cancel()
                retry()

        def on_timeout() -> None:
            nonlocal settled
            if not settled:
                settled = True
                waiting = self._waiters.get(transactional_id, [])
                if on_end in waiting:
                    waiting.remove(on_end)
                give_up()

        timer = self._scheduler.call_later(wait_ms, on_timeout)
        self._waiters.setdefault(transactional_id, []).append(on_end)
        return True

    def pending_markers(self) -> dict[str, frozenset[TopicPartition]]:
        """Transactions whose markers are still being written, and the partitions still missing one."""
        return {t: frozenset(j.remaining) for t, j in self._jobs.items()}

    # -- timers ------------------------------------------------------------------------------------------------------
    def abort_timed_out_transactions(self) -> int:
        """Abort (at a new epoch, fencing the producer) every transaction open longer than its timeout."""
        now = self._now()
        count = 0
        for owned in list(self._owned.values()):
            for md in list(owned.txns.values()):
                if md.pending_transition_in_progress or md.state is not S.ONGOING:
                    continue
                if md.start_timestamp + md.timeout_ms >= now:
                    continue
                count += 1
                transactional_id = md.transactional_id
                log.info("transaction of %s (producer id %d, epoch %d) timed out after %d ms: aborting it",
                         transactional_id, md.producer_id, md.producer_epoch, md.timeout_ms)

                def ended(error: ErrorCode, transactional_id: str = transactional_id) -> None:
                    if error is E.NONE:
                        log.info("rolled back the timed-out transaction of %s", transactional_id)
                    else:
                        log.info("rolling back the timed-out transaction of %s failed: %s", transactional_id,
                                 error.name)

                self._write_prepare(md, owned.coordinator_epoch, md.prepare_fence_and_abort(now), ended)
        return count

    def expire_transactional_ids(self) -> int:
        """Tombstone ids idle for ``transactional.id.expiration.ms`` (one append per partition)."""
        now = self._now()
        horizon = now - self.config.transactional_id_expiration_ms
        expired = 0
        for partition, owned in list(self._owned.items()):
            dying: list[tuple[TransactionMetadata, TxnTransit]] = []
            for md in owned.txns.values():
                if md.pending_transition_in_progress or md.state not in (S.EMPTY, S.COMPLETE_COMMIT,
                                                                         S.COMPLETE_ABORT):
                    continue
                if md.update_timestamp <= horizon and md.producer_epoch != NO_PRODUCER_EPOCH:
                    dying.append((md, md.prepare_dead()))
            if not dying:
                continue
            expired += len(dying)
            epoch = owned.coordinator_epoch

            def written(error: ErrorCode, partition: int = partition, owned: _TxnPartition = owned, epoch: int = epoch,
                        dying: list[tuple[TransactionMetadata, TxnTransit]] = dying) -> None:
                for md, transit in dying:
                    current = owned.txns.get(md.transactional_id)
                    if (error is E.NONE and self._owned.get(partition) is owned and owned.coordinator_epoch == epoch
                            and current is md and md.pending_state is S.DEAD
                            and md.producer_epoch == transit.producer_epoch):
                        log.info("transactional id %s expired", md.transactional_id)
                        del owned.txns[md.transactional_id]
                    else:
                        if error is not E.NONE:
                            log.warning("expiring transactional id %s failed: %s", md.transactional_id, error.name)
                        md.abandon()

            self._writer.append(partition, [(encode_key(md.transactional_id), None) for md, _ in dying],
                                self.config.request_timeout_ms, written)
        return expired
