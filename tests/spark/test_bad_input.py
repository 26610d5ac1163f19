"""Bad input to Spark's Kafka source fails fast with an error that names the cause, and nothing hangs.

An unknown topic (subscribed, assigned, or in a stream), a bootstrap address where no broker answers, both
``subscribe`` and ``assign``, and a start timestamp in the future. The errors are the connector's and the
Kafka clients' own; the point is that sofakafka answers the way Kafka does so that they come out (an
unknown topic is not created by the look-up, a ListOffsets for a future time finds no offset).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.integration.conftest import BrokerProcess, free_port
from tests.spark.kafka_io import create_topic, produce
from tests.spark.streaming import kafka_stream

# The Kafka clients' own bounds (60 s per admin call, retried) would make a dead bootstrap cost minutes;
# a job that wants a quick failure sets these, as this test does.
QUICK_TIMEOUTS = {"kafka.default.api.timeout.ms": "5000", "kafka.request.timeout.ms": "3000"}


def failure(action: Any) -> str:
    # Py4J's, pyspark's or a Kafka client's exception: the message is what counts.
    with pytest.raises(Exception) as info:
        action()
    return str(info.value)


def read(spark: Any, bs: str, **options: str) -> Any:
    return spark.read.format("kafka").option("kafka.bootstrap.servers", bs).options(**options).load()


def topic_exists(bs: str, topic: str) -> bool:
    return topic in AdminClient({"bootstrap.servers": bs}).list_topics(timeout=30).topics


def test_an_unknown_subscribed_or_assigned_topic_is_named_unknown_and_not_created(
        spark: Any, broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    missing = f"no-such-topic-{uuid.uuid4().hex[:6]}"
    for options in ({"subscribe": missing}, {"assign": json.dumps({missing: [0]})}):
        error = failure(lambda o=options: read(spark, bs, **o).count())  # type: ignore[misc]
        assert "UnknownTopicOrPartitionException" in error, error
        assert "does not host this topic-partition" in error, error
    assert not topic_exists(bs, missing), "looking the topic up created it"


def test_a_stream_of_an_unknown_topic_fails_instead_of_waiting(spark: Any, broker: BrokerProcess,
                                                               tmp_path: Path) -> None:
    missing = f"no-such-stream-{uuid.uuid4().hex[:6]}"
    q = (kafka_stream(spark, broker.bootstrap, assign=json.dumps({missing: [0]}))
         .writeStream.format("memory").queryName("unknown_stream")
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    error = failure(lambda: q.awaitTermination(120))
    assert "UnknownTopicOrPartitionException" in error, error
    assert not q.isActive


def test_a_bootstrap_where_no_broker_answers_times_out_naming_it(spark: Any) -> None:
    dead = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    error = failure(lambda: read(spark, dead, subscribe="anything", **QUICK_TIMEOUTS).count())
    assert "TimeoutException" in error and "Timed out waiting for a node assignment" in error, error
    # Not a timing assertion: only that the configured bounds, not something unbounded, ended the wait.
    assert time.monotonic() - started < 240


def test_both_subscribe_and_assign_is_refused_before_any_connection(spark: Any) -> None:
    error = failure(lambda: read(spark, "127.0.0.1:1", subscribe="t", assign=json.dumps({"t": [0]})).count())
    assert "Only one of the following options can be specified" in error
    assert "subscribe" in error and "assign" in error


def test_a_start_timestamp_in_the_future_is_no_offset_matched(spark: Any, broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    t = f"future-{uuid.uuid4().hex[:6]}"
    create_topic(bs, t, 1)
    now_ms = int(time.time() * 1000)
    produce(bs, t, [{"value": b"now", "timestamp": now_ms}])
    future = now_ms + 86_400_000
    error = failure(lambda: read(spark, bs, subscribe=t, startingTimestamp=str(future)).count())
    assert f"No offset matched from request of topic-partition {t}-0 and timestamp {future}" in error, error
    # Kafka's answer for "nothing at or after that time" is the end offset, which the strategy "latest" uses.
    assert read(spark, bs, subscribe=t, startingTimestamp=str(future),
                startingOffsetsByTimestampStrategy="latest").count() == 0
    # The record's own timestamp is its edge: at it the record is read, one millisecond after it not.
    assert read(spark, bs, subscribe=t, startingTimestamp=str(now_ms)).count() == 1
    assert read(spark, bs, subscribe=t, startingTimestamp=str(now_ms + 1),
                startingOffsetsByTimestampStrategy="latest").count() == 0
