"""Apache Kafka's Java clients (kafka-clients 2.6.3 and 4.x) against sofakafka and against Apache Kafka 2.6.

Every scenario (interop/java/scenarios: Admin, producer, consumer) runs in one JVM per client version, against a
sofakafka broker and against the reference Kafka 2.6 broker started with the same settings. The scenario checks
what it sees itself (a failed check fails the test with the Java stack); what it reports (error class names,
config sources, offsets, assignment sizes) must be the same from both brokers, so a behaviour of ours that
differs from Kafka's fails here even where the client copes with it.

Each test declares its scenario (``@scenario``); the module starts them all at once and the JVMs run them
side by side (tests/reference/scenarios.py). CI runs the version matrix on a representative subset: codecs
and the eager assignors with kafka-clients 2.6 only, the heaviest scenarios with one version each;
``SOFAKAFKA_INTEROP_FULL=1`` runs every scenario with every version and variant.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.reference.fixtures import ComparedBrokers
from tests.reference.java import CLIENT_VERSIONS, ScenarioError
from tests.reference.scenarios import Outcome, clients, scenario, variants

pytestmark = pytest.mark.timeout(600)


def dump_partition(part: Path) -> str:
    """``sofakafka dump-log`` of a partition directory's segments and aborted-transaction indexes."""
    files = sorted(str(f) for f in part.iterdir() if f.suffix in (".log", ".txnindex"))
    if not files:
        return f"{part}: no segment files"
    done = subprocess.run([sys.executable, "-m", "sofakafka", "dump-log", "--print-data-log", "--files",
                           ",".join(files)], capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr

CODECS = ("gzip", "snappy", "lz4", "zstd")
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
# Broker keys Kafka 2.6 changes at run time (dynamic per broker and cluster-wide); the Admin scenario sets each.
DYNAMIC_BROKER_KEYS = ("log.cleaner.threads", "message.max.bytes", "log.retention.ms", "num.io.threads",
                       "log.segment.bytes", "compression.type", "unclean.leader.election.enable")


@clients()
@scenario("admin.topics", topic="topics")
def test_admin_topics(outcome: Outcome, client: str) -> None:
    r = outcome.same()
    assert r["createExisting"] == "TopicExistsException"
    assert r["createReplicationFactorAboveBrokers"] == "InvalidReplicationFactorException"


@clients()
@scenario("admin.cluster")
def test_admin_describe_cluster(outcome: Outcome, client: str) -> None:
    assert outcome.same()["nodes"] == 1


@clients()
# It sets the broker's dynamic configs, which every topic's description shows: never beside another one.
@scenario("admin.configs", topic="configs", brokerKeys=list(DYNAMIC_BROKER_KEYS), serial="broker configs")
def test_admin_configs(outcome: Outcome, client: str) -> None:
    assert outcome.same()["afterSet"]["value"] == "7200000"


@clients()
@scenario("admin.groups", topic="groups", group="g")
def test_admin_consumer_groups(outcome: Outcome, client: str) -> None:
    assert outcome.same()["deleteLiveGroup"] == "GroupNotEmptyException"


@clients()
@scenario("admin.offsets", topic="offsets")
def test_admin_list_offsets_and_delete_records(outcome: Outcome, client: str) -> None:
    r = outcome.same()
    assert r["listOffsets"]["atFifth"]["offset"] == 5
    assert r["lowWatermark"] == 3


@clients()
@scenario("admin.elect_leaders", topic="elect")
def test_admin_elect_leaders(outcome: Outcome, client: str) -> None:
    outcome.same()


@clients()
@scenario("admin.reassign", topic="reassign")
def test_admin_partition_reassignment(outcome: Outcome, client: str) -> None:
    outcome.same()


@clients()
@scenario("producer.acks", topic="acks")
def test_producer_acks(outcome: Outcome, client: str) -> None:
    assert outcome.same() == {"acks0": "no offsets", "acks1": "offsets 100..199", "acksall": "offsets 200..299",
                              "consumed": 300}


@clients()
@scenario("producer.idempotent", topic="idem", records=3000)
def test_producer_idempotent(outcome: Outcome, client: str) -> None:
    assert outcome.same() == {"records": 3000}


@clients("clients-2.6")
@pytest.mark.parametrize("codec", CODECS)
@scenario("producer.compression", topic="{codec}", codec="{codec}")
def test_producer_compression(outcome: Outcome, client: str, codec: str) -> None:
    assert outcome.same() == {"codec": codec, "records": 500}


@clients()
@scenario("producer.headers", topic="headers")
def test_producer_headers(outcome: Outcome, client: str) -> None:
    outcome.same()


@clients("clients-4")
@scenario("producer.big_batches", topic="big", records=20000)
def test_producer_big_batches(outcome: Outcome, client: str) -> None:
    assert outcome.same() == {"records": 20000}


@clients("clients-2.6")
@scenario("producer.large_record", topic="large")
def test_producer_ten_megabyte_record(outcome: Outcome, client: str) -> None:
    r = outcome.same()
    assert r["bytes"] == 10 * 1024 * 1024
    assert r["tooLargeForTopic"] == "RecordTooLargeException"


@clients()
@scenario("producer.transactions", topic="txn", transactionalId="txn")
def test_producer_transactions(outcome: Outcome, client: str, interop_brokers: ComparedBrokers) -> None:
    try:
        sofakafka = outcome.on("sofakafka")
    except ScenarioError as failed:
        # What the partition holds says which side went wrong (a marker missing, the aborted batch after its
        # marker, an aborted transaction missing from the index): attach its dump to the failure.
        params = outcome.runs["sofakafka"].params
        broker = interop_brokers.sofakafka
        said = [line for line in broker.log_path.read_text(errors="replace").splitlines()
                if params["topic"] in line or params["transactionalId"] in line]
        raise ScenarioError("\n".join([str(failed), dump_partition(broker.data_dir / f"{params['topic']}-0"),
                                       f"{broker.log_path} on {params['topic']} and {params['transactionalId']}:",
                                       *said])) from None
    assert sofakafka == {"readCommitted": ["committed"]}
    assert outcome.same() == sofakafka


@clients()
@scenario("transactions.two_topics", topic="txn2", transactionalId="txn2")
def test_transactions_across_two_topics_with_read_committed_consumers(outcome: Outcome, client: str) -> None:
    """Commit, abort, commit, abort across two topics, then a newer instance fences the producer: read_committed
    sees exactly the committed records in order, read_uncommitted everything, from both brokers alike."""
    r = outcome.same()
    assert sum(len(v) for v in r["readCommitted"].values()) == 21
    assert r["readUncommittedCount"] == 42


@clients()
@scenario("transactions.consume_transform_produce", topic="ctp", group="ctp", transactionalId="ctp", records=40)
def test_transactions_consume_transform_produce(outcome: Outcome, client: str) -> None:
    """sendOffsetsToTransaction with a read_committed consumer group, one transaction aborted and its input read
    again: every input exactly once in the output, the group's offsets at the input's end."""
    r = outcome.same()
    assert r["output"] == 40 and r["abortedTransactions"] == 1
    assert sorted(r["committedOffsets"].values()) == [20, 20]


@clients()
@scenario("consumer.assign", topic="assign")
def test_consumer_assign_and_seek(outcome: Outcome, client: str) -> None:
    assert outcome.same() == {"records": 30}


# The eager assignors differ only in the client's arithmetic: one client version in CI. The cooperative one
# changes the protocol's rhythm (revocations across rebalances), so it runs with both.
SUBSCRIBE_CASES = variants([(c, a) for c in CLIENT_VERSIONS for a in ASSIGNORS],
                           [("clients-2.6", a) for a in ASSIGNORS] + [("clients-4", "cooperative-sticky")])


@pytest.mark.parametrize(("client", "assignor"), SUBSCRIBE_CASES)
@scenario("consumer.subscribe", topic="{assignor}", group="{assignor}", assignor="{assignor}")
def test_consumer_subscribe(outcome: Outcome, client: str, assignor: str) -> None:
    r = outcome.same()
    assert r["assignmentSizes"] == [3, 3]
    assert r["consumed"] == 600


@clients()
@scenario("consumer.static_membership", topic="static", group="static")
def test_consumer_static_membership(outcome: Outcome, client: str) -> None:
    assert outcome.same()["membersAfterClose"] == 1


@clients()
@scenario("consumer.commit", topic="commit", group="commit")
def test_consumer_commit_sync_and_async(outcome: Outcome, client: str) -> None:
    assert outcome.same()["resumedAt"] == 15


@clients()
@scenario("consumer.offsets_for_times", topic="times")
def test_consumer_offsets_for_times(outcome: Outcome, client: str) -> None:
    r = outcome.same()
    assert r["exact"] == [3, 3000]
    assert r["afterAll"] is None


@clients()
@scenario("consumer.pause_resume", topic="pause")
def test_consumer_pause_resume(outcome: Outcome, client: str) -> None:
    assert outcome.same() == {"counts": [10, 10]}


@clients("clients-4")
@scenario("consumer.rebalance_under_load", topic="load", group="load", records=10000)
def test_consumer_rebalance_under_load_loses_nothing(outcome: Outcome, client: str) -> None:
    for r in outcome.each().values():
        assert r["consumedDistinct"] == r["produced"] == 10000
