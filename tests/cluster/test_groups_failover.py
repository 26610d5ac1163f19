"""The group coordinator moves with the leadership of its ``__consumer_offsets`` partition.

Three brokers on ZooKeeper, the offsets topic with three replicas (Kafka's default): a group commits,
its coordinator is killed with SIGKILL, and the broker elected leader of the group's offsets partition loads
it from its replica and answers with the same offsets and metadata; a consumer of the group then starts there.
"""

from __future__ import annotations

from collections.abc import Callable

from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from sofakafka.client import KafkaClient
from sofakafka.client.errors import ClientError
from sofakafka.client.groups import CommittedOffset, GroupAdmin
from sofakafka.protocol.errors import KafkaError
from tests.integration.conftest import BrokerProcess
from tests.integration.helpers import wait_for

GROUP = "moving-coordinator"
TOPIC = "moving-coordinator-topic"


def test_a_new_coordinator_serves_the_commits_after_kill_9_of_the_old_one(
        zk_broker_factory: Callable[..., BrokerProcess]) -> None:
    # Set explicitly: `serve` without a properties file defaults the internal topics to one replica.
    brokers = [zk_broker_factory({"broker.id": str(i), "offsets.topic.num.partitions": "3",
                                  "offsets.topic.replication.factor": "3",
                                  "group.initial.rebalance.delay.ms": "0"}) for i in range(3)]
    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 2, 3)])
    finally:
        admin.close()
    with KafkaClient(bootstrap) as client:
        wait_for("leaders of the topic", lambda: True if client.topic(TOPIC).partitions and all(
            p.leader >= 0 for p in client.topic(TOPIC).partitions.values()) else None, 60)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(17, "before", -1),
                         TopicPartition(TOPIC, 1): OffsetAndMetadata(23, "the kill", -1)})
    finally:
        consumer.close(autocommit=False)

    with KafkaClient(bootstrap, request_timeout_ms=10_000) as client:
        old = GroupAdmin(client).find_coordinator(GROUP)
    brokers[old].kill()
    survivors = ",".join(b.bootstrap for i, b in enumerate(brokers) if i != old)

    def moved() -> tuple[int, dict[tuple[str, int], CommittedOffset]] | None:
        try:
            with KafkaClient(survivors, request_timeout_ms=5_000) as client:
                groups = GroupAdmin(client)
                node = groups.find_coordinator(GROUP)
                return (node, groups.fetch_offsets(GROUP)) if node != old else None
        except (KafkaError, ClientError):
            return None

    try:
        new, offsets = wait_for("another broker to coordinate the group", moved, 90)
    except AssertionError as exc:
        logs = "\n".join(f"--- broker {i}\n{b.log_tail(60)}" for i, b in enumerate(brokers))
        raise AssertionError(f"{exc}; old coordinator {old}\n{logs}") from None
    assert new != old
    assert offsets == {(TOPIC, 0): CommittedOffset(17, "before"), (TOPIC, 1): CommittedOffset(23, "the kill")}
