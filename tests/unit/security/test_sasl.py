"""SASL mechanisms and the connection authenticator, driven by scramp's client (a real SCRAM client), and our
own client's login (sofakafka/client/security.py) against them."""

from __future__ import annotations

import base64
import re

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.client.errors import AuthenticationError
from sofakafka.client.security import ClientSecurity, SaslLogin
from sofakafka.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from sofakafka.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from sofakafka.protocol.schema import Request, Response
from sofakafka.security import SecurityConfigError
from sofakafka.security.jaas import find_login_module, parse_jaas_config
from sofakafka.security.sasl import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    IllegalSaslStateError,
    PlainServer,
    SaslAuthenticationError,
    SaslAuthenticator,
    SaslState,
    ScramServer,
)
from sofakafka.security.scram import ScramCredential, ScramCredentialError, make_credential

USERS: dict[tuple[str, str], ScramCredential] = {}


def lookup(mechanism: str, name: str) -> ScramCredential | None:
    return USERS.get((mechanism, name))


@pytest.fixture(autouse=True)
def users():
    USERS.clear()
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        USERS[(mech, "alice")] = make_credential(mech, "alice-secret")
    yield


def scram_login(mechanism: str, name: str, password: str) -> ScramServer:
    client = scramp.ScramClient([mechanism], name, password)
    server = ScramServer(mechanism, lookup)
    first = server.evaluate(client.get_client_first().encode())
    client.set_server_first(first.decode())
    final = server.evaluate(client.get_client_final().encode())
    client.set_server_final(final.decode())  # the client checks the server's signature too
    return server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_with_the_stored_credential(mechanism) -> None:
    server = scram_login(mechanism, "alice", "alice-secret")
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_and_unknown_user_fail_alike(mechanism) -> None:
    with pytest.raises(SaslAuthenticationError) as wrong:
        scram_login(mechanism, "alice", "nope")
    with pytest.raises(SaslAuthenticationError) as unknown:
        scram_login(mechanism, "mallory", "nope")
    assert str(wrong.value) == str(unknown.value)
    assert "invalid credentials" in str(wrong.value)
    assert "unknown user" in unknown.value.detail and "unknown" not in str(unknown.value)


def test_a_credential_of_one_mechanism_does_not_log_in_with_the_other() -> None:
    USERS.pop(("SCRAM-SHA-512", "alice"))
    with pytest.raises(SaslAuthenticationError):
        scram_login("SCRAM-SHA-512", "alice", "alice-secret")


def test_malformed_scram_messages_fail_cleanly() -> None:
    for token in (b"garbage", b"\xff\xfe", b"n,,n=alice", b""):
        server = ScramServer("SCRAM-SHA-256", lookup)
        with pytest.raises(SaslAuthenticationError):
            server.evaluate(token)


def test_credential_string_is_kafkas_and_round_trips() -> None:
    cred = make_credential("SCRAM-SHA-256", "pw", iterations=4096, salt=b"0123456789abcdef")
    text = cred.to_kafka_string()
    assert text.startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=") and text.endswith(",iterations=4096")
    assert ScramCredential.from_kafka_string(text) == cred
    # Iterations at the edge: 4096 is the least Kafka accepts.
    with pytest.raises(ScramCredentialError):
        make_credential("SCRAM-SHA-256", "pw", iterations=4095)
    assert make_credential("SCRAM-SHA-512", "pw", iterations=4097).iterations == 4097
    with pytest.raises(ScramCredentialError):
        make_credential("SCRAM-SHA-1", "pw")
    for bad in ("salt=x", "salt=!!,stored_key=AA==,server_key=AA==,iterations=4096",
                "salt=AA==,stored_key=AA==,server_key=AA==,iterations=four"):
        with pytest.raises(ScramCredentialError):
            ScramCredential.from_kafka_string(bad)


def test_a_stored_credential_below_4096_iterations_is_refused() -> None:
    weak = make_credential("SCRAM-SHA-256", "pw")
    USERS[("SCRAM-SHA-256", "weak")] = ScramCredential(weak.salt, weak.stored_key, weak.server_key, 4095)
    with pytest.raises(SaslAuthenticationError) as info:
        scram_login("SCRAM-SHA-256", "weak", "pw")
    assert "iterations" in info.value.detail


