import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.storage import checkpoints
from sofakafka.storage.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    OffsetCheckpointWriter,
)
from sofakafka.storage.errors import CheckpointFormatError


def test_checkpoint_file_names_are_kafkas() -> None:
    assert RECOVERY_POINT_CHECKPOINT == "recovery-point-offset-checkpoint"
    assert REPLICATION_OFFSET_CHECKPOINT == "replication-offset-checkpoint"
    assert LOG_START_OFFSET_CHECKPOINT == "log-start-offset-checkpoint"
    assert CLEANER_OFFSET_CHECKPOINT == "cleaner-offset-checkpoint"
    assert LEADER_EPOCH_CHECKPOINT == "leader-epoch-checkpoint"


def test_offset_checkpoint_is_version_count_then_topic_partition_offset_lines(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT)
    f.write({("orders", 1): 42, ("orders", 0): 7, ("a.b_c-d", 12): 0})
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_bytes() == (
        b"0\n3\na.b_c-d 12 0\norders 0 7\norders 1 42\n")
    assert f.read() == {("orders", 1): 42, ("orders", 0): 7, ("a.b_c-d", 12): 0}
    assert not (tmp_path / (RECOVERY_POINT_CHECKPOINT + ".tmp")).exists()


def test_empty_and_missing_offset_checkpoints(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "x")
    assert f.read() == {}
    f.write({})
    assert (tmp_path / "x").read_bytes() == b"0\n0\n"
    assert f.read() == {}


def test_leader_epoch_checkpoint_is_version_count_then_epoch_offset_lines(tmp_path: Path) -> None:
    f = LeaderEpochCheckpointFile(tmp_path / LEADER_EPOCH_CHECKPOINT)
    f.write([(0, 0), (3, 150), (4, 900)])
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n3\n0 0\n3 150\n4 900\n"
    assert f.read() == [(0, 0), (3, 150), (4, 900)]


def test_kafka_written_checkpoint_parses(tmp_path: Path) -> None:
    # Kafka's writer ends every line with a newline, as we do; a file without the final newline reads too.
    (tmp_path / "c").write_text("0\n2\nt 0 5\nt 1 6")
    assert OffsetCheckpointFile(tmp_path / "c").read() == {("t", 0): 5, ("t", 1): 6}


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        ("", 1, "empty"),
        ("1\n0\n", 1, "version"),
        ("0\n", 2, "count"),
        ("0\nx\n", 2, "not an integer"),
        ("0\n2\nt 0 5\n", 3, "expected 2 entries"),
        ("0\n1\nt 0\n", 3, "expected 3 fields"),
        ("0\n1\nt zero 5\n", 3, "bad entry"),
        ("0\n1\nt 0 5\nt 1 6\n", 4, "expected 1 entries"),
    ],
)
def test_malformed_checkpoint_names_file_and_line(tmp_path: Path, content: str, line: int, reason: str) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_text(content)
    with pytest.raises(CheckpointFormatError, match=reason) as info:
        OffsetCheckpointFile(path).read()
    assert info.value.path == path
    assert info.value.line_number == line
    assert str(path) in str(info.value)


def test_rewrite_replaces_content_atomically(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "c")
    f.write({("t", 0): 1})
    f.write({("t", 0): 2, ("u", 3): 4})
    assert f.read() == {("t", 0): 2, ("u", 3): 4}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


offsets_maps = st.lists(
    st.dictionaries(st.tuples(st.sampled_from(["a", "b", "topic.with-dots_1"]), st.integers(0, 5)),
                    st.integers(0, 2**40), max_size=12),
    min_size=1, max_size=8)


@given(offsets_maps)
def test_the_writer_writes_what_offset_checkpoint_file_writes_after_any_sequence(maps: list[dict[tuple[str, int], int]]
                                                                                ) -> None:
    """Partitions coming, going and moving, in any order: after each write the file holds the very bytes
    OffsetCheckpointFile would have written for those offsets."""
    with tempfile.TemporaryDirectory() as d:
        ours, theirs = Path(d) / "ours", Path(d) / "theirs"
        writer = OffsetCheckpointWriter(ours)
        for offsets in [*maps, *reversed(maps)]:
            writer.write(dict(offsets))
            OffsetCheckpointFile(theirs).write(offsets)
            assert ours.read_bytes() == theirs.read_bytes()
            assert OffsetCheckpointFile(ours).read() == offsets


def test_the_writer_skips_a_write_of_what_the_file_already_says(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    writer = OffsetCheckpointWriter(path)
    assert writer.write({("t", 0): 5, ("t", 1): 7}) is True
    inode = path.stat().st_ino  # an atomic write replaces the file: a new inode
    assert writer.write({("t", 0): 5, ("t", 1): 7}) is False
    assert path.stat().st_ino == inode
    # One offset moves by one: written.
    assert writer.write({("t", 0): 6, ("t", 1): 7}) is True
    assert path.stat().st_ino != inode
    assert OffsetCheckpointFile(path).read() == {("t", 0): 6, ("t", 1): 7}
    # Same offsets, one partition more or one fewer: written.
    assert writer.write({("t", 0): 6, ("t", 1): 7, ("t", 2): 0}) is True
    assert writer.write({("t", 0): 6, ("t", 1): 7}) is True
    assert OffsetCheckpointFile(path).read() == {("t", 0): 6, ("t", 1): 7}


def test_a_failed_write_leaves_nothing_behind_for_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file still says what the last good write said; the next write, whatever it changes, says exactly its
    own offsets (not a line the failed write had formatted)."""
    path = tmp_path / "recovery-point-offset-checkpoint"
    writer = OffsetCheckpointWriter(path)
    writer.write({("t", 0): 1, ("t", 1): 1})

    def full(p: Path, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoints, "atomic_write_text", full)
    with pytest.raises(OSError):
        writer.write({("t", 0): 2, ("t", 1): 1})
    monkeypatch.undo()
    assert OffsetCheckpointFile(path).read() == {("t", 0): 1, ("t", 1): 1}
    assert writer.write({("t", 0): 1, ("t", 1): 2}) is True
    assert OffsetCheckpointFile(path).read() == {("t", 0): 1, ("t", 1): 2}
