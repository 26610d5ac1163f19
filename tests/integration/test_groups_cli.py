"""``sofakafka groups`` against a real broker, with kafka-python as the group's consumer.

The decisive scenario is SOFAKafka's "reset consumption offset by time": a stopped group is moved with
``reset-offsets --to-datetime`` and its next consumer starts at the first record of that time.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer

from tests.integration.conftest import REPO, BrokerProcess
from tests.integration.groups import (
    GROUP_OVERRIDES,
    Member,
    committed,
    create_topic,
    kafka_python_member,
    produce,
)
from tests.integration.helpers import wait_for


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("groups-cli"), dict(GROUP_OVERRIDES)).start()
    try:
        yield b
    finally:
        b.kill()


def groups_cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "sofakafka", "groups", "--bootstrap-server", broker.bootstrap,
                           *args], capture_output=True, text=True, timeout=120, env=env)


def table(stdout: str) -> list[list[str]]:
    """The rows of the tool's table under its header line (whitespace-separated columns)."""
    lines = [line.split() for line in stdout.splitlines() if line.strip()]
    start = next(i for i, cols in enumerate(lines) if cols and cols[0] == "GROUP")
    return lines[start + 1:]


def consume_all_and_stop(broker: BrokerProcess, group: str, topic: str, total: int) -> None:
    member = kafka_python_member(f"{group}-m", broker.bootstrap, group, topic, commit_each_poll=True)
    try:
        wait_for("the group to consume everything", lambda: True if len(member.values()) >= total
                 else (member.check() or None))

        def all_committed() -> bool | None:
            offsets = committed(broker.bootstrap, group, topic, 2)
            return True if sum(o or 0 for o in offsets.values()) == total else None

        wait_for("the last commit", all_committed)
    finally:
        member.close()


