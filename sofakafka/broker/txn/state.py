"""One transactional id's state machine, as Kafka 2.6's TransactionMetadata runs it, as pure data and functions.

States and their bytes in ``__transaction_state``::

    Empty(0) ──AddPartitions/AddOffsets──▶ Ongoing(1) ──EndTxn(commit)──▶ PrepareCommit(2) ──markers──▶ CompleteCommit(4)
      ▲  ▲                                  │  │ ▲                                                         │
      │  └──────── InitProducerId ◀─────────┼──┼─┴──────────── AddPartitions (next transaction) ◀──────────┤
      │                                      │  └─EndTxn(abort)──▶ PrepareAbort(3) ──markers──▶ CompleteAbort(5)
      │                                      └─InitProducerId / timeout──▶ PrepareEpochFence(7) ──▶ PrepareAbort
      └─ Dead(6): an idle id expiring (never written; a tombstone is)

Every change goes the same way, the way Kafka's ``prepareTransitionTo`` / ``completeTransitionTo`` pair does:

1. a ``prepare_*`` function checks the move against :data:`VALID_PREVIOUS_STATES` (the table below), marks
   the metadata with a *pending* state (which answers CONCURRENT_TRANSACTIONS to anyone else meanwhile) and
   returns a :class:`TxnTransit`, the record the coordinator must append;
2. only once that record is in the log does :meth:`TransactionMetadata.complete` replay it onto the
   metadata; a failed append only clears the pending state (:meth:`TransactionMetadata.abandon`).

So the in-memory state is always what replaying the log gives, except for the previous producer id and epoch
(kept for KIP-360 retries of InitProducerId), which value v0 cannot carry and a reload resets to -1, as in
Kafka 2.6.

One departure in form, not in effect: Kafka fences an ongoing transaction by bumping the epoch *in memory*
first (PrepareEpochFence as a pending state) and remembering a failed write in ``hasFailedEpochFence``. Here
the fence is the PrepareAbort record itself carrying the bumped epoch (``fence=True``), checked against the
table as Ongoing -> PrepareEpochFence -> PrepareAbort; memory changes only when that record is written, so a
failed write needs no flag: the next attempt bumps from the same epoch to the same value.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NoReturn

TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 2**15 - 1


class TransactionState(enum.IntEnum):
    """Kafka's state bytes (TransactionMetadata.byteToState)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """Kafka's case-object name, as tools print it (``PrepareCommit``)."""
        return "".join(word.capitalize() for word in self.name.split("_"))


S = TransactionState

#: new state -> the states it may be entered from (Kafka's TransactionMetadata.validPreviousStates).
VALID_PREVIOUS_STATES: Mapping[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

#: States in which a transaction is open: its partitions may hold undecided data.
PENDING_TRANSACTION_STATES = frozenset({S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT})


def is_valid_transition(old: TransactionState, new: TransactionState) -> bool:
    return old in VALID_PREVIOUS_STATES[new]


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka keeps Short.MaxValue for fencing: an epoch at MaxValue - 1 gets a new producer id instead of a bump."""
    return producer_epoch >= SHORT_MAX - 1


