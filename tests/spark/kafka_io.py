"""What the Spark tests do with Kafka clients other than Spark: create topics, produce known records, and read a
topic whole with confluent-kafka (librdkafka) as the reference Spark's rows are compared with."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 60


@dataclass(frozen=True, order=True)
class Row:
    """One record as both Spark's ``format("kafka")`` and confluent-kafka show it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


def create_topic(bootstrap: str, topic: str, partitions: int = 3, replication: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication, config=config or {})])
    for f in futures.values():
        f.result(timeout=TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # every partition with a leader before anyone produces
        md = admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, f"{topic}: partitions without a leader"
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, records: Iterable[dict[str, Any]], **config: Any) -> list[tuple[int, int]]:
    """Each record a dict of Producer.produce's arguments (key, value, partition, timestamp, headers);
    returns (partition, offset) of each in send order, after every delivery report came back clean."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5} | config)
    reports: list[Any] = []
    for r in records:
        p.produce(topic, on_delivery=lambda err, msg: reports.append((err, msg)), **r)
        p.poll(0)
    assert p.flush(TIMEOUT_S) == 0, "records still unsent"
    errors = [err for err, _ in reports if err is not None]
    assert not errors, errors[:3]
    return [(m.partition(), m.offset()) for _, m in reports]


def sample_records(count: int, *, partitions: int, base_ts_ms: int, tag: str = "r") -> list[dict[str, Any]]:
    """Records whose keys (some null), values (some empty, some binary), headers (some null-valued, some
    repeated) and timestamps all differ, spread round-robin over ``partitions`` in timestamp order."""
    out = []
    for i in range(count):
        headers = [("tag", tag.encode()), ("i", str(i).encode())]
        if i % 5 == 0:
            headers.append(("nullable", None))
        if i % 7 == 0:
            headers.append(("i", b"repeated"))
        out.append({
            "key": None if i % 11 == 0 else f"{tag}-key-{i % 13}".encode(),
            "value": b"" if i % 17 == 0 else f"{tag}-value-{i}".encode() + bytes([i % 256, 0, 255]),
            "partition": i % partitions,
            "timestamp": base_ts_ms + i * 1000,
            "headers": headers,
        })
    return out


def read_all(bootstrap: str, topic: str, ranges: dict[int, tuple[int, int]] | None = None) -> list[Row]:
    """Every record of ``topic`` (or of the given partition -> [start, end) offset ranges) through
    confluent-kafka, read until each partition's end, sorted by (topic, partition, offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reference-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        if ranges is None:
            md = consumer.list_topics(topic, timeout=TIMEOUT_S).topics[topic]
            ranges = {}
            for p in md.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)
                ranges[p] = (low, high)
        todo = {p: r for p, r in ranges.items() if r[1] > r[0]}
        if not todo:
            return []
        consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in todo.items()])
        rows: list[Row] = []
        deadline = time.monotonic() + TIMEOUT_S
        while todo:
            assert time.monotonic() < deadline, f"reference read of {topic} stuck; left {todo}"
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            p = msg.partition()
            if p not in todo or msg.offset() >= todo[p][1]:
                continue
            rows.append(Row(topic, p, msg.offset(), msg.key(), msg.value(), msg.timestamp()[1],
                            tuple(msg.headers() or ())))
            if msg.offset() + 1 >= todo[p][1]:
                del todo[p]
        return sorted(rows)
    finally:
        consumer.close()


def spark_rows(df: Any, *, headers: bool = False) -> list[Row]:
    """Collect a ``format("kafka")`` DataFrame into Rows (timestamps back to epoch milliseconds)."""
    cols = ["topic", "partition", "offset", "key", "value",
            "CAST(unix_millis(timestamp) AS BIGINT) AS ts"] + (["headers"] if headers else [])
    out = []
    for r in df.selectExpr(*cols).collect():
        hdrs: Sequence[Any] = r["headers"] or () if headers else ()
        out.append(Row(r["topic"], r["partition"], r["offset"],
                       None if r["key"] is None else bytes(r["key"]),
                       None if r["value"] is None else bytes(r["value"]), r["ts"],
                       tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in hdrs)))
    return sorted(out)
