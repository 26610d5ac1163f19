import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.storage.errors import CorruptIndexError, InvalidOffsetError
from sofakafka.storage.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset


def test_offset_index_entries_are_int32_relative_offset_then_int32_position(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 80)
    idx.append(103, 4096)
    idx.append(170, 9000)
    assert idx.raw_bytes() == struct.pack(">ii", 3, 4096) + struct.pack(">ii", 70, 9000)
    idx.close()
    assert (tmp_path / "00000000000000000100.index").read_bytes() == idx_bytes([(3, 4096), (70, 9000)])


def idx_bytes(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">ii", r, p) for r, p in entries)


def test_time_index_entries_are_int64_timestamp_then_int32_relative_offset(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, 120)
    idx.maybe_append(1_600_000_000_000, 100)
    idx.maybe_append(1_600_000_000_005, 142)
    idx.close()
    assert (tmp_path / "00000000000000000100.timeindex").read_bytes() == (
        struct.pack(">qi", 1_600_000_000_000, 0) + struct.pack(">qi", 1_600_000_000_005, 42))


def test_active_index_is_preallocated_rounded_down_and_trimmed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 100)
    idx.resize(100)
    idx.append(5, 10)
    assert path.stat().st_size == 96  # 100 rounded down to a multiple of 8
    assert idx.max_entries == 12
    idx.trim_to_valid_size()
    assert path.stat().st_size == 8
    idx.close()
    t = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 100)
    t.resize(100)
    t.maybe_append(1, 1)
    assert t.path.stat().st_size == 96
    t.close()
    assert t.path.stat().st_size == 12


def test_reopened_preallocated_index_counts_only_written_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 800)
    idx.resize(800)
    for i in range(1, 6):
        idx.append(i * 10, i * 100)
    idx.flush()
    idx.close_handler()  # a crash: the file is still preallocated
    assert path.stat().st_size == 800
    again = OffsetIndex(path, 0, 800)
    assert again.entries == 5
    assert again.last_offset == 50
    assert again.lookup(33) == OffsetPosition(30, 300)
    again.close()


def test_offset_lookup_is_a_floor_search_with_base_fallback(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 1000, 8000)
    for i in range(1, 100):
        idx.append(1000 + i * 7, i * 50)
    assert idx.lookup(999) == OffsetPosition(1000, 0)
    assert idx.lookup(1006) == OffsetPosition(1000, 0)
    assert idx.lookup(1007) == OffsetPosition(1007, 50)
    assert idx.lookup(1013) == OffsetPosition(1007, 50)
    assert idx.lookup(10**9) == OffsetPosition(1000 + 99 * 7, 99 * 50)
    idx.close()


@given(st.lists(st.integers(1, 50), min_size=0, max_size=60), st.integers(0, 4000))
def test_offset_lookup_matches_linear_floor(tmp_path_factory: pytest.TempPathFactory, gaps: list[int],
                                            target: int) -> None:
    path = tmp_path_factory.mktemp("idx") / "x.index"
    idx = OffsetIndex(path, 0, 8 * 100)
    offsets, offset = [], 0
    for i, g in enumerate(gaps):
        offset += g
        idx.append(offset, i * 10 + 1)
        offsets.append((offset, i * 10 + 1))
    expected = OffsetPosition(0, 0)
    for o, p in offsets:
        if o <= target:
            expected = OffsetPosition(o, p)
    assert idx.lookup(target) == expected
    idx.close()


def test_offset_index_refuses_out_of_order_full_and_overflowing_appends(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 0, 16)
    idx.resize(16)
    idx.append(5, 0)
    with pytest.raises(InvalidOffsetError):
        idx.append(5, 10)
    idx.append(6, 10)
    assert idx.is_full()
    with pytest.raises(InvalidOffsetError):
        idx.append(7, 20)
    idx.close()
    big = OffsetIndex(tmp_path / "b.index", 0, 16)
    with pytest.raises(InvalidOffsetError):
        big.append(2**31, 0)
    big.close()


