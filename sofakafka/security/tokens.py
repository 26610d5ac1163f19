"""Delegation tokens (KIP-48) as Kafka 2.6 issues, checks and keeps them; pure (no store, no clock, no sockets).

A token is an id (a random UUID, URL-safe base64 without padding: 22 characters), an owner (the principal that
created it), renewers (``User:`` principals that may renew or expire it too) and three times in epoch ms: when
it was issued, when it expires unless renewed (``expiry``) and the ``max`` past which no renewal reaches. Its
secret, the HMAC, is never stored: every broker computes it from the id with the cluster's
``delegation.token.master.key`` (HmacSHA512 keyed with the key's UTF-8 bytes, over the id's UTF-8 bytes), so a
client that holds the id and the HMAC's base64 logs in with SCRAM as *username = id, password = HMAC* and the
SCRAM extension ``tokenauth=true``, and is then the token's owner (sofakafka/security/sasl.py).

The rules, each Kafka 2.6's DelegationTokenManager's (the comparisons are strict: a token whose expiry is
exactly now is still alive):

* create: the max lifetime asked for, capped by ``delegation.token.max.lifetime.ms`` (0 or less: the cap
  itself); expiry at issue + ``delegation.token.expiry.time.ms``, never past the max;
* a token is expired when ``max < now`` or ``expiry < now``;
* renew and expire: only the owner or a renewer (else DELEGATION_TOKEN_OWNER_MISMATCH), only a live token (else
  DELEGATION_TOKEN_EXPIRED); renew moves the expiry to now + the period asked for (negative: the configured
  expiry time), never past the max; expire with a negative period removes the token at once (the answer's
  timestamp is now), otherwise it moves the expiry to now + the period, never past the max;
* describe: with owners given, only tokens one of them owns or renews; of those, the ones the requester owns or
  renews, and the others only where the requester may DESCRIBE the DelegationToken resource of that id.

Kafka computes ``now + period`` in Java longs, where a period near 2^63 wraps negative; here such a sum stops at
2^63 - 1 (docs/compatibility.md).

Stored form (ZooKeeper's ``/delegation_token/tokens/<id>``, the embedded store's same path): Kafka 2.6's JSON,
``{"version":1,"owner":"User%3Aalice","renewers":[...],"issueTimestamp":..,"maxTimestamp":..,
"expiryTimestamp":..,"tokenId":".."}`` with principals URL-encoded as Kafka's Sanitizer does.

:class:`DelegationTokenCache` is what a broker knows of the tokens: id -> information, HMAC and the SCRAM
credentials derived from it (4096 iterations, a random salt per broker, as Kafka derives them), and HMAC -> id.
Readers get immutable snapshots and never block.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from sofakafka.controller.zk_paths import desanitize, sanitize
from sofakafka.protocol.errors import ErrorCode
from sofakafka.security.principal import USER_TYPE
from sofakafka.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential, make_credential

LONG_MAX = 2**63 - 1
ERROR_TIMESTAMP = -1
"""The timestamp of an answer that failed."""
STORED_VERSION = 1
TOKEN_AUTH_EXTENSION = "tokenauth"
"""The SCRAM extension a client sends (``tokenauth=true``) to log in with a token rather than as a user."""


class TokenFormatError(ValueError):
    """A stored token that cannot be read, or a principal not in ``Type:name`` form."""


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` -> (type, name), split at the first colon, as Kafka's SecurityUtils.parseKafkaPrincipal."""
    kind, sep, name = text.partition(":")
    if not text or not sep:
        raise TokenFormatError(f"expected a string in format principalType:principalName but got {text}")
    return kind, name


def principal(kind: str, name: str) -> str:
    return f"{kind}:{name}"


def is_user_principal(text: str) -> bool:
    return parse_principal(text)[0] == USER_TYPE


def _add(now_ms: int, period_ms: int) -> int:
    return min(now_ms + period_ms, LONG_MAX)


