"""The event generator: deterministic per seed, parseable by the jobs' one regex, realistic in shape."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime

from sofakafka.pipelines import generator as gen

START = 1_700_000_040_000  # a whole minute


def test_the_same_seed_gives_the_same_events_and_another_seed_others() -> None:
    a = gen.take(gen.AccessLogs(seed=1, start_ms=START), 500)
    assert a == gen.take(gen.AccessLogs(seed=1, start_ms=START), 500)
    assert a != gen.take(gen.AccessLogs(seed=2, start_ms=START), 500)
    assert gen.take(gen.Orders(seed=3, start_ms=START), 50) == gen.take(gen.Orders(seed=3, start_ms=START), 50)


def test_every_access_log_line_parses_and_its_time_is_the_record_timestamp_to_the_second() -> None:
    pattern = re.compile(gen.ACCESS_LOG_PATTERN)
    for e in gen.take(gen.AccessLogs(seed=4, start_ms=START, late_fraction=0.1), 2000):
        m = pattern.match(e.value.decode())
        assert m is not None, e.value
        when = datetime.strptime(m[2], gen.ACCESS_LOG_TIME_FORMAT)
        assert int(when.timestamp()) == e.timestamp_ms // 1000
        assert e.key.decode() == m[1]
        assert int(m[7]) >= 1


def test_event_time_follows_the_rate_and_late_lines_lag_it() -> None:
    events = gen.take(gen.AccessLogs(seed=5, start_ms=START, events_per_s=100, late_fraction=0.05,
                                     max_lateness_s=60), 3000)
    on_time = [e for i, e in enumerate(events) if e.timestamp_ms == START + i * 10]
    late = [e for i, e in enumerate(events) if e.timestamp_ms < START + i * 10]
    assert len(on_time) + len(late) == len(events)
    assert 50 < len(late) < 250  # ~5 % of 3000
    assert all(START + i * 10 - e.timestamp_ms <= 60_000 for i, e in enumerate(events))


def test_logs_have_skewed_clients_and_error_bursts() -> None:
    events = gen.take(gen.AccessLogs(seed=6, start_ms=START, burst_every=1000, burst_length=100), 3000)
    clients = Counter(e.key for e in events)
    _, count = clients.most_common(1)[0]
    assert count > 10 * (len(events) / len(clients))  # a heavy hitter, far above the mean
    pattern = re.compile(gen.ACCESS_LOG_PATTERN)
    status = [int(pattern.match(e.value.decode())[5]) for e in events]  # type: ignore[index]
    in_burst = [s for i, s in enumerate(status) if i % 1000 >= 900]
    outside = [s for i, s in enumerate(status) if i % 1000 < 900]
    assert sum(s >= 500 for s in in_burst) / len(in_burst) > 0.3
    assert sum(s >= 500 for s in outside) / len(outside) < 0.05


def test_orders_are_json_with_whole_cents_and_known_regions() -> None:
    for e in gen.take(gen.Orders(seed=7, start_ms=START, events_per_s=10), 200):
        o = json.loads(e.value)
        assert set(o) == {"order_id", "region", "amount_cents", "currency", "ts"}
        assert o["order_id"].encode() == e.key
        assert o["region"] in gen.REGIONS
        assert isinstance(o["amount_cents"], int) and o["amount_cents"] > 0
        assert datetime.fromisoformat(o["ts"].replace("Z", "+00:00")).timestamp() * 1000 == e.timestamp_ms
