"""The Java scenarios and Kafka's tools against a 3-broker sofakafka cluster and a 3-broker Apache Kafka 2.6 cluster.

The sofakafka cluster is what ``sofakafka cluster up`` starts (its own ZooKeeper, brokers 1-3, the launcher's
server.properties: RF 3, min.insync.replicas 2); the Kafka cluster is three ``kafka.Kafka`` processes given the
same server.properties by the same template. Topics here have RF 3, so every record a scenario writes is
replicated, acknowledged by the ISR and fetched from leaders spread over the brokers; group coordinators and
the controller are wherever the election put them. What the scenarios report must be the same from both
clusters, as must what the tools print where it is deterministic.

CI runs a representative subset (the Admin paths that see the cluster, acks and idempotence over RF 3, a group
and a rebalance under load, the tools that move replicas and leaders, DumpLogSegments on a follower's files);
``SOFAKAFKA_INTEROP_FULL=1`` runs every scenario with both client versions and every tool.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sofakafka.protocol.records import iter_batches
from tests.cluster.conftest import ZooKeeperServer
from tests.cluster.test_failover import Cluster, running_cluster
from tests.interop.tools import (
    Tool,
    consume,
    dump_agrees_with_our_reading,
    produce_lines,
    same_output,
    topics,
)
from tests.reference.fixtures import ScenarioJVMs
from tests.reference.java import CLIENT_VERSIONS
from tests.reference.kafka import ReferenceCluster, unique_chroot
from tests.reference.scenarios import Outcome, long_form, scenario

pytestmark = pytest.mark.timeout(600)

# Both clusters get these on top of the launcher's template: no initial rebalance delay (it only slows the
# tests), few internal partitions, and no automatic preferred-leader election (the leader-election tests move
# leadership themselves and look at where it is).
CLUSTER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "auto.leader.rebalance.enable": "false",
}
BROKER_IDS = (1, 2, 3)


class Clusters:
    def __init__(self, sofakafka: Cluster, kafka: ReferenceCluster) -> None:
        self.sofakafka = sofakafka
        self.kafka = kafka

    @property
    def bootstraps(self) -> dict[str, str]:
        return {"sofakafka": self.sofakafka.all_bootstrap, "kafka": self.kafka.bootstrap}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory, reference_zookeeper: ZooKeeperServer) -> Iterator[Clusters]:
    kafka = ReferenceCluster(tmp_path_factory.mktemp("kafka-cluster"),
                             reference_zookeeper.hosts + unique_chroot("cluster"), overrides=CLUSTER_SETTINGS)
    with contextlib.ExitStack() as stack:
        stack.callback(kafka.kill)
        # Both clusters start at once: most of a start is waiting.
        with ThreadPoolExecutor(1) as pool:
            kafka_up = pool.submit(kafka.start)
            try:
                sofakafka = stack.enter_context(running_cluster(tmp_path_factory.mktemp("sofakafka-cluster"),
                                                                CLUSTER_SETTINGS))
            finally:
                kafka_up.result()
        yield Clusters(sofakafka, kafka)


# ---- the Java scenarios, RF 3 ---------------------------------------------------------------------------------

DYNAMIC_BROKER_KEYS = ["log.cleaner.threads", "message.max.bytes", "log.retention.ms", "num.io.threads",
                       "log.segment.bytes", "compression.type", "unclean.leader.election.enable"]

# (scenario, the client version CI runs it with, or None for the long form only, its parameters)
SCENARIOS: list[tuple[str, str | None, dict[str, Any]]] = [
    ("admin.topics", "clients-2.6", {"topic": "topics"}),
    ("admin.cluster", "clients-4", {}),
    ("admin.configs", None, {"topic": "configs", "brokerKeys": DYNAMIC_BROKER_KEYS}),
    ("admin.groups", "clients-4", {"topic": "groups", "group": "g"}),
    ("admin.offsets", None, {"topic": "offsets"}),
    ("admin.elect_leaders", "clients-4", {"topic": "elect"}),
    ("admin.reassign", "clients-2.6", {"topic": "reassign"}),
    ("producer.acks", "clients-4", {"topic": "acks"}),
    ("producer.idempotent", "clients-2.6", {"topic": "idem", "records": 3000}),
    ("producer.compression", None, {"topic": "zstd", "codec": "zstd"}),
    ("producer.headers", None, {"topic": "headers"}),
    ("producer.big_batches", None, {"topic": "big", "records": 20000}),
    ("producer.large_record", None, {"topic": "large"}),
    ("consumer.assign", None, {"topic": "assign"}),
    ("consumer.subscribe", "clients-4", {"topic": "coop", "group": "coop", "assignor": "cooperative-sticky"}),
    ("consumer.static_membership", None, {"topic": "static", "group": "static"}),
    ("consumer.commit", "clients-2.6", {"topic": "commit", "group": "commit"}),
    ("consumer.offsets_for_times", None, {"topic": "times"}),
    ("consumer.pause_resume", None, {"topic": "pause"}),
    ("consumer.rebalance_under_load", "clients-2.6", {"topic": "load", "group": "load", "records": 10000}),
    ("streams.word_count", "clients-2.6", {"applicationId": "wordcount"}),
]
# Kafka Streams 2.6 is on the kafka-clients 2.6 JVM's classpath only.
STREAMS_CLIENT = "clients-2.6"
# Results that legitimately differ run to run (how many duplicates a rebalance caused): checked on each side.
CHECKED_ON_EACH_SIDE = {"consumer.rebalance_under_load"}
# Set the brokers' dynamic configs, which every description shows: never beside another one.
SERIAL = {"admin.configs": "broker configs"}

CASES = [
    pytest.param(name, client, id=f"{name}-{client}",
                 marks=[scenario(name, serial=SERIAL.get(name), **params)] + ([] if client == in_ci else [long_form]))
    for name, in_ci, params in SCENARIOS
    for client in CLIENT_VERSIONS
    if not name.startswith("streams.") or client == STREAMS_CLIENT
]


@pytest.fixture(scope="module")
def bootstraps(clusters: Clusters) -> dict[str, str]:
    return clusters.bootstraps


@pytest.fixture(scope="module")
def scenario_common() -> dict[str, Any]:
    return {"replicationFactor": 3}


@pytest.mark.parametrize(("name", "client"), CASES)
def test_java_scenario_on_three_brokers(outcome: Outcome, name: str, client: str) -> None:
    if name in CHECKED_ON_EACH_SIDE:
        for r in outcome.each().values():
            assert r["consumedDistinct"] == r["produced"] == 10000
        return
    r = outcome.same()
    if name == "admin.cluster":
        assert r["nodes"] == 3
    elif name == "admin.topics":
        assert r["createReplicationFactorAboveBrokers"] == "InvalidReplicationFactorException"
    elif name == "admin.reassign":
        assert r["moved"] is True
    elif name == "streams.word_count":
        assert r["tasksWhileTwo"] == [4, 4] and r["kafkaCount"] == 5
        assert {t["replicas"] for t in r["internalTopics"].values()} == {3}


# ---- Kafka's tools ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pair(clusters: Clusters) -> tuple[str, str]:
    """(sofakafka's bootstrap, Kafka's bootstrap) for :func:`same_output`."""
    return clusters.sofakafka.all_bootstrap, clusters.kafka.bootstrap


def on_both(kafka_tool: Tool, clusters: Clusters, main: str, *args: str) -> None:
    """Run one invocation against each cluster (``{b}`` is its bootstrap), for what comes before a comparison."""
    for b in clusters.bootstraps.values():
        kafka_tool(main, [a.replace("{b}", b) for a in args])


def test_kafka_topics_with_three_replicas(kafka_tool: Tool, clusters: Clusters, pair: tuple[str, str]) -> None:
    # A replica assignment given by hand is placed the same by both; describe then prints the same lines.
    out = same_output(kafka_tool, *pair, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}", "--create",
                      "--topic", "cl-topics", "--replica-assignment", "1:2:3,2:3:1,3:1:2")
    assert "Created topic cl-topics." in out
    described = same_output(kafka_tool, *pair, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}",
                            "--describe", "--topic", "cl-topics")
    for p, replicas in enumerate(("1,2,3", "2,3,1", "3,1,2")):
        assert re.search(rf"Partition: {p}\s+Leader: {replicas[0]}\s+Replicas: {replicas}\s+Isr: {replicas}",
                         described), described
    # Kafka places replicas of an unassigned topic from a random broker on; what matters is three in sync each.
    for b in clusters.bootstraps.values():
        topics(kafka_tool, b, "--create", "--topic", "cl-auto", "--partitions", "6", "--replication-factor", "3")
        # CreateTopics is answered once the broker that took it knows the topic (in Kafka too): the describe may
        # reach another broker that does not yet, and the followers join the ISRs as they fetch.
        described = ""

        def in_sync(b: str = b) -> bool:
            nonlocal described
            r = kafka_tool("kafka.admin.TopicCommand", ["--bootstrap-server", b, "--describe", "--topic", "cl-auto"],
                           check=False)
            described = r.stdout
            return r.returncode == 0 and len(re.findall(r"Isr: \d,\d,\d", described)) == 6

        wait_until(in_sync, f"cl-auto described with 6 partitions, each with 3 in sync, on {b}")
        rows = re.findall(r"Partition: (\d)\s+Leader: (\d)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]+)", described)
        assert len(rows) == 6, described
        for _, leader, replicas, isr in rows:
            assert sorted(replicas.split(",")) == ["1", "2", "3"] and sorted(isr.split(",")) == ["1", "2", "3"]
            assert leader == replicas.split(",")[0], described
        # The preferred leaders are spread over the brokers, one pass of the round robin each.
        assert sorted(leader for _, leader, _, _ in rows) == ["1", "1", "2", "2", "3", "3"], described
    # Under-replicated and unavailable partitions: none while every broker is up.
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        assert same_output(kafka_tool, *pair, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}", "--describe",
                           "--topic", "cl-topics", flag) == ""


def test_kafka_reassign_partitions_moves_data_between_brokers(kafka_tool: Tool, clusters: Clusters,
                                                             pair: tuple[str, str], tmp_path: Path) -> None:
    """A replica moves to the broker that had none: the data is copied there, the old one drops it, the ISR
    follows, and a consumer reads every record afterwards."""
    on_both(kafka_tool, clusters, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}", "--create", "--topic",
            "cl-move", "--replica-assignment", "1:2")
    for b in clusters.bootstraps.values():
        produce_lines(kafka_tool, b, "cl-move", [f"v{i}" for i in range(50)], "--producer-property", "acks=all")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "cl-move", "partition": 0,
                                                              "replicas": [3, 2], "log_dirs": ["any", "any"]}]}))
    out = same_output(kafka_tool, *pair, "kafka.admin.ReassignPartitionsCommand", "--bootstrap-server", "{b}",
                      "--reassignment-json-file", str(plan), "--execute")
    assert "Successfully started partition reassignment for cl-move-0" in out, out
    for b in clusters.bootstraps.values():
        wait_for_output(kafka_tool, "kafka.admin.ReassignPartitionsCommand",
                        ["--bootstrap-server", b, "--reassignment-json-file", str(plan), "--verify"],
                        "Reassignment of partition cl-move-0 is complete.")
    described = same_output(kafka_tool, *pair, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}",
                            "--describe", "--topic", "cl-move")
    assert re.search(r"Partition: 0\s+Leader: 3\s+Replicas: 3,2\s+Isr: (3,2|2,3)", described), described
    for b in clusters.bootstraps.values():
        assert consume(kafka_tool, b, "cl-move", 50, "--from-beginning") == [f"v{i}" for i in range(50)]
    # The replica that moved away is gone from broker 1's disk; broker 3 holds a copy of its own.
    data = {broker_id: clusters.sofakafka.state.directory / f"broker-{broker_id}" / "data" / "cl-move-0"
            for broker_id in BROKER_IDS}
    wait_until(lambda: not data[1].exists(), "broker 1 to delete its replica of cl-move-0")
    assert data[3].is_dir()


def test_kafka_leader_election_moves_leadership_to_the_preferred_replica(
        kafka_tool: Tool, clusters: Clusters, pair: tuple[str, str], tmp_path: Path) -> None:
    """Reordering a partition's replicas changes its preferred leader without moving data: the leader stays
    until a preferred election, which kafka-leader-election asks for."""
    on_both(kafka_tool, clusters, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}", "--create", "--topic",
            "cl-elect", "--replica-assignment", "1:2:3")
    plan = _write(tmp_path / "reorder.json", {"version": 1, "partitions": [
        {"topic": "cl-elect", "partition": 0, "replicas": [3, 1, 2], "log_dirs": ["any"] * 3}]})
    on_both(kafka_tool, clusters, "kafka.admin.ReassignPartitionsCommand", "--bootstrap-server", "{b}",
            "--reassignment-json-file", str(plan), "--execute")
    for b in clusters.bootstraps.values():
        wait_for_output(kafka_tool, "kafka.admin.ReassignPartitionsCommand",
                        ["--bootstrap-server", b, "--reassignment-json-file", str(plan), "--verify"],
                        "Reassignment of partition cl-elect-0 is complete.")
    before = same_output(kafka_tool, *pair, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}", "--describe",
                         "--topic", "cl-elect")
    assert re.search(r"Partition: 0\s+Leader: 1\s+Replicas: 3,1,2", before), before
    out = same_output(kafka_tool, *pair, "kafka.admin.LeaderElectionCommand", "--bootstrap-server", "{b}",
                      "--election-type", "preferred", "--topic", "cl-elect", "--partition", "0")
    assert "Successfully completed leader election (PREFERRED) for partitions cl-elect-0" in out, out
    after = same_output(kafka_tool, *pair, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}", "--describe",
                        "--topic", "cl-elect")
    assert re.search(r"Partition: 0\s+Leader: 3\s+Replicas: 3,1,2", after), after
    again = same_output(kafka_tool, *pair, "kafka.admin.LeaderElectionCommand", "--bootstrap-server", "{b}",
                        "--election-type", "preferred", "--topic", "cl-elect", "--partition", "0")
    assert again.startswith("Valid replica already elected for partitions"), again


def test_kafka_consumer_groups_on_a_cluster(kafka_tool: Tool, clusters: Clusters, pair: tuple[str, str]) -> None:
    on_both(kafka_tool, clusters, "kafka.admin.TopicCommand", "--bootstrap-server", "{b}", "--create", "--topic",
            "cl-groups", "--replica-assignment", "1:2:3,2:3:1,3:1:2")
    for b in clusters.bootstraps.values():
        produce_lines(kafka_tool, b, "cl-groups", [f"k{i}:v{i}" for i in range(30)], "--property", "parse.key=true",
                      "--property", "key.separator=:", "--producer-property", "acks=all")
        assert len(consume(kafka_tool, b, "cl-groups", 30, "--group", "cl-group", "--from-beginning")) == 30
    described = same_output(kafka_tool, *pair, "kafka.admin.ConsumerGroupCommand", "--bootstrap-server", "{b}",
                            "--describe", "--group", "cl-group")
    lags = re.findall(r"cl-group\s+cl-groups\s+(\d)\s+(\d+)\s+(\d+)\s+(\d+)", described)
    assert sorted(int(p) for p, *_ in lags) == [0, 1, 2] and sum(int(c) for _, c, _, _ in lags) == 30, described
    out = same_output(kafka_tool, *pair, "kafka.admin.ConsumerGroupCommand", "--bootstrap-server", "{b}",
                      "--reset-offsets", "--group", "cl-group", "--topic", "cl-groups", "--to-earliest", "--execute")
    assert sorted(re.findall(r"cl-groups\s+(\d)\s+(\d+)", out)) == [("0", "0"), ("1", "0"), ("2", "0")], out
    for b in clusters.bootstraps.values():
        assert len(consume(kafka_tool, b, "cl-groups", 30, "--group", "cl-group")) == 30


def test_dump_log_segments_on_a_followers_replica(kafka_tool: Tool, clusters: Clusters,
                                                  scenario_jvms: ScenarioJVMs) -> None:
    """A follower's segments are written by replication, not by a producer's request: DumpLogSegments agrees
    with our reading of them, and they hold the leader's batches byte for byte."""
    bootstrap = clusters.sofakafka.all_bootstrap
    jvm = scenario_jvms["clients-2.6"]
    jvm.run("producer.compression", bootstrap, topic="cl-dump", codec="lz4", replicationFactor=3)
    jvm.run("producer.idempotent", bootstrap, topic="cl-dump-idem", records=600, replicationFactor=3)
    for topic in ("cl-dump", "cl-dump-idem"):
        leader, _ = clusters.sofakafka.partitions(topic)[0]
        directories = {b: clusters.sofakafka.state.directory / f"broker-{b}" / "data" / f"{topic}-0" for b in BROKER_IDS}
        leader_log = b"".join(p.read_bytes() for p in sorted(directories[leader].glob("*.log")))
        for follower in (b for b in BROKER_IDS if b != leader):
            def caught_up(d: Path = directories[follower], wanted: bytes = leader_log) -> bool:
                return b"".join(p.read_bytes() for p in sorted(d.glob("*.log"))) == wanted
            wait_until(caught_up, f"broker {follower}'s replica of {topic}-0 to hold the leader's batches")
            segments = sorted(directories[follower].glob("*.log"))
            assert dump_agrees_with_our_reading(kafka_tool, segments) > 0
            assert sum(1 for _ in iter_batches(leader_log)) > 0


