"""The transaction coordinator driven request by request: Kafka 2.6's answers, the records it writes, the markers."""

from __future__ import annotations

import pytest

from sofakafka.broker.txn.records import decode_key, decode_value
from sofakafka.broker.txn.state import SHORT_MAX, TransactionState
from sofakafka.protocol.errors import ErrorCode as E
from tests.unit.txn.harness import NUM_PARTITIONS, TIMEOUT_MS, Harness, Marker, done

S = TransactionState
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def states_written(h: Harness, txn_id: str) -> list[S | None]:
    p = h.coordinator.partition_for(txn_id)
    out: list[S | None] = []
    for key, value in h.log.partitions[p]:
        assert key is not None
        if decode_key(key) == txn_id:
            decoded = decode_value(value)
            out.append(None if decoded is None else decoded.state)
    return out


def begin(h: Harness, txn_id: str = "t", *tps: tuple[str, int]) -> tuple[int, int]:
    error, pid, epoch = h.init(txn_id)
    assert error is E.NONE
    assert h.add(txn_id, pid, epoch, *(tps or (A0,))) is E.NONE
    return pid, epoch


# -- InitProducerId -------------------------------------------------------------------------------------------------

def test_a_new_transactional_id_gets_a_producer_id_at_epoch_0_written_as_empty() -> None:
    h = Harness()
    error, pid, epoch = h.init("t")
    assert (error, epoch) == (E.NONE, 0) and pid > 0
    assert states_written(h, "t") == [S.EMPTY]
    md = h.coordinator.transaction("t")
    assert md is not None and md.producer_id == pid and md.timeout_ms == TIMEOUT_MS


def test_init_again_bumps_the_epoch_and_keeps_the_producer_id() -> None:
    h = Harness()
    _, pid, _ = h.init("t")
    assert h.init("t") == (E.NONE, pid, 1)
    assert h.init("t") == (E.NONE, pid, 2)


def test_null_transactional_id_is_an_idempotent_producer_and_writes_nothing() -> None:
    h = Harness()
    error, pid, epoch = h.init(None)
    assert (error, epoch) == (E.NONE, 0) and pid > 0
    assert h.log.appends == 0


def test_empty_transactional_id_is_an_invalid_request() -> None:
    h = Harness()
    assert h.init("")[0] is E.INVALID_REQUEST
    assert h.log.appends == 0


@pytest.mark.parametrize(("timeout", "error"), [(-1, E.INVALID_TRANSACTION_TIMEOUT), (0, E.INVALID_TRANSACTION_TIMEOUT),
                                                (1, E.NONE), (900_000, E.NONE),
                                                (900_001, E.INVALID_TRANSACTION_TIMEOUT)])
def test_transaction_timeout_must_be_positive_and_at_most_the_maximum(timeout: int, error: E) -> None:
    h = Harness()
    assert h.init("t", timeout_ms=timeout)[0] is error
    assert (h.log.appends == 0) == (error is not E.NONE)


def test_ids_of_partitions_not_owned_or_loading_are_refused() -> None:
    h = Harness()
    p = h.coordinator.partition_for("t")
    h.coordinator.unload_partition(p)
    assert h.init("t")[0] is E.NOT_COORDINATOR
    h.coordinator.begin_loading(p, 5)
    assert h.init("t")[0] is E.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.load_partition(p, 4, [])  # a stale load is ignored
    assert h.init("t")[0] is E.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.load_partition(p, 5, [])
    assert h.init("t")[0] is E.NONE


def test_a_failed_first_write_forgets_the_new_id() -> None:
    h = Harness()
    h.log.fail_next = E.NOT_ENOUGH_REPLICAS
    assert h.init("t")[0] is E.COORDINATOR_NOT_AVAILABLE
    assert h.coordinator.transaction("t") is None
    assert h.init("t")[:3:2] == (E.NONE, 0)


