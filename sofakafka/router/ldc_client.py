"""The LDC producer and consumer for Python applications, over confluent-kafka or kafka-python.

They do on the client what SOFAKafka's LDC client does: an application speaks logical names (topic
``bills``, group ``billing``) in its cell and the client uses the physical ones (``ANT.R1.bills``,
``ANT.R1.billing``); the producer sets the unit headers from the model (``__UNIT.ORIUNIT`` and, where the
model has those zones, ``__UNIT.TARGET_G`` / ``__UNIT.TARGET_C``; ``__UNIT.TARGET_R`` when the record is sent
with a ``uid``); the consumer subscribes in one of the four modes and hands the application only the
records its mode takes (Local, RZone, GZone, CZone: see :mod:`sofakafka.ldc.model`). Skipped records are
consumed all the same, so commits move past them and the group's lag stays true.

With a ``room``, the producer is local-first (:mod:`sofakafka.router.local_first`) and the consumer sets
``client.rack`` to the room so the brokers send it to a replica in its room (KIP-392, when the brokers run
with ``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``).

``config`` is the backend's own configuration: a confluent-kafka dict (``{"bootstrap.servers": ...}``) or
kafka-python keyword arguments (``{"bootstrap_servers": ...}``). The model comes from a file
(:meth:`LdcModel.from_text`) or from the cluster (:func:`sofakafka.router.store.read_model`).

Usage::

    model = LdcModel.from_toml(Path("ldc.toml").read_text())
    producer = LdcProducer(model, "R1", backend="confluent", config={"bootstrap.servers": bs}, room="A")
    producer.send("bills", b"bill of user B", key=b"B", uid=57)      # to ANT.R1.bills, TARGET_R = R2
    producer.flush()
    consumer = LdcConsumer(model, "R2", "billing", ["bills"], SubscriptionMode.RZONE,
                           backend="kafka-python", config={"bootstrap_servers": bs})
    for record in consumer.poll(1.0): ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sofakafka.ldc import LdcModel, RecordFilter, SubscriptionMode
from sofakafka.router.local_first import ConfluentLocalFirst, kafka_python_partitioner

Backend = Literal["confluent", "kafka-python"]
DeliveryCallback = Callable[[Exception | None, "Delivered | None"], None]


@dataclass(frozen=True)
class Delivered:
    """Where a sent record landed."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class LdcRecord:
    """A consumed record, with its logical topic next to the physical one."""

    topic: str
    physical_topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def _check_backend(backend: str) -> None:
    if backend not in ("confluent", "kafka-python"):
        raise ValueError(f"backend: {backend!r} is neither 'confluent' nor 'kafka-python'")


