"""The console verbs as a user runs them: `python -m sofakafka <verb>` subprocesses against a real broker.

Output lines are compared exactly where they mirror Kafka's tools, since scripts parse them.
"""

from __future__ import annotations

import itertools
import select
import signal
import socket
import subprocess
import sys

import pytest

from sofakafka.client import partition_for_key
from tests.unit.client.conftest import REPO, RunningBroker

_names = itertools.count()


def new_name() -> str:
    return f"cli-{next(_names)}"


def run(*args: str, stdin: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sofakafka", *args], input=stdin, capture_output=True, text=True,
                          cwd=REPO, timeout=timeout, check=False)


def ok(*args: str, stdin: str = "") -> str:
    done = run(*args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_topics_create_list_describe_like_kafka_topics(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    assert ok("topics", "create", *b, "--topic", name, "--partitions", "2", "--replication-factor", "1",
              "--config", "retention.ms=1000") == f"Created topic {name}.\n"
    assert name in ok("topics", "list", *b).splitlines()
    assert ok("topics", "--describe", *b, "--topic", name).splitlines() == [
        f"Topic: {name}\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=1000",
        f"\tTopic: {name}\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0",
        f"\tTopic: {name}\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0",
    ]
    again = run("topics", "create", *b, "--topic", name)
    assert again.returncode == 1 and f"Topic '{name}' already exists." in again.stderr
    assert run("topics", "create", *b, "--topic", name, "--if-not-exists").returncode == 0
    missing = run("topics", "describe", *b, "--topic", "no-such-topic")
    assert missing.returncode == 1 and "does not exist" in missing.stderr


def test_topics_create_with_a_replica_assignment_and_validate_only(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    assert ok("topics", "create", *b, "--topic", name, "--replica-assignment", "0,0,0", "--validate-only") == (
        f"Topic {name} is valid.\n")
    assert name not in ok("topics", "list", *b).splitlines()
    ok("topics", "create", *b, "--topic", name, "--replica-assignment", "0,0,0")
    assert "PartitionCount: 3" in ok("topics", "describe", *b, "--topic", name)


def test_topics_alter_and_delete(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("topics", "create", *b, "--topic", name)
    ok("topics", "alter", *b, "--topic", name, "--partitions", "3", "--config", "segment.bytes=100000")
    described = ok("topics", "describe", *b, "--topic", name).splitlines()
    assert described[0] == f"Topic: {name}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: segment.bytes=100000"
    shrink = run("topics", "alter", *b, "--topic", name, "--partitions", "2")
    assert shrink.returncode == 1 and "Topic currently has 3 partitions" in shrink.stderr
    assert ok("topics", "delete", *b, "--topic", name) == ""
    assert name not in ok("topics", "list", *b).splitlines()
    assert run("topics", "delete", *b, "--topic", name).returncode == 1
    assert run("topics", "delete", *b, "--topic", name, "--if-exists").returncode == 0


def test_configs_describe_and_alter_like_kafka_configs(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("topics", "create", *b, "--topic", name)
    assert ok("configs", "describe", *b, "--entity-type", "topics", "--entity-name", name) == (
        f"Dynamic configs for topic {name} are:\n")
    assert ok("configs", "alter", *b, "--entity-type", "topics", "--entity-name", name,
              "--add-config", "cleanup.policy=[compact,delete],retention.ms=5000") == (
        f"Completed updating config for topic {name}.\n")
    assert ok("configs", "describe", *b, "--entity-type", "topics", "--entity-name", name).splitlines() == [
        f"Dynamic configs for topic {name} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,"
        "delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        # Kafka 2.6 lists a topic config's broker synonyms from its primary key on: log.retention.ms is unset,
        # so the default log.retention.hours is not one (docs/compatibility.md, "Differences found and fixed").
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}",
    ]
    ok("configs", "alter", *b, "--entity-type", "topics", "--entity-name", name, "--delete-config", "retention.ms")
    assert "retention.ms" not in ok("configs", "describe", *b, "--entity-type", "topics", "--entity-name", name)
    bad = run("configs", "alter", *b, "--entity-type", "topics", "--entity-name", name,
              "--add-config", "compression.type=zip")
    assert bad.returncode == 1 and "compression.type" in bad.stderr
    every = ok("configs", "describe", *b, "--entity-type", "topics", "--entity-name", name, "--all")
    assert "  segment.bytes=1073741824 sensitive=false" in every


def test_configs_for_brokers(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    own = str(broker.broker_id)
    assert ok("configs", "alter", *b, "--entity-type", "brokers", "--entity-name", own,
              "--add-config", "log.cleaner.threads=2") == f"Completed updating config for broker {own}.\n"
    try:
        assert ok("configs", "describe", *b, "--entity-type", "brokers", "--entity-name", own).splitlines() == [
            f"Dynamic configs for broker {own} are:",
            "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, "
            "DEFAULT_CONFIG:log.cleaner.threads=1}",
        ]
    finally:
        ok("configs", "alter", *b, "--entity-type", "brokers", "--entity-name", own,
           "--delete-config", "log.cleaner.threads")
    assert ok("configs", "describe", *b, "--entity-type", "brokers", "--entity-default") == (
        "Default configs for brokers in the cluster are:\n")
    refused = run("configs", "alter", *b, "--entity-type", "brokers", "--entity-default", "--add-config", "broker.id=4")
    assert refused.returncode == 1 and "broker.id" in refused.stderr


def test_produce_then_consume_keyed_lines(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("topics", "create", *b, "--topic", name, "--partitions", "3")
    lines = [f"key{i}:value {i}" for i in range(12)]
    ok("produce", *b, "--topic", name, "--property", "parse.key=true", "--property", "key.separator=:",
       "--compression-type", "lz4", stdin="\n".join(lines) + "\n")
    done = run("consume", *b, "--topic", name, "--from-beginning", "--max-messages", "12",
               "--property", "print.key=true", "--property", "print.partition=true", "--property", "key.separator=|")
    assert done.returncode == 0, done.stderr
    assert "Processed a total of 12 messages" in done.stderr
    got = done.stdout.splitlines()
    assert len(got) == 12
    for line in got:
        partition, key, value = line.split("|")
        assert partition == f"Partition:{partition_for_key(key.encode(), 3)}"
        assert f"{key}:{value}" in lines
    # Per partition, records come back in the order they were produced.
    for p in range(3):
        in_p = [line.split("|", 1)[1] for line in got if line.startswith(f"Partition:{p}|")]
        expected = [f"{k}|{v}" for k, _, v in (line.partition(":") for line in lines)
                    if partition_for_key(k.encode(), 3) == p]
        assert in_p == expected


def test_consume_from_an_offset_of_one_partition(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("topics", "create", *b, "--topic", name)
    ok("produce", *b, "--topic", name, "--acks", "all", stdin="a\nb\nc\nd\n")
    out = ok("consume", *b, "--topic", name, "--partition", "0", "--offset", "2", "--max-messages", "2",
             "--property", "print.offset=true")
    assert out.splitlines() == ["Offset:2\tc", "Offset:3\td"]


def test_consume_times_out_on_an_empty_topic(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("topics", "create", *b, "--topic", name)
    done = run("consume", *b, "--topic", name, "--from-beginning", "--timeout-ms", "300")
    assert done.returncode == 0 and done.stdout == ""
    assert "Processed a total of 0 messages" in done.stderr


def test_produce_refuses_a_line_without_the_key_separator(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("topics", "create", *b, "--topic", name)
    done = run("produce", *b, "--topic", name, "--property", "parse.key=true", stdin="k1\tv1\nnokey\n")
    assert done.returncode == 1 and "No key separator found on line 2" in done.stderr
    # The line before the bad one was sent.
    assert ok("consume", *b, "--topic", name, "--from-beginning", "--max-messages", "1") == "v1\n"


@pytest.mark.parametrize("args", [("topics", "create"), ("topics",), ("configs", "alter", "--entity-type", "topics")])
def test_bad_usage_exits_with_2(broker: RunningBroker, args: tuple[str, ...]) -> None:
    done = run(*args, "--bootstrap-server", broker.bootstrap)
    assert done.returncode == 2
    assert "error" in done.stderr


def test_an_unreachable_bootstrap_server_exits_with_1() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = run("topics", "list", "--bootstrap-server", f"127.0.0.1:{port}", "--request-timeout-ms", "2000")
    assert done.returncode == 1 and "no broker reachable" in done.stderr


def test_produce_to_a_new_topic_creates_it_through_metadata(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("produce", *b, "--topic", name, stdin="first\n")
    assert ok("consume", *b, "--topic", name, "--from-beginning", "--max-messages", "1") == "first\n"
    unknown = run("consume", *b, "--topic", new_name(), "--timeout-ms", "300")
    assert unknown.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr


def test_a_running_consumer_prints_records_as_they_arrive_and_reports_its_total_on_ctrl_c(
        broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("topics", "create", *b, "--topic", name)
    with subprocess.Popen([sys.executable, "-m", "sofakafka", "consume", *b, "--topic", name],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=_take_sigint_like_a_terminal_child) as consumer:
        try:
            assert consumer.stdout is not None and consumer.stderr is not None
            # Without --from-beginning the consumer starts at the end; keep producing until it sees one.
            line = ""
            for i in range(200):
                ok("produce", *b, "--topic", name, stdin=f"late {i}\n")
                ready, _, _ = select.select([consumer.stdout], [], [], 0.5)
                if ready:
                    line = consumer.stdout.readline()
                    break
            assert line.startswith("late ")
            consumer.send_signal(signal.SIGINT)
            assert consumer.wait(timeout=30) == 130
            assert "Processed a total of" in consumer.stderr.read()
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()


def _take_sigint_like_a_terminal_child() -> None:
    # A suite started as a background job of a non-interactive shell (`nohup pytest &`, some CI launchers) runs
    # with SIGINT ignored, and an ignored signal survives exec: the consumer would never see the Ctrl-C above
    # and the test would wait out its timeout.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_produce_splits_large_input_below_max_message_bytes(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("topics", "create", *b, "--topic", name)
    # 2,000 lines of 1 KB in one --batch-size would be a 2 MB batch, over the default max.message.bytes.
    ok("produce", *b, "--topic", name, "--batch-size", "5000", stdin=("x" * 1000 + "\n") * 2000)
    done = run("consume", *b, "--topic", name, "--from-beginning", "--max-messages", "2000")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 2000


def test_topics_alter_with_a_replica_assignment_for_the_new_partitions(broker: RunningBroker) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    name = new_name()
    ok("topics", "create", *b, "--topic", name)
    ok("topics", "alter", *b, "--topic", name, "--partitions", "3", "--replica-assignment", "0,0,0")
    assert ok("topics", "describe", *b, "--topic", name).splitlines()[3] == (
        f"\tTopic: {name}\tPartition: 2\tLeader: 0\tReplicas: 0\tIsr: 0")
    wrong = run("topics", "alter", *b, "--topic", name, "--partitions", "4", "--replica-assignment", "0,0,0,0:1")
    assert wrong.returncode == 1
