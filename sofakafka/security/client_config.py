"""Our client's TLS and SASL settings (:class:`~sofakafka.client.security.ClientSecurity`) built from
configuration: by the broker from its inter-broker listener's settings (:func:`client_security` with the
listener's ``ssl.*`` keys and JAAS login), or from client properties, the ``--command-config`` file of the
command-line tools (:func:`client_security_from_properties`), which takes the names Kafka's Java clients use
and, where they differ, librdkafka's:

* ``security.protocol`` — PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
* ``sasl.mechanism`` — PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the user from ``sasl.jaas.config``
  (``username="..." password="..."``) or ``sasl.username``/``sasl.password`` (librdkafka); a delegation token
  with SCRAM as Kafka's clients take it: ``username`` the token id, ``password`` its HMAC, ``tokenauth="true"``;
* ``ssl.truststore.location`` (PEM) or ``ssl.ca.location``; ``ssl.keystore.location`` (PEM key and chain) or
  ``ssl.certificate.location`` + ``ssl.key.location``; ``ssl.key.password``;
  ``ssl.endpoint.identification.algorithm`` (``https`` by default, empty to skip the host name check).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sofakafka.client.security import PROTOCOLS, ClientSecurity
from sofakafka.security import SecurityConfigError
from sofakafka.security.jaas import parse_jaas_config
from sofakafka.security.sasl import SUPPORTED_MECHANISMS
from sofakafka.security.scram import MECHANISMS as SCRAM_MECHANISMS
from sofakafka.security.tls import client_context

CLIENT_PROPERTIES = (
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type",
    "ssl.truststore.certificates", "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.key.password", "ssl.endpoint.identification.algorithm", "ssl.enabled.protocols",
    "ssl.cipher.suites",
    # librdkafka's names
    "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location", "ssl.certificate.location",
    "ssl.key.location",
)
"""The client properties that change how our client connects (the rest of a Java client's file is not ours)."""


def client_security(protocol: str, get: Callable[[str], str | None], *, mechanism: str | None = None,
                    username: str | None = None, password: str | None = None,
                    token_auth: bool = False) -> ClientSecurity:
    """Check the pieces fit and build them: a TLS context (from ``get``'s ``ssl.*`` keys) when the protocol
    needs one, a mechanism and a user for SASL. Problems are SecurityConfigError naming the key."""
    protocol = protocol.strip().upper()
    if protocol not in PROTOCOLS:
        raise SecurityConfigError("security.protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    ctx = client_context(get) if protocol in ("SSL", "SASL_SSL") else None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        if mechanism not in SUPPORTED_MECHANISMS:
            raise SecurityConfigError("sasl.mechanism",
                                      f"must be one of {', '.join(SUPPORTED_MECHANISMS)}, got {mechanism!r}")
        if not username or password is None:
            raise SecurityConfigError("sasl.jaas.config", f"{mechanism} needs a username and a password")
        if token_auth and mechanism not in SCRAM_MECHANISMS:
            raise SecurityConfigError("sasl.jaas.config", f"tokenauth (a delegation token) needs a SCRAM mechanism, "
                                                          f"not {mechanism}")
    return ClientSecurity(protocol, ctx, mechanism, username, password, token_auth)


def client_security_from_properties(props: Mapping[str, str]) -> ClientSecurity:
    """From client properties (a tool's ``--command-config``); the module docstring lists the names."""
    def get(key: str) -> str | None:
        aliases = {"ssl.truststore.location": ("ssl.truststore.location", "ssl.ca.location")}
        for name in aliases.get(key, (key,)):
            if name in props:
                return props[name]
        return None

    username = props.get("sasl.username")
    password = props.get("sasl.password")
    jaas = props.get("sasl.jaas.config")
    token_auth = False
    if jaas:
        options = parse_jaas_config("sasl.jaas.config", jaas)[0].options
        username = options.get("username", username)
        password = options.get("password", password)
        token_auth = options.get("tokenauth", "").lower() == "true"  # ScramLoginModule's option
    mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI")).strip().upper()
    return client_security(props.get("security.protocol", "PLAINTEXT"), get, mechanism=mechanism,
                           username=username, password=password, token_auth=token_auth)
