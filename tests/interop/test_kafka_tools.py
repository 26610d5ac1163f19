"""Apache Kafka 2.6's own command-line tools (kafka_2.13 2.6.3, run as its bin/ scripts run them: ``java -cp
<jars> <main class>``) against a sofakafka broker, each with what a user would check in its output; and
``kafka.tools.DumpLogSegments`` reading the segment and index files sofakafka wrote, agreeing with our own
reading of them on every batch, record and index entry.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from tests.integration.conftest import REPO, BrokerProcess
from tests.interop.tools import (
    Tool,
    consume,
    dump,
    dump_agrees_with_our_reading,
    index_dump_agrees_with_our_reading,
    produce_lines,
    same_output,
    topics,
)
from tests.reference.fixtures import ComparedBrokers, ScenarioJVMs
from tests.reference.kafka import SECURE_ADMIN, SECURE_USER, SHARED_SETTINGS, SecuredBroker

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def bootstrap(interop_brokers: ComparedBrokers) -> str:
    return interop_brokers.sofakafka.bootstrap


@pytest.fixture(scope="module")
def reference(interop_brokers: ComparedBrokers) -> str:
    """Apache Kafka 2.6's address: where a tool's output is deterministic, it must read the same from both."""
    return interop_brokers.kafka.bootstrap


def test_kafka_topics_create_list_describe_alter_delete(kafka_tool: Tool, bootstrap: str, reference: str) -> None:
    out = same_output(kafka_tool, bootstrap, reference, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}",
                      "--create", "--topic", "tool-topics", "--partitions", "3", "--replication-factor", "1",
                      "--config", "cleanup.policy=compact")
    assert "Created topic tool-topics." in out
    assert "tool-topics" in topics(kafka_tool, bootstrap, "--list").split()
    described = same_output(kafka_tool, bootstrap, reference, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}",
                            "--describe", "--topic", "tool-topics")
    assert re.search(r"Topic: tool-topics\s+PartitionCount: 3\s+ReplicationFactor: 1\s+Configs: .*cleanup.policy=compact",
                     described), described
    assert len(re.findall(r"Partition: \d\s+Leader: 0\s+Replicas: 0\s+Isr: 0", described)) == 3, described
    topics(kafka_tool, bootstrap, "--alter", "--topic", "tool-topics", "--partitions", "5")
    assert "PartitionCount: 5" in topics(kafka_tool, bootstrap, "--describe", "--topic", "tool-topics")
    exists = kafka_tool("kafka.admin.TopicCommand", ["--bootstrap-server", bootstrap, "--create", "--topic",
                                                     "tool-topics", "--partitions", "1"], check=False)
    assert exists.returncode == 1 and "already exists" in exists.stdout + exists.stderr
    topics(kafka_tool, bootstrap, "--delete", "--topic", "tool-topics")
    # Deletion completes asynchronously in Kafka too: the tool's --list may still show it for a moment.
    for _ in range(100):
        if "tool-topics" not in topics(kafka_tool, bootstrap, "--list").split():
            break
    else:
        pytest.fail("tool-topics still listed after --delete")


def test_kafka_configs_topic_and_broker(kafka_tool: Tool, bootstrap: str, reference: str) -> None:
    for b in (bootstrap, reference):
        topics(kafka_tool, b, "--create", "--topic", "tool-configs", "--partitions", "1", "--replication-factor", "1")

    def configs(*args: str, until: Callable[[str], bool] | None = None) -> str:
        """Run on both brokers: the changes are made on both, and what is printed must be the same."""
        return same_output(kafka_tool, bootstrap, reference, "kafka.admin.ConfigCommand", "--bootstrap-server", "{b}",
                           *args, until=until)

    out = configs("--entity-type", "topics", "--entity-name", "tool-configs", "--alter",
                  "--add-config", "retention.ms=3600000,max.message.bytes=2000000")
    assert "Completed updating config for topic tool-configs." in out
    described = configs("--entity-type", "topics", "--entity-name", "tool-configs", "--describe")
    assert "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}" in described, described
    assert "max.message.bytes=2000000" in described
    configs("--entity-type", "topics", "--entity-name", "tool-configs", "--alter", "--delete-config", "retention.ms")
    described = configs("--entity-type", "topics", "--entity-name", "tool-configs", "--describe")
    assert "retention.ms" not in described and "max.message.bytes=2000000" in described
    # Broker configs: a per-broker and a cluster-wide dynamic value, described and removed again.
    configs("--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config", "log.cleaner.threads=2")
    # Kafka applies (and describes) a dynamic broker config once ZooKeeper's change notification reaches it.
    described = configs("--entity-type", "brokers", "--entity-name", "0", "--describe",
                        until=lambda out: "log.cleaner.threads=2" in out)
    assert "log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2" in described
    configs("--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "message.max.bytes=2000000")
    described = configs("--entity-type", "brokers", "--entity-default", "--describe",
                        until=lambda out: "message.max.bytes=2000000" in out)
    assert "message.max.bytes=2000000" in described
    every = kafka_tool("kafka.admin.ConfigCommand", ["--bootstrap-server", bootstrap, "--entity-type", "brokers",
                                                     "--entity-name", "0", "--describe", "--all"]).stdout
    assert re.search(r"num.partitions=1 sensitive=false synonyms=\{DEFAULT_CONFIG:num.partitions=1\}", every), every
    configs("--entity-type", "brokers", "--entity-name", "0", "--alter", "--delete-config", "log.cleaner.threads")
    configs("--entity-type", "brokers", "--entity-default", "--alter", "--delete-config", "message.max.bytes")
    assert "log.cleaner.threads" not in configs("--entity-type", "brokers", "--entity-name", "0", "--describe",
                                                until=lambda out: "log.cleaner.threads" not in out)


def test_console_producer_and_consumer(kafka_tool: Tool, bootstrap: str) -> None:
    produce_lines(kafka_tool, bootstrap, "tool-console", [f"k{i}:value {i}" for i in range(20)],
                  "--property", "parse.key=true", "--property", "key.separator=:",
                  "--producer-property", "compression.type=lz4")
    lines = consume(kafka_tool, bootstrap, "tool-console", 20, "--from-beginning",
                    "--property", "print.key=true", "--property", "key.separator=:")
    assert lines == [f"k{i}:value {i}" for i in range(20)]
    # As a group member, the consumer commits what it read: a second run in the group sees nothing new.
    assert len(consume(kafka_tool, bootstrap, "tool-console", 20, "--group", "console-group", "--from-beginning")) == 20
    again = kafka_tool("kafka.tools.ConsoleConsumer", ["--bootstrap-server", bootstrap, "--topic", "tool-console",
                                                       "--group", "console-group", "--timeout-ms", "3000"], check=False)
    assert again.stdout.strip() == "" and "Processed a total of 0 messages" in again.stderr


def test_kafka_consumer_groups_describe_reset_delete(kafka_tool: Tool, bootstrap: str, reference: str) -> None:
    for b in (bootstrap, reference):
        topics(kafka_tool, b, "--create", "--topic", "tool-groups", "--partitions", "2", "--replication-factor", "1")
        produce_lines(kafka_tool, b, "tool-groups", [f"k{i}:v{i}" for i in range(10)],
                      "--property", "parse.key=true", "--property", "key.separator=:")
        assert len(consume(kafka_tool, b, "tool-groups", 10, "--group", "tool-group", "--from-beginning")) == 10

    def groups(*args: str) -> str:
        return kafka_tool("kafka.admin.ConsumerGroupCommand", ["--bootstrap-server", bootstrap, *args]).stdout

    assert "tool-group" in groups("--list").split()
    described = same_output(kafka_tool, bootstrap, reference, "kafka.admin.ConsumerGroupCommand",
                            "--bootstrap-server", "{b}", "--describe", "--group", "tool-group")
    assert "Consumer group 'tool-group' has no active members." in kafka_tool(
        "kafka.admin.ConsumerGroupCommand", ["--bootstrap-server", bootstrap, "--describe", "--group", "tool-group"]).stderr
    lags = re.findall(r"tool-group\s+tool-groups\s+(\d)\s+(\d+)\s+(\d+)\s+(\d+)", described)
    assert sorted(int(p) for p, *_ in lags) == [0, 1], described
    assert sum(int(cur) for _, cur, _, _ in lags) == 10 and all(lag == "0" for *_, lag in lags), described
    end = {int(p): int(log_end) for p, _, log_end, _ in lags}

    def offsets_after(*reset: str) -> dict[int, int]:
        out = groups("--reset-offsets", "--group", "tool-group", "--topic", "tool-groups", *reset, "--execute")
        return {int(p): int(o) for p, o in re.findall(r"tool-groups\s+(\d)\s+(\d+)", out)}

    assert offsets_after("--to-earliest") == {0: 0, 1: 0}
    assert offsets_after("--to-offset", "2") == {p: min(2, e) for p, e in end.items()}
    assert offsets_after("--shift-by", "1") == {p: min(3, e) for p, e in end.items()}
    assert offsets_after("--to-latest") == end
    assert offsets_after("--to-datetime", "2000-01-01T00:00:00.000") == {0: 0, 1: 0}
    dry = groups("--reset-offsets", "--group", "tool-group", "--topic", "tool-groups", "--to-latest", "--dry-run")
    assert {int(p): int(o) for p, o in re.findall(r"tool-groups\s+(\d)\s+(\d+)", dry)} == end
    # The dry run changed nothing: the group still starts at 0.
    assert len(consume(kafka_tool, bootstrap, "tool-groups", 10, "--group", "tool-group")) == 10
    out = groups("--delete-offsets", "--group", "tool-group", "--topic", "tool-groups:0")
    assert re.search(r"tool-groups\s+0\s+Successful", out), out
    assert "Deletion of requested consumer groups ('tool-group') was successful." in groups("--delete", "--group", "tool-group")
    assert "tool-group" not in groups("--list").split()


def test_kafka_delete_records(kafka_tool: Tool, bootstrap: str, reference: str, tmp_path: Path) -> None:
    for b in (bootstrap, reference):
        produce_lines(kafka_tool, b, "tool-delete", [f"v{i}" for i in range(10)])
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": "tool-delete", "partition": 0, "offset": 4}]}))
    out = same_output(kafka_tool, bootstrap, reference, "kafka.admin.DeleteRecordsCommand", "--bootstrap-server", "{b}",
                      "--offset-json-file", str(spec))
    assert "partition: tool-delete-0\tlow_watermark: 4" in out, out
    assert consume(kafka_tool, bootstrap, "tool-delete", 6, "--from-beginning") == [f"v{i}" for i in range(4, 10)]


def test_kafka_reassign_partitions(kafka_tool: Tool, bootstrap: str, tmp_path: Path) -> None:
    topics(kafka_tool, bootstrap, "--create", "--topic", "tool-reassign", "--partitions", "2", "--replication-factor", "1")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tool-reassign", "partition": p, "replicas": [0], "log_dirs": ["any"]} for p in (0, 1)]}))

    def reassign(*args: str) -> str:
        return kafka_tool("kafka.admin.ReassignPartitionsCommand", ["--bootstrap-server", bootstrap, *args]).stdout

    out = reassign("--reassignment-json-file", str(plan), "--execute")
    assert "Successfully started partition reassignments for tool-reassign-0,tool-reassign-1" in out, out
    for _ in range(100):
        verified = reassign("--reassignment-json-file", str(plan), "--verify")
        if "Reassignment of partition tool-reassign-0 is complete." in verified:
            break
    assert "Reassignment of partition tool-reassign-1 is complete." in verified, verified
    assert "No partition reassignments found." in reassign("--list")
    generated = reassign("--generate", "--broker-list", "0", "--topics-to-move-json-file",
                         str(_write(tmp_path / "move.json", {"version": 1, "topics": [{"topic": "tool-reassign"}]})))
    assert "Proposed partition reassignment configuration" in generated
    proposal = json.loads(generated.strip().splitlines()[-1])
    assert sorted(p["partition"] for p in proposal["partitions"]) == [0, 1]


def _write(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj))
    return path


def test_kafka_leader_election(kafka_tool: Tool, bootstrap: str, reference: str) -> None:
    for b in (bootstrap, reference):
        topics(kafka_tool, b, "--create", "--topic", "tool-elect", "--partitions", "2", "--replication-factor", "1")
    # Kafka 2.6's tool lists no partition names in this message (it prints the set of those whose election
    # was "not needed" after filtering them out); what matters is that both brokers lead it to print the same.
    out = same_output(kafka_tool, bootstrap, reference, "kafka.admin.LeaderElectionCommand", "--bootstrap-server",
                      "{b}", "--election-type", "preferred", "--topic", "tool-elect", "--partition", "0")
    assert out.startswith("Valid replica already elected for partitions"), out
    unclean = same_output(kafka_tool, bootstrap, reference, "kafka.admin.LeaderElectionCommand", "--bootstrap-server",
                          "{b}", "--election-type", "unclean", "--topic", "tool-elect", "--partition", "1")
    assert unclean.startswith("Valid replica already elected for partitions"), unclean


def test_kafka_log_dirs(kafka_tool: Tool, bootstrap: str, interop_brokers: ComparedBrokers) -> None:
    produce_lines(kafka_tool, bootstrap, "tool-logdirs", [f"v{i}" for i in range(5)])
    out = kafka_tool("kafka.admin.LogDirsCommand", ["--bootstrap-server", bootstrap, "--describe",
                                                    "--broker-list", "0", "--topic-list", "tool-logdirs"]).stdout
    info = json.loads(out.strip().splitlines()[-1])
    (broker,) = info["brokers"]
    assert broker["broker"] == 0
    (log_dir,) = broker["logDirs"]
    assert Path(log_dir["logDir"]) == interop_brokers.sofakafka.data_dir and log_dir["error"] is None
    (partition,) = log_dir["partitions"]
    assert partition["partition"] == "tool-logdirs-0" and partition["size"] > 0 and partition["offsetLag"] == 0


def test_kafka_reassign_partitions_moves_a_replica_between_log_dirs(kafka_tool: Tool, tmp_path: Path) -> None:
    """Kafka's tool with ``log_dirs`` in its JSON: AlterReplicaLogDirs after the reassignment, DescribeLogDirs to
    verify, ``--replica-alter-log-dirs-throttle`` set and cleared through IncrementalAlterConfigs. A broker of the
    test's own, with two log dirs."""
    dirs = [tmp_path / "disk-a", tmp_path / "disk-b"]
    broker = BrokerProcess(tmp_path / "jbod", {"log.dirs": ",".join(map(str, dirs))})
    broker.start()
    try:
        b = broker.bootstrap
        topics(kafka_tool, b, "--create", "--topic", "tool-jbod", "--partitions", "1", "--replication-factor", "1")
        produce_lines(kafka_tool, b, "tool-jbod", [f"v{i}" for i in range(20)])

        def log_dirs() -> dict[str, list[str]]:
            out = kafka_tool("kafka.admin.LogDirsCommand", ["--bootstrap-server", b, "--describe", "--broker-list",
                                                            "0", "--topic-list", "tool-jbod"]).stdout
            (info,) = json.loads(out.strip().splitlines()[-1])["brokers"]
            return {d["logDir"]: [p["partition"] + (" (future)" if p["isFuture"] else "") for p in d["partitions"]]
                    for d in info["logDirs"]}

        (current,) = [d for d, parts in log_dirs().items() if parts]
        target = next(str(d.resolve()) for d in dirs if str(d.resolve()) != current)
        plan = _write(tmp_path / "plan.json", {"version": 1, "partitions": [
            {"topic": "tool-jbod", "partition": 0, "replicas": [0], "log_dirs": [target]}]})

        def reassign(*args: str) -> str:
            return kafka_tool("kafka.admin.ReassignPartitionsCommand", ["--bootstrap-server", b, *args]).stdout

        out = reassign("--reassignment-json-file", str(plan), "--execute",
                       "--replica-alter-log-dirs-throttle", "50000000")
        assert "The replica-alter-dir throttle limit was set to 50000000 B/s" in out, out
        assert "Successfully started log directory move for: tool-jbod-0-0" in out, out
        for _ in range(100):
            verified = reassign("--reassignment-json-file", str(plan), "--verify")
            if "Reassignment of replica tool-jbod-0-0 completed successfully." in verified:
                break
            time.sleep(0.2)
        assert "Reassignment of replica tool-jbod-0-0 completed successfully." in verified, verified
        assert "Clearing broker-level throttles on broker 0" in verified, verified
        assert log_dirs() == {current: [], target: ["tool-jbod-0"]}
        assert consume(kafka_tool, b, "tool-jbod", 20, "--from-beginning") == [f"v{i}" for i in range(20)]
        described = kafka_tool("kafka.admin.ConfigCommand", ["--bootstrap-server", b, "--describe",
                                                             "--entity-type", "brokers", "--entity-name", "0"]).stdout
        assert "replica.alter.log.dirs.io.max.bytes.per.second" not in described, described
    finally:
        broker.kill()


