"""Which fetches are filtered, and by what: group filters and their members, followed from the metadata store.

A Fetch carries no group id, so the broker that leads a partition cannot tell from the request which group
the fetching consumer belongs to; and the members' own group traffic (JoinGroup, SyncGroup, Heartbeat,
OffsetCommit) goes to the group coordinator over a separate connection, often another broker. What the Fetch
does carry, in every client, is its ``client.id`` (request header) and its source address, and the
coordinator knows both for each member (JoinGroup's header and connection: Kafka's ``clientId`` and
``clientHost``, what DescribeGroups reports). So:

* ``/config/groups/<group>`` holds a group's filter (Kafka's config-znode JSON; see
  :mod:`sofakafka.ldc.filters` for the keys), written by AlterConfigs/IncrementalAlterConfigs on the GROUP
  config resource (type 32), only at the group's coordinator and only for a group that exists there.
* ``/sofakafka/group_members/<group>`` lists, for a filtered group only, each member's client id, client host
  and subscribed topics. The coordinator writes it in the same store transaction as the filter, again
  before it answers each JoinGroup, SyncGroup and LeaveGroup of the group, and every
  :data:`SWEEP_INTERVAL_S` (members that expired), so a member is in the store before its first fetch (it
  needs its JoinGroup answer, then SyncGroup and OffsetFetch, before it fetches anything). The coordinator
  knows a filter itself before it answers the AlterConfigs that set it.
* Every broker follows both with watches (:class:`GroupFilterRegistry`) into one index from
  ``(client id, client host)`` to ``{topic: filter}``; the Fetch handler looks its request up there once
  (:meth:`GroupFilterRegistry.lookup`): no entry (every unfiltered group) means the stored bytes go out
  untouched, with no per-record work. A watch may fire after the member's first Fetch arrives, so each
  consumer connection's first Fetch waits for :meth:`GroupFilterRegistry.catch_up` (a store sync and a
  reload, shared by the connections that ask at once) before it is looked up.

How robust the key is, per client: the Java client's default ``client.id`` is ``consumer-<group>-<n>``,
unique per consumer; kafka-python's (``kafka-python-<version>``) and librdkafka's (``rdkafka``) defaults are
the same for every consumer of a host. Consumers of a filtered group that share a host, a client id and a
topic with a consumer of another group therefore need distinct ``client.id``s (the LDC consumer sets none of
this for you; set ``client.id`` to something per application, as Kafka's quotas and logs want anyway): the
other consumer would otherwise be filtered too. Where one key belongs to several filtered groups on the
same topic, a record passes if any of their filters passes it. A consumer that uses ``assign()`` and never
joins the group is not a member and is not filtered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sofakafka.broker.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from sofakafka.broker.group.metadata import GroupMetadata
from sofakafka.controller import zk_paths
from sofakafka.controller.store import (
    CreateOp,
    DeleteOp,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    Op,
    SetDataOp,
    WatchedEvent,
)
from sofakafka.ldc import FilterError, RecordFilter
from sofakafka.protocol.errors import ErrorCode, ProtocolError

log = logging.getLogger(__name__)

GROUP_CONFIGS_PATH = "/config/groups"
MEMBERS_PATH = "/sofakafka/group_members"
SWEEP_INTERVAL_S = 10.0
CATCH_UP_TIMEOUT_S = 5.0
Header = tuple[str, bytes | None]


def group_config_path(group: str) -> str:
    return f"{GROUP_CONFIGS_PATH}/{zk_paths.sanitize(group)}"


def group_members_path(group: str) -> str:
    return f"{MEMBERS_PATH}/{zk_paths.sanitize(group)}"


def encode_group_config(configs: Mapping[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": dict(sorted(configs.items()))}).encode()


def decode_group_config(data: bytes) -> dict[str, str]:
    if not data:
        return {}
    parsed = json.loads(data)
    config = parsed.get("config", {}) if isinstance(parsed, dict) else {}
    return {str(k): str(v) for k, v in config.items()}


@dataclass(frozen=True)
class MemberBinding:
    """One member of a filtered group as fetches identify it."""

    client_id: str
    client_host: str
    """Without Kafka's leading '/'."""
    topics: frozenset[str] | None
    """The member's subscription; None when it is not the consumer protocol (then every topic)."""


def encode_bindings(bindings: Mapping[str, MemberBinding]) -> bytes:
    members = {mid: {"client_id": b.client_id, "client_host": b.client_host,
                     "topics": None if b.topics is None else sorted(b.topics)}
               for mid, b in sorted(bindings.items())}
    return json.dumps({"version": 1, "members": members}, sort_keys=True).encode()


