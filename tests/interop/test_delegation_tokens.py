"""Delegation tokens (KIP-48) end to end: stock clients log in with a token and act as its owner, against one
sofakafka broker with security on (tests/integration/security_setup.py, plus a PLAINTEXT listener) and
``delegation.token.master.key`` set.

A SCRAM user (``tokowner``) may do everything on topics and groups named ``sec-...`` (the names
tests/integration/test_security.py's round trips use, run here with a token's login); a token it creates logs in
as it. Who can send SCRAM's ``tokenauth=true`` extension, which Kafka needs to take the user name as a token id:

* Kafka's Java clients (kafka-clients 2.6.3 and 4.4.0): ``tokenauth="true"`` in ScramLoginModule's JAAS options,
  as Kafka documents it; Kafka 2.6's own ``kafka-delegation-tokens.sh`` (DelegationTokenCommand) manages the tokens.
* kafka-python cannot: its SCRAM client sends no extensions. It can through its own extension point
  (``kafka.net.sasl.register_sasl_mechanism``), with a SCRAM mechanism that appends the extension to its first
  message, as the Java client does; that is what :func:`kafka_python_token_login` registers.
* librdkafka (confluent-kafka) cannot either, and has no such hook: it logs in with the token through sofakafka's
  opt-in ``sofakafka.delegation.token.auth.without.extension``, which this broker has on.

Then the rules: renewers, DESCRIBE ACLs, renew and expire, an expired token refused at the login with the reason
in the broker's log, and Kafka's DELEGATION_TOKEN_REQUEST_NOT_ALLOWED for a login without SASL or with a token,
nothing stored then.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka.net import sasl as kafka_python_sasl
from kafka.net.sasl.scram import SaslMechanismScram

from sofakafka import cli
from sofakafka.client import (
    AlterConfigOp,
    AuthenticationError,
    ConfigResourceType,
    DelegationToken,
    KafkaClient,
)
from sofakafka.client.security import ClientSecurity
from sofakafka.protocol import acl
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.security.scram import make_credential
from tests.integration.conftest import REPO
from tests.integration.security_setup import ADMIN, SecureBroker, running_secure_broker, used_by_this_test
from tests.integration.test_security import (
    fresh,
    kafka_python_kwargs,
    roundtrip_confluent,
    roundtrip_kafka_python,
)
from tests.interop.tools import Tool
from tests.reference.fixtures import ScenarioJVMs
from tests.reference.java import CLIENT_VERSIONS

pytestmark = pytest.mark.timeout(600)

MASTER_KEY = "interop-token-master-key"
OWNER = ("tokowner", "owner-secret")
RENEWER = ("tokrenewer", "renewer-secret")
OTHER = ("tokother", "other-secret")
WAIT_S = 30.0  # bounds on waiting, not timing assertions


def login(user: tuple[str, str], mechanism: str = "SCRAM-SHA-256") -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, mechanism, *user)


def token_login(token: DelegationToken, mechanism: str = "SCRAM-SHA-256") -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, mechanism, token.token_id, secret(token), token_auth=True)


def secret(token: DelegationToken) -> str:
    return base64.b64encode(token.hmac).decode()


def client(sb: SecureBroker, security: ClientSecurity | None, listener: str = "SASL_PLAINTEXT") -> KafkaClient:
    return KafkaClient(sb.address(listener), security=security, request_timeout_ms=10_000)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    extra = {"delegation.token.master.key": MASTER_KEY, "delegation.token.expiry.check.interval.ms": "500",
             "sofakafka.delegation.token.auth.without.extension": "true"}
    with running_secure_broker(tmp_path_factory.mktemp("tokens"), extra, plaintext=True) as sb:
        admin_login = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", *ADMIN)
        with client(sb, admin_login) as admin:
            for name, password in (OWNER, RENEWER, OTHER):
                results = admin.incremental_alter_configs({(ConfigResourceType.USER, name): [
                    (m, AlterConfigOp.SET, make_credential(m, password).to_kafka_string())
                    for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")]})
                for r in results:
                    r.raise_for_error()
            owner = f"User:{OWNER[0]}"
            bindings = [acl.AclBinding(acl.ResourcePattern(rtype, "sec-", acl.PatternType.PREFIXED),
                                       acl.AccessControlEntry(owner, "*", acl.AclOperation.ALL, acl.AclPermissionType.ALLOW))
                        for rtype in (acl.ResourceType.TOPIC, acl.ResourceType.GROUP)]
            bindings += [acl.AclBinding(acl.ResourcePattern(acl.ResourceType.CLUSTER, acl.CLUSTER_NAME, acl.PatternType.LITERAL),
                                        acl.AccessControlEntry(owner, "*", op, acl.AclPermissionType.ALLOW))
                         for op in (acl.AclOperation.IDEMPOTENT_WRITE, acl.AclOperation.DESCRIBE)]
            for r in admin.create_acls(bindings):
                r.raise_for_error()
        yield sb


@pytest.fixture
def sb(secured: SecureBroker) -> Iterator[SecureBroker]:
    with used_by_this_test(secured):
        yield secured


def create_token(sb: SecureBroker, user: tuple[str, str] = OWNER, *, renewers: tuple[str, ...] = (),
                 max_lifetime_ms: int = -1) -> DelegationToken:
    with client(sb, login(user)) as c:
        return c.create_delegation_token(renewers, max_lifetime_ms)


def logs_in(sb: SecureBroker, token: DelegationToken) -> bool:
    with client(sb, token_login(token)) as c:
        try:
            c.metadata([])
        except AuthenticationError:
            return False
    return True


def wait_for_log(sb: SecureBroker, text: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while text not in sb.broker.log_text():
        assert time.monotonic() < deadline, f"{text!r} not in the broker log:\n{sb.broker.log_tail()}"
        time.sleep(0.1)
    return next(line for line in sb.broker.log_text().splitlines() if text in line)


# ------------------------------------------------------------------------------------------- the clients


class _TokenScram(SaslMechanismScram):
    """kafka-python's SCRAM with the ``tokenauth=true`` extension in its first message (inside the message both
    sides sign), as Kafka's ScramLoginModule sends it."""

    def auth_bytes(self) -> bytes:
        first: bytes = super().auth_bytes()
        if self._state == 0:
            self._scram_client.auth_message += b",tokenauth=true"
            return first + b",tokenauth=true"
        return first