def test_producer_and_consumer_perf_test(kafka_tool: Tool, bootstrap: str) -> None:
    topics(kafka_tool, bootstrap, "--create", "--topic", "tool-perf", "--partitions", "2", "--replication-factor", "1")
    out = kafka_tool("org.apache.kafka.tools.ProducerPerformance", [
        "--topic", "tool-perf", "--num-records", "20000", "--record-size", "100", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all", "linger.ms=5"]).stdout
    assert re.search(r"^20000 records sent, [\d.]+ records/sec", out, re.MULTILINE), out
    out = kafka_tool("kafka.tools.ConsumerPerformance", ["--bootstrap-server", bootstrap, "--topic", "tool-perf",
                                                         "--messages", "20000", "--timeout", "30000"]).stdout
    header, values = out.strip().splitlines()[-2:]
    row = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=False))
    assert int(row["data.consumed.in.nMsg"]) == 20000, out


# ---- kafka-acls and kafka-configs' SCRAM users, against brokers with SASL and the ACL authorizer (issue 12) -----
# sofakafka here keeps its users and ACLs in ZooKeeper (secured_zookeeper_sofakafka), as Kafka 2.6 does: one
# broker serves both tests, and kafka-configs reaches it the one way Kafka 2.6's has for SCRAM users.

