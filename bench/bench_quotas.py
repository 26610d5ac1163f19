"""Client byte-rate quotas measured from the client side: throttled producers and consumers of two client
libraries, and an unthrottled client's latency beside them, on sofakafka and on Apache Kafka 2.6 in the same run.

Issue 19's measured "Done means": a producer and a consumer with byte-rate quotas settle within 10% of the quota
over 30 s, librdkafka and kafka-python report throttle time, an unthrottled client on the same broker keeps its
latency, and changing a quota takes effect without a restart. Per broker, one after the other (never sharing the
CPU), with the brokers' default quota windows (``quota.window.num`` 11 x ``quota.window.size.seconds`` 1, so a
quota window of 11 s):

1. a topic of one partition is filled with enough 1000-byte records for the consumers, and every tenant gets
   its quota through AlterClientQuotas (sofakafka's own client, the same request against both brokers): a
   ``producer_byte_rate`` for each producer's client id and a ``consumer_byte_rate`` for each consumer's, all
   ``--quota`` bytes/s;
2. the probe, an unthrottled librdkafka producer (its own client id, no quota), sends one 100-byte record at a
   time, acks=1, waits for its acknowledgement (``flush()``), every 20 ms: ``--baseline-seconds`` alone;
3. the five tenants start together, each in its own process, each sending or reading as fast as it can, 1000-byte
   records: a librdkafka producer with its default ``batch.size`` (1 MB), one with 64 KB batches, a kafka-python
   producer (16 KB batches, its default), a librdkafka consumer and a kafka-python consumer (both reading the
   filled topic, written in 64 KB batches, from the start), for ``--windows`` quota windows (33 s), the probe still
   running;
4. then every tenant's quota is doubled (AlterClientQuotas again, nothing restarted) and they run
   ``--change-windows`` more (22 s).

Why whole quota windows: a client that sends as fast as it may does not get a steady rate from Kafka's quota. A
new client may send ``quota.window.num - 1`` windows' worth at once (the rate is divided by at least that long),
is then silent until the rate is back at the quota, and when the sample holding that burst leaves the window 11 s
later, the room it frees is taken again at once: the burst echoes every quota window, on both brokers. What the
quota bounds is the bytes per quota window, so a rate is only comparable to it over whole windows: over the first
19 s after the burst (two echoes in 19 s) the same client would show about 1.15x.

Printed: per tenant, the acknowledged (producers) or received (consumers) record value bytes per second over each
half quota window (5.5 s, to show the bursts), each quota window, and the whole phase, as a fraction of the quota
in force; the brokers count request and response bytes, a percent or two more than the values (batch and request
headers), so a client held exactly at its quota shows about 0.98-0.99 here. The throttle time each library
reported: librdkafka's statistics (``brokers[].throttle``, per 1 s interval: the largest max, and the mean of
the interval averages), kafka-python's metrics (``produce-throttle-time-*`` / ``fetch-throttle-time-*`` and the
connection's ``throttle-time-*``: the largest max seen, and the last average). The probe's latency p50/p99/max,
alone and with the tenants. For sofakafka, the broker's own ``kafka_server_quota_*`` series scraped from its
/metrics at the end of the quota phase. The 1-minute load average is sampled every half window.

``--kafka-peer`` (on by default when the kafka_2.13 2.6.3 jars, ``java`` and Debian's ZooKeeper are present,
bench/peer.py) runs the same against Apache Kafka 2.6. Run from the repository root::

    PYTHONPATH=. nice -n 5 .venv/bin/python bench/bench_quotas.py [--windows 3] [--quota 524288] [--no-kafka-peer]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.peer import REPO, kafka_broker, kafka_peer_available, load, sofakafka_broker

VALUE_BYTES = 1000
PROBE_BYTES = 100
PROBE_INTERVAL_S = 0.02
QUOTA_WINDOW_S = 11  # both brokers' default quota.window.num (11) x quota.window.size.seconds (1)
HALF_S = QUOTA_WINDOW_S / 2
KP_QUEUED = 2000  # records the kafka-python producer may have unacknowledged, as librdkafka's queue holds 2000
FILL_TOPIC = "quota-source"
TENANTS = ("librdkafka producer", "librdkafka 64 KB batches", "kafka-python producer", "librdkafka consumer",
           "kafka-python consumer")
# librdkafka's batch.size: its default (1,000,000), and the 64 KB of a producer whose requests are small next to
# its quota (a throttled client overshoots by up to one request each time it is let in).
RDKAFKA_BATCH = {"rdkafka-producer": 1_000_000, "rdkafka-producer-64k": 65_536}
FILL_BATCH = 65_536  # the consumers read what a producer with 64 KB batches wrote
ROLES = {"librdkafka producer": "rdkafka-producer", "librdkafka 64 KB batches": "rdkafka-producer-64k",
         "kafka-python producer": "kp-producer",
         "librdkafka consumer": "rdkafka-consumer", "kafka-python consumer": "kp-consumer"}


# ------------------------------------------------------------------------------------- the client processes
# Each tenant and the probe run in a process of their own (``bench_quotas.py --role ...``): four Python client
# loops in one interpreter would share its lock, and the probe would measure that. A process connects, waits for
# the start time it is given, runs until the end time, and prints one JSON line: its events (time, bytes) and
# the throttle times its library reported.


def _rdkafka_stats(throttles: list[tuple[float, float, int]]) -> Callable[[str], None]:
    def on_stats(text: str) -> None:
        for b in json.loads(text).get("brokers", {}).values():
            t = b.get("throttle", {})
            if t.get("cnt", 0):
                throttles.append((float(t.get("max", 0)), float(t.get("avg", 0)), int(t["cnt"])))
    return on_stats


def _kafka_python_throttle(metrics: dict[str, dict[str, Any]]) -> tuple[float, float]:
    """(largest throttle-time max, largest throttle-time avg) over the metric groups kafka-python keeps."""
    def largest(suffix: str) -> float:
        values = [v for group in metrics.values() for k, v in group.items() if k.endswith(suffix)]
        return max((float(v) for v in values if isinstance(v, (int, float)) and not math.isnan(v)), default=0.0)
    return largest("throttle-time-max"), largest("throttle-time-avg")


_KEEP: list[object] = []


def _wait_until(t: float) -> None:
    while (left := t - time.time()) > 0:
        time.sleep(min(left, 0.5))


def run_role(role: str, bootstrap: str, topic: str, start: float, end: float) -> dict[str, Any]:
    events: list[tuple[float, int]] = []
    out: dict[str, Any] = {"role": role, "events": events}
    value = os.urandom(VALUE_BYTES)
    if role in RDKAFKA_BATCH:
        from confluent_kafka import Producer

        throttles: list[tuple[float, float, int]] = []
        p = Producer({"bootstrap.servers": bootstrap, "client.id": f"tenant-{role}", "linger.ms": 5,
                      "batch.size": RDKAFKA_BATCH[role],
                      "queue.buffering.max.messages": 2000, "statistics.interval.ms": 1000,
                      "stats_cb": _rdkafka_stats(throttles)})
        p.list_topics(topic, timeout=30)

        def acked(err: Any, msg: Any) -> None:
            if err is None:
                events.append((time.time(), len(msg.value())))

        _wait_until(start)
        while time.time() < end:
            try:
                p.produce(topic, value, on_delivery=acked)
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        p.poll(1.5)  # the last statistics interval
        p.purge()
        p.flush(5)
        out["rdkafka_throttle"] = throttles
    elif role == "rdkafka-consumer":
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        throttles = []
        c = Consumer({"bootstrap.servers": bootstrap, "client.id": "tenant-rdkafka-consumer",
                      "group.id": f"bench-quotas-{os.getpid()}", "enable.auto.commit": False,
                      "statistics.interval.ms": 1000, "stats_cb": _rdkafka_stats(throttles)})
        c.list_topics(topic, timeout=30)
        _wait_until(start)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while time.time() < end:
            for m in c.consume(500, timeout=0.1):
                if m.error() is None:
                    events.append((time.time(), len(m.value() or b"")))
        c.consume(1, timeout=1.5)  # the last statistics interval
        c.close()
        out["rdkafka_throttle"] = throttles
    elif role == "kp-producer":
        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=bootstrap, client_id="tenant-kp-producer", linger_ms=5)
        _KEEP.append(kp)  # alive until os._exit: its __del__ would flush what the quota holds back
        kp.partitions_for(topic)
        samples: list[tuple[float, float, float]] = []
        stop = threading.Event()

        def watch() -> None:  # kafka-python's throttle metrics, once a second
            while not stop.wait(1.0):
                samples.append((time.time(), *_kafka_python_throttle(kp.metrics())))

        def acked_kp(_: Any) -> None:
            events.append((time.time(), VALUE_BYTES))

        _wait_until(start)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        sent = 0
        while time.time() < end:
            if sent - len(events) >= KP_QUEUED:  # kafka-python 3 has no buffer_memory bound: ours
                time.sleep(0.002)
                continue
            kp.send(topic, value).add_callback(acked_kp)
            sent += 1
        stop.set()
        watcher.join()
        samples.append((time.time(), *_kafka_python_throttle(kp.metrics())))
        out["kp_throttle"] = samples  # what is still queued is dropped with the process (os._exit)
    elif role == "kp-consumer":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KpPartition

        kc = KafkaConsumer(bootstrap_servers=bootstrap, client_id="tenant-kp-consumer", enable_auto_commit=False)
        kc.partitions_for_topic(topic)
        samples = []
        last_sample = 0.0
        _wait_until(start)
        kc.assign([KpPartition(topic, 0)])
        kc.seek_to_beginning()
        while time.time() < end:
            for records in kc.poll(timeout_ms=100).values():
                now = time.time()
                events.append((now, sum(len(r.value) for r in records)))
            if time.time() - last_sample >= 1.0:
                last_sample = time.time()
                samples.append((last_sample, *_kafka_python_throttle(kc.metrics())))
        samples.append((time.time(), *_kafka_python_throttle(kc.metrics())))
        kc.close()
        out["kp_throttle"] = samples
    elif role == "probe":
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "client.id": "probe", "linger.ms": 0, "acks": 1,
                      "socket.nagle.disable": True})
        p.produce(topic, b"w")
        p.flush(30)  # connection and metadata out of the timing
        probe = os.urandom(PROBE_BYTES)
        _wait_until(start)
        tick = time.time()
        while tick < end:
            t0 = time.perf_counter()
            p.produce(topic, probe)
            if p.flush(10) != 0:
                raise SystemExit("the probe's record was not acknowledged within 10 s")
            events.append((tick, round((time.perf_counter() - t0) * 1e6)))  # microseconds
            tick += PROBE_INTERVAL_S
            _wait_until(tick)
    else:
        raise SystemExit(f"unknown role {role}")
    return out


# ------------------------------------------------------------------------------------------------ one broker


@dataclass
class Measured:
    start: float = 0.0
    """When the tenants started (wall clock); the probe's baseline ran before it."""
    roles: dict[str, dict[str, Any]] = field(default_factory=dict)
    scrape: dict[tuple[str, str], float] = field(default_factory=dict)
    """(series, labels) -> value of sofakafka's kafka_server_quota_* at the end of the quota phase."""
    loads: list[float] = field(default_factory=list)


