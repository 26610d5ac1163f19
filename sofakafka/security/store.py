"""SCRAM users and ACLs in the metadata tree, as Kafka 2.6 keeps them in ZooKeeper, on either backend.

Written here, read by every broker:

* ``/config/users/<url-encoded user>`` — ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,..."}}``
  (other keys of a user, such as quotas, are kept as they are), each write followed by
  ``/config/changes/config_change_<seq>`` ``{"version":2,"entity_path":"users/<url-encoded user>"}`` in the same
  multi-op, as kafka-configs does;
* ``/kafka-acl/<Type>/<name>`` (LITERAL) and ``/kafka-acl-extended/prefixed/<Type>/<prefix>`` (PREFIXED) —
  ``{"version":1,"acls":[...]}``, written conditionally on the znode version and removed when the last entry
  goes, each change followed by ``/kafka-acl-changes/acl_changes_<seq>`` (``TOPIC:orders``) or
  ``/kafka-acl-extended-changes/acl_changes_<seq>`` (JSON) in the same multi-op.

* client quotas (sofakafka/security/quotas.py) in ``/config/users/<user>``, ``/config/users/<user>/clients/<client>``
  and ``/config/clients/<client>`` (``<default>`` for the default entities), with the same ``/config/changes``
  notifications (``users/alice/clients/app``, ``clients/<default>``), as Kafka 2.6's AlterClientQuotas writes them.

* delegation tokens (sofakafka/security/token_manager.py) in ``/delegation_token/tokens/<id>``, with
  ``/delegation_token/token_changes`` notifications, when the broker has ``delegation.token.master.key``.

Every broker runs one :class:`SecurityMetadata`: it loads all users, quotas, ACLs (and tokens) at start, then
follows the notification directories with child watches and re-reads exactly the user, resource pattern or token
each new notification names, so a user, ACL or token created through any broker (or by Kafka's own tools against the same
ZooKeeper) is in force everywhere as soon as the watch fires. Notifications older than 15 minutes are
deleted, as Kafka's ZkNodeChangeNotificationListener does. After the store replaced a lost session everything
is read again and the watches are armed anew.

Threads: watch callbacks arrive on the store's event thread and re-read right there (under this object's
lock); the write methods block on the store and belong on a worker thread in asyncio code. Readers
(``credential``, the authorizer) never block: they read immutable snapshots.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType

from sofakafka.controller import zk_data, zk_paths
from sofakafka.controller.store import (
    BadVersionError,
    CreateOp,
    DeleteOp,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    Op,
    SessionExpiredError,
    SetDataOp,
    StoreError,
    WatchedEvent,
)
from sofakafka.protocol import acl
from sofakafka.security import quotas
from sofakafka.security.acl import (
    decode_acls,
    decode_change,
    encode_acls,
    encode_extended_change,
    encode_literal_change,
)
from sofakafka.security.authorizer import AclAuthorizer
from sofakafka.security.scram import MECHANISMS, ScramCredential, ScramCredentialError, check_mechanism
from sofakafka.security.token_manager import DelegationTokenManager

log = logging.getLogger(__name__)

NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000
_CAS_ATTEMPTS = 20

_Credentials = Mapping[tuple[str, str], ScramCredential]


class SecurityStoreError(Exception):
    """A write that could not be done (concurrent changes kept winning, or the store refused the path)."""


class SecurityMetadata:
    def __init__(self, store: MetadataStore, authorizer: AclAuthorizer | None = None, *,
                 clock_ms: Callable[[], int] | None = None, tokens: DelegationTokenManager | None = None) -> None:
        self._store = store
        self.authorizer = authorizer
        self.tokens = tokens
        """Delegation tokens, when this broker has a master key (None: token requests are refused)."""
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._credentials: _Credentials = MappingProxyType({})
        self._quotas: quotas.QuotaTable = MappingProxyType({})
        self.quota_version = 0
        """Grows with every change of a client quota (the broker's quota manager re-reads the table then)."""
        self._last_seen: dict[str, int] = {}
        self._closed = False
        self._changed = threading.Condition()
        self.version = 0
        """Grows with every change applied (tests wait on it with :meth:`wait_until`)."""

    # ----------------------------------------------------------------------------------- life cycle

    def start(self) -> None:
        for path in (zk_paths.config_entity_type_path(zk_paths.CONFIG_TYPE_USERS),
                     zk_paths.config_entity_type_path(zk_paths.CONFIG_TYPE_CLIENTS), zk_paths.CONFIG_CHANGES_PATH,
                     zk_paths.ACL_CHANGES_PATH, zk_paths.ACL_EXTENDED_CHANGES_PATH):
            self._store.ensure_path(path)
        if self.tokens is not None:
            self.tokens.ensure_paths()
        self._store.add_new_session_listener(self.reload)
        self.reload()

    def _notification_parents(self) -> tuple[str, ...]:
        parents = (zk_paths.CONFIG_CHANGES_PATH, zk_paths.ACL_CHANGES_PATH, zk_paths.ACL_EXTENDED_CHANGES_PATH)
        return parents + ((zk_paths.DELEGATION_TOKEN_CHANGES_PATH,) if self.tokens is not None else ())

    def reload(self) -> None:
        """Read every user, ACL (and token) again and re-arm the notification watches (start, new session)."""
        with self._lock:
            self._last_seen.clear()
            self._load_all_users()
            self._load_all_quotas()
            self._load_all_acls()
            if self.tokens is not None:
                self.tokens.load_all()
            for parent in self._notification_parents():
                self._process_notifications(parent, initial=True)
        self._bump()

    def close(self) -> None:
        self._closed = True
        self._store.remove_new_session_listener(self.reload)

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def _bump(self) -> None:
        with self._changed:
            self.version += 1
            self._changed.notify_all()

    # -------------------------------------------------------------------------------------- reading

    def credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._credentials.get((mechanism, user))

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """user -> mechanism -> credential, for every user with a SCRAM credential."""
        out: dict[str, dict[str, ScramCredential]] = {}
        for (mechanism, user), cred in self._credentials.items():
            out.setdefault(user, {})[mechanism] = cred
        return out

    def _load_all_users(self) -> None:
        try:
            names = self._store.get_children(zk_paths.config_entity_type_path(zk_paths.CONFIG_TYPE_USERS))
        except NoNodeError:
            names = []
        creds: dict[tuple[str, str], ScramCredential] = {}
        for sanitized in names:
            creds.update(self._read_user(zk_paths.desanitize(sanitized)))
        self._credentials = MappingProxyType(creds)

    def _read_user(self, user: str) -> dict[tuple[str, str], ScramCredential]:
        config = self._read_config(zk_paths.config_user_path(user))
        found: dict[tuple[str, str], ScramCredential] = {}
        for mechanism in MECHANISMS:
            text = config.get(mechanism)
            if text is None:
                continue
            try:
                found[(mechanism, user)] = ScramCredential.from_kafka_string(text)
            except ScramCredentialError as exc:
                log.warning("ignoring the %s credential of user %r in the metadata store: %s", mechanism, user, exc)
        return found

    def _reload_user(self, user: str) -> None:
        creds = {k: v for k, v in self._credentials.items() if k[1] != user}
        creds.update(self._read_user(user))
        self._credentials = MappingProxyType(creds)

    def _read_config(self, path: str) -> dict[str, str]:
        try:
            data, _ = self._store.get(path)
        except NoNodeError:
            return {}
        try:
            return zk_data.decode_config(data, path)
        except (zk_data.ZkDataError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
            return {}

    def _load_all_acls(self) -> None:
        if self.authorizer is None:
            return
        self.authorizer.replace_all({pattern: self._read_acls(pattern)[0] for pattern in self._all_stored_patterns()})

    def _read_acls(self, pattern: acl.ResourcePattern) -> tuple[set[acl.AccessControlEntry], int]:
        """The stored entries of ``pattern`` and the znode version (-1: no znode)."""
        path = _acl_path(pattern)
        try:
            data, stat = self._store.get(path)
        except NoNodeError:
            return set(), -1
        try:
            return decode_acls(data), stat.version
        except ValueError as exc:
            log.warning("ignoring unreadable ACLs in %s: %s", path, exc)
            return set(), stat.version

    # -------------------------------------------------------------------------------- notifications

    def _watch(self, event: WatchedEvent) -> None:
        if self._closed:
            return
        try:
            with self._lock:
                self._process_notifications(event.path, initial=False)
        except SessionExpiredError:
            return  # the new session's reload re-reads everything
        except StoreError as exc:
            log.warning("could not process security notifications under %s: %s", event.path, exc)
        self._bump()

    def _process_notifications(self, parent: str, *, initial: bool) -> None:
        children = self._store.get_children(parent, self._watch)
        prefix = {zk_paths.CONFIG_CHANGES_PATH: zk_paths.CONFIG_CHANGE_PREFIX,
                  zk_paths.DELEGATION_TOKEN_CHANGES_PATH: zk_paths.DELEGATION_TOKEN_CHANGE_PREFIX,
                  }.get(parent, zk_paths.ACL_CHANGE_PREFIX)
        last = self._last_seen.get(parent, -1)
        now = self._clock_ms()
        for name in children:
            try:
                seq = zk_paths.sequence_number(name, prefix)
            except ValueError:
                continue
            path = f"{parent}/{name}"
            if seq > last:
                last = seq
                if not initial:  # at start everything was just read in full
                    self._apply_notification(parent, path)
            self._purge_if_expired(path, now)
        self._last_seen[parent] = last

    def _apply_notification(self, parent: str, path: str) -> None:
        try:
            data, _ = self._store.get(path)
        except NoNodeError:
            return
        if parent == zk_paths.CONFIG_CHANGES_PATH:
            try:
                entity = zk_data.decode_config_change_notification(data)
            except (zk_data.ZkDataError, ValueError):
                return
            kind, _, name = entity.partition("/")
            if kind == zk_paths.CONFIG_TYPE_USERS and "/" not in name and name != zk_paths.DEFAULT_ENTITY_NAME:
                self._reload_user(zk_paths.desanitize(name))
            quota_entity = quotas.entity_from_config_path(kind, name, zk_paths.desanitize)
            if quota_entity is not None:
                self._reload_quota(quota_entity)
            return
        if parent == zk_paths.DELEGATION_TOKEN_CHANGES_PATH:
            if self.tokens is not None:
                self.tokens.reload(data.decode("utf-8", errors="replace"))
            return
        if self.authorizer is None:
            return
        try:
            pattern = decode_change(data)
        except (ValueError, KeyError) as exc:
            log.warning("ignoring unreadable ACL change notification %s: %s", path, exc)
            return
        self.authorizer.update_resource(pattern, self._read_acls(pattern)[0])

    def _purge_if_expired(self, path: str, now_ms: int) -> None:
        stat = self._store.exists(path)
        if stat is not None and now_ms - stat.ctime > NOTIFICATION_EXPIRY_MS:
            with contextlib.suppress(NoNodeError):
                self._store.delete(path)

    # ------------------------------------------------------------------------------------ client quotas

    def client_quotas(self) -> quotas.QuotaTable:
        """Every entity with a quota -> its values (an immutable snapshot; never blocks)."""
        return self._quotas

    def _load_all_quotas(self) -> None:
        table: dict[quotas.QuotaEntity, dict[str, float]] = {}
        for kind in (zk_paths.CONFIG_TYPE_USERS, zk_paths.CONFIG_TYPE_CLIENTS):
            root = zk_paths.config_entity_type_path(kind)
            for sanitized in self._children(root):
                names = [sanitized]
                if kind == zk_paths.CONFIG_TYPE_USERS:
                    names += [f"{sanitized}/clients/{c}" for c in self._children(f"{root}/{sanitized}/clients")]
                for name in names:
                    entity = quotas.entity_from_config_path(kind, name, zk_paths.desanitize)
                    if entity is None:
                        continue
                    values = quotas.parse_stored(self._read_config(f"{root}/{name}"))
                    if values:
                        table[entity] = values
        self._quotas = MappingProxyType(table)
        self.quota_version += 1

    def _children(self, path: str) -> list[str]:
        try:
            return list(self._store.get_children(path))
        except NoNodeError:
            return []

    def _reload_quota(self, entity: quotas.QuotaEntity) -> None:
        kind, name = quotas.entity_config_path(entity, zk_paths.sanitize)
        values = quotas.parse_stored(self._read_config(zk_paths.config_entity_path(kind, name)))
        table = {e: v for e, v in self._quotas.items() if e != entity}
        if values:
            table[entity] = values
        self._quotas = MappingProxyType(table)
        self.quota_version += 1

    def alter_client_quota(self, entity: quotas.QuotaEntity, changes: Mapping[str, str | None]) -> None:
        """Set (a stored string, already validated) or remove (None) quota keys of ``entity``: the entity's znode
        and a ``/config/changes`` notification in one multi-op, as Kafka 2.6 writes them. Blocking."""
        kind, name = quotas.entity_config_path(entity, zk_paths.sanitize)

        def change(config: dict[str, str]) -> dict[str, str]:
            for key, value in changes.items():
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = value
            return config

        self._update_config(kind, name, change)
        with self._lock:
            self._reload_quota(entity)
        self._bump()

    # -------------------------------------------------------------------------------- SCRAM writes

    def set_scram_credential(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        check_mechanism(mechanism)
        self._update_user(user, lambda config: config | {mechanism: credential.to_kafka_string()})

    def delete_scram_credential(self, user: str, mechanism: str) -> bool:
        """False when the user had no credential of that mechanism."""
        check_mechanism(mechanism)
        existed = False

        def drop(config: dict[str, str]) -> dict[str, str]:
            nonlocal existed
            existed = mechanism in config
            return {k: v for k, v in config.items() if k != mechanism}

        self._update_user(user, drop)
        return existed

    def _update_user(self, user: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        if not user:
            raise SecurityStoreError("user name must not be empty")
        self._update_config(zk_paths.CONFIG_TYPE_USERS, zk_paths.sanitize(user), change)
        with self._lock:
            self._reload_user(user)
        self._bump()

    def _update_config(self, kind: str, sanitized: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Read-modify-write ``/config/<kind>/<sanitized>`` with its change notification, retried on conflicts."""
        path = zk_paths.config_entity_path(kind, sanitized)
        with self._write_lock:
            self._store.ensure_path(path.rpartition("/")[0])
            self._store.ensure_path(zk_paths.CONFIG_CHANGES_PATH)
            for _ in range(_CAS_ATTEMPTS):
                try:
                    data, stat = self._store.get(path)
                    config, version = zk_data.decode_config(data, path), stat.version
                except NoNodeError:
                    config, version = {}, -1
                new = change(dict(config))
                if new == config and version >= 0:
                    break
                write: Op = (SetDataOp(path, zk_data.encode_config(new), version) if version >= 0
                             else CreateOp(path, zk_data.encode_config(new)))
                note = CreateOp(zk_paths.config_change_prefix_path(),
                                zk_data.encode_config_change_notification(f"{kind}/{sanitized}"),
                                sequence=True)
                try:
                    self._store.multi([write, note])
                    break
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
            else:
                raise SecurityStoreError(f"could not write {path}: concurrent changes")

    # ---------------------------------------------------------------------------------- ACL writes

    def create_acls(self, bindings: Iterable[acl.AclBinding]) -> None:
        by_pattern: dict[acl.ResourcePattern, set[acl.AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in by_pattern.items():
            self._update_acls(pattern, lambda current, add=entries: current | add)  # type: ignore[misc]

    def delete_acls(self, filters: Sequence[acl.AclBindingFilter]) -> list[list[acl.AclBinding]]:
        """The bindings each filter deleted (a binding matched by two filters is reported for both)."""
        results: list[list[acl.AclBinding]] = [[] for _ in filters]
        candidates = self._all_stored_patterns()
        for pattern in candidates:
            if not any(f.pattern.matches(pattern) for f in filters):
                continue
            deleted: dict[int, list[acl.AclBinding]] = {}

            def remove(current: set[acl.AccessControlEntry], pattern: acl.ResourcePattern = pattern,
                       deleted: dict[int, list[acl.AclBinding]] = deleted) -> set[acl.AccessControlEntry]:
                deleted.clear()
                keep = set()
                for entry in current:
                    binding = acl.AclBinding(pattern, entry)
                    hits = [i for i, f in enumerate(filters) if f.matches(binding)]
                    for i in hits:
                        deleted.setdefault(i, []).append(binding)
                    if not hits:
                        keep.add(entry)
                return keep

            self._update_acls(pattern, remove)
            for i, bindings in deleted.items():
                results[i].extend(bindings)
        for r in results:
            r.sort()
        return results

    def _all_stored_patterns(self) -> list[acl.ResourcePattern]:
        out: list[acl.ResourcePattern] = []
        for prefixed in (False, True):
            root = zk_paths.ACL_PREFIXED_PATH if prefixed else zk_paths.ACL_PATH
            for rtype in acl.CONCRETE_RESOURCE_TYPES:
                try:
                    names = self._store.get_children(f"{root}/{rtype.pascal}")
                except NoNodeError:
                    continue
                out.extend(acl.ResourcePattern(rtype, n, acl.PatternType.PREFIXED if prefixed else acl.PatternType.LITERAL)
                           for n in names)
        return out

    def _update_acls(self, pattern: acl.ResourcePattern,
                     change: Callable[[set[acl.AccessControlEntry]], set[acl.AccessControlEntry]]) -> None:
        path = _acl_path(pattern)
        prefixed = pattern.pattern_type == acl.PatternType.PREFIXED
        note = CreateOp(zk_paths.acl_change_prefix_path(prefixed),
                        encode_extended_change(pattern) if prefixed else encode_literal_change(pattern), sequence=True)
        with self._write_lock:
            self._store.ensure_path(path.rpartition("/")[0])
            self._store.ensure_path(zk_paths.ACL_EXTENDED_CHANGES_PATH if prefixed else zk_paths.ACL_CHANGES_PATH)
            for _ in range(_CAS_ATTEMPTS):
                current, version = self._read_acls(pattern)
                new = change(set(current))
                if new == current:
                    break
                ops: list[Op]
                if not new:
                    ops = [DeleteOp(path, version), note]
                elif version >= 0:
                    ops = [SetDataOp(path, encode_acls(new), version), note]
                else:
                    ops = [CreateOp(path, encode_acls(new)), note]
                try:
                    self._store.multi(ops)
                    break
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
            else:
                raise SecurityStoreError(f"could not write {path}: concurrent changes")
        if self.authorizer is not None:
            with self._lock:
                self.authorizer.update_resource(pattern, self._read_acls(pattern)[0])
        self._bump()


def _acl_path(pattern: acl.ResourcePattern) -> str:
    if pattern.resource_type not in acl.CONCRETE_RESOURCE_TYPES:
        raise SecurityStoreError(f"cannot store ACLs of resource type {pattern.resource_type.name}")
    if "/" in pattern.name or pattern.name in (".", ".."):
        # Kafka 2.6 writes the name as a znode name too, and cannot store these either.
        raise SecurityStoreError(f"resource name {pattern.name!r} cannot be stored as a znode name")
    return zk_paths.acl_resource_path(pattern.resource_type.pascal, pattern.name,
                                      pattern.pattern_type == acl.PatternType.PREFIXED)