def decode_bindings(data: bytes) -> dict[str, MemberBinding]:
    parsed = json.loads(data) if data else {}
    out: dict[str, MemberBinding] = {}
    for mid, m in (parsed.get("members") or {}).items():
        topics = m.get("topics")
        out[mid] = MemberBinding(str(m["client_id"]), str(m["client_host"]),
                                 None if topics is None else frozenset(topics))
    return out


class _Coordinator(Protocol):
    def groups(self) -> dict[str, GroupMetadata]: ...

    def coordinator_error(self, group_id: str) -> ErrorCode | None: ...


def _host(client_host: str) -> str:
    return client_host[1:] if client_host.startswith("/") else client_host


def member_bindings(group: GroupMetadata) -> dict[str, MemberBinding]:
    """The bindings of a group's current members (its coordinator's view)."""
    out: dict[str, MemberBinding] = {}
    for member_id, m in group.members.items():
        topics: frozenset[str] | None = None
        if m.protocol_type == CONSUMER_PROTOCOL_TYPE:
            found: set[str] = set()
            decoded = False
            for _name, metadata in m.supported_protocols:
                try:
                    found.update(decode_subscription(metadata).topics)
                    decoded = True
                except (ProtocolError, ValueError):
                    continue
            topics = frozenset(found) if decoded else None
        out[member_id] = MemberBinding(m.client_id, _host(m.client_host), topics)
    return out


class AnyOf:
    """Several groups' filters on one (client, topic): a record passes when any of them passes it."""

    def __init__(self, filters: Sequence[RecordFilter]) -> None:
        self.filters = tuple(filters)

    def matches(self, key: bytes | None, headers: Sequence[Header]) -> bool:
        return any(f.matches(key, headers) for f in self.filters)


Matcher = RecordFilter | AnyOf
"""What a record must pass: ``matches(key, headers)``."""


@dataclass(frozen=True)
class _Snapshot:
    filters: Mapping[str, RecordFilter]
    bindings: Mapping[str, Mapping[str, MemberBinding]]
    index: Mapping[tuple[str, str], tuple[tuple[frozenset[str] | None, str], ...]]
    """(client id, host) -> ((topics or None, group), ...) over filtered groups."""


def _index(filters: Mapping[str, RecordFilter], bindings: Mapping[str, Mapping[str, MemberBinding]]
           ) -> dict[tuple[str, str], tuple[tuple[frozenset[str] | None, str], ...]]:
    index: dict[tuple[str, str], list[tuple[frozenset[str] | None, str]]] = {}
    for group, members in bindings.items():
        if group not in filters:
            continue
        for b in members.values():
            entry = (b.topics, group)
            entries = index.setdefault((b.client_id, b.client_host), [])
            if entry not in entries:
                entries.append(entry)
    return {k: tuple(v) for k, v in index.items()}


