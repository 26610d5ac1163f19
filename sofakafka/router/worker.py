"""The message router: copies records between cells' physical topics by rule, exactly once.

One router process is a consumer of every rule's source topic in one consumer group (``sofakafka-router`` by
default) and a producer of the target topics. Several processes with the same group share the work: the
group hands each one a share of the source partitions, so the rules are shared too, and when one dies its
partitions move to the others.

For each record consumed from ``$NS.<from>.<topic>`` and each rule on that topic whose predicate matches,
a copy goes to ``$NS.<to>.<target topic>`` for every target cell the record has not been in yet
(``__ROUTER.PATH``, :mod:`sofakafka.ldc.rules`), with the same key, value and headers (plus the path) and the
same timestamp. The target partition is Kafka's default for the key (murmur2, as the Java client and our
producers choose), or for a record without a key the source partition modulo the target's partition count,
so records of one key, and unkeyed records of one source partition, keep their source order in the target.

Exactly once (the default): each batch polled is copied inside one Kafka transaction that also commits the
batch's consumed offsets (``send_offsets_to_transaction`` with the consumer's group metadata, KIP-447), so a
router killed at any point leaves either the copies and the offsets or neither; the next owner of the
partitions resumes from the committed offsets and the aborted copies are never read by read_committed
consumers. Without transactions (``exactly_once=False``) the copies are flushed before the offsets are
committed: at least once, a kill between the two duplicates a batch.

The router's consumer reads read_committed, so it never copies an aborted source record.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sofakafka.client.partitioner import murmur2
from sofakafka.ldc import LdcModel, RoutingRule, RoutingRules
from sofakafka.ldc.rules import parse_path, with_path

log = logging.getLogger(__name__)

DEFAULT_GROUP = "sofakafka-router"


@dataclass
class RuleStats:
    """What one rule did in this process since it started."""

    consumed: int = 0
    copied: int = 0
    skipped: int = 0
    """Records of the rule's source topic its predicate or the loop check left out."""


@dataclass
class RouterConfig:
    bootstrap_servers: str
    group_id: str = DEFAULT_GROUP
    exactly_once: bool = True
    transactional_id: str = ""
    """Default: ``<group>-<host>-<pid>-<random>``, unique per process (KIP-447 fences zombies by the group
    generation, so the id need not survive restarts)."""
    batch_size: int = 500
    poll_timeout_s: float = 0.5
    client_config: Mapping[str, Any] = field(default_factory=dict)
    """Extra librdkafka settings for both the consumer and the producer (security, timeouts...)."""
    create_missing_topics: bool = True
    """Create a missing target topic with its source's partition count (replication: the broker default)."""


class RouterError(RuntimeError):
    pass


