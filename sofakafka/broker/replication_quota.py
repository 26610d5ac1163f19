"""Replication throttles (KIP-73): a byte-rate bound on the replication traffic of chosen replicas.

Operators throttle a reassignment so that copying a partition to a new broker does not starve clients or the
replicas already in sync. Two independent bounds, each a dynamic per-broker config (``/config/brokers/<id>``):

* ``leader.replication.throttled.rate``: bytes/s this broker, as leader, sends to followers of throttled
  partitions. A partition is throttled on the leader side when the topic's
  ``leader.replication.throttled.replicas`` names ``<partition>:<this broker>`` (or is ``*``).
* ``follower.replication.throttled.rate``: bytes/s this broker, as follower, fetches for throttled partitions;
  ``follower.replication.throttled.replicas`` names ``<partition>:<this broker>`` (or is ``*``).

Only replicas outside the ISR are ever held back, so a throttle can slow a reassignment but never the
acknowledgement of produced records. While the measured rate is above the bound, the leader answers such a
follower's partition without records and the follower leaves the partition out of its fetch; every byte
carried for a throttled partition (in sync or not) counts towards the rate, as in Kafka.

The rate is measured like Kafka's ``SimpleRate`` over ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``: the bytes of the samples that are not too old, divided by the time
since the oldest of them started (at least one window). A sample starts at the first record after its
predecessor's window ended, not on a wall-clock grid, which is how Kafka's ``SampledStat`` behaves too.

Kafka 2.6 takes the rates only from ``/config/brokers/<id>``; a value at the cluster default entity is stored
but throttles nothing, and so it is here. A value in server.properties (which Kafka ignores) is honoured as
the fallback below the dynamic one.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sofakafka.broker.replica_manager import FetchPartitionRequest, TopicPartition
from sofakafka.storage.config import throttled_replicas_error

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
QUOTA_WINDOW_NUM = "replication.quota.window.num"
QUOTA_WINDOW_SIZE_SECONDS = "replication.quota.window.size.seconds"
UNTHROTTLED = 2**63 - 1
"""Long.MAX_VALUE, Kafka's default rate: no bound."""

@dataclass(frozen=True)
class ThrottledReplicas:
    """One topic's throttled list, seen from one broker: every partition, or the partitions listed with it."""

    all_partitions: bool
    partitions: frozenset[int]

    def __contains__(self, partition: object) -> bool:
        return self.all_partitions or partition in self.partitions


NONE_THROTTLED = ThrottledReplicas(False, frozenset())


@lru_cache(maxsize=4096)
def throttled_partitions(value: str, broker_id: int) -> ThrottledReplicas:
    """The partitions ``value`` throttles on ``broker_id``; an invalid value (refused when written) throttles
    nothing rather than failing replication."""
    value = value.strip()
    if not value or throttled_replicas_error(value) is not None:
        return NONE_THROTTLED
    if value == "*":
        return ThrottledReplicas(True, frozenset())
    partitions = set()
    for item in value.split(","):
        item = item.strip()
        if item:
            partition, broker = item.split(":")
            if int(broker) == broker_id:
                partitions.add(int(partition))
    return ThrottledReplicas(False, frozenset(partitions))


def is_throttled(topic_config: Mapping[str, str], key: str, partition: int, broker_id: int) -> bool:
    value = topic_config.get(key)
    return bool(value) and partition in throttled_partitions(value, broker_id)


def throttled_rate(dynamic_broker_config: Mapping[str, str], key: str, static: int = UNTHROTTLED) -> int:
    """The bound from ``/config/brokers/<id>`` (validated as a non-negative long when written), else ``static``."""
    raw = dynamic_broker_config.get(key)
    if raw is None:
        return static
    try:
        return int(raw.strip())
    except ValueError:
        return static