def test_plain() -> None:
    users = {"alice": "alice-secret"}
    ok = PlainServer(users)
    assert ok.evaluate(b"\x00alice\x00alice-secret") == b"" and ok.complete and ok.authorization_id == "alice"
    assert PlainServer(users).evaluate(b"alice\x00alice\x00alice-secret") == b""
    failures = {}
    for token in (b"\x00alice\x00wrong", b"\x00bob\x00alice-secret", b"bob\x00alice\x00alice-secret",
                  b"alice-secret", b"\x00\x00pw", b"\x00alice\x00", b"\xff\x00\xff\x00\xff"):
        with pytest.raises(SaslAuthenticationError) as info:
            PlainServer(users).evaluate(token)
        failures[token] = str(info.value)
    assert failures[b"\x00alice\x00wrong"] == failures[b"\x00bob\x00alice-secret"]


def test_jaas_config() -> None:
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="a\\"b";')
    (module,) = parse_jaas_config("sasl.jaas.config", text)
    assert module.flag == "required" and module.options["username"] == "admin"
    assert module.plain_users == {"admin": "admin-secret", "alice": 'a"b'}
    for bad, why in (("Mod required a=\"b\"", "';'"), ("Mod a=\"b\";", "control flag"),
                     ('Mod required a="b', "unterminated"), ("", "no login module")):
        with pytest.raises(SecurityConfigError) as info:
            parse_jaas_config("sasl.jaas.config", bad)
        assert why in str(info.value) and str(info.value).startswith("sasl.jaas.config: ")
    conf = {"listener.name.sasl_ssl.plain.sasl.jaas.config": "M required user_x=\"1\";",
            "sasl.jaas.config": "M required user_y=\"2\";"}
    key, found = find_login_module(conf.get, "SASL_SSL", "PLAIN")
    assert key.startswith("listener.name.sasl_ssl.plain") and found.plain_users == {"x": "1"}
    assert find_login_module(conf.get, "OTHER", "PLAIN")[1].plain_users == {"y": "2"}
    assert find_login_module({}.get, "OTHER", "PLAIN") is None


# --------------------------------------------------------------------------------------- authenticator


def authenticator(reauth_ms: int = 0) -> SaslAuthenticator:
    def factory(mechanism: str):
        if mechanism == "PLAIN":
            return PlainServer({"alice": "pw", "bob": "pw"})
        return ScramServer(mechanism, lookup)
    return SaslAuthenticator(["PLAIN", "SCRAM-SHA-256"], factory, reauth_ms)


def test_authenticator_v1_flow_and_reauthentication() -> None:
    auth = authenticator(reauth_ms=1000)
    auth.check_request(API_VERSIONS, 0)
    auth.check_request(SASL_HANDSHAKE, 0)
    assert auth.handshake("PLAIN", 1).error_code == 0
    auth.check_request(SASL_AUTHENTICATE, 0)
    assert auth.authenticate(b"\x00alice\x00pw", now_ms=100) == b""
    assert auth.principal == "User:alice" and auth.session_expires_at_ms == 1100
    auth.check_request(0, 1099)  # one below expiry
    expired = authenticator(reauth_ms=1000)
    expired.handshake("PLAIN", 1)
    expired.authenticate(b"\x00alice\x00pw", now_ms=100)
    with pytest.raises(IllegalSaslStateError):
        expired.check_request(0, 1100)  # at expiry
    # Re-authenticate before expiry: same principal renews the session.
    auth.check_request(SASL_HANDSHAKE, 1000)
    assert auth.handshake("PLAIN", 1).error_code == 0
    auth.check_request(SASL_AUTHENTICATE, 1000)
    auth.authenticate(b"\x00alice\x00pw", now_ms=1000)
    auth.check_request(0, 1999)
    # Another principal may not take over the connection.
    auth.handshake("PLAIN", 1)
    with pytest.raises(SaslAuthenticationError):
        auth.authenticate(b"\x00bob\x00pw", now_ms=1500)
    assert auth.state is SaslState.FAILED
    with pytest.raises(IllegalSaslStateError):
        auth.check_request(0, 1501)