@pytest.mark.parametrize(("append_error", "answer"), [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE), (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                                           E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE), (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR), (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR), (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR)])
def test_append_errors_map_to_coordinator_errors_and_change_nothing(append_error: E, answer: E) -> None:
    h = Harness()
    pid, epoch = begin(h)
    h.log.fail_next = append_error
    assert h.add("t", pid, epoch, B0) is answer
    md = h.coordinator.transaction("t")
    assert md is not None and md.partitions == {A0} and md.pending_state is None


# -- KIP-360 ----------------------------------------------------------------------------------------------------------

def test_kip_360_bump_with_the_current_epoch_and_retry_with_the_previous() -> None:
    h = Harness()
    _, pid, _ = h.init("t")
    assert h.init("t", expected=(pid, 0)) == (E.NONE, pid, 1)
    # The answer was lost; the producer asks again with what it had: the same epoch, no second bump.
    assert h.init("t", expected=(pid, 0)) == (E.NONE, pid, 1)
    # Another producer instance (no expectation) fences it.
    assert h.init("t") == (E.NONE, pid, 2)
    assert h.init("t", expected=(pid, 0))[0] is E.INVALID_PRODUCER_EPOCH
    assert h.init("t", expected=(pid + 12345, 2))[0] is E.INVALID_PRODUCER_EPOCH


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    h = Harness()
    _, pid, _ = h.init("t")
    md = h.coordinator.transaction("t")
    assert md is not None
    md.producer_epoch = SHORT_MAX - 2
    error, pid2, epoch = h.init("t")
    assert (error, pid2, epoch) == (E.NONE, pid, SHORT_MAX - 1)
    error, pid3, epoch = h.init("t", expected=(pid, SHORT_MAX - 1))
    assert error is E.NONE and pid3 != pid and epoch == 0
    # A retry of that rotation with the old id and its exhausted epoch is recognised, not fenced.
    assert h.init("t", expected=(pid, SHORT_MAX - 1))[0] is E.NONE


# -- AddPartitionsToTxn ---------------------------------------------------------------------------------------------

def test_add_partitions_errors_follow_kafkas_order() -> None:
    h = Harness()
    assert h.add("unknown", 1, 0, A0) is E.INVALID_PRODUCER_ID_MAPPING
    _, pid, epoch = h.init("t")
    assert h.add("t", pid + 1, epoch, A0) is E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("t", pid, epoch + 1, A0) is E.INVALID_PRODUCER_EPOCH
    assert h.add("t", pid, epoch - 1, A0) is E.INVALID_PRODUCER_EPOCH
    assert h.add("", pid, epoch, A0) is E.INVALID_REQUEST
    appends = h.log.appends
    assert h.add("t", pid, epoch, A0) is E.NONE
    assert h.log.appends == appends + 1
    assert h.add("t", pid, epoch, A0) is E.NONE  # already in: answered without a write
    assert h.log.appends == appends + 1
    assert h.add("t", pid, epoch, A1, B0) is E.NONE
    md = h.coordinator.transaction("t")
    assert md is not None and md.state is S.ONGOING and md.partitions == {A0, A1, B0}
    assert states_written(h, "t") == [S.EMPTY, S.ONGOING, S.ONGOING]


def test_concurrent_requests_while_a_write_is_in_flight() -> None:
    h = Harness()
    _, pid, epoch = h.init("t")
    h.log.hold = True
    pending = h.coordinator.add_partitions("t", pid, epoch, [A0])
    assert not pending.done()
    assert h.add("t", pid, epoch, A1) is E.CONCURRENT_TRANSACTIONS
    assert h.end("t", pid, epoch, True) is E.CONCURRENT_TRANSACTIONS
    assert h.init("t")[0] is E.CONCURRENT_TRANSACTIONS
    h.log.hold = False
    h.log.release()
    assert done(pending) is E.NONE


# -- EndTxn and markers -----------------------------------------------------------------------------------------------

