"""The coordinator's runtime on an asyncio event loop: timers through ``call_later``, completions awaited."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from sofakafka.broker.group.runtime import Cancellable, Completion

R = TypeVar("R")


class LoopScheduler:
    """Coordinator timers on the loop: delayed joins, heartbeat expiry and the retention sweep never poll."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        return self._loop.call_later(max(0, delay_ms) / 1000.0, callback)


async def wait_for(completion: Completion[R]) -> R:
    if completion.done():
        return completion.result()
    future: asyncio.Future[R] = asyncio.get_running_loop().create_future()

    def resolve(result: R) -> None:
        # The connection may have gone away and cancelled the handler; its answer is then simply dropped.
        if not future.done():
            future.set_result(result)

    completion.add_done_callback(resolve)
    return await future
