"""Delegation tokens in the metadata tree (sofakafka/security/token_manager.py): Kafka 2.6's znodes and JSON, every
broker's cache following the token_changes notifications, conditional writes, and the expiry scan.

Two :class:`SecurityMetadata` with token managers on two sessions of one tree stand for two brokers; the embedded
store here, a real ZooKeeper in tests/cluster/test_security_store_zookeeper.py (same functions)."""

from __future__ import annotations

import json

from sofakafka.controller.store import MetadataStore
from sofakafka.protocol.errors import ErrorCode
from sofakafka.security.authorizer import AclAuthorizer
from sofakafka.security.store import SecurityMetadata
from sofakafka.security.token_manager import DelegationTokenManager
from sofakafka.security.tokens import (
    DelegationTokenCache,
    TokenInformation,
    TokenSettings,
    encode_token,
    token_hmac,
)
from tests.unit.security import test_store
from tests.unit.security.test_store import WAIT, Sessions, children_data

sessions = test_store.sessions  # the embedded store's fixture (tests/cluster gives ZooKeeper's)

MASTER = "shared-master-key"
SETTINGS = TokenSettings(max_lifetime_ms=100_000, expiry_time_ms=10_000)


class Clock:
    def __init__(self, now: int = 1_600_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def broker(sessions: Sessions, clock: Clock) -> SecurityMetadata:
    store = sessions()
    tokens = DelegationTokenManager(store, DelegationTokenCache(MASTER), SETTINGS, clock_ms=clock)
    sec = SecurityMetadata(store, AclAuthorizer(), tokens=tokens)
    sec.start()
    return sec


def manager(sec: SecurityMetadata) -> DelegationTokenManager:
    assert sec.tokens is not None
    return sec.tokens


def knows(sec: SecurityMetadata, token_id: str, expiry: int | None) -> bool:
    cached = manager(sec).cache.token(token_id)
    return (cached is None) if expiry is None else (cached is not None and cached.info.expiry_timestamp == expiry)


def test_a_token_created_through_one_broker_is_known_to_the_other_at_once(sessions: Sessions) -> None:
    clock = Clock()
    a, b = broker(sessions, clock), broker(sessions, clock)
    created = manager(a).create("User:alice", ["User:bob"], 50_000)
    info = created.info
    assert created.hmac == token_hmac(info.token_id, MASTER)
    assert (info.issue_timestamp, info.max_timestamp, info.expiry_timestamp) == (clock.now, clock.now + 50_000,
                                                                                clock.now + 10_000)
    assert b.wait_until(lambda: knows(b, info.token_id, info.expiry_timestamp), WAIT)
    on_b = manager(b).cache.token_for_hmac(created.hmac)
    assert on_b is not None and on_b.info == info
    store: MetadataStore = a._store
    doc = json.loads(store.get(f"/delegation_token/tokens/{info.token_id}")[0])
    assert doc == {"version": 1, "owner": "User%3Aalice", "renewers": ["User%3Abob"], "issueTimestamp": clock.now,
                   "maxTimestamp": clock.now + 50_000, "expiryTimestamp": clock.now + 10_000,
                   "tokenId": info.token_id}
    assert children_data(store, "/delegation_token/token_changes") == [info.token_id.encode()]


def test_renew_and_expire_reach_every_broker_and_are_refused_as_kafka_refuses_them(sessions: Sessions) -> None:
    clock = Clock()
    a, b = broker(sessions, clock), broker(sessions, clock)
    created = manager(a).create("User:alice", ["User:bob"], 0)
    token_id = created.info.token_id
    assert b.wait_until(lambda: manager(b).cache.token(token_id) is not None, WAIT)
    clock.now += 1_000
    renewed = manager(b).renew("User:bob", created.hmac, 30_000)
    assert (renewed.error, renewed.timestamp) == (ErrorCode.NONE, clock.now + 30_000)
    assert a.wait_until(lambda: knows(a, token_id, clock.now + 30_000), WAIT)
    assert manager(a).renew("User:carol", created.hmac, 1).error == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert manager(a).renew("User:alice", b"\x00" * 64, 1).error == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    shortened = manager(a).expire("User:alice", created.hmac, 5)
    assert shortened.timestamp == clock.now + 5 and b.wait_until(lambda: knows(b, token_id, clock.now + 5), WAIT)
    clock.now += 6
    assert manager(b).renew("User:alice", created.hmac, 1).error == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert manager(b).expire("User:alice", created.hmac, -1).error == ErrorCode.DELEGATION_TOKEN_EXPIRED
    clock.now -= 6
    gone = manager(b).expire("User:alice", created.hmac, -1)
    assert (gone.error, gone.timestamp, gone.remove) == (ErrorCode.NONE, clock.now, True)
    assert a.wait_until(lambda: knows(a, token_id, None), WAIT)
    assert a._store.exists(f"/delegation_token/tokens/{token_id}") is None
    assert manager(a).expire("User:alice", created.hmac, -1).error == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_a_renewal_decides_on_the_stored_token_not_a_stale_cache(sessions: Sessions) -> None:
    """Broker b has not yet seen a's renewal when it is asked to renew: it re-reads the token and writes
    conditionally, so neither change is lost (Kafka decides on its cache)."""
    clock = Clock()
    a = broker(sessions, clock)
    created = manager(a).create("User:alice", [], 0)
    b_store = sessions()
    b_tokens = DelegationTokenManager(b_store, DelegationTokenCache(MASTER), SETTINGS, clock_ms=clock)
    b_tokens.load_all()  # no notifications followed: its cache stays as loaded
    manager(a).expire("User:alice", created.hmac, 1)  # the stored token now expires at now + 1
    clock.now += 2
    assert b_tokens.renew("User:alice", created.hmac, 5).error == ErrorCode.DELEGATION_TOKEN_EXPIRED


def test_the_expiry_scan_removes_tokens_past_their_expiry_or_max_everywhere(sessions: Sessions) -> None:
    clock = Clock()
    a, b = broker(sessions, clock), broker(sessions, clock)
    short = manager(a).create("User:alice", [], 0).info  # expiry now + 10 s
    capped = manager(a).create("User:alice", [], 5_000).info  # max (and expiry) now + 5 s
    assert b.wait_until(lambda: len(manager(b).tokens()) == 2, WAIT)
    clock.now += 5_000
    assert manager(a).expire_tokens() == []  # max exactly now: alive
    clock.now += 1
    assert manager(a).expire_tokens() == [capped.token_id]
    assert b.wait_until(lambda: [t.info.token_id for t in manager(b).tokens()] == [short.token_id], WAIT)
    clock.now += 5_000
    assert manager(b).expire_tokens() == [short.token_id]
    assert a.wait_until(lambda: manager(a).tokens() == [], WAIT)
    assert a._store.get_children("/delegation_token/tokens") == []


def test_tokens_written_by_kafka_are_loaded_at_start_and_followed(sessions: Sessions) -> None:
    """A token as Kafka 2.6's brokers write it (another broker on the same ZooKeeper): loaded at start, and one
    arriving later with its notification is picked up; unreadable ones are skipped."""
    tool = sessions()
    tool.ensure_path("/delegation_token/tokens")
    tool.ensure_path("/delegation_token/token_changes")
    first = TokenInformation("kafka-made-1", "User:alice", ("User:bob",), 1, 2_000_000_000_000, 1_900_000_000_000)
    tool.create("/delegation_token/tokens/kafka-made-1", encode_token(first))
    tool.create("/delegation_token/tokens/garbage", b"{not json")
    b = broker(sessions, Clock())
    assert manager(b).cache.token("kafka-made-1") is not None and manager(b).cache.token("garbage") is None
    second = TokenInformation("kafka-made-2", "User:carol", (), 1, 2_000_000_000_000, 1_900_000_000_000)
    tool.create("/delegation_token/tokens/kafka-made-2", encode_token(second))
    tool.create("/delegation_token/token_changes/token_change_", b"kafka-made-2", sequence=True)
    assert b.wait_until(lambda: manager(b).cache.token("kafka-made-2") is not None, WAIT)
    cached = manager(b).cache.token_for_hmac(token_hmac("kafka-made-2", MASTER))
    assert cached is not None and cached.info == second
    tool.delete("/delegation_token/tokens/kafka-made-1")
    tool.create("/delegation_token/token_changes/token_change_", b"kafka-made-1", sequence=True)
    assert b.wait_until(lambda: manager(b).cache.token("kafka-made-1") is None, WAIT)