class LdcProducer:
    """Sends to logical topics of one cell; thread-safe as the backend's producer is."""

    def __init__(self, model: LdcModel, cell: str, *, backend: Backend, config: Mapping[str, Any],
                 room: str | None = None, admin_config: Mapping[str, Any] | None = None) -> None:
        _check_backend(backend)
        self.model = model
        self.cell = model.cell(cell).name
        self.backend = backend
        self.room = room
        self._local_first: ConfluentLocalFirst | None = None
        if backend == "confluent":
            from confluent_kafka import Producer

            self._producer: Any = Producer(dict(config))
            if room is not None:
                bootstrap = {"bootstrap.servers": config["bootstrap.servers"]}
                self._local_first = ConfluentLocalFirst(self._producer, room, admin_config or bootstrap)
        else:
            from kafka import KafkaProducer

            kwargs = dict(config)
            if room is not None:
                kwargs["partitioner"] = kafka_python_partitioner(room)
            self._producer = KafkaProducer(**kwargs)

    def physical_topic(self, topic: str) -> str:
        return self.model.physical_topic(self.cell, topic)

    def headers_for(self, uid: int | str | None, headers: Iterable[tuple[str, bytes | None]] = ()) -> list[
            tuple[str, bytes | None]]:
        """The application's headers, with the unit headers replacing any of the same name."""
        units: list[tuple[str, bytes | None]] = list(self.model.unit_headers(self.cell, uid))
        names = {n for n, _ in units}
        return [(n, v) for n, v in headers if n not in names] + units

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, *, uid: int | str | None = None,
             headers: Iterable[tuple[str, bytes | None]] = (), partition: int | None = None,
             timestamp_ms: int | None = None, on_delivery: DeliveryCallback | None = None) -> None:
        physical = self.physical_topic(topic)
        all_headers = self.headers_for(uid, headers)
        if self.backend == "confluent":
            if partition is None and self._local_first is not None:
                partition = self._local_first.partition(physical, key)

            def delivered(err: Any, msg: Any) -> None:
                if on_delivery is None:
                    return
                if err is not None:
                    on_delivery(RuntimeError(str(err)), None)
                else:
                    on_delivery(None, Delivered(msg.topic(), msg.partition(), msg.offset()))

            kwargs: dict[str, Any] = {"value": value, "key": key, "headers": all_headers, "on_delivery": delivered}
            if partition is not None:
                kwargs["partition"] = partition
            if timestamp_ms is not None:
                kwargs["timestamp"] = timestamp_ms
            while True:
                try:
                    self._producer.produce(physical, **kwargs)
                    break
                except BufferError:
                    self._producer.poll(0.1)  # the local queue is full: serve delivery reports, then retry
            self._producer.poll(0)
        else:
            future = self._producer.send(physical, value=value, key=key, headers=all_headers, partition=partition,
                                         timestamp_ms=timestamp_ms)
            if on_delivery is not None:
                callback = on_delivery
                future.add_callback(lambda md: callback(None, Delivered(md.topic, md.partition, md.offset)))
                future.add_errback(lambda exc: callback(exc, None))

    def local_partitions(self, topic: str) -> list[int] | None:
        """confluent backend with a room: the partitions of ``topic`` led in the room right now."""
        if self._local_first is None:
            return None
        return self._local_first.local_partitions(self.physical_topic(topic))

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait for outstanding sends; returns how many are still outstanding (0: all done)."""
        if self.backend == "confluent":
            return int(self._producer.flush(timeout_s))
        self._producer.flush(timeout=timeout_s)
        return 0

    def close(self, timeout_s: float = 30.0) -> None:
        if self.backend == "confluent":
            self._producer.flush(timeout_s)
        else:
            self._producer.close(timeout=timeout_s)

    def __enter__(self) -> LdcProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LdcConsumer:
    """Consumes logical topics of one cell with the cell's physical group, in one subscription mode."""

    def __init__(self, model: LdcModel, cell: str, group: str, topics: Sequence[str], mode: SubscriptionMode, *,
                 backend: Backend, config: Mapping[str, Any], room: str | None = None) -> None:
        _check_backend(backend)
        self.model = model
        self.cell = model.cell(cell).name
        self.mode = mode
        self.filter: RecordFilter = model.subscription_filter(self.cell, mode)
        self.group = model.physical_group(self.cell, group)
        self.topics = {model.physical_topic(self.cell, t): t for t in topics}
        self.backend = backend
        if backend == "confluent":
            from confluent_kafka import Consumer

            conf = dict(config)
            conf["group.id"] = self.group
            if room is not None:
                conf["client.rack"] = room
            self._consumer: Any = Consumer(conf)
            self._consumer.subscribe(sorted(self.topics))
        else:
            from kafka import KafkaConsumer

            kwargs = dict(config)
            kwargs["group_id"] = self.group
            if room is not None:
                kwargs["client_rack"] = room
            self._consumer = KafkaConsumer(*sorted(self.topics), **kwargs)

    def _record(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                headers: Sequence[tuple[str, bytes | None]] | None, timestamp: int) -> LdcRecord | None:
        hs = tuple(headers or ())
        if not self.filter.matches(key, hs):
            return None
        return LdcRecord(self.topics.get(topic, topic), topic, partition, offset, key, value, hs, timestamp)

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[LdcRecord]:
        """The next records this subscription takes (possibly none); skipped ones are consumed too."""
        out: list[LdcRecord] = []
        if self.backend == "confluent":
            for msg in self._consumer.consume(max_records, timeout_s):
                if msg.error() is not None:
                    if msg.error().retriable() or msg.error().code() < 0:
                        continue  # librdkafka's informational events (partition EOF, transient errors)
                    raise RuntimeError(str(msg.error()))
                rec = self._record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                                   msg.headers(), msg.timestamp()[1])
                if rec is not None:
                    out.append(rec)
        else:
            batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
            for tp, messages in batches.items():
                for m in messages:
                    rec = self._record(tp.topic, tp.partition, m.offset, m.key, m.value, m.headers, m.timestamp)
                    if rec is not None:
                        out.append(rec)
        return out

    def commit(self) -> None:
        """Commit the positions (past every record polled, taken or skipped), synchronously."""
        if self.backend == "confluent":
            from confluent_kafka import KafkaError, KafkaException

            try:
                self._consumer.commit(asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing consumed since the last commit
                    raise
        else:
            self._consumer.commit()

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> LdcConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
