"""Delegation-token logins through SCRAM (sofakafka/security/sasl.py): the ``tokenauth=true`` extension, the owner
as principal, refusals that look like a wrong password, the session cut at the token's expiry, and sofakafka's
opt-in login without the extension. A real SCRAM client (scramp) with the extension appended, as Kafka's Java
client sends it; and our own client's token login (sofakafka/client/security.py)."""

from __future__ import annotations

import pytest
import scramp

from sofakafka.client.security import ClientSecurity, SaslLogin
from sofakafka.protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from sofakafka.protocol.messages.sasl_handshake import SaslHandshakeResponse
from sofakafka.security.sasl import (
    SaslAuthenticationError,
    SaslAuthenticator,
    ScramServer,
    client_first_extensions,
    session_lifetime,
)
from sofakafka.security.scram import ScramCredential, make_credential
from sofakafka.security.tokens import (
    DelegationTokenCache,
    TokenInformation,
    TokenLogin,
    hmac_text,
    token_hmac,
)

NOW = 1_600_000_000_000
MASTER = "master-secret"
USERS = {("SCRAM-SHA-256", "alice"): make_credential("SCRAM-SHA-256", "alice-secret")}


def users(mechanism: str, name: str) -> ScramCredential | None:
    return USERS.get((mechanism, name))


@pytest.fixture
def cache() -> DelegationTokenCache:
    c = DelegationTokenCache(MASTER)
    c.update(TokenInformation("tok1", "User:alice", (), NOW, NOW + 10_000, NOW + 5_000))
    return c


def password(token_id: str) -> str:
    return hmac_text(token_hmac(token_id, MASTER))


def login(server: ScramServer, name: str, secret: str, extension: str | None = ",tokenauth=true") -> ScramServer:
    """A SCRAM exchange whose client-first carries ``extension`` inside the signed bare message, as Kafka's client
    puts it there."""
    client = scramp.ScramClient([server.mechanism], name, secret)
    first = client.get_client_first()
    if extension:
        first += extension
        client.client_first_bare += extension
    answer = server.evaluate(first.encode())
    client.set_server_first(answer.decode())
    final = server.evaluate(client.get_client_final().encode())
    client.set_server_final(final.decode())
    return server


def server(cache: DelegationTokenCache, now: int = NOW, mechanism: str = "SCRAM-SHA-256", **kw: bool) -> ScramServer:
    return ScramServer(mechanism, users, lambda m, t: cache.login(m, t, now), **kw)


def test_extensions_are_the_key_values_after_the_nonce() -> None:
    assert client_first_extensions("n,,n=abc,r=xyz,tokenauth=true") == {"tokenauth": "true"}
    assert client_first_extensions("n,a=abc,n=abc,r=xyz,tokenauth=TRUE,other=1") == {"tokenauth": "TRUE", "other": "1"}
    assert client_first_extensions("n,,n=abc,r=xyz") == {}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_logs_in_as_its_owner_and_is_marked_token_authenticated(cache: DelegationTokenCache,
                                                                        mechanism: str) -> None:
    s = login(server(cache, NOW + 1_000, mechanism), "tok1", password("tok1"))
    assert s.complete and s.principal == "User:alice" and s.token_authenticated
    assert s.authorization_id == "tok1" and s.credential_lifetime_ms == 4_000
    # Kafka reads the extension's value with Boolean.parseBoolean: any case of "true".
    assert login(server(cache), "tok1", password("tok1"), ",tokenauth=True").token_authenticated


def test_a_user_login_is_not_token_authenticated(cache: DelegationTokenCache) -> None:
    s = login(server(cache), "alice", "alice-secret", extension=None)
    assert s.principal == "User:alice" and not s.token_authenticated and s.credential_lifetime_ms is None
    # tokenauth=false is a user login too.
    assert not login(server(cache), "alice", "alice-secret", ",tokenauth=false").token_authenticated


@pytest.mark.parametrize("name,secret,now,extension,why", [
    ("tok1", "wrong", NOW, ",tokenauth=true", "invalid"),
    ("nope", password("nope"), NOW, ",tokenauth=true", "no such delegation token"),
    ("tok1", password("tok1"), NOW + 5_001, ",tokenauth=true", "expired"),
    ("tok1", password("tok1"), NOW, None, "unknown user"),  # Kafka: without the extension a token id is a user name
    ("alice", "alice-secret", NOW, ",tokenauth=true", "no such delegation token"),  # a user is not a token
])
def test_a_refused_token_fails_like_a_wrong_password_and_the_log_says_why(cache: DelegationTokenCache, name: str,
                                                                          secret: str, now: int, extension: str | None,
                                                                          why: str) -> None:
    with pytest.raises(SaslAuthenticationError) as info:
        login(server(cache, now), name, secret, extension)
    assert str(info.value) == ("Authentication failed during authentication due to invalid credentials with SASL "
                               "mechanism SCRAM-SHA-256")
    assert why in info.value.detail


