"""ACLs as the authorizer keeps them: which operations imply which, what CreateAcls accepts, what kafka-acls.sh
allows per resource type, and the ZooKeeper forms of ACLs and their change notifications. The vocabulary itself
(resource types, operations, patterns, bindings, filters) is the wire's: :mod:`sofakafka.protocol.acl`.

ZooKeeper form (``/kafka-acl/<Type>/<name>`` and ``/kafka-acl-extended/prefixed/<Type>/<prefix>``)::

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from sofakafka.protocol.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    # Kafka's AclAuthorizer: an ALLOW of any of these grants DESCRIBE; of ALTER_CONFIGS, DESCRIBE_CONFIGS.
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` -> (type, name), as Kafka's ``SecurityUtils.parseKafkaPrincipal``."""
    if not text:
        raise ValueError("principal must not be empty")
    kind, sep, name = text.partition(":")
    if not sep or not kind:
        raise ValueError(f"principal {text!r} is not in the form Type:name")
    return kind, name


# ----------------------------------------------------------------------------------------- validation


def validate_binding(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses ``binding`` (INVALID_REQUEST), or None: the broker's checks in Kafka 2.6.

    Kafka's broker does not check that the operation suits the resource type (a Group WRITE ACL is stored
    and never matters); kafka-acls.sh does, and so does our ``acls`` command (:data:`VALID_OPERATIONS`).
    """
    if binding.is_unknown:
        return "ACL binding contains unknown elements"
    if binding.pattern.name == "":
        return "Invalid empty resource name specified"
    try:
        parse_principal(binding.entry.principal)
    except ValueError as exc:
        return str(exc)
    return None


# Kafka's ResourceType -> the operations kafka-acls.sh accepts for it (AclEntry.supportedOperations in 2.6).
VALID_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS, AclOperation.ALL}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALL}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE, AclOperation.ALL}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.ALL}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE, AclOperation.ALL}),
    ResourceType.UNKNOWN: frozenset(),
    ResourceType.ANY: frozenset(),
}


# ------------------------------------------------------------------------------------------------ JSON


def entry_to_json(entry: AccessControlEntry) -> dict[str, str]:
    return {"principal": entry.principal, "permissionType": entry.permission_type.pascal,
            "operation": entry.operation.pascal, "host": entry.host}


def entry_from_json(doc: object) -> AccessControlEntry:
    if not isinstance(doc, dict):
        raise ValueError("an ACL entry must be a JSON object")
    try:
        principal, host = doc["principal"], doc["host"]
        operation = AclOperation.from_name(str(doc["operation"]))
        permission = AclPermissionType.from_name(str(doc["permissionType"]))
    except KeyError as exc:
        raise ValueError(f"ACL entry without {exc.args[0]}") from None
    if not isinstance(principal, str) or not isinstance(host, str):
        raise ValueError("ACL principal and host must be strings")
    return AccessControlEntry(principal, host, AclOperation(operation), AclPermissionType(permission))


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    return json.dumps({"version": 1, "acls": [entry_to_json(e) for e in sorted(set(entries))]},
                      separators=(",", ":")).encode()


def decode_acls(data: bytes) -> set[AccessControlEntry]:
    if not data:
        return set()
    doc = json.loads(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("acls", []), list):
        raise ValueError("ACL znode is not {\"version\":1,\"acls\":[...]}")
    return {entry_from_json(item) for item in doc.get("acls", [])}


def encode_extended_change(pattern: ResourcePattern) -> bytes:
    """``/kafka-acl-extended-changes/acl_changes_<seq>``: which resource pattern to re-read."""
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                       "patternType": pattern.pattern_type.name}, separators=(",", ":")).encode()


def encode_literal_change(pattern: ResourcePattern) -> bytes:
    """``/kafka-acl-changes/acl_changes_<seq>``: ``TYPE:name`` as 2.6 writes it (the Java enum name)."""
    return f"{pattern.resource_type.name}:{pattern.name}".encode()


def decode_change(data: bytes) -> ResourcePattern:
    """Either notification form back to the pattern it names."""
    text = data.decode("utf-8")
    if text.startswith("{"):
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("ACL change notification is not a JSON object")
        return ResourcePattern(ResourceType(ResourceType.from_name(str(doc["resourceType"]))), str(doc["name"]),
                               PatternType(PatternType.from_name(str(doc["patternType"]))))
    kind, sep, name = text.partition(":")
    if not sep:
        raise ValueError(f"ACL change notification {text!r} is not TYPE:name")
    return ResourcePattern(ResourceType(ResourceType.from_name(kind)), name, PatternType.LITERAL)
