"""Topic deletion on a launcher-started cluster (real ZooKeeper, three broker processes, kafka-python's admin).

The controller deletes the replicas on other brokers with StopReplica(delete) over the inter-broker listener and
removes the topic's znodes only once every replica broker answered. The topics here live on the two brokers that
are *not* the controller, so nothing is deleted by the controller's local path: before the fix, their log
directories stayed behind while the znodes went. Deleted logs are renamed ``<dir>.<uuid>-delete`` and go after
``log.segment.delete.delay.ms``; the tests wait until that ran too. A replica broker that is stopped (SIGTERM, a
controlled shutdown) holds the deletion up until it is back, and then its directory goes as well; so does one
that was sent a request and died (kill -9) before answering. A topic created again under the same name starts
empty.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kazoo.client import KazooClient

from sofakafka.cli import cluster as cl
from tests.cluster import test_failover as tf

WAIT_S = tf.WAIT_S
RECORDS = 50
REQUEST_TIMED_OUT = 7


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tf.Cluster]:
    with tf.running_cluster(tmp_path_factory.mktemp("topic-deletion"), {
        "replica.lag.time.max.ms": "10000",
        # Renamed -delete directories go after 1 s, looked for every 0.5 s (Kafka: 60 s, 5 min).
        "log.segment.delete.delay.ms": "1000",
        "log.retention.check.interval.ms": "500",
    }) as c:
        yield c


@pytest.fixture(scope="module")
def zk(cluster: tf.Cluster) -> Iterator[KazooClient]:
    with tf.kazoo_client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def admin(cluster: tf.Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.all_bootstrap, request_timeout_ms=30000)
    try:
        yield client
    finally:
        client.close()


def controller(zk: KazooClient) -> int:
    broker_id: int = json.loads(zk.get("/controller")[0])["brokerid"]
    return broker_id


def data_dir(cluster: tf.Cluster, broker_id: int) -> Path:
    return cluster.state.directory / f"broker-{broker_id}" / "data"


def topic_dirs(cluster: tf.Cluster, broker_id: int, topic: str) -> list[str]:
    """The topic's partition directories on ``broker_id``, live (``<topic>-<p>``) or renamed for deletion."""
    return sorted(d.name for d in data_dir(cluster, broker_id).iterdir()
                  if d.is_dir() and (d.name.rsplit("-", 1)[0] == topic
                                     or (d.name.startswith(f"{topic}-") and d.name.endswith("-delete"))))


def create(admin: KafkaAdminClient, zk: KazooClient, topic: str, replicas: list[int]) -> None:
    a, b = replicas
    admin.create_topics([NewTopic(topic, replica_assignments={0: [a, b], 1: [b, a]})], timeout_ms=30000)
    tf.wait_for(f"{topic} in sync on {replicas}", lambda: all(
        zk.exists(f"/brokers/topics/{topic}/partitions/{p}/state") is not None
        and sorted(json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])["isr"]) == sorted(replicas)
        for p in (0, 1)))


def produce(cluster: tf.Cluster, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.all_bootstrap, acks="all", retries=20)
    try:
        for i in range(RECORDS):
            producer.send(topic, f"{topic}-{i}".encode(), partition=i % 2)
        producer.flush(60)
    finally:
        producer.close()


def end_offsets(cluster: tf.Cluster, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.all_bootstrap, enable_auto_commit=False)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in (0, 1)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        consumer.close()


def wait_deleted(cluster: tf.Cluster, zk: KazooClient, topic: str) -> None:
    tf.wait_for(f"{topic}'s znodes gone", lambda: zk.exists(f"/brokers/topics/{topic}") is None
                and zk.exists(f"/admin/delete_topics/{topic}") is None
                and zk.exists(f"/config/topics/{topic}") is None)
    for broker_id in cluster.state.brokers:
        tf.wait_for(f"{topic}'s directories gone from broker {broker_id}",
                    lambda b=broker_id: not topic_dirs(cluster, b, topic))  # type: ignore[misc]


