"""Client quotas measured and enforced (KIP-13 byte rates, KIP-124 request time, KIP-219 throttling).

Three quota types, each with its own sensors: ``producer_byte_rate`` (the size of each Produce request),
``consumer_byte_rate`` (the size of each Fetch response to a consumer) and ``request_percentage`` (the time a
request spent being handled, in percent of one thread, for every request that is not exempt). Which quota
applies to a connection and which connections share a sensor is sofakafka/security/quotas.py's business (Kafka's
precedence order); the values come from :meth:`SecurityMetadata.client_quotas`, read at every record, so a
change made through any broker is in force at the next request, without a restart.

The measure is Kafka's ``Rate`` over a ``SampledStat``: ``quota.window.num`` samples of
``quota.window.size.seconds`` each; a sample starts with the first record after its predecessor's window ended,
samples older than ``num x size`` are reset, and the rate divides the retained total by the time since the
oldest sample started, counted as at least ``num - 1`` whole windows. A record that takes the rate above the
bound (strictly: a rate equal to the bound is acceptable) yields a throttle time of
``round((rate - bound) / bound x window)`` ms, the time the client must stay silent for the rate to come back to
the bound; request-time throttles are capped at one window (Kafka's ClientRequestQuotaManager).

Enforcement (KIP-219, in connection.py): the response carries ``throttle_time_ms``, and the broker reads
nothing more from that connection for that long. A client whose request version predates KIP-219 (Produce
below v6, Fetch below v8, and the versions before each API's "send out responses before throttling" bump) gets
its response only after the throttle time instead, as Kafka's broker delays it. A throttled Fetch returns no
records (and its bytes are taken back out of the sensor), as Kafka's does.

Clock: milliseconds of ``time.monotonic``; everything here runs on the event loop thread.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sofakafka.broker.metrics import QuotaSensorGauge
from sofakafka.controller import zk_paths
from sofakafka.security import quotas

LONG_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
# Kafka drops a quota sensor after an hour without records (ClientQuotaManager.InactiveSensorExpirationTimeSeconds,
# whatever the quota window), looking every 30 s (Metrics' sensor expiry task); here at a record at most every
# 30 s, and at every scrape.
_SENSOR_EXPIRY_MS = 3600 * 1000
_EXPIRY_CHECK_MS = 30_000
# The throttle-time average is a sensor of the broker's Metrics with its default config: Kafka's
# metrics.num.samples (2) samples of metrics.sample.window.ms (30 s).
METRICS_NUM_SAMPLES = 2
METRICS_SAMPLE_WINDOW_MS = 30_000
# Kafka's QuotaType names: the ``type`` of a quota sensor's metrics (kafka.server:type=Produce,...).
QUOTA_TYPES = {quotas.PRODUCER_BYTE_RATE: "Produce", quotas.CONSUMER_BYTE_RATE: "Fetch",
               quotas.REQUEST_PERCENTAGE: "Request"}
NANOS_TO_PERCENTAGE = 100.0 / 1e9

# API keys whose responses the client itself throttles on from this version on (KIP-219); APIs added after
# Kafka 2.0 (not listed) did so from their first version. Produce, Fetch and the others: Kafka 2.6's
# message notes ("Starting in version N, on quota violation, brokers send out responses before throttling").
_CLIENT_THROTTLES_FROM: dict[int, int] = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2, 18: 2, 19: 3, 20: 2,
    21: 1, 22: 1, 23: 3, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1, 30: 1, 31: 1, 32: 2, 33: 1, 34: 1, 35: 1, 37: 1,
    38: 1, 39: 1, 40: 1, 41: 1, 42: 1,
}
# Exempt from request quotas, as in Kafka: inter-broker requests and the SASL handshake and ApiVersions
# (which answer before a client is known).
REQUEST_QUOTA_EXEMPT = frozenset({4, 5, 6, 7, 17, 18, 27, 36})


def client_throttles(api_key: int, version: int) -> bool:
    """True when a client at this version honours throttle_time_ms itself, so the response goes out at once."""
    return version >= _CLIENT_THROTTLES_FROM.get(api_key, 0)


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0
    count: int = 0


@dataclass
class SampledStat:
    """Kafka's ``SampledStat``: ``samples`` samples of ``window_ms`` each, in whole milliseconds. A record goes to
    the current sample, or starts the next one when the current one's window has passed; a sample older than
    ``samples x window_ms`` is reset when measured."""

    samples: int
    window_ms: int
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0
    last_record_ms: int = 0

    def record(self, value: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                self._samples[self._current] = _Sample(now_ms)
            sample = self._samples[self._current]
        sample.value += value
        sample.count += 1

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, s in enumerate(self._samples):
            if now_ms - s.start_ms >= expire:
                self._samples[i] = _Sample(now_ms)


@dataclass
class SampledRate(SampledStat):
    """Kafka's ``Rate`` (a ``SampledTotal`` divided by its window)."""

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        window = self.window_size_ms(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (window / 1000.0) if window > 0 else 0.0


@dataclass
class SampledAvg(SampledStat):
    """Kafka's ``Avg``: the mean of the values recorded in the samples still kept; NaN when there are none."""

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        count = sum(s.count for s in self._samples)
        return sum(s.value for s in self._samples) / count if count else math.nan


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """How long a client at ``rate`` must stay silent for the rate over ``window_ms`` to fall to ``bound``;
    0 when the rate is acceptable (at most the bound). A bound of 0 (Kafka stores it; its formula divides by
    it) throttles each request for one whole window."""
    if rate <= bound:
        return 0
    if bound <= 0:
        return window_ms
    return round((rate - bound) / bound * window_ms)


class QuotaSensor:
    """One sensor: the rate of the connections sharing one metric-tag pair for one quota type, and the throttle
    times they were given (Kafka keeps two sensors per tag pair, ``<type>-<tags>`` and ``<type>ThrottleTime-<tags>``;
    both are created together and, here, expire together)."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.rate = SampledRate(samples, window_ms)
        self.throttle_time = SampledAvg(METRICS_NUM_SAMPLES, METRICS_SAMPLE_WINDOW_MS)

    def record(self, value: float, now_ms: int, bound: float | None, cap_ms: int | None = None) -> int:
        """Record and return the throttle time (0: within the quota or no quota)."""
        self.rate.record(value, now_ms)
        if bound is None:
            return 0
        measured = self.rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle = throttle_time_ms(measured, bound, self.rate.window_size_ms(now_ms))
        return min(throttle, cap_ms) if cap_ms is not None else throttle


class ClientQuotaManager:
    """The sensors of one broker for the three quota types, bounds read from the quota table on each record.

    As in Kafka, nothing is recorded (no sensor exists, no metric is shown) for a quota type until quotas are
    enabled for it: a quota entity has existed since the broker started, or the static default of the type
    (``quota.producer.default`` / ``quota.consumer.default``) is set. From then on every client's requests are
    recorded, whether or not a quota applies to it, until the broker restarts."""

    def __init__(self, table: Callable[[], quotas.QuotaTable], *, samples: int = 11, window_seconds: int = 1,
                 static_producer: int = LONG_MAX, static_consumer: int = LONG_MAX,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self._table = table
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self._static = {quotas.PRODUCER_BYTE_RATE: static_producer, quotas.CONSUMER_BYTE_RATE: static_consumer}
        self._clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        self._sensors: dict[tuple[str, quotas.MetricTags], QuotaSensor] = {}
        self._last_expiry_check = 0
        # Entity kinds seen since start (Kafka's quotaTypesEnabled), and the table they were last read from.
        self._kinds_seen = 0
        self._seen_table: quotas.QuotaTable | None = None
        self._seen_len = -1
        self._has_quota: dict[tuple[str, str | None], bool] = {}
        self._has_quota_table: quotas.QuotaTable | None = None
        self._has_quota_len = -1
        self.throttled: dict[str, int] = {k: 0 for k in quotas.QUOTA_KEYS}
        """How many records of each type were throttled (for tests)."""

    def now_ms(self) -> int:
        return self._clock_ms()

    def _kinds(self, table: quotas.QuotaTable, key: str) -> int:
        """The entity kinds enabled for ``key``: those seen in any table since start (sticky, as Kafka's), and
        client ids when the key's static default is set; 0: quotas are not enabled for ``key``."""
        if table is not self._seen_table or len(table) != self._seen_len:
            self._seen_table, self._seen_len = table, len(table)
            self._kinds_seen |= quotas.entity_kinds(table)
        static = self._static.get(key, LONG_MAX) < LONG_MAX
        return self._kinds_seen | (quotas.KIND_CLIENT_ID if static else 0)

    def bound(self, key: str, user: str, client_id: str,
              table: quotas.QuotaTable | None = None) -> tuple[quotas.MetricTags, float | None]:
        table = self._table() if table is None else table
        tags, limit = quotas.resolve(table, key, user, client_id, self._kinds(table, key))
        if limit is None and not tags[0] and tags[1]:
            static = self._static.get(key, LONG_MAX)
            if static < LONG_MAX:
                limit = float(static)
        return tags, limit

    def _sensor(self, key: str, tags: quotas.MetricTags) -> QuotaSensor:
        sensor = self._sensors.get((key, tags))
        if sensor is None:
            sensor = self._sensors[(key, tags)] = QuotaSensor(self.samples, self.window_ms)
        return sensor

    def record(self, key: str, principal: str, client_id: str | None, value: float, now_ms: int | None = None) -> int:
        """Record ``value`` for the connection of ``principal`` (``User:alice``) with ``client_id``; the
        throttle time in ms. Nothing is recorded while quotas are not enabled for ``key``."""
        table = self._table()
        if not self._kinds(table, key):
            return 0
        now = self._clock_ms() if now_ms is None else now_ms
        self._expire(now)
        tags, limit = self.bound(key, _user_name(principal), client_id or "", table)
        cap = self.window_ms if key == quotas.REQUEST_PERCENTAGE else None
        throttle = self._sensor(key, tags).record(value, now, limit, cap)
        if throttle:
            self.throttled[key] += 1
        return throttle

    def unrecord(self, key: str, principal: str, client_id: str | None, value: float,
                 now_ms: int | None = None) -> None:
        """Take ``value`` back out (a throttled fetch that returns nothing)."""
        now = self._clock_ms() if now_ms is None else now_ms
        tags, _ = self.bound(key, _user_name(principal), client_id or "")
        self._sensor(key, tags).rate.record(-value, now)

    def record_request_time(self, principal: str, client_id: str | None, seconds: float,
                            now_ms: int | None = None) -> int:
        return self.record(quotas.REQUEST_PERCENTAGE, principal, client_id, seconds * 1e9 * NANOS_TO_PERCENTAGE,
                           now_ms)

    def has_quota(self, principal: str, client_id: str | None) -> bool:
        """Whether any quota (of any type) bounds the connections of ``principal`` with ``client_id``: answered
        per request, so cached until the quota table changes."""
        table = self._table()
        if not table and self._static[quotas.PRODUCER_BYTE_RATE] == LONG_MAX \
                and self._static[quotas.CONSUMER_BYTE_RATE] == LONG_MAX:
            return False
        if table is not self._has_quota_table or len(table) != self._has_quota_len or len(self._has_quota) > 10_000:
            self._has_quota_table, self._has_quota_len = table, len(table)
            self._has_quota.clear()
        known = self._has_quota.get((principal, client_id))
        if known is None:
            user = _user_name(principal)
            known = self._has_quota[(principal, client_id)] = any(
                self._kinds(table, key) and self.bound(key, user, client_id or "", table)[1] is not None
                for key in quotas.QUOTA_KEYS)
        return known

    def max_value_in_quota_window(self, key: str, principal: str, client_id: str | None) -> int:
        """The most that one request may record without being throttled whatever came before it: the bound over
        ``quota.window.num - 1`` windows (Kafka's getMaxValueInQuotaWindow); 2**31 - 1 without a quota."""
        table = self._table()
        if not self._kinds(table, key):
            return INT32_MAX
        _, limit = self.bound(key, _user_name(principal), client_id or "", table)
        if limit is None:
            return INT32_MAX
        return int(min(limit * (self.samples - 1) * self.window_ms / 1000, INT32_MAX))

    def throttle(self, key: str, principal: str, client_id: str | None, throttle_ms: int,
                 now_ms: int | None = None) -> None:
        """The connection is throttled for ``throttle_ms`` on account of ``key``'s quota: its sensor's
        ``throttle-time`` records it (Kafka's ClientQuotaManager.throttle; for a Produce or Fetch only the type
        whose throttle was the larger one, the request-time quota on a tie)."""
        if throttle_ms <= 0:
            return
        now = self._clock_ms() if now_ms is None else now_ms
        tags, _ = self.bound(key, _user_name(principal), client_id or "")
        self._sensor(key, tags).throttle_time.record(throttle_ms, now)

    def gauges(self, now_ms: int | None = None) -> list[QuotaSensorGauge]:
        """Every live sensor's measures now (at scrape time, on the loop), as Kafka's ``byte-rate`` /
        ``request-time`` and ``throttle-time`` metrics read; idle sensors are dropped first, as Kafka's sensor
        expiry task would have."""
        now = self._clock_ms() if now_ms is None else now_ms
        self._expire(now, force=True)
        out = []
        for (key, (user, client_id)), sensor in sorted(self._sensors.items()):
            out.append(QuotaSensorGauge(QUOTA_TYPES[key], zk_paths.sanitize(user) if user else "", client_id,
                                        sensor.rate.measure(now), sensor.throttle_time.measure(now)))
        return out

    def _expire(self, now: int, force: bool = False) -> None:
        if not force and now - self._last_expiry_check < _EXPIRY_CHECK_MS:
            return
        self._last_expiry_check = now
        for k in [k for k, s in self._sensors.items() if now - s.rate.last_record_ms > _SENSOR_EXPIRY_MS]:
            del self._sensors[k]


def _user_name(principal: str) -> str:
    """The user of a principal as Kafka's quotas see it: the name after the type (``User:alice`` -> ``alice``)."""
    kind, sep, name = principal.partition(":")
    return name if sep else kind
