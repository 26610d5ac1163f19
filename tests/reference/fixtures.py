"""pytest fixtures around Apache Kafka's own code; ``tests/conftest.py`` imports them for every test.

Module-scoped wherever a process is involved: a module pays one reference broker's start and one JVM per
client version, whatever number of tests it has; tests/interop's modules share one pair of brokers for the
session (:func:`interop_brokers`). Everything started here is killed at the end of its scope.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.conftest import ZooKeeperServer, start_zookeeper
from tests.integration.conftest import BrokerProcess, free_port
from tests.reference.java import CLIENT_VERSIONS, ScenarioJVM, ToolJVM, require_java
from tests.reference.kafka import (
    SHARED_SETTINGS,
    ReferenceKafka,
    SecuredBroker,
    secure_settings,
    unique_chroot,
)


@pytest.fixture(scope="session")
def reference_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """The ZooKeeper every reference Kafka of the session uses (each under its own chroot)."""
    require_java()
    server = start_zookeeper(tmp_path_factory.mktemp("reference-zookeeper"), free_port())
    try:
        yield server
    finally:
        server.stop()


@dataclass
class ComparedBrokers:
    """A sofakafka broker and Apache Kafka 2.6, both with :data:`SHARED_SETTINGS`: the two sides of a comparison."""

    sofakafka: BrokerProcess
    kafka: ReferenceKafka

    @property
    def bootstraps(self) -> dict[str, str]:
        """Bootstrap addresses by broker name, sofakafka first."""
        return {"sofakafka": self.sofakafka.bootstrap, "kafka": self.kafka.bootstrap}

    def kill(self) -> None:
        self.sofakafka.kill()
        self.kafka.kill()


@contextlib.contextmanager
def compared_brokers_running(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer,
                             name: str) -> Iterator[ComparedBrokers]:
    """Start both brokers at once (each start is mostly waiting) and kill both at the end."""
    sofakafka = BrokerProcess(tmp_path_factory.mktemp(f"sofakafka-{name}"), dict(SHARED_SETTINGS))
    kafka = ReferenceKafka(tmp_path_factory.mktemp(f"reference-kafka-{name}"), zookeeper.hosts + unique_chroot(name))
    pair = ComparedBrokers(sofakafka, kafka)
    try:
        with ThreadPoolExecutor(2) as pool:
            for started in [pool.submit(sofakafka.start), pool.submit(kafka.start)]:
                started.result()
        yield pair
    finally:
        pair.kill()


@pytest.fixture(scope="session")
def interop_brokers(tmp_path_factory: pytest.TempPathFactory,
                    reference_zookeeper: ZooKeeperServer) -> Iterator[ComparedBrokers]:
    """The pair tests/interop shares for the whole session (its modules name their topics and groups apart;
    each module's first test pays the start once for all)."""
    with compared_brokers_running(tmp_path_factory, reference_zookeeper, "interop") as pair:
        yield pair


@pytest.fixture(scope="module")
def compared_brokers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                     reference_zookeeper: ZooKeeperServer) -> Iterator[ComparedBrokers]:
    """A pair of this module's own, fresh (tests/conformance compares whole-broker answers: every topic, every
    group)."""
    with compared_brokers_running(tmp_path_factory, reference_zookeeper,
                                  request.module.__name__.rsplit(".", 1)[-1]) as pair:
        yield pair


@pytest.fixture(scope="module")
def reference_kafka(compared_brokers: ComparedBrokers) -> ReferenceKafka:
    """Apache Kafka 2.6 (kafka_2.13 2.6.3), one broker with :data:`SHARED_SETTINGS`, for this module."""
    return compared_brokers.kafka


@pytest.fixture(scope="module")
def secured_reference_kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, reference_zookeeper: ZooKeeperServer
) -> Iterator[SecuredBroker]:
    """Apache Kafka 2.6 with SASL (PLAIN, SCRAM) and its ACL authorizer on (:func:`secure_settings`)."""
    zk_connect = reference_zookeeper.hosts + unique_chroot(request.module.__name__.rsplit(".", 1)[-1] + "-secured")
    kafka = ReferenceKafka(tmp_path_factory.mktemp("secured-reference-kafka"), zk_connect)
    sasl_port = free_port()
    kafka.settings.update(secure_settings(kafka.host, kafka.port, sasl_port))
    kafka.start()
    try:
        yield SecuredBroker("kafka", kafka.host, sasl_port, kafka.port, zk_connect)
    finally:
        kafka.kill()