@long_form
def test_kafka_log_dirs_on_every_broker(kafka_tool: Tool, clusters: Clusters) -> None:
    b = clusters.sofakafka.all_bootstrap
    kafka_tool("kafka.admin.TopicCommand", ["--bootstrap-server", b, "--create", "--topic", "cl-logdirs",
                                            "--replica-assignment", "1:2:3"])
    produce_lines(kafka_tool, b, "cl-logdirs", [f"v{i}" for i in range(20)], "--producer-property", "acks=all")

    def sizes() -> dict[int, int]:
        out = kafka_tool("kafka.admin.LogDirsCommand", ["--bootstrap-server", b, "--describe", "--broker-list",
                                                        "1,2,3", "--topic-list", "cl-logdirs"]).stdout
        info = json.loads(out.strip().splitlines()[-1])
        return {broker["broker"]: sum(p["size"] for d in broker["logDirs"] for p in d["partitions"])
                for broker in info["brokers"]}

    wait_until(lambda: len(set(sizes().values())) == 1 and min(sizes().values()) > 0,
               "every broker's replica of cl-logdirs-0 to have the same, non-zero size")
    assert sorted(sizes()) == [1, 2, 3]


@long_form
def test_producer_perf_test_acks_all_rf3_and_consumer_perf_test(kafka_tool: Tool, clusters: Clusters) -> None:
    for b in clusters.bootstraps.values():
        topics(kafka_tool, b, "--create", "--topic", "cl-perf", "--partitions", "3", "--replication-factor", "3")
        out = kafka_tool("org.apache.kafka.tools.ProducerPerformance", [
            "--topic", "cl-perf", "--num-records", "20000", "--record-size", "100", "--throughput", "-1",
            "--producer-props", f"bootstrap.servers={b}", "acks=all", "linger.ms=5"]).stdout
        assert re.search(r"^20000 records sent, [\d.]+ records/sec", out, re.MULTILINE), out
        out = kafka_tool("kafka.tools.ConsumerPerformance", ["--bootstrap-server", b, "--topic", "cl-perf",
                                                             "--messages", "20000", "--timeout", "30000"]).stdout
        header, values = out.strip().splitlines()[-2:]
        row = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=False))
        assert int(row["data.consumed.in.nMsg"]) == 20000, out


@long_form
def test_kafka_configs_on_a_cluster(kafka_tool: Tool, clusters: Clusters, pair: tuple[str, str]) -> None:
    def configs(*args: str) -> str:
        return same_output(kafka_tool, *pair, "kafka.admin.ConfigCommand", "--bootstrap-server", "{b}", *args)

    configs("--entity-type", "brokers", "--entity-name", "2", "--alter", "--add-config", "log.cleaner.threads=2")
    described = configs("--entity-type", "brokers", "--entity-name", "2", "--describe")
    assert "log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2" in described
    assert "log.cleaner.threads" not in configs("--entity-type", "brokers", "--entity-name", "3", "--describe")
    configs("--entity-type", "brokers", "--entity-name", "2", "--alter", "--delete-config", "log.cleaner.threads")


def wait_for_output(kafka_tool: Tool, main: str, args: list[str], wanted: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        out = kafka_tool(main, args).stdout
        if wanted in out:
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"{main} never printed {wanted!r}; last:\n{out}")
        time.sleep(0.5)


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _write(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj))
    return path
