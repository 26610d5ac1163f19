"""The leader append's one-parse path stores exactly what the protocol's reference stamping
(``assign_offsets``) produces, answers the same, and rejects bad input before anything reaches the log."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sofakafka.protocol.records import assign_offsets, iter_batches, read_batch_header
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import CorruptLogError
from sofakafka.storage.log import Log

from .storage_helpers import FakeClock, make_batch

batch_specs = st.lists(
    st.tuples(st.integers(1, 6), st.integers(0, 40), st.integers(0, 50_000)),
    min_size=1, max_size=4)


def build(specs: list[tuple[int, int, int]], first_offset: int) -> bytearray:
    """Batches carrying junk base offsets, as a producer sends them (the leader overwrites them)."""
    out = bytearray()
    for count, value_size, ts_step in specs:
        out += make_batch(count, value_size=value_size, timestamp=1_000 + ts_step, base_offset=first_offset)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(appends=st.lists(st.tuples(batch_specs, st.integers(0, 7), st.integers(0, 1_000)), min_size=1, max_size=5),
       log_append_time=st.booleans())
def test_leader_append_stores_what_the_reference_stamping_gives(tmp_path_factory: pytest.TempPathFactory,
                                                                appends: list[tuple[list[tuple[int, int, int]],
                                                                                    int, int]],
                                                                log_append_time: bool) -> None:
    clock = FakeClock()
    config = LogConfig.from_props({"message.timestamp.type": "LogAppendTime" if log_append_time else "CreateTime",
                                   "segment.bytes": 2_000, "index.interval.bytes": 100})
    log = Log(tmp_path_factory.mktemp("leader") / "t-0", config, time_ms=clock)
    expected = b""
    for specs, epoch, junk_offset in appends:
        clock.advance(1)
        buf = build(specs, junk_offset)
        reference = bytearray(buf)
        assigned = assign_offsets(reference, log.log_end_offset, partition_leader_epoch=epoch,
                                  log_append_time=clock.now if log_append_time else None)
        info = log.append_as_leader(buf, epoch)
        assert bytes(buf) == bytes(reference)  # stamped in place exactly as the reference stamps
        assert (info.first_offset, info.last_offset, info.max_timestamp, info.offset_of_max_timestamp) == \
            (assigned.first_offset, assigned.last_offset, assigned.max_timestamp,
             assigned.shallow_offset_of_max_timestamp)
        assert info.record_count == sum(h.record_count for h in iter_batches(reference))
        assert info.log_append_time == (clock.now if log_append_time else -1)
        expected += bytes(reference)
    assert b"".join(log.iter_batches_bytes()) == expected
    assert log.leader_epoch_cache.latest_epoch == appends[-1][1]
    log.close()


@pytest.mark.parametrize("damage", ["crc", "length_past_end", "trailing_bytes", "magic"])
def test_bad_leader_input_is_refused_before_anything_is_appended(tmp_path: Path, damage: str) -> None:
    log = Log(tmp_path / "t-0", LogConfig(), time_ms=FakeClock())
    log.append_as_leader(make_batch(2), 0)
    buf = make_batch(3) + make_batch(2)
    second = read_batch_header(buf, read_batch_header(buf, 0).end)  # type: ignore[union-attr]
    assert second is not None
    if damage == "crc":
        buf[second.end - 1] ^= 0xFF  # inside the CRC range of the second batch
    elif damage == "length_past_end":
        buf[second.position + 11] += 1
    elif damage == "trailing_bytes":
        buf += b"\0" * 7
    else:
        buf[second.position + 16] = 1
    with pytest.raises((CorruptLogError, ValueError)):
        log.append_as_leader(buf, 0)
    assert log.log_end_offset == 2
    assert len(list(log.iter_batches_bytes())) == 1
    log.close()