def _secured_sofakafka(directory: Path, zk_connect: str | None = None) -> Iterator[SecuredBroker]:
    settings = dict(SHARED_SETTINGS)
    if zk_connect is not None:
        settings |= {"zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": "6000"}
    broker = BrokerProcess(directory, settings)
    sasl_port = free_port()
    broker.overrides.update(secure_settings(broker.host, broker.port, sasl_port))
    broker.start()
    try:
        yield SecuredBroker("sofakafka", broker.host, sasl_port, broker.port, zk_connect)
    finally:
        broker.kill()


@pytest.fixture(scope="module")
def secured_sofakafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    """sofakafka with the same security settings as :func:`secured_reference_kafka` (users and ACLs in its
    embedded store)."""
    yield from _secured_sofakafka(tmp_path_factory.mktemp("secured-sofakafka"))


@pytest.fixture(scope="module")
def secured_zookeeper_sofakafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, reference_zookeeper: ZooKeeperServer
) -> Iterator[SecuredBroker]:
    """:func:`secured_sofakafka_broker` keeping its metadata, users and ACLs in ZooKeeper (the reference brokers'
    server, a chroot of its own), where Kafka 2.6's ``kafka-configs --zookeeper`` writes SCRAM users."""
    zk_connect = reference_zookeeper.hosts + unique_chroot(request.module.__name__.rsplit(".", 1)[-1] + "-sofakafka")
    yield from _secured_sofakafka(tmp_path_factory.mktemp("secured-zookeeper-sofakafka"), zk_connect)


@pytest.fixture(scope="module")
def sofakafka_broker(compared_brokers: ComparedBrokers) -> BrokerProcess:
    """sofakafka with the same :data:`SHARED_SETTINGS` as the reference broker, for this module."""
    return compared_brokers.sofakafka


# Scenarios one scenario JVM runs at a time: they mostly wait on brokers (joins, long polls, acks), so a few
# together cost little more CPU than one, on a 2-core machine too.
SCENARIO_PARALLELISM = 4


class ScenarioJVMs:
    """The session's scenario JVMs, one per client version, started on first use."""

    def __init__(self, log_dir: Path, with_streams: bool = False, parallel: int = SCENARIO_PARALLELISM) -> None:
        self.log_dir = log_dir
        self.with_streams = with_streams
        self.parallel = parallel
        self._jvms: dict[str, ScenarioJVM] = {}

    def __getitem__(self, client: str) -> ScenarioJVM:
        assert client in CLIENT_VERSIONS, f"{client!r} is not one of {CLIENT_VERSIONS}"
        jvm = self._jvms.get(client)
        if jvm is None or not jvm.alive():
            jvm = ScenarioJVM(client, self.log_dir / f"scenarios-{client}.log",
                              with_streams=self.with_streams and client == "clients-2.6", parallel=self.parallel)
            self._jvms[client] = jvm
        return jvm

    def close(self) -> None:
        for jvm in self._jvms.values():
            jvm.close()


@pytest.fixture(scope="session")
def scenario_jvms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioJVMs]:
    """``scenario_jvms["clients-2.6"].run("admin.topics", bootstrap, topic=...)``: Java scenarios, one JVM per
    client version for the whole session (a scenario keeps nothing between runs; Streams is on the 2.6 one's
    classpath)."""
    require_java()
    jvms = ScenarioJVMs(tmp_path_factory.mktemp("scenario-jvms"), with_streams=True)
    try:
        yield jvms
    finally:
        jvms.close()


class ToolRunner:
    """The module's tool JVM (started on first use, and again should a tool have brought it down)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._jvm: ToolJVM | None = None

    def __call__(self, main_class: str, args: Sequence[str], *, timeout: float = 120.0, input: str | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        if self._jvm is None or not self._jvm.alive():
            self._jvm = ToolJVM(self.log_dir / "tools.log")
        return self._jvm.run(main_class, args, timeout=timeout, input=input, check=check)

    def close(self) -> None:
        if self._jvm is not None:
            self._jvm.close()


@pytest.fixture(scope="module")
def kafka_tool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """``kafka_tool("kafka.admin.TopicCommand", ["--bootstrap-server", b, "--list"])``: one of Kafka 2.6's tools
    run as its bin/ script runs it (its main class on kafka_2.13's classpath), in the module's one tool JVM
    (:class:`ToolJVM`); its exit code checked unless ``check=False``. ``run_main`` runs a tool in a JVM of its
    own, for what must not share one."""
    require_java()
    runner = ToolRunner(tmp_path_factory.mktemp("tool-jvm"))
    try:
        yield runner
    finally:
        runner.close()
