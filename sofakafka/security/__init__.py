"""Security: who a client is (TLS, SASL) and what it may do (ACLs), with Kafka 2.6's semantics.

Everything here is pure or sans-IO, so the broker drives it and tests replay it without sockets:

* :mod:`.acl` — resource types, pattern types, operations, permission types (Kafka's enum codes), ACL
  bindings and binding filters, and their ZooKeeper JSON.
* :mod:`.authorizer` — :class:`~.authorizer.AclAuthorizer`, Kafka's AclAuthorizer decision over an ACL cache.
* :mod:`.scram` — SCRAM credentials in Kafka's stored form (``salt=..,stored_key=..,server_key=..,iterations=..``).
* :mod:`.sasl` — SASL server state machines for PLAIN and SCRAM-SHA-256/512 (bytes in, bytes out).
* :mod:`.jaas` — the JAAS-style ``sasl.jaas.config`` values Kafka's PLAIN and SCRAM login modules take.
* :mod:`.principal` — principals and ``ssl.principal.mapping.rules``.
* :mod:`.tls` — :class:`ssl.SSLContext` objects from Kafka's ``ssl.*`` keys (PEM key stores and trust stores).
* :mod:`.store` — SCRAM users and ACLs in the metadata tree (``/config/users``, ``/kafka-acl*``) with change
  notifications, on any :class:`~sofakafka.controller.store.MetadataStore` backend.
* :mod:`.tokens` — delegation tokens (KIP-48): Kafka 2.6's lifetime rules, the HMAC, the stored form, and the
  cache SCRAM logins with ``tokenauth=true`` read; :mod:`.token_manager` keeps them in ``/delegation_token``.

Errors in configuration are :class:`SecurityConfigError` (the key and the reason), which the broker reports as
its own ``ConfigError``.

Layering (pyproject.toml's contracts, docs/architecture.md): the broker and the command-line tools use this
package; it uses controller/'s metadata store and protocol/, and never the broker, router/, pipelines/ or cli/.
"""

from __future__ import annotations


class SecurityConfigError(ValueError):
    """A security setting that cannot be used; the message starts with the key, as the broker's ConfigError."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


__all__ = ["SecurityConfigError"]
