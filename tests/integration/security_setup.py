"""Shared set-up of the security tests: test certificates (trustme), a broker with every kind of listener, and
the ``sofakafka`` command to add users and ACLs as an operator would.

Certificates: one CA signs the broker's (``localhost``, ``127.0.0.1``) and a client's (CN ``certuser``); a second
CA signs a client certificate the broker must refuse. The broker's listeners:

* ``SASL_PLAINTEXT`` (the readiness port, and the inter-broker listener with the broker's PLAIN login),
* ``SASL_SSL``,
* ``SSL`` with ``ssl.client.auth=requested`` (a client without a certificate is ``User:ANONYMOUS``),
* ``SSLREQ``, an SSL listener with ``ssl.client.auth=required``.

PLAIN users come from the JAAS config (``admin``, a super user, and ``plainuser``); SCRAM users are added with
``sofakafka users add`` through the admin's SASL login (``--command-config``).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import trustme

from tests.integration.conftest import _USED_BY_CURRENT_TEST, REPO, BrokerProcess, free_port

ADMIN = ("admin", "admin-secret")
PLAIN_USER = ("plainuser", "plain-secret")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_plainuser="plain-secret";')


@dataclass
class Pki:
    ca: str
    server: str
    client_cert: str
    client_key: str
    client_combined: str
    rogue_cert: str
    rogue_key: str


def make_pki(d: Path) -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(d / "ca.pem")
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(d / "server.pem")
    client = ca.issue_cert("certuser@example.com", common_name="certuser")
    client.cert_chain_pems[0].write_to_path(d / "client-cert.pem")
    client.private_key_pem.write_to_path(d / "client-key.pem")
    client.private_key_and_cert_chain_pem.write_to_path(d / "client.pem")
    rogue = trustme.CA().issue_cert("rogue@example.com", common_name="rogue")
    rogue.cert_chain_pems[0].write_to_path(d / "rogue-cert.pem")
    rogue.private_key_pem.write_to_path(d / "rogue-key.pem")
    return Pki(str(d / "ca.pem"), str(d / "server.pem"), str(d / "client-cert.pem"), str(d / "client-key.pem"),
               str(d / "client.pem"), str(d / "rogue-cert.pem"), str(d / "rogue-key.pem"))


@dataclass
class SecureBroker:
    broker: BrokerProcess
    pki: Pki
    ports: dict[str, int]
    admin_config: Path

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def sofakafka(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """The ``sofakafka`` command logged in as the admin over SASL_PLAINTEXT."""
        cmd = [sys.executable, "-m", "sofakafka", *args, "--bootstrap-server", self.address("SASL_PLAINTEXT"),
               "--command-config", str(self.admin_config)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
        if check:
            assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done


def secure_broker_overrides(pki: Pki, ports: dict[str, int], data_dir: Path) -> dict[str, str]:
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    return {
        "broker.id": "0",
        "log.dirs": str(data_dir),
        "listeners": listeners,
        "listener.security.protocol.map": ("SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,SSLREQ:SSL,"
                                           "PLAINTEXT:PLAINTEXT"),
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.server,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "ssl.client.auth": "requested",
        "listener.name.sslreq.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
        "sofakafka.authentication.timeout.ms": "3000",
    }


@contextlib.contextmanager
def running_secure_broker(base: Path, extra: dict[str, str] | None = None, *,
                          plaintext: bool = False) -> Iterator[SecureBroker]:
    """:func:`start_secure_broker`, killed when the block ends."""
    sb = start_secure_broker(base, extra, plaintext=plaintext)
    try:
        yield sb
    finally:
        sb.broker.kill()


def start_secure_broker(base: Path, extra: dict[str, str] | None = None, *, plaintext: bool = False) -> SecureBroker:
    """``plaintext``: a PLAINTEXT listener too (where nobody logs in)."""
    pki = make_pki(base / "pki")
    broker = BrokerProcess(base / "broker")
    ports = {"SASL_PLAINTEXT": broker.port, "SASL_SSL": free_port(), "SSL": free_port(), "SSLREQ": free_port()}
    if plaintext:
        ports["PLAINTEXT"] = free_port()
    broker.overrides = secure_broker_overrides(pki, ports, broker.data_dir) | (extra or {})
    admin_config = base / "admin.properties"
    admin_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret";\n')
    broker.start()
    return SecureBroker(broker, pki, ports, admin_config)


@contextlib.contextmanager
def used_by_this_test(sb: SecureBroker) -> Iterator[SecureBroker]:
    """A module's secure broker in one test: alive before and after it, and counted as the test's (its log is
    shown when the test fails)."""
    if sb.broker not in _USED_BY_CURRENT_TEST:
        _USED_BY_CURRENT_TEST.append(sb.broker)
    assert sb.broker.alive(), sb.broker.log_tail()
    yield sb
    assert sb.broker.alive(), sb.broker.log_tail()
