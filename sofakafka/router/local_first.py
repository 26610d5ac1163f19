"""Local-first partitioning: a producer writes to partitions led in its own machine room while it can.

Brokers name their machine room with ``broker.rack``; Metadata tells every client each broker's rack and each
partition's leader. A producer in room A (its ``room``) chooses among the partitions whose leader is in
room A; only when there is none (every broker of room A is down, so the controller moved their leaderships to
other rooms, or room A leads nothing of this topic) does it choose among all partitions with a leader, and it
comes back to room A as soon as room A leads partitions again (the preferred-leader election after the
brokers return: ``auto.leader.rebalance.enable`` or ``sofakafka``/Kafka's leader-election tool).

Within the chosen pool a keyed record goes to ``pool[murmur2(key) % len(pool)]`` (so one key stays in one
partition while the pool stays the same: per-key order holds within a room, and is broken once when the pool
changes at a failover and once when it changes back); a record without a key goes round-robin over the pool.

Shipped for both Python clients:

* kafka-python: :func:`kafka_python_partitioner` returns a ``kafka.partitioner.Partitioner`` to pass as
  ``KafkaProducer(partitioner=...)``; it reads the producer's own metadata (racks included).
* confluent-kafka: its Python API has no partitioner callback, so :class:`ConfluentLocalFirst` is asked for
  the partition explicitly — ``producer.produce(topic, value, key, partition=lf.partition(topic, key))``. It
  reads leaders from the producer's own metadata (``list_topics``) and racks from ``describe_cluster`` of an
  admin client on the same bootstrap servers, and refreshes both at most every ``refresh_interval_s``.

What a stock client without this partitioner gets: Kafka's default partitioner, which spreads records over
all partitions (by key hash, or sticky/random without a key) whatever room leads them, so with two rooms
about half of the writes cross rooms; it still fails over (its retries follow the new leaders) and the
consumers still read from their own room with KIP-392's ``client.rack``.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sofakafka.client.partitioner import murmur2

if TYPE_CHECKING:
    from confluent_kafka import Producer


def choose_partition(leaders: Mapping[int, int], broker_racks: Mapping[int, str | None], room: str,
                     key: bytes | None, next_index: Callable[[], int]) -> int:
    """The partition for a record: ``leaders`` maps each partition to its leader (-1: none)."""
    if not leaders:
        raise ValueError("the topic has no partitions in the metadata")
    led = sorted(p for p, leader in leaders.items() if leader >= 0)
    local = [p for p in led if broker_racks.get(leaders[p]) == room]
    pool = local or led or sorted(leaders)
    if key is not None:
        return pool[(murmur2(key) & 0x7FFFFFFF) % len(pool)]
    return pool[next_index() % len(pool)]


def local_partitions(leaders: Mapping[int, int], broker_racks: Mapping[int, str | None], room: str) -> list[int]:
    """The partitions led in ``room`` (what a local-first producer writes to while there are any)."""
    return sorted(p for p, leader in leaders.items() if leader >= 0 and broker_racks.get(leader) == room)


class _RoundRobin:
    def __init__(self) -> None:
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return next(self._counter)


def kafka_python_partitioner(room: str) -> Any:
    """A ``kafka.partitioner.Partitioner`` for ``KafkaProducer(partitioner=...)`` (kafka-python 3+)."""
    try:
        from kafka.partitioner import Partitioner
    except ImportError:
        raise RuntimeError("the local-first partitioner needs kafka-python 3 or later, whose partitioners see the "
                           "topic and the cluster metadata") from None
    from kafka.structs import TopicPartition

    round_robin = _RoundRobin()

    class LocalFirstPartitioner(Partitioner):  # type: ignore[misc]
        """Local-first over the producer's own cluster metadata (see sofakafka.router.local_first)."""

        def partition(self, topic: str, key: Any, serialized_key: bytes | None, value: Any,
                      serialized_value: bytes | None, cluster: Any) -> int:
            partitions = cluster.partitions_for_topic(topic)
            if not partitions:
                raise ValueError(f"Topic {topic} not found in ClusterMetadata")
            leaders: dict[int, int] = {}
            racks: dict[int, str | None] = {}
            for p in partitions:
                leader = cluster.leader_for_partition(TopicPartition(topic, p))
                leaders[p] = -1 if leader is None else leader
                if leader is not None and leader >= 0 and leader not in racks:
                    broker = cluster.broker_metadata(leader)
                    racks[leader] = None if broker is None else broker.rack
            return choose_partition(leaders, racks, room, serialized_key, round_robin)

    return LocalFirstPartitioner()


class ConfluentLocalFirst:
    """Local-first partition choice for a confluent-kafka ``Producer`` (pass the result as ``partition=``).

    ``admin_config`` is an AdminClient configuration reaching the same cluster (at least
    ``bootstrap.servers``); racks are read with ``describe_cluster``. Thread-safe.
    """

    def __init__(self, producer: Producer, room: str, admin_config: Mapping[str, Any], *,
                 refresh_interval_s: float = 1.0, timeout_s: float = 5.0) -> None:
        from confluent_kafka.admin import AdminClient

        self.producer = producer
        self.room = room
        self.refresh_interval_s = refresh_interval_s
        self.timeout_s = timeout_s
        self._admin = AdminClient(dict(admin_config))
        self._racks: dict[int, str | None] = {}
        self._racks_at = 0.0
        self._leaders: dict[str, tuple[float, dict[int, int]]] = {}
        self._lock = threading.Lock()
        self._round_robin = _RoundRobin()

    def _refresh_racks(self, now: float, force: bool) -> None:
        if not force and now - self._racks_at < max(self.refresh_interval_s, 10.0):
            return
        try:
            description = self._admin.describe_cluster(request_timeout=self.timeout_s).result(self.timeout_s)
        except Exception:  # noqa: BLE001 - a failed refresh keeps the racks we knew; the next call retries
            return
        self._racks = {n.id: n.rack for n in description.nodes}
        self._racks_at = now

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition -> leader of ``topic`` as the producer's metadata last said (refreshed when stale)."""
        now = time.monotonic()
        with self._lock:
            cached = self._leaders.get(topic)
            if cached is not None and now - cached[0] < self.refresh_interval_s:
                return cached[1]
        metadata = self.producer.list_topics(topic, timeout=self.timeout_s)
        info = metadata.topics.get(topic)
        if info is None or not info.partitions:
            if cached is not None:
                return cached[1]
            raise ValueError(f"topic {topic} has no partitions in the metadata")
        leaders = {p: m.leader for p, m in info.partitions.items()}
        with self._lock:
            self._leaders[topic] = (now, leaders)
            unknown = any(leader >= 0 and leader not in self._racks for leader in leaders.values())
            self._refresh_racks(now, unknown)
        return leaders

    def racks(self) -> dict[int, str | None]:
        with self._lock:
            return dict(self._racks)

    def partition(self, topic: str, key: bytes | None) -> int:
        leaders = self.leaders(topic)
        return choose_partition(leaders, self.racks(), self.room, key, self._round_robin)

    def local_partitions(self, topic: str) -> list[int]:
        return local_partitions(self.leaders(topic), self.racks(), self.room)
