"""Security: SASL server mechanisms (PLAIN, SCRAM-SHA-256/512) as sans-IO exchanges, the SCRAM credential format
kept in the metadata store (``/config/users``), TLS contexts for listeners, and the ACL authorizer with Kafka's
semantics (literal and prefixed patterns, allow and deny, hosts, super users).

Layering (pyproject.toml's contracts, docs/architecture.md): the broker uses this package; it uses controller/'s
metadata store and protocol/, and never the broker, router/, pipelines/ or cli/.
"""
