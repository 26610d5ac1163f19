"""Fixtures the leader-side replication tests share: the leader's test clock and an embedded metadata store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sofakafka.broker import isr, replica_manager
from sofakafka.controller.embedded import EmbeddedMetadataServer
from sofakafka.controller.store import MetadataStore
from sofakafka.storage.segment import wall_clock_ms


class Clock:
    """The leader's wall clock, moved only by the test: the ISR tests use a 50 ms lag to stay short, and on a
    loaded machine a real 50 ms passes between any two steps, so a follower that just fetched to the log end
    could be counted as lagging (it was: ISR (0,) instead of (0, 1) under CPU load)."""

    def __init__(self) -> None:
        self.now_ms = wall_clock_ms()

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    # Where the leader reads the time for caught-up stamps and for the lag check.
    monkeypatch.setattr(replica_manager, "wall_clock_ms", c)
    monkeypatch.setattr(isr, "wall_clock_ms", c)
    return c


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    server = EmbeddedMetadataServer.open(tmp_path / "meta", fsync=False)
    s = server.connect()
    yield s
    s.close()
    server.close()
