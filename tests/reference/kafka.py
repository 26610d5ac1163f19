"""Apache Kafka 2.6 as a real process: the reference broker the interop and conformance tests compare against.

``ReferenceKafka`` runs ``java -cp interop/java/target/lib/kafka-2.6/* kafka.Kafka server.properties`` on a free
loopback port, against a test ZooKeeper (the one ``tests/cluster`` starts, Debian's), under a chroot of its own.
Kafka 2.6.3 runs on Java 17 as it is (no ``--add-opens`` needed; checked: start, topics, groups, tools); a
different JDK can be chosen with ``$SOFAKAFKA_JAVA``.

The settings both brokers get in a comparison are in :data:`SHARED_SETTINGS`: what differs between the two
processes is then the implementation, not the configuration.
"""

from __future__ import annotations

import atexit
import itertools
import socket
import struct
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from sofakafka.cli.cluster import BrokerAddress, broker_properties
from sofakafka.client import ClientError, KafkaClient
from tests.integration.conftest import api_versions_ok, free_port
from tests.reference.java import INTEROP_JAVA, QUICK_JVM_FLAGS, classpath, require_java

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
LOG4J_BROKER = INTEROP_JAVA / "log4j-broker.properties"

# Given to Apache Kafka and to sofakafka alike when a test compares them: one broker's worth of replication
# for the internal topics, no initial rebalance delay (it only slows tests down), few offsets partitions.
SHARED_SETTINGS: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}

# A broker with security on, for the tests that compare authentication and authorization (issue 12): a
# PLAINTEXT listener (its readiness probe; ANONYMOUS there may do nothing) and a SASL_PLAINTEXT one that clients
# and the inter-broker link use, PLAIN users from the listener's JAAS config (admin, a super user, and alice),
# SCRAM users from the metadata tree, Kafka's ACL authorizer. Kafka's broker reads JAAS per listener and
# mechanism (it ignores a bare sasl.jaas.config), so both brokers get that form.
SECURE_ADMIN = ("admin", "admin-secret")
SECURE_USER = ("alice", "alice-secret")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SECURE_MASTER_KEY = "conformance-delegation-token-master-key"


def secure_settings(host: str, plain_port: int, sasl_port: int) -> dict[str, str]:
    listeners = f"PLAINTEXT://{host}:{plain_port},SASL_PLAINTEXT://{host}:{sasl_port}"
    return {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{SECURE_ADMIN[0]}",
        # Delegation tokens on (KIP-48): both brokers compute a token's HMAC from the same secret.
        "delegation.token.master.key": SECURE_MASTER_KEY,
        # The scenarios' records carry fixed 2020 time stamps, long past the default 7 days: Kafka's first
        # retention pass (30 s after its start, whatever log.retention.check.interval.ms says) would delete them,
        # active segment and all, and move the log start offset under a running comparison (Produce v5+ answers
        # it) depending only on when the pass falls. Nothing here is about retention.
        "log.retention.ms": "-1",
    }


@dataclass(frozen=True)
class SecuredBroker:
    """Where a secured broker of a comparison listens: ``sasl_port`` for clients, ``plain_port`` answers
    ApiVersions and Metadata without topics only; ``zk_connect`` is set when the broker keeps its metadata in
    ZooKeeper (always for Apache Kafka): users are written there by Kafka's own ConfigCommand."""

    name: str
    host: str
    sasl_port: int
    plain_port: int
    zk_connect: str | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_port}"


_LIVE: list[ReferenceKafka] = []
_chroots = itertools.count()


def unique_chroot(name: str) -> str:
    clean = "".join(c if c.isalnum() else "-" for c in name)[:60]
    return f"/reference-{clean}-{next(_chroots)}"


