"""The whole pipeline in one command: a sofakafka broker, the order generator and the orders job, with a
table of orders and revenue by region per minute and a bar chart of the last complete minute, redrawn as
windows close.

    python -m sofakafka.pipelines demo                 # about a minute; Ctrl-C stops it early

Event time runs ``--time-scale`` (default 12) times faster than the wall clock, so a one-minute window closes
every five seconds. The broker is a ``python -m sofakafka serve`` child process on a free loopback port with
its data in a temporary folder (both gone at the end), unless ``--bootstrap-server`` names a running one.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sofakafka.client import ClientError, KafkaClient
from sofakafka.pipelines import generator, stream_analytics
from sofakafka.pipelines.naming import physical_topic
from sofakafka.protocol.errors import KafkaError

BAR_WIDTH = 40


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def local_broker(data_dir: Path) -> Iterator[str]:
    """A ``sofakafka serve`` child on a free loopback port; yields its bootstrap address, stops it at the end."""
    port = _free_port()
    log_path = data_dir / "broker.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sofakafka", "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={data_dir / 'kafka-logs'}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    bootstrap = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the broker exited with {proc.returncode}; its log is {log_path}")
            try:
                with KafkaClient(bootstrap, request_timeout_ms=2000) as client:
                    client.metadata([])
                break
            except (OSError, ClientError, KafkaError):
                pass  # not listening or not ready yet
            if time.monotonic() > deadline:
                raise RuntimeError(f"the broker did not answer within 60 s; its log is {log_path}")
            time.sleep(0.2)
        yield bootstrap
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def render(rows: list[Any], regions: list[str]) -> str:
    """A table (minute x region: orders, revenue) and a bar chart of the last minute's revenue by region."""
    by_window: dict[Any, dict[str, tuple[int, int]]] = {}
    for r in rows:
        by_window.setdefault(r["window_start"], {})[r["region"]] = (r["orders"], r["revenue_cents"])
    if not by_window:
        return "(no complete minute yet)"
    width = max(12, *(len(x) for x in regions))
    lines = ["minute (UTC) | " + " | ".join(f"{x:>{width}}" for x in regions) + " |    total"]
    lines.append("-" * len(lines[0]))
    for start in sorted(by_window)[-8:]:
        cells = by_window[start]
        total = sum(c[1] for c in cells.values())
        lines.append(f"{start:%H:%M}        | " + " | ".join(
            f"{cells.get(x, (0, 0))[0]:>4} {cells.get(x, (0, 0))[1] / 100:>{width - 5}.0f}" for x in regions)
            + f" | {total / 100:>8.0f}")
    last = max(by_window)
    peak = max((c[1] for c in by_window[last].values()), default=1) or 1
    lines.append(f"\nrevenue by region, minute {last:%H:%M} (orders in brackets)")
    for x in regions:
        n, cents = by_window[last].get(x, (0, 0))
        lines.append(f"  {x:>{width}} {'#' * round(BAR_WIDTH * cents / peak):<{BAR_WIDTH}} {cents / 100:>9.2f} ({n})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sofakafka.pipelines demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", help="use this cluster instead of starting a broker")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--instance", help="LDC instance: the topic is $INSTANCE.$CELL.$TOPIC")
    parser.add_argument("--cell", help="LDC cell")
    parser.add_argument("--rate", type=float, default=200.0, help="orders per second of wall time")
    parser.add_argument("--time-scale", type=float, default=12.0, help="event time runs this much faster")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds to run (default 60)")
    parser.add_argument("--refresh", type=float, default=5.0, help="seconds between tables")
    parser.add_argument("--master", help="Spark master (default local[2])")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.time_scale <= 0 or args.duration <= 0:
        parser.error("--rate, --time-scale and --duration must be positive")
    try:
        topic = physical_topic(args.topic, instance=args.instance, cell=args.cell)
    except ValueError as exc:
        parser.error(str(exc))
    work = Path(tempfile.mkdtemp(prefix="sofakafka-demo-"))
    try:
        with contextlib.ExitStack() as stack:
            bootstrap = args.bootstrap_server or stack.enter_context(local_broker(work))
            print(f"broker: {bootstrap}; topic: {topic}; output and checkpoint under {work}", flush=True)
            return _run(args, bootstrap, topic, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, bootstrap: str, topic: str, work: Path) -> int:
    from sofakafka.pipelines.connector import spark_session

    with KafkaClient(bootstrap) as client:
        generator.ensure_topic(client, topic, 3)
    stop = threading.Event()
    sent = [0]

    def counted() -> Iterator[generator.Event]:
        for event in generator.Orders(seed=int(time.time()), events_per_s=args.rate * args.time_scale):
            sent[0] += 1
            yield event

    def generate() -> None:
        with KafkaClient(bootstrap) as client:
            generator.produce(client, topic, counted(), rate=args.rate, stop=iter(stop.is_set, None))

    gen = threading.Thread(target=generate, name="generator", daemon=True)
    gen.start()
    spark = spark_session("sofakafka-demo", master=args.master)
    out, checkpoint = work / "orders-per-minute", work / "checkpoint"
    # Small batches: the first one would otherwise take everything produced while Spark was starting.
    job_args = argparse.Namespace(read_committed=False, starting_offsets="earliest", max_offsets_per_trigger=5000,
                                  watermark="10 seconds", window="1 minute", out=str(out),
                                  checkpoint=str(checkpoint), available_now=False, trigger="2 seconds")
    query = stream_analytics.start(spark, {"kafka.bootstrap.servers": bootstrap}, topic, job_args)
    started = time.monotonic()
    code = 0
    try:
        while time.monotonic() - started < args.duration:
            time.sleep(min(args.refresh, max(0.1, args.duration - (time.monotonic() - started))))
            if not query.isActive:
                print(f"the query stopped: {query.exception()}", file=sys.stderr)
                code = 1
                break
            p = query.lastProgress
            rows = (spark.read.schema(stream_analytics.OUTPUT_SCHEMA).parquet(str(out)).collect()
                    if out.exists() else [])
            batch = f"batch {p['batchId']}, {p['numInputRows']} orders in it" if p else "starting"
            print(f"\n[{time.monotonic() - started:5.0f} s] {sent[0]} orders sent; query {batch}",
                  flush=True)
            print(render(rows, list(generator.REGIONS)), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        gen.join(30)
        query.stop()
        spark.stop()
    print(f"\n{sent[0]} orders produced; done.", flush=True)
    return code
