"""Moving a log between log dirs, as a state machine: whatever interleaving of appends, truncations (a follower
cutting back by leader epoch), log-start moves, copier rounds, swaps, cancellations and restarts (clean or as
after kill -9), the log holds exactly the batches the model says, at their offsets, in one dir; a copy is only
ever swapped in when it is the log's exact copy; and a finished move leaves nothing in the old dir."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from sofakafka.storage.config import LogConfig
from sofakafka.storage.log import Log
from sofakafka.storage.log_manager import LogManager
from sofakafka.storage.log_mover import MoveProgress

from .storage_helpers import FakeClock, make_batch

TP = ("t", 0)


def _no_fsync(fd: int) -> None:
    """The machine's crashes (``abandon``) keep the page cache, so durability against power loss is not what it
    checks; without the thousands of fsyncs of its restarts and rolls it tries many more sequences in its time."""


class MoveMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._fsync = os.fsync
        os.fsync = _no_fsync
        self.tmp = Path(tempfile.mkdtemp(prefix="movemachine-"))
        self.dirs = [self.tmp / "a", self.tmp / "b", self.tmp / "c"]
        self.clock = FakeClock()
        self.batches: list[tuple[int, bytes]] = []  # (base offset, bytes) of what the log holds
        self.epoch = 0
        self.progress = MoveProgress()
        self.manager: LogManager | None = None

    @initialize(segment_bytes=st.integers(1200, 3000), chunk=st.integers(300, 3000))
    def open_manager(self, segment_bytes: int, chunk: int) -> None:
        self.config = LogConfig.from_props({"segment.bytes": segment_bytes, "index.interval.bytes": 200,
                                            "retention.ms": -1, "file.delete.delay.ms": 0,
                                            "segment.index.bytes": 4096})
        self.chunk = chunk
        self._open()
        self.m.get_or_create_log(*TP)

    def _open(self) -> None:
        self.manager = LogManager(self.dirs, default_config=self.config, time_ms=self.clock,
                                  alter_log_dirs_threads=0, alter_log_dirs_chunk_bytes=self.chunk)
        self.manager.startup()
        self.progress = MoveProgress()

    def teardown(self) -> None:
        try:
            if self.manager is not None:
                self.manager.shutdown()
            shutil.rmtree(self.tmp, ignore_errors=True)
        finally:
            os.fsync = self._fsync

    @property
    def m(self) -> LogManager:
        assert self.manager is not None
        return self.manager

    @property
    def lg(self) -> Log:
        found = self.m.get_log(*TP)
        assert found is not None
        return found

    @property
    def moving(self) -> bool:
        return self.m.get_future_log(*TP) is not None

    # -- what happens to the log -----------------------------------------------------------------------------------
    @rule(count=st.integers(1, 5), size=st.integers(1, 150))
    def append(self, count: int, size: int) -> None:
        lg = self.lg
        buf = make_batch(count, value_size=size, timestamp=1000 + lg.log_end_offset)
        info = lg.append_as_leader(buf, self.epoch)
        self.batches.append((info.first_offset, bytes(buf)))
        lg.update_high_watermark(lg.log_end_offset)

    @precondition(lambda self: len(self.batches) >= 1)
    @rule(back=st.integers(1, 4))
    def follower_truncates(self, back: int) -> None:
        """A new leader did not have our last batches: cut them, and the next appends are a new epoch."""
        keep = max(0, len(self.batches) - back)
        target = self.batches[keep][0] if keep < len(self.batches) else self.lg.log_end_offset
        if target < self.lg.log_start_offset:
            return
        self.m.truncate_to(*TP, target)
        self.batches = self.batches[:keep]
        self.epoch += 1

    @precondition(lambda self: len(self.batches) >= 2)
    @rule(which=st.integers(0, 100))
    def log_start_moves(self, which: int) -> None:
        """DeleteRecords/retention: the log start moves to a batch boundary at or below the high watermark."""
        index = which % len(self.batches)
        offset = self.batches[index][0]
        lg = self.lg
        if offset <= lg.high_watermark and lg.maybe_increment_log_start_offset(offset):
            lg.delete_old_segments()  # the model keeps them: after a crash the log start may read back lower

    @rule()
    def follower_restarts_at_the_leaders_start(self) -> None:
        """Far behind its leader: the log starts over, empty, further on."""
        start = self.lg.log_end_offset + 7
        self.m.truncate_fully_and_start_at(*TP, start)
        self.batches = []
        self.epoch += 1

    # -- the move ----------------------------------------------------------------------------------------------------
    @rule(to=st.integers(0, 2))
    def alter_log_dir(self, to: int) -> None:
        before = self.m.log_dir_of(*TP)
        future = self.m.get_future_log(*TP)
        already = future is not None and future.dir.parent == self.dirs[to].resolve()
        started = self.m.alter_replica_log_dir(*TP, str(self.dirs[to].resolve()))
        assert started == (before != self.dirs[to].resolve() and not already)
        if started:
            event("a move started")
            self.progress = MoveProgress()
        elif before == self.dirs[to].resolve():
            assert not self.moving  # asking for the current dir ends a move elsewhere

    @precondition(lambda self: self.moving)
    @rule(rounds=st.integers(1, 6))
    def copier_rounds(self, rounds: int) -> None:
        for _ in range(rounds):
            done, _ = self.m.mover.move_once(TP, self.progress)
            if done:
                assert self.progress.swapped
                event("a move completed")
                return
            future = self.m.get_future_log(*TP)
            assert future is not None
            self._assert_copy_agrees(future)

    @precondition(lambda self: self.moving)
    @rule()
    def copier_finishes_while_nobody_writes(self) -> None:
        """Liveness: a move of a log that does not change meanwhile ends, whatever the copy held before."""
        for _ in range(2000):
            done, _ = self.m.mover.move_once(TP, self.progress)
            if done:
                assert self.progress.swapped
                event("a move completed")
                return
        raise AssertionError("the move of a log nobody writes to never completed")

    def _assert_copy_agrees(self, future: Log) -> None:
        """Once reconciled at the log's truncation count, the copy is a prefix of the log at equal offsets, and
        follows its log start as far as it holds it."""
        if self.progress.reconciled_at != self.lg.truncations:
            return
        stored = dict(_batches(self.lg))
        for base, data in _batches(future):
            if base >= self.lg.log_start_offset:
                assert stored.get(base) == data, f"the copy disagrees with the log at offset {base}"
        if future.log_end_offset >= self.lg.log_start_offset and future.high_watermark >= self.lg.log_start_offset:
            assert future.log_start_offset == self.lg.log_start_offset

    @rule(crash=st.booleans())
    def restart(self, crash: bool) -> None:
        if crash:
            self.m.abandon()
        else:
            self.m.shutdown()
        self._open()

    # -- what must always hold -------------------------------------------------------------------------------------
    @invariant()
    def the_log_holds_the_model(self) -> None:
        if self.manager is None:
            return
        lg = self.lg
        assert _batches(lg) == [(b, d) for b, d in self.batches if b >= lg.log_start_offset]
        assert lg.dir.parent == self.m.log_dir_of(*TP)
        assert lg.dir.name == "t-0"

    @invariant()
    def one_live_dir_and_at_most_one_copy(self) -> None:
        if self.manager is None:
            return
        live = [d.resolve() for d in self.dirs if (d / "t-0").exists()]
        assert live == [self.m.log_dir_of(*TP)]
        futures = [p for d in self.dirs for p in d.iterdir() if p.name.endswith("-future")]
        future = self.m.get_future_log(*TP)
        assert [p.resolve() for p in futures] == ([future.dir] if future is not None else [])
        leftovers = [p for d in self.dirs for p in d.iterdir() if p.name.endswith("-delete")]
        assert not leftovers, leftovers  # file.delete.delay.ms is 0 here


def _batches(lg: Log) -> list[tuple[int, bytes]]:
    from sofakafka.protocol.records import read_batch_header

    out = []
    for data in lg.iter_batches_bytes(lg.log_start_offset):
        header = read_batch_header(data, 0)
        assert header is not None
        out.append((header.base_offset, data))
    return out


MoveMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestLogDirMoves = MoveMachine.TestCase
