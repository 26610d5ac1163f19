"""Topic auto-creation on Metadata, as 0.10-era clients and kcat rely on: ``auto.create.topics.enable``,
``num.partitions``, and the v4+ request flag that lets a client (a consumer) opt out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka import KafkaProducer

from tests.integration import wire
from tests.integration.conftest import BrokerProcess

UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5


def metadata(b: BrokerProcess, topic: str, version: int, allow: bool = True) -> Any:
    return wire.topic_metadata(b.host, b.port, topic, version, allow)


def ready(b: BrokerProcess, topic: str) -> Any:
    return wire.wait_for_leaders(b.host, b.port, topic)


def test_auto_creation_uses_num_partitions(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"num.partitions": "3"})
    first = metadata(b, "auto-v0", 0)
    # Kafka answers the request that created the topic with LEADER_NOT_AVAILABLE (or already with leaders).
    assert first.error_code in (0, LEADER_NOT_AVAILABLE)
    assert sorted(p.partition_index for p in ready(b, "auto-v0").partitions) == [0, 1, 2]

    # A stock producer's first send to an unknown topic creates it the same way.
    p = KafkaProducer(bootstrap_servers=b.bootstrap, enable_idempotence=False, acks=1)
    try:
        assert p.send("auto-by-producer", value=b"x").get(timeout=30).topic == "auto-by-producer"
    finally:
        p.close(timeout=10)
    assert len(ready(b, "auto-by-producer").partitions) == 3


def test_metadata_v4_can_decline_auto_creation(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    assert metadata(b, "not-wanted", 4, allow=False).error_code == UNKNOWN_TOPIC_OR_PARTITION
    # Asking again shows it was really not created in the background.
    assert metadata(b, "not-wanted", 4, allow=False).error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_auto_creation_disabled_by_config(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"auto.create.topics.enable": "false"})
    for version in (0, 4, 9):
        assert metadata(b, f"never-{version}", version).error_code == UNKNOWN_TOPIC_OR_PARTITION
