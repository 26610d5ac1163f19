"""Kafka's text checkpoint files, written atomically.

Every checkpoint is ``<version>\\n<count>\\n`` then one entry per line: ``topic partition offset`` for the
per-log-dir offset checkpoints (recovery-point-offset-checkpoint, replication-offset-checkpoint,
log-start-offset-checkpoint, cleaner-offset-checkpoint) and ``epoch startOffset`` for a partition's
leader-epoch-checkpoint. Version is always 0.

Writes go to ``<name>.tmp``, are fsynced, renamed over the old file and the directory is fsynced, so a crash
leaves either the old or the new checkpoint, never a torn one. A file that does not parse raises
CheckpointFormatError naming the file and line: silently treating it as empty would let recovery skip data.

Thread-safety: one lock per file object; callers (LogManager's periodic tasks, the cleaner, Log for its
leader-epoch file) may call from any thread. All methods block on disk I/O.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Generic, TypeVar

from sofakafka.storage.errors import CheckpointFormatError

CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

T = TypeVar("T")

TopicPartition = tuple[str, int]


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside ``path`` durable (POSIX needs the directory itself synced)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves the old or the new content, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class CheckpointFile(Generic[T]):
    """A versioned checkpoint of entries of type ``T``, one per line, formatted by the given functions."""

    def __init__(self, path: Path, format_entry: Callable[[T], str],
                 parse_entry: Callable[[list[str]], T], fields: int) -> None:
        self.path = Path(path)
        self._format = format_entry
        self._parse = parse_entry
        self._fields = fields
        self._lock = threading.Lock()

    def write(self, entries: Iterable[T]) -> None:
        self.write_lines([self._format(e) for e in entries])

    def write_lines(self, lines: list[str]) -> None:
        """Entries already formatted, one a line: the version and count lines go before them."""
        with self._lock:
            atomic_write_text(self.path, "\n".join([str(CHECKPOINT_VERSION), str(len(lines)), *lines]) + "\n")

    def read(self) -> list[T]:
        """Entries in file order; a missing file reads as empty (a fresh log dir has none yet)."""
        with self._lock:
            try:
                text = self.path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return []
        return self._parse_text(text)

    def _parse_text(self, text: str) -> list[T]:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            raise CheckpointFormatError(self.path, 1, "empty file, expected a version line")
        if lines[0].strip() != str(CHECKPOINT_VERSION):
            raise CheckpointFormatError(self.path, 1, f"unrecognized version {lines[0]!r}, expected 0")
        if len(lines) < 2:
            raise CheckpointFormatError(self.path, 2, "missing entry count line")
        try:
            count = int(lines[1].strip())
        except ValueError:
            raise CheckpointFormatError(self.path, 2, f"entry count {lines[1]!r} is not an integer") from None
        if count < 0:
            raise CheckpointFormatError(self.path, 2, f"negative entry count {count}")
        body = lines[2:]
        if len(body) != count:
            raise CheckpointFormatError(self.path, 2 + min(len(body), count) + (1 if len(body) > count else 0),
                                        f"expected {count} entries, found {len(body)}")
        out: list[T] = []
        for i, line in enumerate(body, start=3):
            parts = line.split()
            if len(parts) != self._fields:
                raise CheckpointFormatError(self.path, i, f"expected {self._fields} fields, got {line!r}")
            try:
                out.append(self._parse(parts))
            except ValueError as e:
                raise CheckpointFormatError(self.path, i, f"bad entry {line!r}: {e}") from None
        return out


def _parse_offset_entry(parts: list[str]) -> tuple[TopicPartition, int]:
    return (parts[0], int(parts[1])), int(parts[2])


def _format_offset_entry(entry: tuple[TopicPartition, int]) -> str:
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


class OffsetCheckpointFile:
    """``topic partition offset`` checkpoints kept per log directory (recovery point, HW, log start, cleaner)."""

    def __init__(self, path: Path) -> None:
        self._file: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, _format_offset_entry, _parse_offset_entry, 3)

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        # Sorted so the file is deterministic; Kafka does not promise an order, readers must not care.
        self._file.write(sorted(offsets.items()))

    def write_lines(self, lines: list[str]) -> None:
        """``topic partition offset`` lines already formatted (OffsetCheckpointWriter's)."""
        self._file.write_lines(lines)

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._file.read())


class OffsetCheckpointWriter:
    """One ``topic partition offset`` checkpoint written over and over (the log manager's recovery points, log
    start offsets and high watermarks, every few seconds, for every partition of a log dir).

    A write of the offsets it wrote last is skipped: the file already says exactly that. Otherwise only the lines
    of partitions whose offset changed are formatted again, and the partitions keep the order of the last write
    while they stay the same set. The bytes written are those :meth:`OffsetCheckpointFile.write` makes of the
    same offsets. At 100,000 partitions the full format-and-write took most of a leader's interpreter while a
    broker rejoined (every five seconds, with nothing changed)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file = OffsetCheckpointFile(path)
        self._lock = threading.Lock()
        self._last: dict[TopicPartition, int] | None = None
        self._order: list[TopicPartition] = []
        self._lines: dict[TopicPartition, str] = {}

    def write(self, offsets: dict[TopicPartition, int]) -> bool:
        """Write ``offsets`` unless they are what the last write wrote; whether the file was written. The writer
        keeps ``offsets`` to compare the next write with: the caller hands over a mapping it no longer changes."""
        with self._lock:
            last = self._last
            if offsets == last:
                return False
            if last is None or offsets.keys() != last.keys():
                self._order = sorted(offsets)
                self._lines = {tp: _format_offset_entry((tp, offsets[tp])) for tp in self._order}
            else:
                lines = self._lines
                for tp, offset in offsets.items():
                    if last[tp] != offset:
                        lines[tp] = _format_offset_entry((tp, offset))
            self._last = None  # until the file says it: a failed write must not be skipped next time
            self._file.write_lines([self._lines[tp] for tp in self._order])
            self._last = offsets
            return True


def _parse_epoch_entry(parts: list[str]) -> tuple[int, int]:
    return int(parts[0]), int(parts[1])


class LeaderEpochCheckpointFile:
    """A partition's ``leader-epoch-checkpoint``: ``epoch startOffset`` lines in epoch order."""

    def __init__(self, path: Path) -> None:
        self._file: CheckpointFile[tuple[int, int]] = CheckpointFile(
            path, lambda e: f"{e[0]} {e[1]}", _parse_epoch_entry, 2)

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self._file.write(entries)

    def read(self) -> list[tuple[int, int]]:
        return self._file.read()
