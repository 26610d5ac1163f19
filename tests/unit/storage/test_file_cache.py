"""The descriptor cache (``log.max.open.segment.files``) and descriptor-free index mappings.

Whatever sequence of opens, reads, appends, truncations, renames and evictions happens, every file reads back
what was written, and the process holds no more descriptors than the cache's capacity (indexes hold none).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from sofakafka.storage.config import LogConfig
from sofakafka.storage.file_cache import DescriptorCache, FileClosedError
from sofakafka.storage.index import OffsetIndex, TimeIndex
from sofakafka.storage.log import FetchIsolation, Log
from sofakafka.storage.log_manager import LogManager
from sofakafka.storage.segment import FileRecords

from .storage_helpers import FakeClock, make_batch


def open_fds(under: Path) -> int:
    """Descriptors of this process open on files below ``under`` (the test's own directory): counting every
    descriptor of the process would count sockets and files of other tests' threads still running in the same
    pytest process (a client's background thread, a logging handler), which come and go at any moment."""
    prefix = str(under.resolve()) + os.sep
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed between the listing and the look
            continue
        count += target.startswith(prefix)
    return count


def make_files(tmp_path: Path, cache: DescriptorCache, n: int) -> list[FileRecords]:
    files = []
    for i in range(n):
        path = tmp_path / f"{i:020d}.log"
        path.write_bytes(b"x%d" % i)
        files.append(FileRecords(path, cache=cache))
    return files


# -- capacity at its edges -------------------------------------------------------------------------------------
@pytest.mark.parametrize("used", [2, 3, 4])
def test_open_descriptors_never_exceed_capacity(tmp_path: Path, used: int) -> None:
    cache = DescriptorCache(3)
    files = make_files(tmp_path, cache, used)
    before = open_fds(tmp_path)
    for f in files:
        assert f.read(0, 10).startswith(b"x")
    assert open_fds(tmp_path) - before == min(used, 3)  # files are opened on first use, not when the segment loads
    assert cache.open_count == min(used, 3)
    assert cache.evictions == max(0, used - 3)
    # The first-used file is the one closed when a fourth is used: the least recently used goes.
    assert files[0].is_open == (used <= 3)
    assert all(f.is_open for f in files[-3:])
    for f in files:
        f.close()
    assert cache.open_count == 0
    assert open_fds(tmp_path) == before


def test_least_recently_used_is_closed_first(tmp_path: Path) -> None:
    cache = DescriptorCache(2)
    a, b, c = make_files(tmp_path, cache, 3)
    a.read(0, 1)
    b.read(0, 1)
    a.read(0, 1)  # a is now the most recently used
    c.read(0, 1)
    assert a.is_open and c.is_open and not b.is_open


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        DescriptorCache(0)
    DescriptorCache(1)


def test_lowering_capacity_closes_idle_descriptors(tmp_path: Path) -> None:
    cache = DescriptorCache(5)
    files = make_files(tmp_path, cache, 5)
    for f in files:
        f.read(0, 1)
    cache.set_capacity(2)
    assert cache.open_count == 2
    assert [f.is_open for f in files] == [False, False, False, True, True]


def test_a_pinned_descriptor_is_not_closed_and_the_excess_goes_when_released(tmp_path: Path) -> None:
    cache = DescriptorCache(1)
    a, b, c = make_files(tmp_path, cache, 3)
    fd = a._file.acquire()  # a read in progress on another thread
    try:
        b._file.acquire()  # needs a descriptor while the only slot is pinned: over capacity, not blocked
        assert cache.open_count == 2
        b._file.release()  # back to capacity: b, the only idle one, is closed
        assert cache.open_count == 1 and not b.is_open
        c.read(0, 1)
        assert os.pread(fd, 2, 0) == b"x0"  # still a's file: nothing closed (or reused) its number
        assert cache.open_count == 1 and not c.is_open
    finally:
        a._file.release()
    assert cache.open_count == 1 and a.is_open
    b.read(0, 1)
    assert cache.open_count == 1 and not a.is_open and b.is_open


def test_a_file_closed_for_good_cannot_be_read(tmp_path: Path) -> None:
    cache = DescriptorCache(2)
    (a,) = make_files(tmp_path, cache, 1)
    a.close()
    with pytest.raises(OSError, match="closed"):
        a.read(0, 1)
    with pytest.raises(FileClosedError):
        a._file.acquire()


def test_a_closed_descriptor_reopens_under_the_renamed_name(tmp_path: Path) -> None:
    cache = DescriptorCache(1)
    a, b = make_files(tmp_path, cache, 2)
    a.read(0, 1)
    b.read(0, 1)  # a's descriptor is closed
    assert not a.is_open
    a.rename_to(tmp_path / "renamed.log.deleted")
    assert a.read(0, 2) == b"x0"


def test_a_vanished_file_is_an_error_not_a_new_empty_file(tmp_path: Path) -> None:
    cache = DescriptorCache(1)
    a, b = make_files(tmp_path, cache, 2)
    b.read(0, 1)
    a.path.unlink()
    with pytest.raises(FileNotFoundError):
        a.append(b"more")
    assert not a.path.exists()


def test_fsync_after_the_writing_descriptor_was_closed(tmp_path: Path) -> None:
    cache = DescriptorCache(1)
    a, b = make_files(tmp_path, cache, 2)
    a.append(b"-written")
    b.read(0, 1)  # closes the descriptor that wrote
    a.flush()  # reopens and fsyncs
    assert a.path.read_bytes() == b"x0-written"


def test_concurrent_readers_always_read_their_own_file(tmp_path: Path) -> None:
    """A reused descriptor number would hand one reader another file's bytes; pins prevent it."""
    cache = DescriptorCache(1)
    files = []
    for i in range(6):
        path = tmp_path / f"{i}.log"
        path.write_bytes(bytes([65 + i]) * 4096)
        files.append(FileRecords(path, cache=cache))
    errors: list[str] = []

    def reader(i: int) -> None:
        expected = bytes([65 + i]) * 512
        for n in range(400):
            got = files[i].read((n * 512) % 4096, 512)
            if got != expected:
                errors.append(f"file {i} read {got[:8]!r}")
                return

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(len(files))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert cache.open_count <= 1


# -- indexes hold no descriptor --------------------------------------------------------------------------------
def test_indexes_are_mapped_without_a_descriptor(tmp_path: Path) -> None:
    before = open_fds(tmp_path)
    indexes = []
    for i in range(20):
        oi = OffsetIndex(tmp_path / f"{i:020d}.index", i * 1000, 4096)
        ti = TimeIndex(tmp_path / f"{i:020d}.timeindex", i * 1000, 4096)
        oi.resize(4096)  # preallocated like an active segment's
        ti.resize(4096)
        for n in range(10):
            oi.append(i * 1000 + n * 10, n * 100)
            ti.maybe_append(5000 + n, i * 1000 + n * 10)
        indexes.append((oi, ti))
    assert open_fds(tmp_path) == before
    for oi, ti in indexes:
        assert oi.lookup(oi.base_offset + 55).position == 500
        oi.truncate_to(oi.base_offset + 50)  # truncation and trimming reopen the file only briefly
        oi.trim_to_valid_size()
        ti.trim_to_valid_size()
        assert oi.entries == 5 and oi.path.stat().st_size == 40
        assert ti.entries == 10 and ti.path.stat().st_size == 120
    assert open_fds(tmp_path) == before
    for oi, ti in indexes:
        oi.close()
        ti.close()
    assert open_fds(tmp_path) == before


# -- whole logs: descriptors bounded whatever the partitions and segments ---------------------------------------
def test_many_partitions_and_segments_use_at_most_the_cache_capacity(tmp_path: Path) -> None:
    base = open_fds(tmp_path)
    manager = LogManager([tmp_path / "logs"], max_open_segment_files=8,
                         default_config=LogConfig.from_props({"segment.bytes": 2000, "segment.index.bytes": 4096}))
    manager.startup()
    before = open_fds(tmp_path)
    written: dict[int, list[bytes]] = {}
    for p in range(60):
        lg = manager.get_or_create_log("t", p)
        written[p] = []
        for i in range(8):  # ~700 bytes each: several segments per partition
            buf = make_batch(5, value_size=100, key_prefix=b"p%d-%d-" % (p, i))
            lg.append_as_leader(buf, 0)
            written[p].append(bytes(buf))
        assert open_fds(tmp_path) - before <= 8
    assert sum(lg.number_of_segments for lg in manager.all_logs) > 120
    for p in range(60):
        lg = manager.get_log("t", p)
        assert lg is not None
        got = b"".join(lg.iter_batches_bytes())
        assert got == b"".join(written[p])
    assert open_fds(tmp_path) - before <= 8
    manager.shutdown()
    assert open_fds(tmp_path) == base

    again = LogManager([tmp_path / "logs"], max_open_segment_files=8)
    again.startup()  # loading checks every segment: through the cache too
    assert open_fds(tmp_path) - base <= 8 + 1  # and the log dir's lock
    for p in range(60):
        lg = again.get_log("t", p)
        assert lg is not None and b"".join(lg.iter_batches_bytes()) == b"".join(written[p])
    again.shutdown()
    assert open_fds(tmp_path) == base


# -- any sequence of operations on files sharing a tiny cache reads back what was written ------------------------
class FileRecordsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="fdcache-"))
        self.files: list[FileRecords] = []
        self.model: list[bytearray] = []
        self.renames = 0

    @initialize(capacity=st.integers(1, 3), n=st.integers(1, 6))
    def setup(self, capacity: int, n: int) -> None:
        self.cache = DescriptorCache(capacity)
        for i in range(n):
            self.files.append(FileRecords(self.tmp / f"{i:020d}.log", cache=self.cache))
            self.model.append(bytearray())

    def teardown(self) -> None:
        for f in self.files:
            f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(i=st.integers(0, 5), data=st.binary(min_size=1, max_size=64))
    def append(self, i: int, data: bytes) -> None:
        i %= len(self.files)
        self.files[i].append(data)
        self.model[i] += data

    @rule(i=st.integers(0, 5), pos=st.integers(0, 300), size=st.integers(0, 300))
    def read(self, i: int, pos: int, size: int) -> None:
        i %= len(self.files)
        expected = bytes(self.model[i][pos:pos + size]) if pos < len(self.model[i]) else b""
        assert self.files[i].read(pos, size) == expected

    @rule(i=st.integers(0, 5), cut=st.integers(0, 300))
    def truncate(self, i: int, cut: int) -> None:
        i %= len(self.files)
        cut = min(cut, len(self.model[i]))
        self.files[i].truncate_to(cut)
        del self.model[i][cut:]

    @rule(i=st.integers(0, 5))
    def flush(self, i: int) -> None:
        self.files[i % len(self.files)].flush()

    @rule(i=st.integers(0, 5))
    def drop_descriptor(self, i: int) -> None:
        self.files[i % len(self.files)]._file.close()

    @rule(capacity=st.integers(1, 3))
    def resize_cache(self, capacity: int) -> None:
        self.cache.set_capacity(capacity)

    @rule(i=st.integers(0, 5))
    def rename(self, i: int) -> None:
        f = self.files[i % len(self.files)]
        self.renames += 1
        f.rename_to(self.tmp / f"r{self.renames}-{f.path.name}")

    @invariant()
    def bounded_and_on_disk(self) -> None:
        if not self.files:
            return
        assert self.cache.open_count <= self.cache.capacity
        for f, m in zip(self.files, self.model, strict=True):
            assert f.size == len(m)
            assert f.path.read_bytes() == bytes(m)


