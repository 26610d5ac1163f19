"""pytest fixtures around Apache Kafka's own code; ``tests/conftest.py`` imports them for every test.

Module-scoped wherever a process is involved: a module pays one reference broker's start and one JVM per
client version, whatever number of tests it has. Everything started here is killed at the end of its scope.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import ZooKeeperServer, start_zookeeper
from tests.integration.conftest import BrokerProcess, free_port
from tests.reference.java import CLIENT_VERSIONS, ScenarioJVM, require_java, run_main
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


@pytest.fixture(scope="module")
def reference_kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, reference_zookeeper: ZooKeeperServer
) -> Iterator[ReferenceKafka]:
    """Apache Kafka 2.6 (kafka_2.13 2.6.3), one broker with :data:`SHARED_SETTINGS`, for this module."""
    chroot = unique_chroot(request.module.__name__.rsplit(".", 1)[-1])
    kafka = ReferenceKafka(tmp_path_factory.mktemp("reference-kafka"), reference_zookeeper.hosts + chroot)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.kill()


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
def sofakafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """sofakafka with the same :data:`SHARED_SETTINGS` as the reference broker, for this module."""
    broker = BrokerProcess(tmp_path_factory.mktemp("sofakafka"), dict(SHARED_SETTINGS)).start()
    try:
        yield broker
    finally:
        broker.kill()


class ScenarioJVMs:
    """The module's scenario JVMs, one per client version, started on first use."""

    def __init__(self, log_dir: Path, with_streams: bool = False) -> None:
        self.log_dir = log_dir
        self.with_streams = with_streams
        self._jvms: dict[str, ScenarioJVM] = {}

    def __getitem__(self, client: str) -> ScenarioJVM:
        assert client in CLIENT_VERSIONS, f"{client!r} is not one of {CLIENT_VERSIONS}"
        jvm = self._jvms.get(client)
        if jvm is None or jvm.proc.poll() is not None:
            jvm = ScenarioJVM(client, self.log_dir / f"scenarios-{client}.log",
                              with_streams=self.with_streams and client == "clients-2.6")
            self._jvms[client] = jvm
        return jvm

    def close(self) -> None:
        for jvm in self._jvms.values():
            jvm.close()


@pytest.fixture(scope="module")
def scenario_jvms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioJVMs]:
    """``scenario_jvms["clients-2.6"].run("admin.topics", bootstrap, topic=...)``: Java scenarios, one JVM per
    client version for the whole module (Streams is on the 2.6 one's classpath)."""
    require_java()
    jvms = ScenarioJVMs(tmp_path_factory.mktemp("scenario-jvms"), with_streams=True)
    try:
        yield jvms
    finally:
        jvms.close()


@pytest.fixture
def kafka_tool() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``kafka_tool("kafka.admin.TopicCommand", "--bootstrap-server", b, "--list")``: one of Kafka 2.6's tools
    run as its bin/ script runs it (java -cp kafka_2.13's classpath), its exit code checked unless
    ``check=False``."""
    require_java()
    return run_main
