"""The client side of TLS and SASL: what our own connections (inter-broker links, the command-line client)
need to reach a secured listener. Sans-IO like the server side: the connection code moves the tokens.

:class:`ClientSecurity` is built either by the broker (its inter-broker listener's settings) or from client
properties, the ``--command-config`` file of the command-line tools, which takes the names Kafka's Java
clients use and, where they differ, librdkafka's:

* ``security.protocol`` — PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
* ``sasl.mechanism`` — PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the user from ``sasl.jaas.config``
  (``username="..." password="..."``) or ``sasl.username``/``sasl.password`` (librdkafka);
* ``ssl.truststore.location`` (PEM) or ``ssl.ca.location``; ``ssl.keystore.location`` (PEM key and chain) or
  ``ssl.certificate.location`` + ``ssl.key.location``; ``ssl.key.password``;
  ``ssl.endpoint.identification.algorithm`` (``https`` by default, empty to skip the host name check).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import scramp

from sofakafka.security import SecurityConfigError
from sofakafka.security.jaas import parse_jaas_config
from sofakafka.security.sasl import PLAIN, SUPPORTED_MECHANISMS
from sofakafka.security.tls import client_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class SaslClientError(Exception):
    """The server's answer cannot be right (a SCRAM server signature that does not verify)."""


class SaslClient:
    """``first()`` is the first token; ``respond(challenge)`` the next one, or None when nothing is left."""

    mechanism: str

    def first(self) -> bytes:
        raise NotImplementedError

    def respond(self, challenge: bytes) -> bytes | None:
        raise NotImplementedError


class PlainClient(SaslClient):
    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = f"\x00{username}\x00{password}".encode()

    def first(self) -> bytes:
        return self._token

    def respond(self, challenge: bytes) -> bytes | None:
        return None


class ScramClient(SaslClient):
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._client = scramp.ScramClient([mechanism], username, password)
        self._step = 0

    def first(self) -> bytes:
        return str(self._client.get_client_first()).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        try:
            if self._step == 0:
                self._step = 1
                self._client.set_server_first(challenge.decode())
                return str(self._client.get_client_final()).encode()
            if self._step == 1:
                self._step = 2
                self._client.set_server_final(challenge.decode())
                return None
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise SaslClientError(f"{self.mechanism}: the server's answer does not verify: {exc}") from None
        return None


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def sasl_client(self) -> SaslClient:
        assert self.sasl_mechanism and self.username is not None and self.password is not None
        if self.sasl_mechanism == PLAIN:
            return PlainClient(self.username, self.password)
        return ScramClient(self.sasl_mechanism, self.username, self.password)

    @classmethod
    def build(cls, protocol: str, get: Callable[[str], str | None], *, mechanism: str | None = None,
              username: str | None = None, password: str | None = None, key_prefix: str = "") -> ClientSecurity:
        """Check the pieces fit: an SSL context when the protocol needs one, a mechanism and a user for SASL."""
        protocol = protocol.strip().upper()
        if protocol not in PROTOCOLS:
            raise SecurityConfigError(f"{key_prefix}security.protocol",
                                      f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        ctx = client_context(get) if protocol in ("SSL", "SASL_SSL") else None
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            if mechanism not in SUPPORTED_MECHANISMS:
                raise SecurityConfigError(f"{key_prefix}sasl.mechanism",
                                          f"must be one of {', '.join(SUPPORTED_MECHANISMS)}, got {mechanism!r}")
            if not username or password is None:
                raise SecurityConfigError(f"{key_prefix}sasl.jaas.config",
                                          f"{mechanism} needs a username and a password")
        return cls(protocol, ctx, mechanism, username, password)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """From client properties (``--command-config``); see the module docstring for the names."""
        def get(key: str) -> str | None:
            aliases = {"ssl.truststore.location": ("ssl.truststore.location", "ssl.ca.location")}
            for name in aliases.get(key, (key,)):
                if name in props:
                    return props[name]
            return None

        username = props.get("sasl.username")
        password = props.get("sasl.password")
        jaas = props.get("sasl.jaas.config")
        if jaas:
            options = parse_jaas_config("sasl.jaas.config", jaas)[0].options
            username = options.get("username", username)
            password = options.get("password", password)
        cert, key = props.get("ssl.certificate.location"), props.get("ssl.key.location")
        if cert and key and "ssl.keystore.location" not in props:
            combined = _combined_pem(cert, key)

            def get_with_keystore(k: str) -> str | None:
                return combined if k == "ssl.keystore.location" else get(k)
            getter: Callable[[str], str | None] = get_with_keystore
        else:
            getter = get
        mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI")).strip().upper()
        return cls.build(props.get("security.protocol", "PLAINTEXT"), getter, mechanism=mechanism,
                         username=username, password=password)


def _combined_pem(cert: str, key: str) -> str:
    """librdkafka keeps certificate and key apart; load_cert_chain takes them apart too, but our keystore
    reader takes one file: put both in a private temporary file next to nothing else."""
    import tempfile

    for path, name in ((cert, "ssl.certificate.location"), (key, "ssl.key.location")):
        if not os.path.isfile(path):
            raise SecurityConfigError(name, f"no such file {path!r}")
    fd, path = tempfile.mkstemp(prefix="sofakafka-client-", suffix=".pem")
    with os.fdopen(fd, "w") as out:
        for part in (key, cert):
            with open(part) as fh:
                out.write(fh.read().rstrip() + "\n")
    return path
