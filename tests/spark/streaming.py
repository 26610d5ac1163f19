"""What the streaming tests share: starting a Kafka-sourced query and waiting on it with deadlines."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
QUERY_TIMEOUT_S = 240


def kafka_stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def wait_until(what: str, predicate: Callable[[], T | None], query: Any = None,
               timeout_s: float = QUERY_TIMEOUT_S, interval_s: float = 0.2) -> T:
    """The first truthy result of ``predicate``; fails naming ``what`` after ``timeout_s``, or at once with
    the query's own error when ``query`` died meanwhile."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if query is not None and not query.isActive:
            raise AssertionError(f"query ended while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(interval_s)


def finish(query: Any, timeout_s: float = QUERY_TIMEOUT_S) -> None:
    """Wait for a Trigger.AvailableNow query to end by itself, and fail with its error if it had one."""
    assert query.awaitTermination(timeout_s), f"query {query.name} still running after {timeout_s} s"
    assert query.exception() is None, query.exception()


def offsets(source_progress: Any, key: str) -> dict[str, dict[str, int]] | None:
    """A source's start/end/latest offsets in a progress report, as {topic: {partition: offset}}."""
    value = source_progress[key]
    if value is None:
        return None
    parsed = json.loads(value) if isinstance(value, str) else dict(value)
    return None if parsed is None else dict(parsed)


def data_batches(query: Any) -> list[Any]:
    """The progress reports of the query's batches that read rows, in order (idle reports left out)."""
    seen: dict[int, Any] = {}
    for p in query.recentProgress:
        if p["numInputRows"] > 0:
            seen[p["batchId"]] = p
    return [seen[b] for b in sorted(seen)]
