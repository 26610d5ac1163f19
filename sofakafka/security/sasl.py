"""SASL on the server side, sans-IO: tokens in, tokens out, no sockets and no clocks.

Two layers:

* A **mechanism** (:class:`PlainServer`, :class:`ScramServer`) evaluates the client's tokens one at a time
  (``evaluate(token) -> challenge``) until ``complete``; a failure raises :class:`SaslAuthenticationError`
  with the message the client is told. The message never says whether the user exists: an unknown SCRAM
  user gets a made-up credential and fails at the proof, exactly where a wrong password fails.
* The **authenticator** (:class:`SaslAuthenticator`) is one connection's life as Kafka's
  SaslServerAuthenticator leads it: it decides which requests may come when (only ApiVersions, SaslHandshake
  and SaslAuthenticate before authentication; SaslHandshake v0 is followed by bare tokens without Kafka
  headers), answers the handshake, feeds tokens to the mechanism, and keeps the KIP-368 session: once
  authenticated with ``connections.max.reauth.ms`` > 0 the session lasts that long, a new handshake and
  authentication may renew it with the same principal and mechanism, and an expired session ends the
  connection at its next request; with it 0 (the default) a handshake after the login is refused
  (ILLEGAL_SASL_STATE) and the connection carries on, as Kafka's request handler answers it. Times are passed in by the caller (milliseconds), never read here.

PLAIN's users come from ``user_<name>="<password>"`` options of the listener's JAAS config (Kafka's
PlainServerCallbackHandler); SCRAM's credentials from a lookup the broker backs with ``/config/users``.

Delegation tokens (KIP-48) log in through SCRAM: a client-first message carrying the extension ``tokenauth=true``
(``n,,n=<token id>,r=<nonce>,tokenauth=true``) names a token, whose credential comes from a second lookup (the
broker's token cache: the HMAC's base64 is the password); the principal is then the token's owner, the login is
marked token-authenticated (such a connection may not ask for tokens itself), and with ``connections.max.reauth.ms``
set the session ends no later than the token's expiry. An unknown or expired token fails at the proof, as an
unknown user does. ``tokens_without_extension`` (sofakafka's own, off by default as in Kafka) also takes a token
id as the user name of a login without the extension when no user of that name exists: librdkafka and
kafka-python cannot send SCRAM extensions.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import scramp

from sofakafka.security.principal import user
from sofakafka.security.scram import MECHANISMS as SCRAM_MECHANISMS
from sofakafka.security.scram import MIN_ITERATIONS, ScramCredential
from sofakafka.security.tokens import TOKEN_AUTH_EXTENSION, TokenLogin

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


class SaslAuthenticationError(Exception):
    """Authentication failed; ``str(exc)`` is what the client is told, ``detail`` what only the log says."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


class IllegalSaslStateError(Exception):
    """A request that cannot come now (ILLEGAL_SASL_STATE): the connection is closed."""


class SaslMechanismServer:
    mechanism: str
    complete: bool = False
    authorization_id: str = ""
    """The user name (or token id) once complete."""
    principal: str = ""
    """Who logged in once complete: ``User:<name>``, or a token's owner."""
    token_authenticated: bool = False
    credential_lifetime_ms: int | None = None
    """How long the credential used lives on from the login (a token's), None when it does not end."""

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


class PlainServer(SaslMechanismServer):
    """RFC 4616: ``[authzid] NUL authcid NUL passwd`` in one token; the answer is empty."""

    mechanism = PLAIN
    FAILED = "Authentication failed: Invalid username or password"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: PLAIN takes one token", "token after completion")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError(self.FAILED, "PLAIN token is not UTF-8") from None
        parts = text.split("\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens",
                                          f"PLAIN token has {len(parts)} NUL-separated parts")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified", "empty username")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified", "empty password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username",
                f"authorization id {authzid!r} differs from user {username!r}")
        expected = self._users.get(username)
        # Compare against something even for an unknown user, so both take the same path.
        ok = hmac.compare_digest((expected if expected is not None else "\x00unknown").encode(), password.encode())
        if expected is None or not ok:
            reason = "unknown user" if expected is None else "wrong password"
            raise SaslAuthenticationError(self.FAILED, f"PLAIN user {username!r}: {reason}")
        self.authorization_id = username
        self.principal = user(username)
        self.complete = True
        return b""


CredentialLookup = Callable[[str, str], ScramCredential | None]
"""(mechanism, user name) -> the stored credential, or None for an unknown user."""
TokenLookup = Callable[[str, str], TokenLogin | str]
"""(mechanism, token id) -> a live token's login, or the reason there is none (for the log)."""


