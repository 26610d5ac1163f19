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


def consume_to_end(bootstrap: str, topic: str, isolation: str, partitions: int, timeout_s: float = 30.0
                   ) -> list[bytes]:
    """Every record value of the topic's partitions up to the end the isolation level allows (librdkafka's
    partition EOF: the high watermark, or the last stable offset for read_committed)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    at_eof: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_eof) < partitions:
            assert time.monotonic() < deadline, f"{topic}: only partitions {sorted(at_eof)} reached their end"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == -191:  # _PARTITION_EOF
                    at_eof.add(m.partition())
                    continue
                raise AssertionError(str(m.error()))
            at_eof.discard(m.partition())
            out.append(m.value())
    finally:
        c.close()
    return out
