"""``sofakafka router run``'s librdkafka settings from ``--command-config`` (Kafka's client properties)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import trustme

from sofakafka.cli.common import UsageError
from sofakafka.cli.router import librdkafka_security, router_client_config

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="router" '
              'password="pw";')


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    d = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(d / "ca.pem")
    ca.issue_cert("router").private_key_and_cert_chain_pem.write_to_path(d / "client.pem")
    return str(d / "ca.pem"), str(d / "client.pem")


def test_plaintext_is_only_the_protocol() -> None:
    assert librdkafka_security({}, "f") == {"security.protocol": "PLAINTEXT"}


def test_sasl_ssl_with_java_names_becomes_librdkafka_names(pem: tuple[str, str]) -> None:
    ca, client = pem
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_JAAS,
             "ssl.truststore.type": "PEM", "ssl.truststore.location": ca, "ssl.keystore.type": "PEM",
             "ssl.keystore.location": client, "ssl.endpoint.identification.algorithm": ""}
    assert librdkafka_security(props, "f") == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "router",
        "sasl.password": "pw", "ssl.ca.location": ca, "ssl.certificate.location": client,
        "ssl.key.location": client, "ssl.endpoint.identification.algorithm": "none"}


def test_librdkafka_names_pass_through(pem: tuple[str, str]) -> None:
    ca, _ = pem
    props = {"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN", "sasl.username": "u",
             "sasl.password": "p", "ssl.ca.location": ca}
    # SASL_PLAINTEXT: the CA is not used, so it is not passed on.
    assert librdkafka_security(props, "f") == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                                               "sasl.username": "u", "sasl.password": "p"}


@pytest.mark.parametrize(("props", "key"), [
    ({"security.protocol": "SASL_SSLX"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
])
def test_a_setting_that_cannot_be_used_names_the_file_and_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(UsageError, match=rf"^router\.properties: .*{key}"):
        librdkafka_security(props, "router.properties")


def test_client_config_comes_after_the_file(tmp_path: Path) -> None:
    f = tmp_path / "c.properties"
    f.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\n")
    args = argparse.Namespace(command_config=str(f),
                              client_config=["sasl.password=q", "session.timeout.ms=10000"])
    assert router_client_config(args) == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                                          "sasl.username": "u", "sasl.password": "q", "session.timeout.ms": "10000"}
    assert router_client_config(argparse.Namespace(command_config=None, client_config=[])) == {}
