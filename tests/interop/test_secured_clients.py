"""Kafka's Java clients (kafka-clients 2.6.3 and 4.4.0) over SASL_SSL with a SCRAM-SHA-512 login against sofakafka.

The broker is the security tests' (tests/integration/security_setup.py: trustme certificates, SASL_SSL beside
the other listeners, the ACL authorizer on); the SCRAM user is added with ``sofakafka users add`` and given
ACLs with ``sofakafka acls add``, as an operator would. The Java scenarios are the plain ones
(interop/java/scenarios), given the client properties of the secured listener (``clientConfig``): TLS with
hostname verification against the broker's certificate (the CA in a PKCS12 trust store made with the JDK's
keytool, as kafka-clients 2.6 reads no PEM), the SCRAM login, then Admin, an idempotent producer and a
committing consumer group. A wrong password is refused at the login, and the broker log says why.

Only against sofakafka: Kafka 2.6 with the same listeners is compared by tests/conformance/
test_security_conformance.py at the protocol level (SASL_PLAINTEXT), and the TLS layer is not Kafka's to judge.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from tests.integration.security_setup import SecureBroker, running_secure_broker
from tests.reference.fixtures import ScenarioJVMs
from tests.reference.java import CLIENT_VERSIONS, ScenarioError, require_java

pytestmark = pytest.mark.timeout(600)

USER = ("javauser", "java-secret-512")
TRUSTSTORE_PASSWORD = "changeit"
WAIT_S = 30.0  # a bound on waiting for the broker log, not a timing assertion


def trust_store(ca_pem: str, directory: Path) -> Path:
    """The test CA as a PKCS12 trust store (kafka-clients 2.6 has no PEM trust stores; 2.7 brought them)."""
    java = Path(require_java())
    keytool = shutil.which("keytool", path=str(java.parent)) or shutil.which("keytool")
    assert keytool, f"no keytool beside {java} or on PATH"
    store = directory / "truststore.p12"
    subprocess.run([keytool, "-importcert", "-noprompt", "-alias", "test-ca", "-file", ca_pem, "-keystore", str(store),
                    "-storetype", "PKCS12", "-storepass", TRUSTSTORE_PASSWORD], check=True, capture_output=True,
                   timeout=120)
    return store


def sasl_ssl_config(store: Path, user: tuple[str, str]) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                            f'username="{user[0]}" password="{user[1]}";',
        "ssl.truststore.location": str(store),
        "ssl.truststore.password": TRUSTSTORE_PASSWORD,
        "ssl.truststore.type": "PKCS12",
        # Left at Kafka's default ("https"): the broker's certificate must name 127.0.0.1, and it does.
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SecureBroker, Path]]:
    base = tmp_path_factory.mktemp("java-sasl-ssl")
    with running_secure_broker(base) as sb:
        sb.sofakafka("users", "add", USER[0], "--password", USER[1], "--mechanism", "SCRAM-SHA-512")
        principal = ("--allow-principal", f"User:{USER[0]}")
        sb.sofakafka("acls", "add", *principal, "--operation", "All", "--topic", "jsec-", "--group", "jsec-",
                     "--resource-pattern-type", "PREFIXED")
        sb.sofakafka("acls", "add", *principal, "--operation", "IdempotentWrite", "--cluster")
        sb.sofakafka("acls", "add", *principal, "--operation", "Describe", "--cluster")
        yield sb, trust_store(sb.pki.ca, base)


@pytest.fixture(scope="module")
def outcomes(secured: tuple[SecureBroker, Path], scenario_jvms: ScenarioJVMs) -> dict[tuple[str, str], Future[Any]]:
    """Every scenario of the module, submitted at once to the session's scenario JVMs."""
    sb, store = secured
    bootstrap = sb.address("SASL_SSL")
    good, bad = sasl_ssl_config(store, USER), sasl_ssl_config(store, (USER[0], "not-the-password"))
    runs: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for client in CLIENT_VERSIONS:
        tag = client.replace(".", "")
        runs[(client, "commit")] = ("consumer.commit", {"topic": f"jsec-commit-{tag}", "group": f"jsec-g-{tag}",
                                                        "clientConfig": good})
        runs[(client, "idempotent")] = ("producer.idempotent", {"topic": f"jsec-idem-{tag}", "records": 3000,
                                                                "clientConfig": good})
        runs[(client, "wrong password")] = ("admin.cluster", {"clientConfig": bad})
    return {key: scenario_jvms[key[0]].submit(name, bootstrap, **params) for key, (name, params) in runs.items()}


def result(outcomes: dict[tuple[str, str], Future[Any]], scenario_jvms: ScenarioJVMs, client: str, what: str,
           bootstrap: str) -> dict[str, Any]:
    return scenario_jvms[client].result(outcomes[(client, what)], what, bootstrap)


@pytest.mark.parametrize("client", CLIENT_VERSIONS)
def test_scram_over_tls_then_admin_idempotent_producer_and_group(
        client: str, secured: tuple[SecureBroker, Path], scenario_jvms: ScenarioJVMs,
        outcomes: dict[tuple[str, str], Future[Any]]) -> None:
    sb, _ = secured
    bootstrap = sb.address("SASL_SSL")
    assert result(outcomes, scenario_jvms, client, "idempotent", bootstrap) == {"records": 3000}
    # The group committed synchronously and asynchronously, and a new member resumed where it stopped.
    assert result(outcomes, scenario_jvms, client, "commit", bootstrap)["resumedAt"] == 15
    assert sb.broker.alive(), sb.broker.log_tail()


@pytest.mark.parametrize("client", CLIENT_VERSIONS)
def test_a_wrong_password_is_refused_at_the_login(client: str, secured: tuple[SecureBroker, Path],
                                                  scenario_jvms: ScenarioJVMs,
                                                  outcomes: dict[tuple[str, str], Future[Any]]) -> None:
    sb, _ = secured
    with pytest.raises(ScenarioError) as refused:
        result(outcomes, scenario_jvms, client, "wrong password", sb.address("SASL_SSL"))
    assert "SaslAuthenticationException" in str(refused.value), str(refused.value)[:3000]
    deadline = time.monotonic() + WAIT_S
    while f"user '{USER[0]}': The client keys don't match" not in sb.broker.log_text():
        assert time.monotonic() < deadline, sb.broker.log_tail()
        time.sleep(0.1)
    assert sb.broker.alive(), sb.broker.log_tail()
