"""A watch is armed when the read that set it is answered; a re-arm after a reconnect waits for that (it needs
what the read saw) on the store's one condition, and the answer costs no lock unless a re-arm waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from sofakafka.controller.zookeeper import _MISSING, ZooKeeperMetadataStore


@pytest.fixture
def store() -> Iterator[ZooKeeperMetadataStore]:
    # The layer below (kazoo's client) faked: arming never reaches it.
    client = SimpleNamespace(client_id=(0x51, b""), add_listener=lambda _listener: None)
    s = ZooKeeperMetadataStore(client, connection_timeout=5.0)
    yield s
    s._events._queue.put(None)  # end its event thread


def test_an_answer_arms_the_watch_with_what_the_read_saw(store: ZooKeeperMetadataStore) -> None:
    watch = store._new_watch(lambda _e: None, "data", "/brokers/ids/1")
    assert watch is not None and not watch.armed and watch.baseline == _MISSING
    store._armed(watch, 42)
    assert watch.armed and watch.baseline == 42
    assert store._wait_armed(watch, 0) is True  # already armed: no wait, even with no time left
    store._armed(None, 7)  # a read without a watch: nothing to arm
    assert store._new_watch(None, "data", "/x") is None


def test_a_rearm_waits_for_the_answer_and_is_woken_by_it(store: ZooKeeperMetadataStore) -> None:
    watch = store._new_watch(lambda _e: None, "child", "/brokers/topics")
    assert watch is not None
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(store._wait_armed(watch, 30)))
    waiter.start()
    deadline = time.monotonic() + 10
    while store._arm_waiters == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert store._arm_waiters == 1 and got == []
    store._armed(watch, 9)
    waiter.join(10)
    assert got == [True] and store._arm_waiters == 0


def test_a_rearm_gives_up_at_its_timeout(store: ZooKeeperMetadataStore) -> None:
    watch = store._new_watch(lambda _e: None, "data", "/controller")
    assert watch is not None
    started = time.monotonic()
    assert store._wait_armed(watch, 0.05) is False
    assert time.monotonic() - started >= 0.05
    assert store._arm_waiters == 0
    assert store._wait_armed(watch, 0) is False


def test_a_watch_is_one_small_object() -> None:
    # slots: no per-watch dict (and no Event, with its lock and condition, as before).
    watch = ZooKeeperMetadataStore.__new__(ZooKeeperMetadataStore)._new_watch(lambda _e: None, "data", "/a")
    assert watch is not None and not hasattr(watch, "__dict__")