def test_end_txn_without_partitions_is_invalid_txn_state_and_writes_nothing() -> None:
    h = Harness()
    _, pid, epoch = h.init("t")
    appends = h.log.appends
    assert h.end("t", pid, epoch, True) is E.INVALID_TXN_STATE
    assert h.end("t", pid, epoch, False) is E.INVALID_TXN_STATE
    assert h.log.appends == appends and h.markers.sends == 0


def test_end_txn_errors() -> None:
    h = Harness()
    assert h.end("unknown", 1, 0, True) is E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = begin(h)
    assert h.end("t", pid + 1, epoch, True) is E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("t", pid, epoch + 1, True) is E.INVALID_PRODUCER_EPOCH
    assert h.end("t", pid, epoch - 1, True) is E.INVALID_PRODUCER_EPOCH
    assert h.end("", pid, epoch, True) is E.INVALID_REQUEST


def test_commit_writes_prepare_then_markers_then_complete() -> None:
    h = Harness()
    pid, epoch = begin(h, "t", A0, B0)
    h.markers.auto = False
    assert h.end("t", pid, epoch, True) is E.NONE
    assert states_written(h, "t")[-1] is S.PREPARE_COMMIT
    # Markers in flight: everything the producer tries next is told to wait.
    assert h.add("t", pid, epoch, A1) is E.CONCURRENT_TRANSACTIONS
    assert h.end("t", pid, epoch, True) is E.CONCURRENT_TRANSACTIONS
    assert h.init("t", expected=(pid, epoch))[0] is E.CONCURRENT_TRANSACTIONS
    assert h.coordinator.pending_markers() == {"t": frozenset({A0, B0})}
    h.markers.deliver()
    assert h.markers.written[A0] == [Marker(pid, epoch, 0, True)] == h.markers.written[B0]
    assert states_written(h, "t")[-1] is S.COMPLETE_COMMIT
    assert h.coordinator.pending_markers() == {}
    # A retried commit of a completed commit is fine; an abort of it is not.
    assert h.end("t", pid, epoch, True) is E.NONE
    assert h.end("t", pid, epoch, False) is E.INVALID_TXN_STATE
    # The next transaction starts from CompleteCommit.
    assert h.add("t", pid, epoch, A1) is E.NONE


def test_add_partitions_can_wait_for_the_previous_transaction_to_complete() -> None:
    h = Harness(add_partitions_wait_ms=50)
    pid, epoch = begin(h, "t", A0)
    h.markers.auto = False
    assert h.end("t", pid, epoch, True) is E.NONE
    waiting = h.coordinator.add_partitions("t", pid, epoch, [B0])
    assert not waiting.done()
    h.markers.deliver()  # markers in, CompleteCommit written: the waiting request goes ahead
    assert done(waiting) is E.NONE
    md = h.coordinator.transaction("t")
    assert md is not None and md.state is S.ONGOING and md.partitions == {B0}


def test_add_partitions_waits_at_most_its_bound() -> None:
    h = Harness(add_partitions_wait_ms=50)
    pid, epoch = begin(h, "t", A0)
    h.markers.auto = False
    assert h.end("t", pid, epoch, True) is E.NONE
    waiting = h.coordinator.add_partitions("t", pid, epoch, [B0])
    h.time.advance(49)
    assert not waiting.done()
    h.time.advance(1)
    assert done(waiting) is E.CONCURRENT_TRANSACTIONS
    h.markers.deliver()
    assert h.add("t", pid, epoch, B0) is E.NONE
    # A fenced producer does not wait: it is told at once.
    assert h.add("t", pid, epoch + 5, B0) is E.INVALID_PRODUCER_EPOCH


def test_waiting_requests_learn_of_an_unload() -> None:
    h = Harness(add_partitions_wait_ms=50)
    pid, epoch = begin(h, "t", A0)
    h.markers.auto = False
    assert h.end("t", pid, epoch, True) is E.NONE
    waiting = h.coordinator.add_partitions("t", pid, epoch, [B0])
    h.coordinator.unload_partition(h.coordinator.partition_for("t"))
    assert done(waiting) is E.NOT_COORDINATOR


