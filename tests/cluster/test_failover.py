"""Failover of a launcher-started cluster (real ZooKeeper, three broker processes) under acks=all load.

Topics have RF=3 and min.insync.replicas=2, so losing any one broker must cost no acknowledged record: after
each failure a consumer finds every record the producer was told about at exactly the partition and offset
of its delivery report. Failures: kill -9 of a partition leader, of the controller, the same many times
in a row (six in CI, twenty with ``SOFAKAFKA_FAILOVER_KILLS=20``), and a broker frozen (SIGSTOP) past its
ZooKeeper session timeout so that its session expires.
The killed broker is restarted each time (the frozen one comes back by itself, on a new session) and must
catch up and rejoin every ISR before the next failure.

The ZooKeeper session timeout is lowered to 6 s, and ZooKeeper's tick to 0.5 s, so that a dead broker's
ephemeral registration, the controller's only sign of its death, goes away quickly.

Security: the kill -9 of a leader also runs on a cluster whose brokers replicate over SASL_SSL with ACLs on
(``any_cluster``); ``SOFAKAFKA_FAILOVER_SECURITY=sasl_ssl`` runs every test of the module that way.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType as CKElectionType
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka import KafkaError as CKError
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from sofakafka.cli import cluster as cl
from sofakafka.client import ClientError, KafkaClient, NewTopic
from sofakafka.protocol import acl
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from sofakafka.security.client_config import client_security_from_properties
from tests.integration.conftest import api_versions_ok
from tests.integration.security_setup import make_pki

BROKERS = 3
PARTITIONS = 3
WAIT_S = 60.0
SESSION_TIMEOUT_MS = 6000
# ZooKeeper expires sessions on tick boundaries: with its default 2 s tick a dead broker's session outlives the
# timeout by up to 2 s, a cost the kill loop pays on every kill.
ZK_TICK_MS = 500


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports() -> tuple[int, int]:
    for _ in range(200):
        # Below Linux's ephemeral range (32768+), where client sockets could take a port between the check
        # and the bind.
        base = random.randrange(20000, 32768 - cl.METRICS_PORT_OFFSET - BROKERS)
        if all(_free(p) for p in [*cl.broker_ports(base, BROKERS), base + 200]):
            return base, base + 200
    raise AssertionError("no free port block")


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = WAIT_S) -> float:
    """Seconds it took; fails naming ``what`` after ``timeout`` (a bound on a hang, not a speed claim)."""
    start = time.monotonic()
    while True:
        try:
            if predicate():
                return time.monotonic() - start
        except (ClientError, OSError):
            pass
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Cluster:
    def __init__(self, state: cl.ClusterState) -> None:
        self.state = state
        # SIGSTOPped brokers: alive, but a client bootstrapping from one would wait out its request timeout.
        self.frozen: set[int] = set()

    def bootstrap(self, broker_id: int) -> str:
        a = self.state.brokers[broker_id]
        return f"{a.external_advertised}:{a.external_port}"

    @property
    def all_bootstrap(self) -> str:
        return self.state.bootstrap_servers

    def record(self, broker_id: int) -> cl.ProcessRecord:
        return next(p for p in cl.ClusterState.load(self.state.directory).processes
                    if p.name == f"broker-{broker_id}")

    def live(self) -> list[int]:
        return [b for b in self.state.brokers if self.record(b).alive()]

    def client(self) -> KafkaClient:
        return KafkaClient(",".join(self.bootstrap(b) for b in self.live() if b not in self.frozen),
                           request_timeout_ms=10_000)

    def partitions(self, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
        """partition -> (leader, isr), as a live broker sees it."""
        with self.client() as c:
            info = c.metadata([topic]).topics[topic]
        return {p: (i.leader, tuple(sorted(i.isr))) for p, i in info.partitions.items()}

    def controller(self) -> int:
        with self.client() as c:
            return c.metadata([]).controller_id

    def kill(self, broker_id: int) -> None:
        os.kill(self.record(broker_id).pid, signal.SIGKILL)
        wait_for(f"broker {broker_id} to die", lambda: not self.record(broker_id).alive(), 10)

    def stop(self, broker_id: int) -> None:
        cl.stop_processes([self.record(broker_id)], deadline_s=30)

    def restart(self, broker_id: int, topics: list[str]) -> None:
        cl.restart_broker(self.state.directory, broker_id)
        try:
            self.wait_full_isr(topics)
        except AssertionError as exc:
            # The client side only says "timed out": the brokers' logs say why (pytest's tmp dirs are
            # recycled by later runs, so they go into the failure itself).
            alive = {b: self.record(b).alive() for b in self.state.brokers}
            raise AssertionError(f"{exc}; brokers alive: {alive}\n{self.logs()}") from None

    def wait_full_isr(self, topics: list[str]) -> None:
        everyone = tuple(sorted(self.state.brokers))
        for topic in topics:
            wait_for(f"every replica back in every ISR of {topic}",
                     lambda t=topic: all(leader != -1 and isr == everyone  # type: ignore[misc]
                                         for leader, isr in self.partitions(t).values()), 2 * WAIT_S)

    def create_topic(self) -> str:
        topic = f"failover-{uuid.uuid4().hex[:8]}"
        with self.client() as c:
            result = c.create_topics([NewTopic(topic, PARTITIONS, 3, configs={"min.insync.replicas": "2"})])
        assert result[topic].error == ErrorCode.NONE, result
        self.wait_full_isr([topic])
        return topic

    def logs(self) -> str:
        out = []
        for path in sorted(self.state.directory.glob("*/*.log")):
            lines = [line for line in path.read_text(errors="replace").splitlines() if "kazoo" not in line]
            out.append(f"----- {path}\n" + "\n".join(lines[-60:]))
        return "\n".join(out)


@contextlib.contextmanager
def running_cluster(directory: Path, overrides: dict[str, str]) -> Iterator[Cluster]:
    """BROKERS brokers and a ZooKeeper under ``directory`` with this module's session timeout and
    ``overrides``; every process stopped at the end, restarted ones included."""
    base, zk = _free_ports()
    state = cl.up(cl.ClusterSpec(BROKERS, directory, base, zk, overrides={
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), **overrides}, zk_tick_ms=ZK_TICK_MS))
    try:
        yield Cluster(state)
    finally:
        cl.stop_processes(cl.ClusterState.load(directory).processes, deadline_s=15)


@contextlib.contextmanager
def kazoo_client(cluster: Cluster) -> Iterator[KazooClient]:
    """A ZooKeeper client of the cluster's own, to read znodes as Kafka's tools would."""
    client = KazooClient(hosts=f"127.0.0.1:{cluster.state.zk_port}", timeout=10)
    client.start(timeout=WAIT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


FAILOVER_OVERRIDES = {
    # Keeps a frozen follower (alive to ZooKeeper, so no controller drops it) from holding up acks=all for
    # Kafka's default 30 s; a dead one leaves the ISR through the controller once its session is gone.
    "replica.lag.time.max.ms": "6000",
    # Tests here assert where leadership is after a failure; the 300 s automatic rebalance could move it
    # back between two looks. test_auto_leader_rebalance_moves_leadership_back_by_itself covers it.
    "auto.leader.rebalance.enable": "false",
}
# Security of the module's cluster: "plaintext" in CI; SOFAKAFKA_FAILOVER_SECURITY=sasl_ssl runs the whole
# module with security on (the long form). test_kill_9_of_a_partition_leader runs both kinds either way.
MODULE_SECURITY = os.environ.get("SOFAKAFKA_FAILOVER_SECURITY", "plaintext")
SECURITY_KINDS = ("plaintext", "sasl_ssl")
ADMIN = ("admin", "admin-secret")


def sasl_ssl_overrides(directory: Path) -> dict[str, str]:
    """Brokers talk to each other over SASL_SSL (the INTERNAL listener: TLS with test certificates, a PLAIN
    login as User:admin, a super user) with Kafka's ACL authorizer on. The test's clients stay on EXTERNAL
    (PLAINTEXT, so ``User:ANONYMOUS``) and are let in by ACLs (:func:`grant_test_clients`), not as super users:
    every request of theirs is decided by the authorizer, and every replica fetch, StopReplica and controlled
    shutdown travels encrypted and logged in."""
    pki = make_pki(directory / "pki")
    return {
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{ADMIN[0]}" password="{ADMIN[1]}" user_{ADMIN[0]}="{ADMIN[1]}";',
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{ADMIN[0]}",
    }


def grant_test_clients(cluster: Cluster, ca: str) -> None:
    """ACLs for the test's clients (``User:ANONYMOUS`` on EXTERNAL): everything on every topic and group, and
    what they ask of the cluster (topic creation, elections, idempotent writes), but not CLUSTER_ACTION;
    created by the admin over a SASL_SSL INTERNAL listener and waited for on every broker."""
    security = client_security_from_properties({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                                "sasl.username": ADMIN[0], "sasl.password": ADMIN[1],
                                                "ssl.ca.location": ca})
    anyone = "User:ANONYMOUS"
    bindings = [acl.AclBinding(acl.ResourcePattern(rtype, name, acl.PatternType.LITERAL),
                               acl.AccessControlEntry(anyone, "*", op, acl.AclPermissionType.ALLOW))
                for rtype, name, ops in (
                    (acl.ResourceType.TOPIC, "*", [acl.AclOperation.ALL]),
                    (acl.ResourceType.GROUP, "*", [acl.AclOperation.ALL]),
                    (acl.ResourceType.CLUSTER, acl.CLUSTER_NAME,
                     [acl.AclOperation.CREATE, acl.AclOperation.ALTER, acl.AclOperation.DESCRIBE,
                      acl.AclOperation.IDEMPOTENT_WRITE]))
                for op in ops]

    def internal(b: int) -> str:
        a = cluster.state.brokers[b]
        return f"{a.internal_advertised}:{a.internal_port}"
    with KafkaClient(internal(1), security=security) as admin:
        for result in admin.create_acls(bindings):
            result.raise_for_error()
    for b in cluster.state.brokers:
        with KafkaClient(internal(b), security=security) as admin:
            wait_for(f"the test clients' ACLs on broker {b}",
                     lambda admin=admin: len(admin.describe_acls(acl.AclBindingFilter.any())) == len(bindings))
        # INTERNAL speaks only TLS: the inter-broker links this cluster's tests rely on are the secured ones.
        assert not api_versions_ok(cluster.state.brokers[b].internal_advertised, cluster.state.brokers[b].internal_port)


@contextlib.contextmanager
def failover_cluster(directory: Path, security: str) -> Iterator[Cluster]:
    """This module's cluster, plain or with SASL_SSL between the brokers and ACLs on."""
    assert security in SECURITY_KINDS, security
    overrides = dict(FAILOVER_OVERRIDES)
    if security == "sasl_ssl":
        overrides |= sasl_ssl_overrides(directory)
    with running_cluster(directory, overrides) as c:
        if security == "sasl_ssl":
            grant_test_clients(c, overrides["ssl.truststore.location"])
        yield c


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with failover_cluster(tmp_path_factory.mktemp("failover"), MODULE_SECURITY) as c:
        yield c


