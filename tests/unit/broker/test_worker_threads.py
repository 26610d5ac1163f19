"""WorkerThreads: the loop-to-thread hand-off under the replica manager's appends and reads."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sofakafka.broker.worker_threads import WorkerThreads


def test_one_thread_runs_work_in_submission_order_off_the_loop() -> None:
    workers = WorkerThreads(1, "append")
    seen: list[int] = []
    names: set[str] = set()

    def work(i: int) -> int:
        names.add(threading.current_thread().name)
        seen.append(i)
        return i * 2

    async def main() -> list[int]:
        return list(await asyncio.gather(*(workers.run(lambda i=i: work(i)) for i in range(200))))

    try:
        assert asyncio.run(main()) == [i * 2 for i in range(200)]
    finally:
        workers.shutdown()
    assert seen == list(range(200))
    assert names == {"append_0"}


def test_submit_queues_within_the_call_and_interleaves_in_order_with_run() -> None:
    """submit() queues before it returns (no loop turn), so work submitted from callbacks and work awaited
    through run() reach the thread in the order the calls were made: what keeps a coordinator's appends in
    the order it issued them."""
    workers = WorkerThreads(1, "append")
    seen: list[str] = []

    async def main() -> list[object]:
        first = workers.submit(lambda: seen.append("submit-1") or 1)
        awaited = asyncio.ensure_future(workers.run(lambda: seen.append("run") or 2))
        await asyncio.sleep(0)  # the run() task queues its work on its first step, after submit-1
        second = workers.submit(lambda: seen.append("submit-2") or 3)
        return list(await asyncio.gather(first, awaited, second))

    try:
        assert asyncio.run(main()) == [1, 2, 3]
    finally:
        workers.shutdown()
    assert seen == ["submit-1", "run", "submit-2"]


def test_an_exception_in_the_work_is_raised_to_the_awaiting_coroutine() -> None:
    workers = WorkerThreads(2, "read")

    def fail() -> None:
        raise KeyError("gone")

    def stop() -> None:
        raise StopIteration

    async def main() -> None:
        with pytest.raises(KeyError, match="gone"):
            await workers.run(fail)
        with pytest.raises(RuntimeError, match="StopIteration"):
            await workers.run(stop)
        assert await workers.run(lambda: 7) == 7  # the threads survive failures

    try:
        asyncio.run(main())
    finally:
        workers.shutdown()


def test_shutdown_finishes_queued_work_and_then_refuses_more() -> None:
    workers = WorkerThreads(1, "append")
    gate = threading.Event()
    done: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(workers.run(lambda: gate.wait(30)))
        second = asyncio.ensure_future(workers.run(lambda: done.append(2)))
        await asyncio.sleep(0)
        # shutdown joins the threads, so it runs off the loop; the gate opens once it is waiting.
        closing = loop.run_in_executor(None, workers.shutdown)
        gate.set()
        await closing
        assert await first is True
        await second
        assert done == [2]
        with pytest.raises(RuntimeError, match="shut down"):
            await workers.run(lambda: None)

    asyncio.run(main())


def test_a_cancelled_waiter_does_not_stop_work_already_taken() -> None:
    workers = WorkerThreads(1, "append")
    started = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def slow() -> None:
        started.set()
        release.wait(30)
        finished.set()

    async def main() -> None:
        task = asyncio.ensure_future(workers.run(slow))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        assert await workers.run(lambda: finished.is_set()) is True  # ordered after slow()

    try:
        asyncio.run(main())
    finally:
        workers.shutdown()


def test_at_least_one_thread() -> None:
    with pytest.raises(ValueError, match="at least one"):
        WorkerThreads(0, "read")
