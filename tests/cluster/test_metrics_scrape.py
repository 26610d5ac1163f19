"""Prometheus scrapes of a launcher-started cluster (real ZooKeeper, three broker processes, `cluster up` turns
``metrics.listener`` on for each) under acks=all load from librdkafka (test_failover's load producer), read back
with prometheus_client's parser.

What is proved: each broker serves the named series; bytes in grows while the producer runs and then equals what
was appended (the sum over the brokers is the size of the topic's logs on their leaders, messages in the records
in them, no fewer than were acknowledged); one broker is the active controller; the group's lag, served by its coordinator alone,
equals what the group has not consumed; and a partition is under-replicated (1) on its leader once a follower
is killed, and back to 0 there and everywhere once the follower returns and catches up, with the leader's ISR
expansion counted.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from prometheus_client.parser import text_string_to_metric_families

from sofakafka.cli import cluster as cl
from sofakafka.client import LATEST_TIMESTAMP, NewTopic
from sofakafka.protocol.errors import ErrorCode
from tests.cluster.test_failover import PARTITIONS, WAIT_S, Cluster, LoadProducer, running_cluster, wait_for

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
GROUP = "scraped-group"


def scrape(cluster: Cluster, broker_id: int) -> Samples:
    url = cluster.state.brokers[broker_id].metrics_url
    assert url is not None, "cluster up serves metrics"
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def answers(cluster: Cluster, broker_id: int, path: str) -> bool:
    url = cluster.state.brokers[broker_id].metrics_url
    assert url is not None
    try:
        with urllib.request.urlopen(url + path, timeout=5) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def scrape_live(cluster: Cluster) -> dict[int, Samples]:
    return {b: scrape(cluster, b) for b in cluster.live()}


def total(samples: dict[int, Samples], name: str, labels: tuple[tuple[str, str], ...] = ()) -> float:
    return sum(s.get((name, labels), 0.0) for s in samples.values())


def tp_labels(topic: str, partition: int) -> tuple[tuple[str, str], ...]:
    return (("partition", str(partition)), ("topic", topic))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("scraped"), {
        "replica.lag.time.max.ms": "6000", "auto.leader.rebalance.enable": "false",
        "offsets.topic.num.partitions": "3",
    }) as c:
        yield c


def test_bytes_in_lag_and_the_controller_under_load(cluster: Cluster) -> None:
    topic = f"scraped-{uuid.uuid4().hex[:6]}"
    with cluster.client() as c:
        assert c.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].error == ErrorCode.NONE
    cluster.wait_full_isr([topic])
    t = (("topic", topic),)
    with LoadProducer(cluster.all_bootstrap, topic) as load:
        wait_for("records to flow", lambda: load.count() >= 500)
        first = total(scrape_live(cluster), "kafka_server_brokertopicmetrics_bytesin_total", t)
        acked_then = load.count()
        wait_for("more records to flow", lambda: load.count() >= acked_then + 500)
        second = total(scrape_live(cluster), "kafka_server_brokertopicmetrics_bytesin_total", t)
        assert second > first > 0, "bytes in grows while the producer produces"
    assert not load.errors, load.errors[:3]
    acked = load.count()
    leaders = {p: leader for p, (leader, _isr) in cluster.partitions(topic).items()}

    def settled() -> bool:
        s = scrape_live(cluster)
        log_bytes = sum(s[leaders[p]].get(("kafka_log_log_size", tp_labels(topic, p)), -1) for p in leaders)
        log_records = sum(s[leaders[p]].get(("kafka_log_log_logendoffset", tp_labels(topic, p)), -1) for p in leaders)
        return (total(s, "kafka_server_brokertopicmetrics_messagesin_total", t) == log_records
                and total(s, "kafka_server_brokertopicmetrics_bytesin_total", t) == log_bytes)

    # Only leaders count bytes in (followers' appends are replication), and they count what they appended: the
    # leaders' logs, which hold every acknowledged record (and any a retry appended twice).
    wait_for("bytes and messages in to equal what the leaders appended", settled)
    s = scrape_live(cluster)
    assert total(s, "kafka_server_brokertopicmetrics_messagesin_total", t) >= acked
    assert total(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert total(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert total(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert total(s, "kafka_server_brokertopicmetrics_replicationbytesout_total") > 0
    assert total(s, "kafka_server_brokertopicmetrics_replicationbytesin_total") > 0
    for b, samples in s.items():
        assert samples[("kafka_server_replicamanager_partitioncount", ())] >= PARTITIONS, b
        assert samples[("kafka_network_requestmetrics_requests_total", (("request", "FetchFollower"),
                                                                        ("version", "11")))] > 0, b
    assert sum(samples[("kafka_server_replicamanager_leadercount", ())] for samples in s.values()) >= PARTITIONS

    # A group reads part of the topic and commits; its coordinator serves its lag, which is what it has left.
    consumer = Consumer({"bootstrap.servers": cluster.all_bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read = 0

    # Half of what a partition holds on average: librdkafka hands over one partition's records at a time, so
    # the partitions the group commits on keep a lag (a third of the topic is a whole partition of three).
    target = max(1, acked // (2 * PARTITIONS))

    def has_read_enough() -> bool:
        # Up to what is still wanted at each call (wait_for pauses between calls: one record a call would bound
        # the rate the test reads at, not the broker's), never more.
        nonlocal read
        read += sum(1 for msg in consumer.consume(num_messages=target - read, timeout=1) if msg.error() is None)
        return read >= target

    wait_for("the group to read half a partition's worth of the topic", has_read_enough)
    consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed(consumer.assignment(), timeout=30)
                 if tp.offset >= 0}
    consumer.close()
    with cluster.client() as c:
        ends = c.list_offsets(topic, dict.fromkeys(range(PARTITIONS), LATEST_TIMESTAMP))
    # What the group has not consumed, per partition it committed on.
    expected = {p: ends[p].offset - offset for p, offset in committed.items()}
    assert committed and sum(committed.values()) <= read and sum(expected.values()) > 0

    def lag_served() -> bool:
        s = scrape_live(cluster)
        serving = [b for b, samples in s.items()
                   if any(name == "kafka_consumergroup_lag" and dict(labels).get("consumergroup") == GROUP
                          for name, labels in samples)]
        if len(serving) != 1:
            return False
        samples = s[serving[0]]
        return all(samples.get(("kafka_consumergroup_lag", (("consumergroup", GROUP), *tp_labels(topic, p)))) == lag
                   for p, lag in expected.items())

    wait_for("the coordinator to serve the group's lag", lag_served)


def test_a_killed_follower_makes_its_partition_under_replicated_until_it_returns(cluster: Cluster) -> None:
    topic = f"replicated-{uuid.uuid4().hex[:6]}"
    with cluster.client() as c:
        assert c.create_topics([NewTopic(topic, 1, 3)])[topic].error == ErrorCode.NONE
    cluster.wait_full_isr([topic])
    leader, isr = cluster.partitions(topic)[0]
    controller = cluster.controller()
    follower = next(b for b in isr if b not in (leader, controller))
    labels = tp_labels(topic, 0)
    assert scrape(cluster, leader)[("kafka_cluster_partition_underreplicated", labels)] == 0
    expands_before = scrape(cluster, leader)[("kafka_server_replicamanager_isrexpands_total", ())]

    cluster.kill(follower)
    assert not answers(cluster, follower, "/health"), "a killed broker's endpoint is gone with it"
    assert answers(cluster, leader, "/ready")
    wait_for("the leader to report the partition under-replicated",
             lambda: scrape(cluster, leader)[("kafka_cluster_partition_underreplicated", labels)] == 1, WAIT_S)
    s = scrape_live(cluster)
    assert s[leader][("kafka_server_replicamanager_underreplicatedpartitions", ())] >= 1
    assert total(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0, "one replica down, all led"

    cluster.restart(follower, [topic])
    wait_for("the partition to be fully replicated again",
             lambda: scrape(cluster, leader)[("kafka_cluster_partition_underreplicated", labels)] == 0, WAIT_S)
    # Every partition the follower hosts (internal topics too) has it back in its ISR.
    everyone = tuple(sorted(cluster.state.brokers))
    wait_for("no under-replicated partition anywhere",
             lambda: total(scrape_live(cluster), "kafka_server_replicamanager_underreplicatedpartitions") == 0
             and cluster.live() == list(everyone), 2 * WAIT_S)
    assert scrape(cluster, leader)[("kafka_server_replicamanager_isrexpands_total", ())] > expands_before
    assert cl.ClusterState.load(cluster.state.directory).brokers[follower].metrics_port