def _spawn(role: str, bootstrap: str, topic: str, start: float, end: float) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    return subprocess.Popen([sys.executable, __file__, "--role", role, "--bootstrap", bootstrap, "--topic", topic,
                             "--start", repr(start), "--end", repr(end)],
                            stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)


def _collect(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise SystemExit(f"a client process ({proc.args!r}) did not finish") from None
    if proc.returncode != 0:
        raise SystemExit(f"a client process failed ({proc.returncode}): {proc.args!r}")
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return result


def set_quotas(bootstrap: str, quota: int) -> None:
    from sofakafka.client import KafkaClient

    with KafkaClient(bootstrap) as admin:
        results = admin.alter_client_quotas([
            ((("client-id", "tenant-rdkafka-producer"),), [("producer_byte_rate", float(quota))]),
            ((("client-id", "tenant-rdkafka-producer-64k"),), [("producer_byte_rate", float(quota))]),
            ((("client-id", "tenant-kp-producer"),), [("producer_byte_rate", float(quota))]),
            ((("client-id", "tenant-rdkafka-consumer"),), [("consumer_byte_rate", float(quota))]),
            ((("client-id", "tenant-kp-consumer"),), [("consumer_byte_rate", float(quota))]),
        ])
        for r in results:
            r.raise_for_error()


def prepare(bootstrap: str, fill_bytes: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic  # where it is defined (admin re-exports it implicitly)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(t, 1, 1) for t in (FILL_TOPIC, "quota-rdkafka", "quota-rdkafka-64k", "quota-kafka-python",
                                          "quota-probe")]
    for f in admin.create_topics(topics).values():
        f.result(60)
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "filler", "linger.ms": 20, "batch.size": FILL_BATCH})
    value = os.urandom(VALUE_BYTES)
    for _ in range(fill_bytes // VALUE_BYTES):
        while True:
            try:
                p.produce(FILL_TOPIC, value)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(300) != 0:
        raise SystemExit("the fill was not acknowledged")


def scrape_quotas(url: str) -> dict[tuple[str, str], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return {(s.name, ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("kafka_server_quota_")}


def measure(bootstrap: str, args: argparse.Namespace, metrics_url: str | None) -> Measured:
    seconds, change_seconds = args.windows * QUOTA_WINDOW_S, args.change_windows * QUOTA_WINDOW_S
    quota_phase = seconds + change_seconds
    # What the consumers may read: the quota phase, the doubled one, and a margin.
    fill = args.quota * (seconds + 2 * change_seconds + 2 * QUOTA_WINDOW_S)
    prepare(bootstrap, fill)
    set_quotas(bootstrap, args.quota)
    m = Measured()
    now = time.time()
    baseline_start = now + 5  # the processes connect first
    m.start = baseline_start + args.baseline_seconds
    end = m.start + quota_phase
    probe = _spawn("probe", bootstrap, "quota-probe", baseline_start, end)
    tenants = {name: _spawn(ROLES[name], bootstrap, topic, m.start, end)
               for name, topic in zip(TENANTS, ("quota-rdkafka", "quota-rdkafka-64k", "quota-kafka-python", FILL_TOPIC,
                                                FILL_TOPIC),
                                      strict=True)}
    try:
        next_load = baseline_start
        changed = scraped = False
        while time.time() < end:
            t = time.time()
            if t >= next_load:
                m.loads.append(os.getloadavg()[0])
                next_load += HALF_S
            if not scraped and metrics_url is not None and t >= m.start + seconds - 0.5:
                m.scrape = scrape_quotas(metrics_url)
                scraped = True
            if not changed and t >= m.start + seconds:
                set_quotas(bootstrap, 2 * args.quota)  # no restart: the running clients get the new quota
                changed = True
            time.sleep(0.05)
        m.roles["probe"] = _collect(probe, 60)
        for name, proc in tenants.items():
            m.roles[name] = _collect(proc, 60)
    finally:
        for proc in (probe, *tenants.values()):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return m


# ------------------------------------------------------------------------------------------------- the tables


def rate_windows(events: list[list[float]], start: float, seconds: float, width: float) -> list[float]:
    """Bytes/s in each ``width`` window of [start, start + seconds)."""
    buckets = [0.0] * round(seconds / width)
    for t, n in events:
        i = int((t - start) // width)
        if 0 <= i < len(buckets):
            buckets[i] += n
    return [b / width for b in buckets]


def span_rate(events: list[list[float]], t0: float, t1: float) -> float:
    return sum(n for t, n in events if t0 <= t < t1) / (t1 - t0)


def throttle_reported(result: dict[str, Any], t0: float, t1: float) -> str:
    """'max / mean ms' of what the library reported while [t0, t1)."""
    if "rdkafka_throttle" in result:
        stats = result["rdkafka_throttle"]
        if not stats:
            return "none"
        return f"{max(s[0] for s in stats):.0f} / {statistics.fmean(s[1] for s in stats):.0f} ms"
    samples = [s for s in result.get("kp_throttle", []) if t0 <= s[0] < t1 + 2]
    if not samples or max(s[1] for s in samples) == 0:
        return "none"
    return f"{max(s[1] for s in samples):.0f} / {samples[-1][2]:.0f} ms"


def percentiles(us: list[float]) -> str:
    if not us:
        return "-"
    ordered = sorted(us)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] / 1000

    return f"{at(0.5):.2f} / {at(0.99):.2f} / {ordered[-1] / 1000:.1f} ms"


def print_results(results: dict[str, Measured], args: argparse.Namespace) -> None:
    q = args.quota
    seconds, change_seconds = args.windows * QUOTA_WINDOW_S, args.change_windows * QUOTA_WINDOW_S
    print(f"\nrate / quota (record value bytes): {seconds} s at {q:,} B/s per tenant, then {change_seconds} s at "
          f"{2 * q:,} B/s; per half quota window ({HALF_S} s), per quota window ({QUOTA_WINDOW_S} s) and overall:")
    halves = "".join(f"{f'h{i + 1}':>6}" for i in range(2 * args.windows))
    wholes = "".join(f"{f'w{i + 1}':>7}" for i in range(args.windows))
    halves_after = "".join(f"{f'h{i + 1}':>6}" for i in range(2 * args.change_windows))
    wholes_after = "".join(f"{f'w{i + 1}':>7}" for i in range(args.change_windows))
    print(f"{'broker':<11}{'tenant':<23}{halves} |{wholes}{'all':>7}  ||{halves_after} |{wholes_after}{'all':>7}"
          f"  throttle reported (max / mean)")
    for broker, m in results.items():
        for name in TENANTS:
            r = m.roles[name]
            ev = r["events"]
            after = m.start + seconds
            end = after + change_seconds
            cells = "".join(f"{w / q:>6.2f}" for w in rate_windows(ev, m.start, seconds, HALF_S)) + " |"
            cells += "".join(f"{w / q:>7.3f}" for w in rate_windows(ev, m.start, seconds, QUOTA_WINDOW_S))
            cells += f"{span_rate(ev, m.start, after) / q:>7.3f}  ||"
            cells += "".join(f"{w / (2 * q):>6.2f}" for w in rate_windows(ev, after, change_seconds, HALF_S)) + " |"
            cells += "".join(f"{w / (2 * q):>7.3f}" for w in rate_windows(ev, after, change_seconds, QUOTA_WINDOW_S))
            cells += f"{span_rate(ev, after, end) / (2 * q):>7.3f}"
            print(f"{broker:<11}{name:<23}{cells}  {throttle_reported(r, m.start, end)}")
    print(f"\nunthrottled probe (librdkafka, acks=1, {PROBE_BYTES} B, one at a time every "
          f"{PROBE_INTERVAL_S * 1000:.0f} ms), produce latency p50 / p99 / max:")
    print(f"{'broker':<11}{f'alone ({args.baseline_seconds} s)':>32}{f'with the tenants ({seconds} s)':>36}"
          f"{'p50 ratio':>11}{'p99 ratio':>11}")
    for broker, m in results.items():
        ev = m.roles["probe"]["events"]
        alone = [us for t, us in ev if t < m.start]
        beside = [us for t, us in ev if m.start <= t < m.start + seconds]
        ratios = ""
        if alone and beside:
            a, b = sorted(alone), sorted(beside)
            ratios = (f"{b[len(b) // 2] / a[len(a) // 2]:>10.2f}x"
                      f"{b[math.ceil(0.99 * len(b)) - 1] / a[math.ceil(0.99 * len(a)) - 1]:>10.2f}x")
        print(f"{broker:<11}{percentiles(alone):>32}{percentiles(beside):>36}{ratios}")
    for broker, m in results.items():
        print(f"\n{broker}: 1-minute load average every {HALF_S} s: "
              + " ".join(f"{x:.2f}" for x in m.loads))
        if m.scrape:
            print(f"{broker}'s /metrics at the end of the quota phase (kafka_server_quota_*):")
            for (series, labels), value in sorted(m.scrape.items()):
                if "tenant" in labels:
                    print(f"  {series}{{{labels}}} {value:,.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--windows", type=int, default=3, help=f"quota windows ({QUOTA_WINDOW_S} s) at the quota")
    ap.add_argument("--change-windows", type=int, default=2, help="quota windows after the quotas are doubled")
    ap.add_argument("--baseline-seconds", type=int, default=10, help="the probe alone, before the tenants")
    ap.add_argument("--quota", type=int, default=512 * 1024, help="bytes/s for every tenant")
    ap.add_argument("--kafka-peer", action=argparse.BooleanOptionalAction, default=None,
                    help="also measure Apache Kafka 2.6 (default: when its jars, java and ZooKeeper are present)")
    ap.add_argument("--dump", type=Path, help="also write every client's events (JSON) to this file")
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--end", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role:
        print(json.dumps(run_role(args.role, args.bootstrap, args.topic, args.start, args.end)), flush=True)
        os._exit(0)  # no client teardown: a throttled producer's queue would only be flushed to be thrown away
    missing = kafka_peer_available()
    if args.kafka_peer and missing:
        raise SystemExit(f"--kafka-peer: {missing}")
    peer = missing is None if args.kafka_peer is None else args.kafka_peer
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average {load()} at start", flush=True)
    if not peer:
        print(f"(no Apache Kafka peer: {missing or '--no-kafka-peer'})")

    @contextlib.contextmanager
    def sofakafka(tmp: Path) -> Iterator[tuple[str, str | None]]:
        from tests.integration.conftest import free_port
        from tests.reference.kafka import SHARED_SETTINGS  # what ReferenceKafka gives Kafka 2.6

        port = free_port()
        with sofakafka_broker(tmp, {**SHARED_SETTINGS, "metrics.listener": f"http://127.0.0.1:{port}"}) as bootstrap:
            yield bootstrap, f"http://127.0.0.1:{port}/metrics"

    @contextlib.contextmanager
    def kafka(tmp: Path) -> Iterator[tuple[str, str | None]]:
        with kafka_broker(tmp, "/bench-quotas") as bootstrap:
            yield bootstrap, None

    brokers: dict[str, Callable[[Path], contextlib.AbstractContextManager[tuple[str, str | None]]]] = {
        "sofakafka": sofakafka}
    if peer:
        brokers["Kafka 2.6"] = kafka
    results: dict[str, Measured] = {}
    for name, start in brokers.items():
        tmp = Path(tempfile.mkdtemp(prefix="bench-quotas-"))
        try:
            with start(tmp) as (bootstrap, metrics_url):
                results[name] = measure(bootstrap, args, metrics_url)
            print(f"({name} measured; load average {load()})", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print_results(results, args)
    if args.dump is not None:
        args.dump.write_text(json.dumps({b: {"start": m.start, "roles": m.roles} for b, m in results.items()}))


if __name__ == "__main__":
    main()
