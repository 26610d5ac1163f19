"""A single broker's metadata side on a real embedded store, as the broker starts it."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sofakafka.controller.embedded import EmbeddedMetadataStore
from sofakafka.controller.node import ControllerNode
from sofakafka.controller.store import MetadataStore
from sofakafka.controller.zk_data import BrokerEndpoint

SETTLE_TIMEOUT = 30.0
"""A bound on waiting for the controller and the cache, not a timing assertion: they normally take
milliseconds, and a test fails only if they never get there."""


def plaintext(port: int = 9092, host: str = "127.0.0.1") -> list[BrokerEndpoint]:
    return [BrokerEndpoint("PLAINTEXT", host, port, "PLAINTEXT")]


def settle(node: ControllerNode) -> None:
    """Wait until the controller applied everything queued and the cache saw the controller's writes."""
    assert node.controller.wait_idle(SETTLE_TIMEOUT)
    node.store.sync(SETTLE_TIMEOUT)


def read_json(store: MetadataStore, path: str) -> Any:
    data, _ = store.get(path)
    return json.loads(data)


@pytest.fixture
def meta_dir(tmp_path: Path) -> Path:
    return tmp_path / "meta"


@pytest.fixture
def store(meta_dir: Path) -> Iterator[EmbeddedMetadataStore]:
    s = EmbeddedMetadataStore.open(meta_dir, fsync=False)
    yield s
    s.close()


@pytest.fixture
def node(store: EmbeddedMetadataStore) -> Iterator[ControllerNode]:
    n = ControllerNode.start(store, 1, plaintext(), rng=random.Random(7))
    settle(n)
    yield n
    n.shutdown()


WATCHED_LOGGERS = {
    "sofakafka.controller.kafka_controller",
    "sofakafka.controller.metadata",
    "sofakafka.controller.topics",
    "sofakafka.controller.registration",
}


@pytest.fixture(autouse=True)
def no_controller_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The controller and the cache log and survive failures on their threads; a test must not pass over
    one silently."""
    yield
    errors = [r for r in caplog.get_records("call") if r.levelno >= logging.ERROR and r.name in WATCHED_LOGGERS]
    assert not errors, [r.getMessage() for r in errors]