def _login_properties(path: Path, user: tuple[str, str]) -> str:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="{user[0]}" password="{user[1]}";\n')
    return str(path)


_ACL_BLOCK = re.compile(r"\w+ ACLs for resource `[^`]*`: \n \t.*? \n\n", re.DOTALL)


def _entries_sorted(text: str) -> str:
    """AclCommand's resources, and each one's entries, in a fixed order: it prints them in the order of Scala
    maps and sets of what DescribeAcls answered, and Kafka's authorizer keeps ACLs in hash maps and sets."""
    def entries_sorted(block: str) -> str:
        head, _, body = block.partition(": \n \t")
        return head + ": \n \t" + "\n\t".join(sorted(body[:-3].split("\n\t"))) + " \n\n"
    blocks = iter(sorted(entries_sorted(m[0]) for m in _ACL_BLOCK.finditer(text)))
    return _ACL_BLOCK.sub(lambda _: next(blocks), text)


@pytest.mark.timeout(900)  # fourteen JVMs and a second reference broker on a shared machine
def test_kafka_acls(kafka_tool: Tool, secured_zookeeper_sofakafka: SecuredBroker,
                    secured_reference_kafka: SecuredBroker, tmp_path: Path) -> None:
    """kafka-acls.sh (``kafka.admin.AclCommand --bootstrap-server``, which speaks CreateAcls/DescribeAcls/
    DeleteAcls) as the super user and as a user without rights, printing the same against both brokers."""
    ours, theirs = secured_zookeeper_sofakafka.bootstrap, secured_reference_kafka.bootstrap
    admin = _login_properties(tmp_path / "admin.properties", SECURE_ADMIN)
    user = _login_properties(tmp_path / "user.properties", SECURE_USER)

    def acls(*args: str) -> str:
        return same_output(kafka_tool, ours, theirs, "kafka.admin.AclCommand", "--bootstrap-server", "{b}",
                           "--command-config", admin, *args, normalise=_entries_sorted)
    added = acls("--add", "--allow-principal", "User:bob", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1",
                 "--operation", "Read", "--topic", "tool-acl")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=tool-acl, patternType=LITERAL)`" in added
    assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in added
    assert "(principal=User:bob, host=10.0.0.1, operation=READ, permissionType=DENY)" in added
    acls("--add", "--allow-principal", "User:carol", "--consumer", "--topic", "tool-acl-", "--group", "tool-acl-g",
         "--resource-pattern-type", "PREFIXED")
    acls("--add", "--allow-principal", "User:carol", "--producer", "--idempotent", "--topic", "tool-acl-out")
    every = acls("--list")
    assert "name=tool-acl-, patternType=PREFIXED" in every and "operation=IDEMPOTENT_WRITE" in every, every
    by_principal = acls("--list", "--principal", "User:carol")
    assert "User:bob" not in by_principal and "tool-acl-g" in by_principal, by_principal
    removed = acls("--remove", "--force", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "tool-acl")
    assert "permissionType=ALLOW" not in removed.split("Current ACLs")[-1], removed
    # A user without DESCRIBE on the cluster: the same exception and exit code from both (Kafka's message names
    # its request object, ours says what failed).
    for b in (ours, theirs):
        refused = kafka_tool("kafka.admin.AclCommand", ["--bootstrap-server", b, "--command-config", user, "--list"],
                             check=False)
        assert refused.returncode == 1 and refused.stdout.startswith(
            "Error while executing ACL command: org.apache.kafka.common.errors.ClusterAuthorizationException: "), b


def _scram_login(broker: SecuredBroker, mechanism: str, user: str, password: str) -> str:
    """Log in with librdkafka (confluent-kafka) and ask for metadata: "ok", or librdkafka's authentication
    error, or "no answer" when neither came within the bound."""
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                         "error_cb": errors.append, "reconnect.backoff.ms": 500})
    try:
        producer.list_topics(timeout=5)
        return "ok"
    except KafkaException:
        producer.poll(0.5)
    refused = [e for e in errors if e.name() == "_AUTHENTICATION"]
    return f"{refused[0].name()}: {refused[0].str()}" if refused else "no answer"


def _wait_login(broker: SecuredBroker, mechanism: str, user: str, password: str, ok: bool) -> str:
    """Until a login succeeds (``ok``) or is refused (not ``ok``): users written into ZooKeeper reach the broker
    through the change notification, a moment after the tool returns. Returns the last outcome."""
    deadline = time.monotonic() + 60
    while True:
        outcome = _scram_login(broker, mechanism, user, password)
        if (outcome == "ok") == ok and outcome != "no answer":
            return outcome
        assert time.monotonic() < deadline, f"{user} {mechanism}: still {outcome!r}"


def test_kafka_configs_scram_users(kafka_tool: Tool, secured_zookeeper_sofakafka: SecuredBroker,
                                   tmp_path: Path) -> None:
    """kafka-configs.sh --entity-type users with SCRAM credentials, as Kafka 2.6 manages them: ``--zookeeper``
    (2.6's ``--bootstrap-server`` form refuses SCRAM configs, "Only quota configs can be added for 'users'",
    KIP-554's API came in 2.7). A user Kafka's tool writes into sofakafka's ZooKeeper logs in with a stock
    client, only with the mechanism it was given, and no more once the tool deletes it; a user ``sofakafka users``
    creates through the broker is read back by Kafka's tool as Kafka's own stored credential."""
    broker = secured_zookeeper_sofakafka
    assert broker.zk_connect is not None

    def configs(*args: str) -> str:
        return kafka_tool("kafka.admin.ConfigCommand", ["--zookeeper", broker.zk_connect, "--entity-type", "users",
                                                        *args]).stdout
    out = configs("--entity-name", "carl", "--alter", "--add-config", "SCRAM-SHA-256=[password=carl-secret]")
    assert "Completed updating config for entity: user-principal 'carl'." in out, out
    assert _wait_login(broker, "SCRAM-SHA-256", "carl", "carl-secret", ok=True) == "ok"
    # Only the mechanism written, only the password written; the broker's answer does not say which was wrong.
    for mechanism, password in (("SCRAM-SHA-512", "carl-secret"), ("SCRAM-SHA-256", "not-carls")):
        refused = _scram_login(broker, mechanism, "carl", password)
        assert refused.startswith("_AUTHENTICATION") and "invalid credentials" in refused, (mechanism, refused)

    # The other way round: our command writes through the broker, Kafka's tool reads the znode.
    made = subprocess.run(
        [sys.executable, "-m", "sofakafka", "users", "add", "dora", "--password", "dora-secret", "--mechanism",
         "SCRAM-SHA-512", "--iterations", "8192", "--bootstrap-server", broker.bootstrap, "--command-config",
         _login_properties(tmp_path / "admin.properties", SECURE_ADMIN)],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert made.returncode == 0, made.stderr
    described = configs("--entity-name", "dora", "--describe")
    assert re.search(r"^Configs for user-principal 'dora' are SCRAM-SHA-512=salt=[A-Za-z0-9+/=]+,"
                     r"stored_key=[A-Za-z0-9+/=]+,server_key=[A-Za-z0-9+/=]+,iterations=8192$",
                     described, re.MULTILINE), described
    assert _scram_login(broker, "SCRAM-SHA-512", "dora", "dora-secret") == "ok"

    out = configs("--entity-name", "carl", "--alter", "--delete-config", "SCRAM-SHA-256")
    assert "Completed updating config for entity: user-principal 'carl'." in out, out
    _wait_login(broker, "SCRAM-SHA-256", "carl", "carl-secret", ok=False)


# ---- DumpLogSegments on files sofakafka wrote ----------------------------------------------------------------

@pytest.fixture(scope="module")
def written_by_sofakafka(tmp_path_factory: pytest.TempPathFactory, scenario_jvms: ScenarioJVMs) -> Iterator[Path]:
    """A sofakafka data dir holding batches of every kind a Java producer writes (each codec, headers, idempotent,
    big ones across several small segments), after a clean stop (indexes trimmed as Kafka leaves them)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("dumped"), {**SHARED_SETTINGS, "log.segment.bytes": "65536",
                                                               "log.index.interval.bytes": "1024"}).start()
    try:
        jvm = scenario_jvms["clients-2.6"]
        runs = [("producer.big_batches", {"topic": "dump-big", "records": 4000, "batchSize": 16384}),
                *(("producer.compression", {"topic": f"dump-{c}", "codec": c}) for c in ("gzip", "snappy", "lz4", "zstd")),
                ("producer.headers", {"topic": "dump-headers"}),
                ("producer.idempotent", {"topic": "dump-idempotent", "records": 3000})]
        futures = [(name, jvm.submit(name, broker.bootstrap, **params)) for name, params in runs]
        # A committed, an aborted and a committed transaction: COMMIT/ABORT markers and a .txnindex entry.
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "dump-txn"})
        producer.init_transactions(60)
        for value, commit in ((b"kept", True), (b"gone", False), (b"kept-too", True)):
            producer.begin_transaction()
            producer.produce("dump-txn", value=value, partition=0)
            producer.flush(30)
            if commit:
                producer.commit_transaction(60)
            else:
                producer.abort_transaction(60)
        for name, future in futures:
            jvm.result(future, name, broker.bootstrap)
        assert broker.stop() == 0, broker.log_tail()
        yield broker.data_dir
    finally:
        broker.kill()


DUMPED_PARTITIONS = ("dump-gzip-0", "dump-snappy-0", "dump-lz4-0", "dump-zstd-0", "dump-headers-0",
                     "dump-idempotent-0", "dump-big-0")


@pytest.mark.parametrize("partition_dir", DUMPED_PARTITIONS)
def test_dump_log_segments_agrees_on_every_batch_and_record(kafka_tool: Tool, written_by_sofakafka: Path,
                                                            partition_dir: str) -> None:
    segments = sorted((written_by_sofakafka / partition_dir).glob("*.log"))
    assert segments, f"no segments in {partition_dir}"
    assert dump_agrees_with_our_reading(kafka_tool, segments) > 0


def test_dump_log_prints_markers_and_the_txnindex_as_dump_log_segments_does(kafka_tool: Tool,
                                                                             written_by_sofakafka: Path) -> None:
    index = next((written_by_sofakafka / "dump-txn-0").glob("*.txnindex"))
    ours = subprocess.run([sys.executable, "-m", "sofakafka", "dump-log", "--files", str(index)],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    theirs = dump(kafka_tool, index)
    assert "producerId" in ours and ours.splitlines() == theirs.splitlines()

    def markers(out: str) -> list[str]:
        return [line for line in out.split("\n") if "endTxnMarker" in line]

    log = index.with_suffix(".log")
    ours_log = subprocess.run([sys.executable, "-m", "sofakafka", "dump-log", "--deep-iteration", "--files",
                               str(log)], capture_output=True, text=True, timeout=60, check=True).stdout
    assert [m.split("endTxnMarker: ")[1] for m in markers(ours_log)] == [
        "COMMIT coordinatorEpoch: 0", "ABORT coordinatorEpoch: 0", "COMMIT coordinatorEpoch: 0"]
    assert markers(ours_log) == markers(dump(kafka_tool, log, extra=("--deep-iteration",)))


@pytest.mark.parametrize("partition_dir", ["dump-big-0", "dump-big-1"])
def test_dump_log_segments_agrees_on_every_index_entry(kafka_tool: Tool, written_by_sofakafka: Path,
                                                       partition_dir: str) -> None:
    directory = written_by_sofakafka / partition_dir
    assert len(list(directory.glob("*.index"))) > 1, "expected several segments"
    index_dump_agrees_with_our_reading(kafka_tool, directory)