@contextlib.contextmanager
def kafka_python_token_login() -> Iterator[None]:
    originals = {m: kafka_python_sasl.get_sasl_mechanism(m) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
    for m in originals:
        kafka_python_sasl.register_sasl_mechanism(m, _TokenScram, overwrite=True)
    try:
        yield
    finally:
        for m, klass in originals.items():
            kafka_python_sasl.register_sasl_mechanism(m, klass, overwrite=True)


def test_a_token_made_with_the_command_logs_kafka_python_in_as_its_owner(sb: SecureBroker, tmp_path: Path) -> None:
    config = tmp_path / "owner.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="{OWNER[0]}" password="{OWNER[1]}";\n')
    made = subprocess.run([sys.executable, "-m", "sofakafka", "tokens", "create", "--max-life-time-period", "-1",
                           "--json", "--bootstrap-server", sb.address("SASL_PLAINTEXT"), "--command-config", str(config)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)
    assert token["owner"] == f"User:{OWNER[0]}"
    as_token = ("SCRAM-SHA-256", token["token_id"], token["hmac"], False)
    with kafka_python_token_login():
        # Admin's CreateTopics, a producer, a committing group: the owner's ACLs on sec- topics and groups.
        roundtrip_kafka_python(sb, "SASL_PLAINTEXT", as_token)
        producer = KafkaProducer(**kafka_python_kwargs(sb, "SASL_PLAINTEXT", as_token))
        try:  # and nothing more: no WRITE elsewhere
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send(fresh("secret-"), b"x").get(WAIT_S)
        finally:
            producer.close()


def test_the_command_renews_describes_and_expires_and_says_why_a_plaintext_request_is_refused(
        sb: SecureBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "owner.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="{OWNER[0]}" password="{OWNER[1]}";\n')
    token = create_token(sb, renewers=(f"User:{RENEWER[0]}",))
    common = ["--bootstrap-server", sb.address("SASL_PLAINTEXT"), "--command-config", str(config)]
    capsys.readouterr()
    assert cli.main(["tokens", "--renew", "--hmac", secret(token), "--renew-time-period", "120000", "--json",
                     *common]) == 0
    expiry = json.loads(capsys.readouterr().out)["expiry_timestamp"]
    assert cli.main(["tokens", "describe", "--owner-principal", f"User:{RENEWER[0]}", *common]) == 0
    described = capsys.readouterr().out
    assert "Total number of tokens : " in described and token.token_id in described and secret(token) in described
    assert cli.main(["tokens", "describe", "--json", *common]) == 0
    (mine,) = [t for t in json.loads(capsys.readouterr().out) if t["token_id"] == token.token_id]
    assert (mine["expiry_timestamp"], mine["renewers"]) == (expiry, [f"User:{RENEWER[0]}"])
    assert cli.main(["tokens", "expire", "--hmac", secret(token), "--expiry-time-period", "-1", *common]) == 0
    assert "Completed expire operation" in capsys.readouterr().out
    assert cli.main(["tokens", "describe", "--bootstrap-server", sb.address("PLAINTEXT")]) == 1
    assert "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: token requests need a SASL login" in capsys.readouterr().err


def test_confluent_kafka_logs_in_with_a_token_through_sofakafkas_opt_in(sb: SecureBroker) -> None:
    token = create_token(sb)
    roundtrip_confluent(sb, "SASL_PLAINTEXT", ("SCRAM-SHA-512", token.token_id, secret(token), False))


@pytest.mark.parametrize("java_client", CLIENT_VERSIONS)
def test_kafkas_java_clients_log_in_with_tokenauth_in_their_jaas_config(java_client: str, sb: SecureBroker,
                                                                       scenario_jvms: ScenarioJVMs) -> None:
    token = create_token(sb)
    tag = java_client.replace(".", "")
    config = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                  f'username="{token.token_id}" password="{secret(token)}" tokenauth="true";'}
    result = scenario_jvms[java_client].run("consumer.commit", sb.address("SASL_PLAINTEXT"), topic=f"sec-java-{tag}",
                                            group=f"sec-java-g-{tag}", clientConfig=config)
    assert result["resumedAt"] == 15


def test_kafkas_delegation_token_command_manages_tokens_on_sofakafka(sb: SecureBroker, kafka_tool: Tool,
                                                                      tmp_path: Path) -> None:
    config = tmp_path / "owner.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="{OWNER[0]}" password="{OWNER[1]}";\n')
    common = ["--bootstrap-server", sb.address("SASL_PLAINTEXT"), "--command-config", str(config)]
    cmd = "kafka.admin.DelegationTokenCommand"
    out = kafka_tool(cmd, ["--create", "--max-life-time-period", "-1", "--renewer-principal",
                           f"User:{RENEWER[0]}", *common]).stdout
    token_id = out.split("Created delegation token with tokenId : ")[1].split()[0]
    row = next(line.split() for line in out.splitlines() if line.startswith(token_id))
    hmac, owner, renewers = row[1], row[2], row[3]
    assert (owner, renewers) == (f"User:{OWNER[0]}", f"[User:{RENEWER[0]}]")
    described = kafka_tool(cmd, ["--describe", *common]).stdout
    assert token_id in described and hmac in described
    assert "Completed renew operation" in kafka_tool(cmd, ["--renew", "--hmac", hmac, "--renew-time-period",
                                                           "3600000", *common]).stdout
    assert "Completed expire operation" in kafka_tool(cmd, ["--expire", "--hmac", hmac, "--expiry-time-period",
                                                            "-1", *common]).stdout
    assert token_id not in kafka_tool(cmd, ["--describe", *common]).stdout


# ------------------------------------------------------------------------------------------- the rules


def test_renewers_renew_others_may_not_and_an_expired_token_is_refused_at_the_login(sb: SecureBroker) -> None:
    token = create_token(sb, renewers=(f"User:{RENEWER[0]}",), max_lifetime_ms=3_600_000)
    with client(sb, login(RENEWER)) as renewer:
        expiry = renewer.renew_delegation_token(token.hmac, 600_000)
        assert token.issue_timestamp + 600_000 <= expiry <= token.max_timestamp
    with client(sb, login(OTHER)) as other:
        with pytest.raises(KafkaError) as refused:
            other.renew_delegation_token(token.hmac, 600_000)
        assert refused.value.code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        with pytest.raises(KafkaError) as unknown:
            other.expire_delegation_token(b"\x01" * 64, -1)
        assert unknown.value.code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert logs_in(sb, token)
    with client(sb, login(OWNER)) as owner:
        (described,) = [t for t in owner.describe_delegation_tokens() if t.token_id == token.token_id]
        assert described.expiry_timestamp == expiry and described.renewers == (f"User:{RENEWER[0]}",)
        owner.expire_delegation_token(token.hmac, -1)
    assert not logs_in(sb, token)
    wait_for_log(sb, f"delegation token '{token.token_id}': no such delegation token")
    # A token past its max lifetime: refused at the next login, then removed by the expiry scan.
    short = create_token(sb, max_lifetime_ms=1_000)
    assert short.max_timestamp - short.issue_timestamp == 1_000 and logs_in(sb, short)
    deadline = time.monotonic() + WAIT_S
    while logs_in(sb, short):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    line = wait_for_log(sb, f"delegation token '{short.token_id}': ")
    assert "expired" in line or "no such delegation token" in line, line
    with client(sb, login(OWNER)) as owner:
        deadline = time.monotonic() + WAIT_S
        while short.token_id in {t.token_id for t in owner.describe_delegation_tokens()}:
            assert time.monotonic() < deadline, "the expiry scan did not remove the token"
            time.sleep(0.2)
        with pytest.raises(KafkaError) as gone:
            owner.renew_delegation_token(short.hmac)
        assert gone.value.code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert sb.broker.alive(), sb.broker.log_tail()


def test_describe_shows_owned_and_renewable_tokens_and_others_with_describe_on_the_token(sb: SecureBroker) -> None:
    mine = create_token(sb, renewers=(f"User:{RENEWER[0]}",))
    with client(sb, login(OTHER)) as other:
        assert mine.token_id not in {t.token_id for t in other.describe_delegation_tokens()}
        with client(sb, ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", *ADMIN)) as admin:
            for r in admin.create_acls([acl.AclBinding(
                    acl.ResourcePattern(acl.ResourceType.DELEGATION_TOKEN, mine.token_id, acl.PatternType.LITERAL),
                    acl.AccessControlEntry(f"User:{OTHER[0]}", "*", acl.AclOperation.DESCRIBE,
                                           acl.AclPermissionType.ALLOW))]):
                r.raise_for_error()
            assert mine.token_id in {t.token_id for t in admin.describe_delegation_tokens()}  # a super user
        deadline = time.monotonic() + WAIT_S
        while mine.token_id not in {t.token_id for t in other.describe_delegation_tokens()}:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert other.describe_delegation_tokens([]) == []  # an empty owner list: none
    with client(sb, login(RENEWER)) as renewer:
        seen = renewer.describe_delegation_tokens([f"User:{RENEWER[0]}"])
        assert mine.token_id in {t.token_id for t in seen}
        assert renewer.describe_delegation_tokens([f"User:{OTHER[0]}"]) == []


def test_a_token_login_may_not_create_renew_expire_or_describe_tokens(sb: SecureBroker) -> None:
    token = create_token(sb)
    with client(sb, token_login(token, "SCRAM-SHA-512")) as c:
        for call in (lambda: c.create_delegation_token(), lambda: c.renew_delegation_token(token.hmac),
                     lambda: c.expire_delegation_token(token.hmac, -1), lambda: c.describe_delegation_tokens()):
            with pytest.raises(KafkaError) as refused:
                call()
            assert refused.value.code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert logs_in(sb, token)  # still there: nothing was expired


def test_token_requests_without_a_sasl_login_are_refused_and_nothing_is_stored(sb: SecureBroker) -> None:
    token = create_token(sb)
    with client(sb, ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", *ADMIN)) as admin:
        before = {t.token_id for t in admin.describe_delegation_tokens()}
        assert token.token_id in before
        ssl_anonymous = ClientSecurity("SSL", _ssl_context(sb, with_certificate=False))
        for listener, security in (("PLAINTEXT", None), ("SSL", ssl_anonymous)):
            with client(sb, security, listener) as c:
                for call in (lambda: c.create_delegation_token(), lambda: c.renew_delegation_token(token.hmac),
                             lambda: c.expire_delegation_token(token.hmac, -1),
                             lambda: c.describe_delegation_tokens()):
                    with pytest.raises(KafkaError) as refused:
                        call()
                    assert refused.value.code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, listener
        assert {t.token_id for t in admin.describe_delegation_tokens()} == before
        # Over SSL with a client certificate the principal is the certificate's, and Kafka allows it.
        with client(sb, ClientSecurity("SSL", _ssl_context(sb, with_certificate=True)), "SSL") as c:
            assert c.create_delegation_token().owner == "User:certuser"
    assert logs_in(sb, token)


def _ssl_context(sb: SecureBroker, *, with_certificate: bool) -> Any:
    import ssl

    ctx = ssl.create_default_context(cafile=sb.pki.ca)
    if with_certificate:
        ctx.load_cert_chain(sb.pki.client_cert, sb.pki.client_key)
    return ctx