TestFileRecordsMachine = FileRecordsMachine.TestCase
TestFileRecordsMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


class LogsSharingATinyCacheMachine(RuleBasedStateMachine):
    """Several logs with small segments over one cache of 1-3 descriptors: appends, reads, rolls, truncations,
    retention and restarts (clean and crashed) interleave, and every read agrees with the model."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="fdcache-logs-"))
        self.clock = FakeClock()
        self.logs: list[Log] = []
        self.model: list[list[tuple[int, int, bytes]]] = []  # per log: (base, last, bytes) of each batch

    @initialize(capacity=st.integers(1, 3), n=st.integers(1, 4), segment_bytes=st.integers(600, 2000))
    def setup(self, capacity: int, n: int, segment_bytes: int) -> None:
        self.cache = DescriptorCache(capacity)
        self.config = LogConfig.from_props({"segment.bytes": segment_bytes, "index.interval.bytes": 200,
                                            "segment.index.bytes": 4096, "file.delete.delay.ms": 0})
        for p in range(n):
            self.logs.append(self._open(p, clean=True))
            self.model.append([])

    def _open(self, p: int, clean: bool) -> Log:
        return Log(self.tmp / f"t-{p}", self.config, time_ms=self.clock, had_clean_shutdown=clean,
                   descriptor_cache=self.cache)

    def teardown(self) -> None:
        for lg in self.logs:
            lg.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(p=st.integers(0, 3), count=st.integers(1, 4), value_size=st.integers(0, 120))
    def append(self, p: int, count: int, value_size: int) -> None:
        p %= len(self.logs)
        buf = make_batch(count, value_size=value_size, key_prefix=b"%d-" % p)
        info = self.logs[p].append_as_leader(buf, 0)
        self.model[p].append((info.first_offset, info.last_offset, bytes(buf)))
        self.logs[p].update_high_watermark(info.last_offset + 1)

    @rule(p=st.integers(0, 3), pick=st.integers(0, 1000))
    def read_from(self, p: int, pick: int) -> None:
        p %= len(self.logs)
        lg, batches = self.logs[p], self.model[p]
        visible = [b for b in batches if b[0] >= lg.log_start_offset]
        if not visible:
            return
        base, _last, _data = visible[pick % len(visible)]
        expected = b"".join(d for b, _, d in visible if b >= base)
        info = lg.read(base, 1 << 20, isolation=FetchIsolation.LOG_END)
        got = info.records.read_bytes()
        # A read stops at the end of its segment; it is a prefix of what follows the offset.
        assert got and expected.startswith(got)

    @rule(p=st.integers(0, 3))
    def read_everything(self, p: int) -> None:
        p %= len(self.logs)
        lg = self.logs[p]
        expected = b"".join(d for b, _, d in self.model[p] if b >= lg.log_start_offset)
        assert b"".join(lg.iter_batches_bytes(lg.log_start_offset)) == expected

    @rule(p=st.integers(0, 3))
    def roll(self, p: int) -> None:
        self.logs[p % len(self.logs)].roll()

    @rule(p=st.integers(0, 3), keep=st.integers(0, 20))
    def truncate(self, p: int, keep: int) -> None:
        p %= len(self.logs)
        batches = self.model[p]
        if keep >= len(batches):
            return
        target = batches[keep][0]
        if target < self.logs[p].log_start_offset:
            return
        self.logs[p].truncate_to(target)
        del batches[keep:]

    @rule(p=st.integers(0, 3), drop=st.integers(1, 5))
    def delete_records(self, p: int, drop: int) -> None:
        p %= len(self.logs)
        batches = self.model[p]
        if len(batches) <= drop:
            return
        lg = self.logs[p]
        lg.maybe_increment_log_start_offset(batches[drop][0])
        lg.delete_old_segments()

    @precondition(lambda self: bool(self.logs))
    @rule(p=st.integers(0, 3), crash=st.booleans())
    def restart(self, p: int, crash: bool) -> None:
        p %= len(self.logs)
        lg = self.logs[p]
        start = lg.log_start_offset
        if crash:
            lg.flush()  # what was fsynced survives a kill -9; the test is about descriptors, not the page cache
            lg.close_handlers()
        else:
            lg.close()
        again = Log(self.tmp / f"t-{p}", self.config, time_ms=self.clock, had_clean_shutdown=not crash,
                    descriptor_cache=self.cache, log_start_offset=start)
        self.logs[p] = again
        again.update_high_watermark(again.log_end_offset)

    @invariant()
    def bounded(self) -> None:
        if self.logs:
            assert self.cache.open_count <= self.cache.capacity


TestLogsSharingATinyCache = LogsSharingATinyCacheMachine.TestCase
TestLogsSharingATinyCache.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)


def test_an_index_never_written_is_created_empty_when_closed_but_not_after_a_delete(tmp_path: Path) -> None:
    """A clean close leaves every segment's index files, as Kafka's clean shutdown does (Kafka, started on
    the dir, recovers a segment whose index is missing); a deleted index stays deleted."""
    oi = OffsetIndex(tmp_path / "0.index", 0, 4096)
    ti = TimeIndex(tmp_path / "0.timeindex", 0, 4096)
    assert not oi.path.exists() and not ti.path.exists()  # nothing written: no file yet
    oi.close()
    ti.close()
    assert oi.path.stat().st_size == 0 and ti.path.stat().st_size == 0
    gone = OffsetIndex(tmp_path / "1.index", 1, 4096)
    gone.delete()
    gone.close()
    assert not gone.path.exists()
