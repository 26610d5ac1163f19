"""One realistic kafka-python session (admin, producer per codec, group consumer, offsets, configs,
delete) against the bootstrap address given; run once per `api_version` so older protocol versions
are exercised too. Each step is allowed to fail (Tansu is not Kafka): the frames the client sent are
what we are after, so a failing step is reported and the session goes on."""

from __future__ import annotations

import argparse
import logging
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    ResourcePatternFilter,
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
        print(f"FAIL {name}\n{traceback.format_exc(limit=3)}", flush=True)
        return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--api-version", default="auto", help="e.g. 0.10.0, 2.6.0 or auto (negotiate)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    api_version = None if args.api_version == "auto" else tuple(int(p) for p in args.api_version.split("."))
    tag = args.api_version.replace(".", "")
    topic, group = f"capture-kp-{tag}", f"capture-kp-group-{tag}"
    common: dict[str, Any] = {
        "bootstrap_servers": args.bootstrap,
        "api_version": api_version,
        "client_id": f"capture-kafka-python-{tag}",
        "request_timeout_ms": 15000,
    }
    v = api_version or (9, 9, 9)
    has_admin = v >= (0, 10, 1)
    has_headers = v >= (0, 11, 0)

    admin = step("admin client", lambda: KafkaAdminClient(**common)) if has_admin else None
    if admin is not None:
        step("create topic", lambda: admin.create_topics([NewTopic(topic, 2, 1)], timeout_ms=10000))
        step("metadata", lambda: admin.describe_topics([topic]))
        step("list topics", lambda: admin.list_topics())
        cluster = step("describe cluster", lambda: admin.describe_cluster())
        # Tansu's node id is not 0: ask for the config of the broker the cluster actually has.
        first = cluster["brokers"][0] if cluster else {}
        broker_id = str(first.get("node_id", first.get("broker_id", 0)))
        if v >= (0, 11, 0):
            step(
                "describe topic configs",
                lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]),
            )
            step(
                "describe broker configs",
                lambda: admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, broker_id)]),
            )

    codecs = [None, "gzip", "snappy", "lz4"] + (["zstd"] if v >= (2, 1, 0) else [])
    sent = 0
    for codec in codecs:
        # kafka-python 3 turns idempotence on by default; keep it to one codec so both kinds of batch
        # (with and without producer id / sequence) are captured.
        extra: dict[str, Any] = {"compression_type": codec, "linger_ms": 50, "acks": "all", "enable_idempotence": False}
        if v >= (0, 11, 0) and codec == "lz4":
            extra["enable_idempotence"] = True  # InitProducerId + sequence numbers in the batch
        producer = step(f"producer {codec}", lambda extra=extra: KafkaProducer(**common, **extra))
        if producer is None:
            continue
        futures = []
        for i in range(4):
            headers = [("trace-id", f"t{i}".encode()), ("codec", str(codec).encode())] if has_headers else None
            futures.append(
                producer.send(topic, key=f"key-{i % 2}".encode(), value=f"value {codec} {i}".encode() * 3,
                              headers=headers)
            )
        step(f"produce {codec}", lambda futures=futures: [f.get(timeout=15).offset for f in futures])
        sent += len(futures)
        step(f"close producer {codec}", lambda producer=producer: producer.close(timeout=10))

    if v >= (0, 11, 0):
        producer = step("producer acks=0", lambda: KafkaProducer(**common, acks=0, enable_idempotence=False))
        if producer is not None:
            producer.send(topic, key=b"fire", value=b"and forget")
            step("flush acks=0", lambda: producer.flush(timeout=10))
            step("close acks=0", lambda: producer.close(timeout=10))

    if v >= (0, 11, 0):
        # Transactions: InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
        # TxnOffsetCommit, EndTxn (commit, then abort).
        txn = step(
            "transactional producer",
            lambda: KafkaProducer(**common, transactional_id=f"capture-kp-txn-{tag}", transaction_timeout_ms=10000),
        )
        if txn is not None:
            step("init transactions", lambda: txn.init_transactions())
            for outcome in ("commit", "abort"):
                step(f"begin {outcome}", lambda: txn.begin_transaction())
                step(f"send in txn ({outcome})", lambda outcome=outcome: txn.send(
                    topic, key=b"txn", value=f"in a transaction to {outcome}".encode(),
                    headers=[("txn", outcome.encode())]).get(timeout=15).offset)
                if outcome == "commit":
                    step("send offsets to txn", lambda: txn.send_offsets_to_transaction(
                        {TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)}, group))
                    step("commit txn", lambda: txn.commit_transaction())
                else:
                    step("abort txn", lambda: txn.abort_transaction())
            step("close txn producer", lambda: txn.close(timeout=10))

    consumer = step(
        "group consumer",
        lambda: KafkaConsumer(
            **common,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
            fetch_max_wait_ms=200,
        ),
    )
    if consumer is not None:
        consumer.subscribe([topic])
        received = 0
        deadline = time.monotonic() + 30
        # Poll until the group assigned us partitions even when nothing was produced (old versions
        # whose produce Tansu refuses), so join/sync/fetch are captured anyway.
        while (received < sent or not consumer.assignment()) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                received += len(records)
        print(f"consumed {received}/{sent}", flush=True)
        step("commit", consumer.commit)
        partitions = [TopicPartition(topic, p) for p in (0, 1)]
        step("committed", lambda: [consumer.committed(tp) for tp in partitions])
        step("beginning offsets", lambda: consumer.beginning_offsets(partitions))
        step("end offsets", lambda: consumer.end_offsets(partitions))
        if v >= (0, 10, 1):
            step("offsets for times", lambda: consumer.offsets_for_times({tp: 0 for tp in partitions}))
        time.sleep(1.5)  # let a few heartbeats go out
        step("close consumer (leave group)", lambda: consumer.close())

    if admin is not None:
        if v >= (1, 0, 0):
            step("create partitions", lambda: admin.create_partitions({topic: NewPartitions(3)}))
            step("describe log dirs", lambda: admin.describe_log_dirs())
        if v >= (0, 11, 0):
            step("delete records", lambda: admin.delete_records({TopicPartition(topic, 0): 1}))
            step("alter configs", lambda: admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "3600000"})]))
            step("describe acls", lambda: admin.describe_acls(ACLFilter(
                principal=None, host="*", operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))))
        step("list groups", lambda: admin.list_groups())
        step("describe group", lambda: admin.describe_groups([group]))
        step("group offsets", lambda: admin.list_group_offsets(group))
        if v >= (1, 1, 0):
            step("delete group", lambda: admin.delete_groups([group]))
        step("delete topic", lambda: admin.delete_topics([topic], timeout_ms=10000))
        step("close admin", lambda: admin.close())

    print(f"failed steps: {failures}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