def test_without_reauthentication_a_later_handshake_is_refused_and_the_login_stands() -> None:
    """connections.max.reauth.ms=0 (Kafka's default): Kafka's request handler answers the handshake
    ILLEGAL_SASL_STATE with no mechanisms, and the connection stays logged in (the conformance suite compares it)."""
    auth = authenticator(reauth_ms=0)
    auth.handshake("PLAIN", 1)
    auth.authenticate(b"\x00alice\x00pw", now_ms=0)
    auth.check_request(SASL_HANDSHAKE, 10)
    result = auth.handshake("PLAIN", 1)
    assert (result.error_code, list(result.mechanisms)) == (SaslAuthenticator.ILLEGAL_SASL_STATE, [])
    assert auth.state is SaslState.COMPLETE and auth.principal == "User:alice"
    auth.check_request(SASL_AUTHENTICATE, 20)  # let through: its handler answers ILLEGAL_SASL_STATE
    auth.check_request(0, 10**9)  # no session expiry without reauth


def test_authenticator_v0_raw_tokens_and_bad_mechanism() -> None:
    auth = authenticator()
    assert auth.handshake("PLAIN", 0).error_code == 0
    assert auth.expecting_raw_token
    auth.authenticate(b"\x00alice\x00pw", 0)
    assert auth.principal == "User:alice" and auth.session_expires_at_ms is None
    bad = authenticator()
    result = bad.handshake("GSSAPI", 1)
    assert result.error_code == 33 and list(result.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]


@given(st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=5))
def test_nothing_but_the_sasl_apis_passes_before_authentication(keys) -> None:
    auth = authenticator()
    for key in keys:
        if key in (API_VERSIONS, SASL_HANDSHAKE):
            auth.check_request(key, 0)
            continue
        with pytest.raises(IllegalSaslStateError):
            auth.check_request(key, 0)
        return


@pytest.mark.parametrize("password,ok", [("alice-secret", True), ("wrong", False)])
def test_a_client_final_nonce_that_ends_with_the_servers_is_accepted_as_kafka_does(password, ok) -> None:
    """librdkafka before 2.2 sends its own nonce in front of the server's whole nonce; Kafka's server checks
    endsWith and so must we. The proof is computed here by RFC 5802 over the message as sent."""
    import base64
    import hashlib
    import hmac

    server = ScramServer("SCRAM-SHA-256", lookup)
    client_nonce = "clientnonce123"
    first_bare = f"n=alice,r={client_nonce}"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
    without_proof = f"c=biws,r={client_nonce}{attrs['r']}"
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    final = f"{without_proof},p={proof}".encode()
    if not ok:
        with pytest.raises(SaslAuthenticationError):
            server.evaluate(final)
        return
    answer = server.evaluate(final)
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    assert answer == b"v=" + base64.b64encode(hmac.new(server_key, auth_message, hashlib.sha256).digest())
    assert server.complete and server.authorization_id == "alice"


# ----------------------------------------------------------------------- the authenticator as a state machine

from hypothesis.stateful import RuleBasedStateMachine, invariant, rule  # noqa: E402


class AuthenticatorMachine(RuleBasedStateMachine):
    """Random sequences of requests, handshakes and PLAIN tokens against a simple model of Kafka's rules:
    nothing but ApiVersions/SaslHandshake/SaslAuthenticate before a successful login, a failure is final,
    only the first principal may re-authenticate, and a session ends REAUTH ms after its last login."""

    REAUTH = 100

    def __init__(self) -> None:
        super().__init__()
        self.auth = SaslAuthenticator(["PLAIN"], lambda m: PlainServer({"alice": "pw", "bob": "pw"}), self.REAUTH)
        self.now = 0
        self.principal: str | None = None
        self.expires = 0
        self.failed = False
        self.handshook = False

    def _closed(self) -> bool:
        return self.failed or (self.principal is not None and not self.handshook and self.now >= self.expires)

    @rule(key=st.sampled_from([0, 1, 3, 8, 18, 17, 36]))
    def request(self, key: int) -> None:
        allowed_before = key in (18, 17) and not self.handshook
        if self.failed:
            expect_ok = False
        elif self.principal is None:
            expect_ok = allowed_before or (key == 36 and self.handshook)
        elif self.handshook:
            expect_ok = key == 36
        else:
            expect_ok = self.now < self.expires  # (a SaslAuthenticate is answered ILLEGAL_SASL_STATE, not closed)
        try:
            self.auth.check_request(key, self.now)
            assert expect_ok, f"key {key} let through"
        except IllegalSaslStateError:
            assert not expect_ok, f"key {key} refused"
            self.failed = True

    @rule(mechanism=st.sampled_from(["PLAIN", "GSSAPI"]))
    def handshake(self, mechanism: str) -> None:
        if self.failed or self.handshook or (self.principal is not None and self.now >= self.expires):
            return
        result = self.auth.handshake(mechanism, 1)
        if mechanism != "PLAIN":
            assert result.error_code == 33
            self.failed = True
        else:
            assert result.error_code == 0
            self.handshook = True

    @rule(user=st.sampled_from(["alice", "bob"]), good=st.booleans())
    def authenticate(self, user: str, good: bool) -> None:
        if self.failed or not self.handshook:
            return
        token = f"\x00{user}\x00{'pw' if good else 'nope'}".encode()
        try:
            self.auth.authenticate(token, self.now)
            assert good and self.principal in (None, f"User:{user}")
            self.principal = f"User:{user}"
            self.expires = self.now + self.REAUTH
            self.handshook = False
        except SaslAuthenticationError:
            assert not good or self.principal not in (None, f"User:{user}")
            self.failed = True

    @rule(ms=st.integers(min_value=0, max_value=150))
    def tick(self, ms: int) -> None:
        self.now += ms

    @invariant()
    def principal_agrees(self) -> None:
        if not self.failed:
            assert self.auth.principal == self.principal


