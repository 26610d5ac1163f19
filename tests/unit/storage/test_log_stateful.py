"""A Log driven by random operations must agree with a list-of-batches model on every read."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from sofakafka.protocol.records import decode_records, iter_batches
from sofakafka.storage.config import LogConfig
from sofakafka.storage.log import FetchIsolation, Log

from .storage_helpers import FakeClock, make_batch


@dataclass
class ModelBatch:
    base: int
    last: int
    data: bytes
    timestamps: list[int]


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="logmachine-"))
        self.clock = FakeClock()
        self.batches: list[ModelBatch] = []
        self.log_start = 0
        self.log_end = 0
        self.hw = 0
        self.epoch = 0
        self.gapped = False  # a follower append left an offset gap
        self.log: Log | None = None

    @initialize(segment_bytes=st.integers(1000, 3000), interval=st.integers(0, 600),
                retention_bytes=st.one_of(st.just(-1), st.integers(300, 3000)),
                delete_delay=st.sampled_from([0, 60_000]))
    def open_log(self, segment_bytes: int, interval: int, retention_bytes: int, delete_delay: int) -> None:
        self.config = LogConfig.from_props({
            "segment.bytes": segment_bytes, "index.interval.bytes": interval, "retention.bytes": retention_bytes,
            "retention.ms": -1, "file.delete.delay.ms": delete_delay, "segment.index.bytes": 4096,
        })
        self.log = Log(self.tmp / "t-0", self.config, time_ms=self.clock)

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def lg(self) -> Log:
        assert self.log is not None
        return self.log

    @rule(count=st.integers(1, 5), value_size=st.integers(0, 150), ts=st.integers(0, 50),
          epoch_bump=st.booleans())
    def append(self, count: int, value_size: int, ts: int, epoch_bump: bool) -> None:
        if epoch_bump:
            self.epoch += 1
        buf = make_batch(count, timestamp=1000 + ts * 10, value_size=value_size)
        info = self.lg.append_as_leader(buf, self.epoch)
        assert info.first_offset == self.log_end
        self.batches.append(ModelBatch(self.log_end, info.last_offset, bytes(buf),
                                       [1000 + ts * 10 + i for i in range(count)]))
        self.log_end = info.last_offset + 1

    @rule(count=st.integers(1, 4), gap=st.integers(0, 3), ts=st.integers(0, 50), epoch_bump=st.booleans())
    def follower_append(self, count: int, gap: int, ts: int, epoch_bump: bool) -> None:
        # Offsets as the leader assigned them; gaps are what a compacted leader log hands its followers.
        if epoch_bump:
            self.epoch += 1
        base = self.log_end + gap
        self.gapped = self.gapped or gap > 0
        buf = make_batch(count, base_offset=base, partition_leader_epoch=self.epoch, timestamp=1000 + ts * 10)
        info = self.lg.append_as_follower(buf)
        assert (info.first_offset, info.last_offset) == (base, base + count - 1)
        self.batches.append(ModelBatch(base, base + count - 1, bytes(buf),
                                       [1000 + ts * 10 + i for i in range(count)]))
        self.log_end = base + count

    @rule()
    def roll(self) -> None:
        self.lg.roll()

    @rule(data=st.data())
    def move_high_watermark(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, self.log_end))
        self.hw = self.lg.update_high_watermark(target)
        assert self.hw == min(max(target, self.log_start), self.log_end)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start, self.log_end))
        self.lg.truncate_to(target)
        removed = [b for b in self.batches if b.last >= target]
        self.batches = [b for b in self.batches if b.last < target]
        if target < self.log_end:
            # A target inside a batch takes the whole batch: the log then ends where that batch began.
            self.log_end = min([target] + [b.base for b in removed])
            self.hw = min(self.hw, self.log_end)
            self.log_start = min(self.log_start, self.log_end)

    @precondition(lambda self: self.hw > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start, self.hw))
        self.lg.maybe_increment_log_start_offset(target)
        self.log_start = max(self.log_start, target)
        self.batches = [b for b in self.batches if b.last >= self.log_start]

    @rule()
    def retention(self) -> None:
        self.lg.delete_old_segments()
        new_start = self.lg.log_start_offset
        assert new_start >= self.log_start and new_start <= max(self.hw, self.log_start)
        self.log_start = new_start
        self.batches = [b for b in self.batches if b.last >= new_start]
        if self.config.retention_bytes >= 0:
            inactive = sum(s.size for s in self.lg.log_segments()[:-1])
            assert inactive <= self.config.retention_bytes or self.lg.log_segments()[1].base_offset > self.hw \
                or inactive - self.lg.log_segments()[0].size < self.config.retention_bytes

    @rule(new_start=st.integers(0, 50))
    def truncate_fully(self, new_start: int) -> None:
        target = self.log_end + new_start
        self.lg.truncate_fully_and_start_at(target)
        self.batches = []
        self.log_start = self.log_end = self.hw = target

    @rule(clean=st.booleans(), data=st.data())
    def reopen(self, clean: bool, data: st.DataObject) -> None:
        recovery_point = 0
        if clean:
            self.lg.close()
        else:
            self.lg.flush()  # what the page cache would hold anyway; no trimming, no snapshot
            # Any checkpointed recovery point up to the flushed end: segments below it are only sanity-checked
            # at the restart, the others recovered.
            recovery_point = data.draw(st.integers(0, self.lg.recovery_point), label="recovery point")
            self.lg.close_handlers()
        self.log = Log(self.tmp / "t-0", self.config, log_start_offset=self.log_start,
                       recovery_point=recovery_point, had_clean_shutdown=clean, time_ms=self.clock)
        data_end = self.batches[-1].last + 1 if self.batches else 0
        if not self.gapped or data_end == self.log_end:
            assert self.lg.log_end_offset == self.log_end
        else:
            # Truncated into an offset gap: the end offset was not backed by data, so a restart derives it
            # from the data (as Kafka does); it can only move back towards the end of the last batch.
            assert data_end <= self.lg.log_end_offset <= self.log_end
            self.log_end = self.lg.log_end_offset
            self.hw = min(self.hw, self.log_end)
        self.lg.update_high_watermark(self.hw)
        assert self.lg.log_start_offset == min(self.log_start, self.log_end)
        self.log_start = self.lg.log_start_offset

    def _visible(self, upper: int) -> bytes:
        return b"".join(b.data for b in self.batches if b.last < upper)

    def _read_all(self, isolation: FetchIsolation, max_bytes: int) -> bytes:
        out = b""
        offset = self.log_start
        while offset < self.log_end:
            info = self.lg.read(offset, max_bytes, isolation=isolation, min_one_message=True)
            data = info.records.read_bytes()
            headers = list(iter_batches(data))
            if not headers:
                break
            out += data[: headers[-1].end]
            offset = headers[-1].last_offset + 1
        return out

    @invariant()
    def offsets_agree(self) -> None:
        if self.log is None:
            return
        assert self.lg.log_end_offset == self.log_end
        assert self.lg.log_start_offset == self.log_start
        assert self.lg.high_watermark == self.hw

    @rule(max_bytes=st.integers(1, 3000))
    def full_reads_agree(self, max_bytes: int) -> None:
        expected = b"".join(b.data for b in self.batches)
        assert self._read_all(FetchIsolation.LOG_END, max_bytes) == expected
        assert self._read_all(FetchIsolation.HIGH_WATERMARK, max_bytes) == self._visible(self.hw)

    @precondition(lambda self: self.log_end > self.log_start)
    @rule(data=st.data(), max_bytes=st.integers(0, 3000))
    def point_read_agrees(self, data: st.DataObject, max_bytes: int) -> None:
        offset = data.draw(st.integers(self.log_start, self.log_end - 1))
        info = self.lg.read(offset, max_bytes, min_one_message=True)
        got = info.records.read_bytes()
        holding = [b for b in self.batches if b.last >= offset]
        expected = b"".join(b.data for b in holding)
        if not holding:  # only an offset gap (follower appends) lies between here and the log end
            assert self.gapped and got == b""
            return
        assert expected.startswith(got)
        assert len(got) >= len(holding[0].data)  # min_one_message: the first batch whole

    @rule(wanted=st.integers(900, 1600))
    def timestamp_lookup_agrees(self, wanted: int) -> None:
        target = wanted
        expected = None
        for b in self.batches:
            for i, ts in enumerate(b.timestamps):
                offset = b.base + i
                if ts >= target and offset >= self.log_start and expected is None:
                    expected = (ts, offset)
        found = self.lg.fetch_offset_by_timestamp(target)
        assert (None if found is None else (found.timestamp, found.offset)) == expected

    @rule()
    def stored_records_decode(self) -> None:
        data = b"".join(self.lg.iter_batches_bytes())
        for h in iter_batches(data):
            decode_records(data, h)


LogMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestLogAgainstModel = LogMachine.TestCase
