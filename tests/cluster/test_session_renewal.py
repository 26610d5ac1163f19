"""A broker's metadata side survives its ZooKeeper session expiring (controller/session.py), on a real ZooKeeper.

Sessions are expired for real (another client joins the session with its id and password and closes it, so the
server ends it), then the :class:`SessionRenewingStore` must open a new session by itself, and the node must
register the broker again with a new broker epoch, re-arm its cache's watches and run for controller again.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from sofakafka.controller.node import ControllerNode
from sofakafka.controller.registration import BrokerIdInUseError, make_registration, register_broker
from sofakafka.controller.session import SessionRenewingStore
from sofakafka.controller.store import ConnectionLossError, MetadataStore, SessionExpiredError, SessionState
from sofakafka.controller.topics import NewTopic
from sofakafka.controller.zookeeper import ZooKeeperMetadataStore
from tests.cluster.conftest import ZooKeeperServer
from tests.cluster.test_zookeeper_store import StateLog, expire
from tests.unit.controller import conftest as unit

no_controller_errors = unit.no_controller_errors
WAIT_S = unit.SETTLE_TIMEOUT


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def czxid(store: MetadataStore, broker_id: int) -> int | None:
    stat = store.exists(f"/brokers/ids/{broker_id}")
    return None if stat is None else stat.czxid


@pytest.fixture
def connect(zookeeper: ZooKeeperServer, zk_chroot: str) -> Callable[[], ZooKeeperMetadataStore]:
    return lambda: ZooKeeperMetadataStore.connect(zookeeper.hosts, zk_chroot, session_timeout=10,
                                                  connection_timeout=10)


@pytest.fixture
def start_broker(connect: Callable[[], ZooKeeperMetadataStore]) -> Iterator[Callable[[int], ControllerNode]]:
    """A broker's metadata side on a renewing store, as the broker starts it; all shut down at the end."""
    nodes: list[ControllerNode] = []

    def start(broker_id: int) -> ControllerNode:
        store = SessionRenewingStore(connect, retry_backoff_s=0.05)
        node = ControllerNode.start(store, broker_id, unit.plaintext(9090 + broker_id), rng=random.Random(broker_id),
                                    stale_registration_wait_s=10)
        nodes.append(node)
        unit.settle(node)
        return node

    try:
        yield start
    finally:
        for n in nodes:
            n.shutdown()
            n.store.close()


def expire_current_session(zookeeper: ZooKeeperServer, node: ControllerNode) -> None:
    store = node.store
    assert isinstance(store, SessionRenewingStore)
    session = store.current_session
    assert isinstance(session, ZooKeeperMetadataStore)
    states = StateLog()
    session.add_listener(states)
    expire(zookeeper, session)
    states.wait_for(SessionState.LOST)


def renewed(node: ControllerNode, sessions: int) -> bool:
    store = node.store
    assert isinstance(store, SessionRenewingStore)
    return store.sessions_opened >= sessions


def test_an_expired_session_is_renewed_and_the_broker_registers_again_with_a_new_epoch(
    zookeeper: ZooKeeperServer, start_broker: Callable[[int], ControllerNode]
) -> None:
    first = start_broker(1)
    second = start_broker(2)
    assert first.controller.is_active and not second.controller.is_active
    first.admin.create_topic(NewTopic("orders", assignments={0: [2, 1], 1: [1, 2]}))
    unit.settle(first)
    old_epoch, old_session = first.broker_epoch, first.store.session_id
    assert czxid(second.store, 1) == old_epoch
    seen = []
    first.cache.add_listener(lambda snap: seen.append(snap.version))

    expire_current_session(zookeeper, first)
    # The other broker's controller takes over, and the expired broker comes back by itself.
    wait_for("broker 1 registered again under a new session",
             lambda: (czxid(second.store, 1) or 0) > old_epoch)
    wait_for("the renewal done", lambda: renewed(first, 2))
    assert first.store.session_id != old_session
    assert czxid(second.store, 1) == first.broker_epoch > old_epoch
    stat = second.store.exists("/brokers/ids/1")
    assert stat is not None and stat.ephemeral_owner == first.store.session_id
    assert second.cache.wait_until(lambda s: s.controller_id == 2 and sorted(s.brokers) == [1, 2], WAIT_S)
    unit.settle(second)
    assert second.controller.is_active
    assert not first.controller.is_active

    # The reloaded cache watches again: a change made now, by the other broker, reaches it.
    second.admin.create_topic(NewTopic("after", assignments={0: [1, 2]}))
    assert first.cache.wait_until(lambda s: s.has_leaders("after") and sorted(s.brokers) == [1, 2]
                                  and s.controller_id == 2, WAIT_S)
    assert seen, "the cache's listeners heard nothing after the reload"
    # Writes go through the new session.
    first.store.create("/written-after-renewal", b"x")
    assert second.store.exists("/written-after-renewal") is not None

    # And the renewed broker can be controller again once the current one goes.
    second.shutdown()
    second.store.close()
    assert first.cache.wait_until(lambda s: s.controller_id == 1 and list(s.brokers) == [1], WAIT_S)
    unit.settle(first)
    assert first.controller.is_active and first.controller.epoch == 3


