"""Consumer groups with aiokafka against a real broker process: three members on one loop, each its own task.

Run with ``asyncio.run`` inside plain tests. Each member commits after every batch it handled, so when one
stops the others must continue from exactly those commits: every record is consumed, and a survivor's first
record of a partition it took over is the one at the committed offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from tests.integration.conftest import BrokerProcess
from tests.integration.groups import GROUP_OVERRIDES, committed, create_topic, produce


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("groups-aiokafka"), dict(GROUP_OVERRIDES)).start()
    try:
        yield b
    finally:
        b.kill()


class AioMember:
    def __init__(self, name: str, consumer: AIOKafkaConsumer) -> None:
        self.name = name
        self.consumer = consumer
        self.received: list[tuple[int, int, bytes]] = []
        self.task: asyncio.Task[None] | None = None
        self.stopped = False

    async def run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=100, max_records=2)
            for tp, msgs in batches.items():
                self.received += [(tp.partition, m.offset, m.value) for m in msgs]
            if batches:
                await self.consumer.commit()
                await asyncio.sleep(0.02)  # slow enough that a member's departure leaves work behind

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    async def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
            self.task = None
        await self.consumer.stop()


async def until(what: str, check: object, timeout_s: float = 60) -> None:
    assert callable(check)

    async def loop() -> None:
        while not check():
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(loop(), timeout_s)
    except TimeoutError:
        raise AssertionError(f"gave up waiting for {what}") from None


async def scenario(bootstrap: str, topic: str, group: str, assignor: type) -> None:
    sent = set(produce(bootstrap, topic, 20, 6))
    members = []
    for i in range(3):
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=f"aio{i}",
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=500,
                                    partition_assignment_strategy=(assignor,))
        await consumer.start()
        member = AioMember(f"aio{i}", consumer)
        member.task = asyncio.get_running_loop().create_task(member.run())
        members.append(member)
    try:
        def split(ms: list[AioMember], per: int) -> bool:
            owned = [m.assignment() for m in ms]
            return all(len(a) == per for a in owned) and frozenset().union(*owned) == frozenset(range(6))

        await until("two partitions each", lambda: split(members, 2))
        leaving = members[0]
        its_partitions = leaving.assignment()
        await leaving.stop()
        at_leave = committed(bootstrap, group, topic, 6)
        marks = [len(m.received) for m in members[1:]]
        await until("three partitions each for the survivors", lambda: split(members[1:], 3))
        await until("every record consumed",
                    lambda: sent <= {v for m in members for _, _, v in m.received})
        for m, mark in zip(members[1:], marks, strict=True):
            first: dict[int, int] = {}
            for p, offset, _ in m.received[mark:]:
                first.setdefault(p, offset)
            for p in its_partitions & m.assignment():
                resumed = at_leave[p]
                if resumed is not None and resumed < 20 and p in first:
                    assert first[p] == resumed, f"partition {p}: committed {resumed}, {m.name} resumed at {first[p]}"
    finally:
        for m in members:
            await m.stop()


@pytest.mark.parametrize("assignor", [RangePartitionAssignor, RoundRobinPartitionAssignor],
                         ids=["range", "roundrobin"])
def test_three_aiokafka_consumers_share_six_partitions_and_survivors_continue_from_commits(
        broker: BrokerProcess, topic_name: str, assignor: type) -> None:
    create_topic(broker.bootstrap, topic_name, 6)
    asyncio.run(scenario(broker.bootstrap, topic_name, f"aio-{assignor.name}", assignor))