def new_token_id() -> str:
    """A random UUID's 16 bytes, URL-safe base64 without padding (Kafka's CoreUtils.generateUuidAsBase64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def token_hmac(token_id: str, master_key: str) -> bytes:
    """HmacSHA512 over the id's UTF-8 bytes, keyed with the master key's UTF-8 bytes."""
    return hmac.new(master_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def hmac_text(mac: bytes) -> str:
    """The HMAC as a client uses it (the SCRAM password, the tools' ``--hmac``): standard base64 with padding."""
    return base64.b64encode(mac).decode("ascii")


@dataclass(frozen=True)
class TokenSettings:
    max_lifetime_ms: int
    """``delegation.token.max.lifetime.ms``: the cap of a token's max lifetime."""
    expiry_time_ms: int
    """``delegation.token.expiry.time.ms``: how long a token lives from issue or renewal unless told otherwise."""


@dataclass(frozen=True)
class TokenInformation:
    token_id: str
    owner: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, who: str) -> bool:
        return who == self.owner or who in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms


def new_token(token_id: str, owner: str, renewers: Sequence[str], now_ms: int, max_lifetime_ms: int,
              settings: TokenSettings) -> TokenInformation:
    lifetime = settings.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, settings.max_lifetime_ms)
    max_timestamp = _add(now_ms, lifetime)
    expiry = min(max_timestamp, _add(now_ms, settings.expiry_time_ms))
    return TokenInformation(token_id, owner, tuple(renewers), now_ms, max_timestamp, expiry)


@dataclass(frozen=True)
class TokenChange:
    """What a renew or expire decided: the error, the timestamp the answer carries, and the token's new state
    (None: nothing to write; ``remove``: delete the token)."""

    error: ErrorCode
    timestamp: int
    token: TokenInformation | None = None
    remove: bool = False


def _refusal(token: TokenInformation, who: str, now_ms: int) -> TokenChange | None:
    if not token.owner_or_renewer(who):
        return TokenChange(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, ERROR_TIMESTAMP)
    if token.expired(now_ms):
        return TokenChange(ErrorCode.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP)
    return None


def renew(token: TokenInformation, who: str, now_ms: int, renew_period_ms: int,
          settings: TokenSettings) -> TokenChange:
    refused = _refusal(token, who, now_ms)
    if refused is not None:
        return refused
    period = settings.expiry_time_ms if renew_period_ms < 0 else renew_period_ms
    expiry = min(token.max_timestamp, _add(now_ms, period))
    return TokenChange(ErrorCode.NONE, expiry, replace(token, expiry_timestamp=expiry))


def expire(token: TokenInformation, who: str, now_ms: int, expiry_period_ms: int) -> TokenChange:
    refused = _refusal(token, who, now_ms)
    if refused is not None:
        return refused
    if expiry_period_ms < 0:
        return TokenChange(ErrorCode.NONE, now_ms, remove=True)
    expiry = min(token.max_timestamp, _add(now_ms, expiry_period_ms))
    return TokenChange(ErrorCode.NONE, expiry, replace(token, expiry_timestamp=expiry))