def test_reset_offsets_to_datetime_moves_a_stopped_group_and_its_next_consumer_starts_there(
        broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    base = (int(dt.datetime.now(dt.UTC).timestamp()) - 3600) * 1000
    produce(broker.bootstrap, topic_name, 10, 2, timestamp_ms=lambda p, i: base + i * 60_000)
    group = "by-time"
    consume_all_and_stop(broker, group, topic_name, 20)
    when = dt.datetime.fromtimestamp((base + 4 * 60_000 - 30_000) / 1000, dt.UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S.000") + "Z"

    planned = groups_cli(broker, "reset-offsets", "--group", group, "--topic", topic_name, "--to-datetime", text,
                         "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert table(planned.stdout) == [[group, topic_name, "0", "4"], [group, topic_name, "1", "4"]]
    assert committed(broker.bootstrap, group, topic_name, 2) == {0: 10, 1: 10}, "--dry-run committed"

    done = groups_cli(broker, "reset-offsets", "--group", group, "--topic", topic_name, "--to-datetime", text,
                      "--execute")
    assert done.returncode == 0, done.stderr
    assert table(done.stdout) == [[group, topic_name, "0", "4"], [group, topic_name, "1", "4"]]
    assert committed(broker.bootstrap, group, topic_name, 2) == {0: 4, 1: 4}

    consumer = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        first: dict[int, tuple[int, bytes]] = {}

        def poll() -> bool | None:
            for tp, records in consumer.poll(timeout_ms=200).items():
                first.setdefault(tp.partition, (records[0].offset, records[0].value))
            return True if len(first) == 2 else None

        wait_for("the next consumer's first records", poll, 60)
    finally:
        consumer.close(autocommit=False)
    assert first == {0: (4, b"m-0-4"), 1: (4, b"m-1-4")}


def test_reset_offsets_scenarios_and_their_bounds(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 10, 2)
    group = "scenarios"
    consume_all_and_stop(broker, group, topic_name, 20)

    def reset(*how: str) -> list[list[str]]:
        done = groups_cli(broker, "reset-offsets", "--group", group, *how, "--execute")
        assert done.returncode == 0, done.stderr
        return table(done.stdout)

    assert reset("--topic", topic_name, "--to-earliest") == [[group, topic_name, "0", "0"],
                                                             [group, topic_name, "1", "0"]]
    assert reset("--topic", f"{topic_name}:1", "--to-offset", "7") == [[group, topic_name, "1", "7"]]
    assert committed(broker.bootstrap, group, topic_name, 2) == {0: 0, 1: 7}
    assert reset("--all-topics", "--shift-by", "5") == [[group, topic_name, "0", "5"],
                                                        [group, topic_name, "1", "10"]]  # clamped to the log end
    assert reset("--topic", topic_name, "--shift-by", "-100") == [[group, topic_name, "0", "0"],
                                                                  [group, topic_name, "1", "0"]]
    assert reset("--topic", topic_name, "--to-offset", "99") == [[group, topic_name, "0", "10"],
                                                                 [group, topic_name, "1", "10"]]
    assert reset("--topic", f"{topic_name}:0", "--to-latest") == [[group, topic_name, "0", "10"]]
    assert reset("--topic", topic_name, "--by-duration", "PT1H") == [[group, topic_name, "0", "0"],
                                                                     [group, topic_name, "1", "0"]]
    assert committed(broker.bootstrap, group, topic_name, 2) == {0: 0, 1: 0}
    # Without --execute or --dry-run: Kafka's warning, and nothing committed.
    shown = groups_cli(broker, "reset-offsets", "--group", group, "--topic", topic_name, "--to-latest")
    assert shown.returncode == 0 and "WARN: No action will be performed" in shown.stdout
    assert committed(broker.bootstrap, group, topic_name, 2) == {0: 0, 1: 0}


def test_reset_offsets_refused_while_the_group_has_members(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 3, 2)
    member: Member = kafka_python_member("busy", broker.bootstrap, "busy", topic_name, commit_each_poll=True)
    try:
        wait_for("the member to consume", lambda: True if len(member.values()) == 6 else (member.check() or None))
        refused = groups_cli(broker, "reset-offsets", "--group", "busy", "--topic", topic_name, "--to-earliest",
                             "--execute")
        assert refused.returncode == 1
        assert ("Assignments can only be reset if the group 'busy' is inactive, but the current state is Stable"
                in refused.stderr)
        described = groups_cli(broker, "describe", "--group", "busy", "--members", "--verbose")
        assert described.returncode == 0, described.stderr
        (row,) = table(described.stdout)
        assert (row[0], row[2], row[3], row[4], row[5]) == ("busy", "/127.0.0.1", "busy", "2",
                                                            f"{topic_name}(0,1)")
        state = groups_cli(broker, "describe", "--group", "busy", "--state")
        assert table(state.stdout)[0][-3:] == ["range", "Stable", "1"]
    finally:
        member.close()


def test_list_describe_and_delete(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 5, 2)
    consume_all_and_stop(broker, "listed", topic_name, 10)
    listed = groups_cli(broker, "list")
    assert listed.returncode == 0 and "listed" in listed.stdout.split()
    with_state = groups_cli(broker, "list", "--state", "empty")
    assert ["listed", "Empty"] in table(with_state.stdout)
    described = groups_cli(broker, "describe", "--group", "listed")
    assert "Consumer group 'listed' has no active members." in described.stdout
    assert [r[:6] for r in table(described.stdout)] == [["listed", topic_name, "0", "5", "5", "0"],
                                                        ["listed", topic_name, "1", "5", "5", "0"]]
    deleted = groups_cli(broker, "delete", "--group", "listed")
    assert deleted.returncode == 0, deleted.stderr
    assert "Deletion of requested consumer groups ('listed') was successful." in deleted.stdout
    assert "listed" not in groups_cli(broker, "list").stdout.split()
    again = groups_cli(broker, "delete", "--group", "listed")
    assert again.returncode == 1
    assert "Group 'listed' could not be deleted due to" in again.stderr
    missing = groups_cli(broker, "describe", "--group", "listed")
    assert missing.returncode == 1 and "Consumer group 'listed' does not exist." in missing.stderr