def test_abort_retry_and_wrong_outcome_while_preparing() -> None:
    h = Harness()
    pid, epoch = begin(h)
    h.markers.auto = False
    assert h.end("t", pid, epoch, False) is E.NONE
    md = h.coordinator.transaction("t")
    assert md is not None and md.state is S.PREPARE_ABORT
    md.pending_state = None  # look at the state's own answer, as after a reload
    assert h.end("t", pid, epoch, False) is E.CONCURRENT_TRANSACTIONS
    assert h.end("t", pid, epoch, True) is E.INVALID_TXN_STATE


def test_markers_are_retried_until_written() -> None:
    h = Harness()
    pid, epoch = begin(h, "t", A0, B0)
    h.markers.errors[A0] = [E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS]
    assert h.end("t", pid, epoch, True) is E.NONE
    assert h.coordinator.pending_markers() == {"t": frozenset({A0})}
    assert h.markers.written[B0] and not h.markers.written[A0]
    h.time.advance(h.config.marker_retry_backoff_ms - 1)
    assert not h.markers.written[A0]
    h.time.advance(1)
    assert not h.markers.written[A0]  # the second attempt failed too
    h.time.advance(h.config.marker_retry_backoff_ms)
    assert h.markers.written[A0] == [Marker(pid, epoch, 0, True)]
    assert len(h.markers.written[B0]) == 1  # only the missing partition was sent again
    assert states_written(h, "t")[-1] is S.COMPLETE_COMMIT


def test_a_newer_epoch_at_a_partition_stops_the_markers() -> None:
    h = Harness()
    pid, epoch = begin(h, "t", A0)
    h.markers.errors[A0] = [E.INVALID_PRODUCER_EPOCH]
    assert h.end("t", pid, epoch, True) is E.NONE
    h.time.advance(10 * h.config.marker_retry_backoff_ms)
    assert not h.markers.written[A0]
    assert h.coordinator.pending_markers() == {}
    assert states_written(h, "t")[-1] is S.PREPARE_COMMIT


def test_complete_write_is_retried_while_the_log_is_unavailable() -> None:
    h = Harness()
    pid, epoch = begin(h)
    h.markers.auto = False
    assert h.end("t", pid, epoch, True) is E.NONE
    h.log.fail_next = E.NOT_ENOUGH_REPLICAS
    h.markers.deliver()
    assert states_written(h, "t")[-1] is S.PREPARE_COMMIT
    assert h.add("t", pid, epoch, A0) is E.CONCURRENT_TRANSACTIONS
    h.time.advance(h.config.marker_retry_backoff_ms)
    assert states_written(h, "t")[-1] is S.COMPLETE_COMMIT
    assert h.add("t", pid, epoch, A0) is E.NONE


# -- fencing ----------------------------------------------------------------------------------------------------------

def test_init_while_a_transaction_is_open_aborts_it_at_a_new_epoch() -> None:
    h = Harness()
    pid, epoch = begin(h, "t", A0)
    assert h.init("t") [0] is E.CONCURRENT_TRANSACTIONS
    assert h.markers.written[A0] == [Marker(pid, epoch + 1, 0, False)]
    assert states_written(h, "t")[-2:] == [S.PREPARE_ABORT, S.COMPLETE_ABORT]
    # The old producer is fenced everywhere.
    assert h.add("t", pid, epoch, A1) is E.INVALID_PRODUCER_EPOCH
    assert h.end("t", pid, epoch, True) is E.INVALID_PRODUCER_EPOCH
    # The new one retries and gets the epoch after the fencing one.
    assert h.init("t") == (E.NONE, pid, epoch + 2)