def test_a_renewed_session_waits_out_the_registration_of_its_own_lost_session(
    connect: Callable[[], ZooKeeperMetadataStore], caplog: pytest.LogCaptureFixture
) -> None:
    # A broker may call its session lost (a whole session timeout without a connection) before the server
    # expires it; the new session then finds the old registration still there for a while.
    caplog.set_level(logging.INFO, logger="sofakafka.controller.registration")
    old, new = connect(), connect()
    try:
        registration = make_registration(1, unit.plaintext())
        old_epoch = register_broker(old, registration)
        with pytest.raises(BrokerIdInUseError):
            register_broker(new, registration)  # another session's: a duplicate broker id, at once
        result: list[int] = []
        waiter = threading.Thread(target=lambda: result.append(register_broker(
            new, registration, stale_session_ids={old.session_id}, stale_wait_s=WAIT_S)))
        waiter.start()
        wait_for("the waiter to find the old registration",
                 lambda: any("waiting for ZooKeeper to remove" in r.getMessage() for r in caplog.records))
        assert not result
        old.close()
        waiter.join(WAIT_S)
        assert result and result[0] > old_epoch
        stat = new.exists("/brokers/ids/1")
        assert stat is not None and stat.ephemeral_owner == new.session_id and stat.czxid == result[0]
    finally:
        old.close()
        new.close()


def test_renewal_retries_until_zookeeper_answers(connect: Callable[[], ZooKeeperMetadataStore],
                                                 zookeeper: ZooKeeperServer) -> None:
    refusals = 3
    attempts: list[float] = []

    def flaky() -> MetadataStore:
        attempts.append(time.monotonic())
        if 1 < len(attempts) <= 1 + refusals:
            raise ConnectionLossError("no ZooKeeper (simulated)")
        return connect()

    store = SessionRenewingStore(flaky, retry_backoff_s=0.05)
    renewals: list[int] = []
    store.add_new_session_listener(lambda: renewals.append(store.session_id))
    states = StateLog()
    store.add_listener(states)
    try:
        first = store.current_session
        assert isinstance(first, ZooKeeperMetadataStore)
        expire(zookeeper, first)
        states.wait_for(SessionState.LOST)
        wait_for("a new session", lambda: bool(renewals))
        assert len(attempts) == 2 + refusals
        assert renewals == [store.session_id] and store.session_id != first.session_id
        assert store.sessions_opened == 2
        assert first.closed
        # Backoff doubles from 0.05 s: the retries were spread out, not spun (a lower bound, not a speed claim).
        assert attempts[-1] - attempts[1] >= 0.05 + 0.1 + 0.2
        store.create("/alive", b"")
    finally:
        store.close()
    with pytest.raises(SessionExpiredError):
        store.get("/alive")


def test_a_call_made_without_a_session_waits_for_the_new_one(connect: Callable[[], ZooKeeperMetadataStore],
                                                             zookeeper: ZooKeeperServer) -> None:
    gate = threading.Event()
    attempts: list[int] = []

    def gated() -> MetadataStore:
        attempts.append(1)
        if len(attempts) > 1:
            assert gate.wait(WAIT_S)
        return connect()

    store = SessionRenewingStore(gated, session_wait_s=WAIT_S)
    answers: list[object] = []
    try:
        first = store.current_session
        assert isinstance(first, ZooKeeperMetadataStore)
        store.create("/before", b"")
        expire(zookeeper, first)
        wait_for("the renewal to be under way", lambda: len(attempts) == 2)
        caller = threading.Thread(target=lambda: answers.append(store.exists("/before")))
        caller.start()
        assert not answers  # no session: nothing could have answered it
        gate.set()
        caller.join(WAIT_S)
        assert answers and answers[0] is not None
        assert store.session_id != first.session_id
    finally:
        gate.set()
        store.close()


def test_a_failing_new_session_listener_is_retried(connect: Callable[[], ZooKeeperMetadataStore],
                                                   zookeeper: ZooKeeperServer) -> None:
    store = SessionRenewingStore(connect, retry_backoff_s=0.05)
    calls: list[int] = []

    def listener() -> None:
        calls.append(store.session_id)
        if len(calls) < 3:
            raise ConnectionLossError("write lost (simulated)")

    store.add_new_session_listener(listener)
    try:
        first = store.current_session
        assert isinstance(first, ZooKeeperMetadataStore)
        expire(zookeeper, first)
        wait_for("the listener to succeed", lambda: len(calls) >= 3)
        assert len(set(calls)) == 1 and calls[0] != first.session_id
    finally:
        store.close()


def test_close_stops_renewal(connect: Callable[[], ZooKeeperMetadataStore]) -> None:
    store = SessionRenewingStore(connect)
    session = store.current_session
    store.close()
    store.close()
    assert store.closed and session.closed
    with pytest.raises(SessionExpiredError):
        store.exists("/")
    assert not store._thread.is_alive()
