"""Cost of one event-loop -> worker-thread -> event-loop crossing, the hop every Produce and Fetch makes.

Compares ``loop.run_in_executor`` on a one-thread ``ThreadPoolExecutor`` (what the replica manager used)
with :class:`sofakafka.broker.worker_threads.WorkerThreads` (what it uses now), on uvloop, with a work
function that does nothing, so the figure is the hand-off alone: wall and process CPU per crossing, awaited
one at a time as a single connection's requests are. Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_thread_hop.py [--crossings 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

import uvloop

from sofakafka.broker.worker_threads import WorkerThreads


def nothing() -> int:
    return 1


async def measure(name: str, cross: Callable[[], Awaitable[int]], crossings: int) -> None:
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(crossings):
        await cross()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{name:>16}: {wall / crossings * 1e6:6.1f} us wall, {cpu / crossings * 1e6:6.1f} us cpu per crossing")


async def main(crossings: int, rounds: int) -> None:
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(1)
    workers = WorkerThreads(1, "hop")
    try:
        for _ in range(rounds):
            await measure("run_in_executor", lambda: loop.run_in_executor(executor, nothing), crossings)
            await measure("WorkerThreads", lambda: workers.run(nothing), crossings)
    finally:
        executor.shutdown()
        workers.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--crossings", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    uvloop.run(main(args.crossings, args.rounds))