class GroupFilterRegistry:
    """Every broker's view of the group filters and their members (see the module docstring).

    Reads run on any thread without locks (one immutable snapshot replaced at once); the store's watch
    callbacks rebuild it on the store's event thread.
    """

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._snapshot = _Snapshot({}, {}, {})
        self._reload_lock = threading.Lock()
        self._armed_lock = threading.Lock()  # never held across a store call
        self._armed: set[str] = set()
        self._listeners: list[Callable[[], None]] = []
        self._closed = False
        self._wanted = threading.Event()
        self._publish_lock: asyncio.Lock | None = None
        self._published: dict[str, dict[str, MemberBinding]] = {}
        self._thread: threading.Thread | None = None
        self.reloads = 0
        # catch_up: the next catch-up not begun yet (callers join it), and the lock that runs them one at a time.
        self._next_catch_up: asyncio.Task[None] | None = None
        self._catch_up_lock: asyncio.Lock | None = None

    # -- following the store --------------------------------------------------------------------------------------
    def start(self) -> None:
        """Read everything now, then follow changes on a thread of its own (watch callbacks only wake it)."""
        self.store.add_new_session_listener(self._new_session)
        self.reload()
        self._thread = threading.Thread(target=self._follow, name="group-filters", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed = True
        self.store.remove_new_session_listener(self._new_session)
        self._wanted.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)

    def _follow(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._closed or self.store.closed:
                return
            try:
                self.reload()
            except Exception:
                log.exception("reading the group filters failed; retrying")
                self._wanted.set()
                threading.Event().wait(1.0)

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Called (on the store's thread) after each change of the filters or members."""
        self._listeners.append(listener)

    def _new_session(self) -> None:
        with self._armed_lock:
            self._armed.clear()  # a new session has no watches: arm them all again
        self._wanted.set()

    def _watch(self, event: WatchedEvent) -> None:
        with self._armed_lock:
            self._armed.discard(event.path)
        self._wanted.set()

    def _arm(self, path: str) -> bool:
        """Whether a watch must be set on ``path`` now (marking it set: a failed read unmarks it)."""
        with self._armed_lock:
            if path in self._armed:
                return False
            self._armed.add(path)
            return True

    def _disarm(self, path: str) -> None:
        with self._armed_lock:
            self._armed.discard(path)

    def _read_children(self, parent: str) -> list[str]:
        arm = self._arm(parent)
        try:
            return self.store.get_children(parent, watch=self._watch if arm else None)
        except NoNodeError:
            if arm and self.store.exists(parent, watch=self._watch) is not None:
                self._disarm(parent)  # created meanwhile: the exists watch fires on its next change only
                self._wanted.set()
            return []
        except Exception:
            if arm:
                self._disarm(parent)
            raise

    def _read_data(self, path: str) -> bytes | None:
        arm = self._arm(path)
        try:
            data, _ = self.store.get(path, watch=self._watch if arm else None)
        except NoNodeError:
            self._disarm(path)
            return None
        except Exception:
            if arm:
                self._disarm(path)
            raise
        return data

    def reload(self) -> None:
        """Read both trees again (small: only filtered groups have znodes) and replace the snapshot."""
        with self._reload_lock:
            filters: dict[str, RecordFilter] = {}
            for child in self._read_children(GROUP_CONFIGS_PATH):
                data = self._read_data(f"{GROUP_CONFIGS_PATH}/{child}")
                if data is None:
                    continue
                group = zk_paths.desanitize(child)
                try:
                    parsed = RecordFilter.from_configs(decode_group_config(data))
                except (FilterError, ValueError) as exc:
                    log.error("ignoring the filter of group %s: %s", group, exc)
                    continue
                if not parsed.is_empty:
                    filters[group] = parsed
            bindings: dict[str, dict[str, MemberBinding]] = {}
            for child in self._read_children(MEMBERS_PATH):
                data = self._read_data(f"{MEMBERS_PATH}/{child}")
                if data is None:
                    continue
                try:
                    bindings[zk_paths.desanitize(child)] = decode_bindings(data)
                except (ValueError, KeyError, TypeError) as exc:
                    log.error("ignoring the members of group %s: %s", zk_paths.desanitize(child), exc)
            previous = self._snapshot
            self._snapshot = _Snapshot(filters, bindings, _index(filters, bindings))
            self.reloads += 1
            if previous.filters != filters or previous.bindings != bindings:
                log.info("group filters: %s", "; ".join(
                    f"{g}: {f.describe()} for {len(bindings.get(g, {}))} member(s)" for g, f in sorted(filters.items()))
                    or "none")
        for listener in list(self._listeners):
            listener()

    async def catch_up(self, run_blocking: Callable[[Callable[[], None]], Awaitable[None]],
                       timeout: float = CATCH_UP_TIMEOUT_S) -> None:
        """Return once every change the store committed before this call is in the snapshot (on the event loop).

        Watches deliver a change some time after it commits; a consumer can be quicker. Its coordinator
        publishes it before answering its JoinGroup and SyncGroup, but its first Fetch may reach another broker
        (or this one) before that broker's watch has fired: the Fetch handler awaits this once per connection.
        Concurrent callers share one store sync and reload, as long as it had not begun when they called.
        Raises what the sync or the reload raised (the store unreachable, or ``TimeoutError``)."""
        if self._catch_up_lock is None:
            self._catch_up_lock = asyncio.Lock()
        task = self._next_catch_up
        if task is None:
            task = self._next_catch_up = asyncio.ensure_future(self._run_catch_up(run_blocking, timeout))
            task.add_done_callback(_retrieve)  # its callers may all have been cancelled
        await asyncio.shield(task)

    async def _run_catch_up(self, run_blocking: Callable[[Callable[[], None]], Awaitable[None]],
                            timeout: float) -> None:
        assert self._catch_up_lock is not None
        async with self._catch_up_lock:
            if self._next_catch_up is asyncio.current_task():
                self._next_catch_up = None  # from here on a caller may call after our sync: it needs the next one
            await run_blocking(lambda: self._sync_and_reload(timeout))

    def _sync_and_reload(self, timeout: float) -> None:
        self.store.sync(timeout)  # our ZooKeeper server has every change committed before the call
        self.reload()

    # -- publishing members (at the coordinator, on the event loop) -------------------------------------------------
    async def publish_members(self, coordinator: _Coordinator, group_id: str,
                              run_blocking: Callable[[Callable[[], None]], Awaitable[None]]) -> None:
        """Write the members of ``group_id`` if it is filtered and they changed. Serialised per broker and
        computed under the lock, so a later write always carries the later membership."""
        if self.filter_of(group_id) is None:
            return
        if self._publish_lock is None:
            self._publish_lock = asyncio.Lock()
        async with self._publish_lock:
            group = coordinator.groups().get(group_id)
            current = member_bindings(group) if group is not None and group.state.value != "Dead" else {}
            if self._published.get(group_id) == current and dict(self.bindings_of(group_id)) == current:
                return
            store = self.store
            await run_blocking(lambda: write_bindings(store, group_id, current))
            self._published[group_id] = current

    async def sweep(self, coordinator: _Coordinator,
                    run_blocking: Callable[[Callable[[], None]], Awaitable[None]]) -> None:
        """Publish every filtered group this broker coordinates whose members changed: sessions that expired,
        and groups deleted or expired away (their filter stays, their members go)."""
        for group_id in [g for g in self.filters() if coordinator.coordinator_error(g) is None]:
            await self.publish_members(coordinator, group_id, run_blocking)

    # -- reads ----------------------------------------------------------------------------------------------------
    def filter_of(self, group: str) -> RecordFilter | None:
        return self._snapshot.filters.get(group)

    def filters(self) -> Mapping[str, RecordFilter]:
        return self._snapshot.filters

    def bindings_of(self, group: str) -> Mapping[str, MemberBinding]:
        return self._snapshot.bindings.get(group, {})

    def lookup(self, client_id: str | None, client_host: str) -> ClientFilters | None:
        """What a fetch from this client must pass; None (the common case): nothing is filtered."""
        snapshot = self._snapshot
        if not snapshot.index:
            return None
        entries = snapshot.index.get((client_id or "", _host(client_host)))
        if entries is None:
            return None
        return ClientFilters(snapshot.filters, entries)


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


class ClientFilters:
    """What one fetching client's records must pass, topic by topic."""

    def __init__(self, filters: Mapping[str, RecordFilter],
                 entries: tuple[tuple[frozenset[str] | None, str], ...]) -> None:
        self._filters = filters
        self._entries = entries

    def for_topic(self, topic: str) -> Matcher | None:
        found = list(dict.fromkeys(self._filters[g] for topics, g in self._entries
                                   if (topics is None or topic in topics) and g in self._filters))
        if not found:
            return None
        return found[0] if len(found) == 1 else AnyOf(found)

    @property
    def groups(self) -> list[str]:
        return sorted({g for _t, g in self._entries})


# -- writes (at the group's coordinator) ---------------------------------------------------------------------------
def _upsert(store: MetadataStore, path: str, data: bytes) -> Op:
    return SetDataOp(path, data) if store.exists(path) is not None else CreateOp(path, data)


def write_group_filter(store: MetadataStore, group: str, record_filter: RecordFilter,
                       bindings: Mapping[str, MemberBinding]) -> None:
    """Blocking: the group's filter and its current members in one store transaction (an empty filter
    removes both)."""
    for parent in (GROUP_CONFIGS_PATH, MEMBERS_PATH):
        try:
            store.ensure_path(parent)
        except NodeExistsError:
            pass
    config_path, members_path = group_config_path(group), group_members_path(group)
    ops: list[Op] = []
    if record_filter.is_empty:
        for path in (config_path, members_path):
            if store.exists(path) is not None:
                ops.append(DeleteOp(path))
    else:
        ops.append(_upsert(store, config_path, encode_group_config(record_filter.to_configs())))
        ops.append(_upsert(store, members_path, encode_bindings(bindings)))
    if ops:
        store.multi(ops)


def write_bindings(store: MetadataStore, group: str, bindings: Mapping[str, MemberBinding]) -> None:
    """Blocking: replace the members of a filtered group."""
    store.ensure_path(MEMBERS_PATH)
    path = group_members_path(group)
    data = encode_bindings(bindings)
    try:
        store.set(path, data)
    except NoNodeError:
        try:
            store.create(path, data)
        except NodeExistsError:
            store.set(path, data)


def read_group_configs(store: MetadataStore, group: str) -> dict[str, str]:
    """Blocking: the group's stored configs (straight from the store, as DescribeConfigs answers)."""
    try:
        data, _ = store.get(group_config_path(group))
    except NoNodeError:
        return {}
    return decode_group_config(data)


def filtered_groups_stored(store: MetadataStore) -> list[str]:
    try:
        return sorted(zk_paths.desanitize(c) for c in store.get_children(GROUP_CONFIGS_PATH))
    except NoNodeError:
        return []


def changed_bindings(registry: GroupFilterRegistry, groups: Iterable[GroupMetadata]
                     ) -> list[tuple[str, dict[str, MemberBinding]]]:
    """Filtered groups among ``groups`` whose members differ from what the store holds (loop thread: the
    coordinator's metadata is read here, the writes happen elsewhere)."""
    out = []
    for group in groups:
        if registry.filter_of(group.group_id) is None:
            continue
        current = member_bindings(group)
        if dict(registry.bindings_of(group.group_id)) != current:
            out.append((group.group_id, current))
    return out
