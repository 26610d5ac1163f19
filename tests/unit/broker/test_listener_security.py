"""The broker's security set-up from server.properties: bad settings stop start-up naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

from sofakafka.broker.config import ConfigError, KafkaConfig
from sofakafka.broker.listener_security import BrokerSecurity

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="pw" user_admin="pw";')


@pytest.fixture(scope="module")
def server_pem(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("pki")
    trustme.CA().issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    return str(d / "server.pem")


def configure(props: dict[str, str], tmp_path: Path) -> BrokerSecurity:
    security = BrokerSecurity(KafkaConfig.from_properties({"log.dirs": str(tmp_path), **props}))
    security.configure()
    return security


@pytest.mark.parametrize(("props", "key", "reason"), [
    ({"listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:1"}, "sasl.enabled.mechanisms", "GSSAPI is not supported"),
    ({"listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:1", "sasl.enabled.mechanisms": "PLAIN"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config", "user_<name>"),
    ({"listeners": "PLAINTEXT://:0,SSL://:1"}, "ssl.keystore.location", "needs a key store"),
    ({"listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:1", "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
     "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "username"),
    ({"listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:1", "sasl.enabled.mechanisms": "PLAIN",
      "sasl.jaas.config": "broken"},
     "sasl.jaas.config", "control flag"),
    ({"listeners": "PLAINTEXT://:0", "ssl.principal.mapping.rules": "RULE:x"}, "ssl.principal.mapping.rules",
     "invalid rule"),
])
def test_bad_security_settings_name_the_key(props: dict[str, str], key: str, reason: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        configure(props, tmp_path)
    assert info.value.key == key and reason in info.value.reason, str(info.value)


def test_every_listener_kind_with_per_listener_overrides(server_pem: str, tmp_path: Path) -> None:
    security = configure({
        "listeners": "PLAINTEXT://:0,CLIENTS://:1,CERTS://:2",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:SASL_SSL,CERTS:SSL",
        "inter.broker.listener.name": "CLIENTS",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.clients.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": server_pem,
        "listener.name.certs.ssl.client.auth": "required",
        "authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer", "super.users": "User:admin",
    }, tmp_path)
    listeners = security.listeners
    assert listeners["PLAINTEXT"].ssl_context is None and not listeners["PLAINTEXT"].uses_sasl
    assert listeners["CLIENTS"].sasl_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert listeners["CLIENTS"].plain_users == {"admin": "pw"}
    import ssl

    assert listeners["CERTS"].ssl_context is not None
    assert listeners["CERTS"].ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert listeners["CLIENTS"].ssl_context is not None
    assert listeners["CLIENTS"].ssl_context.verify_mode == ssl.CERT_NONE
    assert security.inter_broker is not None and security.inter_broker.protocol == "SASL_SSL"
    assert (security.inter_broker.sasl_mechanism, security.inter_broker.username) == ("PLAIN", "admin")
    assert security.authorizer is not None and security.authorizer.super_users == {"User:admin"}
