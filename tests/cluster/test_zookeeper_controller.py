"""The controller on ZooKeeper sessions: the unit tests' single-broker cases unchanged, then several brokers
as ZooKeeper sessions, one of whose sessions really expires."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import pytest

from sofakafka.controller.node import ControllerNode
from sofakafka.controller.store import SessionState
from sofakafka.controller.topics import NewTopic
from sofakafka.controller.zk_data import PartitionState
from sofakafka.controller.zookeeper import ZooKeeperMetadataStore
from tests.cluster.conftest import ZooKeeperServer
from tests.cluster.test_zookeeper_store import StateLog, expire
from tests.unit.controller import conftest as unit
from tests.unit.controller import test_controller as embedded

# The unit tests' guard: an error logged on a controller or cache thread fails the test.
no_controller_errors = unit.no_controller_errors


@pytest.fixture
def store(zookeeper: ZooKeeperServer, zk_chroot: str) -> Iterator[ZooKeeperMetadataStore]:
    s = ZooKeeperMetadataStore.connect(zookeeper.hosts, zk_chroot, session_timeout=10)
    yield s
    s.close()


@pytest.fixture
def node(store: ZooKeeperMetadataStore) -> Iterator[ControllerNode]:
    n = ControllerNode.start(store, 1, unit.plaintext(), rng=random.Random(7))
    unit.settle(n)
    yield n
    n.shutdown()


test_single_broker_elects_itself_with_kafkas_znodes = embedded.test_single_broker_elects_itself_with_kafkas_znodes
test_a_deposed_controller_cannot_write = embedded.test_a_deposed_controller_cannot_write
test_controller_events_from_other_threads_are_serialised = (
    embedded.test_controller_events_from_other_threads_are_serialised
)
test_shutdown_is_idempotent_and_startup_twice_is_harmless = (
    embedded.test_shutdown_is_idempotent_and_startup_twice_is_harmless
)


@pytest.fixture
def start_broker(zookeeper: ZooKeeperServer, zk_chroot: str) -> Iterator[Callable[[int], ControllerNode]]:
    """A broker's metadata side on its own ZooKeeper session; all shut down at the end."""
    nodes: list[ControllerNode] = []

    def start(broker_id: int) -> ControllerNode:
        session = ZooKeeperMetadataStore.connect(zookeeper.hosts, zk_chroot, session_timeout=10)
        node = ControllerNode.start(session, broker_id, unit.plaintext(9090 + broker_id), rng=random.Random(broker_id))
        nodes.append(node)
        unit.settle(node)
        return node

    try:
        yield start
    finally:
        for n in nodes:
            n.shutdown()
            n.store.close()


def test_an_expired_controller_session_hands_control_and_leadership_to_a_live_broker(
    zookeeper: ZooKeeperServer, start_broker: Callable[[int], ControllerNode]
) -> None:
    first = start_broker(1)
    second = start_broker(2)
    assert first.controller.is_active and not second.controller.is_active
    first.admin.create_topic(NewTopic("orders", assignments={0: [1, 2], 1: [2, 1]}))
    unit.settle(first)
    unit.settle(second)

    states = StateLog()
    first.store.add_listener(states)
    assert isinstance(first.store, ZooKeeperMetadataStore)
    expire(zookeeper, first.store)
    states.wait_for(SessionState.LOST)

    assert first.controller.wait_idle(unit.SETTLE_TIMEOUT)
    assert not first.controller.is_active
    assert second.cache.wait_until(lambda s: s.controller_id == 2 and list(s.brokers) == [2], unit.SETTLE_TIMEOUT)
    unit.settle(second)
    assert second.controller.is_active and second.controller.epoch == 2
    assert unit.read_json(second.store, "/controller")["brokerid"] == 2
    # What the expired broker led moves to the live ISR member under the new epoch; where a live broker leads,
    # the expired one leaves the ISR as the new controller takes over (Kafka's OfflineReplica at start-up), as
    # on the embedded store.
    assert embedded.state(second.store, "orders", 0) == PartitionState(2, 1, 2, (2,))
    assert embedded.state(second.store, "orders", 1) == PartitionState(2, 1, 2, (2,))
    assert second.store.get_children("/brokers/ids") == ["2"]
