"""Stock clients against a broker with TLS, SASL and ACLs on (one broker for the whole module).

kafka-python, confluent-kafka, aiokafka and kcat each log in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over
SASL_PLAINTEXT and SASL_SSL, and over SSL with and without a client certificate, then produce, consume with a
group and make an admin call. Users are created with ``sofakafka users add`` and ACLs with ``sofakafka acls add``
(the admin logged in through ``--command-config``). Failed logins (wrong password, unknown user, a mechanism the
broker does not offer, a certificate it does not trust) fail cleanly on the client, with the reason in the
broker's log and no traceback. Then the end-to-end ACL case of issue 12: a user with only READ on ``orders-``
topics and its group.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CNewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KNewTopic
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

from sofakafka.client import AuthenticationError, ClientError, KafkaClient
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.security.client_config import client_security_from_properties
from tests.integration.security_setup import (
    ADMIN,
    PLAIN_USER,
    SecureBroker,
    running_secure_broker,
    used_by_this_test,
)

SCRAM_USERS = {"SCRAM-SHA-256": ("user256", "pw-256"), "SCRAM-SHA-512": ("user512", "pw-512")}
USERS = {"PLAIN": PLAIN_USER, **SCRAM_USERS}
TEST_PRINCIPALS = ["User:plainuser", "User:user256", "User:user512", "User:ANONYMOUS", "User:certuser"]
READER = ("reader", "reader-pw")
WAIT_S = 30.0  # bounds on waiting, not timing assertions


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    with running_secure_broker(tmp_path_factory.mktemp("secure")) as sb:
        for mechanism, (name, password) in SCRAM_USERS.items():
            sb.sofakafka("users", "add", name, "--password", password, "--mechanism", mechanism)
        sb.sofakafka("users", "add", READER[0], "--password", READER[1])
        principals = [arg for p in TEST_PRINCIPALS for arg in ("--allow-principal", p)]
        sb.sofakafka("acls", "add", *principals, "--operation", "All", "--topic", "sec-", "--group", "sec-",
                     "--resource-pattern-type", "PREFIXED")
        sb.sofakafka("acls", "add", *principals, "--operation", "IdempotentWrite", "--cluster")
        yield sb


@pytest.fixture
def sb(secure: SecureBroker) -> Iterator[SecureBroker]:
    with used_by_this_test(secure):
        yield secure


def fresh(prefix: str = "sec-") -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


# ------------------------------------------------------------------------------------ per-client round trips
# Each takes the broker, a listener, and the login (mechanism, user, password, client certificate or None);
# it creates a topic through the client's admin API, produces three records, consumes them in a group.

Login = tuple[str | None, str | None, str | None, bool]
RECORDS = [b"one", b"two", b"three"]


def confluent_conf(sb: SecureBroker, listener: str, login: Login) -> dict[str, Any]:
    mechanism, user, password, cert = login
    conf: dict[str, Any] = {"bootstrap.servers": sb.address(listener), "security.protocol": protocol(listener)}
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    if "SSL" in listener:
        conf["ssl.ca.location"] = sb.pki.ca
        if cert:
            conf.update({"ssl.certificate.location": sb.pki.client_cert, "ssl.key.location": sb.pki.client_key})
    return conf


def protocol(listener: str) -> str:
    return "SSL" if listener == "SSLREQ" else listener


def roundtrip_confluent(sb: SecureBroker, listener: str, login: Login) -> None:
    conf = confluent_conf(sb, listener, login)
    topic, group = fresh(), fresh()
    admin = AdminClient(conf)
    admin.create_topics([CNewTopic(topic, 1, 1)])[topic].result(WAIT_S)
    assert topic in admin.list_topics(timeout=WAIT_S).topics
    producer = Producer(conf)
    for r in RECORDS:
        producer.produce(topic, r)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < len(RECORDS) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == RECORDS


def kafka_python_kwargs(sb: SecureBroker, listener: str, login: Login) -> dict[str, Any]:
    mechanism, user, password, cert = login
    kw: dict[str, Any] = {"bootstrap_servers": sb.address(listener), "security_protocol": protocol(listener)}
    if mechanism:
        kw.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    if "SSL" in listener:
        kw["ssl_cafile"] = sb.pki.ca
        if cert:
            kw.update(ssl_certfile=sb.pki.client_cert, ssl_keyfile=sb.pki.client_key)
    return kw


def roundtrip_kafka_python(sb: SecureBroker, listener: str, login: Login) -> None:
    kw = kafka_python_kwargs(sb, listener, login)
    topic, group = fresh(), fresh()
    admin = KafkaAdminClient(**kw)
    try:
        admin.create_topics([KNewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(**kw)
    try:
        for r in RECORDS:
            producer.send(topic, r).get(WAIT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=int(WAIT_S * 1000),
                             **kw)
    try:
        got = []
        for m in consumer:
            got.append(m.value)
            if len(got) == len(RECORDS):
                break
        consumer.commit()
    finally:
        consumer.close()
    assert got == RECORDS


def roundtrip_aiokafka(sb: SecureBroker, listener: str, login: Login) -> None:
    mechanism, user, password, cert = login
    kw: dict[str, Any] = {"bootstrap_servers": sb.address(listener), "security_protocol": protocol(listener)}
    if mechanism:
        kw.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    if "SSL" in listener:
        kw["ssl_context"] = create_ssl_context(cafile=sb.pki.ca, certfile=sb.pki.client_cert if cert else None,
                                               keyfile=sb.pki.client_key if cert else None)
    topic, group = fresh(), fresh()

    async def run() -> list[bytes]:
        from aiokafka.admin import NewTopic as ANewTopic

        admin = AIOKafkaAdminClient(**kw)
        await admin.start()
        try:
            await admin.create_topics([ANewTopic(topic, 1, 1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(**kw)
        await producer.start()
        try:
            for r in RECORDS:
                await producer.send_and_wait(topic, r)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **kw)
        await consumer.start()
        try:
            got: list[bytes] = []
            while len(got) < len(RECORDS):
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), WAIT_S)
                got += [m.value for ms in batch.values() for m in ms]
            await consumer.commit()
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == RECORDS


def kcat_args(sb: SecureBroker, listener: str, login: Login) -> list[str]:
    conf = confluent_conf(sb, listener, login)
    conf["sasl.mechanisms"] = conf.pop("sasl.mechanism", None)
    args = ["-b", conf.pop("bootstrap.servers")]
    for k, v in conf.items():
        if v is not None:
            args += ["-X", f"{k}={v}"]
    return args


def kcat(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("kcat")
    assert exe, "kcat is not installed: scripts/test.sh installs it with apt"
    done = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
    return done


def roundtrip_kcat(sb: SecureBroker, listener: str, login: Login) -> None:
    base = kcat_args(sb, listener, login)
    topic, group = fresh(), fresh()
    # kcat has no admin verbs: its topic comes from auto-creation (CREATE on the sec- prefix), its admin call is -L.
    kcat("-P", *base, "-t", topic, stdin="".join(f"{r.decode()}\n" for r in RECORDS))
    listing = kcat("-L", *base, "-t", topic).stdout
    assert f'topic "{topic}" with 1 partitions' in listing
    out = kcat("-G", group, *base, "-o", "beginning", "-c", str(len(RECORDS)), "-e", "-f", "%s\n", topic).stdout
    assert out.split() == [r.decode() for r in RECORDS]


CLIENTS: dict[str, Callable[[SecureBroker, str, Login], None]] = {
    "confluent-kafka": roundtrip_confluent,
    "kafka-python": roundtrip_kafka_python,
    "aiokafka": roundtrip_aiokafka,
    "kcat": roundtrip_kcat,
}


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_stock_clients_log_in_with_sasl_and_produce_consume_and_administer(sb: SecureBroker, client: str,
                                                                           mechanism: str, listener: str) -> None:
    user, password = USERS[mechanism]
    CLIENTS[client](sb, listener, (mechanism, user, password, False))


@pytest.mark.parametrize("with_certificate", [False, True], ids=["anonymous", "client-certificate"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_stock_clients_over_tls(sb: SecureBroker, client: str, with_certificate: bool) -> None:
    CLIENTS[client](sb, "SSL", (None, None, None, with_certificate))


def test_the_principal_of_a_client_certificate_is_its_mapped_dn(sb: SecureBroker) -> None:
    topic = fresh("cert-only-")
    sb.sofakafka("topics", "create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    sb.sofakafka("acls", "add", "--allow-principal", "User:certuser", "--operation", "Write", "--topic", topic)
    for cert, expected in ((True, None), (False, "TOPIC_AUTHORIZATION_FAILED")):
        conf = confluent_conf(sb, "SSL", (None, None, None, cert))
        errors: list[Any] = []
        p = Producer({**conf, "message.timeout.ms": 10000})
        p.produce(topic, b"x", on_delivery=lambda err, _m, errors=errors: errors.append(err))
        p.flush(WAIT_S)
        assert len(errors) == 1
        assert (errors[0].name() if errors[0] else None) == expected
    # The required-certificate listener takes the trusted certificate too.
    roundtrip_confluent(sb, "SSLREQ", (None, None, None, True))


# ------------------------------------------------------------------------------------------ failed logins


def confluent_auth_error(conf: dict[str, Any], codes: tuple[str, ...] = ("_AUTHENTICATION",)) -> str:
    """Start a producer and return the first error of one of ``codes`` librdkafka reports (within the bound);
    librdkafka may say _ALL_BROKERS_DOWN first."""
    errors: list[Any] = []
    p = Producer({**conf, "error_cb": errors.append, "reconnect.backoff.ms": 1000})
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = [e for e in errors if e.name() in codes]
        if found:
            return f"{found[0].name()}: {found[0].str()}"
        p.poll(0.2)
    raise AssertionError(f"none of {codes} reported; got {[e.str() for e in errors]}")


def log_since(sb: SecureBroker, mark: int) -> str:
    return sb.broker.log_text()[mark:]


def wait_for_log(sb: SecureBroker, mark: int, needle: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        text = log_since(sb, mark)
        if needle in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} not in the broker log:\n{log_since(sb, mark)[-3000:]}")


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_wrong_password_and_unknown_user_fail_alike_and_the_log_says_which(sb: SecureBroker, listener: str,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    mark = len(sb.broker.log_text())
    wrong = confluent_auth_error(confluent_conf(sb, listener, ("SCRAM-SHA-256", "user256", "nope", False)))
    unknown = confluent_auth_error(confluent_conf(sb, listener, ("SCRAM-SHA-256", "nobody", "nope", False)))
    for text in (wrong, unknown):
        assert "_AUTHENTICATION" in text and "invalid credentials" in text, text
    assert "nobody" not in unknown and "unknown" not in unknown.lower()
    wait_for_log(sb, mark, "user 'user256': The client keys don't match")
    wait_for_log(sb, mark, "user 'nobody': unknown user")
    plain = confluent_auth_error(confluent_conf(sb, listener, ("PLAIN", "plainuser", "nope", False)))
    assert "_AUTHENTICATION" in plain and "Invalid username or password" in plain
    wait_for_log(sb, mark, "PLAIN user 'plainuser': wrong password")
    # kcat and aiokafka report it as an authentication failure too.
    done = kcat("-L", *kcat_args(sb, listener, ("SCRAM-SHA-512", "user512", "bad", False)), check=False)
    assert done.returncode != 0 and "SASL authentication error" in done.stderr, done.stderr
    # aiokafka logs the broker's SASL_AUTHENTICATION_FAILED (58) and fails to bootstrap.
    from aiokafka.errors import KafkaConnectionError

    with caplog.at_level("ERROR", logger="aiokafka"), pytest.raises(KafkaConnectionError):
        asyncio.run(_aiokafka_login(sb, listener, "SCRAM-SHA-512", "user512", "bad"))
    assert "[Error 58] SaslAuthenticationFailed" in caplog.text
    # Our own client says the same.
    security = client_security_from_properties({"security.protocol": listener, "sasl.mechanism": "SCRAM-SHA-512",
                                               "sasl.username": "user512", "sasl.password": "bad",
                                               "ssl.ca.location": sb.pki.ca})
    with pytest.raises(AuthenticationError, match="invalid credentials"):
        KafkaClient(sb.address(listener), security=security).metadata()


async def _aiokafka_login(sb: SecureBroker, listener: str, mechanism: str, user: str, password: str) -> None:
    kw: dict[str, Any] = {"bootstrap_servers": sb.address(listener), "security_protocol": listener,
                          "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    if "SSL" in listener:
        kw["ssl_context"] = create_ssl_context(cafile=sb.pki.ca)
    admin = AIOKafkaAdminClient(**kw)
    try:
        await admin.start()
    finally:
        await admin.close()


def test_a_mechanism_the_broker_does_not_offer_is_refused(sb: SecureBroker) -> None:
    mark = len(sb.broker.log_text())
    conf = confluent_conf(sb, "SASL_PLAINTEXT", ("OAUTHBEARER", None, None, False))
    for key in ("sasl.username", "sasl.password"):
        conf.pop(key)
    conf["enable.sasl.oauthbearer.unsecure.jwt"] = True
    conf["sasl.oauthbearer.config"] = "principal=someone"
    text = confluent_auth_error(conf)
    assert "_AUTHENTICATION" in text and "PLAIN" in text and "SCRAM-SHA-256" in text, text
    wait_for_log(sb, mark, "SASL mechanism 'OAUTHBEARER' is not enabled")


def test_an_untrusted_or_missing_client_certificate_is_refused(sb: SecureBroker) -> None:
    mark = len(sb.broker.log_text())
    conf = confluent_conf(sb, "SSLREQ", (None, None, None, False))
    rogue = {**conf, "ssl.certificate.location": sb.pki.rogue_cert, "ssl.key.location": sb.pki.rogue_key}
    for c in (conf, rogue):
        # Under TLS 1.3 the client's handshake is done before the broker checks its certificate, so librdkafka
        # may only see the connection close.
        confluent_auth_error(c, ("_SSL", "_TRANSPORT", "_AUTHENTICATION", "_ALL_BROKERS_DOWN"))
    text = wait_for_log(sb, mark, "on SSLREQ: TLS handshake failed")
    assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" in text or "certificate required" in text.lower(), text
    wait_for_log(sb, mark, "CERTIFICATE_VERIFY_FAILED")
    # Our own client fails too (it sees the connection close: the broker drops the socket without flushing
    # OpenSSL's alert, so the reason is in the broker's log, above, not on the client).
    for props in ({}, {"ssl.certificate.location": sb.pki.rogue_cert, "ssl.key.location": sb.pki.rogue_key}):
        security = client_security_from_properties({"security.protocol": "SSL", "ssl.ca.location": sb.pki.ca, **props})
        with pytest.raises(ClientError):
            KafkaClient(sb.address("SSLREQ"), security=security, request_timeout_ms=10000).metadata()
    # kafka-python fails too.
    with pytest.raises(Exception):  # noqa: B017 - kafka-python reports it as NoBrokersAvailable
        KafkaProducer(**kafka_python_kwargs(sb, "SSLREQ", (None, None, None, False)), api_version_auto_timeout_ms=5000)


def test_failed_logins_leave_no_traceback(sb: SecureBroker) -> None:
    # After the failure tests above (module order), nothing in the log is a traceback.
    assert "Traceback" not in sb.broker.log_text()


# ----------------------------------------------------------------------------------------------- the ACL case


def test_a_reader_of_orders_topics_consumes_but_cannot_produce_or_see_other_topics(sb: SecureBroker) -> None:
    orders, other = fresh("orders-"), fresh("secret-")
    group = "orders-readers"
    for t in (orders, other):
        sb.sofakafka("topics", "create", "--topic", t, "--partitions", "1", "--replication-factor", "1")
    sb.sofakafka("acls", "add", "--allow-principal", "User:reader", "--operation", "Read", "--topic", "orders-",
                 "--resource-pattern-type", "PREFIXED")
    sb.sofakafka("acls", "add", "--allow-principal", "User:reader", "--operation", "Read", "--group", group)
    listed = sb.sofakafka("acls", "list", "--principal", "User:reader").stdout
    assert "name=orders-, patternType=PREFIXED" in listed and f"name={group}, patternType=LITERAL" in listed
    admin_conf = confluent_conf(sb, "SASL_PLAINTEXT", ("PLAIN", *ADMIN, False))
    producer = Producer(admin_conf)
    producer.produce(orders, b"order-1")
    assert producer.flush(WAIT_S) == 0

    kw = kafka_python_kwargs(sb, "SASL_SSL", ("SCRAM-SHA-256", *READER, False))
    consumer = KafkaConsumer(orders, group_id=group, auto_offset_reset="earliest",
                             consumer_timeout_ms=int(WAIT_S * 1000), **kw)
    try:
        assert next(iter(consumer)).value == b"order-1"
        consumer.commit()
        # Metadata: the orders topic only (DESCRIBE is implied by READ); the other topic is not even named.
        assert orders in consumer.topics() and other not in consumer.topics()
    finally:
        consumer.close()

    # KIP-430: the group's authorized operations are the reader's own (READ, and DESCRIBE implied by it).
    reader_admin = AdminClient(confluent_conf(sb, "SASL_SSL", ("SCRAM-SHA-256", *READER, False)))
    described = reader_admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(WAIT_S)
    assert sorted(op.name for op in described.authorized_operations) == ["DESCRIBE", "READ"]

    # Produce: WRITE is not granted. (An idempotent producer is stopped earlier, by IDEMPOTENT_WRITE on the
    # cluster: kafka-python 3 is idempotent by default and gets CLUSTER_AUTHORIZATION_FAILED, as from Kafka.)
    producer2 = KafkaProducer(**kw, max_block_ms=10000, enable_idempotence=False)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer2.send(orders, b"nope").get(WAIT_S)
    finally:
        producer2.close()
    # Another group: READ on the topic is no READ on the group.
    consumer2 = KafkaConsumer(orders, group_id="orders-other", auto_offset_reset="earliest",
                              consumer_timeout_ms=10000, **kw)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            next(iter(consumer2))
    finally:
        consumer2.close()

    # Asked by name, the other topic is TOPIC_AUTHORIZATION_FAILED (whether it exists is not said).
    security = client_security_from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                                               "sasl.username": READER[0], "sasl.password": READER[1]})
    with KafkaClient(sb.address("SASL_PLAINTEXT"), security=security) as client:
        md = client.metadata([other, "no-such-topic", orders])
        errors = {t.name: t.error for t in md.topics.values()}
        assert errors.get(other) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert errors.get("no-such-topic") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert errors.get(orders) == ErrorCode.NONE


# ------------------------------------------------------------------------------------ the ACL admin API


def test_kafka_python_manages_acls_and_errors_are_kafkas(sb: SecureBroker) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.errors import ClusterAuthorizationFailedError

    admin = KafkaAdminClient(**kafka_python_kwargs(sb, "SASL_PLAINTEXT", ("PLAIN", *ADMIN, False)))
    try:
        acl = ACL("User:dave", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.TOPIC, "dave-", ACLResourcePatternType.PREFIXED))
        bad = ACL("User:dave", "*", ACLOperation.ALTER, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.CLUSTER, "not-the-cluster", ACLResourcePatternType.LITERAL))
        result = admin.create_acls([acl, bad])
        assert [a.resource_pattern.resource_name for a in result["succeeded"]] == ["dave-"]
        (error,) = result["failed"]
        assert error.errno == 42  # INVALID_REQUEST: a CLUSTER resource must be named kafka-cluster
        flt = ACLFilter("User:dave", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(ResourceType.TOPIC, "dave-x", ACLResourcePatternType.MATCH))
        found, error = admin.describe_acls(flt)
        assert error.errno == 0 and [a.resource_pattern.resource_name for a in found] == ["dave-"]
        ((_flt, deleted, error),) = admin.delete_acls([flt])
        assert error.errno == 0 and [a.resource_pattern.resource_name for a in deleted] == ["dave-"]
        found, _ = admin.describe_acls(flt)
        assert found == []
    finally:
        admin.close()
    # A user without ALTER on the cluster may not manage ACLs.
    user = KafkaAdminClient(**kafka_python_kwargs(sb, "SASL_PLAINTEXT", ("SCRAM-SHA-256", *SCRAM_USERS["SCRAM-SHA-256"],
                                                                         False)))
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            user.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                         ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        user.close()


def test_users_by_command_kafka_configs_syntax_too(sb: SecureBroker) -> None:
    sb.sofakafka("configs", "--alter", "--entity-type", "users", "--entity-name", "erin",
                 "--add-config", "SCRAM-SHA-256=[iterations=8192,password=erin-pw],SCRAM-SHA-512=[password=erin-pw]")
    described = sb.sofakafka("configs", "--describe", "--entity-type", "users", "--entity-name", "erin").stdout
    assert described.strip() == ("SCRAM credential configs for user-principal 'erin' are "
                                 "SCRAM-SHA-256=iterations=8192,SCRAM-SHA-512=iterations=4096")
    listed = sb.sofakafka("users", "list").stdout
    assert "user-principal 'erin'" in listed and "user-principal 'user256'" in listed
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        conf = confluent_conf(sb, "SASL_PLAINTEXT", (mechanism, "erin", "erin-pw", False))
        assert AdminClient(conf).list_topics(timeout=WAIT_S).brokers
    sb.sofakafka("configs", "--alter", "--entity-type", "users", "--entity-name", "erin",
                 "--delete-config", "SCRAM-SHA-512")
    sb.sofakafka("users", "delete", "erin")  # what is left: SCRAM-SHA-256
    assert "erin" not in sb.sofakafka("users", "list").stdout
    text = confluent_auth_error(confluent_conf(sb, "SASL_PLAINTEXT", ("SCRAM-SHA-256", "erin", "erin-pw", False)))
    assert "invalid credentials" in text
    # Bad input names what is wrong, exit code 2.
    done = sb.sofakafka("users", "add", "frank", "--password", "pw", "--iterations", "4095", check=False)
    assert done.returncode == 2 and "iterations must be between 4096" in done.stderr
    done = sb.sofakafka("acls", "add", "--allow-principal", "User:frank", "--operation", "Write", "--group", "g",
                        check=False)
    assert done.returncode == 2 and "ResourceType Group only supports operations" in done.stderr


def test_without_a_master_key_token_requests_are_auth_disabled_and_token_logins_fail(sb: SecureBroker) -> None:
    """This broker has no delegation.token.master.key: Kafka 2.6's DELEGATION_TOKEN_AUTH_DISABLED, after the
    checks that come first (a SASL login; a renewer that is not a user), and a tokenauth login is refused."""
    user, password = SCRAM_USERS["SCRAM-SHA-256"]
    with KafkaClient(sb.address("SASL_PLAINTEXT"), security=client_security_from_properties({
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
            "sasl.password": password})) as c:
        for call in (lambda: c.create_delegation_token(["User:bob"]), lambda: c.renew_delegation_token(b"x"),
                     lambda: c.expire_delegation_token(b"x"), lambda: c.describe_delegation_tokens()):
            with pytest.raises(KafkaError) as refused:
                call()
            assert refused.value.code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        with pytest.raises(KafkaError) as refused:
            c.create_delegation_token(["Group:g"])
        assert refused.value.code == ErrorCode.INVALID_PRINCIPAL_TYPE
    token_login = client_security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="some-id" '
                            'password="c2VjcmV0" tokenauth="true";'})
    with pytest.raises(AuthenticationError), KafkaClient(sb.address("SASL_PLAINTEXT"), security=token_login) as c:
        c.metadata([])
    deadline = time.monotonic() + WAIT_S
    while "delegation token 'some-id': delegation tokens are disabled" not in sb.broker.log_text():
        assert time.monotonic() < deadline, sb.broker.log_tail()
        time.sleep(0.1)
