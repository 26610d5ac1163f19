"""A log dir that cannot be used when the broker starts (Kafka's createAndValidateLogDirs and loadLogs): it is
offline from the start and the others are served; with none usable, start-up fails naming them all.

"Unusable" is what really raises OSError here, as root (chmod does not stop root): a regular file where the dir
should be, or a directory where a partition's segment file must be.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sofakafka.storage.errors import KafkaStorageError, LogDirError
from sofakafka.storage.log_manager import LogManager

from .storage_helpers import make_batch


def two_dirs_with_four_partitions(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    lm = LogManager([a, b])
    lm.startup()
    for p in range(4):
        lm.get_or_create_log("t", p).append_as_leader(make_batch(3), leader_epoch=0)
    assert {lm.log_dir_of("t", p) for p in range(4)} == {a.resolve(), b.resolve()}
    lm.shutdown()
    return a.resolve(), b.resolve()


def test_a_regular_file_in_place_of_a_log_dir_takes_it_offline_and_the_other_dir_is_served(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    b.write_text("not a directory")
    lm = LogManager([a, b])
    lm.startup()
    try:
        assert lm.online_log_dirs == [a.resolve()]
        assert "Failed to create or validate data directory" in lm.offline_log_dirs[b.resolve()]
        assert lm.get_or_create_log("t", 0).dir.parent == a.resolve()
    finally:
        lm.shutdown()
    assert b.read_text() == "not a directory"


def test_a_dir_whose_partition_cannot_be_loaded_goes_offline_with_every_log_of_it(tmp_path: Path) -> None:
    a, b = two_dirs_with_four_partitions(tmp_path)
    lm = LogManager([a, b])
    lm.startup()
    in_b = sorted(tp for tp in [("t", p) for p in range(4)] if lm.log_dir_of(*tp) == b)
    lm.shutdown()
    broken = b / f"{in_b[0][0]}-{in_b[0][1]}"
    for segment in broken.glob("*.log"):
        segment.unlink()
        segment.mkdir()  # a directory where the segment file must be: opening it raises IsADirectoryError
    lm = LogManager([a, b])
    lm.startup()
    try:
        assert lm.online_log_dirs == [a]
        assert "Error while loading log dir" in lm.offline_log_dirs[b]
        assert {(lg.topic, lg.partition) for lg in lm.all_logs} == {("t", p) for p in range(4)} - set(in_b)
        # Which partitions the dir held is not known: every replica without a log in an online dir is offline
        # (Kafka refuses to create a log that is not new while a dir is offline), not created empty in ``a``.
        assert lm.claim_offline_at_startup([("t", p) for p in range(4)]) == in_b
        for tp in in_b:
            assert lm.is_offline(*tp)
            with pytest.raises(KafkaStorageError):
                lm.get_or_create_log(*tp)
        # A partition placed here later is new: created in the online dir.
        assert lm.get_or_create_log("new", 0).dir.parent == a
    finally:
        lm.shutdown()


def test_claim_offline_at_startup_takes_nothing_when_every_dir_started(tmp_path: Path) -> None:
    a, b = two_dirs_with_four_partitions(tmp_path)
    lm = LogManager([a, b])
    lm.startup()
    try:
        assert lm.claim_offline_at_startup([("t", 9)]) == []
        assert not lm.is_offline("t", 9)
    finally:
        lm.shutdown()


def test_start_up_fails_naming_every_dir_when_none_is_usable(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("x")
    b.write_text("x")
    with pytest.raises(LogDirError, match=r"none of the specified log dirs from .*a, .*b can be created or validated"):
        LogManager([a, b]).startup()


def test_a_later_start_with_the_dir_usable_again_serves_it(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    b.write_text("x")
    lm = LogManager([a, b])
    lm.startup()
    lm.shutdown()
    b.unlink()
    lm = LogManager([a, b])
    lm.startup()
    try:
        assert not lm.offline_log_dirs and lm.online_log_dirs == [a.resolve(), b.resolve()]
    finally:
        lm.shutdown()