def describable(token: TokenInformation, requester: str, owners: Sequence[str] | None,
                may_describe: Callable[[str], bool]) -> bool:
    """Does a DescribeDelegationToken of ``requester`` filtered by ``owners`` (None: every owner) show ``token``?
    ``may_describe(token_id)`` is the ACL check, asked only for tokens the requester neither owns nor renews."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    return token.owner_or_renewer(requester) or may_describe(token.token_id)


# ------------------------------------------------------------------------------------------ stored form


def encode_token(token: TokenInformation) -> bytes:
    doc = {"version": STORED_VERSION, "owner": sanitize(token.owner),
           "renewers": [sanitize(r) for r in token.renewers], "issueTimestamp": token.issue_timestamp,
           "maxTimestamp": token.max_timestamp, "expiryTimestamp": token.expiry_timestamp,
           "tokenId": token.token_id}
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def decode_token(data: bytes) -> TokenInformation:
    try:
        doc: Any = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise TokenFormatError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != STORED_VERSION:
        raise TokenFormatError(f"not a version {STORED_VERSION} token: {str(doc)[:80]}")
    try:
        owner, renewers = doc["owner"], doc["renewers"]
        times = [doc[k] for k in ("issueTimestamp", "maxTimestamp", "expiryTimestamp")]
        token_id = doc["tokenId"]
    except KeyError as exc:
        raise TokenFormatError(f"lacks {exc.args[0]}") from None
    if (not isinstance(owner, str) or not isinstance(token_id, str) or not isinstance(renewers, list)
            or not all(isinstance(r, str) for r in renewers)
            or not all(isinstance(t, int) and not isinstance(t, bool) for t in times)):
        raise TokenFormatError("a field of the wrong type")
    for p in (owner, *renewers):
        parse_principal(desanitize(p))
    return TokenInformation(token_id, desanitize(owner), tuple(desanitize(r) for r in renewers), *times)


# ------------------------------------------------------------------------------------------------ the cache


@dataclass(frozen=True)
class CachedToken:
    info: TokenInformation
    hmac: bytes
    credentials: Mapping[str, ScramCredential]


@dataclass(frozen=True)
class TokenLogin:
    """What a SCRAM login with ``tokenauth=true`` needs of a live token."""

    credential: ScramCredential
    owner: str
    lifetime_ms: int
    """How long the token lives on from the moment it was looked up (its expiry less that moment)."""


class DelegationTokenCache:
    """The tokens this broker knows, with their HMACs and SCRAM credentials (computed here from the master key).
    Writers (the store's notification thread, the token manager) replace immutable maps under a lock; readers
    (logins on the event loop, the handlers) read the current maps without one."""

    def __init__(self, master_key: str) -> None:
        if not master_key:
            raise ValueError("a token cache needs a master key")
        self._master_key = master_key
        self._lock = threading.Lock()
        self._tokens: Mapping[str, CachedToken] = MappingProxyType({})
        self._by_hmac: Mapping[bytes, str] = MappingProxyType({})

    def hmac_of(self, token_id: str) -> bytes:
        return token_hmac(token_id, self._master_key)

    def _cached(self, info: TokenInformation) -> CachedToken:
        existing = self._tokens.get(info.token_id)
        if existing is not None:  # same id, same HMAC: keep the credentials (their salt) as they are
            return replace(existing, info=info)
        mac = self.hmac_of(info.token_id)
        password = hmac_text(mac)
        return CachedToken(info, mac, MappingProxyType(
            {m: make_credential(m, password, iterations=MIN_ITERATIONS) for m in MECHANISMS}))

    def update(self, info: TokenInformation) -> None:
        cached = self._cached(info)  # the PBKDF2 work outside the lock
        with self._lock:
            self._tokens = MappingProxyType({**self._tokens, info.token_id: cached})
            self._by_hmac = MappingProxyType({**self._by_hmac, cached.hmac: info.token_id})

    def remove(self, token_id: str) -> None:
        with self._lock:
            gone = self._tokens.get(token_id)
            if gone is None:
                return
            self._tokens = MappingProxyType({k: v for k, v in self._tokens.items() if k != token_id})
            self._by_hmac = MappingProxyType({k: v for k, v in self._by_hmac.items() if k != gone.hmac})

    def replace_all(self, infos: Iterable[TokenInformation]) -> None:
        cached = {i.token_id: self._cached(i) for i in infos}
        with self._lock:
            self._tokens = MappingProxyType(cached)
            self._by_hmac = MappingProxyType({c.hmac: token_id for token_id, c in cached.items()})

    def token(self, token_id: str) -> CachedToken | None:
        return self._tokens.get(token_id)

    def token_for_hmac(self, mac: bytes) -> CachedToken | None:
        token_id = self._by_hmac.get(bytes(mac))
        return None if token_id is None else self._tokens.get(token_id)

    def tokens(self) -> list[CachedToken]:
        return sorted(self._tokens.values(), key=lambda t: (t.info.issue_timestamp, t.info.token_id))

    def login(self, mechanism: str, token_id: str, now_ms: int) -> TokenLogin | str:
        """A live token's SCRAM login, or why there is none (for the log only: the client is told nothing more
        than it is for a wrong password)."""
        cached = self._tokens.get(token_id)
        if cached is None:
            return "no such delegation token"
        if cached.info.expired(now_ms):
            return (f"delegation token expired (expiry {cached.info.expiry_timestamp}, max "
                    f"{cached.info.max_timestamp}, now {now_ms})")
        credential = cached.credentials.get(mechanism)
        if credential is None:
            return f"no {mechanism} credential"
        return TokenLogin(credential, cached.info.owner, cached.info.expiry_timestamp - now_ms)
