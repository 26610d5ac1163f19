"""Threads that run blocking log work for the event loop, with a cheaper hand-off than ``run_in_executor``.

Every Produce and every Fetch crosses from the loop to a worker thread and back at least once. Through
``loop.run_in_executor`` that crossing builds a ``concurrent.futures.Future`` (a condition variable, locked
on every state change), wraps it in an asyncio future and chains the two with callbacks that hop threads
twice: ~50 us of CPU per crossing on the bench machine, which is a quarter of a 16 KiB produce request's
whole cost. Here a crossing is one ``SimpleQueue.put`` and one ``call_soon_threadsafe`` that resolves the
loop's own future: ~15-20 us (bench/bench_broker.py and docs/benchmarks.md).

Semantics kept from the executor the broker used before: work runs in submission order, on ``threads``
threads (one thread means strictly one after another, which is what keeps appends to a log in handler
order); an exception in the work is raised to the awaiting coroutine; cancelling the awaiting coroutine does
not stop work already taken; ``shutdown`` finishes the work already queued, then joins; submitting after it
raises ``RuntimeError``. The threads are daemons, started on first use, so a component that is never shut
down (a unit test's) cannot hold the interpreter open; the broker always shuts them down.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# A work item: the function, the loop future to resolve, and that future's loop. None stops a thread.
_Item = tuple[Callable[[], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop] | None


class WorkerThreads:
    def __init__(self, threads: int, name: str) -> None:
        if threads < 1:
            raise ValueError("at least one worker thread")
        self._count = threads
        self._name = name
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shut_down = False

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a worker thread; its result or exception comes back to the awaiting coroutine."""
        return await self.submit(fn)

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """``fn()`` queued at once (called on the loop): the loop future its result or exception resolves. For
        callers that continue in a callback rather than a coroutine; work is queued in call order either way."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._submit((fn, future, loop))
        return future

    def _submit(self, item: _Item) -> None:
        with self._lock:
            if self._shut_down:
                raise RuntimeError(f"{self._name} worker threads are shut down")
            if not self._threads:
                for i in range(self._count):
                    t = threading.Thread(target=self._work, name=f"{self._name}_{i}", daemon=True)
                    t.start()
                    self._threads.append(t)
            self._queue.put(item)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, future, loop = item
            try:
                result = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, which raises it
                _post(loop, _reject, future, exc)
            else:
                _post(loop, _resolve, future, result)
            del item, fn, future  # drop references before blocking on the next item

    def shutdown(self) -> None:
        """Run what is queued, then stop and join the threads (idempotent)."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
            threads = list(self._threads)
            for _ in threads:
                self._queue.put(None)
        for t in threads:
            t.join()


def _post(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: object) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:
        pass  # the loop is closed: nobody is left awaiting the result


def _resolve(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():  # the awaiting coroutine may have been cancelled meanwhile
        future.set_result(result)


def _reject(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        if isinstance(exc, StopIteration):
            # A future cannot carry StopIteration (it would end the awaiting generator silently).
            wrapped = RuntimeError("worker function raised StopIteration")
            wrapped.__cause__ = exc
            exc = wrapped
        future.set_exception(exc)
