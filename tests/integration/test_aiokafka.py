"""aiokafka against a real broker: its admin calls across a topic's life, and a multi-partition round trip.

aiokafka negotiates versions through ApiVersions; its consumer without ``group_id`` assigns partitions by
hand, so no group coordinator is involved. Run with ``asyncio.run`` inside plain tests so nothing else
(a plugin's loop) takes part.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.integration.conftest import BrokerProcess
from tests.integration.helpers import Rec, base_timestamp_ms, make_records

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def config_values(responses: list[Any]) -> dict[str, str]:
    """name -> value from DescribeConfigs responses of any version (fields by name, not position)."""
    out: dict[str, str] = {}
    for response in responses:
        for resource in response.to_object()["resources"]:
            assert resource["error_code"] == 0, resource
            for entry in resource["config_entries"]:
                out[entry["config_names"]] = entry["config_value"]
    return out


async def produce(
    broker: BrokerProcess, topic: str, partition: int, codec: str | None, recs: list[Rec]
) -> list[int]:
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, acks="all")
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                timestamp_ms=r.timestamp_ms,
                partition=partition,
            )
            for r in recs
        ]
        return [(await f).offset for f in futures]
    finally:
        await producer.stop()


async def scenario(broker: BrokerProcess, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        created = await admin.create_topics(
            [
                NewTopic(
                    topic, num_partitions=1, replication_factor=1, topic_configs={"retention.ms": "86400000"}
                )
            ]
        )
        assert [t[1] for t in created.topic_errors] == [0], created

        # Metadata reaches brokers after CreateTopics answers, in Kafka too: wait for it, don't race it.
        async def listed() -> None:
            while topic not in await admin.list_topics():
                await asyncio.sleep(0.1)

        await asyncio.wait_for(listed(), 30)

        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        before = config_values(await admin.describe_configs([resource]))
        assert before["retention.ms"] == "86400000"
        assert before["cleanup.policy"] == "delete"  # a default, listed with the overrides

        altered = await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "172800000"})]
        )
        for response in altered:
            for resource_result in response.to_object()["resources"]:
                assert resource_result["error_code"] == 0, resource_result
        after = config_values(await admin.describe_configs([resource]))
        assert after["retention.ms"] == "172800000"

        await admin.create_partitions({topic: NewPartitions(total_count=3)})

        async def grown() -> None:
            while True:
                (described,) = await admin.describe_topics([topic])
                assert described["error_code"] == 0
                if sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2]:
                    return
                await asyncio.sleep(0.1)

        await asyncio.wait_for(grown(), 30)

        # One codec per partition-and-batch mix: every partition gets every codec, in order.
        ts0 = base_timestamp_ms()
        sent: dict[int, list[Rec]] = {0: [], 1: [], 2: []}
        for partition in sent:
            for codec in CODECS:
                recs = make_records(
                    4, tag=f"p{partition}-{codec}", with_headers=True, base_ts=ts0 + len(sent[partition])
                )
                offsets = await produce(broker, topic, partition, codec, recs)
                first = len(sent[partition])
                assert offsets == list(range(first, first + len(recs)))
                sent[partition] += recs

        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in sent]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            got: dict[int, list[Any]] = {p: [] for p in sent}
            total = sum(len(v) for v in sent.values())

            async def read_all() -> None:
                while sum(len(v) for v in got.values()) < total:
                    batches = await consumer.getmany(timeout_ms=500)
                    for tp, msgs in batches.items():
                        got[tp.partition].extend(msgs)

            await asyncio.wait_for(read_all(), 60)
            for partition, recs in sent.items():
                msgs = got[partition]
                assert [m.offset for m in msgs] == list(range(len(recs)))
                assert [(m.key, m.value, m.timestamp, list(m.headers)) for m in msgs] == [
                    (r.key, r.value, r.timestamp_ms, list(r.headers)) for r in recs
                ]

            # ListOffsets by time: the first record at or after a timestamp, and the end for a future one.
            tp0 = TopicPartition(topic, 0)
            target = sent[0][5].timestamp_ms
            found = await consumer.offsets_for_times({tp0: target})
            assert found[tp0] is not None and (found[tp0].offset, found[tp0].timestamp) == (5, target)
            future = await consumer.offsets_for_times({tp0: sent[0][-1].timestamp_ms + 10_000})
            assert future[tp0] is None

            low = await admin.delete_records({tp0: RecordsToDelete(before_offset=7)})
            assert low == {tp0: 7}
            assert (await consumer.beginning_offsets([tp0]))[tp0] == 7
            assert (await consumer.end_offsets([tp0]))[tp0] == len(sent[0])
            consumer.seek(tp0, 7)
            rest: list[Any] = []

            async def read_rest() -> None:
                while len(rest) < len(sent[0]) - 7:
                    rest.extend((await consumer.getmany(tp0, timeout_ms=500)).get(tp0, []))

            await asyncio.wait_for(read_rest(), 60)
            assert [m.offset for m in rest] == list(range(7, len(sent[0])))
        finally:
            await consumer.stop()

        deleted = await admin.delete_topics([topic])
        assert [t[1] for t in deleted.topic_error_codes] == [0], deleted

        async def gone() -> None:
            while topic in await admin.list_topics():
                await asyncio.sleep(0.1)

        await asyncio.wait_for(gone(), 30)
    finally:
        await admin.close()


def test_aiokafka_admin_and_round_trip(broker: BrokerProcess, topic_name: str) -> None:
    asyncio.run(scenario(broker, topic_name))