class Router:
    """One router process (see the module docstring). ``run`` blocks until ``stop`` is called."""

    def __init__(self, model: LdcModel, rules: RoutingRules, config: RouterConfig) -> None:
        rules.check(model)
        if not rules.rules:
            raise RouterError("no routing rules: nothing to route")
        self.model = model
        self.rules = rules
        self.config = config
        self.by_source: dict[str, list[RoutingRule]] = {}
        for rule in rules.rules:
            self.by_source.setdefault(rule.source_physical(model), []).append(rule)
        self.stats: dict[str, RuleStats] = {r.name: RuleStats() for r in rules.rules}
        self._stop = threading.Event()
        self._partition_counts: dict[str, int] = {}
        self._consumer: Any = None
        self._producer: Any = None
        self.transactions = 0
        self.marker_commits = 0
        """Commits made only to step over transaction markers (``_commit_markers``)."""
        self._committed: dict[tuple[str, int], int] = {}
        """Where this process last committed each partition it holds (or found committed), to notice a position
        that moved past transaction markers alone (``_commit_markers``)."""

    # -- set-up ------------------------------------------------------------------------------------------------------
    def _common(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.config.bootstrap_servers, **self.config.client_config}

    def _ensure_topics(self) -> None:
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        admin = AdminClient(self._common())
        metadata = admin.list_topics(timeout=30)
        missing_sources = sorted(t for t in self.by_source if t not in metadata.topics)
        if missing_sources:
            raise RouterError(f"source topic(s) {', '.join(missing_sources)} do not exist")
        wanted: dict[str, int] = {}
        for source, rules in self.by_source.items():
            count = len(metadata.topics[source].partitions)
            for rule in rules:
                for cell in rule.target_cells:
                    target = rule.target_physical(self.model, cell)
                    if target not in metadata.topics:
                        wanted[target] = max(wanted.get(target, 0), count)
        if not wanted:
            return
        if not self.config.create_missing_topics:
            raise RouterError(f"target topic(s) {', '.join(sorted(wanted))} do not exist")
        futures = admin.create_topics([NewTopic(t, n) for t, n in sorted(wanted.items())], operation_timeout=30)
        for topic, future in futures.items():
            try:
                future.result(60)
                log.info("created target topic %s with %d partitions", topic, wanted[topic])
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise RouterError(f"cannot create target topic {topic}: {exc}") from exc

    def _open(self) -> None:
        from confluent_kafka import Consumer, Producer

        self._ensure_topics()
        consumer_conf = {**self._common(), "group.id": self.config.group_id, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.partition.eof": False}
        producer_conf: dict[str, Any] = {**self._common(), "enable.idempotence": True, "acks": "all",
                                         "linger.ms": 5}
        if self.config.exactly_once:
            tid = self.config.transactional_id or (
                f"{self.config.group_id}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
            producer_conf["transactional.id"] = tid
        self._consumer = Consumer(consumer_conf)
        self._producer = Producer(producer_conf)
        if self.config.exactly_once:
            self._producer.init_transactions(60)
        self._consumer.subscribe(sorted(self.by_source), on_revoke=self._on_revoke)

    def _on_revoke(self, consumer: Any, partitions: Sequence[Any]) -> None:
        # Batches are committed before the next poll, the only place a rebalance can happen: nothing to do but
        # forget where they were (their next owner commits them from now on).
        for p in partitions:
            self._committed.pop((p.topic, p.partition), None)
        log.info("partitions revoked: %s", ", ".join(f"{p.topic}-{p.partition}" for p in partitions))

    # -- copying -----------------------------------------------------------------------------------------------------
    def _partitions_of(self, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is None:
            metadata = self._producer.list_topics(topic, timeout=30)
            info = metadata.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise RouterError(f"target topic {topic} is not available: {None if info is None else info.error}")
            count = len(info.partitions)
            self._partition_counts[topic] = count
        return count

    def copies_of(self, source_topic: str, source_partition: int, key: bytes | None,
                  headers: Sequence[tuple[str, bytes | None]]) -> list[tuple[RoutingRule, str, int,
                                                                             list[tuple[str, bytes | None]]]]:
        """(rule, target topic, target partition, headers) of every copy one source record makes."""
        out = []
        path = parse_path(headers)
        for rule in self.by_source.get(source_topic, ()):
            stats = self.stats[rule.name]
            stats.consumed += 1
            targets = rule.targets_for(path) if rule.match.matches(key, headers) else []
            if not targets:
                stats.skipped += 1
                continue
            copied_headers = with_path(headers, rule.source_cell)
            for cell in targets:
                target = rule.target_physical(self.model, cell)
                n = self._partitions_of(target)
                partition = (murmur2(key) & 0x7FFFFFFF) % n if key is not None else source_partition % n
                out.append((rule, target, partition, copied_headers))
            stats.copied += len(targets)
        return out

    def _produce(self, target: str, partition: int, msg: Any, headers: list[tuple[str, bytes | None]],
                 errors: list[str]) -> None:
        def report(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        ts_type, ts = msg.timestamp()
        kwargs: dict[str, Any] = {"value": msg.value(), "key": msg.key(), "headers": headers,
                                  "partition": partition, "on_delivery": report}
        if ts_type != 0 and ts >= 0:  # 0: TIMESTAMP_NOT_AVAILABLE
            kwargs["timestamp"] = ts
        while True:
            try:
                self._producer.produce(target, **kwargs)
                return
            except BufferError:
                self._producer.poll(0.1)

    def _copy_batch(self, messages: Sequence[Any]) -> list[str]:
        errors: list[str] = []
        for msg in messages:
            for _rule, target, partition, headers in self.copies_of(msg.topic(), msg.partition(), msg.key(),
                                                                    list(msg.headers() or [])):
                self._produce(target, partition, msg, headers, errors)
        return errors

    def _next_offsets(self, messages: Sequence[Any]) -> list[Any]:
        """Where each partition of the batch resumes: after its last record, or further when the consumer's
        position is further (it steps over transaction markers, which are never returned as records; committing
        only up to the last record would leave a marker uncommitted and the rule's lag at 1 for good)."""
        from confluent_kafka import TopicPartition

        nxt: dict[tuple[str, int], int] = {}
        for msg in messages:
            nxt[(msg.topic(), msg.partition())] = msg.offset() + 1
        for tp in self._consumer.position([TopicPartition(t, p) for t, p in nxt]):
            if tp.offset > nxt[(tp.topic, tp.partition)]:
                nxt[(tp.topic, tp.partition)] = tp.offset
        return [TopicPartition(t, p, o) for (t, p), o in sorted(nxt.items())]

    def _commit_markers(self) -> None:
        """After a poll with no record: commit the partitions whose position moved past transaction markers alone.

        A marker is never returned as a record. When a transaction's records come in one fetch and its marker in
        the next (read_committed sees the records once the marker is written, but the marker only when the high
        watermark passes it too), the batch of records commits the marker's offset and the position then steps
        over it with nothing to process: the rule's lag would stay at 1 for good."""
        from confluent_kafka import TopicPartition

        assignment = self._consumer.assignment()
        unknown = [tp for tp in assignment if (tp.topic, tp.partition) not in self._committed]
        if unknown:
            for tp in self._consumer.committed(unknown, timeout=30):
                self._committed[(tp.topic, tp.partition)] = tp.offset
        moved = [tp for tp in self._consumer.position(assignment)
                 if tp.offset >= 0 and tp.offset > self._committed.get((tp.topic, tp.partition), tp.offset)]
        if not moved:
            return
        offsets = [TopicPartition(tp.topic, tp.partition, tp.offset) for tp in moved]
        if not self.config.exactly_once:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        else:
            from confluent_kafka import KafkaException

            self._producer.begin_transaction()
            try:
                self._producer.send_offsets_to_transaction(offsets, self._consumer.consumer_group_metadata(), 60)
                self._commit_transaction()
            except KafkaException as exc:
                if exc.args[0].fatal():
                    raise
                log.warning("committing offsets past transaction markers failed, tried again when idle: %s", exc)
                self._producer.abort_transaction(60)
                return
        self._committed.update(((tp.topic, tp.partition), tp.offset) for tp in offsets)
        self.marker_commits += 1

    def _rewind(self) -> None:
        """After an aborted transaction: back to the committed offsets, so the batch is copied again."""
        assignment = self._consumer.assignment()
        if not assignment:
            return
        for tp in self._consumer.committed(assignment, timeout=30):
            if tp.offset >= 0:
                self._consumer.seek(tp)
            else:
                from confluent_kafka import OFFSET_BEGINNING, TopicPartition

                self._consumer.seek(TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING))

    def _process(self, messages: Sequence[Any]) -> None:
        from confluent_kafka import KafkaException

        offsets = self._next_offsets(messages)
        if not self.config.exactly_once:
            errors = self._copy_batch(messages)
            if self._producer.flush(60) != 0 or errors:
                raise RouterError(f"copies not acknowledged: {errors[:3]}")
            self._consumer.commit(offsets=offsets, asynchronous=False)
            self._committed.update(((tp.topic, tp.partition), tp.offset) for tp in offsets)
            return
        self._producer.begin_transaction()
        try:
            errors = self._copy_batch(messages)
            if errors:
                raise RouterError(f"copies failed: {errors[:3]}")
            self._producer.send_offsets_to_transaction(offsets, self._consumer.consumer_group_metadata(), 60)
            self._commit_transaction()
            self.transactions += 1
            self._committed.update(((tp.topic, tp.partition), tp.offset) for tp in offsets)
        except (KafkaException, RouterError) as exc:
            error = exc.args[0] if isinstance(exc, KafkaException) else None
            if error is not None and error.fatal():
                raise
            log.warning("transaction aborted, the batch will be copied again: %s", exc)
            self._producer.abort_transaction(60)
            self._rewind()

    def _commit_transaction(self) -> None:
        from confluent_kafka import KafkaException

        while True:
            try:
                self._producer.commit_transaction(60)
                return
            except KafkaException as exc:
                if exc.args[0].retriable() and not exc.args[0].txn_requires_abort():
                    continue
                raise

    # -- the loop ----------------------------------------------------------------------------------------------------
    def run(self, on_batch: Callable[[Router], None] | None = None) -> None:
        self._open()
        try:
            while not self._stop.is_set():
                messages = self._consumer.consume(self.config.batch_size, self.config.poll_timeout_s)
                good = []
                for msg in messages:
                    error = msg.error()
                    if error is None:
                        good.append(msg)
                    elif error.fatal():
                        raise RouterError(f"consumer error: {error}")
                    else:
                        log.debug("consumer event: %s", error)
                if good:
                    self._process(good)
                elif not messages:
                    self._commit_markers()
                if on_batch is not None:
                    on_batch(self)
        finally:
            self.close()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None


def stats_line(router: Router, started: float) -> str:
    parts = [f"{name}: copied {s.copied}, skipped {s.skipped}" for name, s in router.stats.items()]
    return f"router up {time.monotonic() - started:.0f} s; " + "; ".join(parts)
