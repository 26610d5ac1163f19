"""Readers on other threads while the writer appends, rolls and deletes segments: reads never fail on a
segment that retention removed under them, and never see a torn or foreign batch."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sofakafka.protocol.records import iter_batches, validate_batch
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import OffsetOutOfRangeError
from sofakafka.storage.log import FetchIsolation, Log

from .storage_helpers import make_batch


def test_reads_during_appends_rolls_and_retention_see_only_whole_valid_batches(tmp_path: Path) -> None:
    config = LogConfig.from_props({"segment.bytes": 600, "retention.bytes": 2000, "retention.ms": -1,
                                   "file.delete.delay.ms": 60_000, "index.interval.bytes": 100})
    log = Log(tmp_path / "t-0", config)
    appends = 300
    done = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        try:
            while not done.wait(0.001):  # one pass, then yield the CPU to the writer
                offset = log.log_start_offset
                while offset < log.high_watermark:
                    try:
                        info = log.read(offset, 5000, isolation=FetchIsolation.HIGH_WATERMARK,
                                        min_one_message=True)
                    except OffsetOutOfRangeError:
                        break  # retention moved the log start past us: start again, as a consumer would
                    data = info.records.read_bytes()
                    headers = list(iter_batches(data))
                    if not headers:
                        break
                    previous = offset - 1
                    for h in headers:
                        validate_batch(data, h)
                        assert h.base_offset > previous or h.last_offset >= offset
                        previous = h.last_offset
                    offset = headers[-1].last_offset + 1
                    reads[0] += 1
        except BaseException as e:  # noqa: BLE001 - handed to the main thread, which fails the test
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(appends):
            log.append_as_leader(make_batch(1 + i % 3, value_size=40), 0)
            log.high_watermark = log.log_end_offset
            if i % 10 == 0:
                log.delete_old_segments()
    finally:
        done.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert reads[0] > 0
    assert log.log_start_offset > 0  # retention really ran under the readers
    log.close()


def _fetch_as_a_consumer_would(log: Log, offset: int, isolation: FetchIsolation) -> int:
    """Read from ``offset`` and return where a fetcher goes next: after the last batch it was given."""
    data = log.read(offset, 1 << 20, isolation=isolation, min_one_message=True).records.read_bytes()
    headers = list(iter_batches(data))
    return headers[-1].last_offset + 1 if headers else offset


@pytest.mark.parametrize("isolation", list(FetchIsolation))
def test_a_read_never_returns_the_batch_an_append_is_still_writing(tmp_path: Path,
                                                                    isolation: FetchIsolation) -> None:
    """An append writes its batch to the segment file before it moves the log end. A read in between, whose
    bound is the log end (a follower's; a consumer's once the high watermark or last stable offset has caught
    up with it), must end at the log end it saw, as Kafka's read ends at ``nextOffsetMetadata``. Bounded by
    the file's size instead, it handed out the batch being written, beyond the high watermark, and the
    fetcher's next offset was past the log end: OFFSET_OUT_OF_RANGE for a read_committed librdkafka consumer
    in the chaos suite, at the offset right after the last record it had been given."""
    log = Log(tmp_path / "t-0", LogConfig.from_props({}))
    for _ in range(3):
        log.append_as_leader(make_batch(2), 0)
    end = log.log_end_offset
    log.high_watermark = end  # every replica has it: the high watermark and last stable offset are the log end
    size = log.active_segment.size

    # The append below stops between writing its batch and moving the log end: its leader-epoch entry waits
    # for this lock (real locks, a real append, held the way a busy writer thread can be held up).
    epochs_lock = log.leader_epoch_cache._lock  # the one place the window can be held open
    errors: list[BaseException] = []

    def append() -> None:
        try:
            log.append_as_leader(make_batch(2), 0)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread, which fails the test
            errors.append(e)

    with epochs_lock:
        writer = threading.Thread(target=append)
        writer.start()
        deadline = threading.Event()
        while log.active_segment.size == size and writer.is_alive():
            deadline.wait(0.001)  # until the batch is in the file (not a timing assertion: just a wait)
        assert log.active_segment.size > size, "the append did not reach the file"
        assert log.log_end_offset == end  # the window: in the file, not yet in the log
        after = _fetch_as_a_consumer_would(log, 0, isolation)
        assert after == end, f"read up to {after}, past the log end {end}"
        # ... so the fetcher's next offset is in range (given the batch, it would be told OFFSET_OUT_OF_RANGE).
        assert _fetch_as_a_consumer_would(log, after, isolation) == end
    writer.join()
    assert not errors, errors[0]
    assert log.log_end_offset == end + 2
    assert _fetch_as_a_consumer_would(log, end, FetchIsolation.LOG_END) == end + 2
    log.close()