def test_truncate_to_removes_entries_at_or_after_offset(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 0, 800)
    for o in (10, 20, 30, 40):
        idx.append(o, o * 10)
    idx.truncate_to(30)
    assert idx.entries == 2 and idx.last_offset == 20
    idx.truncate_to(25)
    assert idx.entries == 2
    idx.truncate_to(0)
    assert idx.entries == 0 and idx.last_offset == 0
    idx.close()
    t = TimeIndex(tmp_path / "a.timeindex", 0, 800)
    for o in (10, 20, 30):
        t.maybe_append(o * 100, o)
    t.truncate_to(20)
    assert t.entries == 1 and t.last_entry == TimestampOffset(1000, 10)
    t.close()


def test_time_index_keeps_only_increasing_timestamps_and_floors_lookups(tmp_path: Path) -> None:
    t = TimeIndex(tmp_path / "a.timeindex", 50, 1200)
    t.maybe_append(100, 50)
    t.maybe_append(100, 60)  # same timestamp: no new entry
    t.maybe_append(200, 70)
    assert t.entries == 2
    assert t.lookup(99) == TimestampOffset(-1, 50)
    assert t.lookup(150) == TimestampOffset(100, 50)
    assert t.lookup(10**12) == TimestampOffset(200, 70)
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(300, 60)
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(150, 80)
    t.close()


def test_sanity_check_rejects_torn_and_disordered_index_files(tmp_path: Path) -> None:
    torn = tmp_path / "torn.index"
    torn.write_bytes(idx_bytes([(1, 10)]) + b"\x00\x01\x02")
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        _ = OffsetIndex(torn, 0).entries
    disorder = tmp_path / "disorder.index"
    disorder.write_bytes(idx_bytes([(5, 100), (3, 200)]))
    idx = OffsetIndex(disorder, 0)
    with pytest.raises(CorruptIndexError, match="out of order"):
        idx.sanity_check(1000)
    idx.close()
    beyond = tmp_path / "beyond.index"
    beyond.write_bytes(idx_bytes([(5, 100), (6, 5000)]))
    idx = OffsetIndex(beyond, 0)
    with pytest.raises(CorruptIndexError, match="beyond log size"):
        idx.sanity_check(1000)
    idx.close()
    tdis = tmp_path / "t.timeindex"
    tdis.write_bytes(struct.pack(">qi", 10, 5) + struct.pack(">qi", 5, 6))
    t = TimeIndex(tdis, 0)
    with pytest.raises(CorruptIndexError):
        t.sanity_check()
    t.close()


@given(st.integers(0, 200), st.booleans(), st.integers(0, 4))
def test_a_crashed_preallocated_index_counts_exactly_the_entries_written(written: int, first_is_zero: bool,
                                                                         spare: int) -> None:
    """The count comes from a binary search for the first all-zero slot past slot 0 (module doc), and agrees
    with the entries written whatever their number, including none, all of the slots, and a first entry of
    offset 0 at position 0 (all zeros) -- which is not counted only when nothing follows it."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000000000.index"
        slots = written + spare
        idx = OffsetIndex(path, 0, max(8, slots * 8))
        idx.resize(max(8, slots * 8))
        for i in range(written):
            idx.append(i * 3 if first_is_zero else i * 3 + 1, i * 100)
        idx.close_handler()  # a crash: the file keeps its preallocated length
        again = OffsetIndex(path, 0, max(8, slots * 8))
        expected = 0 if written == 1 and first_is_zero else written
        assert again.entries == expected
        if expected:
            assert again.last_offset == (written - 1) * 3 + (0 if first_is_zero else 1)
        again.close_handler()
        t_path = Path(tmp) / "00000000000000000000.timeindex"
        t = TimeIndex(t_path, 0, max(12, (slots + 1) * 12))
        t.resize(max(12, (slots + 1) * 12))
        for i in range(written):
            t.maybe_append(i * 5 if first_is_zero else 1_700_000_000_000 + i, i)
        t.close_handler()
        t_again = TimeIndex(t_path, 0, max(12, (slots + 1) * 12))
        assert t_again.entries == expected
        t_again.close_handler()
