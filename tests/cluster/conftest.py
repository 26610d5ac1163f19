"""A real ZooKeeper for the cluster tests, and brokers that use it.

One standalone ZooKeeper (Debian's ``zookeeper`` package: its jar and the jars its manifest lists, run as a
plain JVM, no systemd) serves the whole session on a free loopback port and is killed at the end whatever
happened. Tests share it and stay apart by chroot: :func:`zk_chroot` hands each test its own, so no test
sees another's znodes. Readiness is the ``srvr`` four-letter word answering with a ``Mode:`` line (``ruok``
answers before the server serves).
"""

from __future__ import annotations

import gc
import itertools
import shutil
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sofakafka.cli import cluster
from tests.integration.conftest import BrokerProcess, free_port

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
ZK_START_TIMEOUT_S = 60.0


@dataclass
class ZooKeeperServer:
    port: int
    data_dir: Path
    proc: subprocess.Popen[bytes]

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def four_letter_word(self, word: str, timeout: float = 2.0) -> str:
        return cluster.four_letter_word(self.port, word, timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def log_tail(self, lines: int = 50) -> str:
        try:
            return "\n".join((self.data_dir / "zk.log").read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no zookeeper log)"


def start_zookeeper(data_dir: Path, port: int) -> ZooKeeperServer:
    assert ZK_JAR.exists(), f"{ZK_JAR} missing: apt-get install zookeeper (scripts/test.sh does)"
    java = shutil.which("java")
    assert java, "java missing: apt-get install zookeeper pulls a JRE (scripts/test.sh does)"
    (data_dir / "data").mkdir(parents=True, exist_ok=True)
    (data_dir / "zoo.cfg").write_text(
        "tickTime=2000\n"
        f"dataDir={data_dir / 'data'}\n"
        f"clientPort={port}\n"
        "clientPortAddress=127.0.0.1\n"
        "maxClientCnxns=0\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=srvr,stat,mntr,cons\n"
        "autopurge.purgeInterval=0\n"
    )
    classpath = [str(data_dir), str(ZK_JAR)] + ([str(SLF4J_SIMPLE_JAR)] if SLF4J_SIMPLE_JAR.exists() else [])
    with open(data_dir / "zk.log", "ab") as log:
        proc = subprocess.Popen(
            [java, "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dzookeeper.jmx.log4j.disable=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-cp", ":".join(classpath), "org.apache.zookeeper.server.quorum.QuorumPeerMain",
             str(data_dir / "zoo.cfg")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    server = ZooKeeperServer(port, data_dir, proc)
    deadline = time.monotonic() + ZK_START_TIMEOUT_S
    while "Mode:" not in server.four_letter_word("srvr"):
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise AssertionError(f"ZooKeeper did not start (exit {proc.returncode}):\n{server.log_tail()}")
        time.sleep(0.1)
    return server


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper for the whole session (starting a JVM costs seconds)."""
    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"), free_port())
    try:
        yield server
    finally:
        server.stop()


_chroots = itertools.count()


@pytest.fixture
def zk_chroot(request: pytest.FixtureRequest) -> str:
    """A chroot of this test's own (not created: connecting creates it, as Kafka does)."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return f"/{name}-{next(_chroots)}"


@pytest.fixture
def zk_broker_factory(
    tmp_path: Path, zookeeper: ZooKeeperServer, zk_chroot: str
) -> Iterator[Callable[..., BrokerProcess]]:
    """Broker processes of this test using the ZooKeeper under the test's chroot; all killed at the end.

    ``start=False`` hands the broker back unstarted, so that a test can start several at once (each start waits
    for its broker to answer, most of it idle time)."""
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, *, name: str = "broker", start: bool = True) -> BrokerProcess:
        settings = {
            "zookeeper.connect": zookeeper.hosts + zk_chroot,
            "zookeeper.session.timeout.ms": "6000",
        }
        settings.update(overrides or {})
        b = BrokerProcess(tmp_path / f"{name}{len(started)}", settings)
        started.append(b)
        return b.start() if start else b

    try:
        yield make
    finally:
        for b in started:
            b.kill()


def forget_dead_broker_sockets(already_running: frozenset[threading.Thread] = frozenset()) -> None:
    """kafka-python leaves the socket of a refused reconnect to a killed broker for the garbage collector (its
    bug, not the broker's). Every cluster test kills or stops brokers while kafka-python clients know them, so
    collect those sockets at the end of each test, where that is expected, instead of letting the collector
    find them during a later test (warnings are errors: the later, innocent test would fail)."""
    deadline = time.monotonic() + 10
    for thread in threading.enumerate():
        # A closed client's network thread may still hold such a socket until it has exited.
        # Threads that ran before the test (a module-scoped client's IO thread) are not closing: waiting for
        # them would only burn the deadline.
        if (thread is not threading.current_thread() and "kafka-python" in thread.name
                and thread not in already_running):
            thread.join(max(0.0, deadline - time.monotonic()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for _ in range(3):
            gc.collect()


@pytest.fixture(autouse=True)
def _collect_dead_broker_sockets() -> Iterator[None]:
    before = frozenset(threading.enumerate())
    yield
    forget_dead_broker_sockets(before)