class ReplicationQuota:
    """A byte rate over sliding samples, checked against a bound (Kafka's ReplicationQuotaManager, minus the
    partition bookkeeping, which lives in the topic configs here)."""

    def __init__(self, samples: int = 11, window_seconds: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if samples < 1 or window_seconds <= 0:
            raise ValueError("a quota needs at least one sample of a positive window")
        self.samples = samples
        self.window_seconds = window_seconds
        self._clock = clock
        self._windows: deque[list[float]] = deque()  # [start, bytes], oldest first
        self.bound: int = UNTHROTTLED

    def record(self, size: int) -> None:
        now = self._clock()
        self._purge(now)
        if not self._windows or now - self._windows[-1][0] >= self.window_seconds:
            self._windows.append([now, 0.0])
            while len(self._windows) > self.samples:
                self._windows.popleft()
        self._windows[-1][1] += size

    def rate(self) -> float:
        """Bytes per second over the samples still in the window."""
        now = self._clock()
        self._purge(now)
        if not self._windows:
            return 0.0
        total = sum(w[1] for w in self._windows)
        return total / max(now - self._windows[0][0], self.window_seconds)

    def is_quota_exceeded(self) -> bool:
        return self.bound < UNTHROTTLED and self.rate() > self.bound

    def _purge(self, now: float) -> None:
        # A sample is obsolete once it started more than samples * window ago (Kafka's purgeObsoleteSamples).
        horizon = now - self.samples * self.window_seconds
        while self._windows and self._windows[0][0] < horizon:
            self._windows.popleft()


def leader_quota(broker: object, samples: int, window_seconds: float) -> ReplicationQuota:
    """The leader-side quota of ``broker``, made on the Fetch handler's first use and kept on the broker object
    so that it lives and dies with it."""
    quota = getattr(broker, "_leader_replication_quota", None)
    if not isinstance(quota, ReplicationQuota):
        quota = ReplicationQuota(samples, window_seconds)
        setattr(broker, "_leader_replication_quota", quota)  # noqa: B010
    return quota


def leader_throttled(broker: Any, replica_id: int, partitions: Sequence[FetchPartitionRequest]
                     ) -> tuple[ReplicationQuota | None, set[TopicPartition], set[TopicPartition]]:
    """For a follower's fetch: (the leader quota, the partitions it throttles, those to answer without records
    now). A partition is held back only while the quota is exceeded and the follower is out of its ISR."""
    if replica_id < 0 or not partitions:
        return None, set(), set()
    snapshot = broker.metadata()
    broker_id: int = broker.broker_id
    throttled = {req.tp for req in partitions
                 if is_throttled(snapshot.topic_config(req.topic), LEADER_THROTTLED_REPLICAS, req.partition, broker_id)}
    if not throttled:
        return None, throttled, set()
    config = broker.config
    quota = leader_quota(broker, config.get_int(QUOTA_WINDOW_NUM), config.get_int(QUOTA_WINDOW_SIZE_SECONDS))
    quota.bound = throttled_rate(snapshot.broker_config(broker_id), LEADER_THROTTLED_RATE,
                                 config.get_int(LEADER_THROTTLED_RATE))
    if not quota.is_quota_exceeded():
        return quota, throttled, set()
    held: set[TopicPartition] = set()
    for tp in throttled:
        part = broker.replica_manager.get_partition(tp)
        if part is not None and replica_id not in part.isr:
            held.add(tp)
    return quota, throttled, held


def follower_throttled(snapshot: Any, broker_id: int, quota: ReplicationQuota, static_rate: int,
                       partitions: Sequence[TopicPartition]) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """For a follower's next fetch: (the partitions the follower quota throttles, those to leave out now).

    Leaving a partition out of an incremental fetch session forgets it there, as Kafka's fetcher does; the
    fetcher keeps following it and sends it again in full once the rate allows."""
    throttled = {tp for tp in partitions
                 if is_throttled(snapshot.topic_config(tp[0]), FOLLOWER_THROTTLED_REPLICAS, tp[1], broker_id)}
    if not throttled:
        return throttled, set()
    quota.bound = throttled_rate(snapshot.broker_config(broker_id), FOLLOWER_THROTTLED_RATE, static_rate)
    if not quota.is_quota_exceeded():
        return throttled, set()
    held: set[TopicPartition] = set()
    for tp in throttled:
        p = snapshot.partition(*tp)
        if p is None or broker_id not in p.isr:
            held.add(tp)
    return throttled, held
