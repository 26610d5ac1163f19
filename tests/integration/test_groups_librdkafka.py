"""Consumer groups with librdkafka (confluent-kafka) against a real broker process.

librdkafka runs the group protocol in its own threads; each consumer here is polled by one test thread, and
its ``on_assign`` callback counts the rebalances it went through.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException

from tests.integration.conftest import BrokerProcess
from tests.integration.groups import GROUP_OVERRIDES, create_topic, produce
from tests.integration.helpers import wait_for


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("groups-librdkafka"), dict(GROUP_OVERRIDES)).start()
    try:
        yield b
    finally:
        b.kill()


class RdMember:
    def __init__(self, name: str, bootstrap: str, group: str, topic: str, **config: Any) -> None:
        settings = {
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        }
        settings.update(config)
        self.name = name
        self.consumer = Consumer(settings)
        self.values: list[bytes] = []
        self.rebalances = 0
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self.assignment: frozenset[int] = frozenset()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer: Consumer, partitions: list[Any]) -> None:
        self.rebalances += 1

    def _run(self) -> None:
        while not self.stop.is_set():
            msg = self.consumer.poll(0.1)
            try:
                current = frozenset(tp.partition for tp in self.consumer.assignment())
            except KafkaException:
                current = frozenset()
            with self.lock:
                self.assignment = current
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(str(msg.error()))
                    continue
                self.values.append(msg.value())
            self.consumer.commit(message=msg, asynchronous=False)

    def close(self) -> None:
        if self.stop.is_set():
            return
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


@pytest.fixture
def rd_members() -> Iterator[list[RdMember]]:
    started: list[RdMember] = []
    yield started
    for m in started:
        m.close()


def split_evenly(members: list[RdMember], partitions: int) -> bool | None:
    owned = [m.assignment for m in members]
    per = partitions // len(members)
    if all(len(a) == per for a in owned) and frozenset().union(*owned) == frozenset(range(partitions)):
        return True
    return None


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_librdkafka_consumers_get_two_of_six_partitions_each(
        broker: BrokerProcess, topic_name: str, rd_members: list[RdMember], strategy: str) -> None:
    create_topic(broker.bootstrap, topic_name, 6)
    sent = produce(broker.bootstrap, topic_name, 5, 6)
    group = f"rd-{strategy}"
    for i in range(3):
        rd_members.append(RdMember(f"rd{i}", broker.bootstrap, group, topic_name,
                                   **{"partition.assignment.strategy": strategy}))
    wait_for("an even split", lambda: split_evenly(rd_members, 6), 60)
    wait_for("every record consumed", lambda: True if set(sent) <= {v for m in rd_members for v in m.values}
             else None, 60)
    # One member leaves: the two others converge on three partitions each, whatever the protocol.
    rd_members[0].close()
    wait_for("the survivors to take over", lambda: split_evenly(rd_members[1:], 6), 60)
    later = produce(broker.bootstrap, topic_name, 2, 6, tag="after")
    wait_for("the survivors to consume the new records",
             lambda: True if set(later) <= {v for m in rd_members[1:] for v in m.values} else None, 60)
    assert not [e for m in rd_members for e in m.errors]


def test_three_librdkafka_groups_each_receive_every_message(
        broker: BrokerProcess, topic_name: str, rd_members: list[RdMember]) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    sent = produce(broker.bootstrap, topic_name, 10, 3)
    for i in range(3):
        rd_members.append(RdMember(f"rdb{i}", broker.bootstrap, f"rd-broadcast-{i}", topic_name))
    for m in rd_members:
        wait_for(f"{m.name} to receive every record", lambda m=m: True if sorted(m.values) == sorted(sent) else None,
                 60)


def test_librdkafka_static_member_restarted_within_its_session_keeps_its_partitions_without_rebalance(
        broker: BrokerProcess, topic_name: str, rd_members: list[RdMember]) -> None:
    create_topic(broker.bootstrap, topic_name, 4)
    group = "rd-static"
    static = {"group.instance.id": "rd-static-a", "session.timeout.ms": 20000}
    first = RdMember("static-a", broker.bootstrap, group, topic_name, **static)
    rd_members.append(first)
    other = RdMember("static-b", broker.bootstrap, group, topic_name,
                     **{"group.instance.id": "rd-static-b", "session.timeout.ms": 20000})
    rd_members.append(other)
    wait_for("a two-two split", lambda: split_evenly([first, other], 4), 60)
    before = first.assignment
    rebalances = other.rebalances
    first.close()  # a static member's close does not leave the group (KIP-345)
    again = RdMember("static-a", broker.bootstrap, group, topic_name, **static)
    rd_members.append(again)
    wait_for("the restarted member's assignment", lambda: True if again.assignment else None, 60)
    assert again.assignment == before
    later = produce(broker.bootstrap, topic_name, 2, 4, tag="after-restart")
    wait_for("both members to consume the new records",
             lambda: True if set(later) <= set(again.values) | set(other.values) else None, 60)
    assert other.rebalances == rebalances, "the other member went through a rebalance"
    assert other.assignment == frozenset(range(4)) - before
