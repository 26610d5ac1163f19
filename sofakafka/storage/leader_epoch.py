"""Leader-epoch cache: which offset each leader epoch started at (KIP-101, KIP-279).

A follower asks the leader "where does my latest epoch end?" (OffsetsForLeaderEpoch) and truncates to the
answer instead of to its high watermark, which is what keeps replicas from diverging after leader changes.
The cache is the list of (epoch, start offset) pairs, strictly increasing in both, persisted in the
partition's ``leader-epoch-checkpoint`` after every change.

Caller: the partition's Log, under the Log's lock (appends, truncations, log start moves); ``end_offset_for``
and the read-only properties may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from sofakafka.storage.checkpoints import LeaderEpochCheckpointFile

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """Epoch -> start offset, backed by a checkpoint file (``checkpoint=None`` keeps it in memory only)."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None) -> None:
        self._checkpoint = checkpoint
        self._name = checkpoint.path.parent.name if checkpoint is not None else "leader epochs"
        self._lock = threading.RLock()
        self._epochs: list[EpochEntry] = []
        if checkpoint is not None:
            for epoch, offset in checkpoint.read():
                self._epochs.append(EpochEntry(epoch, offset))

    @classmethod
    def for_dir(cls, log_dir: Path) -> LeaderEpochFileCache:
        from sofakafka.storage.checkpoints import LEADER_EPOCH_CHECKPOINT

        return cls(LeaderEpochCheckpointFile(Path(log_dir) / LEADER_EPOCH_CHECKPOINT))

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._epochs)

    @property
    def latest_epoch(self) -> int | None:
        with self._lock:
            return self._epochs[-1].epoch if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._epochs[0] if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` began at ``start_offset`` (called for every appended v2 batch's epoch).

        A repeat of the latest epoch at a later offset changes nothing; an entry that contradicts the new one
        (same or later epoch, or same or later start offset) is dropped, as the new leader's view wins.
        """
        if epoch < 0 or start_offset < 0:
            return
        with self._lock:
            if self._epochs:
                last = self._epochs[-1]
                if last.epoch == epoch and start_offset >= last.start_offset:
                    return
            kept = [e for e in self._epochs if e.epoch < epoch and e.start_offset < start_offset]
            if len(kept) < len(self._epochs) and self._epochs[-1].epoch > epoch:
                # An older epoch than the latest arriving means a batch stamped with a superseded epoch reached the
                # log (Kafka warns too): where the dropped epochs began is lost, and with it true OffsetsForLeaderEpoch
                # answers for them.
                log.warning("%s: leader epoch %d at offset %d drops the later entries %s", self._name, epoch,
                            start_offset, [(e.epoch, e.start_offset) for e in self._epochs if e not in kept])
            self._epochs = kept
            self._epochs.append(EpochEntry(epoch, start_offset))
            self._flush()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) to answer OffsetsForLeaderEpoch for ``requested_epoch``.

        The end offset of an epoch is the start offset of the next higher epoch we know, or the log end offset
        for the latest epoch. For an epoch we never saw, the largest known epoch below it is reported with the
        end offset of the range containing it (KIP-279), so the follower truncates to a common point.
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == self._epochs[-1].epoch:
                return requested_epoch, log_end_offset
            higher = next((e for e in self._epochs if e.epoch > requested_epoch), None)
            if higher is None:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            floor = None
            for e in self._epochs:
                if e.epoch <= requested_epoch:
                    floor = e
            if floor is None:
                return requested_epoch, higher.start_offset
            return floor.epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in force when ``offset`` was written, if the cache covers it."""
        with self._lock:
            found = None
            for e in self._epochs:
                if e.start_offset <= offset:
                    found = e.epoch
                else:
                    break
            return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was truncated there)."""
        with self._lock:
            if end_offset >= 0 and self._epochs and self._epochs[-1].start_offset >= end_offset:
                self._epochs = [e for e in self._epochs if e.start_offset < end_offset]
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly before ``start_offset``; the one in force there now starts at ``start_offset``."""
        with self._lock:
            before = [e for e in self._epochs if e.start_offset < start_offset]
            if not before:
                return
            after = [e for e in self._epochs if e.start_offset >= start_offset]
            self._epochs = [EpochEntry(before[-1].epoch, start_offset), *after]
            self._flush()

    def move_checkpoint(self, checkpoint: LeaderEpochCheckpointFile, *, write: bool = False) -> None:
        """Keep the entries in ``checkpoint`` from now on (the log's directory was renamed or replaced); with
        ``write`` they are written there at once."""
        with self._lock:
            self._checkpoint = checkpoint
            if write:
                self._flush()

    def clear_and_flush(self) -> None:
        with self._lock:
            self._epochs = []
            self._flush()

    def _flush(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.write((e.epoch, e.start_offset) for e in self._epochs)
