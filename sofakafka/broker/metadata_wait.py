"""Waiting on the event loop for the metadata cache to reach a state, with no thread parked for the wait.

The cache calls its listeners on the store's thread; a waiter's listener only pokes an asyncio event. Admin
requests (CreateTopics waiting for leaders, DeleteTopics for the topic to go), StopReplica's wait for the topics
it deletes to leave our view, and controlled shutdown wait this way: a worker thread held for each such wait
(asyncio's default pool has cpu + 4) made a burst of them delay every other request that needs a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from sofakafka.controller.metadata import ClusterMetadata, MetadataCache


async def wait_for_metadata(cache: MetadataCache, predicate: Callable[[ClusterMetadata], bool],
                            timeout_ms: int) -> bool:
    """Wait on the event loop until ``predicate`` holds for the cache's snapshot or ``timeout_ms`` passes.

    The cache calls listeners on the store's thread; each call only pokes an asyncio event, so no thread is
    parked for the wait (many admin requests may wait at once)."""
    if predicate(cache.snapshot()):
        return True
    if timeout_ms <= 0:
        return False
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()

    def on_change(_: ClusterMetadata) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed while the broker shut down
            loop.call_soon_threadsafe(changed.set)

    cache.add_listener(on_change)
    try:
        deadline = loop.time() + timeout_ms / 1000
        while not predicate(cache.snapshot()):
            left = deadline - loop.time()
            if left <= 0:
                return False
            changed.clear()
            if predicate(cache.snapshot()):  # a change between the check and clear() must not be lost
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), left)
        return True
    finally:
        cache.remove_listener(on_change)
