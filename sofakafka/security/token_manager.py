"""Delegation tokens in the metadata tree: Kafka 2.6's DelegationTokenManager, on either store backend.

Written here, read by every broker (sofakafka/security/tokens.py says what a token is and the rules):

* ``/delegation_token/tokens/<token id>`` — the token's JSON (never its HMAC), created or rewritten together with
  ``/delegation_token/token_changes/token_change_<seq>`` (data: the token id) in one multi-op, and deleted with
  such a notification when the token is expired on purpose or by the expiry scan.

Every broker with ``delegation.token.master.key`` set runs one manager: it reads every token at start, and
:class:`~sofakafka.security.store.SecurityMetadata` hands it each new notification (``reload``) and a full read
after a lost session (``load_all``), so a token created, renewed or removed through any broker (or Kafka's own
brokers on the same ZooKeeper) is in force everywhere as soon as the watch fires. Kafka writes the token and then
its notification as two requests; one multi-op cannot leave a token without its notification. A renewal or
expiry re-reads the token from the store and writes conditionally on the znode version, so two brokers changing
one token at once cannot lose either change (Kafka decides on its cache and writes unconditionally).

``expire_tokens`` is the periodic scan (``delegation.token.expiry.check.interval.ms``) that removes the tokens
past their expiry or max; Kafka runs it on the active controller only, and so does the broker.

Threads: every method here blocks on the store (asyncio code calls them through ``run_blocking``); the cache they
fill is read without blocking.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sofakafka.controller import zk_paths
from sofakafka.controller.store import (
    BadVersionError,
    CreateOp,
    DeleteOp,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    Op,
    SetDataOp,
)
from sofakafka.protocol.errors import ErrorCode
from sofakafka.security.tokens import (
    ERROR_TIMESTAMP,
    CachedToken,
    DelegationTokenCache,
    TokenChange,
    TokenFormatError,
    TokenInformation,
    TokenSettings,
    decode_token,
    encode_token,
    expire,
    new_token,
    new_token_id,
    renew,
)

log = logging.getLogger(__name__)

_CAS_ATTEMPTS = 20


class TokenStoreError(Exception):
    """A token write that could not be done (concurrent changes kept winning)."""


@dataclass(frozen=True)
class CreatedToken:
    info: TokenInformation
    hmac: bytes


class DelegationTokenManager:
    def __init__(self, store: MetadataStore, cache: DelegationTokenCache, settings: TokenSettings, *,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self._store = store
        self.cache = cache
        self.settings = settings
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._write_lock = threading.Lock()

    def now_ms(self) -> int:
        return self._clock_ms()

    # ----------------------------------------------------------------------------------------------- reading

    def ensure_paths(self) -> None:
        for path in (zk_paths.DELEGATION_TOKENS_PATH, zk_paths.DELEGATION_TOKEN_CHANGES_PATH):
            self._store.ensure_path(path)

    def load_all(self) -> None:
        """Read every stored token into the cache (start, a new store session)."""
        try:
            ids = self._store.get_children(zk_paths.DELEGATION_TOKENS_PATH)
        except NoNodeError:
            ids = []
        infos = [info for info in (self._read(token_id)[0] for token_id in ids) if info is not None]
        self.cache.replace_all(infos)
        log.info("loaded %d delegation token(s)", len(infos))

    def reload(self, token_id: str) -> None:
        """A notification named ``token_id``: take the stored token, or forget it when it is gone."""
        info, _ = self._read(token_id)
        if info is None:
            self.cache.remove(token_id)
        else:
            self.cache.update(info)

    def _read(self, token_id: str) -> tuple[TokenInformation | None, int]:
        """The stored token and its znode version (None, -1: none, or unreadable)."""
        if not token_id or "/" in token_id or token_id in (".", ".."):
            return None, -1
        path = zk_paths.delegation_token_path(token_id)
        try:
            data, stat = self._store.get(path)
        except NoNodeError:
            return None, -1
        try:
            info = decode_token(data)
        except TokenFormatError as exc:
            log.warning("ignoring the unreadable delegation token %s: %s", path, exc)
            return None, -1
        if info.token_id != token_id:
            log.warning("ignoring %s: it holds token %r", path, info.token_id)
            return None, -1
        return info, stat.version

    # ----------------------------------------------------------------------------------------------- writing

    def _notification(self, token_id: str) -> CreateOp:
        return CreateOp(zk_paths.delegation_token_change_prefix_path(), token_id.encode("utf-8"), sequence=True)

    def create(self, owner: str, renewers: Sequence[str], max_lifetime_ms: int) -> CreatedToken:
        now = self.now_ms()
        with self._write_lock:
            self.ensure_paths()
            for _ in range(_CAS_ATTEMPTS):
                info = new_token(new_token_id(), owner, renewers, now, max_lifetime_ms, self.settings)
                try:
                    self._store.multi([CreateOp(zk_paths.delegation_token_path(info.token_id), encode_token(info)),
                                       self._notification(info.token_id)])
                    break
                except NodeExistsError:  # a 128-bit id taken already: draw another
                    continue
            else:
                raise TokenStoreError("could not find a free token id")
        self.cache.update(info)
        log.info("created delegation token %s for owner %s", info.token_id, owner)
        return CreatedToken(info, self.cache.hmac_of(info.token_id))

    def renew(self, who: str, mac: bytes, renew_period_ms: int) -> TokenChange:
        return self._change(mac, lambda info, now: renew(info, who, now, renew_period_ms, self.settings), "renewed")

    def expire(self, who: str, mac: bytes, expiry_period_ms: int) -> TokenChange:
        return self._change(mac, lambda info, now: expire(info, who, now, expiry_period_ms), "expired")

    def _change(self, mac: bytes, decide: Callable[[TokenInformation, int], TokenChange], what: str) -> TokenChange:
        """Find the token by its HMAC (Kafka asks its cache), decide on the stored state, write it conditionally."""
        cached = self.cache.token_for_hmac(mac)
        if cached is None:
            return TokenChange(ErrorCode.DELEGATION_TOKEN_NOT_FOUND, ERROR_TIMESTAMP)
        token_id = cached.info.token_id
        with self._write_lock:
            for _ in range(_CAS_ATTEMPTS):
                info, version = self._read(token_id)
                if info is None:
                    self.cache.remove(token_id)
                    return TokenChange(ErrorCode.DELEGATION_TOKEN_NOT_FOUND, ERROR_TIMESTAMP)
                change = decide(info, self.now_ms())
                path = zk_paths.delegation_token_path(token_id)
                ops: list[Op]
                if change.remove:
                    ops = [DeleteOp(path, version), self._notification(token_id)]
                elif change.token is not None:
                    ops = [SetDataOp(path, encode_token(change.token), version), self._notification(token_id)]
                else:
                    return change
                try:
                    self._store.multi(ops)
                    break
                except (BadVersionError, NoNodeError):
                    continue
            else:
                raise TokenStoreError(f"could not write {zk_paths.delegation_token_path(token_id)}: concurrent changes")
        if change.remove:
            self.cache.remove(token_id)
        elif change.token is not None:
            self.cache.update(change.token)
        log.info("delegation token %s of %s %s (expiry %d)", token_id, info.owner, what, change.timestamp)
        return change

    def expire_tokens(self) -> list[str]:
        """Remove every token past its expiry or max (the periodic scan); the ids removed."""
        now = self.now_ms()
        removed: list[str] = []
        for cached in self.cache.tokens():
            if not cached.info.expired(now):
                continue
            token_id = cached.info.token_id
            with self._write_lock:
                info, version = self._read(token_id)
                if info is None:
                    self.cache.remove(token_id)
                    continue
                if not info.expired(now):
                    self.cache.update(info)  # renewed elsewhere meanwhile
                    continue
                try:
                    self._store.multi([DeleteOp(zk_paths.delegation_token_path(token_id), version),
                                       self._notification(token_id)])
                except (BadVersionError, NoNodeError):
                    self.reload(token_id)  # changed or removed meanwhile: the store says which
                    continue
                self.cache.remove(token_id)
            removed.append(token_id)
            log.info("delegation token %s of %s expired (expiry %d, max %d, now %d): removed", token_id,
                     info.owner, info.expiry_timestamp, info.max_timestamp, now)
        return removed

    def tokens(self) -> list[CachedToken]:
        return self.cache.tokens()
