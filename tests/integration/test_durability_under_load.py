"""A broker stopped in the middle of a produce stream keeps every record it acknowledged.

librdkafka produces as fast as it can (acks=1 and acks=all); once a few thousand records are acknowledged
the broker is stopped, by SIGTERM or kill -9, while requests are still in flight. After a restart on the same
data dir every acknowledged record must be at the offset its acknowledgement named, with its value.
Unacknowledged ones may or may not be there, as in Kafka.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import BrokerProcess
from tests.integration.helpers import wait_for

ACKED_BEFORE_STOP = 3000


# On one broker acks=1 and acks=all both answer after the local append; one pairing each keeps the time down.
@pytest.mark.parametrize("clean,acks", [(True, "all"), (False, "1")], ids=["sigterm-acks-all", "kill-9-acks-1"])
def test_stop_mid_stream_keeps_every_acknowledged_record(
    broker_factory: Callable[..., BrokerProcess], clean: bool, acks: str
) -> None:
    b = broker_factory({"log.segment.bytes": str(256 * 1024)})
    topic = "mid-stream"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(timeout=30)

    acked: dict[int, bytes] = {}
    lock = threading.Lock()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            with lock:
                acked[msg.offset()] = msg.value()

    producer = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "acks": acks,
            "linger.ms": 2,
            "enable.idempotence": False,
            "message.timeout.ms": 3000,
            "reconnect.backoff.max.ms": 500,
        }
    )
    stop = threading.Event()

    def produce_forever() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=b"record-%08d" % i, partition=0, on_delivery=on_delivery)
                i += 1
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.05)
            producer.poll(0)

    t = threading.Thread(target=produce_forever, daemon=True)
    t.start()
    try:
        wait_for(
            f"{ACKED_BEFORE_STOP} acknowledgements",
            lambda: True if len(acked) >= ACKED_BEFORE_STOP else None,
            120,
        )
        if clean:
            assert b.stop() == 0, b.log_tail()
        else:
            b.kill()
    finally:
        stop.set()
        t.join(30)
    producer.flush(5)  # whatever was in flight fails (or was acknowledged just before the stop)
    with lock:
        survivors = dict(acked)
    assert len(survivors) >= ACKED_BEFORE_STOP

    b.start()
    end = max(survivors) + 1
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    stored: dict[int, bytes] = {}
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def poll() -> bool | None:
            for m in consumer.consume(num_messages=5000, timeout=0.5):
                assert m.error() is None, m.error()
                stored[m.offset()] = m.value()
            return True if len(stored) >= end else None

        wait_for(f"offsets 0..{end - 1} after the restart (have {len(stored)})", poll, 60)
    finally:
        consumer.close()
    assert sorted(stored)[:end] == list(range(end)), "offsets must stay contiguous"
    lost = [o for o, v in survivors.items() if stored.get(o) != v]
    assert not lost, f"{len(lost)} acknowledged records lost or changed, first offsets {sorted(lost)[:10]}"