def test_the_expiry_edge_at_login(cache: DelegationTokenCache) -> None:
    assert login(server(cache, NOW + 4_999), "tok1", password("tok1")).credential_lifetime_ms == 1
    assert login(server(cache, NOW + 5_000), "tok1", password("tok1")).credential_lifetime_ms == 0  # expiry == now
    with pytest.raises(SaslAuthenticationError):
        login(server(cache, NOW + 5_001), "tok1", password("tok1"))


def test_without_a_master_key_tokens_do_not_log_in(cache: DelegationTokenCache) -> None:
    with pytest.raises(SaslAuthenticationError) as info:
        login(ScramServer("SCRAM-SHA-256", users), "tok1", password("tok1"))
    assert "master.key" in info.value.detail


def test_sofakafkas_opt_in_takes_a_token_id_without_the_extension_but_a_user_comes_first(
        cache: DelegationTokenCache) -> None:
    s = login(server(cache, tokens_without_extension=True), "tok1", password("tok1"), extension=None)
    assert s.principal == "User:alice" and s.token_authenticated
    user = login(server(cache, tokens_without_extension=True), "alice", "alice-secret", extension=None)
    assert not user.token_authenticated
    # A user named like a token shadows it.
    USERS[("SCRAM-SHA-256", "tok1")] = make_credential("SCRAM-SHA-256", "users-own")
    try:
        with pytest.raises(SaslAuthenticationError):
            login(server(cache, tokens_without_extension=True), "tok1", password("tok1"), extension=None)
    finally:
        del USERS[("SCRAM-SHA-256", "tok1")]
    with pytest.raises(SaslAuthenticationError) as info:
        login(server(cache, NOW + 5_001, tokens_without_extension=True), "tok1", password("tok1"), extension=None)
    assert "unknown user or delegation token" in info.value.detail


@pytest.mark.parametrize("reauth,left,expected", [(0, 5_000, 0), (1_000, None, 1_000), (1_000, 5_000, 1_000),
                                                  (10_000, 5_000, 5_000), (10_000, 0, 0), (10_000, -3, 0)])
def test_a_session_ends_at_the_token_expiry_when_reauthentication_is_on(reauth: int, left: int | None,
                                                                        expected: int) -> None:
    assert session_lifetime(reauth, left) == expected


def test_the_authenticator_keeps_the_token_login_and_cuts_the_session_at_its_expiry(
        cache: DelegationTokenCache) -> None:
    auth = SaslAuthenticator(["SCRAM-SHA-256"], lambda m: server(cache, NOW + 2_000), reauth_ms=60_000)
    auth.handshake("SCRAM-SHA-256", 1)
    client = scramp.ScramClient(["SCRAM-SHA-256"], "tok1", password("tok1"))
    first = client.get_client_first() + ",tokenauth=true"
    client.client_first_bare += ",tokenauth=true"
    client.set_server_first(auth.authenticate(first.encode(), now_ms=100).decode())
    auth.authenticate(client.get_client_final().encode(), now_ms=100)
    assert auth.principal == "User:alice" and auth.token_authenticated
    assert auth.session_lifetime_ms == 3_000 and auth.session_expires_at_ms == 3_100


def test_our_client_logs_in_with_a_token_as_kafkas_client_does(cache: DelegationTokenCache) -> None:
    """ClientSecurity(token_auth=True) sends tokenauth=true in its client-first (sasl.jaas.config's
    ``tokenauth="true"`` in a tool's --command-config)."""
    auth = SaslAuthenticator(["SCRAM-SHA-512"], lambda m: server(cache, NOW, m), reauth_ms=0)
    sasl = SaslLogin(ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "tok1", password("tok1"),
                                    token_auth=True), "broker")
    request = sasl.first_request()
    handshake = auth.handshake("SCRAM-SHA-512", 1)
    request = sasl.next_request(SaslHandshakeResponse(error_code=0, mechanisms=list(handshake.mechanisms)))
    while request is not None:
        answer = auth.authenticate(request.auth_bytes, now_ms=0)  # type: ignore[attr-defined]
        request = sasl.next_request(SaslAuthenticateResponse(error_code=0, auth_bytes=answer))
    assert auth.principal == "User:alice" and auth.token_authenticated


def test_a_token_login_reaches_the_lookup_with_the_mechanism_and_id() -> None:
    seen: list[tuple[str, str]] = []
    credential = make_credential("SCRAM-SHA-512", "pw")

    def lookup(mechanism: str, token_id: str) -> TokenLogin | str:
        seen.append((mechanism, token_id))
        return TokenLogin(credential, "User:bob", 7)

    s = login(ScramServer("SCRAM-SHA-512", users, lookup), "some-id", "pw")
    assert seen == [("SCRAM-SHA-512", "some-id")] and s.principal == "User:bob"
