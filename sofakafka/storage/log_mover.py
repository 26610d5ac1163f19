"""Moving a replica between log directories of one broker (KIP-113): the copier that fills future replicas.

AlterReplicaLogDirs asks the log manager to move a partition's log to another of ``log.dirs``; the manager
creates an empty *future replica* there (``<topic>-<partition>.<id>-future``, Kafka 2.6's name) and this mover
fills it from the current log while the partition keeps serving: reads of the current log (lock-free, like a
fetch), appends of whole batches to the future one (``Log.append_as_follower``, offsets and epochs as they
are), the future's high watermark and log start following the current's. Once the copy has reached the
current log's end, the manager swaps them under the current log's lock (``LogMoveHost.complete_move``): the
last batches are copied there while appends wait, then the directories are renamed and the log everybody holds
takes the copy's segments. Kafka's ReplicaAlterLogDirsThread, which does the same through the fetch path.

Divergence. The current log may be cut back while it is copied (a follower truncating by leader epoch, one
restarting empty past its leader's log start, retention moving its start). Each round compares the current
log's truncation count with the one the copy last reconciled at; when it changed (and when a move starts,
perhaps resumed after a restart), the future replica is truncated to the longest prefix both logs share, by
leader epoch as a follower truncates against its leader (:func:`common_prefix_end`), or restarted empty at the
current log start when they share nothing. A swap happens only at an unchanged count, under the lock that every
truncation takes, so what is swapped in is the current log's exact copy.

Threads: ``num.replica.alter.log.dirs.threads`` (default: one per log dir), each moving one partition at a time
to completion, lowest topic-partition first, as Kafka's do. ``replica.alter.log.dirs.io.max.bytes.per.second``
bounds the bytes all of them copy per second (:meth:`LogDirMover.set_rate`). Blocking, no asyncio: the threads
are this module's own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sofakafka.protocol.records import iter_batches
from sofakafka.storage.errors import OffsetOutOfRangeError, StorageError, UnexpectedAppendOffsetError
from sofakafka.storage.log import FetchIsolation, Log

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Bytes one round copies (Kafka's ``replica.fetch.max.bytes`` default); also the most the swap copies while
#: the current log's appends wait.
DEFAULT_CHUNK_BYTES = 1_048_576
UNLIMITED_RATE = (1 << 63) - 1
_BACKOFF_S = 1.0


class LogMoveHost(Protocol):
    """What the mover needs from the log manager (which implements it)."""

    def moves_pending(self) -> list[TopicPartition]:
        """Partitions with a future replica, in no particular order."""
        ...

    def move_pair(self, tp: TopicPartition) -> tuple[Log, Log] | None:
        """(current, future) of a partition being moved, None once the move ended (done, cancelled, failed)."""
        ...

    def complete_move(self, tp: TopicPartition, truncations: int, catch_up_bytes: int,
                      copy: Callable[[Log, Log, int], int]) -> bool:
        """Swap the future replica in if the current log was not cut back since ``truncations`` and the copy
        catches up within ``catch_up_bytes`` (``copy`` does it); True when the move is done."""
        ...


def whole_batches(data: bytes) -> bytes:
    """``data`` cut after its last complete batch (a read stops at a byte limit, maybe inside a batch)."""
    end = 0
    for header in iter_batches(data):
        end = header.end
    return data[:end]


def copy_chunk(current: Log, future: Log, max_bytes: int) -> int:
    """Append to ``future`` the batches of ``current`` from the future's end, about ``max_bytes`` of them (at
    least one batch); returns the bytes appended. OffsetOutOfRangeError when the future's end is outside the
    current log (below its start: retention went past it; above its end: the current log was cut back)."""
    start = future.log_end_offset
    if start >= current.log_end_offset:
        if start > current.log_end_offset:
            raise OffsetOutOfRangeError(f"{future.dir.name}: copy ends at {start}, past the current log's end "
                                        f"{current.log_end_offset}")
        return 0
    info = current.read(start, max_bytes, isolation=FetchIsolation.LOG_END, min_one_message=True)
    data = whole_batches(info.records.read_bytes())
    if not data:
        return 0
    future.append_as_follower(data)
    return len(data)


def common_prefix_end(current: Log, future: Log) -> int | None:
    """Where ``future`` (a copy of ``current``) stops agreeing with it: the offset to truncate the copy to, or
    None when they share nothing (the copy restarts empty at the current log's start).

    By leader epoch, as a follower against its leader (KIP-101/279): the current log's end offset for the copy's
    latest epoch, or, when the current log never had that epoch, the lower of the current's end for its own
    largest epoch below it and the copy's end for that epoch. Without epochs (only v0/v1 batches), the current
    log's high watermark, below which nothing is ever cut back.
    """
    latest = future.leader_epoch_cache.latest_epoch
    if latest is None:
        target = min(future.log_end_offset, current.high_watermark)
    else:
        epoch, end = current.end_offset_for_epoch(latest)
        if epoch < 0 or end < 0:
            return None
        if epoch == latest:
            target = min(end, future.log_end_offset)
        else:
            _, future_end = future.end_offset_for_epoch(epoch)
            target = min(end, future_end if future_end >= 0 else future.log_end_offset)
    if target < current.log_start_offset or target < future.log_start_offset:
        return None
    return target


def reconcile(current: Log, future: Log) -> None:
    """Cut ``future`` back to what it shares with ``current`` (see :func:`common_prefix_end`)."""
    target = common_prefix_end(current, future)
    if target is None:
        if future.log_end_offset != current.log_start_offset or future.log_start_offset != current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
    elif target < future.log_end_offset:
        future.truncate_to(target)


def follow_current(current: Log, future: Log) -> None:
    """The copy's high watermark and log start follow the current log's, within what the copy holds."""
    future.update_high_watermark(min(current.high_watermark, future.log_end_offset))
    start = current.log_start_offset
    if future.log_start_offset < start <= future.high_watermark:
        future.maybe_increment_log_start_offset(start)
        future.delete_segments_below_log_start()


@dataclass
class MoveProgress:
    """One partition's move as its copier sees it."""

    reconciled_at: int = -1  # the current log's truncation count the copy was last reconciled at
    copied: int = 0
    swapped: bool = False


class _Rate:
    """At most ``limit`` bytes a second over all threads: a copier sleeps until its bytes are due."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._next_free = time.monotonic()

    def delay_for(self, n: int) -> float:
        if self.limit >= UNLIMITED_RATE or n <= 0:
            return 0.0
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_free)
            self._next_free = start + n / max(1, self.limit)
            return max(0.0, self._next_free - now - 1.0)  # a second of burst before anyone waits


class LogDirMover:
    """The copier threads (module docstring). Started on demand by :meth:`wake`; :meth:`shutdown` stops them.
    With ``threads=0`` none start, and the caller drives each move with :meth:`move_once`."""

    def __init__(self, host: LogMoveHost, *, threads: int = 1, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 rate: int = UNLIMITED_RATE) -> None:
        self._host = host
        self._threads_wanted = max(0, threads)
        self._chunk = max(1, chunk_bytes)
        self._rate = _Rate(rate)
        self._cond = threading.Condition()
        self._in_progress: set[TopicPartition] = set()
        self._threads: list[threading.Thread] = []
        self._stopped = False
        #: Moves completed since start (tests and metrics).
        self.completed = 0

    def set_rate(self, bytes_per_second: int) -> None:
        """``replica.alter.log.dirs.io.max.bytes.per.second``; takes effect for the next chunk."""
        self._rate.limit = bytes_per_second if bytes_per_second > 0 else UNLIMITED_RATE

    def wake(self) -> None:
        """A future replica was created or loaded: make sure a copier picks it up."""
        with self._cond:
            if self._stopped:
                return
            self._threads = [t for t in self._threads if t.is_alive()]
            while len(self._threads) < self._threads_wanted:
                thread = threading.Thread(target=self._run, name=f"replica-alter-log-dirs-{len(self._threads)}",
                                          daemon=True)
                self._threads.append(thread)
                thread.start()
            self._cond.notify_all()

    def shutdown(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            threads, self._threads = self._threads, []
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _next(self) -> TopicPartition | None:
        with self._cond:
            while not self._stopped:
                waiting = sorted(tp for tp in self._host.moves_pending() if tp not in self._in_progress)
                if waiting:
                    self._in_progress.add(waiting[0])
                    return waiting[0]
                self._cond.wait(1.0)
            return None

    def _run(self) -> None:
        while True:
            tp = self._next()
            if tp is None:
                return
            try:
                self._move(tp)
            except Exception:
                log.exception("moving %s-%d between log directories failed; retrying", *tp)
                time.sleep(_BACKOFF_S)
            finally:
                with self._cond:
                    self._in_progress.discard(tp)

    def _move(self, tp: TopicPartition) -> None:
        progress = MoveProgress()
        started = time.monotonic()
        log.info("beginning or resuming the copy of %s-%d to its new log directory", *tp)
        while not self._stopped:
            try:
                done, copied = self.move_once(tp, progress)
            except StorageError as exc:
                pair = self._host.move_pair(tp)
                if pair is not None and not any(lg.failed or lg.closed for lg in pair):
                    log.warning("copying %s-%d to its new log directory: %s; retrying", tp[0], tp[1], exc)
                    time.sleep(_BACKOFF_S)
                else:
                    time.sleep(0.05)  # the log manager drops the move (a dir went offline, the log was deleted)
                continue
            if done:
                if progress.swapped:
                    self.completed += 1
                    log.info("moved %s-%d to its new log directory: %d bytes copied in %.1f s", tp[0], tp[1],
                             progress.copied, time.monotonic() - started)
                return
            if copied == 0:
                time.sleep(0.01)  # caught up, but the swap found more to copy than it may: do not spin
            delay = self._rate.delay_for(copied)
            if delay > 0:
                with self._cond:
                    self._cond.wait(delay)

    def move_once(self, tp: TopicPartition, progress: MoveProgress) -> tuple[bool, int]:
        """One round of a move: reconcile the copy if the current log was cut back, copy a chunk, follow the
        high watermark and log start, and swap once caught up. Returns (the move ended, bytes copied); a move
        ends by its swap (``progress.swapped``) or because the manager dropped it. The threads call it in a loop;
        so can a caller that drives moves itself (``threads=0``)."""
        pair = self._host.move_pair(tp)
        if pair is None:
            return True, 0
        current, future = pair
        truncations = current.truncations
        if truncations != progress.reconciled_at:
            reconcile(current, future)
            progress.reconciled_at = truncations
        chunk = min(self._chunk, max(4096, self._rate.limit))
        try:
            copied = copy_chunk(current, future, chunk)
        except (OffsetOutOfRangeError, UnexpectedAppendOffsetError):
            progress.reconciled_at = -1  # cut back meanwhile, or retention passed the copy: reconcile again
            return False, 0
        progress.copied += copied
        follow_current(current, future)
        if future.log_end_offset >= current.log_end_offset and current.truncations == progress.reconciled_at:
            if self._host.complete_move(tp, progress.reconciled_at, chunk, copy_chunk):
                progress.swapped = True
                return True, copied
        return False, copied
