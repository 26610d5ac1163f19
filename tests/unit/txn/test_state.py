"""The per-id state machine: Kafka's transition table, prepare/complete discipline and epoch edges."""

from __future__ import annotations

import itertools

import pytest

from sofakafka.broker.txn.state import (
    NO_PRODUCER_EPOCH,
    SHORT_MAX,
    VALID_PREVIOUS_STATES,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
    is_valid_transition,
)

S = TransactionState

# Kafka 2.6's TransactionMetadata.validPreviousStates, spelled out pair by pair.
ALLOWED = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_ABORT, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


@pytest.mark.parametrize(("old", "new"), list(itertools.product(S, S)))
def test_the_table_is_kafkas(old: TransactionState, new: TransactionState) -> None:
    assert is_valid_transition(old, new) == ((old, new) in ALLOWED)


def test_every_state_has_a_row() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(S)


def test_state_bytes_and_names() -> None:
    assert [int(s) for s in S] == list(range(8))
    assert S.PREPARE_EPOCH_FENCE.display_name == "PrepareEpochFence"
    assert S.COMPLETE_COMMIT.display_name == "CompleteCommit"


@pytest.mark.parametrize(("epoch", "exhausted"), [(SHORT_MAX - 2, False), (SHORT_MAX - 1, True), (SHORT_MAX, True)])
def test_epoch_exhaustion_edge(epoch: int, exhausted: bool) -> None:
    assert is_epoch_exhausted(epoch) is exhausted


def _md(state: TransactionState = S.EMPTY, epoch: int = 0) -> TransactionMetadata:
    md = TransactionMetadata.new("t", 10, 1000, now_ms=100)
    md.producer_epoch = epoch
    md.state = state
    if state is not S.EMPTY:
        md.partitions = frozenset({("a", 0)})
        md.start_timestamp = 50
    return md


def test_memory_changes_only_when_the_prepared_record_is_completed() -> None:
    md = _md()
    transit = md.prepare_add_partitions([("a", 0)], now_ms=200)
    assert md.pending_state is S.ONGOING and md.state is S.EMPTY and not md.partitions
    with pytest.raises(IllegalTransition, match="pending"):
        md.prepare_add_partitions([("b", 0)], now_ms=201)
    md.complete(transit)
    assert md.state is S.ONGOING and md.partitions == {("a", 0)} and md.start_timestamp == 200
    assert md.pending_state is None and md.update_timestamp == 200


def test_abandon_leaves_the_state_as_it_was() -> None:
    md = _md()
    md.prepare_add_partitions([("a", 0)], now_ms=200)
    md.abandon()
    assert md.state is S.EMPTY and md.pending_state is None and not md.partitions


def test_a_completion_that_was_not_prepared_is_refused() -> None:
    md = _md(S.ONGOING)
    other = _md(S.ONGOING).prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=300)
    with pytest.raises(IllegalTransition, match="pending"):
        md.complete(other)


def test_forbidden_moves_are_refused_before_anything_is_written() -> None:
    with pytest.raises(IllegalTransition, match="PrepareCommit cannot follow Empty"):
        _md(S.EMPTY).prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=1)
    with pytest.raises(IllegalTransition, match="PrepareEpochFence cannot follow Empty"):
        _md(S.EMPTY).prepare_fence_and_abort(now_ms=1)
    with pytest.raises(IllegalTransition, match="nothing to complete"):
        _md(S.ONGOING).prepare_complete(now_ms=1)


def test_fence_aborts_at_the_next_epoch() -> None:
    md = _md(S.ONGOING, epoch=4)
    transit = md.prepare_fence_and_abort(now_ms=500)
    assert transit.state is S.PREPARE_ABORT and transit.producer_epoch == 5 and transit.fence
    md.complete(transit)
    assert md.state is S.PREPARE_ABORT and md.producer_epoch == 5 and md.last_producer_epoch == NO_PRODUCER_EPOCH
    assert md.partitions == {("a", 0)}


def test_fence_at_the_last_epoch_is_impossible() -> None:
    with pytest.raises(IllegalTransition):
        _md(S.ONGOING, epoch=SHORT_MAX).prepare_fence_and_abort(now_ms=1)


def test_an_unfenced_prepare_may_not_change_the_epoch() -> None:
    md = _md(S.ONGOING, epoch=4)
    transit = md.prepare_abort_or_commit(S.PREPARE_ABORT, now_ms=5)
    md.producer_epoch = 3  # as if memory had moved under the prepared record
    with pytest.raises(IllegalTransition):
        md.complete(transit)


def test_increment_epoch_rules() -> None:
    md = _md(S.COMPLETE_COMMIT, epoch=4)
    md.last_producer_epoch = 3
    # no expectation: bump, forget the previous
    t = md.prepare_increment_producer_epoch(100, None, now_ms=9)
    assert t is not None and (t.producer_epoch, t.last_producer_epoch, t.state) == (5, NO_PRODUCER_EPOCH, S.EMPTY)
    md.abandon()
    # the current epoch: bump, remember the previous
    t = md.prepare_increment_producer_epoch(100, 4, now_ms=9)
    assert t is not None and (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    md.abandon()
    # the previous epoch: a retry, same epoch again
    t = md.prepare_increment_producer_epoch(100, 3, now_ms=9)
    assert t is not None and (t.producer_epoch, t.last_producer_epoch) == (4, 3)
    md.abandon()
    # anything else: fenced
    assert md.prepare_increment_producer_epoch(100, 2, now_ms=9) is None
    assert md.pending_state is None


def test_rotation_starts_a_new_producer_id_at_epoch_0() -> None:
    md = _md(S.COMPLETE_ABORT, epoch=SHORT_MAX - 1)
    t = md.prepare_producer_id_rotation(77, 100, now_ms=9, record_last_epoch=True)
    md.complete(t)
    assert (md.producer_id, md.producer_epoch, md.last_producer_id, md.last_producer_epoch) == (77, 0, 10,
                                                                                                 SHORT_MAX - 1)


def test_completion_clears_the_partitions_and_keeps_the_start() -> None:
    md = _md(S.ONGOING)
    md.complete(md.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=60))
    md.complete(md.prepare_complete(now_ms=70))
    assert md.state is S.COMPLETE_COMMIT and not md.partitions and md.start_timestamp == 50
    assert md.update_timestamp == 70


def test_dead_is_never_completed() -> None:
    md = _md(S.COMPLETE_COMMIT)
    md.partitions = frozenset()
    transit = md.prepare_dead()
    with pytest.raises(IllegalTransition, match="never completed"):
        md.complete(transit)


def test_loading_replays_the_record_and_forgets_the_previous_epoch() -> None:
    md = _md(S.ONGOING, epoch=2)
    md.last_producer_epoch = 1
    loaded = TransactionMetadata.from_log("t", md.log_value())
    assert loaded.log_value() == md.log_value()
    assert loaded.last_producer_epoch == NO_PRODUCER_EPOCH
