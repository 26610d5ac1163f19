"""Apache Kafka 2.6 as the peer a benchmark measures next to sofakafka, started as the interop tests start it.

Shared by the benchmarks that run the same load against both brokers in one run (``bench_transactions.py``,
``bench_spark.py``): ``tests.reference.kafka.ReferenceKafka`` (kafka_2.13 2.6.3, the jars scripts/test.sh
resolves into interop/java/target/lib) on a ZooKeeper of its own (``tests.cluster.conftest.start_zookeeper``,
Debian's), both in a temporary directory the caller owns and both killed on the way out. The scripts run
from the repository root with ``PYTHONPATH=.`` and import it as ``bench.peer``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


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
