"""The clients of a chaos run: idempotent acks=all producers, transactional producers and consumers, each
recording into the history.

Producers are librdkafka (confluent-kafka) with ``enable.idempotence``: every value is ``<instance>:<seq>``, sent to
partition ``seq % partitions``, an ``invoke`` recorded before the send and ``ok`` (with the offset the broker
acknowledged) or ``info`` (librdkafka gave up or cannot tell) from the delivery report. A producer that hits a
fatal error (librdkafka's idempotence guard) is replaced by a new instance with a new name, so that the order
check only compares values of one instance.

Transactional producers (``TransactionalProducerWorker``) are librdkafka with a ``transactional.id`` and write the
same kind of values into the same topic, several to every partition per transaction, and then commit, or abort
on purpose now and then. They handle errors as librdkafka's transactional API asks of an application: a
retriable error retries the call, an abortable one aborts the transaction, a fatal one (the producer fenced: its
epoch bumped by the coordinator's timeout or by another instance) replaces the instance by a new one with the same
``transactional.id``, whose ``init_transactions`` fences the old one and aborts whatever it left open. Now and then
a new instance starts while the current one is mid-transaction (a zombie, which then tries to commit). Each
instance has its own name, each transaction an id ``<instance>/<n>``, and the history has each instance's
``init``, the transaction's ``begin``, its sends (with ``txn``), ``commit`` (``invoke``, then ``ok``, ``fail``
when librdkafka says it must be aborted, ``info`` when it cannot tell) and ``abort`` (``invoke`` with a reason,
``ok`` or ``info``).

Consumers read every partition from the start (assigned, no group), read_uncommitted or read_committed, and
record what each poll returned. The final read, once the cluster is whole again, reads each partition from its
first offset to its high watermark with sofakafka's own client, and with transactions also to its last stable
offset with a read_committed librdkafka consumer.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from sofakafka.client import READ_COMMITTED, KafkaClient
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


class PacedWorker(threading.Thread):
    """A producer's thread: what it writes to, where it records, and a steady pace until ``stop``."""

    def __init__(self, thread_name: str, index: int, bootstrap: Callable[[], str], topic: str, partitions: int,
                 history: History, rate: float, stop: threading.Event) -> None:
        super().__init__(name=thread_name, daemon=True)
        self.index = index
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rate = rate
        self.stop = stop
        self.instances = 0
        self.errors: list[str] = []

    def ticks(self) -> Iterator[None]:
        """``rate`` times a second until ``stop``; at once while behind (a call that took long)."""
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop.is_set():
            yield
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            else:
                next_at = time.monotonic()


class ProducerWorker(PacedWorker):
    def __init__(self, index: int, bootstrap: Callable[[], str], topic: str, partitions: int, history: History,
                 rate: float, stop: threading.Event) -> None:
        super().__init__(f"chaos-producer-{index}", index, bootstrap, topic, partitions, history, rate, stop)

    def _new_producer(self) -> tuple[Producer, str]:
        self.instances += 1
        name = f"p{self.index}.{self.instances}"
        return Producer({"bootstrap.servers": self.bootstrap(), "client.id": name, **PRODUCER_SETTINGS}), name

    def run(self) -> None:
        producer, name = self._new_producer()
        seq = 0
        fatal = threading.Event()
        for _ in self.ticks():
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


# A transaction that outlives 10 s (a fault longer than that in its path) is aborted by its coordinator, which
# fences the producer, and a send that waits 10 s times out and makes the transaction abortable: the faults then
# reach the application's error handling, not only librdkafka's retries. librdkafka wants message.timeout.ms <=
# transaction.timeout.ms.
TRANSACTIONAL_SETTINGS: dict[str, object] = {
    **PRODUCER_SETTINGS,
    "transaction.timeout.ms": 10_000,
    "message.timeout.ms": 10_000,
}
CALL_TIMEOUT_S = 30.0  # one init/commit/abort call
RETRY_FOR_S = 90.0  # retriable errors of one call, before the application gives up on it


class Fatal(Exception):
    """A call that kept failing with retriable errors: the application gives the instance up."""


@dataclass
class Instance:
    """One librdkafka producer of the transactional id, named for the history (``t<index>.<n>``)."""

    producer: Producer
    name: str
    fatal: threading.Event = field(default_factory=threading.Event)  # a delivery report said so
    txns: int = 0