def client_first_extensions(client_first: str) -> dict[str, str]:
    """The ``key=value`` extensions after the nonce of a SCRAM client-first message (Kafka's ScramExtensions);
    a malformed message has none here and fails in scramp."""
    parts = client_first.split(",")
    out: dict[str, str] = {}
    for part in parts[4:]:  # gs2 flag, authzid, n=, r=, then the extensions (a name holds no raw comma: =2C)
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value
    return out

_FAKE_KEY = os.urandom(32)


def _fake_credential(mechanism: str, username: str) -> tuple[bytes, bytes, bytes, int]:
    """A stable made-up credential for an unknown user: the exchange runs on and fails at the proof."""
    digest = hashlib.sha512 if mechanism.endswith("512") else hashlib.sha256
    seed = hmac.new(_FAKE_KEY, f"{mechanism}\x00{username}".encode(), hashlib.sha512).digest()
    salt = seed[:16]
    stored = hmac.new(seed, b"stored", digest).digest()
    server = hmac.new(seed, b"server", digest).digest()
    return salt, stored, server, MIN_ITERATIONS


class ScramServer(SaslMechanismServer):
    """RFC 5802 over scramp: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup: CredentialLookup, token_lookup: TokenLookup | None = None, *,
                 tokens_without_extension: bool = False) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._tokens_without_extension = tokens_without_extension
        self._token_auth = False
        self._token: TokenLogin | None = None
        self._refusal: str | None = None
        """Why the login will fail at the proof (unknown user, expired token, ...), for the log."""
        self._username = ""
        self._keys: tuple[bytes, bytes, bytes, int] = (b"", b"", b"", 0)
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._step = 0

    @property
    def failed_message(self) -> str:
        return (f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{self.mechanism}")

    def _find_token(self, token_id: str) -> ScramCredential | None:
        if self._token_lookup is None:
            self._refusal = "delegation tokens are disabled (no delegation.token.master.key)"
            return None
        found = self._token_lookup(self.mechanism, token_id)
        if isinstance(found, str):
            self._refusal = found
            return None
        self._token = found
        return found.credential

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        self._username = username
        if self._token_auth:
            credential = self._find_token(username)
        else:
            credential = self._lookup(self.mechanism, username)
            if credential is None:
                self._refusal = "unknown user"
                if self._tokens_without_extension and self._find_token(username) is None:
                    self._refusal = "unknown user or delegation token"
                credential = self._token.credential if self._token is not None else None
        if credential is not None and credential.iterations < MIN_ITERATIONS:
            self._refusal = f"stored credential has fewer than {MIN_ITERATIONS} iterations"
            credential = None
        if credential is None:
            self._keys = _fake_credential(self.mechanism, username)
        else:
            self._refusal = None
            self._keys = (credential.salt, credential.stored_key, credential.server_key, credential.iterations)
        return self._keys

    def _succeed(self) -> None:
        self.authorization_id = self._username
        if self._token is not None:
            self.principal = self._token.owner
            self.token_authenticated = True
            self.credential_lifetime_ms = self._token.lifetime_ms
        else:
            self.principal = user(self._username)
        self.complete = True

    def _kafka_lenient_final(self, text: str) -> bytes | None:
        """Kafka's server accepts a client-final whose nonce *ends with* the server's (ScramSaslServer checks
        ``endsWith``), and librdkafka before 2.2 sends its own nonce in front of the whole server nonce. scramp
        insists on equality, so that one case is verified here, with the very message the client signed
        (RFC 5802: ClientKey = proof XOR HMAC(StoredKey, AuthMessage), H(ClientKey) must be StoredKey). Every
        other client-final (None returned) goes through scramp."""
        nonce = str(self._server.nonce)
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        attrs = dict(part.split("=", 1) for part in without_proof.split(",") if "=" in part) if sep else {}
        client_nonce = attrs.get("r", "")
        if not sep or client_nonce == nonce or not client_nonce.endswith(nonce):
            return None
        digest = hashlib.sha512 if self.mechanism.endswith("512") else hashlib.sha256
        _salt, stored_key, server_key, _iterations = self._keys
        expected_c = base64.b64encode(str(self._server.gs2_header).encode()).decode()
        auth_message = f"{self._server.client_first_bare},{self._server.server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            proof = b""
        signature = hmac.new(stored_key, auth_message, digest).digest()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=False)) if len(proof) == len(signature) else b""
        if (self._refusal is not None or attrs.get("c") != expected_c
                or not hmac.compare_digest(digest(client_key).digest(), stored_key)):
            detail = self._refusal or "invalid proof (prefixed nonce)"
            raise SaslAuthenticationError(self.failed_message, f"{self.mechanism} {self._who}: {detail}")
        self._succeed()
        server_signature = hmac.new(server_key, auth_message, digest).digest()
        return b"v=" + base64.b64encode(server_signature)

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError(self.failed_message, "SCRAM message is not UTF-8") from None
        try:
            if self._step == 0:
                self._step = 1
                extensions = client_first_extensions(text)
                # Kafka's ScramExtensions: Boolean.parseBoolean, so any case of "true".
                self._token_auth = extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true"
                if not extensions:
                    self._server.set_client_first(text)
                else:
                    # scramp takes one-letter attributes only: it parses the message without the extensions,
                    # and the proofs are then checked over the bare message the client signed, extensions and all.
                    self._server.set_client_first(",".join(text.split(",")[:4]))
                    self._server.client_first_bare = text.split(",", 2)[2]
                return str(self._server.get_server_first()).encode()
            if self._step == 1:
                self._step = 2
                lenient = self._kafka_lenient_final(text)
                if lenient is not None:
                    return lenient
                try:
                    self._server.set_client_final(text)
                except scramp.ScramException:
                    if self._refusal is not None:
                        raise SaslAuthenticationError(self.failed_message,
                                                      f"{self.mechanism} {self._who}: {self._refusal}") from None
                    raise
                if self._refusal is not None:  # a made-up credential cannot verify; never let it pass
                    raise SaslAuthenticationError(self.failed_message, f"{self.mechanism} {self._who}: {self._refusal}")
                final = str(self._server.get_server_final()).encode()
                self._succeed()
                return final
        except scramp.ScramException as exc:
            who = self._who if self._username else "client"
            raise SaslAuthenticationError(self.failed_message, f"{self.mechanism} {who}: {exc}") from None
        raise SaslAuthenticationError(self.failed_message, "SCRAM token after completion")

    @property
    def _who(self) -> str:
        return f"{'delegation token' if self._token_auth else 'user'} {self._username!r}"


# --------------------------------------------------------------------------------------- authenticator


def session_lifetime(reauth_ms: int, credential_lifetime_ms: int | None) -> int:
    """A session's length as Kafka's SaslServerAuthenticator computes it: ``connections.max.reauth.ms`` capped by
    what is left of the credential (a token's); 0, no end, when re-authentication is off (a token's expiry then
    ends no session: Kafka caps by the configured 0) or nothing is left."""
    if reauth_ms <= 0:
        return 0
    if credential_lifetime_ms is None:
        return reauth_ms
    return max(0, min(reauth_ms, credential_lifetime_ms))


class SaslState(enum.Enum):
    HANDSHAKE = "HANDSHAKE"
    """Waiting for SaslHandshake (ApiVersions allowed)."""
    AUTHENTICATE = "AUTHENTICATE"
    """Handshake v1 done: SaslAuthenticate requests carry the tokens."""
    RAW_TOKENS = "RAW_TOKENS"
    """Handshake v0 done: the next frames are bare tokens, answered with bare tokens."""
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


@dataclass(frozen=True)
class HandshakeResult:
    error_code: int
    mechanisms: Sequence[str]


class SaslAuthenticator:
    """One connection's SASL life (see the module docstring). ``mechanism_factory(name)`` makes a fresh
    mechanism server for an enabled mechanism."""

    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34

    def __init__(self, enabled_mechanisms: Sequence[str],
                 mechanism_factory: Callable[[str], SaslMechanismServer], reauth_ms: int = 0) -> None:
        self.enabled_mechanisms = tuple(enabled_mechanisms)
        self._factory = mechanism_factory
        self.reauth_ms = reauth_ms
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self._server: SaslMechanismServer | None = None
        self.principal: str | None = None
        """Set once authenticated; kept through re-authentication."""
        self.token_authenticated = False
        """The login used a delegation token (KIP-48)."""
        self.session_expires_at_ms: int | None = None
        self._session_lifetime_ms = 0
        self._reauthenticating = False

    def check_request(self, api_key: int, now_ms: int) -> None:
        """May a request of ``api_key`` come now? Raises IllegalSaslStateError (close the connection); a
        refusal is final, as the connection it guards is closed."""
        try:
            self._check_request(api_key, now_ms)
        except IllegalSaslStateError:
            self.state = SaslState.FAILED
            raise

    def _check_request(self, api_key: int, now_ms: int) -> None:
        if self.state is SaslState.FAILED:
            raise IllegalSaslStateError("request after a failed authentication")
        if self.principal is not None and not self._reauthenticating:
            if self.session_expires_at_ms is not None and now_ms >= self.session_expires_at_ms:
                raise IllegalSaslStateError("the SASL session expired (connections.max.reauth.ms) without "
                                            "re-authentication")
            # Anything goes once logged in: a SaslHandshake may start a KIP-368 re-authentication, and a
            # SaslAuthenticate without one is answered ILLEGAL_SASL_STATE by its handler, as Kafka's KafkaApis
            # answers it, on a connection that stays open.
            return
        if self.state is SaslState.HANDSHAKE and api_key in (API_VERSIONS, SASL_HANDSHAKE):
            if api_key == API_VERSIONS and self._reauthenticating:
                raise IllegalSaslStateError("ApiVersions during re-authentication")
            return
        if self.state is SaslState.AUTHENTICATE and api_key == SASL_AUTHENTICATE:
            return
        expected = {SaslState.HANDSHAKE: "SaslHandshake", SaslState.AUTHENTICATE: "SaslAuthenticate",
                    SaslState.RAW_TOKENS: "a SASL token", SaslState.COMPLETE: "-", SaslState.FAILED: "-"}
        raise IllegalSaslStateError(f"unexpected request (API key {api_key}) before authentication completed, "
                                    f"expected {expected[self.state]}")

    def handshake(self, mechanism: str, version: int) -> HandshakeResult:
        reauth = self.principal is not None
        if mechanism not in self.enabled_mechanisms:
            self.state = SaslState.FAILED
            return HandshakeResult(self.UNSUPPORTED_SASL_MECHANISM, self.enabled_mechanisms)
        if reauth:
            if self.reauth_ms <= 0:
                # Kafka re-authenticates only when connections.max.reauth.ms is set; without it the handshake
                # reaches the request handler, which answers ILLEGAL_SASL_STATE and no mechanisms, and the
                # connection carries on as it was.
                return HandshakeResult(self.ILLEGAL_SASL_STATE, ())
            if version == 0:
                self.state = SaslState.FAILED
                return HandshakeResult(self.ILLEGAL_SASL_STATE, self.enabled_mechanisms)
            if mechanism != self.mechanism:
                # Kafka answers the handshake and fails the authentication that follows; we refuse at once.
                self.state = SaslState.FAILED
                return HandshakeResult(self.UNSUPPORTED_SASL_MECHANISM, self.enabled_mechanisms)
            self._reauthenticating = True
        self.mechanism = mechanism
        self._server = self._factory(mechanism)
        self.state = SaslState.RAW_TOKENS if version == 0 else SaslState.AUTHENTICATE
        return HandshakeResult(0, self.enabled_mechanisms)

    def authenticate(self, token: bytes, now_ms: int) -> bytes:
        """Feed one token; returns the answer token. Raises SaslAuthenticationError (state FAILED)."""
        server = self._server
        if server is None or self.state not in (SaslState.AUTHENTICATE, SaslState.RAW_TOKENS):
            self.state = SaslState.FAILED
            raise IllegalSaslStateError("SaslAuthenticate before SaslHandshake")
        try:
            answer = server.evaluate(token)
        except SaslAuthenticationError:
            self.state = SaslState.FAILED
            raise
        if server.complete:
            principal = server.principal
            if self._reauthenticating and principal != self.principal:
                self.state = SaslState.FAILED
                raise SaslAuthenticationError("Cannot change principals during re-authentication",
                                              f"re-authentication as {principal} on a session of {self.principal}")
            self.principal = principal
            self.token_authenticated = server.token_authenticated
            self._reauthenticating = False
            self.state = SaslState.COMPLETE
            self._session_lifetime_ms = session_lifetime(self.reauth_ms, server.credential_lifetime_ms)
            self.session_expires_at_ms = now_ms + self._session_lifetime_ms if self._session_lifetime_ms > 0 else None
        return answer

    @property
    def session_lifetime_ms(self) -> int:
        """What SaslAuthenticate v1+ tells the client: its session's length, 0 when it does not end."""
        return self._session_lifetime_ms

    @property
    def expecting_raw_token(self) -> bool:
        return self.state is SaslState.RAW_TOKENS

    @property
    def in_progress(self) -> bool:
        """The first authentication has not finished (a timeout applies)."""
        return self.principal is None and self.state is not SaslState.FAILED
