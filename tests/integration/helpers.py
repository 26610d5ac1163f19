"""What the client round trips share: the records to send and the deadline-bounded waiting.

Waits here only bound a test that would otherwise hang; no assertion is ever about how long something took.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


# Far enough in the past to be distinguishable from a broker-assigned LogAppendTime, and in the
# default retention window (7 days) measured from now, so the broker never deletes them.
def base_timestamp_ms() -> int:
    return (int(time.time()) - 3600) * 1000


@dataclass(frozen=True)
class Rec:
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def make_records(
    count: int, *, tag: str, with_headers: bool, base_ts: int | None = None, value_size: int = 0
) -> list[Rec]:
    """Keyed records whose values, headers and timestamps all differ so a reordering or mix-up shows."""
    ts0 = base_timestamp_ms() if base_ts is None else base_ts
    out = []
    for i in range(count):
        value = f"{tag}-value-{i}".encode()
        if value_size > len(value):
            value += b"x" * (value_size - len(value))
        headers = (("tag", tag.encode()), ("index", str(i).encode())) if with_headers else ()
        out.append(Rec(f"{tag}-key-{i % 7}".encode(), value, headers, ts0 + i))
    return out


def wait_for(what: str, poll: Callable[[], T | None], timeout_s: float = 30.0, interval_s: float = 0.05) -> T:
    """Return the first non-None result of ``poll``; fail naming ``what`` if none comes before the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = poll()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(interval_s)