class TransactionalProducerWorker(PacedWorker):
    """Transactions of ``size`` records (``seq % partitions``, so several to each partition) at ``rate`` a second
    until ``stop``; the transaction open then is ended before the thread returns. A fraction ``abort_ratio`` is
    aborted on purpose (after its records are written); in a fraction ``zombie_ratio`` a new instance starts
    while the current one is in the middle of a transaction, as when an application is restarted while the old
    process still runs: the old one, a zombie, then tries to commit and must be fenced."""

    def __init__(self, index: int, bootstrap: Callable[[], str], topic: str, partitions: int, history: History,
                 rate: float, stop: threading.Event, *, size: int = 6, abort_ratio: float = 0.25,
                 zombie_ratio: float = 0.03, seed: int = 1) -> None:
        super().__init__(f"chaos-txn-producer-{index}", index, bootstrap, topic, partitions, history, rate, stop)
        self.transactional_id = f"chaos-txn-{index}"
        self.size = size
        self.abort_ratio = abort_ratio
        self.zombie_ratio = zombie_ratio
        self.rng = random.Random(seed * 1000 + index)
        self.ready = threading.Event()  # the first instance has its producer id
        self.outcomes: dict[str, int] = {}
        self._current: Instance | None = None
        self._seq = 0  # values are <instance>:<seq>, seq counting on across instances

    # -- instances -------------------------------------------------------------------------------------------
    def _start_instance(self) -> Instance:
        """A new instance of the transactional id: its ``init_transactions`` bumps the id's epoch, which fences
        every older instance, and aborts the transaction an older one left open."""
        failures = 0
        while True:
            self.instances += 1
            name = f"t{self.index}.{self.instances}"
            producer = Producer({"bootstrap.servers": self.bootstrap(), "client.id": name,
                                 "transactional.id": self.transactional_id, **TRANSACTIONAL_SETTINGS})
            self.history.record(name, "invoke", "init", transactional_id=self.transactional_id)
            try:
                self._retrying(functools.partial(producer.init_transactions, CALL_TIMEOUT_S))
            except (KafkaException, Fatal) as exc:
                self.history.record(name, "fail", "init", transactional_id=self.transactional_id,
                                    error=_error_text(exc))
                self.errors.append(f"{name}: init_transactions: {_error_text(exc)}")
                failures += 1
                if failures >= 10:
                    raise Fatal(f"{failures} instances in a row could not init: {_error_text(exc)}") from exc
                time.sleep(1)
                continue
            self.history.record(name, "ok", "init", transactional_id=self.transactional_id)
            self.ready.set()
            return Instance(producer, name)

    def _replace(self, old: Instance, txn: str, why: str) -> None:
        """Give the transactional id to a new instance, as an application must after a fatal error; what the old
        one left open is aborted by the new one's init_transactions."""
        self.history.record(old.name, "info", "fenced", txn=txn, error=why)
        self.errors.append(f"{old.name}: {why}")
        # Dropped without a flush: a fenced librdkafka producer has nothing more to deliver, and confluent-kafka's
        # flush of one fails (KafkaException, or a SystemError). Its unreported sends stay invoked: indeterminate.
        self._current = self._start_instance()

    def _retrying(self, call: Callable[[], object]) -> None:
        """``call`` again while librdkafka says its error is retriable, for up to RETRY_FOR_S."""
        deadline = time.monotonic() + RETRY_FOR_S
        while True:
            try:
                call()
                return
            except KafkaException as exc:
                error = exc.args[0]
                if not (isinstance(error, KafkaError) and error.retriable()):
                    raise
                if time.monotonic() > deadline:
                    raise Fatal(f"still retriable after {RETRY_FOR_S:.0f} s: {error}") from exc

    # -- transactions ----------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._current = self._start_instance()
            for _ in self.ticks():
                self._transaction(self._current)
        except Fatal as exc:
            self.errors.append(f"gave up: {exc}")
        except Exception as exc:  # a bug of the workload must fail the run, not quietly stop the transactions
            self.history.record(f"txn-producer-{self.index}", "info", "crash", error=repr(exc))
            raise
        finally:
            if self._current is not None:
                left = _flush(self._current.producer, 30)
                if left:
                    self.errors.append(f"{self._current.name}: {left} sends never reported after the final flush")

    def _transaction(self, instance: Instance) -> None:
        producer, name = instance.producer, instance.name
        instance.txns += 1
        txn = f"{name}/{instance.txns}"
        try:
            producer.begin_transaction()
        except KafkaException as exc:
            self.history.record(name, "fail", "begin", txn=txn, error=_error_text(exc))
            self._after_error(instance, txn, exc.args[0])
            return
        self.history.record(name, "ok", "begin", txn=txn)
        for _ in range(self.size):
            value = f"{name}:{self._seq}"
            partition = self._seq % self.partitions
            self._seq += 1
            self.history.record(name, "invoke", "send", value=value, partition=partition, txn=txn)
            try:
                producer.produce(self.topic, value.encode(), partition=partition,
                                 on_delivery=self._reporter(instance, txn, value, partition))
            except BufferError:
                self.history.record(name, "fail", "send", value=value, partition=partition, txn=txn,
                                    error="queue full")
            except KafkaException as exc:  # the transaction is in an error state: it cannot commit
                self.history.record(name, "fail", "send", value=value, partition=partition, txn=txn,
                                    error=_error_text(exc))
                self._after_error(instance, txn, exc.args[0])
                return
            producer.poll(0)
        if instance.fatal.is_set():
            self._replace(instance, txn, "a delivery report said the producer is fenced")
        elif self.rng.random() < self.abort_ratio:
            # Written first, so the log holds the aborted records that read_committed readers must skip (an abort
            # of records still queued only drops them from the queue).
            _flush(producer, CALL_TIMEOUT_S)
            self._abort(instance, txn, "on purpose")
        elif self.rng.random() < self.zombie_ratio:
            # Not flushed: the zombie's last sends may reach a leader after the successor's init aborted them.
            self._current = self._start_instance()
            self.history.record(name, "info", "zombie", txn=txn, successor=self._current.name)
            self._commit(instance, txn, zombie=True)
        else:
            self._commit(instance, txn)

    def _commit(self, instance: Instance, txn: str, zombie: bool = False) -> None:
        name = instance.name
        self.history.record(name, "invoke", "commit", txn=txn)
        try:
            self._retrying(functools.partial(instance.producer.commit_transaction, CALL_TIMEOUT_S))
        except KafkaException as exc:
            error = exc.args[0]
            if isinstance(error, KafkaError) and error.txn_requires_abort():
                # librdkafka's word: not committed, the application must abort (a send failed, or the
                # coordinator refused the commit).
                self.history.record(name, "fail", "commit", txn=txn, error=str(error))
                self._abort(instance, txn, "the commit failed", zombie)
            else:  # fatal: fenced, or an answer librdkafka cannot judge
                self.history.record(name, "info", "commit", txn=txn, error=str(error))
                self._count("zombie fenced" if zombie else "left to a new instance")
                if not zombie:
                    self._replace(instance, txn, str(error))
        except Fatal as exc:
            self.history.record(name, "info", "commit", txn=txn, error=str(exc))
            self._count("zombie fenced" if zombie else "left to a new instance")
            if not zombie:
                self._replace(instance, txn, str(exc))
        else:
            self.history.record(name, "ok", "commit", txn=txn)
            self._count("zombie committed!" if zombie else "committed")

    def _abort(self, instance: Instance, txn: str, reason: str, zombie: bool = False) -> None:
        name = instance.name
        self.history.record(name, "invoke", "abort", txn=txn, reason=reason)
        try:
            self._retrying(functools.partial(instance.producer.abort_transaction, CALL_TIMEOUT_S))
        except (KafkaException, Fatal) as exc:
            self.history.record(name, "info", "abort", txn=txn, error=_error_text(exc))
            self._count("zombie fenced" if zombie else "left to a new instance")
            if not zombie:
                self._replace(instance, txn, f"the abort failed: {_error_text(exc)}")
        else:
            self.history.record(name, "ok", "abort", txn=txn)
            self._count("aborted on purpose" if reason == "on purpose" else "aborted after an error")

    def _after_error(self, instance: Instance, txn: str, error: object) -> None:
        if isinstance(error, KafkaError) and error.txn_requires_abort():
            self._abort(instance, txn, str(error))
        else:
            self._count("left to a new instance")
            self._replace(instance, txn, str(error))

    def _count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def _reporter(self, instance: Instance, txn: str, value: str,
                  partition: int) -> Callable[[KafkaError | None, Message], None]:
        name = instance.name

        def report(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                self.history.record(name, "ok", "send", value=value, partition=msg.partition(), offset=msg.offset(),
                                    txn=txn)
            elif err.code() == KafkaError._PURGE_QUEUE:  # an abort dropped it before it was sent
                self.history.record(name, "fail", "send", value=value, partition=partition, txn=txn, error=str(err))
            else:
                self.history.record(name, "info", "send", value=value, partition=partition, txn=txn, error=str(err))
                if err.fatal():
                    instance.fatal.set()
        return report


def _flush(producer: Producer, timeout_s: float) -> int:
    """Wait for the delivery reports of what the producer has sent; a transactional producer in a fatal state
    (fenced) raises instead, with nothing left to wait for (confluent-kafka 2.16 sometimes as a SystemError,
    "returned NULL without setting an exception"). Returns how many are still unreported."""
    try:
        return int(producer.flush(timeout_s))
    except (KafkaException, SystemError):
        return 0


def _error_text(exc: BaseException) -> str:
    return str(exc.args[0]) if isinstance(exc, KafkaException) and exc.args else str(exc)


class ConsumerWorker(threading.Thread):
    def __init__(self, index: int, bootstrap: Callable[[], str], topic: str, partitions: int, history: History,
                 stop: threading.Event, isolation: str = "read_uncommitted") -> None:
        super().__init__(name=f"chaos-consumer-{index}", daemon=True)
        self.process = f"consumer-{index}" if isolation == "read_uncommitted" else f"consumer-rc-{index}"
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
            # A position the broker calls out of range is an error to record, not a silent jump to the end (the
            # default), which would hide records from the checker.
            "auto.offset.reset": "error", "enable.partition.eof": False, "log_level": 2,
        })
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                messages = consumer.consume(num_messages=500, timeout=0.5)
                for m in messages:
                    error = m.error()
                    if error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET:
                        # The offset is the position the broker refused (librdkafka's err_pos).
                        self.history.record(self.process, "info", "poll", partition=m.partition(), error=str(error),
                                            offset=m.offset(), isolation=self.isolation)
                    elif error is not None:
                        # Any other error a partition reports (a torn or unreadable batch, a fetch error passed
                        # to the application): not a verdict, but what came just before a surprise.
                        self.history.record(self.process, "info", "consumer-error", partition=m.partition(),
                                            offset=m.offset(), error=str(error), isolation=self.isolation)
                values = [[m.partition(), m.offset(), value.decode()] for m in messages
                          if m.error() is None and (value := m.value()) is not None]
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


