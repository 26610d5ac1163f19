"""What the coordinator needs from the world: a clock, timers, a log writer, and completions to answer through.

Kept as small protocols so the coordinator stays pure logic: the broker plugs in its event loop and replica
manager (asyncio_bridge), tests plug in :class:`ManualTime` and an in-memory writer and decide when time
passes. Everything here runs on one thread; nothing locks.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from sofakafka.protocol.errors import ErrorCode

R = TypeVar("R")


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time in epoch milliseconds: it is written into commit and state timestamps."""
        ...


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback`` once, on the coordinator's thread, ``delay_ms`` from now (unless cancelled)."""
        ...


@dataclass(frozen=True, slots=True)
class OffsetsRecord:
    """One record for ``__consumer_offsets``: key and value bytes in Kafka's formats, None value = tombstone."""

    key: bytes
    value: bytes | None


class RecordWriter(Protocol):
    def append(
        self, partition: int, records: Sequence[OffsetsRecord], done: Callable[[ErrorCode], None]
    ) -> None:
        """Append as one batch with acks=all semantics; call ``done`` exactly once on the coordinator's thread."""
        ...


@runtime_checkable
class TransactionalRecordWriter(Protocol):
    def append(
        self, partition: int, records: Sequence[OffsetsRecord], done: Callable[[ErrorCode], None]
    ) -> None: ...

    def append_transactional(
        self, partition: int, records: Sequence[OffsetsRecord], producer_id: int, producer_epoch: int,
        done: Callable[[ErrorCode], None],
    ) -> None:
        """As ``append``, but as one transactional batch of the producer (TxnOffsetCommit): the records take
        effect only when a COMMIT marker of that producer follows them in the partition."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class Completion(Generic[R]):
    """A response that may not exist yet: JoinGroup waits for the rebalance, commits wait for the log.

    Not an asyncio future on purpose: the coordinator must not need a running loop (tests call it directly),
    and callbacks run synchronously when it completes, so the order of answers is the order of events.
    """

    __slots__ = ("_callbacks", "_done", "_result")

    def __init__(self) -> None:
        self._done = False
        self._result: R | None = None
        self._callbacks: list[Callable[[R], None]] = []

    @classmethod
    def of(cls, result: R) -> Completion[R]:
        c: Completion[R] = cls()
        c.complete(result)
        return c

    def done(self) -> bool:
        return self._done

    def result(self) -> R:
        if not self._done:
            raise RuntimeError("completion has no result yet")
        return self._result  # type: ignore[return-value]

    def complete(self, result: R) -> None:
        if self._done:
            raise RuntimeError("completion completed twice")
        self._done = True
        self._result = result
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(result)

    def add_done_callback(self, callback: Callable[[R], None]) -> None:
        if self._done:
            callback(self._result)  # type: ignore[arg-type]
        else:
            self._callbacks.append(callback)


class _ManualTimer:
    __slots__ = ("callback", "cancelled", "deadline", "seq")

    def __init__(self, deadline: int, seq: int, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.seq = seq
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: _ManualTimer) -> bool:
        return (self.deadline, self.seq) < (other.deadline, other.seq)


class ManualTime:
    """A Clock and a Scheduler whose time moves only when a test calls :meth:`advance`."""

    def __init__(self, start_ms: int = 1_600_000_000_000) -> None:
        self._now = start_ms
        self._timers: list[_ManualTimer] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        timer = _ManualTimer(self._now + max(0, delay_ms), next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def next_deadline(self) -> int | None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].deadline if self._timers else None

    def advance(self, ms: int) -> None:
        """Move time forward, firing each due timer at its own deadline (timers it schedules included)."""
        target = self._now + ms
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > target:
                break
            timer = heapq.heappop(self._timers)
            self._now = max(self._now, timer.deadline)
            timer.callback()
        self._now = target
