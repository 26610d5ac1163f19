"""The pipelines (sofakafka/pipelines) against a real broker; every result equals a pandas reference computed
from the very events the generator produced.

- log analytics over history (batch): request counts by status and path, latency percentiles, top clients
  and error bursts, to Parquet and to a results topic;
- log analytics as streaming queries with a watermark, run three times on one checkpoint: windows are
  written once the watermark passes their end, and lines arriving after their window was written (late data,
  at the edge: window end equal to the watermark) are dropped;
- orders by region per minute as a separate ``python -m sofakafka.pipelines orders`` process, addressed by
  ``--instance/--cell/--topic``, killed with SIGKILL mid-stream and started again on its checkpoint: every
  window exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sofakafka.client import KafkaClient
from sofakafka.pipelines import generator as gen
from sofakafka.pipelines import log_analytics, stream_analytics
from sofakafka.pipelines.naming import physical_topic
from tests.integration.conftest import REPO, BrokerProcess
from tests.spark import reference
from tests.spark.conftest import LONG
from tests.spark.kafka_io import read_all
from tests.spark.streaming import wait_until


def minute_aligned_past(minutes_ago: int) -> int:
    return (int(time.time()) // 60 - minutes_ago) * 60 * 1000


def produce(bootstrap: str, topic: str, events: list[gen.Event], partitions: int = 3) -> None:
    with KafkaClient(bootstrap) as client:
        gen.ensure_topic(client, topic, partitions)
        assert gen.produce(client, topic, events) == len(events)


def job_args(**overrides: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    log_analytics.add_arguments(parser)
    args = parser.parse_args(["--out", "unused"])
    for k, v in overrides.items():
        setattr(args, k, v)
    return args


def epoch_rows(spark: Any, path: Path, columns: list[str]) -> list[tuple[Any, ...]]:
    """Rows of a Parquet output with window_start as epoch seconds (no time zone in the comparison)."""
    df = spark.read.parquet(str(path)).selectExpr("CAST(unix_timestamp(window_start) AS BIGINT) AS w", *columns)
    return sorted(tuple(r) for r in df.collect())


def approx_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(pytest.approx(x, rel=1e-9) if isinstance(x, float) else x for x in r) for r in rows]


def test_log_analytics_over_history_equals_the_pandas_reference(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    events = gen.take(gen.AccessLogs(seed=7, start_ms=minute_aligned_past(120), events_per_s=10,
                                     burst_every=600, burst_length=150, max_lateness_s=90), 2400)
    produce(bs, "logs-history", events)
    args = job_args(out=str(tmp_path / "out"), results_topic="logs-history-results", top=3)
    counts = log_analytics.run_batch(spark, {"kafka.bootstrap.servers": bs}, "logs-history", args)

    logs = reference.access_logs(e.value for e in events)
    out = tmp_path / "out"
    assert epoch_rows(spark, out / "requests", ["status", "path", "requests"]) == reference.request_counts(logs)
    assert epoch_rows(spark, out / "latency", ["requests", "p50_ms", "p95_ms", "p99_ms", "max_ms"]) == approx_rows(
        reference.latency(logs))
    assert epoch_rows(spark, out / "top_clients", ["client", "requests", "rank"]) == reference.top_clients(logs, top=3)
    bursts = reference.error_bursts(logs)
    assert bursts, "the generated history has no error burst to find"
    assert epoch_rows(spark, out / "error_bursts", ["requests", "errors"]) == bursts

    # The same rows went to the results topic as JSON, keyed by metric and window.
    results = read_all(bs, "logs-history-results")
    per_metric: dict[str, int] = {}
    for r in results:
        doc = json.loads(r.value or b"{}")
        assert (r.key or b"").decode().startswith(f"{doc['metric']}|")
        per_metric[doc["metric"]] = per_metric.get(doc["metric"], 0) + 1
    assert per_metric == counts


def test_streaming_log_analytics_with_a_watermark_drops_late_lines_and_writes_each_window_once(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs, topic = broker.bootstrap, "logs-live"
    base = minute_aligned_past(60)

    def line(ts_s: int, status: int = 200, client: str = "192.0.2.1") -> gen.Event:
        text = gen.access_log_line(client, base + ts_s * 1000, "GET", "/late", status, 10, 5)
        return gen.Event(base + ts_s * 1000, client.encode(), text.encode())

    # Phase 1: 0-120 s of event time, and one line at exactly 120 s, so the watermark (1 minute behind the
    # newest event) ends at 60 s: the first minute's end, the edge where it is final.
    e1 = [*gen.take(gen.AccessLogs(seed=8, start_ms=base, events_per_s=10, late_fraction=0, burst_every=600,
                                   burst_length=150), 1200), line(120)]
    # Phase 2: 120-240 s and a line at 240 s: the watermark moves to 180 s.
    e2 = [*gen.take(gen.AccessLogs(seed=9, start_ms=base + 120_000, events_per_s=10, late_fraction=0,
                                   burst_every=600, burst_length=150), 1200), line(240)]
    # Phase 3: late lines for the first minute (written already) and its 10 s burst windows, then on-time
    # lines at 300-304 s, in a window that stays open; the watermark moves to 244 s.
    late = [line(10 + i % 40, status=503, client=f"192.0.2.{i % 5 + 2}") for i in range(60)]
    e3 = late + [line(300 + i) for i in range(5)]
    # At the end of each run Spark 4 runs one more (empty) batch to apply the new watermark, so a run writes
    # every window that ends at or before its watermark: after phase 1 the first minute; phase 2's batch
    # drops nothing (all on time), then writes minutes 2 and 3; phase 3's batch drops the late lines (their
    # windows ended at or before the 180 s watermark of the batch before), then writes minute 4.

    args = job_args(out=str(tmp_path / "out"), checkpoint=str(tmp_path / "ck"), available_now=True,
                    watermark="1 minute", results_topic="logs-live-results")
    options = {"kafka.bootstrap.servers": bs}
    for phase in (e1, e2, e3):
        produce(bs, topic, phase)
        queries = log_analytics.start_stream(spark, options, topic, args)
        for q in queries:
            assert q.awaitTermination(240), f"{q.name} still running"
            assert q.exception() is None, q.exception()

    closed = base // 1000 + 244  # the final watermark: windows ending at or before it are written
    for q in queries:
        assert q.lastProgress["eventTime"]["watermark"] == time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(closed))
    logs = reference.access_logs(e.value for e in e1 + e2)  # no late line counts
    out = tmp_path / "out"
    assert epoch_rows(spark, out / "requests", ["status", "path", "requests"]) == [
        r for r in reference.request_counts(logs) if r[0] + 60 <= closed]
    assert epoch_rows(spark, out / "latency", ["requests", "p50_ms", "p95_ms", "p99_ms", "max_ms"]) == approx_rows(
        [r for r in reference.latency(logs) if r[0] + 60 <= closed])
    bursts = [r for r in reference.error_bursts(logs) if r[0] + 10 <= closed]
    assert bursts and bursts == epoch_rows(spark, out / "error_bursts", ["requests", "errors"])
    # Each window once: had the late lines counted, the first minute would have been written again.
    windows = epoch_rows(spark, out / "latency", [])
    assert len(windows) == len(set(windows)) == 4
    # The results topic got the same rows (no failure here, so the at-least-once sink wrote each once).
    results = [json.loads(r.value or b"{}") for r in read_all(bs, "logs-live-results")]
    for metric in log_analytics.STREAM_METRICS:
        assert sum(d["metric"] == metric for d in results) == spark.read.parquet(str(out / metric)).count()


def _orders_job(bs: str, out: Path, ck: Path, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    with open(log, "ab") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "sofakafka.pipelines", "orders", "--bootstrap-server", bs,
             "--instance", "shop", "--cell", "gz01", "--topic", "orders", "--out", str(out), "--checkpoint", str(ck),
             "--max-offsets-per-trigger", "400", "--trigger", "200 milliseconds", "--watermark", "30 seconds",
             "--shuffle-partitions", "2"],
            stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _read_all_offsets(ck: Path, topic: str) -> bool:
    """Whether the job's checkpoint has committed a batch that ends at the topic's end (2001 records)."""
    offsets, commits = ck / "offsets", ck / "commits"
    done = {int(f.name) for f in commits.glob("[0-9]*")} if commits.exists() else set()
    for batch in sorted(done, reverse=True):
        last = (offsets / str(batch)).read_text().splitlines()[-1]
        return sum(json.loads(last)[topic].values()) == 2001
    return False


def _kill(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the job's whole process group: the Python driver and the JVM that spark-submit started."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    proc.wait(60)


def test_orders_per_region_killed_mid_stream_and_restarted_is_exactly_once(
        spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    topic = physical_topic("orders", instance="shop", cell="gz01")
    assert topic == "shop.gz01.orders"
    base = minute_aligned_past(90)
    orders = gen.take(gen.Orders(seed=11, start_ms=base, events_per_s=10), 2000)  # 200 s of event time
    # One order an hour later moves the watermark past every window above.
    sentinel = next(iter(gen.Orders(seed=12, start_ms=base + 3_600_000, events_per_s=1)))
    produce(bs, topic, [*orders, sentinel])
    out, ck, log = tmp_path / "out", tmp_path / "ck", tmp_path / "job.log"
    want = reference.orders_per_region(e.value for e in orders)

    job = _orders_job(bs, out, ck, log)
    try:
        commits = ck / "commits"
        wait_until("two committed batches", lambda: commits.exists() and len(list(commits.glob("[0-9]*"))) >= 2,
                   timeout_s=300)
        _kill(job, signal.SIGKILL)
    finally:
        _kill(job, signal.SIGKILL)
    done_before = len(list(commits.glob("[0-9]*")))
    assert done_before < 6, "the job finished before it could be killed mid-stream"

    def output() -> list[tuple[Any, ...]]:
        if not out.exists():
            return []
        df = spark.read.schema(stream_analytics.OUTPUT_SCHEMA).parquet(str(out))
        return sorted(tuple(r) for r in df.selectExpr("CAST(unix_timestamp(window_start) AS BIGINT)", "region",
                                                      "orders", "revenue_cents").collect())

    partial = output()
    assert len(partial) < len(want)
    job = _orders_job(bs, out, ck, log)
    try:
        # Cheap checks first (the checkpoint's files), a Spark read of the output only every few seconds.
        wait_until("every window in the output", lambda: _read_all_offsets(ck, topic) and len(output()) >= len(want),
                   timeout_s=400, interval_s=3)
    finally:
        _kill(job, signal.SIGTERM)
    got = output()
    assert len({(w, r) for w, r, *_ in got}) == len(got), "a window was written twice"
    assert got == want
    assert job.returncode is not None
    assert "Traceback" not in log.read_text(errors="replace")


@pytest.mark.skipif(not LONG, reason="long form: SOFAKAFKA_SPARK_LONG=1 runs the demo end to end (~2 min)")
def test_the_one_command_demo_shows_complete_minutes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sofakafka.pipelines", "demo", "--duration", "90", "--rate", "100",
         "--time-scale", "30", "--refresh", "10"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "minute (UTC) |" in result.stdout and "revenue by region" in result.stdout, result.stdout[-3000:]
