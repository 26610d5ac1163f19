"""Delegation tokens' pure parts (sofakafka/security/tokens.py): the HMAC, ids, Kafka 2.6's lifetime rules at their
edges, the describe filter, the stored JSON and the cache a broker logs tokens in with."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.protocol.errors import ErrorCode
from sofakafka.security.tokens import (
    ERROR_TIMESTAMP,
    LONG_MAX,
    DelegationTokenCache,
    TokenFormatError,
    TokenInformation,
    TokenLogin,
    TokenSettings,
    decode_token,
    describable,
    encode_token,
    expire,
    hmac_text,
    new_token,
    new_token_id,
    parse_principal,
    renew,
    token_hmac,
)

SETTINGS = TokenSettings(max_lifetime_ms=7_000, expiry_time_ms=1_000)
NOW = 1_600_000_000_000


def token(**kw: object) -> TokenInformation:
    fields: dict[str, object] = {"token_id": "tok", "owner": "User:alice", "renewers": ("User:bob",),
                                 "issue_timestamp": NOW, "max_timestamp": NOW + 7_000, "expiry_timestamp": NOW + 1_000}
    fields.update(kw)
    return TokenInformation(**fields)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------- HMAC and ids


def test_the_hmac_is_hmac_sha512_keyed_with_the_master_key_over_the_token_id() -> None:
    # RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?". Swapping key and data, or another
    # digest, gives something else.
    expected = bytes.fromhex(
        "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d"
        "4a6b4b636e070a38bce737")
    assert token_hmac("what do ya want for nothing?", "Jefe") == expected
    assert hmac_text(expected) == base64.b64encode(expected).decode()


def test_a_token_id_is_a_random_uuid_in_url_safe_base64_without_padding() -> None:
    ids = {new_token_id() for _ in range(50)}
    assert len(ids) == 50
    for token_id in ids:
        assert len(token_id) == 22 and "=" not in token_id and "+" not in token_id and "/" not in token_id
        assert uuid.UUID(bytes=base64.urlsafe_b64decode(token_id + "==")).version == 4


def test_principals_split_at_the_first_colon_as_kafka_parses_them() -> None:
    assert parse_principal("User:CN=a,O=b:c") == ("User", "CN=a,O=b:c")
    assert parse_principal("User:") == ("User", "")
    for bad in ("", "alice"):
        with pytest.raises(TokenFormatError):
            parse_principal(bad)


# ------------------------------------------------------------------------------------------- lifetimes


@given(requested=st.integers(-10, 20_000), expiry_time=st.integers(1, 20_000), cap=st.integers(1, 20_000))
def test_a_new_token_lives_what_was_asked_within_the_cap_and_expires_by_its_max(requested: int, expiry_time: int,
                                                                                 cap: int) -> None:
    info = new_token("t", "User:a", [], NOW, requested, TokenSettings(cap, expiry_time))
    lifetime = cap if requested <= 0 else min(requested, cap)
    assert info.issue_timestamp == NOW
    assert info.max_timestamp == NOW + lifetime
    assert info.expiry_timestamp == min(NOW + lifetime, NOW + expiry_time) <= info.max_timestamp


def test_a_lifetime_at_the_edge_of_a_long_stops_at_its_largest_value() -> None:
    info = new_token("t", "User:a", [], NOW, LONG_MAX, TokenSettings(LONG_MAX, LONG_MAX))
    assert info.max_timestamp == info.expiry_timestamp == LONG_MAX


def test_a_token_whose_expiry_or_max_is_exactly_now_is_alive_one_ms_later_it_is_not() -> None:
    info = token(expiry_timestamp=NOW, max_timestamp=NOW + 5)
    assert not info.expired(NOW - 1) and not info.expired(NOW) and info.expired(NOW + 1)
    capped = token(expiry_timestamp=NOW + 5, max_timestamp=NOW)
    assert not capped.expired(NOW) and capped.expired(NOW + 1)


def test_renew_moves_the_expiry_by_the_period_asked_never_past_the_max() -> None:
    info = token()
    change = renew(info, "User:alice", NOW + 100, 2_000, SETTINGS)
    assert change.error == ErrorCode.NONE and change.timestamp == NOW + 2_100
    assert change.token == token(expiry_timestamp=NOW + 2_100) and not change.remove
    # A negative period means the configured expiry time; zero means now.
    assert renew(info, "User:bob", NOW + 100, -1, SETTINGS).timestamp == NOW + 1_100
    assert renew(info, "User:alice", NOW + 100, 0, SETTINGS).timestamp == NOW + 100
    # Never past the max: one ms before it, at it, and a period reaching far beyond it.
    assert renew(info, "User:alice", NOW, 6_999, SETTINGS).timestamp == NOW + 6_999
    assert renew(info, "User:alice", NOW, 7_000, SETTINGS).timestamp == NOW + 7_000
    assert renew(info, "User:alice", NOW, LONG_MAX, SETTINGS).timestamp == NOW + 7_000


def test_renew_and_expire_need_the_owner_or_a_renewer_and_a_live_token() -> None:
    info = token()
    for change in (renew(info, "User:carol", NOW, 10, SETTINGS), expire(info, "User:carol", NOW, 10)):
        assert (change.error, change.timestamp, change.token) == (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH,
                                                                   ERROR_TIMESTAMP, None)
    # Expiry exactly now: still renewable; one ms after: expired. The owner check comes first.
    assert renew(info, "User:alice", NOW + 1_000, 10, SETTINGS).error == ErrorCode.NONE
    assert renew(info, "User:alice", NOW + 1_001, 10, SETTINGS).error == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert expire(info, "User:bob", NOW + 1_001, 10).error == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert expire(info, "User:carol", NOW + 1_001, 10).error == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert renew(token(expiry_timestamp=NOW + 9_000), "User:alice", NOW + 7_001, 10, SETTINGS).error == (
        ErrorCode.DELEGATION_TOKEN_EXPIRED)  # past its max


def test_expire_with_a_negative_period_removes_the_token_at_once_otherwise_it_moves_the_expiry() -> None:
    info = token()
    now_gone = expire(info, "User:alice", NOW + 10, -1)
    assert (now_gone.error, now_gone.timestamp, now_gone.remove, now_gone.token) == (ErrorCode.NONE, NOW + 10, True,
                                                                                      None)
    later = expire(info, "User:bob", NOW + 10, 500)
    assert later.timestamp == NOW + 510 and later.token == token(expiry_timestamp=NOW + 510) and not later.remove
    assert expire(info, "User:alice", NOW + 10, 0).token == token(expiry_timestamp=NOW + 10)
    assert expire(info, "User:alice", NOW + 10, 10**6).timestamp == NOW + 7_000


@given(owner=st.sampled_from(["User:alice", "User:bob", "User:carol"]),
       renewers=st.lists(st.sampled_from(["User:alice", "User:bob", "User:carol"]), max_size=2),
       requester=st.sampled_from(["User:alice", "User:bob", "User:carol"]),
       owners=st.none() | st.lists(st.sampled_from(["User:alice", "User:bob", "User:carol"]), min_size=1, max_size=2),
       acl=st.booleans())
def test_describe_shows_own_and_renewable_tokens_and_others_only_with_describe(owner: str, renewers: list[str],
                                                                               requester: str,
                                                                               owners: list[str] | None,
                                                                               acl: bool) -> None:
    info = token(owner=owner, renewers=tuple(renewers))
    asked: list[str] = []

    def may_describe(token_id: str) -> bool:
        asked.append(token_id)
        return acl

    shown = describable(info, requester, owners, may_describe)
    involved = {owner, *renewers}
    if owners is not None and not involved & set(owners):
        assert not shown and not asked
    elif requester in involved:
        assert shown and not asked  # no ACL check for the requester's own tokens
    else:
        assert shown == acl and asked == ["tok"]


# ------------------------------------------------------------------------------------------- stored form


def test_a_token_is_stored_as_kafka_2_6_stores_it() -> None:
    info = token(owner="User:alice@example.com", renewers=("User:bob", "User:c d*"))
    assert json.loads(encode_token(info)) == {
        "version": 1, "owner": "User%3Aalice%40example.com", "renewers": ["User%3Abob", "User%3Ac%20d%2A"],
        "issueTimestamp": NOW, "maxTimestamp": NOW + 7_000, "expiryTimestamp": NOW + 1_000, "tokenId": "tok"}


_names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(owner=_names, renewers=st.lists(_names, max_size=3), times=st.tuples(*[st.integers(-1, LONG_MAX)] * 3))
def test_the_stored_form_reads_back_as_written(owner: str, renewers: list[str], times: tuple[int, int, int]) -> None:
    info = TokenInformation(new_token_id(), f"User:{owner}", tuple(f"User:{r}" for r in renewers), *times)
    assert decode_token(encode_token(info)) == info


@pytest.mark.parametrize("data", [
    b"not json", b"[]", b'{"version":2}', b'{"version":1,"owner":"User%3Aa"}',
    b'{"version":1,"owner":"alice","renewers":[],"issueTimestamp":1,"maxTimestamp":2,"expiryTimestamp":3,"tokenId":"t"}',
    b'{"version":1,"owner":"User%3Aa","renewers":[],"issueTimestamp":"1","maxTimestamp":2,"expiryTimestamp":3,"tokenId":"t"}',
])
def test_an_unreadable_stored_token_is_refused(data: bytes) -> None:
    with pytest.raises(TokenFormatError):
        decode_token(data)


# ------------------------------------------------------------------------------------------- the cache


def test_the_cache_finds_tokens_by_id_and_hmac_and_forgets_them() -> None:
    cache = DelegationTokenCache("master")
    a, b = token(token_id="a"), token(token_id="b", owner="User:bob")
    cache.replace_all([a, b])
    assert cache.token_for_hmac(token_hmac("a", "master")).info == a  # type: ignore[union-attr]
    assert cache.token_for_hmac(token_hmac("a", "other key")) is None
    renewed = token(token_id="a", expiry_timestamp=NOW + 5_000)
    cache.update(renewed)
    assert cache.token("a").info == renewed  # type: ignore[union-attr]
    cache.remove("a")
    cache.remove("a")
    assert cache.token("a") is None and cache.token_for_hmac(token_hmac("a", "master")) is None
    assert [t.info for t in cache.tokens()] == [b]
    with pytest.raises(ValueError):
        DelegationTokenCache("")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_logs_in_with_its_hmac_as_the_scram_password_until_it_expires(mechanism: str) -> None:
    cache = DelegationTokenCache("master")
    cache.update(token(token_id="a"))
    login = cache.login(mechanism, "a", NOW + 400)
    assert isinstance(login, TokenLogin) and login.owner == "User:alice" and login.lifetime_ms == 600
    # The credential is the one a SCRAM client derives from the HMAC's base64.
    c = login.credential
    server = scramp.ScramMechanism(mechanism).make_server(lambda _: (c.salt, c.stored_key, c.server_key, c.iterations))
    client = scramp.ScramClient([mechanism], "a", hmac_text(token_hmac("a", "master")))
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    server.set_client_final(client.get_client_final())
    client.set_server_final(server.get_server_final())
    assert c.iterations == 4096
    assert isinstance(cache.login(mechanism, "a", NOW + 1_000), TokenLogin)
    assert "expired" in str(cache.login(mechanism, "a", NOW + 1_001))
    assert cache.login(mechanism, "nope", NOW) == "no such delegation token"
