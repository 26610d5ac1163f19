"""The clients of a chaos run: idempotent acks=all producers and consumers, each recording into the history.

Producers are librdkafka (confluent-kafka) with ``enable.idempotence``: every value is ``<instance>:<seq>``, sent to
partition ``seq % partitions``, an ``invoke`` recorded before the send and ``ok`` (with the offset the broker
acknowledged) or ``info`` (librdkafka gave up or cannot tell) from the delivery report. A producer that hits a
fatal error (librdkafka's idempotence guard) is replaced by a new instance with a new name, so that the order
check only compares values of one instance. Consumers read every partition from the start (assigned, no group)
and record what each poll returned. The final read, once the cluster is whole again, reads each partition from
its first offset to its high watermark with sofakafka's own client.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from sofakafka.client import KafkaClient
from tests.chaos.history import History

# Client settings tuned for faults that last seconds: give up on a send only after two minutes (librdkafka then
# reports it as timed out: indeterminate), notice a dead broker within seconds, refresh metadata often.
PRODUCER_SETTINGS: dict[str, object] = {
    "enable.idempotence": True,
    "acks": "all",
    "max.in.flight.requests.per.connection": 5,
    "message.timeout.ms": 120_000,
    "request.timeout.ms": 10_000,
    "socket.timeout.ms": 10_000,
    "retry.backoff.ms": 100,
    "reconnect.backoff.max.ms": 1000,
    "topic.metadata.refresh.interval.ms": 2000,
    "linger.ms": 5,
    "log_level": 2,  # the faults make librdkafka report every disconnection: only critical ones
}


class ProducerWorker(threading.Thread):
    def __init__(self, index: int, bootstrap: Callable[[], str], topic: str, partitions: int, history: History,
                 rate: float, stop: threading.Event) -> None:
        super().__init__(name=f"chaos-producer-{index}", daemon=True)
        self.index = index
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rate = rate
        self.stop = stop
        self.instances = 0
        self.errors: list[str] = []

    def _new_producer(self) -> tuple[Producer, str]:
        self.instances += 1
        name = f"p{self.index}.{self.instances}"
        return Producer({"bootstrap.servers": self.bootstrap(), "client.id": name, **PRODUCER_SETTINGS}), name

    def run(self) -> None:
        producer, name = self._new_producer()
        seq = 0
        fatal = threading.Event()
        interval = 1.0 / self.rate
        next_send = time.monotonic()
        while not self.stop.is_set():
            if fatal.is_set():
                producer.flush(30)
                producer, name = self._new_producer()
                seq = 0
                fatal.clear()
            value = f"{name}:{seq}"
            partition = seq % self.partitions
            self.history.record(name, "invoke", "send", value=value, partition=partition)
            try:
                producer.produce(self.topic, value.encode(), partition=partition,
                                 on_delivery=self._reporter(name, value, partition, fatal))
            except BufferError:
                self.history.record(name, "fail", "send", value=value, partition=partition, error="queue full")
            except Exception as exc:  # noqa: BLE001 - a fatal producer refuses every produce; recorded, replaced
                self.history.record(name, "info", "send", value=value, partition=partition, error=str(exc))
                fatal.set()
            seq += 1
            producer.poll(0)
            next_send += interval
            delay = next_send - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            else:
                next_send = time.monotonic()
        left = producer.flush(150)
        if left:
            self.errors.append(f"{name}: {left} sends never reported after the final flush")

    def _reporter(self, name: str, value: str, partition: int,
                  fatal: threading.Event) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                self.history.record(name, "ok", "send", value=value, partition=msg.partition(), offset=msg.offset())
            else:
                self.history.record(name, "info", "send", value=value, partition=partition, error=str(err))
                if err.fatal():
                    fatal.set()
        return report


class ConsumerWorker(threading.Thread):
    def __init__(self, index: int, bootstrap: Callable[[], str], topic: str, partitions: int, history: History,
                 stop: threading.Event, isolation: str = "read_uncommitted") -> None:
        super().__init__(name=f"chaos-consumer-{index}", daemon=True)
        self.process = f"consumer-{index}"
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.stop = stop
        self.isolation = isolation
        self.polled = 0

    def run(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap(), "group.id": f"chaos-{self.process}-{time.monotonic_ns()}",
            "enable.auto.commit": False, "isolation.level": self.isolation, "socket.timeout.ms": 10_000,
            "reconnect.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 2000,
            "enable.partition.eof": False, "log_level": 2,
        })
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                messages = consumer.consume(num_messages=500, timeout=0.5)
                values = [[m.partition(), m.offset(), m.value().decode()] for m in messages
                          if m.error() is None and m.value() is not None]
                if values:
                    self.polled += len(values)
                    self.history.record(self.process, "ok", "poll", values=values, isolation=self.isolation)
        finally:
            consumer.close()


def final_read(client: KafkaClient, topic: str, partitions: int, history: History) -> int:
    """Every record of every partition, from the first offset to the high watermark, as ``read`` events."""
    total = 0
    for p in range(partitions):
        offsets = client.list_offsets(topic, {p: -1})
        end = offsets[p].offset
        values: list[list[object]] = []
        offset = 0
        while offset < end:
            fetched = client.fetch(topic, p, offset, max_wait_ms=100, max_bytes=1 << 20)
            if not fetched.records and fetched.next_offset <= offset:
                raise AssertionError(f"partition {p}: nothing readable at {offset} below the high watermark {end}")
            for r in fetched.records:
                if r.offset >= end:
                    break
                values.append([r.offset, r.value.decode() if r.value is not None else None])
            offset = fetched.next_offset
        history.record("final", "ok", "read", partition=p, values=values)
        total += len(values)
    return total
