"""Kafka's purgatory contract: complete on event, expire on timeout, exactly one completion, never poll."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sofakafka.broker.purgatory import DelayedOperation, DelayedOperationPurgatory


class Counter(DelayedOperation):
    """Completes once ``needed`` events were counted; records every hook call."""

    def __init__(self, delay_ms: int, needed: int) -> None:
        super().__init__(delay_ms)
        self.needed = needed
        self.seen = 0
        self.tries = 0
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        self.tries += 1
        if self.seen >= self.needed:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.completions += 1
        super().on_complete()

    def on_expiration(self) -> None:
        self.expirations += 1


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def test_an_operation_that_can_complete_at_once_is_never_watched() -> None:
    async def body() -> None:
        p: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
        op = Counter(60_000, needed=0)
        assert p.try_complete_else_watch(op, ["a"])
        assert op.completions == 1 and p.delayed == 0 and p.watched("a") == 0
        assert await op.completion is True

    run(body)


def test_an_event_on_a_watched_key_completes_and_unwatches_every_key() -> None:
    async def body() -> None:
        p: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
        op = Counter(60_000, needed=1)
        assert not p.try_complete_else_watch(op, ["a", "b"])
        assert p.delayed == 1 and p.watched("a") == 1 and p.watched("b") == 1
        assert p.check_and_complete("c") == 0  # no watcher, nothing tried
        assert op.tries == 1
        op.seen = 1
        assert p.check_and_complete("b") == 1
        assert op.completions == 1 and not op.expired
        assert p.delayed == 0 and p.watched("a") == 0 and p.watched("b") == 0
        assert p.check_and_complete("a") == 0 and op.completions == 1
        assert await op.completion is True

    run(body)


def test_an_operation_nobody_completes_expires_exactly_once() -> None:
    async def body() -> None:
        p: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
        op = Counter(1, needed=1)
        assert not p.try_complete_else_watch(op, ["a"])
        assert await op.completion is False  # resolved by the timer, not by anyone polling
        assert op.expired and op.completions == 1 and op.expirations == 1
        assert p.delayed == 0 and p.watched("a") == 0
        op.seen = 1
        assert p.check_and_complete("a") == 0 and op.completions == 1

    run(body)


def test_a_completed_operation_does_not_expire_later() -> None:
    async def body() -> None:
        p: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
        op = Counter(5, needed=1)
        p.try_complete_else_watch(op, ["a"])
        op.seen = 1
        p.check_and_complete("a")
        await asyncio.sleep(0.05)  # past the delay: the cancelled timer must not fire
        assert op.completions == 1 and op.expirations == 0 and not op.expired

    run(body)


def test_an_operation_completed_by_its_owner_leaves_the_watch_lists() -> None:
    async def body() -> None:
        p: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
        op = Counter(60_000, needed=5)
        p.try_complete_else_watch(op, ["a"])
        assert op.force_complete()
        assert not op.force_complete()
        p.check_and_complete("a")
        assert p.delayed == 0 and p.watched("a") == 0 and op.completions == 1

    run(body)


def test_shutdown_answers_every_waiting_operation() -> None:
    async def body() -> None:
        p: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
        ops = [Counter(60_000, needed=1) for _ in range(5)]
        for i, op in enumerate(ops):
            p.try_complete_else_watch(op, [f"k{i % 2}", "shared"])
        p.shutdown()
        assert all(op.expired and op.completions == 1 for op in ops)
        assert p.delayed == 0 and p.watched("shared") == 0
        assert [await op.completion for op in ops] == [False] * 5

    run(body)


@settings(max_examples=40)
@given(
    needs=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=8),
    events=st.lists(st.integers(min_value=0, max_value=3), max_size=30),
)
def test_every_operation_completes_once_and_only_when_its_condition_holds(needs: list[int], events: list[int]) -> None:
    """Operations watch key ``i % 4``; events on a key add one to what its watchers have seen."""

    async def body() -> None:
        p: DelayedOperationPurgatory[int] = DelayedOperationPurgatory("model")
        ops = [Counter(60_000, needed=n) for n in needs]
        for i, op in enumerate(ops):
            p.try_complete_else_watch(op, [i % 4])
        for key in events:
            for i, op in enumerate(ops):
                if i % 4 == key and not op.is_completed:
                    op.seen += 1
            p.check_and_complete(key)
        for i, op in enumerate(ops):
            hits = sum(1 for k in events if k == i % 4)
            assert op.is_completed == (hits >= op.needed)
            assert op.completions == (1 if op.is_completed else 0)
        assert p.delayed == sum(1 for op in ops if not op.is_completed)
        p.shutdown()
        assert all(op.completions == 1 for op in ops)

    run(body)
