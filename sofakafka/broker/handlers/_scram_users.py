"""SCRAM users over the config APIs: how ``sofakafka users`` creates, lists and deletes users.

Kafka 2.6 has no admin API for SCRAM credentials (AlterUserScramCredentials is 2.7's KIP-554), and its
kafka-configs writes ``/config/users/<user>`` straight into ZooKeeper. Our command-line tools speak only the
protocol, so the broker takes the same write through the config APIs, on a config resource type of our own:

* **resource type 100 ("USER", a sofakafka extension; Kafka's types are 2, 4, 8), resource name = the user.**
* IncrementalAlterConfigs: ``SET`` of ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` to a credential in Kafka's stored
  form (``salt=..,stored_key=..,server_key=..,iterations=..``: the client derives it, the password never
  travels), ``DELETE`` of a mechanism removes that credential. Anything else is INVALID_REQUEST / INVALID_CONFIG.
* DescribeConfigs: one entry per mechanism the user has, valued ``iterations=<n>`` (never the keys); the empty
  resource name describes every user, one result each. A user without credentials has no entries.

The write goes through :class:`~sofakafka.security.store.SecurityMetadata`: ``/config/users/<url-encoded user>``
plus its ``/config/changes`` notification, exactly what kafka-configs writes, so every broker (and a Kafka
broker sharing the ZooKeeper) picks the user up at once. Authorization is that of broker configs: ALTER_CONFIGS
or DESCRIBE_CONFIGS on the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

from sofakafka.broker.handlers import RequestContext
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential, ScramCredentialError
from sofakafka.security.store import SecurityMetadata, SecurityStoreError

RESOURCE_USER = 100
OP_SET, OP_DELETE = 0, 1


def _metadata(ctx: RequestContext) -> SecurityMetadata:
    metadata = ctx.broker.security_metadata
    if metadata is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the broker has not loaded its users yet")
    return metadata


def describe(ctx: RequestContext, name: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """(user, [(mechanism, "iterations=<n>")]) for ``name``, or for every user when ``name`` is empty."""
    users = _metadata(ctx).users()
    names = sorted(users) if name == "" else [name]
    out = []
    for user in names:
        creds = users.get(user, {})
        out.append((user, [(m, f"iterations={c.iterations}") for m, c in sorted(creds.items())]))
    return out


def alter(ctx: RequestContext, name: str, ops: Sequence[tuple[str, int, str | None]], validate_only: bool) -> None:
    """Apply (mechanism, operation, value) changes to user ``name``. Blocking: run off the loop."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "A user name is required")
    changes: list[tuple[str, ScramCredential | None]] = []
    seen: set[str] = set()
    for key, op, value in ops:
        if key not in MECHANISMS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown SCRAM mechanism {key!r}, expected "
                                                       f"{' or '.join(MECHANISMS)}")
        if key in seen:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        seen.add(key)
        if op == OP_DELETE:
            changes.append((key, None))
            continue
        if op != OP_SET or value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{key}: only SET (with a credential) and DELETE apply to "
                                                        "SCRAM credentials")
        try:
            credential = ScramCredential.from_kafka_string(value)
        except ScramCredentialError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key}: {exc}") from None
        if credential.iterations < MIN_ITERATIONS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key}: iterations must be at least {MIN_ITERATIONS}, got "
                                                       f"{credential.iterations}")
        changes.append((key, credential))
    if validate_only:
        return
    metadata = _metadata(ctx)
    try:
        for key, change in changes:
            if change is None:
                if not metadata.delete_scram_credential(name, key):
                    raise KafkaError(ErrorCode.INVALID_CONFIG,
                                     f"Attempt to delete a user credential that does not exist: {name} {key}")
            else:
                metadata.set_scram_credential(name, key, change)
    except SecurityStoreError as exc:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from None