def recreate_starts_empty(cluster: tf.Cluster, admin: KafkaAdminClient, zk: KazooClient, topic: str,
                          replicas: list[int]) -> None:
    create(admin, zk, topic, replicas)
    assert end_offsets(cluster, topic) == {0: 0, 1: 0}
    for broker_id in replicas:
        assert topic_dirs(cluster, broker_id, topic) == [f"{topic}-0", f"{topic}-1"]
        for p in (0, 1):
            segments = list((data_dir(cluster, broker_id) / f"{topic}-{p}").glob("*.log"))
            assert segments and all(s.stat().st_size == 0 for s in segments), (broker_id, p, segments)


def test_deletion_removes_the_replicas_of_brokers_other_than_the_controller(
        cluster: tf.Cluster, zk: KazooClient, admin: KafkaAdminClient) -> None:
    topic = "deleted-everywhere"
    replicas = sorted(set(cluster.state.brokers) - {controller(zk)})
    create(admin, zk, topic, replicas)
    produce(cluster, topic)
    assert sum(end_offsets(cluster, topic).values()) == RECORDS
    for broker_id in replicas:
        assert topic_dirs(cluster, broker_id, topic) == [f"{topic}-0", f"{topic}-1"]

    admin.delete_topics([topic], timeout_ms=30000)
    wait_deleted(cluster, zk, topic)
    recreate_starts_empty(cluster, admin, zk, topic, replicas)


def test_deletion_waits_for_a_stopped_replica_broker_and_completes_when_it_returns(
        cluster: tf.Cluster, zk: KazooClient, admin: KafkaAdminClient) -> None:
    topic = "deleted-later"
    running, stopped = sorted(set(cluster.state.brokers) - {controller(zk)})
    create(admin, zk, topic, [running, stopped])
    produce(cluster, topic)
    cluster.stop(stopped)  # SIGTERM: a controlled shutdown, then the registration goes
    tf.wait_for(f"broker {stopped} unregistered", lambda: zk.exists(f"/brokers/ids/{stopped}") is None)

    # Marked, but not complete within the request's timeout while a replica's broker is away. (Kafka 2.6 answers
    # NONE here, once the topic left its metadata; ours waits for the deletion to complete: see
    # sofakafka/broker/handlers/delete_topics.py and tests/cluster/test_operation_pairs.py.)
    response = admin.delete_topics([topic], timeout_ms=2000, raise_errors=False)
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [(topic, REQUEST_TIMED_OUT)]
    tf.wait_for(f"the replicas on broker {running} deleted", lambda: not topic_dirs(cluster, running, topic))
    # The stopped broker still holds its replicas, so the deletion is not complete.
    assert zk.exists(f"/admin/delete_topics/{topic}") is not None
    assert zk.exists(f"/brokers/topics/{topic}") is not None
    assert topic_dirs(cluster, stopped, topic) == [f"{topic}-0", f"{topic}-1"]

    cl.restart_broker(cluster.state.directory, stopped)
    wait_deleted(cluster, zk, topic)
    recreate_starts_empty(cluster, admin, zk, topic, [running, stopped])


def test_a_request_in_flight_to_a_broker_that_dies_is_sent_again_when_it_returns(
        cluster: tf.Cluster, zk: KazooClient, admin: KafkaAdminClient) -> None:
    topic = "deleted-after-a-crash"
    running, victim = sorted(set(cluster.state.brokers) - {controller(zk)})
    create(admin, zk, topic, [running, victim])
    produce(cluster, topic)
    # Frozen, the victim accepts the controller's connection but never answers: the request is in flight when
    # the victim is killed and its registration expires.
    pid = cluster.record(victim).pid
    os.kill(pid, signal.SIGSTOP)
    try:
        response = admin.delete_topics([topic], timeout_ms=2000, raise_errors=False)
        assert [(t["name"], t["error_code"]) for t in response["topics"]] == [(topic, REQUEST_TIMED_OUT)]
        tf.wait_for(f"the replicas on broker {running} deleted", lambda: not topic_dirs(cluster, running, topic))
    finally:
        os.kill(pid, signal.SIGKILL)
    tf.wait_for(f"broker {victim}'s registration expired", lambda: zk.exists(f"/brokers/ids/{victim}") is None)
    assert zk.exists(f"/brokers/topics/{topic}") is not None
    assert topic_dirs(cluster, victim, topic) == [f"{topic}-0", f"{topic}-1"]

    cl.restart_broker(cluster.state.directory, victim)
    wait_deleted(cluster, zk, topic)
