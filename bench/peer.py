"""Apache Kafka 2.6 as the peer a benchmark measures next to sofakafka, started as the interop tests start it,
and the sofakafka broker it is measured against.

Shared by the benchmarks that run the same load against both brokers in one run (``bench_transactions.py``,
``bench_spark.py``, ``bench_quotas.py``): ``tests.reference.kafka.ReferenceKafka`` (kafka_2.13 2.6.3, the jars scripts/test.sh
resolves into interop/java/target/lib) on a ZooKeeper of its own (``tests.cluster.conftest.start_zookeeper``,
Debian's), both in a temporary directory the caller owns and both killed on the way out. The scripts run
from the repository root with ``PYTHONPATH=.`` and import it as ``bench.peer``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load() -> str:
    """The three load averages, for the lines a benchmark prints before and after each broker."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def kafka_peer_available() -> str | None:
    """None when Apache Kafka 2.6 can be started here, else the reason it cannot."""
    from tests.cluster.conftest import ZK_JAR
    from tests.reference.java import LIB, java_binary

    if not any((LIB / "kafka-2.6").glob("*.jar")):
        return f"no kafka_2.13 jars in {LIB / 'kafka-2.6'} (scripts/test.sh resolves them)"
    if java_binary() is None:
        return "no java on PATH"
    if not ZK_JAR.exists():
        return f"no {ZK_JAR} (apt-get install zookeeper)"
    return None


@contextlib.contextmanager
def kafka_broker(tmp: Path, chroot: str, overrides: dict[str, str] | None = None) -> Iterator[str]:
    """Apache Kafka 2.6 and its ZooKeeper (their dirs live in ``tmp``); yields the bootstrap address.

    The broker gets a steady 1 GB G1 JVM, not the tests' quick one (tiered compilation capped, small heap),
    and ``SHARED_SETTINGS`` plus ``overrides``."""
    from tests.cluster.conftest import start_zookeeper
    from tests.integration.conftest import free_port
    from tests.reference.kafka import ReferenceKafka

    zk = start_zookeeper(tmp / "zookeeper", free_port())
    try:
        kafka = ReferenceKafka(tmp / "kafka", zk.hosts + chroot, heap="1g", overrides=overrides,
                               jvm_flags=("-Xms1g", "-Xmx1g", "-XX:+UseG1GC"))
        try:
            kafka.start()
            yield kafka.bootstrap
        finally:
            kafka.kill()
    finally:
        zk.stop()


@contextlib.contextmanager
def sofakafka_broker(tmp: Path, overrides: dict[str, str] | None = None) -> Iterator[str]:
    """One ``sofakafka serve`` process on a free loopback port, its data and log (``broker.log``) in ``tmp``,
    with ``overrides``; yields the bootstrap address once it answers ApiVersions, stops it on the way out."""
    from tests.integration.conftest import api_versions_ok, free_port

    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    args = [sys.executable, "-m", "sofakafka", "serve", "--log-level", "WARNING",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp / 'data'}"]
    for key, value in (overrides or {}).items():
        args += ["--override", f"{key}={value}"]
    with open(tmp / "broker.log", "ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not api_versions_ok("127.0.0.1", port):  # as ReferenceKafka waits for Kafka
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"sofakafka did not start; see {tmp / 'broker.log'}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
