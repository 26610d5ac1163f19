"""The stopping broker's ControlledShutdown sender against a real in-process broker that is its own controller:
success, Kafka's retries on a refusal, and the early stop when no other replica could take a partition."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from sofakafka.broker.controlled_shutdown import ControlledShutdownSender
from sofakafka.controller import zk_paths
from sofakafka.controller.node import ControllerNode
from sofakafka.controller.zk_data import TopicAssignment

from .broker_harness import BrokerThread

SENDER_LOG = "sofakafka.broker.controlled_shutdown"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    b = BrokerThread(tmp_path / "data", {"broker.id": "1"}).start()
    yield b
    b.stop()


def node_of(broker: BrokerThread) -> ControllerNode:
    assert broker.broker is not None
    return broker.broker.node


def sender(node: ControllerNode, broker_id: int, *, backoff_ms: int, epoch: int | None = None) -> ControlledShutdownSender:
    return ControlledShutdownSender(broker_id, lambda: node.broker_epoch if epoch is None else epoch, node.cache,
                                    "PLAINTEXT", max_retries=3, retry_backoff_ms=backoff_ms, socket_timeout_ms=10_000)


def messages(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(1 for r in caplog.get_records("call") if r.name == SENDER_LOG and text in r.getMessage())


def test_nothing_to_move_succeeds_on_the_first_attempt(broker: BrokerThread, caplog: pytest.LogCaptureFixture) -> None:
    node = node_of(broker)
    caplog.set_level(logging.INFO, SENDER_LOG)
    s = sender(node, 1, backoff_ms=10)
    assert s.run()
    assert s.remaining == []
    assert messages(caplog, "controlled shutdown succeeded") == 1
    assert messages(caplog, "retrying") == 0


def test_a_refusal_is_retried_up_to_controlled_shutdown_max_retries(broker: BrokerThread,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, SENDER_LOG)
    # Broker 42 is not registered: BROKER_NOT_AVAILABLE, no partitions, so each retry could still help.
    assert not sender(node_of(broker), 42, backoff_ms=10, epoch=-1).run()
    assert messages(caplog, "BROKER_NOT_AVAILABLE") == 3
    assert messages(caplog, "proceeding to do an unclean shutdown") == 1


def test_retries_stop_when_no_other_replica_is_registered(broker: BrokerThread,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    node = node_of(broker)
    # Two replicas, the second on a broker that never registered: the controller cannot move it anywhere.
    node.store.create(zk_paths.topic_path("pair"), TopicAssignment({0: [1, 2]}).encode())
    assert node.cache.wait_until(lambda snap: (p := snap.partition("pair", 0)) is not None and p.leader == 1, 30)
    caplog.set_level(logging.INFO, SENDER_LOG)
    # A minute's backoff: the sender must see at once that waiting cannot help (else the attempts below differ).
    s = sender(node, 1, backoff_ms=60_000)
    assert not s.run()
    assert s.remaining == [("pair", 0)]
    assert messages(caplog, "remaining partitions to move") == 1
    assert messages(caplog, "not retrying") == 1
