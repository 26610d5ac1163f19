"""Readers on other threads while the writer appends, rolls and deletes segments: reads never fail on a
segment that retention removed under them, and never see a torn or foreign batch."""

from __future__ import annotations

import threading
from pathlib import Path

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