def last_stable_offsets(client: KafkaClient, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """Each partition's (last stable offset, high watermark)."""
    ends = dict.fromkeys(range(partitions), -1)
    high = client.list_offsets(topic, ends)
    stable = client.list_offsets(topic, ends, isolation_level=READ_COMMITTED)
    return {p: (stable[p].offset, high[p].offset) for p in range(partitions)}


def final_read_committed(bootstrap: str, topic: str, partitions: int, history: History,
                         ends: dict[int, tuple[int, int]], timeout_s: float = 120.0) -> int:
    """Every record a read_committed librdkafka consumer is given, from the first offset of each partition to
    its end (librdkafka's partition EOF: the last stable offset), as ``read`` events with
    ``isolation=read_committed``; ``ends`` (last stable offset and high watermark before the read) go with
    them."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"chaos-final-{time.monotonic_ns()}",
        "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
        "log_level": 2,
    })
    seen: dict[int, list[list[object]]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"read_committed: only partitions {sorted(at_end)} of {topic} reached their "
                                     f"end in {timeout_s:.0f} s")
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                error, partition, value = m.error(), m.partition(), m.value()
                assert partition is not None
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise AssertionError(f"read_committed of {topic}-{partition}: {error}")
                    at_end.add(partition)
                    continue
                at_end.discard(partition)
                seen[partition].append([m.offset(), value.decode() if value is not None else None])
    finally:
        consumer.close()
    for p, values in seen.items():
        stable, high = ends[p]
        history.record("final", "ok", "read", partition=p, values=values, isolation="read_committed",
                       last_stable_offset=stable, high_watermark=high)
    return sum(len(v) for v in seen.values())
