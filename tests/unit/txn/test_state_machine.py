"""A hypothesis state machine drives the transaction coordinator through random producers, failures and time.

Producer instances (several per transactional id, so they fence each other) initialise, add partitions, write
data where the coordinator verifies the partition belongs to their transaction, and commit or abort; meanwhile
appends to ``__transaction_state`` fail, partition leaders answer markers with retriable errors or hold them,
time jumps past transaction timeouts and the coordinator fails over to a new one loaded from the log.

Checked after every step:

* the coordinator's memory is the log replayed: each id's metadata equals its last record, and it serves
  exactly the ids whose last record is not a tombstone;
* only the latest instance of an id gets NONE from AddPartitionsToTxn or EndTxn (fencing);
* every marker a partition received was decided by a PrepareCommit/PrepareAbort record naming that partition,
  producer id and epoch.

And once everything settles (failures cleared, markers delivered, time past every timeout):

* no transaction is left half done: nothing pending, no marker job open;
* no data hangs: every data batch is followed, at its partition, by a marker of its producer at its epoch or a
  later one (so the last stable offset moves);
* a transaction the producer was told committed has COMMIT as the first marker after each of its batches, one
  told aborted has ABORT.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sofakafka.broker.txn.records import decode_key, decode_value
from sofakafka.broker.txn.state import TopicPartition, TransactionState
from sofakafka.protocol.errors import ErrorCode as E
from tests.unit.txn.harness import Harness

S = TransactionState
IDS = ["alpha", "beta"]
TPS: list[TopicPartition] = [("a", 0), ("a", 1), ("b", 0)]
TIMEOUT_MS = 5_000


@dataclass
class Instance:
    txn_id: str
    pid: int = -1
    epoch: int = -1
    added: set[TopicPartition] = field(default_factory=set)
    token: int = 0


@dataclass(frozen=True)
class Data:
    pid: int
    epoch: int
    token: tuple[int, int]


class TransactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(abort_timed_out_transactions_interval_ms=1_000, transactional_id_expiration_ms=3_600_000)
        self.instances = [Instance(IDS[i % len(IDS)]) for i in range(4)]
        self.latest_grant: dict[str, tuple[int, int]] = {}
        # Partition logs as the leaders hold them: data batches and markers in append order.
        self.partition_log: dict[TopicPartition, list[Data | tuple[int, int, bool]]] = {tp: [] for tp in TPS}
        self.outcome: dict[tuple[int, int], bool] = {}
        self._seen_markers = {tp: 0 for tp in TPS}

    # -- plumbing --------------------------------------------------------------------------------------------
    def _collect_markers(self) -> None:
        for tp in TPS:
            written = self.h.markers.written[tp]
            for m in written[self._seen_markers[tp]:]:
                self.partition_log[tp].append((m.producer_id, m.producer_epoch, m.commit))
            self._seen_markers[tp] = len(written)

    def _records(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        for p in sorted(self.h.log.partitions):
            for key, value in self.h.log.partitions[p]:
                assert key is not None
                out.append((decode_key(key), decode_value(value)))
        return out

    # -- producers ----------------------------------------------------------------------------------------------
    @rule(slot=st.integers(0, 3), kip360=st.booleans())
    def init(self, slot: int, kip360: bool) -> None:
        inst = self.instances[slot]
        expected = (inst.pid, inst.epoch) if kip360 and inst.pid >= 0 else None
        error, pid, epoch = self.h.init(inst.txn_id, TIMEOUT_MS, expected)
        self._collect_markers()
        assert error in (E.NONE, E.CONCURRENT_TRANSACTIONS, E.INVALID_PRODUCER_EPOCH, E.COORDINATOR_NOT_AVAILABLE,
                         E.NOT_COORDINATOR, E.UNKNOWN_SERVER_ERROR), error
        if error is E.NONE:
            previous = self.latest_grant.get(inst.txn_id)
            if previous is not None and previous[0] == pid:
                assert epoch >= previous[1], "epochs never go back"
            self.latest_grant[inst.txn_id] = (pid, epoch)
            inst.pid, inst.epoch, inst.added = pid, epoch, set()
            inst.token += 1

    @precondition(lambda self: any(i.pid >= 0 for i in self.instances))
    @rule(slot=st.integers(0, 3), tps=st.sets(st.sampled_from(TPS), min_size=1, max_size=2))
    def add(self, slot: int, tps: set[TopicPartition]) -> None:
        inst = self.instances[slot]
        if inst.pid < 0:
            return
        error = self.h.add(inst.txn_id, inst.pid, inst.epoch, *tps)
        if error is E.NONE:
            assert self.latest_grant[inst.txn_id] == (inst.pid, inst.epoch), "a fenced producer added partitions"
            inst.added |= tps

    @precondition(lambda self: any(i.pid >= 0 for i in self.instances))
    @rule(slot=st.integers(0, 3), tp=st.sampled_from(TPS))
    def produce(self, slot: int, tp: TopicPartition) -> None:
        """The partition leader asks the coordinator before accepting the batch (KIP-890-style verification)."""
        inst = self.instances[slot]
        if inst.pid < 0:
            return
        verdict = self.h.coordinator.verify_partitions(inst.txn_id, inst.pid, inst.epoch, [tp])[tp]
        md = self.h.coordinator.transaction(inst.txn_id)
        if verdict is E.NONE:
            assert md is not None and md.state is S.ONGOING and tp in md.partitions
            assert (md.producer_id, md.producer_epoch) == (inst.pid, inst.epoch)
            self.partition_log[tp].append(Data(inst.pid, inst.epoch, (slot, inst.token)))
        else:
            assert md is None or tp not in md.partitions or md.state is not S.ONGOING or \
                (md.producer_id, md.producer_epoch) != (inst.pid, inst.epoch) or md.pending_state is not None

    @precondition(lambda self: any(i.pid >= 0 for i in self.instances))
    @rule(slot=st.integers(0, 3), commit=st.booleans())
    def end(self, slot: int, commit: bool) -> None:
        inst = self.instances[slot]
        if inst.pid < 0:
            return
        md = self.h.coordinator.transaction(inst.txn_id)
        was_open = md is not None and md.state is S.ONGOING and md.pending_state is None
        error = self.h.end(inst.txn_id, inst.pid, inst.epoch, commit)
        self._collect_markers()
        if error is E.NONE:
            assert self.latest_grant[inst.txn_id] == (inst.pid, inst.epoch), "a fenced producer ended a transaction"
            if was_open:
                self.outcome[(slot, inst.token)] = commit
            inst.token += 1
            inst.added = set()

    # -- the world -----------------------------------------------------------------------------------------------
    @rule(ms=st.integers(1, 3 * TIMEOUT_MS))
    def time_passes(self, ms: int) -> None:
        self.h.time.advance(ms)
        self._collect_markers()

    @rule(error=st.sampled_from([E.NOT_ENOUGH_REPLICAS, E.NOT_LEADER_OR_FOLLOWER, E.REQUEST_TIMED_OUT]))
    def next_append_fails(self, error: E) -> None:
        self.h.log.fail_next = error

    @rule(tp=st.sampled_from(TPS), error=st.sampled_from([E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                                                          E.REQUEST_TIMED_OUT]))
    def leader_refuses_a_marker(self, tp: TopicPartition, error: E) -> None:
        self.h.markers.errors[tp].append(error)

    @rule(auto=st.booleans())
    def markers_flow(self, auto: bool) -> None:
        self.h.markers.auto = auto
        if auto:
            self.h.markers.deliver()
        self._collect_markers()

    @rule()
    def coordinator_fails_over(self) -> None:
        self.h.failover()
        self._collect_markers()

    @rule()
    def settle(self) -> None:
        h = self.h
        h.log.fail_next = None
        h.markers.errors.clear()
        h.markers.auto = True
        h.markers.deliver()
        for _ in range(4):
            h.time.advance(2 * TIMEOUT_MS)
            h.markers.deliver()
        self._collect_markers()
        c = h.coordinator
        assert c.pending_markers() == {}
        assert all(md.pending_state is None and md.state is not S.ONGOING for md in c.transactions().values())
        for tp, entries in self.partition_log.items():
            for i, entry in enumerate(entries):
                if not isinstance(entry, Data):
                    continue
                later = [m for m in entries[i + 1:] if isinstance(m, tuple) and m[0] == entry.pid]
                assert later and later[0][1] >= entry.epoch, f"data {entry} at {tp} hangs: no marker after it"
                decided = self.outcome.get(entry.token)
                if decided is not None:
                    assert later[0][2] == decided, f"{entry} at {tp}: told {decided}, marker says {later[0][2]}"

    # -- invariants ----------------------------------------------------------------------------------------------
    @invariant()
    def memory_is_the_log_replayed(self) -> None:
        last: dict[str, object] = {}
        for txn_id, value in self._records():
            last[txn_id] = value
        cached = self.h.coordinator.transactions()
        assert set(cached) == {t for t, v in last.items() if v is not None}
        for txn_id, md in cached.items():
            assert md.log_value() == last[txn_id]

    @invariant()
    def every_marker_was_decided(self) -> None:
        decisions = set()
        for _, value in self._records():
            if value is not None:
                v = value
                assert hasattr(v, "state")
                if v.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    for tp in v.partitions:
                        decisions.add((tp, v.producer_id, v.producer_epoch, v.state is S.PREPARE_COMMIT))
        for tp in TPS:
            for m in self.h.markers.written[tp]:
                assert (tp, m.producer_id, m.producer_epoch, m.commit) in decisions, f"undecided marker {m} at {tp}"


TransactionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_transaction_coordinator_state_machine = TransactionMachine.TestCase
