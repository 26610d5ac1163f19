"""The users and ACLs pages' reads and writes, through the client like ``sofakafka users`` and ``sofakafka acls``.

Users are SCRAM credentials on the user config resource (DescribeConfigs / IncrementalAlterConfigs, as
``sofakafka users`` stores them; the credential is derived here, so the password never leaves the console's
process). ACLs are CreateAcls / DescribeAcls / DeleteAcls. What the console's own SASL user may not do comes back
as the cluster's error (CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED without an authorizer), shown as a sentence.
The forms' input is checked here first (a principal without its type, an operation the resource type does not
take, as kafka-acls.sh refuses it), so a bad form is a clear message rather than an ACL no check ever meets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sofakafka.client import AlterConfigOp, ConfigResourceType, KafkaClient
from sofakafka.console.cluster import ConsoleError
from sofakafka.protocol import acl
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.security.acl import VALID_OPERATIONS
from sofakafka.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredentialError, make_credential

RESOURCE_TYPES = tuple(t.name for t in acl.CONCRETE_RESOURCE_TYPES)
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = tuple(op.name for op in acl.CONCRETE_OPERATIONS)
PERMISSIONS = ("ALLOW", "DENY")
SCRAM_MECHANISMS: tuple[str, ...] = MECHANISMS
SCRAM_MIN_ITERATIONS: int = MIN_ITERATIONS


@dataclass(frozen=True, order=True)
class UserRow:
    name: str
    credentials: tuple[tuple[str, str], ...]
    """(mechanism, ``iterations=N``) pairs, as kafka-configs describes them."""


def user_rows(c: KafkaClient) -> list[UserRow]:
    results = c.describe_configs([(ConfigResourceType.USER, "", None)])
    for r in results:
        r.raise_for_error()
    return sorted(UserRow(r.resource_name, tuple((e.name, e.value or "") for e in r.entries)) for r in results
                  if r.entries)


def _user_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise ConsoleError("a user needs a name")
    return name


def add_user(c: KafkaClient, name: str, mechanism: str, password: str, iterations: int | None) -> str:
    """Sets (adds or replaces) the user's credential for ``mechanism``."""
    name = _user_name(name)
    if mechanism not in MECHANISMS:
        raise ConsoleError(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
    if not password:
        raise ConsoleError("a user needs a password")
    try:
        credential = make_credential(mechanism, password, iterations=iterations or MIN_ITERATIONS)
    except ScramCredentialError as exc:
        raise ConsoleError(str(exc)) from None
    for r in c.incremental_alter_configs({(ConfigResourceType.USER, name): [
            (mechanism, AlterConfigOp.SET, credential.to_kafka_string())]}):
        r.raise_for_error()
    return f"Set the {mechanism} credential of user {name}."


def delete_user(c: KafkaClient, name: str) -> str:
    """Removes every SCRAM credential the user has."""
    name = _user_name(name)
    results = c.describe_configs([(ConfigResourceType.USER, name, None)])
    for r in results:
        r.raise_for_error()
    mechanisms = [e.name for r in results for e in r.entries]
    if not mechanisms:
        raise ConsoleError(f"user {name} has no SCRAM credentials")
    for r in c.incremental_alter_configs({(ConfigResourceType.USER, name): [
            (m, AlterConfigOp.DELETE, None) for m in mechanisms]}):
        r.raise_for_error()
    return f"Deleted user {name} ({', '.join(mechanisms)})."


@dataclass(frozen=True, order=True)
class AclRow:
    principal: str
    host: str
    operation: str
    permission: str
    resource_type: str
    resource_name: str
    pattern_type: str

    def as_form(self) -> dict[str, str]:
        return {"principal": self.principal, "host": self.host, "operation": self.operation,
                "permission": self.permission, "resource_type": self.resource_type,
                "resource_name": self.resource_name, "pattern_type": self.pattern_type}


def acl_rows(c: KafkaClient) -> list[AclRow]:
    return sorted(AclRow(b.entry.principal, b.entry.host, b.entry.operation.name, b.entry.permission_type.name,
                         b.pattern.resource_type.name, b.pattern.name, b.pattern.pattern_type.name)
                  for b in c.describe_acls(acl.AclBindingFilter.any()))


def _choice(form: Mapping[str, str], key: str, allowed: tuple[str, ...], what: str) -> str:
    value = form.get(key, "").strip().upper()
    if value not in allowed:
        raise ConsoleError(f"{what} must be one of {', '.join(allowed)}, got {form.get(key, '')!r}")
    return value


def binding_from_form(form: Mapping[str, str]) -> acl.AclBinding:
    """An ACL from the page's form, checked as kafka-acls.sh checks its options."""
    principal = form.get("principal", "").strip()
    if ":" not in principal or not principal.split(":", 1)[1]:
        raise ConsoleError(f"a principal is TYPE:NAME (User:alice, User:*), got {principal!r}")
    host = form.get("host", "").strip() or acl.WILDCARD_HOST
    rtype = acl.ResourceType[_choice(form, "resource_type", RESOURCE_TYPES, "the resource type")]
    pattern = acl.PatternType[_choice(form, "pattern_type", PATTERN_TYPES, "the pattern type")]
    operation = acl.AclOperation[_choice(form, "operation", OPERATIONS, "the operation")]
    permission = acl.AclPermissionType[_choice(form, "permission", PERMISSIONS, "the permission")]
    name = acl.CLUSTER_NAME if rtype == acl.ResourceType.CLUSTER else form.get("resource_name", "").strip()
    if not name:
        raise ConsoleError(f"a {rtype.name} ACL needs a resource name (* for every one)")
    if operation not in VALID_OPERATIONS[rtype]:
        valid = ", ".join(sorted(op.name for op in VALID_OPERATIONS[rtype]))
        raise ConsoleError(f"{operation.name} is not an operation on a {rtype.name} (one of {valid})")
    return acl.AclBinding(acl.ResourcePattern(rtype, name, pattern),
                          acl.AccessControlEntry(principal, host, operation, permission))


def _describe(b: acl.AclBinding) -> str:
    return (f"{b.entry.permission_type.name} {b.entry.principal} {b.entry.operation.name} from {b.entry.host} on "
            f"{b.pattern.resource_type.name} {b.pattern.pattern_type.name} {b.pattern.name}")


def add_acl(c: KafkaClient, form: Mapping[str, str]) -> str:
    binding = binding_from_form(form)
    for r in c.create_acls([binding]):
        if r.error != ErrorCode.NONE:
            raise KafkaError(r.error, r.error_message or r.error.name)
    return f"Added ACL: {_describe(binding)}."


def delete_acl(c: KafkaClient, form: Mapping[str, str]) -> str:
    """Deletes exactly the one ACL the form names (a filter of its every field)."""
    b = binding_from_form(form)
    flt = acl.AclBindingFilter(
        acl.ResourcePatternFilter(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type),
        acl.AccessControlEntryFilter(b.entry.principal, b.entry.host, b.entry.operation, b.entry.permission_type))
    deleted = c.delete_acls([flt])[0]
    if not deleted:
        raise ConsoleError(f"no such ACL (deleted already?): {_describe(b)}")
    return f"Deleted ACL: {_describe(b)}."
