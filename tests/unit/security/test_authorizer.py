"""The ACL authorizer against a small, separately written model of Kafka 2.6's AclAuthorizer rules."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.protocol import acl as wire
from sofakafka.security.acl import (
    decode_acls,
    decode_change,
    encode_acls,
    encode_extended_change,
    encode_literal_change,
    validate_binding,
)
from sofakafka.security.authorizer import AclAuthorizer, authorized_operations_bits, parse_super_users

# --------------------------------------------------------------------------------- the reference model
# Plain strings and a brute-force scan, written from Kafka's documented rules, sharing no code with
# sofakafka.security: if the two agree over every drawn case, the implementation follows the rules.


@dataclass(frozen=True)
class RefAcl:
    rtype: str
    rname: str
    ptype: str  # "LITERAL" | "PREFIXED"
    principal: str
    host: str
    op: str
    perm: str  # "ALLOW" | "DENY"


IMPLIES = {
    "DESCRIBE": {"DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"},
    "DESCRIBE_CONFIGS": {"DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
}


def ref_allowed(acls: list[RefAcl], principal: str, host: str, op: str, rtype: str, name: str,
                supers: set[str], allow_everyone: bool) -> bool:
    if principal in supers:
        return True

    def on_resource(a: RefAcl) -> bool:
        if a.rtype != rtype:
            return False
        if a.ptype == "LITERAL":
            return a.rname == name or a.rname == "*"
        return len(name) >= len(a.rname) and name[: len(a.rname)] == a.rname

    applicable = [a for a in acls if on_resource(a)]
    if not applicable:
        return allow_everyone

    def for_me(a: RefAcl) -> bool:
        return a.principal in (principal, "User:*") and a.host in (host, "*")

    if any(for_me(a) and a.perm == "DENY" and a.op in (op, "ALL") for a in applicable):
        return False
    granting = IMPLIES.get(op, {op})
    return any(for_me(a) and a.perm == "ALLOW" and (a.op == "ALL" or a.op in granting) for a in applicable)


def to_binding(a: RefAcl) -> wire.AclBinding:
    return wire.AclBinding(
        wire.ResourcePattern(wire.ResourceType[a.rtype], a.rname, wire.PatternType[a.ptype]),
        wire.AccessControlEntry(a.principal, a.host, wire.AclOperation[a.op], wire.AclPermissionType[a.perm]),
    )


def authorizer_with(acls: list[RefAcl], supers: set[str] = frozenset(), allow_everyone: bool = False) -> AclAuthorizer:
    auth = AclAuthorizer(supers, allow_everyone)
    grouped: dict[wire.ResourcePattern, set[wire.AccessControlEntry]] = {}
    for a in acls:
        b = to_binding(a)
        grouped.setdefault(b.pattern, set()).add(b.entry)
    auth.replace_all(grouped)
    return auth


RTYPES = ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN"]
OPS = [op.name for op in wire.AclOperation if op not in (wire.AclOperation.UNKNOWN, wire.AclOperation.ANY)]
NAMES = ["o", "or", "orders", "orders-1", "ord", "x", "*", "orders-"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["10.0.0.1", "10.0.0.2", "*"]

ref_acls = st.builds(
    RefAcl,
    rtype=st.sampled_from(RTYPES),
    rname=st.sampled_from(NAMES),
    ptype=st.sampled_from(["LITERAL", "PREFIXED"]),
    principal=st.sampled_from(PRINCIPALS),
    host=st.sampled_from(HOSTS),
    op=st.sampled_from(OPS),
    perm=st.sampled_from(["ALLOW", "DENY"]),
)


@given(
    acls=st.lists(ref_acls, max_size=8),
    principal=st.sampled_from(["User:alice", "User:bob", "User:carol"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    op=st.sampled_from([o for o in OPS if o != "ALL"]),
    rtype=st.sampled_from(RTYPES),
    name=st.sampled_from([n for n in NAMES if n != "*"] + ["orders-2", "other"]),
    supers=st.sets(st.sampled_from(["User:alice", "User:bob"]), max_size=1),
    allow_everyone=st.booleans(),
)
def test_authorizer_agrees_with_the_reference_model(acls, principal, host, op, rtype, name, supers,
                                                    allow_everyone) -> None:
    auth = authorizer_with(acls, supers, allow_everyone)
    expected = ref_allowed(acls, principal, host, op, rtype, name, supers, allow_everyone)
    got = auth.authorize(principal, host, wire.AclOperation[op], wire.ResourceType[rtype], name, log_if_denied=False)
    assert got == expected


# ------------------------------------------------------------------------------------------ edge cases


def acl(rtype: str, rname: str, ptype: str, op: str, perm: str = "ALLOW", principal: str = "User:alice",
        host: str = "*") -> RefAcl:
    return RefAcl(rtype, rname, ptype, principal, host, op, perm)


def allowed(auth: AclAuthorizer, op: str, rtype: str, name: str, principal: str = "User:alice",
            host: str = "10.0.0.1") -> bool:
    return auth.authorize(principal, host, wire.AclOperation[op], wire.ResourceType[rtype], name, log_if_denied=False)


def test_a_prefixed_topic_acl_does_not_grant_a_group_of_the_same_prefix() -> None:
    auth = authorizer_with([acl("TOPIC", "orders-", "PREFIXED", "READ")])
    assert allowed(auth, "READ", "TOPIC", "orders-eu")
    assert not allowed(auth, "READ", "GROUP", "orders-eu")
    assert not allowed(auth, "READ", "GROUP", "orders-")


def test_prefix_matches_at_its_edges() -> None:
    auth = authorizer_with([acl("TOPIC", "orders", "PREFIXED", "READ")])
    assert allowed(auth, "READ", "TOPIC", "orders")        # equal
    assert not allowed(auth, "READ", "TOPIC", "order")     # one shorter
    assert allowed(auth, "READ", "TOPIC", "ordersx")       # one longer
    assert not allowed(auth, "READ", "TOPIC", "xorders")   # not a prefix


def test_literal_matches_only_its_name_and_the_wildcard_matches_every_name() -> None:
    auth = authorizer_with([acl("TOPIC", "orders", "LITERAL", "WRITE")])
    assert allowed(auth, "WRITE", "TOPIC", "orders")
    assert not allowed(auth, "WRITE", "TOPIC", "orders1")
    assert not allowed(auth, "WRITE", "TOPIC", "order")
    auth = authorizer_with([acl("TOPIC", "*", "LITERAL", "WRITE")])
    assert allowed(auth, "WRITE", "TOPIC", "anything")
    assert not allowed(auth, "WRITE", "GROUP", "anything")


def test_deny_wins_over_allow() -> None:
    auth = authorizer_with([acl("TOPIC", "*", "LITERAL", "ALL"), acl("TOPIC", "orders-", "PREFIXED", "WRITE", "DENY")])
    assert allowed(auth, "READ", "TOPIC", "orders-1")
    assert not allowed(auth, "WRITE", "TOPIC", "orders-1")
    assert allowed(auth, "WRITE", "TOPIC", "payments")


def test_implied_operations_allow_but_do_not_deny() -> None:
    for op in ("READ", "WRITE", "DELETE", "ALTER"):
        auth = authorizer_with([acl("TOPIC", "t", "LITERAL", op)])
        assert allowed(auth, "DESCRIBE", "TOPIC", "t"), op
    auth = authorizer_with([acl("TOPIC", "t", "LITERAL", "CREATE")])
    assert not allowed(auth, "DESCRIBE", "TOPIC", "t")
    auth = authorizer_with([acl("TOPIC", "t", "LITERAL", "ALTER_CONFIGS")])
    assert allowed(auth, "DESCRIBE_CONFIGS", "TOPIC", "t")
    assert not allowed(auth, "DESCRIBE", "TOPIC", "t")
    # DENY READ does not deny DESCRIBE (implication is for ALLOW only).
    auth = authorizer_with([acl("TOPIC", "t", "LITERAL", "DESCRIBE"), acl("TOPIC", "t", "LITERAL", "READ", "DENY")])
    assert allowed(auth, "DESCRIBE", "TOPIC", "t")
    assert not allowed(auth, "READ", "TOPIC", "t")


def test_hosts_and_the_wildcard_principal() -> None:
    auth = authorizer_with([acl("TOPIC", "t", "LITERAL", "READ", host="10.0.0.1")])
    assert allowed(auth, "READ", "TOPIC", "t", host="10.0.0.1")
    assert not allowed(auth, "READ", "TOPIC", "t", host="10.0.0.2")
    auth = authorizer_with([acl("TOPIC", "t", "LITERAL", "READ", principal="User:*")])
    assert allowed(auth, "READ", "TOPIC", "t", principal="User:anyone")


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    auth = authorizer_with([acl("TOPIC", "t", "LITERAL", "READ", "DENY", principal="User:*")], {"User:admin"})
    assert allowed(auth, "READ", "TOPIC", "t", principal="User:admin")
    assert not allowed(auth, "READ", "TOPIC", "t", principal="User:bob")
    empty = authorizer_with([], allow_everyone=True)
    assert allowed(empty, "WRITE", "TOPIC", "t", principal="User:bob")
    # An ACL for someone else on the resource: allow.everyone no longer applies to it.
    some = authorizer_with([acl("TOPIC", "t", "LITERAL", "READ")], allow_everyone=True)
    assert not allowed(some, "READ", "TOPIC", "t", principal="User:bob")
    assert allowed(some, "READ", "TOPIC", "u", principal="User:bob")
    assert not allowed(authorizer_with([]), "READ", "TOPIC", "t")
    assert parse_super_users(" User:a ; User:CN=x,O=y ;") == {"User:a", "User:CN=x,O=y"}


def test_authorized_operations_bits() -> None:
    auth = authorizer_with([acl("TOPIC", "t", "LITERAL", "READ")])
    ops = auth.authorized_operations("User:alice", "10.0.0.1", wire.ResourceType.TOPIC, "t",
                                     [wire.AclOperation.READ, wire.AclOperation.WRITE, wire.AclOperation.DESCRIBE])
    assert ops == {wire.AclOperation.READ, wire.AclOperation.DESCRIBE}
    assert authorized_operations_bits(ops) == (1 << 3) | (1 << 8)


# ---------------------------------------------------------------------------------------------- filters


def pattern(rtype: str, name: str, ptype: str) -> wire.ResourcePattern:
    return wire.ResourcePattern(wire.ResourceType[rtype], name, wire.PatternType[ptype])


@pytest.mark.parametrize(("ftype", "fname", "fpattern", "target", "expected"), [
    ("ANY", None, "ANY", pattern("TOPIC", "a", "PREFIXED"), True),
    ("GROUP", None, "ANY", pattern("TOPIC", "a", "LITERAL"), False),
    ("TOPIC", "abc", "LITERAL", pattern("TOPIC", "abc", "LITERAL"), True),
    ("TOPIC", "abc", "LITERAL", pattern("TOPIC", "abc", "PREFIXED"), False),
    ("TOPIC", "abc", "ANY", pattern("TOPIC", "abc", "PREFIXED"), True),
    ("TOPIC", "abc", "ANY", pattern("TOPIC", "ab", "PREFIXED"), False),
    ("TOPIC", "abc", "MATCH", pattern("TOPIC", "ab", "PREFIXED"), True),
    ("TOPIC", "abc", "MATCH", pattern("TOPIC", "abc", "PREFIXED"), True),
    ("TOPIC", "abc", "MATCH", pattern("TOPIC", "abcd", "PREFIXED"), False),
    ("TOPIC", "abc", "MATCH", pattern("TOPIC", "*", "LITERAL"), True),
    ("TOPIC", "abc", "MATCH", pattern("TOPIC", "ab", "LITERAL"), False),
    ("GROUP", "abc", "MATCH", pattern("TOPIC", "ab", "PREFIXED"), False),
    ("TOPIC", "abc", "PREFIXED", pattern("TOPIC", "abc", "PREFIXED"), True),
])
def test_resource_pattern_filters(ftype, fname, fpattern, target, expected) -> None:
    flt = wire.ResourcePatternFilter(wire.ResourceType[ftype], fname, wire.PatternType[fpattern])
    assert flt.matches(target) is expected


def test_entry_filters_and_binding_filter() -> None:
    entry = wire.AccessControlEntry("User:alice", "*", wire.AclOperation.READ, wire.AclPermissionType.ALLOW)
    assert wire.AccessControlEntryFilter(None, None, wire.AclOperation.ANY, wire.AclPermissionType.ANY).matches(entry)
    assert not wire.AccessControlEntryFilter("User:bob", None, wire.AclOperation.ANY, wire.AclPermissionType.ANY).matches(entry)
    assert not wire.AccessControlEntryFilter(None, "1.2.3.4", wire.AclOperation.ANY, wire.AclPermissionType.ANY).matches(entry)
    assert not wire.AccessControlEntryFilter(None, None, wire.AclOperation.WRITE, wire.AclPermissionType.ANY).matches(entry)
    assert not wire.AccessControlEntryFilter(None, None, wire.AclOperation.ANY, wire.AclPermissionType.DENY).matches(entry)
    auth = authorizer_with([acl("TOPIC", "orders-", "PREFIXED", "READ"), acl("GROUP", "g", "LITERAL", "READ")])
    assert len(auth.acls()) == 2
    only_topics = wire.AclBindingFilter(wire.ResourcePatternFilter(wire.ResourceType.TOPIC, None, wire.PatternType.ANY),
                                   wire.AccessControlEntryFilter(None, None, wire.AclOperation.ANY, wire.AclPermissionType.ANY))
    assert [b.pattern.resource_type for b in auth.acls(only_topics)] == [wire.ResourceType.TOPIC]
    assert len(auth.acls(wire.AclBindingFilter.any())) == 2


# ---------------------------------------------------------------------------------------- stored forms


@given(st.lists(ref_acls, min_size=1, max_size=6))
def test_acl_json_round_trips(acls) -> None:
    entries = {to_binding(a).entry for a in acls}
    assert decode_acls(encode_acls(entries)) == entries


def test_acl_json_is_kafkas() -> None:
    entry = wire.AccessControlEntry("User:alice", "*", wire.AclOperation.DESCRIBE_CONFIGS, wire.AclPermissionType.ALLOW)
    assert encode_acls([entry]) == (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
                                    b'"operation":"DescribeConfigs","host":"*"}]}')
    # Readers take the upper-case forms too.
    assert decode_acls(b'{"version":1,"acls":[{"principal":"User:a","permissionType":"ALLOW",'
                       b'"operation":"DESCRIBE_CONFIGS","host":"*"}]}') == {
        wire.AccessControlEntry("User:a", "*", wire.AclOperation.DESCRIBE_CONFIGS, wire.AclPermissionType.ALLOW)}
    prefixed = pattern("TRANSACTIONAL_ID", "tx-", "PREFIXED")
    assert encode_extended_change(prefixed) == (b'{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"tx-",'
                                                b'"patternType":"PREFIXED"}')
    assert decode_change(encode_extended_change(prefixed)) == prefixed
    literal = pattern("TOPIC", "orders", "LITERAL")
    assert encode_literal_change(literal) == b"TOPIC:orders"
    assert decode_change(b"Topic:orders") == literal
    assert wire.ResourceType.TRANSACTIONAL_ID.pascal == "TransactionalId"
    assert wire.AclOperation.from_name("IdempotentWrite") is wire.AclOperation.IDEMPOTENT_WRITE


def test_validate_binding() -> None:
    good = to_binding(acl("TOPIC", "t", "LITERAL", "READ"))
    assert validate_binding(good) is None
    assert validate_binding(wire.AclBinding(pattern("TOPIC", "", "LITERAL"), good.entry)) == \
        "Invalid empty resource name specified"
    assert "unknown" in validate_binding(wire.AclBinding(pattern("UNKNOWN", "t", "LITERAL"), good.entry))
    bad_principal = wire.AccessControlEntry("alice", "*", wire.AclOperation.READ, wire.AclPermissionType.ALLOW)
    assert "Type:name" in validate_binding(wire.AclBinding(good.pattern, bad_principal))