class ReferenceKafka:
    """One Apache Kafka 2.6 broker process; several with one ``zk_connect`` (same chroot) form a cluster."""

    def __init__(self, base_dir: Path, zk_connect: str, *, broker_id: int = 0,
                 overrides: dict[str, str] | None = None, heap: str = "512m",
                 jvm_flags: tuple[str, ...] | None = None, port: int | None = None) -> None:
        """``port`` is the one clients bootstrap from (a free one by default); ``overrides`` may set
        ``listeners`` of their own (several listeners, as a cluster has) as long as one is on ``port``."""
        self.base_dir = base_dir
        self.broker_id = broker_id
        self.zk_connect = zk_connect
        self.host = "127.0.0.1"
        self.port = port if port is not None else free_port()
        self.data_dir = base_dir / "kafka-logs"
        self.log_path = base_dir / "kafka.log"
        self.settings: dict[str, str] = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            "zookeeper.connect": zk_connect,
            "zookeeper.session.timeout.ms": "6000",
            **SHARED_SETTINGS,
        }
        self.settings.update(overrides or {})
        self.heap = heap
        self.jvm_flags = jvm_flags
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        java = require_java()
        flags = self.jvm_flags if self.jvm_flags is not None else (
            *[f for f in QUICK_JVM_FLAGS if not f.startswith("-Xmx")], f"-Xmx{self.heap}")
        return [java, *flags, "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{LOG4J_BROKER}",
                f"-Dkafka.logs.dir={self.base_dir}", "-cp", classpath("kafka-2.6"), "kafka.Kafka",
                str(self.base_dir / "server.properties")]

    def start(self) -> ReferenceKafka:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.base_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "server.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in self.settings.items()))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), cwd=self.base_dir, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if self not in _LIVE:
            _LIVE.append(self)
        self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Kafka opens its request processing last in start-up, so ApiVersions answering means started; then
        Metadata must name a controller (the embedded election has run)."""
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"Apache Kafka exited with {self.proc.returncode}:\n{self.log_tail()}")
            if api_versions_ok(self.host, self.port) and self.controller_id() >= 0:
                return
            time.sleep(0.2)
        self.kill()
        raise AssertionError(f"Apache Kafka did not start within {START_TIMEOUT_S}s:\n{self.log_tail()}")

    def controller_id(self) -> int:
        """The controller id Metadata v1 names (-1 when none yet or on any error)."""
        body = struct.pack(">hhih", 3, 1, 11, 3) + b"ref" + struct.pack(">i", 0)  # no topics
        try:
            with socket.create_connection((self.host, self.port), timeout=2) as s:
                s.sendall(struct.pack(">i", len(body)) + body)
                head = s.recv(4, socket.MSG_WAITALL)
                (size,) = struct.unpack(">i", head)
                resp = s.recv(size, socket.MSG_WAITALL)
        except (OSError, struct.error):
            return -1
        pos = 4  # correlation id
        (brokers,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        for _ in range(brokers):
            pos += 4
            (hlen,) = struct.unpack_from(">h", resp, pos)
            pos += 2 + hlen + 4
            (rlen,) = struct.unpack_from(">h", resp, pos)
            pos += 2 + max(rlen, 0)
        (controller,) = struct.unpack_from(">i", resp, pos)
        return int(controller)

    def stop(self) -> int:
        """SIGTERM: Kafka's controlled shutdown and clean close of its logs."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        self.proc.terminate()
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


@atexit.register
def _kill_every_reference_broker() -> None:
    for k in _LIVE:
        k.kill()


class ReferenceCluster:
    """Apache Kafka 2.6 brokers 1..N on one ZooKeeper chroot, each with the server.properties ``sofakafka cluster
    up`` writes for a sofakafka broker of an N-broker cluster (sofakafka/cli/cluster.py's template: INTERNAL and
    EXTERNAL listeners, RF 3 and min.insync.replicas 2 for three brokers), so the two clusters differ in the
    implementation only. Clients bootstrap from the EXTERNAL listeners."""

    def __init__(self, base_dir: Path, zk_connect: str, brokers: int = 3,
                 overrides: dict[str, str] | None = None) -> None:
        self.brokers: list[ReferenceKafka] = []
        for broker_id in range(1, brokers + 1):
            address = BrokerAddress("127.0.0.1", "127.0.0.1", free_port(), "127.0.0.1", "127.0.0.1", free_port())
            props = broker_properties(broker_id, brokers, address, zookeeper_connect=zk_connect,
                                      log_dir=str(base_dir / f"broker-{broker_id}" / "kafka-logs"),
                                      overrides=overrides)
            self.brokers.append(ReferenceKafka(base_dir / f"broker-{broker_id}", zk_connect, broker_id=broker_id,
                                               overrides=props, port=address.external_port))

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> ReferenceCluster:
        """Every broker at once (a Kafka start is mostly waiting), each waited for, then until each one's
        Metadata lists all of them (before that, a topic with RF 3 may be refused)."""
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            for started in [pool.submit(b.start) for b in self.brokers]:
                started.result()
        wanted = {b.broker_id for b in self.brokers}
        deadline = time.monotonic() + START_TIMEOUT_S
        for b in self.brokers:
            while True:
                try:
                    with KafkaClient(b.bootstrap, request_timeout_ms=5000) as client:
                        if set(client.metadata().brokers) == wanted:
                            break
                except (ClientError, OSError):
                    pass
                if time.monotonic() > deadline:
                    self.kill()
                    raise AssertionError(f"Kafka broker {b.broker_id} did not see brokers {sorted(wanted)} in time")
                time.sleep(0.2)
        return self

    def kill(self) -> None:
        for b in self.brokers:
            b.kill()
