import struct
from pathlib import Path

from sofakafka.protocol.records import assign_offsets, iter_batches, read_batch_header
from sofakafka.storage.segment import LogSegment, RollParams, filename_prefix_from_offset

from .storage_helpers import make_batch


def stamped(count: int, base: int, timestamp: int = 1_000, value_size: int = 20) -> bytearray:
    buf = make_batch(count, timestamp=timestamp, value_size=value_size)
    assign_offsets(buf, base, log_append_time=None, partition_leader_epoch=0)
    return buf


def append(seg: LogSegment, buf: bytearray) -> None:
    seg.append(buf, list(iter_batches(buf)))


def test_segment_files_are_named_by_20_digit_base_offset(tmp_path: Path) -> None:
    assert filename_prefix_from_offset(0) == "00000000000000000000"
    assert filename_prefix_from_offset(123456789) == "00000000000123456789"
    seg = LogSegment.open(tmp_path, 123456789)
    append(seg, stamped(1, 123456789))
    seg.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00000000000123456789.index", "00000000000123456789.log", "00000000000123456789.timeindex"]


def test_log_file_holds_batches_exactly_as_appended(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0)
    a, b = stamped(3, 0), stamped(2, 3)
    append(seg, a)
    append(seg, b)
    seg.close()
    assert (tmp_path / "00000000000000000000.log").read_bytes() == bytes(a + b)


def test_index_entry_per_interval_points_at_batch_last_offset_and_position(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=300)
    positions = []
    offset = 0
    for i in range(10):
        buf = stamped(2, offset, timestamp=1000 + i * 10, value_size=100)
        positions.append((seg.size, offset + 1, 1000 + i * 10 + 1))
        append(seg, buf)
        offset += 2
    size = read_batch_header(stamped(2, 0, value_size=100))
    assert size is not None
    batch = size.size
    # Entry when more than 300 bytes were written since the last one: every (300 // batch + 1)-th batch.
    every = 300 // batch + 1
    expected_offsets = [(positions[i][1], positions[i][0]) for i in range(every, 10, every)]
    raw = seg.offset_index.raw_bytes()
    got = [(rel, pos) for rel, pos in struct.iter_unpack(">ii", raw)]
    assert got == expected_offsets
    times = [(ts, rel) for ts, rel in struct.iter_unpack(">qi", seg.time_index.raw_bytes())]
    assert times == [(positions[i][2], positions[i][1]) for i in range(every, 10, every)]
    seg.close()


def test_read_returns_a_slice_from_the_batch_holding_the_offset(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 50, index_interval_bytes=0)
    bufs = []
    for i in range(5):
        buf = stamped(3, 50 + 3 * i)
        bufs.append(bytes(buf))
        append(seg, buf)
    info = seg.read(57, 10_000)
    assert info is not None
    assert info.records.read_bytes() == b"".join(bufs[2:])
    assert info.fetch_offset_metadata.relative_position_in_segment == len(bufs[0]) * 2
    assert seg.read(65, 100) is None
    one = seg.read(50, 10, min_one_message=True)
    assert one is not None and one.records.read_bytes() == bufs[0]
    capped = seg.read(50, 10)
    assert capped is not None and capped.records.size == 10 and capped.first_entry_incomplete is True
    bounded = seg.read(50, 10_000, max_position=len(bufs[0]) * 2)
    assert bounded is not None and bounded.records.read_bytes() == bufs[0] + bufs[1]
    with open(tmp_path / "00000000000000000050.log", "rb") as f:
        f.seek(bounded.records.position)
        assert f.read(bounded.records.size) == bounded.records.read_bytes()
    assert seg.read_next_offset() == 65
    seg.close()


def test_find_offset_by_timestamp_returns_first_record_at_or_after(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=0)
    for i in range(4):
        append(seg, stamped(3, 3 * i, timestamp=100 * (i + 1)))  # records at 100,101,102 / 200,... / 400..
    found = seg.find_offset_by_timestamp(201, 0)
    assert found is not None and (found.timestamp, found.offset, found.leader_epoch) == (201, 4, 0)
    found = seg.find_offset_by_timestamp(150, 0)
    assert found is not None and (found.timestamp, found.offset) == (200, 3)
    found = seg.find_offset_by_timestamp(0, 7)
    assert found is not None and found.offset == 7
    assert seg.find_offset_by_timestamp(500, 0) is None
    seg.close()


def test_recover_truncates_garbage_tail_and_rebuilds_indexes(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=0)
    for i in range(6):
        append(seg, stamped(2, 2 * i, timestamp=10 * i))
    good_size = seg.size
    good_index = seg.offset_index.raw_bytes()
    good_time = seg.time_index.raw_bytes()
    seg.close()
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0c\x00\x00\x00\x40" + b"\xff" * 70)
    (tmp_path / "00000000000000000000.index").write_bytes(b"\x01\x02\x03")
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=0)
    assert seg.recover() == 82
    assert seg.size == good_size
    assert seg.offset_index.raw_bytes() == good_index
    assert seg.time_index.raw_bytes()[: len(good_time)] == good_time
    assert seg.read_next_offset() == 12
    seg.close()


def test_recover_stops_at_a_batch_with_a_bad_crc(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0)
    sizes = []
    for i in range(3):
        buf = stamped(2, 2 * i)
        sizes.append(len(buf))
        append(seg, buf)
    seg.close()
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[sizes[0] + 70] ^= 0xFF  # a record byte of the second batch
    path.write_bytes(bytes(data))
    seg = LogSegment.open(tmp_path, 0)
    assert seg.recover() == sizes[1] + sizes[2]
    assert seg.read_next_offset() == 2
    seg.close()


def test_truncate_to_cuts_at_the_batch_holding_the_offset(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=0)
    sizes = []
    for i in range(5):
        buf = stamped(2, 2 * i, timestamp=100 + i)
        sizes.append(len(buf))
        append(seg, buf)
    assert seg.truncate_to(6) == sizes[3] + sizes[4]
    assert seg.read_next_offset() == 6
    assert seg.offset_index.last_offset < 6
    assert seg.time_index.last_entry.offset < 6
    assert seg.max_timestamp_so_far == 103
    assert seg.truncate_to(100) == 0
    seg.close()


def test_should_roll_on_size_time_and_relative_offset_overflow(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, now_ms=1_000)
    buf = stamped(1, 0, timestamp=5_000)
    p = RollParams(max_segment_ms=1_000, max_segment_bytes=1_000, max_timestamp_in_messages=5_000,
                   max_offset_in_messages=1, messages_size=100, now_ms=1_500)
    assert not seg.should_roll(p)  # empty segment never rolls on size or time
    append(seg, buf)
    assert not seg.should_roll(p)
    assert seg.should_roll(RollParams(1_000, len(buf) + 99, 5_000, 1, 100, 1_500))
    assert seg.should_roll(RollParams(1_000, 10_000, 6_001, 1, 100, 1_500))  # first batch's timestamp + segment.ms
    assert seg.should_roll(RollParams(1_000, 10_000, 5_000, 2**31, 100, 1_500))
    seg.close()


def test_rename_to_deleted_keeps_the_open_file_readable(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0)
    append(seg, stamped(2, 0))
    info = seg.read(0, 1000)
    seg.change_file_suffixes("", ".deleted")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted"]
    assert info is not None and len(info.records.read_bytes()) == info.records.size
    seg.delete_files()
    assert list(tmp_path.iterdir()) == []
