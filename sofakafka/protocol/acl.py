"""Kafka's ACL vocabulary as the wire carries it: resource types, pattern types, operations and permission types
(their INT8 codes in CreateAcls, DescribeAcls and DeleteAcls), resource patterns, access control entries, bindings
and binding filters with Kafka's matching rules. The client sends these and the broker's authorizer
(sofakafka/security/) decides with them, as Kafka's clients and broker share ``org.apache.kafka.common.acl``.

``UNKNOWN`` and ``ANY`` exist only in filters or as "could not parse". Names are Kafka's: ``Topic``, ``Group``,
``TransactionalId`` in ZooKeeper (PascalCase, :attr:`pascal`), ``TOPIC``, ``TRANSACTIONAL_ID`` in change
notifications and on the command line; :meth:`from_name` accepts either, case-insensitively, as Kafka's
``fromString``.

Matching rules, from Kafka's ``ResourcePatternFilter.matches`` and ``AccessControlEntryFilter.matches``:

* a filter's resource type ANY matches every type; its name None matches every name;
* pattern type LITERAL or PREFIXED matches only patterns of that type with exactly the filter's name;
  ANY matches either type with exactly that name; MATCH matches every pattern that would apply to a
  resource of that name: the literal name, the literal wildcard ``*``, and every prefix of the name;
* principal and host None match anything; operation and permission type ANY match anything.
"""

from __future__ import annotations

import enum
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
