import logging
from pathlib import Path

import pytest

from sofakafka.storage.checkpoints import LeaderEpochCheckpointFile
from sofakafka.storage.leader_epoch import EpochEntry, LeaderEpochFileCache


def cache(tmp_path: Path) -> LeaderEpochFileCache:
    return LeaderEpochFileCache(LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint"))


def test_assign_keeps_first_offset_of_each_epoch_and_persists(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.assign(2, 6)
    c.assign(2, 10)  # same epoch later: ignored
    c.assign(3, 8)
    assert c.entries == [EpochEntry(2, 6), EpochEntry(3, 8)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n2 6\n3 8\n"
    assert cache(tmp_path).entries == [EpochEntry(2, 6), EpochEntry(3, 8)]


def test_assign_of_older_or_overlapping_epoch_drops_conflicting_entries(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.assign(1, 0)
    c.assign(2, 10)
    c.assign(3, 20)
    c.assign(2, 15)  # a new leader says epoch 2 starts at 15: entries at epoch>=2 or offset>=15 go
    assert c.entries == [EpochEntry(1, 0), EpochEntry(2, 15)]


def test_an_older_epoch_dropping_later_ones_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Only a batch stamped with a superseded epoch does that (a leader's append racing its epoch change did):
    the warning names what was lost."""
    c = cache(tmp_path)
    c.assign(1, 3)
    c.assign(2, 5)
    with caplog.at_level(logging.WARNING, logger="sofakafka.storage.leader_epoch"):
        c.assign(2, 4)  # the same epoch earlier: a follower's correction, not worth a word
        assert caplog.records == []
        c.assign(1, 5)
    assert c.entries == [EpochEntry(1, 5)]
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path.name}: leader epoch 1 at offset 5 drops the later entries [(1, 3), (2, 4)]"]


def test_end_offset_for_follows_kip_101_and_279(tmp_path: Path) -> None:
    c = cache(tmp_path)
    assert c.end_offset_for(0, 100) == (-1, -1)
    c.assign(1, 0)
    c.assign(3, 50)
    c.assign(5, 80)
    assert c.end_offset_for(5, 100) == (5, 100)  # latest epoch ends at the log end
    assert c.end_offset_for(3, 100) == (3, 80)
    assert c.end_offset_for(1, 100) == (1, 50)
    assert c.end_offset_for(2, 100) == (1, 50)  # unknown epoch: largest epoch below it (KIP-279)
    assert c.end_offset_for(4, 100) == (3, 80)
    assert c.end_offset_for(0, 100) == (0, 0)  # below every known epoch: ends where the first starts
    assert c.end_offset_for(6, 100) == (-1, -1)
    assert c.end_offset_for(-1, 100) == (-1, -1)


def test_truncate_from_end_and_start(tmp_path: Path) -> None:
    c = cache(tmp_path)
    for epoch, offset in ((1, 0), (2, 10), (3, 20), (4, 30)):
        c.assign(epoch, offset)
    c.truncate_from_end(20)
    assert c.entries == [EpochEntry(1, 0), EpochEntry(2, 10)]
    c.truncate_from_start(15)
    assert c.entries == [EpochEntry(2, 15)]
    c.truncate_from_start(5)
    assert c.entries == [EpochEntry(2, 15)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n2 15\n"
    assert c.epoch_for_offset(16) == 2 and c.epoch_for_offset(3) is None
    c.clear_and_flush()
    assert c.entries == [] and c.latest_epoch is None
