"""Delayed operations and the purgatory that holds them, with Kafka's contract.

A delayed operation (a Produce waiting for acks=-1, a Fetch waiting for ``min_bytes``) is tried once when it
arrives; if it cannot complete yet it is *watched* under keys (topic-partitions) and gets a timer. It then
completes in exactly one of two ways:

* an event on one of its keys (an append, a high-watermark move) makes its owner call
  :meth:`DelayedOperationPurgatory.check_and_complete`, which re-runs :meth:`DelayedOperation.try_complete`
  for the operations watching that key;
* its timer fires: it is force-completed and :meth:`DelayedOperation.on_expiration` runs.

Nothing ever polls: no loop re-checks operations on a schedule. ``on_complete`` runs exactly once whichever
way wins; an operation completed by an event has its timer cancelled, an expired one is removed from the
watch lists of its keys.

Threading: a purgatory belongs to one asyncio event loop and every method must be called on it (callers in
worker threads post with ``loop.call_soon_threadsafe``). That is what makes the check-then-complete sequence
free of the races Kafka guards with locks. Waiters await :attr:`DelayedOperation.completion`, a future that
resolves to True when the operation completed on an event or immediately, False when it expired.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class DelayedOperation(ABC):
    """Subclasses implement ``try_complete`` (check the condition, call ``force_complete`` when met)."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = max(0, delay_ms)
        self.completion: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._completed = False
        self._expired = False
        self._timer: asyncio.TimerHandle | None = None
        self._keys: tuple[Hashable, ...] = ()

    @property
    def is_completed(self) -> bool:
        return self._completed

    @property
    def expired(self) -> bool:
        return self._expired

    @abstractmethod
    def try_complete(self) -> bool:
        """Complete now if the condition holds (by calling :meth:`force_complete`); return whether it did."""

    def on_complete(self) -> None:
        """Runs exactly once, on completion or expiration; the default resolves :attr:`completion`."""
        if not self.completion.done():
            self.completion.set_result(not self._expired)

    def on_expiration(self) -> None:
        """Runs after ``on_complete`` when the timer won; for metrics or logging."""
        log.debug("%s expired after %d ms", type(self).__name__, self.delay_ms)

    def force_complete(self) -> bool:
        """Complete unless already completed; True if this call completed it."""
        if self._completed:
            return False
        self._completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.on_complete()
        return True


class DelayedOperationPurgatory(Generic[K]):
    """Watch lists of delayed operations by key, completed on events or expired by their timers."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}
        self._delayed = 0

    def try_complete_else_watch(self, operation: DelayedOperation, keys: Iterable[K]) -> bool:
        """True if the operation completed at once; else it is watched under ``keys`` until event or timeout."""
        if operation.try_complete():
            return True
        key_list = tuple(keys)
        if not key_list:
            raise ValueError("a delayed operation must be watched under at least one key")
        operation._keys = key_list
        for key in key_list:
            self._watchers.setdefault(key, []).append(operation)
        self._delayed += 1
        loop = asyncio.get_running_loop()
        operation._timer = loop.call_later(operation.delay_ms / 1000.0, self._expire, operation)
        return False

    def _expire(self, operation: DelayedOperation) -> None:
        operation._timer = None
        if operation.is_completed:
            return
        operation._expired = True
        operation.force_complete()
        operation.on_expiration()
        self._unwatch(operation)

    def _unwatch(self, operation: DelayedOperation) -> None:
        keys, operation._keys = operation._keys, ()
        if not keys:
            return
        self._delayed -= 1
        for key in keys:
            ops = self._watchers.get(key)
            if ops is None:
                continue
            try:
                ops.remove(operation)
            except ValueError:
                pass
            if not ops:
                del self._watchers[key]

    def check_and_complete(self, key: K) -> int:
        """Re-try every operation watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        for op in list(ops):
            if op.is_completed:
                self._unwatch(op)  # completed by its owner directly
                continue
            if op.try_complete():
                completed += 1
                self._unwatch(op)
        return completed

    def watched(self, key: K) -> int:
        return len(self._watchers.get(key, ()))

    @property
    def delayed(self) -> int:
        """Operations waiting (watched and not yet completed or expired)."""
        return self._delayed

    def shutdown(self) -> None:
        """Complete every waiting operation now, as expired, so its waiter answers before the broker stops."""
        pending = {id(op): op for ops in self._watchers.values() for op in ops if not op.is_completed}
        for op in pending.values():
            self._expire(op)
        self._watchers.clear()
        self._delayed = 0
