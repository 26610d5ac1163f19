"""What the consumer-group integration tests share: a broker configured for groups, and group members in threads.

A single broker cannot host ``__consumer_offsets`` with Kafka's default replication factor of 3 (Kafka refuses
it the same way), so these brokers run with ``offsets.topic.replication.factor=1``, as Kafka's sample
server.properties does. Fewer offsets partitions keep start-up and loading short; a short initial rebalance
delay lets the members of a test join one rebalance without making every test wait three seconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from sofakafka.client import KafkaClient
from sofakafka.client.groups import GroupAdmin
from tests.integration.helpers import wait_for

GROUP_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "8",
    "group.initial.rebalance.delay.ms": "500",
    "group.min.session.timeout.ms": "1000",
}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int, *, tag: str = "m",
            timestamp_ms: Callable[[int, int], int] | None = None) -> list[bytes]:
    """``per_partition`` records to each partition, values ``<tag>-<partition>-<i>``; returns every value."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    values = []
    try:
        for i in range(per_partition):
            for p in range(partitions):
                value = f"{tag}-{p}-{i}".encode()
                ts = timestamp_ms(p, i) if timestamp_ms is not None else None
                producer.send(topic, value, partition=p, timestamp_ms=ts)
                values.append(value)
        producer.flush(30)
    finally:
        producer.close()
    return values


@dataclass
class Member:
    """One kafka-python consumer polling in its own thread (a KafkaConsumer is not shared between threads)."""

    name: str
    consumer: KafkaConsumer
    received: list[tuple[int, int, bytes]] = field(default_factory=list)  # partition, offset, value
    assignment: frozenset[int] = frozenset()
    commit_each_poll: bool = False
    poll_delay_s: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None

    def start(self) -> Member:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                batches = self.consumer.poll(timeout_ms=100)
                with self.lock:
                    for tp, records in batches.items():
                        self.received += [(tp.partition, r.offset, r.value) for r in records]
                    self.assignment = frozenset(tp.partition for tp in self.consumer.assignment())
                if batches and self.commit_each_poll:
                    self.consumer.commit()
                if batches and self.poll_delay_s:
                    # A slow member, so that work is left over when it goes away.
                    self.stop.wait(self.poll_delay_s)
        except Exception as exc:  # noqa: BLE001 - surfaced by the test through check()
            self.error = exc

    def values(self) -> list[bytes]:
        with self.lock:
            return [v for _, _, v in self.received]

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self.name} failed") from self.error

    def close(self) -> None:
        """Stop polling and close, which sends LeaveGroup."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(30)
        self.consumer.close(autocommit=False)


def kafka_python_member(name: str, bootstrap: str, group: str, topic: str, *, commit_each_poll: bool = False,
                        poll_delay_s: float = 0.0, **config: Any) -> Member:
    settings: dict[str, Any] = dict(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=6000, heartbeat_interval_ms=500, client_id=name,
    )
    settings.update(config)
    consumer = KafkaConsumer(topic, **settings)
    return Member(name, consumer, commit_each_poll=commit_each_poll, poll_delay_s=poll_delay_s).start()


def partitions_split(members: list[Member], partitions: int, per_member: int) -> bool:
    for m in members:
        m.check()
    owned = [m.assignment for m in members]
    if any(len(a) != per_member for a in owned):
        return False
    union = frozenset().union(*owned)
    return union == frozenset(range(partitions)) and sum(len(a) for a in owned) == partitions


def wait_split(members: list[Member], partitions: int, per_member: int, timeout_s: float = 60) -> None:
    wait_for(f"{len(members)} members to own {per_member} partitions each",
             lambda: True if partitions_split(members, partitions, per_member) else None, timeout_s, 0.1)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """The group's committed offsets, read with our own small client: tests poll this in loops, and a
    kafka-python consumer built and closed per call now and then leaves a socket to the garbage collector."""
    with KafkaClient(bootstrap) as client:
        found = GroupAdmin(client).fetch_offsets(group, [(topic, p) for p in range(partitions)])
    return {p: found[(topic, p)].offset if (topic, p) in found else None for p in range(partitions)}
