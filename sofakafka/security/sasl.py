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
    """The user name once complete."""

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
        self.complete = True
        return b""


CredentialLookup = Callable[[str, str], ScramCredential | None]
"""(mechanism, user name) -> the stored credential, or None for an unknown user."""

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

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._lookup = lookup
        self._unknown_user = False
        self._low_iterations = False
        self._username = ""
        self._keys: tuple[bytes, bytes, bytes, int] = (b"", b"", b"", 0)
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._step = 0

    @property
    def failed_message(self) -> str:
        return (f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{self.mechanism}")

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        self._username = username
        credential = self._lookup(self.mechanism, username)
        if credential is None:
            self._unknown_user = True
            self._keys = _fake_credential(self.mechanism, username)
        elif credential.iterations < MIN_ITERATIONS:
            self._low_iterations = True
            self._keys = _fake_credential(self.mechanism, username)
        else:
            self._keys = (credential.salt, credential.stored_key, credential.server_key, credential.iterations)
        return self._keys

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
        if attrs.get("c") != expected_c or not hmac.compare_digest(digest(client_key).digest(), stored_key):
            detail = "unknown user" if self._unknown_user else "invalid proof (prefixed nonce)"
            if self._low_iterations:
                detail = f"stored credential has fewer than {MIN_ITERATIONS} iterations"
            raise SaslAuthenticationError(self.failed_message, f"{self.mechanism} user {self._username!r}: {detail}")
        self.authorization_id = self._username
        self.complete = True
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
                self._server.set_client_first(text)
                return str(self._server.get_server_first()).encode()
            if self._step == 1:
                self._step = 2
                lenient = self._kafka_lenient_final(text)
                if lenient is not None:
                    return lenient
                try:
                    self._server.set_client_final(text)
                except scramp.ScramException:
                    if self._unknown_user:
                        raise SaslAuthenticationError(self.failed_message,
                                                      f"{self.mechanism} user {self._username!r}: unknown user") from None
                    if self._low_iterations:
                        raise SaslAuthenticationError(
                            self.failed_message,
                            f"{self.mechanism} user {self._username!r}: stored credential has fewer than "
                            f"{MIN_ITERATIONS} iterations") from None
                    raise
                final = str(self._server.get_server_final()).encode()
                self.authorization_id = self._username
                self.complete = True
                return final
        except scramp.ScramException as exc:
            who = f"user {self._username!r}" if self._username else "client"
            raise SaslAuthenticationError(self.failed_message, f"{self.mechanism} {who}: {exc}") from None
        raise SaslAuthenticationError(self.failed_message, "SCRAM token after completion")


# --------------------------------------------------------------------------------------- authenticator


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
        self.session_expires_at_ms: int | None = None
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
            principal = user(server.authorization_id)
            if self._reauthenticating and principal != self.principal:
                self.state = SaslState.FAILED
                raise SaslAuthenticationError("Cannot change principals during re-authentication",
                                              f"re-authentication as {principal} on a session of {self.principal}")
            self.principal = principal
            self._reauthenticating = False
            self.state = SaslState.COMPLETE
            self.session_expires_at_ms = now_ms + self.reauth_ms if self.reauth_ms > 0 else None
        return answer

    @property
    def session_lifetime_ms(self) -> int:
        return self.reauth_ms if self.reauth_ms > 0 else 0

    @property
    def expecting_raw_token(self) -> bool:
        return self.state is SaslState.RAW_TOKENS

    @property
    def in_progress(self) -> bool:
        """The first authentication has not finished (a timeout applies)."""
        return self.principal is None and self.state is not SaslState.FAILED