TestAuthenticatorMachine = AuthenticatorMachine.TestCase


# ------------------------------------------------------------------------------- our client's login against it


def client_login(auth: SaslAuthenticator, security: ClientSecurity) -> None:
    """Drive our client's SaslLogin (sofakafka/client/security.py) against the server's authenticator, turning
    each request into what the broker's handlers answer (sasl_handshake.py, sasl_authenticate.py)."""
    login = SaslLogin(security, "the broker")
    request: Request | None = login.first_request()
    while request is not None:
        response: Response
        if isinstance(request, SaslHandshakeRequest):
            result = auth.handshake(request.mechanism, 1)
            response = SaslHandshakeResponse(error_code=result.error_code, mechanisms=list(result.mechanisms))
        else:
            assert isinstance(request, SaslAuthenticateRequest)
            try:
                response = SaslAuthenticateResponse(error_code=0, auth_bytes=auth.authenticate(request.auth_bytes, 0))
            except SaslAuthenticationError as exc:
                response = SaslAuthenticateResponse(error_code=58, error_message=str(exc), auth_bytes=b"")
        request = login.next_request(response)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_our_client_logs_in_with_each_mechanism(mechanism: str) -> None:
    auth = authenticator()
    password = "pw" if mechanism == "PLAIN" else "alice-secret"
    client_login(auth, ClientSecurity("SASL_PLAINTEXT", None, mechanism, "alice", password))
    assert auth.state is SaslState.COMPLETE and auth.principal == "User:alice"


@pytest.mark.parametrize(("mechanism", "password", "message"), [
    ("PLAIN", "wrong", "Authentication failed: Invalid username or password"),
    ("SCRAM-SHA-256", "wrong", "Authentication failed during authentication due to invalid credentials"),
    ("SCRAM-SHA-512", "alice-secret", "does not offer SASL mechanism SCRAM-SHA-512 (it offers PLAIN, SCRAM-SHA-256)"),
])
def test_our_client_reports_a_refused_login_with_the_brokers_words(mechanism: str, password: str, message: str) -> None:
    with pytest.raises(AuthenticationError, match=re.escape(message)):
        client_login(authenticator(), ClientSecurity("SASL_SSL", None, mechanism, "alice", password))


def test_our_scram_client_refuses_a_server_that_cannot_prove_it_knows_the_credential() -> None:
    """A server answering with a made-up signature (it does not hold the user's server key) is an impostor."""
    class Impostor(ScramServer):
        def evaluate(self, token: bytes) -> bytes:
            answer = super().evaluate(token)
            return b"v=" + base64.b64encode(b"\0" * 32) if answer.startswith(b"v=") else answer

    auth = SaslAuthenticator(["SCRAM-SHA-256"], lambda m: Impostor(m, lookup))
    with pytest.raises(AuthenticationError, match="the server's answer does not verify"):
        client_login(auth, ClientSecurity("SASL_SSL", None, "SCRAM-SHA-256", "alice", "alice-secret"))
