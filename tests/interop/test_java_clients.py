"""Apache Kafka's Java clients (kafka-clients 2.6.3 and 4.x) against sofakafka and against Apache Kafka 2.6.

Every scenario (interop/java/scenarios: Admin, producer, consumer) runs in one JVM per client version, first
against a sofakafka broker, then against the reference Kafka 2.6 broker started with the same settings. The
scenario checks what it sees itself (a failed check fails the test with the Java stack); what it reports
(error class names, config sources, offsets, assignment sizes) must be the same from both brokers, so a
behaviour of ours that differs from Kafka's fails here even where the client copes with it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import BrokerProcess
from tests.reference.fixtures import ScenarioJVMs
from tests.reference.java import CLIENT_VERSIONS
from tests.reference.kafka import ReferenceKafka

pytestmark = pytest.mark.timeout(600)

CODECS = ("gzip", "snappy", "lz4", "zstd")
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
# Broker keys Kafka 2.6 changes at run time (dynamic per broker and cluster-wide); the Admin scenario sets each.
DYNAMIC_BROKER_KEYS = ("log.cleaner.threads", "message.max.bytes", "log.retention.ms", "num.io.threads",
                       "log.segment.bytes", "compression.type", "unclean.leader.election.enable")


@pytest.fixture(scope="module")
def bootstraps(sofakafka_broker: BrokerProcess, reference_kafka: ReferenceKafka) -> dict[str, str]:
    return {"sofakafka": sofakafka_broker.bootstrap, "kafka": reference_kafka.bootstrap}


_names = 0


def run_on_both(jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str, scenario: str,
                **params: Any) -> dict[str, Any]:
    """The scenario's result from each broker; topic and group names are made unique per run."""
    global _names
    results: dict[str, Any] = {}
    for broker, bootstrap in bootstraps.items():
        _names += 1
        unique = {k: f"{v}-{client}-{broker}-{_names}" if k in ("topic", "group", "transactionalId") else v
                  for k, v in params.items()}
        results[broker] = jvms[client].run(scenario, bootstrap, **unique)
    return results


def assert_same(results: dict[str, Any]) -> Any:
    assert results["sofakafka"] == results["kafka"], (
        f"sofakafka and Apache Kafka 2.6 answered differently:\n  sofakafka: {results['sofakafka']}\n"
        f"  kafka:     {results['kafka']}")
    return results["kafka"]


clients = pytest.mark.parametrize("client", CLIENT_VERSIONS)


@clients
def test_admin_topics(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "admin.topics", topic="topics"))
    assert r["createExisting"] == "TopicExistsException"
    assert r["createReplicationFactorAboveBrokers"] == "InvalidReplicationFactorException"


@clients
def test_admin_describe_cluster(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    assert assert_same(run_on_both(scenario_jvms, bootstraps, client, "admin.cluster"))["nodes"] == 1


@clients
def test_admin_configs(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "admin.configs", topic="configs",
                                brokerKeys=list(DYNAMIC_BROKER_KEYS)))
    assert r["afterSet"]["value"] == "7200000"


@clients
def test_admin_consumer_groups(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "admin.groups", topic="groups", group="g"))
    assert r["deleteLiveGroup"] == "GroupNotEmptyException"


@clients
def test_admin_list_offsets_and_delete_records(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str],
                                               client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "admin.offsets", topic="offsets"))
    assert r["listOffsets"]["atFifth"]["offset"] == 5
    assert r["lowWatermark"] == 3


@clients
def test_admin_elect_leaders(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    assert_same(run_on_both(scenario_jvms, bootstraps, client, "admin.elect_leaders", topic="elect"))


@clients
def test_admin_partition_reassignment(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    assert_same(run_on_both(scenario_jvms, bootstraps, client, "admin.reassign", topic="reassign"))


@clients
def test_producer_acks(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "producer.acks", topic="acks"))
    assert r == {"acks0": "no offsets", "acks1": "offsets 100..199", "acksall": "offsets 200..299", "consumed": 300}


@clients
def test_producer_idempotent(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    assert_same(run_on_both(scenario_jvms, bootstraps, client, "producer.idempotent", topic="idem", records=3000))


@clients
@pytest.mark.parametrize("codec", CODECS)
def test_producer_compression(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str,
                              codec: str) -> None:
    assert_same(run_on_both(scenario_jvms, bootstraps, client, "producer.compression", topic=codec, codec=codec))


@clients
def test_producer_headers(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    assert_same(run_on_both(scenario_jvms, bootstraps, client, "producer.headers", topic="headers"))


@clients
def test_producer_big_batches(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    assert_same(run_on_both(scenario_jvms, bootstraps, client, "producer.big_batches", topic="big", records=20000))


@clients
def test_producer_ten_megabyte_record(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "producer.large_record", topic="large"))
    assert r["bytes"] == 10 * 1024 * 1024
    assert r["tooLargeForTopic"] == "RecordTooLargeException"


@clients
def test_producer_transactions(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "producer.transactions", topic="txn",
                                transactionalId="txn"))
    assert r == {"readCommitted": ["committed"]}


@clients
def test_transactions_across_two_topics_with_read_committed_consumers(scenario_jvms: ScenarioJVMs,
                                                                     bootstraps: dict[str, str], client: str) -> None:
    """Commit, abort, commit, abort across two topics, then a newer instance fences the producer: read_committed
    sees exactly the committed records in order, read_uncommitted everything, from both brokers alike."""
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "transactions.two_topics", topic="txn2",
                                transactionalId="txn2"))
    assert sum(len(v) for v in r["readCommitted"].values()) == 21
    assert r["readUncommittedCount"] == 42


@clients
def test_transactions_consume_transform_produce(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str],
                                                client: str) -> None:
    """sendOffsetsToTransaction with a read_committed consumer group, one transaction aborted and its input read
    again: every input exactly once in the output, the group's offsets at the input's end."""
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "transactions.consume_transform_produce",
                                topic="ctp", group="ctp", transactionalId="ctp", records=40))
    assert r["output"] == 40 and r["abortedTransactions"] == 1
    assert sorted(r["committedOffsets"].values()) == [20, 20]


@clients
def test_consumer_assign_and_seek(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    assert_same(run_on_both(scenario_jvms, bootstraps, client, "consumer.assign", topic="assign"))


@clients
@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_consumer_subscribe(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str,
                            assignor: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "consumer.subscribe", topic=assignor,
                                group=assignor, assignor=assignor))
    assert r["assignmentSizes"] == [3, 3]


@clients
def test_consumer_static_membership(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "consumer.static_membership", topic="static",
                                group="static"))
    assert r["membersAfterClose"] == 1


@clients
def test_consumer_commit_sync_and_async(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "consumer.commit", topic="commit", group="commit"))
    assert r["resumedAt"] == 15


@clients
def test_consumer_offsets_for_times(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    r = assert_same(run_on_both(scenario_jvms, bootstraps, client, "consumer.offsets_for_times", topic="times"))
    assert r["exact"] == [3, 3000]
    assert r["afterAll"] is None


@clients
def test_consumer_pause_resume(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str], client: str) -> None:
    assert_same(run_on_both(scenario_jvms, bootstraps, client, "consumer.pause_resume", topic="pause"))


@clients
def test_consumer_rebalance_under_load_loses_nothing(scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str],
                                                     client: str) -> None:
    results = run_on_both(scenario_jvms, bootstraps, client, "consumer.rebalance_under_load", topic="load",
                          group="load", records=10000)
    for r in results.values():
        assert r["consumedDistinct"] == r["produced"] == 10000
