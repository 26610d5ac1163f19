"""Hypothesis state machine: ProducerStateManager against a plain model of Kafka 2.6's idempotence rules.

The model is deliberately naive (lists, no wrap-around helpers beyond a modulo) and follows the rules as
documented: fencing by epoch, a new epoch restarts at 0, consecutive sequences within an epoch, the last five
batches answer retries, transactions open at their first transactional batch and close at a marker, and a
restart from a snapshot remembers only each producer's last batch.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.records import RecordBatchBuilder, build_end_txn_marker, read_batch_header
from sofakafka.storage.producer_state import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    AppendOrigin,
    ProducerStateManager,
)

SEQ_SPACE = 2**31
NOW = 1_700_000_000_000
PIDS = st.sampled_from([1, 2, 3])


@dataclass
class ModelProducer:
    epoch: int
    batches: list[tuple[int, int, int, int]] = field(default_factory=list)  # first/last seq, first/last offset
    txn_first: int | None = None

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="psm-model-"))
        self.psm = ProducerStateManager(self.dir)
        self.psm.load(0, 0, NOW)
        self.model: dict[int, ModelProducer] = {}
        self.leo = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the model's verdict ---------------------------------------------------------------------------

    def expected(self, pid: int, epoch: int, first_seq: int, last_seq: int,
                 transactional: bool) -> ErrorCode | tuple[int, int] | None:
        p = self.model.get(pid)
        if p is None:
            return None
        if epoch == p.epoch:
            for fs, ls, fo, lo in p.batches:
                if (fs, ls) == (first_seq, last_seq):
                    return (fo, lo)
        if epoch < p.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if epoch != p.epoch:
            if first_seq != 0:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        elif first_seq != (p.last_seq + 1) % SEQ_SPACE:
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        if p.txn_first is not None and not transactional:
            return ErrorCode.INVALID_TXN_STATE
        return None

    # -- rules -----------------------------------------------------------------------------------------

    @rule(pid=PIDS, epoch_bump=st.sampled_from([0, 0, 0, 1, -1]),
          seq_choice=st.sampled_from(["next", "next", "next", "zero", "retry", "gap", "near_max"]),
          count=st.integers(1, 4), transactional=st.booleans(), retry_back=st.integers(1, 6))
    def produce(self, pid: int, epoch_bump: int, seq_choice: str, count: int, transactional: bool,
                retry_back: int) -> None:
        p = self.model.get(pid)
        epoch = max(0, (p.epoch if p else 0) + epoch_bump)
        last = p.last_seq if p else -1
        if seq_choice == "next":
            first_seq = (last + 1) % SEQ_SPACE
        elif seq_choice == "zero":
            first_seq = 0
        elif seq_choice == "retry" and p and p.batches:
            first_seq = p.batches[max(0, len(p.batches) - retry_back)][0]
            count = (p.batches[max(0, len(p.batches) - retry_back)][1] - first_seq) % SEQ_SPACE + 1
        elif seq_choice == "near_max":
            first_seq = SEQ_SPACE - 2
        else:
            first_seq = (last + 3) % SEQ_SPACE
        last_seq = (first_seq + count - 1) % SEQ_SPACE

        builder = RecordBatchBuilder(base_offset=self.leo, producer_id=pid, producer_epoch=epoch,
                                     base_sequence=first_seq, is_transactional=transactional)
        for i in range(count):
            builder.append_record(self.leo + i, NOW, b"k", b"v")
        header = read_batch_header(builder.build())
        assert header is not None

        want = self.expected(pid, epoch, first_seq, last_seq, transactional)
        try:
            got: ErrorCode | tuple[int, int] | None = None
            dup = self.psm.check_append(header)
            if dup is not None:
                got = (dup.first_offset, dup.last_offset)
        except KafkaError as e:
            got = e.code
        assert got == want, (got, want)
        if got is not None:
            return

        assert self.psm.update(header) is None
        if p is None:
            p = self.model[pid] = ModelProducer(epoch)
        if p.epoch != epoch:
            p.epoch = epoch
            p.batches.clear()
        p.batches.append((first_seq, last_seq, self.leo, self.leo + count - 1))
        del p.batches[:-5]
        if transactional and p.txn_first is None:
            p.txn_first = self.leo
        self.leo += count
        self.psm.update_map_end_offset(self.leo)
        self.psm.on_high_watermark_updated(self.leo)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), commit=st.booleans(), epoch_bump=st.sampled_from([0, 0, 1, -1]))
    def end_transaction(self, data: st.DataObject, commit: bool, epoch_bump: int) -> None:
        pid = data.draw(st.sampled_from(sorted(self.model)))
        p = self.model[pid]
        epoch = max(0, p.epoch + epoch_bump)
        header = read_batch_header(build_end_txn_marker(producer_id=pid, producer_epoch=epoch,
                                                        coordinator_epoch=0, commit=commit, timestamp=NOW,
                                                        base_offset=self.leo))
        assert header is not None
        control_type = CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT
        try:
            self.psm.check_append(header, origin=AppendOrigin.COORDINATOR, control_type=control_type,
                                 coordinator_epoch=0)
            fenced = False
        except KafkaError as e:
            assert e.code == ErrorCode.INVALID_PRODUCER_EPOCH
            fenced = True
        assert fenced == (epoch < p.epoch)
        if fenced:
            return
        completed = self.psm.update(header, control_type, coordinator_epoch=0)
        assert completed is not None
        assert completed.first_offset == (p.txn_first if p.txn_first is not None else self.leo)
        assert completed.last_offset == self.leo
        assert completed.is_aborted == (not commit)
        if p.epoch != epoch:
            p.epoch = epoch
            p.batches.clear()
        p.txn_first = None
        self.leo += 1
        self.psm.update_map_end_offset(self.leo)
        self.psm.on_high_watermark_updated(self.leo)

    @rule()
    def restart_from_snapshot(self) -> None:
        self.psm.take_snapshot()
        self.psm = ProducerStateManager(self.dir)
        assert self.psm.load(0, self.leo, NOW) == self.leo
        for p in self.model.values():
            del p.batches[:-1]

    # -- invariants ------------------------------------------------------------------------------------

    @invariant()
    def open_transactions_agree(self) -> None:
        firsts = [p.txn_first for p in self.model.values() if p.txn_first is not None]
        assert self.psm.first_unstable_offset() == (min(firsts) if firsts else None)

    @invariant()
    def producers_agree(self) -> None:
        active = self.psm.active_producers
        assert set(active) == set(self.model)
        for pid, p in self.model.items():
            entry = active[pid]
            assert entry.producer_epoch == p.epoch
            assert entry.last_seq == p.last_seq
            assert entry.current_txn_first_offset == p.txn_first
            last_data = p.batches[-1][3] if p.batches else None
            assert self.psm.last_records_of_active_producers()[pid].last_data_offset == last_data


TestProducerStateMachine = ProducerStateMachine.TestCase
