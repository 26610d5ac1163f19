"""One realistic confluent-kafka (librdkafka) session: admin create/describe/list, a producer per
codec, a group consumer, offsets, delete. librdkafka always negotiates versions with ApiVersions, so
the proxy's --cap-release decides which protocol versions this captures. Steps may fail against
Tansu; the frames are what we keep, so a failure is reported and the session goes on."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

failures: list[str] = []


def step(name: str, action: Callable[[], Any]) -> Any:
    try:
        result = action()
        print(f"ok   {name}: {str(result)[:200]}", flush=True)
        return result
    except Exception:  # noqa: BLE001 - a capture session keeps going whatever a step raised
        failures.append(name)
        print(f"FAIL {name}\n{traceback.format_exc(limit=2)}", flush=True)
        return None


def wait_all(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(timeout=15) for key, future in futures.items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--tag", required=True, help="distinguishes topic/group names between runs")
    parser.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    args = parser.parse_args()
    topic, group = f"capture-ck-{args.tag}", f"capture-ck-group-{args.tag}"
    common = {"bootstrap.servers": args.bootstrap, "client.id": f"capture-confluent-{args.tag}"}

    admin = AdminClient(common)
    step("create topic", lambda: wait_all(admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)))
    metadata = step("metadata", lambda: admin.list_topics(timeout=10))
    broker_id = str(next(iter(metadata.brokers))) if metadata else "0"
    step("describe topics", lambda: admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=15))
    step("describe cluster", lambda: admin.describe_cluster().result(timeout=15))
    step(
        "describe configs",
        lambda: wait_all(
            admin.describe_configs(
                [ConfigResource(ResourceType.TOPIC, topic), ConfigResource(ResourceType.BROKER, broker_id)]
            )
        ),
    )

    sent = 0
    for codec in args.codecs.split(","):
        config = {**common, "compression.type": codec, "linger.ms": 20, "acks": "all"}
        if codec == "lz4":
            config["enable.idempotence"] = True  # InitProducerId + sequenced batches
        producer = Producer(config)
        errors: list[str] = []

        def delivered(err: Any, _msg: Any, errors: list[str] = errors) -> None:
            if err is not None:
                errors.append(str(err))

        for i in range(4):
            producer.produce(
                topic,
                key=f"key-{i % 2}".encode(),
                value=f"value {codec} {i} ".encode() * 3,
                headers=[("trace-id", f"t{i}".encode()), ("codec", codec.encode())],
                on_delivery=delivered,
            )
        step(f"flush {codec}", lambda producer=producer: producer.flush(15))
        if errors:
            failures.append(f"produce {codec}: {errors[:2]}")
            print(f"FAIL produce {codec}: {errors[:2]}", flush=True)
        else:
            sent += 4

    # Transactions: InitProducerId with a transactional id, AddPartitionsToTxn, EndTxn.
    txn = Producer({**common, "transactional.id": f"capture-ck-txn-{args.tag}", "transaction.timeout.ms": 10000})
    if step("init transactions", lambda: txn.init_transactions(15) or "initialised"):
        for outcome in ("commit", "abort"):
            step(f"begin {outcome}", txn.begin_transaction)
            txn.produce(topic, key=b"txn", value=f"in a transaction to {outcome}".encode(),
                        headers=[("txn", outcome.encode())])
            step(f"{outcome} txn", lambda outcome=outcome: getattr(txn, f"{outcome}_transaction")(15))
    step("flush txn producer", lambda: txn.flush(10))

    consumer = Consumer(
        {
            **common,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 200,
        }
    )
    consumer.subscribe([topic])
    received = 0
    deadline = time.monotonic() + 30
    while received < sent and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received += 1
    print(f"consumed {received}/{sent}", flush=True)
    step("commit", lambda: consumer.commit(asynchronous=False))
    partitions = [TopicPartition(topic, p) for p in (0, 1)]
    step("committed", lambda: consumer.committed(partitions, timeout=10))
    step("watermarks", lambda: [consumer.get_watermark_offsets(tp, timeout=10) for tp in partitions])
    step("offsets for times", lambda: consumer.offsets_for_times(
        [TopicPartition(topic, p, 0) for p in (0, 1)], timeout=10))
    time.sleep(1.5)  # a few heartbeats
    step("close consumer (leave group)", consumer.close)

    step("list offsets", lambda: wait_all(admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in (0, 1)},
        isolation_level=IsolationLevel.READ_COMMITTED)))
    step("create partitions", lambda: wait_all(admin.create_partitions([NewPartitions(topic, 3)])))
    step("delete records", lambda: wait_all(admin.delete_records([TopicPartition(topic, 0, 1)])))
    step("incremental alter configs", lambda: wait_all(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])])))
    step("describe acls", lambda: admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(timeout=15))
    step("group offsets", lambda: wait_all(admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])))
    step("list groups", lambda: admin.list_consumer_groups().result(timeout=15))
    step("describe group", lambda: wait_all(admin.describe_consumer_groups([group])))
    step("delete group", lambda: wait_all(admin.delete_consumer_groups([group])))
    step("delete topic", lambda: wait_all(admin.delete_topics([topic], operation_timeout=10)))
    print(f"failed steps: {failures}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
