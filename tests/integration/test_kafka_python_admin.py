"""kafka-python's admin client through a topic's life: configs (topic and broker), partitions, offsets by
time, DeleteRecords, DescribeLogDirs, deletion. Versions negotiated through ApiVersions."""

from __future__ import annotations

from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec

from tests.integration.conftest import BrokerProcess
from tests.integration.helpers import base_timestamp_ms, wait_for

UNKNOWN_TOPIC_OR_PARTITION = 3


def test_kafka_python_admin_calls(broker: BrokerProcess, topic_name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    topic = topic_name
    try:
        created = admin.create_topics(
            {topic: {"num_partitions": 1, "replication_factor": 1, "configs": {"retention.ms": "86400000"}}},
            wait_for_metadata=True,
        )
        assert [t["error_code"] for t in created["topics"]] == [0]
        assert topic in admin.list_topics()

        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert modified["retention.ms"]["value"] == "86400000"
        assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        everything = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
        )["topic"][topic]
        assert everything["cleanup.policy"]["value"] == "delete"
        assert everything["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"

        broker_configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
        )["broker"]["0"]
        assert broker_configs["num.partitions"]["value"] == "1"
        assert broker_configs["log.dirs"]["value"] == str(broker.data_dir)

        assert admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "172800000"})]
        ) == {"topic": {topic: "OK"}}
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert modified["retention.ms"]["value"] == "172800000"

        admin.create_partitions({topic: 2})
        # Metadata reaches brokers after CreatePartitions answers, in Kafka too: wait for it.
        wait_for(
            "2 partitions in metadata",
            lambda: (
                True
                if sorted(p["partition_index"] for p in admin.describe_topics([topic])[0]["partitions"])
                == [0, 1]
                else None
            ),
        )

        ts0 = base_timestamp_ms()
        p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        try:
            futures = [
                p.send(topic, value=b"v%d" % i, partition=0, timestamp_ms=ts0 + 10 * i) for i in range(10)
            ]
            p.flush(timeout=30)
            assert [f.get(timeout=30).offset for f in futures] == list(range(10))
        finally:
            p.close(timeout=10)

        tp = TopicPartition(topic, 0)
        # Between two records' timestamps: the later record's offset.
        by_time = admin.list_partition_offsets({tp: ts0 + 45})[tp]
        assert (by_time.offset, by_time.timestamp) == (5, ts0 + 50)
        assert admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset == 10
        assert admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset == 0

        deleted = admin.delete_records({tp: 4})
        assert deleted[tp]["low_watermark"] == 4 and deleted[tp]["error_code"] == 0
        assert admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset == 4

        (dirs,) = admin.describe_log_dirs([topic])
        assert dirs["broker"] == 0
        (log_dir,) = dirs["log_dirs"]
        assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(broker.data_dir)
        (topic_dirs,) = log_dir["topics"]
        sizes = {p["partition_index"]: p["partition_size"] for p in topic_dirs["partitions"]}
        assert set(sizes) == {0, 1} and sizes[0] > 0 and sizes[1] == 0

        assert admin.delete_topics([topic]) == {"topics": [{"name": topic, "error_code": 0}]}
        wait_for(
            "the topic to be gone",
            lambda: (
                True
                if admin.describe_topics([topic])[0]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
                else None
            ),
        )
    finally:
        admin.close()


def test_recreated_topic_starts_empty(broker: BrokerProcess, topic_name: str) -> None:
    """Deleting a topic deletes its data: a topic created again under the same name starts at offset 0."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    spec = {topic_name: {"num_partitions": 1, "replication_factor": 1}}
    tp = TopicPartition(topic_name, 0)
    try:
        for generation in range(2):
            wait_for(
                "the topic name to be free",
                lambda: (
                    True
                    if admin.describe_topics([topic_name])[0]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
                    else None
                ),
            )
            admin.create_topics(spec, wait_for_metadata=True)
            p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
            try:
                futures = [
                    p.send(topic_name, value=b"gen%d-%d" % (generation, i), partition=0) for i in range(5)
                ]
                p.flush(timeout=30)
                assert [f.get(timeout=30).offset for f in futures] == list(range(5))
            finally:
                p.close(timeout=10)
            assert admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset == 5
            assert admin.delete_topics([topic_name])["topics"][0]["error_code"] == 0
    finally:
        admin.close()
