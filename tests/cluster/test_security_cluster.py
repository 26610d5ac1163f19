"""Three brokers on ZooKeeper with SASL_SSL between them and ACLs on.

The brokers log in to each other with SCRAM-SHA-512 as ``User:broker`` (a super user), whose credential is
written into ZooKeeper before they start, as an operator does with kafka-configs --zookeeper. Replication,
controlled shutdown and StopReplica all travel over the SASL_SSL inter-broker listener. A user, an ACL or a
delegation token (its renewal, its expiry) added through one broker is in force on the others as soon as their
notification watch fires (the tests wait with a bound and print how long it took), and a kill -9 of a partition leader loses no acknowledged record.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from sofakafka.client import DelegationToken, KafkaClient, NewTopic
from sofakafka.client.errors import AuthenticationError
from sofakafka.client.security import ClientSecurity
from sofakafka.controller.zookeeper import ZooKeeperMetadataStore
from sofakafka.protocol import acl
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.fetch import FetchRequest, FetchResponse
from sofakafka.security.client_config import client_security_from_properties
from sofakafka.security.scram import make_credential
from sofakafka.security.store import SecurityMetadata
from tests.cluster.conftest import ZooKeeperServer
from tests.integration.conftest import BrokerProcess, free_port
from tests.integration.security_setup import make_pki

WAIT_S = 60.0  # bounds, not timing assertions
JAAS_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret";')
JAAS_BROKER = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
               'username="broker" password="broker-secret";')


def admin_security() -> ClientSecurity:
    return client_security_from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                           "sasl.username": "admin", "sasl.password": "admin-secret"})


def scram(user: str, password: str) -> ClientSecurity:
    return client_security_from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                                           "sasl.username": user, "sasl.password": password})


@pytest.fixture
def secure_cluster(tmp_path: Path, zookeeper: ZooKeeperServer, zk_chroot: str,
                   zk_broker_factory: Callable[..., BrokerProcess]) -> Iterator[list[BrokerProcess]]:
    pki = make_pki(tmp_path / "pki")
    store = ZooKeeperMetadataStore.connect(zookeeper.hosts, zk_chroot, session_timeout=10)
    try:
        # The brokers' own login, in ZooKeeper before they start (kafka-configs --zookeeper's way).
        SecurityMetadata(store).set_scram_credential("broker", "SCRAM-SHA-512",
                                                     make_credential("SCRAM-SHA-512", "broker-secret"))
    finally:
        store.close()
    brokers = []
    for i in range(3):
        b = zk_broker_factory(start=False, name=f"secure{i}")
        ssl_port = free_port()
        b.overrides.update({
            "broker.id": str(i),
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{b.port},SASL_SSL://127.0.0.1:{ssl_port}",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.jaas.config": JAAS_PLAIN,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": JAAS_BROKER,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server,
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:broker;User:admin",
            "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0", "replica.lag.time.max.ms": "6000",
            "auto.leader.rebalance.enable": "false", "controlled.shutdown.retry.backoff.ms": "500",
            "delegation.token.master.key": "cluster-token-master-key",
        })
        brokers.append(b)
    for b in brokers:
        b.start()
    yield brokers


def wait_until(what: str, check: Callable[[], bool]) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < WAIT_S, f"{what}: not within {WAIT_S} s"
        time.sleep(0.02)
    return time.monotonic() - started


def can_log_in(broker: BrokerProcess, user: str, password: str) -> bool:
    try:
        with KafkaClient(broker.bootstrap, security=scram(user, password), request_timeout_ms=5000) as c:
            c.metadata([])
        return True
    except AuthenticationError:
        return False


def describable(broker: BrokerProcess, user: str, password: str, topic: str) -> bool:
    with KafkaClient(broker.bootstrap, security=scram(user, password), request_timeout_ms=5000) as c:
        return c.metadata([topic]).topics[topic].error == ErrorCode.NONE


def token_security(token: DelegationToken) -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", token.token_id,
                          base64.b64encode(token.hmac).decode(), token_auth=True)


def token_logs_in(broker: BrokerProcess, token: DelegationToken) -> bool:
    try:
        with KafkaClient(broker.bootstrap, security=token_security(token), request_timeout_ms=5000) as c:
            c.metadata([])
        return True
    except AuthenticationError:
        return False


def test_users_acls_and_tokens_added_through_one_broker_are_in_force_on_all(
        secure_cluster: list[BrokerProcess]) -> None:
    b0, b1, b2 = secure_cluster
    with KafkaClient(b0.bootstrap, security=admin_security()) as admin:
        assert len(admin.metadata().brokers) == 3
        admin.incremental_alter_configs({(100, "carol"): [
            ("SCRAM-SHA-256", 0, make_credential("SCRAM-SHA-256", "carol-pw").to_kafka_string())]})[0].raise_for_error()
        took = [wait_until(f"carol on broker {b.overrides['broker.id']}", lambda b=b: can_log_in(b, "carol", "carol-pw"))
                for b in (b1, b2)]
        print(f"user visible on the other brokers after {max(took):.3f} s")
        admin.create_topics([NewTopic("audit", 1, 3)])
        assert not describable(b2, "carol", "carol-pw", "audit")
        binding = acl.AclBinding(acl.ResourcePattern(acl.ResourceType.TOPIC, "audit", acl.PatternType.LITERAL),
                             acl.AccessControlEntry("User:carol", "*", acl.AclOperation.DESCRIBE, acl.AclPermissionType.ALLOW))
        admin.create_acls([binding])[0].raise_for_error()
        took = [wait_until("the ACL elsewhere", lambda b=b: describable(b, "carol", "carol-pw", "audit"))
                for b in (b1, b2)]
        print(f"ACL in force on the other brokers after {max(took):.3f} s")
    # A delegation token carol makes on broker 0 logs in on the others as carol (her ACL holds), at once; a renewal
    # through broker 1 and the expiry through broker 2 reach the others the same way.
    with KafkaClient(b0.bootstrap, security=scram("carol", "carol-pw")) as carol:
        token = carol.create_delegation_token([], 3_600_000)
    took = [wait_until(f"the token on broker {b.overrides['broker.id']}", lambda b=b: token_logs_in(b, token))
            for b in (b1, b2)]
    print(f"token usable on the other brokers after {max(took):.3f} s")
    with KafkaClient(b1.bootstrap, security=token_security(token)) as as_token:
        assert as_token.metadata(["audit"]).topics["audit"].error == ErrorCode.NONE
    with KafkaClient(b1.bootstrap, security=scram("carol", "carol-pw")) as carol:
        expiry = carol.renew_delegation_token(token.hmac, 600_000)
    with KafkaClient(b2.bootstrap, security=scram("carol", "carol-pw")) as carol:
        wait_until("the renewal on broker 2", lambda: [t.expiry_timestamp for t in carol.describe_delegation_tokens()]
                   == [expiry])
        carol.expire_delegation_token(token.hmac, -1)
    took = [wait_until(f"the expiry on broker {b.overrides['broker.id']}", lambda b=b: not token_logs_in(b, token))
            for b in (b0, b1)]
    print(f"token refused on the other brokers after {max(took):.3f} s")


def test_replication_and_failover_over_sasl_ssl(secure_cluster: list[BrokerProcess]) -> None:
    with KafkaClient(secure_cluster[0].bootstrap, security=admin_security()) as admin:
        admin.create_topics([NewTopic("payments", 1, 3)])
        wait_until("ISR of 3 (followers fetch over SASL_SSL)",
                   lambda: len(admin.metadata(["payments"]).topics["payments"].partitions[0].isr) == 3)
        leader = admin.metadata(["payments"]).topics["payments"].partitions[0].leader
    conf: dict[str, Any] = {"bootstrap.servers": ",".join(b.bootstrap for b in secure_cluster),
                            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                            "sasl.username": "admin", "sasl.password": "admin-secret"}
    acked: list[bytes] = []

    def produce(values: list[bytes]) -> None:
        p = Producer({**conf, "acks": "all", "message.timeout.ms": 60000})
        for v in values:
            p.produce("payments", v, on_delivery=lambda err, m: acked.append(m.value()) if err is None else None)
        assert p.flush(WAIT_S) == 0

    got: list[bytes] = []

    def consume(bootstrap: list[BrokerProcess], count: int) -> None:
        c = Consumer({**conf, "bootstrap.servers": ",".join(b.bootstrap for b in bootstrap), "group.id": "audit",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["payments"])
        deadline = time.monotonic() + WAIT_S
        wanted = len(got) + count
        try:
            while len(got) < wanted and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.value())
            c.commit(asynchronous=False)
        finally:
            c.close()

    produce([f"before-{i}".encode() for i in range(50)])
    consume(secure_cluster, 50)  # the group's offsets topic is created while all three brokers are up
    secure_cluster[leader].kill()  # kill -9 the leader
    survivors = [b for i, b in enumerate(secure_cluster) if i != leader]
    with KafkaClient(survivors[0].bootstrap, security=admin_security()) as admin:
        wait_until("a new leader", lambda: admin.metadata(["payments"]).topics["payments"].partitions[0].leader
                   not in (-1, leader))
    produce([f"after-{i}".encode() for i in range(50)])
    consume(survivors, 50)  # the same group goes on from its committed offset, on the survivors
    assert len(acked) == 100 and sorted(got) == sorted(acked)
    for b in secure_cluster:
        assert "Traceback" not in b.log_text(), b.log_tail()


def test_a_broker_without_the_inter_broker_credentials_cannot_replicate(secure_cluster: list[BrokerProcess]) -> None:
    """CLUSTER_ACTION guards follower fetches: a SASL user that is not a super user gets
    TOPIC_AUTHORIZATION_FAILED for a replica fetch, as from Kafka."""
    b0 = secure_cluster[0]
    with KafkaClient(b0.bootstrap, security=admin_security()) as admin:
        admin.incremental_alter_configs({(100, "mallory"): [
            ("SCRAM-SHA-256", 0, make_credential("SCRAM-SHA-256", "m-pw").to_kafka_string())]})[0].raise_for_error()
    wait_until("mallory", lambda: can_log_in(b0, "mallory", "m-pw"))
    with KafkaClient(b0.bootstrap, security=scram("mallory", "m-pw")) as c:
        conn = c.any_connection()
        request = FetchRequest(replica_id=1, max_wait=0, min_bytes=0, topics=[FetchRequest.FetchableTopic(
            name="payments-x", fetch_partitions=[FetchRequest.FetchableTopic.FetchPartition(partition_index=0,
                                                                                           max_bytes=1024)])])
        response = conn.send(request, 4)
        assert isinstance(response, FetchResponse)
        codes = {p.error_code for t in response.topics for p in t.partitions}
        assert codes == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_transaction_markers_and_verification_travel_over_sasl_ssl(secure_cluster: list[BrokerProcess]) -> None:
    """A transaction over three partitions led by three brokers: the coordinator's markers and the leaders'
    partition verification go to the other brokers over the SASL_SSL inter-broker listener, logged in as the
    broker (WriteTxnMarkers needs CLUSTER_ACTION), so a commit is visible to read_committed and an abort is not."""
    with KafkaClient(secure_cluster[0].bootstrap, security=admin_security()) as admin:
        admin.create_topics([NewTopic("ledger", 3, 1)])
        wait_until("three partition leaders", lambda: all(
            p.leader >= 0 for p in admin.metadata(["ledger"]).topics["ledger"].partitions.values()))
        leaders = {p.leader for p in admin.metadata(["ledger"]).topics["ledger"].partitions.values()}
    assert leaders == {0, 1, 2}, leaders  # so some partition is always led away from the coordinator
    conf: dict[str, Any] = {"bootstrap.servers": ",".join(b.bootstrap for b in secure_cluster),
                            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                            "sasl.username": "admin", "sasl.password": "admin-secret"}
    p = Producer({**conf, "transactional.id": "ledger-writer"})
    p.init_transactions(WAIT_S)
    for outcome in ("commit", "abort", "commit"):
        p.begin_transaction()
        for partition in range(3):
            p.produce("ledger", f"{outcome}-{partition}".encode(), partition=partition)
        if outcome == "commit":
            p.commit_transaction(WAIT_S)
        else:
            p.flush(WAIT_S)
            p.abort_transaction(WAIT_S)
    c = Consumer({**conf, "group.id": "ledger-reader", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": True})
    got: list[bytes] = []
    at_end: set[int] = set()
    try:
        c.subscribe(["ledger"])
        deadline = time.monotonic() + WAIT_S
        while len(at_end) < 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            got.append(m.value())
    finally:
        c.close()
    assert len(at_end) == 3, f"not every partition read to its end: {at_end}"
    assert sorted(got) == sorted([b"commit-0", b"commit-1", b"commit-2"] * 2)
    for b in secure_cluster:
        assert "Traceback" not in b.log_text(), b.log_tail()