def test_timed_out_transactions_are_aborted_at_the_edge() -> None:
    h = Harness(abort_timed_out_transactions_interval_ms=1000)
    _, pid, epoch = h.init("t", timeout_ms=5000)
    assert h.add("t", pid, epoch, A0) is E.NONE
    md = h.coordinator.transaction("t")
    assert md is not None
    started = md.start_timestamp
    h.time.advance(5000)  # now == start + timeout: not yet timed out
    assert h.time.now_ms() == started + 5000
    assert h.coordinator.abort_timed_out_transactions() == 0
    h.time.advance(1)
    assert h.coordinator.abort_timed_out_transactions() == 1
    assert h.markers.written[A0] == [Marker(pid, epoch + 1, 0, False)]
    assert md.state is S.COMPLETE_ABORT and md.producer_epoch == epoch + 1
    assert h.end("t", pid, epoch, True) is E.INVALID_PRODUCER_EPOCH


def test_the_abort_timer_runs_on_its_interval() -> None:
    h = Harness(abort_timed_out_transactions_interval_ms=1000)
    _, pid, epoch = h.init("t", timeout_ms=1500)
    assert h.add("t", pid, epoch, A0) is E.NONE
    h.time.advance(1999)  # the first tick (at 1000) found it within its timeout
    assert not h.markers.written[A0]
    h.time.advance(1)  # the second tick (at 2000) sees start + 1500 < now
    assert h.markers.written[A0] == [Marker(pid, epoch + 1, 0, False)]


def test_idle_ids_expire_at_the_edge_and_are_tombstoned() -> None:
    h = Harness(transactional_id_expiration_ms=10_000)
    h.init("t")
    md = h.coordinator.transaction("t")
    assert md is not None
    h.time.advance(9_999)
    assert h.coordinator.expire_transactional_ids() == 0
    h.time.advance(1)
    assert h.coordinator.expire_transactional_ids() == 1
    assert h.coordinator.transaction("t") is None
    assert states_written(h, "t") == [S.EMPTY, None]


def test_open_transactions_never_expire() -> None:
    h = Harness(transactional_id_expiration_ms=10_000)
    _, pid, epoch = h.init("t", timeout_ms=900_000)
    assert h.add("t", pid, epoch, A0) is E.NONE
    h.time.advance(100_000)
    assert h.coordinator.expire_transactional_ids() == 0
    assert h.coordinator.transaction("t") is not None


# -- failover ---------------------------------------------------------------------------------------------------------

def test_a_new_coordinator_finishes_markers_the_old_one_left() -> None:
    h = Harness()
    pid, epoch = begin(h, "t", A0, B0)
    h.markers.auto = False
    assert h.end("t", pid, epoch, True) is E.NONE
    h.failover()  # the markers never left
    assert h.coordinator.pending_markers() == {"t": frozenset({A0, B0})}
    h.markers.deliver()
    assert h.markers.written[A0] == [Marker(pid, epoch, 1, True)]
    md = h.coordinator.transaction("t")
    assert md is not None and md.state is S.COMPLETE_COMMIT
    assert h.end("t", pid, epoch, True) is E.NONE


def test_a_reload_replays_exactly_what_was_written() -> None:
    h = Harness()
    pid, epoch = begin(h, "t", A0, B0)
    begin(h, "u", A1)
    h.init("v")
    before = {t: md.log_value() for t, md in h.coordinator.transactions().items()}
    h.failover()
    assert {t: md.log_value() for t, md in h.coordinator.transactions().items()} == before
    assert h.add("t", pid, epoch, A1) is E.NONE


def test_answers_of_a_deposed_coordinator_say_not_coordinator() -> None:
    h = Harness()
    pid, epoch = begin(h)
    h.log.hold = True
    pending = h.coordinator.end_transaction("t", pid, epoch, True)
    h.coordinator.unload_partition(h.coordinator.partition_for("t"))
    h.log.hold = False
    h.log.release()
    assert done(pending) is E.NOT_COORDINATOR
    assert h.markers.sends == 0


def test_every_partition_is_served() -> None:
    h = Harness()
    ids = [f"id-{i}" for i in range(40)]
    assert {h.coordinator.partition_for(t) for t in ids} == set(range(NUM_PARTITIONS))
    for t in ids:
        assert h.init(t)[0] is E.NONE