class IllegalTransition(Exception):
    """A transition the table forbids or a completion that does not match what was prepared: a coordinator bug."""


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One transactional id's state as ``__transaction_state`` value v0 holds it (records.py encodes it)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    last_update_timestamp: int
    start_timestamp: int


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """A prepared transition: the record to append, plus what memory keeps beside it.

    ``last_producer_id`` / ``last_producer_epoch`` are not written (value v0 has no place for them);
    ``fence`` marks a PrepareAbort that also bumps the epoch (an InitProducerId or a timeout fencing the
    ongoing transaction)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp: int
    update_timestamp: int
    fence: bool = False

    def log_value(self) -> TxnLogValue:
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                           self.partitions, self.update_timestamp, self.start_timestamp)


@dataclass(slots=True)
class TransactionMetadata:
    """The coordinator's view of one transactional id. Mutated only by :meth:`complete` (and the pending mark)."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp: int
    update_timestamp: int
    pending_state: TransactionState | None = None

    @classmethod
    def new(cls, transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int) -> TransactionMetadata:
        """A transactional id seen for the first time: Empty, no epoch yet (the first InitProducerId makes it 0)."""
        return cls(transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, timeout_ms,
                   S.EMPTY, frozenset(), -1, now_ms)

    @classmethod
    def from_log(cls, transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
        """What a load replays: the record as written, previous producer id and epoch unknown."""
        return cls(transactional_id, value.producer_id, NO_PRODUCER_ID, value.producer_epoch, NO_PRODUCER_EPOCH,
                   value.transaction_timeout_ms, value.state, value.partitions, value.start_timestamp,
                   value.last_update_timestamp)

    def log_value(self) -> TxnLogValue:
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state, self.partitions,
                           self.update_timestamp, self.start_timestamp)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in PENDING_TRANSACTION_STATES

    # -- prepare: check the table, mark pending, return the record -------------------------------------------------
    def _prepare(self, new_state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start_timestamp: int, update_timestamp: int, *,
                 via: TransactionState | None = None) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: preparing {new_state.display_name} while "
                                    f"{self.pending_state.display_name} is pending")
        if producer_id < 0:
            raise IllegalTransition(f"{self.transactional_id}: illegal new producer id {producer_id}")
        if epoch < 0:
            raise IllegalTransition(f"{self.transactional_id}: illegal new producer epoch {epoch}")
        path = [self.state, new_state] if via is None else [self.state, via, new_state]
        for old, new in itertools.pairwise(path):
            if not is_valid_transition(old, new):
                raise IllegalTransition(f"{self.transactional_id}: {new.display_name} cannot follow "
                                        f"{old.display_name}")
        self.pending_state = new_state
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, new_state, partitions,
                          start_timestamp, update_timestamp, fence=via is S.PREPARE_EPOCH_FENCE)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransit | None:
        """InitProducerId on an idle id: the next epoch (Empty). None when the caller's expected epoch is neither
        the current nor the previous one: that producer was fenced (INVALID_PRODUCER_EPOCH)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: no epochs left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump whose answer the producer never got: the same epoch again, no new bump.
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(S.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """The epoch is exhausted: a new producer id at epoch 0."""
        if self.has_pending_transaction:
            raise IllegalTransition(f"{self.transactional_id}: cannot rotate producer ids with a transaction open")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(S.EMPTY, new_producer_id, 0, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added: Iterable[TopicPartition], now_ms: int) -> TxnTransit:
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else self.start_timestamp
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions | frozenset(added), start, now_ms)

    def prepare_abort_or_commit(self, new_state: TransactionState, now_ms: int) -> TxnTransit:
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions, self.start_timestamp, now_ms)

    def prepare_fence_and_abort(self, now_ms: int) -> TxnTransit:
        """Fence the producer of the ongoing transaction (a new InitProducerId, or its timeout) and abort it: a
        PrepareAbort at the next epoch, so no write of the old epoch is accepted any more."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence epoch {SHORT_MAX}")
        return self._prepare(S.PREPARE_ABORT, self.producer_id, self.producer_epoch + 1, NO_PRODUCER_EPOCH,
                             self.timeout_ms, self.partitions, self.start_timestamp, now_ms,
                             via=S.PREPARE_EPOCH_FENCE)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Every marker is written: CompleteCommit or CompleteAbort, with no partitions left."""
        if self.state is S.PREPARE_COMMIT:
            new_state = S.COMPLETE_COMMIT
        elif self.state is S.PREPARE_ABORT:
            new_state = S.COMPLETE_ABORT
        else:
            raise IllegalTransition(f"{self.transactional_id}: nothing to complete in {self.state.display_name}")
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(), self.start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransit:
        """The id expired: a tombstone is written and, once it is, the id is forgotten (never ``complete``d)."""
        return self._prepare(S.DEAD, self.producer_id, max(self.producer_epoch, 0), self.last_producer_epoch,
                             self.timeout_ms, frozenset(), self.start_timestamp, self.update_timestamp)

    # -- complete: replay the written record ---------------------------------------------------------------------
    def abandon(self) -> None:
        """The prepared record was not written: nothing changed, others may go ahead."""
        self.pending_state = None

    def complete(self, transit: TxnTransit) -> None:
        """Replay ``transit`` (now in the log) onto this metadata, checking it is what was prepared."""
        if self.pending_state is None or self.pending_state is not transit.state:
            self._fail(transit, "it was not the pending transition")
        new = transit.state
        same_producer = transit.producer_id == self.producer_id and transit.producer_epoch == self.producer_epoch
        if new is S.EMPTY:
            bump = transit.producer_epoch == self.producer_epoch + 1 or (
                transit.producer_epoch == 0 and transit.producer_id != self.producer_id)
            if (transit.producer_epoch != self.producer_epoch and not bump) or transit.partitions or \
                    transit.start_timestamp != -1:
                self._fail(transit, "not an epoch bump of an idle id")
            self.timeout_ms = transit.timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
            # Kafka leaves the previous start time in memory here while the record says -1; replaying the record
            # keeps memory and a reload identical (an Empty id's start time is never read).
            self.start_timestamp = transit.start_timestamp
        elif new is S.ONGOING:
            if not same_producer or not self.partitions <= transit.partitions or self.timeout_ms != transit.timeout_ms:
                self._fail(transit, "partitions may only be added by the same producer")
            self.start_timestamp = transit.start_timestamp
            self.partitions = transit.partitions
        elif new in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            fenced = transit.fence and transit.producer_id == self.producer_id and \
                transit.producer_epoch == self.producer_epoch + 1
            if not (same_producer or fenced) or self.partitions != transit.partitions or \
                    self.timeout_ms != transit.timeout_ms or self.start_timestamp != transit.start_timestamp:
                self._fail(transit, "a transaction ends with the partitions it has")
            if fenced:
                self.producer_epoch = transit.producer_epoch
                self.last_producer_epoch = transit.last_producer_epoch
        elif new in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            if not same_producer or self.timeout_ms != transit.timeout_ms or transit.start_timestamp == -1:
                self._fail(transit, "only the prepared transaction completes")
            self.start_timestamp = transit.start_timestamp
            self.partitions = frozenset()
        else:
            # PrepareEpochFence is only ever a step on the way to PrepareAbort; Dead ends in removal.
            self._fail(transit, f"{new.display_name} is never completed")
        self.update_timestamp = transit.update_timestamp
        self.pending_state = None
        self.state = new

    def _fail(self, transit: TxnTransit, why: str) -> NoReturn:
        raise IllegalTransition(f"{self.transactional_id}: transition from {self} to {transit} failed: {why}")
