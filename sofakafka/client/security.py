"""The client side of TLS and SASL: how our own connections (the command-line tools, the broker's inter-broker
links) reach a secured listener.

:class:`ClientSecurity` is the settings, ready to use: the security protocol, the TLS context to wrap the socket
in (SSL, SASL_SSL) and the SASL login (SASL_PLAINTEXT, SASL_SSL: mechanism, user, password). This package only
uses it; it is built from Kafka's client properties (a tool's ``--command-config``) or from the broker's
inter-broker listener settings by :mod:`sofakafka.security.client_config`, which reads key stores and JAAS.

:class:`SaslLogin` is the login as Kafka's clients make it, sans-IO: it hands out the requests to send
(SaslHandshake naming the mechanism, then SaslAuthenticate with each token) and reads their responses, so the
blocking connection (connection.py) and the broker's asyncio replica fetchers drive the same exchange. PLAIN is
one token; SCRAM-SHA-256/512 are two rounds through scramp, whose client checks the server's signature. A
delegation token (KIP-48) logs in with SCRAM as its id and HMAC (base64) with ``token_auth``: the client-first
message then carries the extension ``tokenauth=true``, inside the message both sides sign, as Kafka's
ScramLoginModule sends it when its JAAS options say ``tokenauth="true"``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import scramp

from sofakafka.client.errors import AuthenticationError
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from sofakafka.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from sofakafka.protocol.schema import Request, Response

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)


class SaslClient:
    """``first()`` is the first token; ``respond(challenge)`` the next one, or None when nothing is left."""

    mechanism: str

    def first(self) -> bytes:
        raise NotImplementedError

    def respond(self, challenge: bytes) -> bytes | None:
        raise NotImplementedError


class PlainClient(SaslClient):
    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = f"\x00{username}\x00{password}".encode()

    def first(self) -> bytes:
        return self._token

    def respond(self, challenge: bytes) -> bytes | None:
        return None


TOKEN_AUTH_EXTENSION = ",tokenauth=true"


class ScramClient(SaslClient):
    def __init__(self, mechanism: str, username: str, password: str, token_auth: bool = False) -> None:
        self.mechanism = mechanism
        self._client = scramp.ScramClient([mechanism], username, password)
        self._token_auth = token_auth
        self._step = 0

    def first(self) -> bytes:
        first = str(self._client.get_client_first())
        if self._token_auth:
            # RFC 5802's client-first-message-bare ends with optional extensions; the proof signs them too, so
            # scramp's copy of the bare message must carry them as sent.
            self._client.client_first_bare += TOKEN_AUTH_EXTENSION
            first += TOKEN_AUTH_EXTENSION
        return first.encode()

    def respond(self, challenge: bytes) -> bytes | None:
        try:
            if self._step == 0:
                self._step = 1
                self._client.set_server_first(challenge.decode())
                return str(self._client.get_client_final()).encode()
            if self._step == 1:
                self._step = 2
                self._client.set_server_final(challenge.decode())
                return None
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationError(f"{self.mechanism}: the server's answer does not verify: {exc}") from None
        return None


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    token_auth: bool = False
    """SCRAM with a delegation token: ``username`` is the token id, ``password`` its HMAC in base64."""

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def sasl_client(self) -> SaslClient:
        assert self.sasl_mechanism and self.username is not None and self.password is not None
        if self.sasl_mechanism == PLAIN:
            return PlainClient(self.username, self.password)
        return ScramClient(self.sasl_mechanism, self.username, self.password, self.token_auth)


class SaslLogin:
    """One SASL login: ``request = first_request()``, then ``request = next_request(response)`` until None.
    A refusal raises :class:`AuthenticationError` with the broker's message (``where`` names the broker)."""

    def __init__(self, security: ClientSecurity, where: str) -> None:
        self._client = security.sasl_client()
        self._where = where

    def first_request(self) -> Request:
        return SaslHandshakeRequest(mechanism=self._client.mechanism)

    def next_request(self, response: Response) -> Request | None:
        if isinstance(response, SaslHandshakeResponse):
            if response.error_code != ErrorCode.NONE:
                raise AuthenticationError(f"{self._where} does not offer SASL mechanism {self._client.mechanism} "
                                          f"(it offers {', '.join(response.mechanisms) or 'none'})")
            return SaslAuthenticateRequest(auth_bytes=self._client.first())
        assert isinstance(response, SaslAuthenticateResponse)
        if response.error_code != ErrorCode.NONE:
            raise AuthenticationError(response.error_message or ErrorCode.for_code(response.error_code).name)
        token = self._client.respond(response.auth_bytes)
        return None if token is None else SaslAuthenticateRequest(auth_bytes=token)
