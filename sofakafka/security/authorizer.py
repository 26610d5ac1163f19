"""Kafka 2.6's AclAuthorizer decision, over an in-memory cache of the ACLs in the metadata tree.

For one action (principal, client host, operation, resource type, resource name):

1. A super user (``super.users``, ``;``-separated principals) is allowed everything.
2. The ACLs that apply are those of the same resource type whose pattern matches the name: the LITERAL
   pattern of that very name, the LITERAL wildcard ``*``, and every PREFIXED pattern the name starts with.
   A PREFIXED Topic ACL applies to topics only, never to a group of the same prefix.
3. No ACL applies at all: allowed iff ``allow.everyone.if.no.acl.found``.
4. A DENY entry for the principal (or ``User:*``), for the operation itself (or ALL), from the host (or ``*``)
   denies: DENY wins over any ALLOW.
5. Otherwise an ALLOW entry (same principal/host matching) for the operation, ALL, or an operation that
   implies it allows: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
   Implication works for ALLOW only: DENY READ does not deny DESCRIBE.
6. Nothing allowed it: denied (there were ACLs, just none for this principal).

The cache is replaced one resource pattern at a time by whoever watches the store (:mod:`.store`); readers
never lock: each update swaps in a new dict, and a lookup works on the dict it read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from sofakafka.protocol import acl
from sofakafka.security.acl import IMPLIED_BY

log = logging.getLogger("sofakafka.authorizer")

_Acls = Mapping[acl.ResourcePattern, frozenset[acl.AccessControlEntry]]


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka does not split on commas: a principal of an
    SSL certificate's distinguished name contains them)."""
    if not text:
        return frozenset()
    return frozenset(p.strip() for p in text.split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: _Acls = MappingProxyType({})
        self._write_lock = threading.Lock()

    # ------------------------------------------------------------------------------------------ cache

    def update_resource(self, pattern: acl.ResourcePattern, entries: Iterable[acl.AccessControlEntry]) -> None:
        """The store's ACLs of ``pattern`` are now ``entries`` (empty: the pattern has none left)."""
        frozen = frozenset(entries)
        with self._write_lock:
            acls = dict(self._acls)
            if frozen:
                acls[pattern] = frozen
            else:
                acls.pop(pattern, None)
            self._acls = MappingProxyType(acls)

    def replace_all(self, acls: Mapping[acl.ResourcePattern, Iterable[acl.AccessControlEntry]]) -> None:
        with self._write_lock:
            self._acls = MappingProxyType({p: frozenset(e) for p, e in acls.items() if e})

    def acls(self, flt: acl.AclBindingFilter | None = None) -> list[acl.AclBinding]:
        """Every binding the filter matches (all without one), sorted for stable answers."""
        out = [acl.AclBinding(p, e) for p, entries in self._acls.items() for e in entries]
        if flt is not None:
            out = [b for b in out if flt.matches(b)]
        return sorted(out)

    def entries(self, pattern: acl.ResourcePattern) -> frozenset[acl.AccessControlEntry]:
        return self._acls.get(pattern, frozenset())

    # --------------------------------------------------------------------------------------- decision

    def matching_acls(self, resource_type: acl.ResourceType, name: str) -> list[acl.AccessControlEntry]:
        acls = self._acls
        found: list[acl.AccessControlEntry] = []
        for literal in (name, acl.WILDCARD_RESOURCE):
            found.extend(acls.get(acl.ResourcePattern(resource_type, literal, acl.PatternType.LITERAL), ()))
            if name == acl.WILDCARD_RESOURCE:
                break
        for end in range(1, len(name) + 1):
            found.extend(acls.get(acl.ResourcePattern(resource_type, name[:end], acl.PatternType.PREFIXED), ()))
        return found

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(self, principal: str, host: str, operation: acl.AclOperation, resource_type: acl.ResourceType,
                  name: str, *, log_if_denied: bool = True, log_if_allowed: bool = True) -> bool:
        allowed = self._decide(principal, host, operation, resource_type, name)
        if not allowed and log_if_denied:
            log.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:%s",
                     principal, operation.pascal, host, resource_type.pascal, name)
        elif allowed and log_if_allowed and log.isEnabledFor(logging.DEBUG):
            log.debug("Principal = %s is Allowed Operation = %s from host = %s on resource = %s:%s",
                      principal, operation.pascal, host, resource_type.pascal, name)
        return allowed

    def _decide(self, principal: str, host: str, operation: acl.AclOperation, resource_type: acl.ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self.matching_acls(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        principals = (principal, acl.WILDCARD_PRINCIPAL)
        hosts = (host, acl.WILDCARD_HOST)

        def exists(op: acl.AclOperation, permission: acl.AclPermissionType) -> bool:
            return any(
                e.permission_type == permission and e.principal in principals and e.host in hosts
                and (e.operation == op or e.operation == acl.AclOperation.ALL)
                for e in acls
            )

        if exists(operation, acl.AclPermissionType.DENY):
            return False
        return any(exists(op, acl.AclPermissionType.ALLOW) for op in IMPLIED_BY.get(operation, (operation,)))

    def authorized_operations(self, principal: str, host: str, resource_type: acl.ResourceType, name: str,
                              supported: Iterable[acl.AclOperation]) -> set[acl.AclOperation]:
        """KIP-430: which of ``supported`` this principal may do on the resource (no logging)."""
        return {op for op in supported
                if self.authorize(principal, host, op, resource_type, name, log_if_denied=False,
                                  log_if_allowed=False)}


def authorized_operations_bits(ops: Iterable[acl.AclOperation]) -> int:
    """The INT32 bit field of Metadata/DescribeGroups ``authorized_operations``: bit n for operation code n."""
    bits = 0
    for op in ops:
        bits |= 1 << int(op)
    return bits
