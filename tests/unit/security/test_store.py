"""SCRAM users and ACLs in the metadata tree: Kafka's znodes and JSON, and every broker's view follows.

Two :class:`SecurityMetadata` on two sessions of one tree stand for two brokers. The functions take a
``sessions`` factory fixture; this module gives the embedded store's, tests/cluster/test_security_store_zookeeper.py
runs the same functions against a real ZooKeeper.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sofakafka.controller.embedded import EmbeddedMetadataServer
from sofakafka.controller.store import MetadataStore
from sofakafka.protocol import acl
from sofakafka.security.authorizer import AclAuthorizer
from sofakafka.security.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, QuotaEntity
from sofakafka.security.scram import make_credential
from sofakafka.security.store import NOTIFICATION_EXPIRY_MS, SecurityMetadata

WAIT = 30.0  # a bound, not a timing assertion

Sessions = Callable[[], MetadataStore]


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[Sessions]:
    server = EmbeddedMetadataServer.open(tmp_path / "meta", fsync=False)
    opened: list[MetadataStore] = []

    def make() -> MetadataStore:
        s = server.connect()
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()
    server.close()


def broker(sessions: Sessions, **kw) -> SecurityMetadata:
    sec = SecurityMetadata(sessions(), AclAuthorizer(), **kw)
    sec.start()
    return sec


def binding(rtype: str, name: str, ptype: str, op: str, principal: str = "User:alice",
            perm: str = "ALLOW") -> acl.AclBinding:
    return acl.AclBinding(acl.ResourcePattern(acl.ResourceType[rtype], name, acl.PatternType[ptype]),
                      acl.AccessControlEntry(principal, "*", acl.AclOperation[op], acl.AclPermissionType[perm]))


def children_data(store: MetadataStore, path: str) -> list[bytes]:
    return [store.get(f"{path}/{c}")[0] for c in store.get_children(path)]


def test_a_scram_user_written_through_one_broker_reaches_the_other(sessions: Sessions) -> None:
    a, b = broker(sessions), broker(sessions)
    cred = make_credential("SCRAM-SHA-256", "pw")
    a.set_scram_credential("alice@example.com", "SCRAM-SHA-256", cred)
    assert a.credential("SCRAM-SHA-256", "alice@example.com") == cred  # the writer at once
    assert b.wait_until(lambda: b.credential("SCRAM-SHA-256", "alice@example.com") == cred, WAIT)
    raw = a._store
    doc = json.loads(raw.get("/config/users/alice%40example.com")[0])
    assert doc == {"version": 1, "config": {"SCRAM-SHA-256": cred.to_kafka_string()}}
    notes = [json.loads(d) for d in children_data(raw, "/config/changes")]
    assert {"version": 2, "entity_path": "users/alice%40example.com"} in notes
    # A second mechanism keeps the first; deleting one keeps the other.
    cred512 = make_credential("SCRAM-SHA-512", "pw")
    a.set_scram_credential("alice@example.com", "SCRAM-SHA-512", cred512)
    assert a.delete_scram_credential("alice@example.com", "SCRAM-SHA-256") is True
    assert a.delete_scram_credential("alice@example.com", "SCRAM-SHA-256") is False
    assert b.wait_until(lambda: b.credential("SCRAM-SHA-256", "alice@example.com") is None
                        and b.credential("SCRAM-SHA-512", "alice@example.com") == cred512, WAIT)
    assert set(b.users()) == {"alice@example.com"}


def test_other_user_config_keys_are_kept(sessions: Sessions) -> None:
    a = broker(sessions)
    store = a._store
    store.ensure_path("/config/users")
    store.create("/config/users/bob", b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
    a.set_scram_credential("bob", "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", "pw"))
    config = json.loads(store.get("/config/users/bob")[0])["config"]
    assert config["producer_byte_rate"] == "1024" and "SCRAM-SHA-512" in config


def test_acls_are_stored_as_kafka_stores_them_and_reach_every_broker(sessions: Sessions) -> None:
    a, b = broker(sessions), broker(sessions)
    assert b.authorizer is not None
    a.create_acls([binding("TOPIC", "orders", "LITERAL", "READ"),
                   binding("TOPIC", "orders-", "PREFIXED", "READ"),
                   binding("GROUP", "g1", "LITERAL", "READ", principal="User:bob")])
    store = a._store
    assert json.loads(store.get("/kafka-acl/Topic/orders")[0]) == {
        "version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert store.exists("/kafka-acl-extended/prefixed/Topic/orders-") is not None
    assert store.exists("/kafka-acl/Group/g1") is not None
    assert sorted(children_data(store, "/kafka-acl-changes")) == [b"GROUP:g1", b"TOPIC:orders"]
    (extended,) = children_data(store, "/kafka-acl-extended-changes")
    assert json.loads(extended) == {"version": 1, "resourceType": "TOPIC", "name": "orders-", "patternType": "PREFIXED"}

    def b_allows(name: str) -> bool:
        assert b.authorizer is not None
        return b.authorizer.authorize("User:alice", "1.2.3.4", acl.AclOperation.READ, acl.ResourceType.TOPIC, name,
                                      log_if_denied=False)

    assert b.wait_until(lambda: b_allows("orders-eu") and b_allows("orders") and len(b.authorizer.acls()) == 3, WAIT)

    # Delete by filter: every READ of alice on topics matching "orders-eu" (the prefixed one only).
    flt = acl.AclBindingFilter(acl.ResourcePatternFilter(acl.ResourceType.TOPIC, "orders-eu", acl.PatternType.MATCH),
                           acl.AccessControlEntryFilter("User:alice", None, acl.AclOperation.ANY, acl.AclPermissionType.ANY))
    (deleted,) = a.delete_acls([flt])
    assert deleted == [binding("TOPIC", "orders-", "PREFIXED", "READ")]
    assert store.exists("/kafka-acl-extended/prefixed/Topic/orders-") is None
    assert b.wait_until(lambda: not b_allows("orders-eu") and b_allows("orders"), WAIT)
    assert a.delete_acls([acl.AclBindingFilter.any()]) == [sorted([binding("TOPIC", "orders", "LITERAL", "READ"),
                                                              binding("GROUP", "g1", "LITERAL", "READ", "User:bob")])]
    assert b.wait_until(lambda: b.authorizer.acls() == [], WAIT)


def test_changes_written_by_kafkas_own_tools_are_picked_up(sessions: Sessions) -> None:
    b = broker(sessions)
    tool = sessions()
    tool.ensure_path("/kafka-acl/Topic")
    tool.create("/kafka-acl/Topic/payments",
                b'{"version":1,"acls":[{"principal":"User:carol","permissionType":"Allow","operation":"WRITE","host":"*"}]}')
    tool.create("/kafka-acl-changes/acl_changes_", b"Topic:payments", sequence=True)
    cred = make_credential("SCRAM-SHA-256", "pw")
    tool.create("/config/users/carol", json.dumps({"version": 1, "config": {"SCRAM-SHA-256": cred.to_kafka_string()}}).encode())
    tool.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/carol"}', sequence=True)
    assert b.wait_until(lambda: b.credential("SCRAM-SHA-256", "carol") == cred, WAIT)
    assert b.wait_until(lambda: b.authorizer.authorize("User:carol", "h", acl.AclOperation.WRITE, acl.ResourceType.TOPIC,
                                                       "payments", log_if_denied=False), WAIT)


def test_everything_is_loaded_at_start_and_old_notifications_are_purged(sessions: Sessions) -> None:
    a = broker(sessions)
    a.create_acls([binding("CLUSTER", "kafka-cluster", "LITERAL", "ALTER")])
    a.set_scram_credential("dave", "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", "pw"))
    store = a._store
    assert store.get_children("/kafka-acl-changes")
    later = broker(sessions, clock_ms=lambda: 10**15)  # far in the future: every notification has expired
    assert later.credential("SCRAM-SHA-512", "dave") is not None
    assert [b.pattern.resource_type for b in later.authorizer.acls()] == [acl.ResourceType.CLUSTER]
    assert store.get_children("/kafka-acl-changes") == []
    assert store.get_children("/config/changes") == []
    assert NOTIFICATION_EXPIRY_MS == 15 * 60 * 1000


def test_client_quotas_are_stored_as_kafka_stores_them_and_reach_every_broker(sessions: Sessions) -> None:
    a, b = broker(sessions), broker(sessions)
    alice_app, default_client = QuotaEntity.of("alice@x", "app"), QuotaEntity.of(client_id=None)
    a.alter_client_quota(alice_app, {PRODUCER_BYTE_RATE: "1024", REQUEST_PERCENTAGE: "50.0"})
    a.alter_client_quota(default_client, {PRODUCER_BYTE_RATE: "2048"})
    assert a.client_quotas()[alice_app] == {PRODUCER_BYTE_RATE: 1024.0, REQUEST_PERCENTAGE: 50.0}  # the writer at once
    assert b.wait_until(lambda: b.client_quotas().get(alice_app) == {PRODUCER_BYTE_RATE: 1024.0, REQUEST_PERCENTAGE: 50.0}
                        and b.client_quotas().get(default_client) == {PRODUCER_BYTE_RATE: 2048.0}, WAIT)
    raw = a._store
    assert json.loads(raw.get("/config/users/alice%40x/clients/app")[0]) == {
        "version": 1, "config": {PRODUCER_BYTE_RATE: "1024", REQUEST_PERCENTAGE: "50.0"}}
    assert json.loads(raw.get("/config/clients/<default>")[0]) == {"version": 1, "config": {PRODUCER_BYTE_RATE: "2048"}}
    notes = [json.loads(d) for d in children_data(raw, "/config/changes")]
    assert {"version": 2, "entity_path": "users/alice%40x/clients/app"} in notes
    assert {"version": 2, "entity_path": "clients/<default>"} in notes
    # Removing a key keeps the others; removing the last one leaves no quota for the entity.
    a.alter_client_quota(alice_app, {REQUEST_PERCENTAGE: None})
    assert b.wait_until(lambda: b.client_quotas().get(alice_app) == {PRODUCER_BYTE_RATE: 1024.0}, WAIT)
    a.alter_client_quota(alice_app, {PRODUCER_BYTE_RATE: None})
    assert b.wait_until(lambda: alice_app not in b.client_quotas(), WAIT)
    # A quota next to a SCRAM credential of the same user keeps it, and the other way round.
    cred = make_credential("SCRAM-SHA-256", "pw")
    a.set_scram_credential("carol", "SCRAM-SHA-256", cred)
    a.alter_client_quota(QuotaEntity.of(user="carol"), {PRODUCER_BYTE_RATE: "100"})
    assert b.wait_until(lambda: b.client_quotas().get(QuotaEntity.of(user="carol")) == {PRODUCER_BYTE_RATE: 100.0}
                        and b.credential("SCRAM-SHA-256", "carol") == cred, WAIT)
    # A broker started later loads everything.
    c = broker(sessions)
    assert c.client_quotas() == b.client_quotas()


def test_client_quotas_written_by_kafkas_own_tools_are_picked_up(sessions: Sessions) -> None:
    b = broker(sessions)
    tool = sessions()
    tool.ensure_path("/config/users/<default>/clients")
    tool.create("/config/users/<default>/clients/app", b'{"version":1,"config":{"consumer_byte_rate":"4096"}}')
    tool.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/<default>/clients/app"}',
                sequence=True)
    assert b.wait_until(lambda: b.client_quotas().get(QuotaEntity.of(None, "app")) == {CONSUMER_BYTE_RATE: 4096.0},
                        WAIT)
