"""ACLs as Kafka 2.6 models them: resource patterns, access control entries, bindings and binding filters.

The enum values are Kafka's wire codes (CreateAcls/DescribeAcls/DeleteAcls carry them as INT8); ``UNKNOWN``
and ``ANY`` exist only in filters or as "could not parse". Names are Kafka's: ``Topic``, ``Group``,
``TransactionalId`` in ZooKeeper (PascalCase), ``TOPIC``, ``TRANSACTIONAL_ID`` in change notifications and
on the command line; :meth:`from_name` accepts either, case-insensitively, as Kafka's ``fromString``.

Matching rules, from Kafka's ``ResourcePatternFilter.matches`` and ``AccessControlEntryFilter.matches``:

* a filter's resource type ANY matches every type; its name None matches every name;
* pattern type LITERAL or PREFIXED matches only patterns of that type with exactly the filter's name;
  ANY matches either type with exactly that name; MATCH matches every pattern that would apply to a
  resource of that name: the literal name, the literal wildcard ``*``, and every prefix of the name;
* principal and host None match anything; operation and permission type ANY match anything.

ZooKeeper form (``/kafka-acl/<Type>/<name>`` and ``/kafka-acl-extended/prefixed/<Type>/<prefix>``)::

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class _KafkaEnum(enum.IntEnum):
    """An enum with Kafka's code (value), Kafka's constant name (``name``) and the PascalCase form."""

    @property
    def pascal(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_name(cls, text: str) -> _KafkaEnum:
        key = text.strip().replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        raise ValueError(f"unknown {cls.__name__} {text!r}")

    @classmethod
    def from_code(cls, code: int) -> _KafkaEnum:
        try:
            return cls(code)
        except ValueError:
            return cls(0)  # UNKNOWN, as Kafka's fromCode


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CONCRETE_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                           ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN)
CONCRETE_OPERATIONS = tuple(op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY))

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


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __post_init__(self) -> None:
        if self.resource_type in (ResourceType.ANY,) or self.pattern_type in (PatternType.ANY, PatternType.MATCH):
            raise ValueError(f"a resource pattern cannot be a filter: {self}")

    @property
    def is_unknown(self) -> bool:
        return ResourceType.UNKNOWN == self.resource_type or PatternType.UNKNOWN == self.pattern_type

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, " \
               f"patternType={self.pattern_type.name})"


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @property
    def is_unknown(self) -> bool:
        return AclOperation.UNKNOWN == self.operation or AclPermissionType.UNKNOWN == self.permission_type

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")

    def to_json(self) -> dict[str, str]:
        return {"principal": self.principal, "permissionType": self.permission_type.pascal,
                "operation": self.operation.pascal, "host": self.host}

    @classmethod
    def from_json(cls, doc: object) -> AccessControlEntry:
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
        return cls(principal, host, AclOperation(operation), AclPermissionType(permission))


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown


@dataclass(frozen=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that apply to a resource named self.name.
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    @property
    def is_unknown(self) -> bool:
        return ResourceType.UNKNOWN == self.resource_type or PatternType.UNKNOWN == self.pattern_type


@dataclass(frozen=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type

    @property
    def is_unknown(self) -> bool:
        return AclOperation.UNKNOWN == self.operation or AclPermissionType.UNKNOWN == self.permission_type


@dataclass(frozen=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown

    @classmethod
    def any(cls) -> AclBindingFilter:
        return cls(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                   AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))


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


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    return json.dumps({"version": 1, "acls": [e.to_json() for e in sorted(set(entries))]},
                      separators=(",", ":")).encode()


def decode_acls(data: bytes) -> set[AccessControlEntry]:
    if not data:
        return set()
    doc = json.loads(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("acls", []), list):
        raise ValueError("ACL znode is not {\"version\":1,\"acls\":[...]}")
    return {AccessControlEntry.from_json(item) for item in doc.get("acls", [])}


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