@pytest.fixture(params=SECURITY_KINDS)
def any_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """The module's cluster when it is of the asked kind, else one of that kind for this test alone."""
    if request.param == MODULE_SECURITY:
        yield request.getfixturevalue("cluster")
        return
    with failover_cluster(tmp_path / "cluster", request.param) as c:
        yield c


class LoadProducer:
    """acks=all produce from a thread until stopped; ``acked`` maps (partition, offset) to the value the
    delivery report confirmed there."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": 120_000,
            "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
            # librdkafka's network timeout (60 s by default): a request to a frozen leader is retried elsewhere
            # after this. It stays above replica.lag.time.max.ms, which an acks=all append may wait out when a
            # follower froze.
            "socket.timeout.ms": 10_000,
        })
        self._thread = threading.Thread(target=self._run, name="load-producer", daemon=True)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[(msg.partition(), msg.offset())] = msg.value()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, f"{self.topic}-{n}".encode(), partition=n % PARTITIONS,
                                      on_delivery=self._delivered)
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.005)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def __enter__(self) -> LoadProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
        self.producer.flush(120)


def assert_every_acknowledged_record_in_place(cluster: Cluster, topic: str, acked: dict[tuple[int, int], bytes]) -> None:
    ends: dict[int, int] = {}
    for (p, o) in acked:
        ends[p] = max(ends.get(p, 0), o + 1)
    found: dict[tuple[int, int], bytes] = {}
    with cluster.client() as c:
        for p, end in ends.items():
            offset = 0
            while offset < end:
                result = c.fetch(topic, p, offset, max_wait_ms=500)
                assert result.high_watermark >= end, \
                    f"{topic}-{p}: high watermark {result.high_watermark} below an acknowledged offset {end - 1}"
                for r in result.records:
                    found[(p, r.offset)] = r.value or b""
                assert result.next_offset > offset, f"{topic}-{p}: no progress at {offset}"
                offset = result.next_offset
    missing = {k: v for k, v in acked.items() if found.get(k) != v}
    assert not missing, (f"{len(missing)} of {len(acked)} acknowledged records not where acknowledged, e.g. "
                         f"{sorted(missing.items())[:5]}")


def fail_under_load(cluster: Cluster, topic: str, victim_of: Callable[[], int],
                    failure: Callable[[int], None], heal: Callable[[int], None]) -> None:
    """Produce, break broker ``victim_of()`` with ``failure``, see a leader for every partition on the
    others and the producer carry on, then check every acknowledged record and ``heal`` the victim."""
    with LoadProducer(cluster.all_bootstrap, topic) as load:
        wait_for("records acknowledged before the failure", lambda: load.count() >= 200)
        victim = victim_of()
        failure(victim)
        before = load.count()
        wait_for("a live leader other than the victim for every partition",
                 lambda: all(leader not in (victim, -1) for leader, _ in cluster.partitions(topic).values()))
        wait_for("the producer continuing after the failover", lambda: load.count() >= before + 200)
    assert load.count() > before
    assert_every_acknowledged_record_in_place(cluster, topic, dict(load.acked))
    heal(victim)
    assert_every_acknowledged_record_in_place(cluster, topic, dict(load.acked))


def test_kill_9_of_a_partition_leader(any_cluster: Cluster) -> None:
    cluster = any_cluster
    topic = cluster.create_topic()
    fail_under_load(cluster, topic, lambda: cluster.partitions(topic)[0][0], cluster.kill,
                    lambda b: cluster.restart(b, [topic]))


def test_kill_9_of_the_controller(cluster: Cluster) -> None:
    topic = cluster.create_topic()
    old = cluster.controller()
    fail_under_load(cluster, topic, lambda: old, cluster.kill, lambda b: cluster.restart(b, [topic]))
    new = cluster.controller()
    assert new != old and new in cluster.state.brokers


def test_a_broker_whose_zookeeper_session_expires_loses_no_acknowledged_record(cluster: Cluster) -> None:
    # Frozen past its session timeout: ZooKeeper expires the session and deletes its registration, the
    # controller moves its leaderships and ISR places to the others, and producers carry on. On waking, the
    # broker finds its session gone and comes back by itself, without a restart: a new session, a new
    # registration (a new broker epoch, the czxid of /brokers/ids/<id>), following what it used to lead
    # (truncating by leader epoch), back in every ISR once caught up; a preferred election then gives it its
    # leaderships back.
    topic = cluster.create_topic()
    preferred = {p: leader for p, (leader, _) in cluster.partitions(topic).items()}
    victim = preferred[1]
    pid = cluster.record(victim).pid
    zk = KazooClient(hosts=f"127.0.0.1:{cluster.state.zk_port}")

    def broker_epoch(broker_id: int) -> int | None:
        stat = zk.exists(f"/brokers/ids/{broker_id}")
        return None if stat is None else int(stat.czxid)

    old_epochs: dict[int, int] = {}

    def freeze(broker_id: int) -> None:
        epoch = broker_epoch(broker_id)
        assert epoch is not None
        old_epochs[broker_id] = epoch
        cluster.frozen.add(broker_id)
        os.kill(cluster.record(broker_id).pid, signal.SIGSTOP)

    def thaw(broker_id: int) -> None:
        with cluster.client() as c:
            wait_for("the frozen broker to leave the cluster", lambda: broker_id not in c.metadata([]).brokers)
        os.kill(cluster.record(broker_id).pid, signal.SIGCONT)
        cluster.frozen.discard(broker_id)
        wait_for("the woken broker to register again with a new broker epoch",
                 lambda: (broker_epoch(broker_id) or 0) > old_epochs[broker_id])
        try:
            cluster.wait_full_isr([topic])
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{cluster.logs()}") from None

    zk.start(WAIT_S)
    try:
        fail_under_load(cluster, topic, lambda: victim, freeze, thaw)
    finally:
        zk.stop()
        zk.close()
    assert cluster.live() == sorted(cluster.state.brokers)
    assert cluster.record(victim).pid == pid, "the broker was restarted; it had to come back by itself"

    everything = [CKTopicPartition(topic, p) for p in range(PARTITIONS)]
    results = elect_preferred(cluster, everything)
    moved = {tp.partition for tp, e in results.items() if e is None}
    assert moved == {p for p, leader in preferred.items() if leader == victim}, results
    assert all(e is None or _code(e) == CKError.ELECTION_NOT_NEEDED for e in results.values()), results
    wait_for("every partition led by its preferred replica again",
             lambda: {p: leader for p, (leader, _) in cluster.partitions(topic).items()} == preferred)
    # The woken broker leads again and serves every record acknowledged before, during and after its absence.
    with LoadProducer(cluster.all_bootstrap, topic) as load:
        wait_for("records acknowledged by the restored leaders", lambda: load.count() >= 100)
    assert_every_acknowledged_record_in_place(cluster, topic, dict(load.acked))


def elect_preferred(cluster: Cluster, partitions: list[CKTopicPartition]) -> dict[CKTopicPartition, object]:
    """A preferred election through confluent-kafka. librdkafka does not retry ElectLeaders refused with
    NOT_CONTROLLER (its metadata named a controller that has since moved, which a kill or a freeze of the
    controller causes), so do what an operator does: ask again with fresh metadata."""
    deadline = time.monotonic() + WAIT_S
    while True:
        admin = AdminClient({"bootstrap.servers": cluster.all_bootstrap})
        try:
            return dict(admin.elect_leaders(CKElectionType.PREFERRED, partitions).result(60))
        except KafkaException as exc:
            if _code(exc) != CKError.NOT_CONTROLLER or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def _code(error: object) -> int | None:
    """A per-partition outcome of AdminClient.elect_leaders: a KafkaError, or a KafkaException holding one."""
    if isinstance(error, CKError):
        return int(error.code())
    inner = getattr(error, "args", [None])[0]
    return int(inner.code()) if isinstance(inner, CKError) else None


def test_restarted_broker_rejoins_and_preferred_election_moves_leadership_back(cluster: Cluster) -> None:
    topic = cluster.create_topic()
    everything = [CKTopicPartition(topic, p) for p in range(PARTITIONS)]
    # A new topic's leaders are its preferred replicas: a preferred election has nothing to do.
    results = elect_preferred(cluster, everything)
    assert all(e is not None and _code(e) == CKError.ELECTION_NOT_NEEDED for e in results.values()), results
    preferred = {p: leader for p, (leader, _) in cluster.partitions(topic).items()}
    victim = preferred[0]

    fail_under_load(cluster, topic, lambda: victim, cluster.kill, lambda b: cluster.restart(b, [topic]))
    # Back in every ISR but leading nothing: leadership moved away when it died and stays away.
    now = cluster.partitions(topic)
    assert all(leader != victim for leader, _ in now.values())
    results = elect_preferred(cluster, everything)
    moved = {tp.partition for tp, e in results.items() if e is None}
    assert moved == {p for p, leader in preferred.items() if leader == victim}, results
    wait_for("every partition led by its preferred replica again",
             lambda: {p: leader for p, (leader, _) in cluster.partitions(topic).items()} == preferred)
    # Every acknowledged record is readable from the preferred leaders, the restarted broker included: it
    # truncated what it had to and caught up while following.
    with LoadProducer(cluster.all_bootstrap, topic) as load:
        wait_for("records acknowledged by the restored leaders", lambda: load.count() >= 100)
    assert_every_acknowledged_record_in_place(cluster, topic, dict(load.acked))


def test_elect_leaders_refuses_what_it_cannot_do(cluster: Cluster) -> None:
    topic = cluster.create_topic()
    admin = AdminClient({"bootstrap.servers": cluster.all_bootstrap})
    # Unclean election only applies to a partition without a live leader.
    results = admin.elect_leaders(CKElectionType.UNCLEAN, [CKTopicPartition(topic, 0)]).result(60)
    (error,) = results.values()
    assert error is not None and _code(error) == CKError.ELECTION_NOT_NEEDED
    results = admin.elect_leaders(CKElectionType.PREFERRED, [CKTopicPartition("no-such-topic", 0)]).result(60)
    (error,) = results.values()
    assert error is not None and _code(error) == CKError.UNKNOWN_TOPIC_OR_PART


# The kill loop's length: six in CI (every broker the victim twice, each kill caught up before the next), twenty in
# its long form, SOFAKAFKA_FAILOVER_KILLS=20 (README); tests/chaos's long form kills 100 leaders.
LEADER_KILLS = int(os.environ.get("SOFAKAFKA_FAILOVER_KILLS", "6"))


@pytest.mark.timeout(1500)
def test_leader_kills_in_a_row(cluster: Cluster) -> None:
    topic = cluster.create_topic()
    for round_ in range(LEADER_KILLS):
        # Alternate the partition so every broker is the victim in turn.
        fail_under_load(cluster, topic, lambda r=round_: cluster.partitions(topic)[r % PARTITIONS][0],
                        cluster.kill, lambda b: cluster.restart(b, [topic]))


def test_cluster_dir_records_the_restarts(cluster: Cluster) -> None:
    state = cl.ClusterState.load(cluster.state.directory)
    assert all(p.alive() for p in state.processes)
    for p in state.processes:
        pid_file = Path(p.marker).parent / ("zookeeper.pid" if p.name == "zookeeper" else "broker.pid")
        assert int(pid_file.read_text()) == p.pid


def test_auto_leader_rebalance_moves_leadership_back_by_itself(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "rebalance", {
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "2",
    }) as cluster:
        topic = cluster.create_topic()
        preferred = {p: leader for p, (leader, _) in cluster.partitions(topic).items()}
        victim = preferred[0]
        cluster.kill(victim)
        wait_for("leadership to leave the dead broker",
                 lambda: all(leader not in (victim, -1) for leader, _ in cluster.partitions(topic).values()))
        cl.restart_broker(cluster.state.directory, victim)
        # No ElectLeaders request: the controller's periodic imbalance check elects the preferred replica
        # once it is back in the ISR (one partition of three not led is above the 10% threshold).
        wait_for("every partition led by its preferred replica again",
                 lambda: {p: leader for p, (leader, _) in cluster.partitions(topic).items()} == preferred)
        cluster.wait_full_isr([topic])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_every_version_on_and_off_the_controller(cluster: Cluster, version: int) -> None:
    topic = cluster.create_topic()
    request = ElectLeadersRequest(topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=topic, partition_id=[0, 1, 0])], timeout_ms=30_000)
    with cluster.client() as c:
        controller = c.metadata([]).controller_id
        other = next(b for b in cluster.live() if b != controller)
        off = c.send(request, node_id=other, version=version)
        on = c.send(request, node_id=controller, version=version)
    assert isinstance(off, ElectLeadersResponse) and isinstance(on, ElectLeadersResponse)
    # v0 has no top-level error: NOT_CONTROLLER travels per partition there, and in both places from v1.
    assert off.error_code == (ErrorCode.NOT_CONTROLLER if version >= 1 else 0)
    assert [(r.topic, sorted(p.partition_id for p in r.partition_result)) for r in off.replica_election_results] \
        == [(topic, [0, 1])]
    assert {p.error_code for r in off.replica_election_results for p in r.partition_result} == {ErrorCode.NOT_CONTROLLER}
    # On the controller, a preferred election (v0's only kind, v1+'s type 0) of preferred leaders: nothing to do.
    assert on.error_code == 0
    assert {(p.partition_id, p.error_code) for r in on.replica_election_results for p in r.partition_result} \
        == {(0, ErrorCode.ELECTION_NOT_NEEDED), (1, ErrorCode.ELECTION_NOT_NEEDED)}
