"""Consumer groups with kafka-python against a real broker process: sharing, broadcast, churn, restarts.

Each test uses its own group and topic on the module's broker (configured for groups, see groups.py), except
the restart tests, which need a broker of their own. Members poll in threads, or in a child process when a
test has to kill one with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.structs import OffsetAndMetadata

from tests.integration.conftest import REPO, BrokerProcess
from tests.integration.groups import (
    GROUP_OVERRIDES,
    Member,
    committed,
    create_topic,
    kafka_python_member,
    produce,
    wait_split,
)
from tests.integration.helpers import wait_for

MEMBER_SCRIPT = Path(__file__).with_name("group_member_process.py")


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The module's broker, configured for groups; the conftest's ``broker`` fixture hands it to tests."""
    b = BrokerProcess(tmp_path_factory.mktemp("groups"), dict(GROUP_OVERRIDES)).start()
    try:
        yield b
    finally:
        b.kill()


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        if not m.stop.is_set():
            m.close()


class ProcessMember:
    """group_member_process.py in a child process; its JSON lines are collected by a reader thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance_id: str | None = None) -> None:
        cmd = [sys.executable, str(MEMBER_SCRIPT), bootstrap, group, topic] + ([instance_id] if instance_id else [])
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def assignment(self) -> list[int] | None:
        with self.lock:
            found = [e["assigned"] for e in self.events if "assigned" in e]
        return found[-1] if found else None

    def records(self) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if "v" in e]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.reader.join(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def processes() -> Iterator[list[ProcessMember]]:
    started: list[ProcessMember] = []
    yield started
    for p in started:
        p.kill()


def test_three_consumers_of_one_group_get_two_of_six_partitions_each(
        broker: BrokerProcess, topic_name: str, members: list[Member]) -> None:
    create_topic(broker.bootstrap, topic_name, 6)
    sent = produce(broker.bootstrap, topic_name, 5, 6)
    for i in range(3):
        members.append(kafka_python_member(f"c{i}", broker.bootstrap, "share-six", topic_name))
    wait_split(members, 6, 2)
    wait_for("every record consumed", lambda: True if set(sent) <= {v for m in members for v in m.values()}
             else None)


def test_three_groups_of_one_consumer_each_receive_every_message(
        broker: BrokerProcess, topic_name: str, members: list[Member]) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    sent = produce(broker.bootstrap, topic_name, 10, 3)
    for i in range(3):
        members.append(kafka_python_member(f"b{i}", broker.bootstrap, f"broadcast-{i}", topic_name))
    for m in members:
        wait_for(f"{m.name} to receive every record",
                 lambda m=m: True if sorted(m.values()) == sorted(sent) else (m.check() or None))


@pytest.mark.parametrize("assignor", [RangePartitionAssignor, RoundRobinPartitionAssignor],
                         ids=["range", "roundrobin"])
def test_range_and_round_robin_assignors_converge(
        broker: BrokerProcess, topic_name: str, members: list[Member], assignor: type) -> None:
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"assignor-{assignor.name}"
    for i in range(3):
        members.append(kafka_python_member(f"a{i}", broker.bootstrap, group, topic_name,
                                           partition_assignment_strategy=[assignor]))
    wait_split(members, 6, 2)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described = admin.describe_groups([group])
    finally:
        admin.close()
    found = described[group]
    assert (found["group_state"], found["protocol_data"], len(found["members"])) == ("Stable", assignor.name, 3)


def _first_offsets_after(member: Member, start_index: int) -> dict[int, int]:
    with member.lock:
        later = member.received[start_index:]
    first: dict[int, int] = {}
    for partition, offset, _ in later:
        first.setdefault(partition, offset)
    return first


def test_member_leaving_hands_its_partitions_over_from_its_last_commit(
        broker: BrokerProcess, topic_name: str, members: list[Member]) -> None:
    create_topic(broker.bootstrap, topic_name, 4)
    sent = produce(broker.bootstrap, topic_name, 30, 4)
    group = "leaving"
    slow = kafka_python_member("slow", broker.bootstrap, group, topic_name, commit_each_poll=True,
                               poll_delay_s=0.05, max_poll_records=1)
    members.append(slow)
    wait_for("the first member to consume", lambda: True if len(slow.values()) >= 3 else (slow.check() or None))
    survivor = kafka_python_member("survivor", broker.bootstrap, group, topic_name, commit_each_poll=True,
                                   poll_delay_s=0.05, max_poll_records=1)
    members.append(survivor)
    wait_split(members, 4, 2)
    leaving_partitions = set(slow.assignment)
    slow.close()  # commits were synchronous after each poll: what it consumed is committed
    at_leave = committed(broker.bootstrap, group, topic_name, 4)
    mark = len(survivor.received)
    wait_for("the survivor to own every partition",
             lambda: True if survivor.assignment == frozenset(range(4)) else (survivor.check() or None))
    wait_for("every record consumed by someone",
             lambda: True if set(sent) <= set(slow.values()) | set(survivor.values()) else None)
    first = _first_offsets_after(survivor, mark)
    for p in leaving_partitions:
        # Nothing committed yet on a partition: the survivor starts at the earliest offset (auto.offset.reset).
        resumed_at = at_leave[p] if at_leave[p] is not None else 0
        if resumed_at < 30:
            assert first[p] == resumed_at, f"partition {p}: committed {resumed_at}, survivor resumed at {first[p]}"


def test_killed_member_misses_its_session_and_the_survivor_resumes_from_its_commits(
        broker: BrokerProcess, topic_name: str, members: list[Member], processes: list[ProcessMember]) -> None:
    create_topic(broker.bootstrap, topic_name, 4)
    sent = produce(broker.bootstrap, topic_name, 40, 4)
    group = "killed"
    victim = ProcessMember(broker.bootstrap, group, topic_name)
    processes.append(victim)
    wait_for("the process member to consume", lambda: True if len(victim.records()) >= 3 else None, 60)
    survivor = kafka_python_member("survivor", broker.bootstrap, group, topic_name, commit_each_poll=True,
                                   poll_delay_s=0.05, max_poll_records=1)
    members.append(survivor)
    wait_for("a two-two split", lambda: True if len(survivor.assignment) == 2
             and sorted(victim.assignment() or []) == sorted(set(range(4)) - survivor.assignment) else None, 60)
    wait_for("the victim to consume from its new share",
             lambda: True if {r["p"] for r in victim.records()[-3:]} <= set(victim.assignment() or []) else None)
    victim_partitions = set(victim.assignment() or [])
    victim.kill()
    at_death = committed(broker.bootstrap, group, topic_name, 4)
    mark = len(survivor.received)
    wait_for("the survivor to take over after the victim's session expired",
             lambda: True if survivor.assignment == frozenset(range(4)) else (survivor.check() or None), 60)
    consumed = {r["v"].encode() for r in victim.records()} | set(survivor.values())
    wait_for("every record consumed by someone",
             lambda: True if set(sent) <= {r["v"].encode() for r in victim.records()} | set(survivor.values())
             else None)
    assert consumed <= set(sent)
    first = _first_offsets_after(survivor, mark)
    for p in victim_partitions:
        resumed_at = at_death[p]
        assert resumed_at is not None
        if resumed_at < 40:
            assert first[p] == resumed_at, f"partition {p}: committed {resumed_at}, survivor resumed at {first[p]}"


class CountingListener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.assigned = 0

    def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.assigned += 1


def test_static_member_restarted_within_its_session_gets_its_partitions_back_without_rebalance(
        broker: BrokerProcess, topic_name: str, members: list[Member], processes: list[ProcessMember]) -> None:
    create_topic(broker.bootstrap, topic_name, 4)
    group = "static"
    static = ProcessMember(broker.bootstrap, group, topic_name, instance_id="static-a")
    processes.append(static)
    wait_for("the static member's assignment", lambda: True if static.assignment() == [0, 1, 2, 3] else None, 60)
    listener = CountingListener()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, group_instance_id="static-b",
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500, client_id="static-b")
    consumer.subscribe([topic_name], listener=listener)
    other = Member("static-b", consumer).start()
    members.append(other)
    wait_for("a two-two split", lambda: True if len(other.assignment) == 2
             and sorted(static.assignment() or []) == sorted(set(range(4)) - other.assignment) else None, 60)
    before = sorted(static.assignment() or [])
    rebalances = listener.assigned
    static.kill()
    restarted = ProcessMember(broker.bootstrap, group, topic_name, instance_id="static-a")
    processes.append(restarted)
    wait_for("the restarted static member's assignment", lambda: restarted.assignment() or None, 60)
    assert sorted(restarted.assignment() or []) == before
    produce(broker.bootstrap, topic_name, 3, 4)  # some traffic so both members keep polling and heartbeating
    wait_for("the restarted member to consume", lambda: True if restarted.records() else None)
    assert listener.assigned == rebalances, "the other member went through a rebalance"
    assert other.assignment == frozenset(range(4)) - set(before)


def test_admin_client_lists_describes_fetches_and_deletes_groups(
        broker: BrokerProcess, topic_name: str, members: list[Member]) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 4, 2)
    group = "admin-visible"
    member = kafka_python_member("admin-m", broker.bootstrap, group, topic_name, commit_each_poll=True)
    members.append(member)
    wait_for("the member to consume everything", lambda: True if len(member.values()) == 8 else None)
    wait_for("commits of the last records",
             lambda: True if committed(broker.bootstrap, group, topic_name, 2) == {0: 4, 1: 4} else None)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable"} in admin.list_groups()
        described = admin.describe_groups([group])[group]
        assert (described["group_state"], described["protocol_type"], described["error"]) == (
            "Stable", "consumer", None)
        (m,) = described["members"]
        assert (m["client_id"], m["client_host"]) == ("admin-m", "/127.0.0.1")
        assert m["member_assignment"]["assigned_partitions"] == [{"topic": topic_name, "partitions": [0, 1]}]
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 4, 1: 4}
        # A live group keeps its members' offsets and cannot be deleted.
        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
        member.close()
        wait_for("the group to become empty",
                 lambda: True if admin.describe_groups([group])[group]["group_state"] == "Empty" else None)
        deleted = admin.delete_group_offsets(group, [TopicPartition(topic_name, 0)])
        assert [e.__name__ for e in deleted.values()] == ["NoError"]
        assert committed(broker.bootstrap, group, topic_name, 2) == {0: None, 1: 4}
        assert admin.delete_groups([group]) == {group: "OK"}
        assert committed(broker.bootstrap, group, topic_name, 2) == {0: None, 1: None}
        assert group not in [g["group_id"] for g in admin.list_groups()]
    finally:
        admin.close()


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "kill-9"])
def test_committed_offsets_and_metadata_survive_a_broker_restart(
        tmp_path: Path, topic_name: str, clean: bool) -> None:
    b = BrokerProcess(tmp_path / "b", dict(GROUP_OVERRIDES)).start()
    try:
        create_topic(b.bootstrap, topic_name, 3)
        produce(b.bootstrap, topic_name, 10, 3)
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="durable", enable_auto_commit=False)
        try:
            consumer.commit({TopicPartition(topic_name, p): OffsetAndMetadata(3 + p, f"meta-{p}", -1)
                             for p in range(3)})
        finally:
            consumer.close(autocommit=False)
        b.restart(clean=clean)
        assert committed(b.bootstrap, "durable", topic_name, 3) == {0: 3, 1: 4, 2: 5}
        from sofakafka.client import KafkaClient
        from sofakafka.client.groups import GroupAdmin
        with KafkaClient(b.bootstrap) as client:
            found = GroupAdmin(client).fetch_offsets("durable")
        assert {tp: (c.offset, c.metadata) for tp, c in found.items()} == {
            (topic_name, p): (3 + p, f"meta-{p}") for p in range(3)}
        # And a member of the group starts where the commits say.
        starter = KafkaConsumer(topic_name, bootstrap_servers=b.bootstrap, group_id="durable",
                                enable_auto_commit=False, auto_offset_reset="earliest")
        try:
            got: dict[int, int] = {}
            def first_offsets() -> bool | None:
                for tp, records in starter.poll(timeout_ms=200).items():
                    got.setdefault(tp.partition, records[0].offset)
                return True if len(got) == 3 else None
            wait_for("a record of every partition", first_offsets, 60)
            assert got == {0: 3, 1: 4, 2: 5}
        finally:
            starter.close(autocommit=False)
    finally:
        b.kill()


def test_first_find_coordinator_refused_until_enough_brokers_for_the_offsets_topic(tmp_path: Path) -> None:
    """Kafka's default offsets.topic.replication.factor (3) cannot be met by one broker: no topic, no coordinator.

    `serve` without a file sets 1 (as Kafka's sample server.properties), so the operator's 3 is explicit here.
    """
    b = BrokerProcess(tmp_path / "b", {"offsets.topic.replication.factor": "3"}).start()
    try:
        from sofakafka.client import KafkaClient
        from sofakafka.client.groups import GroupAdmin
        from sofakafka.protocol.errors import ErrorCode, KafkaError
        with KafkaClient(b.bootstrap, request_timeout_ms=2000) as client:
            with pytest.raises(KafkaError) as refused:
                GroupAdmin(client).find_coordinator("any")
            assert refused.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
            assert "__consumer_offsets" not in client.metadata().topics
        assert "does not meet the required replication factor '3'" in b.log_text()
    finally:
        b.kill()
