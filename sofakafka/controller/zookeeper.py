"""The ZooKeeper backend of :class:`~sofakafka.controller.store.MetadataStore`, through kazoo.

Selected by ``zookeeper.connect``; a drop-in for the embedded store, so the controller and the broker run
unchanged on it. One :class:`ZooKeeperMetadataStore` is one ZooKeeper session.

Chroot. ``host:port,.../chroot`` works as in Kafka: the chroot znode is created first (with a short-lived
session that has no chroot), then the session proper uses it, so every path above this module stays
relative (``/brokers/ids/1`` is ``/chroot/brokers/ids/1`` on the server).

Threads. kazoo has a connection thread and a callback thread; neither runs anything of ours but a hand-off:
watch events and session states are posted to this store's own event thread (the embedded store's
``_EventThread``), where watch callbacks and state listeners run, in the order kazoo received them.

Watches. Every read with a watch gives kazoo a fresh :class:`_Watch`. When one ZooKeeper notification
triggers several of them for the same callback (a data and a child watch on a deleted znode), the event
thread delivers it once, as ZooKeeper's own client does and as the embedded store does. A connection loss
makes kazoo drop every watch (kazoo does not send ZooKeeper's ``SetWatches`` on reconnect); the store
re-arms each one when the same session reconnects, comparing the znode with what the original read saw,
and fires the event a missed change would have fired (Java's client gets the same from the server).

Session states. kazoo's CONNECTED / SUSPENDED / LOST reach listeners as :class:`SessionState`. LOST is
final for this object: kazoo would quietly start a new session, but a new session has none of our
ephemerals, so the store stops kazoo and refuses every later call with :class:`SessionExpiredError`; its
owner starts a new store (a broker's :class:`~sofakafka.controller.session.SessionRenewingStore` does, and
re-creates the ephemerals and watches the lost session took). A session SUSPENDED for longer than the session timeout has expired on
the server whether or not a reconnect tells us, so the store declares it LOST then (as Curator does).

Retries and deadlines. Reads and ``sync`` are retried after a connection loss until the connection timeout
(``zookeeper.connection.timeout.ms``) has passed since the call began. Writes wait for a connection up to
that deadline before being sent, but are not resent once sent: a write lost with the connection may or
may not have committed, so it raises :class:`ConnectionLossError` and the caller, who knows whether the
write is idempotent, decides.

Where ZooKeeper itself differs from the embedded store (reported to its owner, not papered over here):
the suffix of a sequential znode is the number of children ever *created* under the parent, which is
``(cversion + num_children) / 2`` since ZooKeeper 3.5 (the ``cversion`` it reports counts deletes too), not
``cversion``; and the size limit is on the whole request (``jute.maxbuffer``), so data somewhat under 1 MiB
is refused with :class:`BadArgumentsError` before the server would drop the connection for it. ``makepath``
creates the parents one by one, as kazoo does; a recursive delete is one multi, retried from a fresh read
of the subtree when a concurrent change fails it.

``sync``. ZooKeeper's own ``sync`` brings the server we talk to up to date with the leader; its reply
comes after every notification that server sent this session for changes committed before it, and kazoo
dispatches those notifications to its callback thread before waking the caller. A marker then goes through
kazoo's callback queue and on to our event thread, so when ``sync`` returns every watch event of this
session for changes committed before the call has been delivered. Watches belong to the session that set
them, so this covers every watch the caller can hold (unlike the embedded store, sessions do not share an
event thread, so a ``sync`` on one session says nothing of another's).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import Callback as KazooCallback
from kazoo.protocol.states import EventType as KazooEventType

from sofakafka.controller.embedded import MAX_DATA_BYTES, _EventThread
from sofakafka.controller.store import (
    BadArgumentsError,
    BadVersionError,
    CheckOp,
    ConnectionLossError,
    CreateOp,
    DeleteOp,
    EventType,
    KeeperState,
    MetadataStore,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    OpResult,
    ReadCallback,
    SessionExpiredError,
    SessionState,
    SetDataOp,
    StateListener,
    StoreError,
    WatchCallback,
    WatchedEvent,
    ZnodeStat,
    join,
    validate_path,
)
from sofakafka.controller.zk_io import PollHandler
from sofakafka.controller.zk_paths import BROKER_SEQUENCE_ID_PATH
from sofakafka.storage.log_manager import META_PROPERTIES, read_meta_properties

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT_S = 18.0
"""Kafka 2.6's ``zookeeper.session.timeout.ms``."""

_ERRORS: list[tuple[type[Exception], type[StoreError]]] = [
    (kz.NoNodeError, NoNodeError),
    (kz.NodeExistsError, NodeExistsError),
    (kz.BadVersionError, BadVersionError),
    (kz.NotEmptyError, NotEmptyError),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
    (kz.BadArgumentsError, BadArgumentsError),
    (kz.SessionExpiredError, SessionExpiredError),
    (kz.ConnectionLoss, ConnectionLossError),
    (kz.ConnectionClosedError, ConnectionLossError),
    (kz.OperationTimeoutError, ConnectionLossError),
]

_EVENT_TYPES = {
    KazooEventType.CREATED: EventType.CREATED,
    KazooEventType.DELETED: EventType.DELETED,
    KazooEventType.CHANGED: EventType.CHANGED,
    KazooEventType.CHILD: EventType.CHILD,
}

_SESSION_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}

_MISSING = -1
"""Baseline of an ``exists`` watch set on a missing znode."""


def _translate(exc: Exception, path: str | None) -> StoreError:
    for kazoo_class, ours in _ERRORS:
        if isinstance(exc, kazoo_class):
            return ours(f"{type(exc).__name__} on {path}" if path else type(exc).__name__, path)
    return StoreError(f"{type(exc).__name__}: {exc} (on {path})", path)


def _stat(kstat: Any) -> ZnodeStat:
    return ZnodeStat(
        czxid=kstat.czxid,
        mzxid=kstat.mzxid,
        ctime=kstat.ctime,
        mtime=kstat.mtime,
        version=kstat.version,
        cversion=kstat.cversion,
        aversion=kstat.aversion,
        ephemeral_owner=kstat.ephemeralOwner,
        data_length=kstat.dataLength,
        num_children=kstat.numChildren,
        pzxid=kstat.pzxid,
    )


_NO_NODE = object()
"""What :meth:`ZooKeeperMetadataStore._pipelined` yields for a read answered NONODE."""

PIPELINE_WINDOW = 500
"""Requests :meth:`ZooKeeperMetadataStore.get_many` and ``multi_many`` have in flight at once."""

JUTE_MAX_BUFFER = 0xFFFFF
"""ZooKeeper's default ``jute.maxbuffer``: the server drops the connection of a client whose request packet
is bigger, so the limit is on the whole request, not on the data alone."""

_RESEND_PAUSE_S = 0.05
"""How long :meth:`ZooKeeperMetadataStore.get_many` waits before sending again reads it could not send at all."""

_REQUEST_OVERHEAD = 1024
"""Room for a create request's header, ACL and flags around the path and the data."""


def _check_data(data: bytes, path: str) -> bytes:
    if not isinstance(data, bytes | bytearray):
        raise BadArgumentsError(f"{path}: znode data must be bytes", path)
    # Refused here with an error rather than by the server with a dropped connection (SUSPENDED, and an
    # unknown outcome for every request in flight).
    limit = min(MAX_DATA_BYTES, JUTE_MAX_BUFFER - _REQUEST_OVERHEAD - len(path.encode()))
    if len(data) > limit:
        raise BadArgumentsError(f"{path}: {len(data)} bytes is over ZooKeeper's request limit ({limit})", path)
    return bytes(data)


@dataclass(eq=False, slots=True)
class _Watch:
    """One read's watch as kazoo holds it. ``baseline`` is what the read saw (mzxid for a data watch,
    pzxid for a child watch, ``_MISSING`` for ``exists`` on a missing znode), for re-arming; ``armed`` says the
    read's answer set it. One plain object per read (100,000 of them when a broker reads every partition state):
    a re-arm that must wait for ``armed`` waits on the store's condition, see ``_wait_armed``."""

    store: ZooKeeperMetadataStore
    callback: WatchCallback
    kind: str  # "data" | "child"
    path: str
    baseline: int = _MISSING
    armed: bool = False
    cancelled: bool = False

    def __call__(self, event: Any) -> None:
        # kazoo's callback thread: hand on, nothing more.
        self.store._on_kazoo_watch(self, event)


class ZooKeeperMetadataStore(MetadataStore):
    """One ZooKeeper session. Open with :meth:`connect`."""

    def __init__(self, client: Any, connection_timeout: float) -> None:
        self._client = client
        self._connection_timeout = connection_timeout
        self._events = _EventThread()
        self._lock = threading.Lock()
        self._listeners: list[StateListener] = []
        self._connected = threading.Event()
        self._connected.set()
        self._closed = False
        self._lost = False
        self._dropped: list[_Watch] = []
        self._arming = threading.Condition(threading.Lock())
        self._arm_waiters = 0
        self._suspended_generation = 0
        self._suspend_timer: threading.Timer | None = None
        self._last_event: object = None
        self._delivered: list[WatchCallback] = []
        session_id, _ = client.client_id
        self._session_id: int = session_id
        client.add_listener(self._on_kazoo_state)

    @classmethod
    def connect(
        cls,
        hosts: str,
        chroot: str | None = None,
        *,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT_S,
        connection_timeout: float | None = None,
    ) -> ZooKeeperMetadataStore:
        """Open a session on ``hosts`` (``host:port[,host:port...]``), creating ``chroot`` if missing.

        Raises :class:`ConnectionLossError` when no server answers within ``connection_timeout`` seconds
        (default: the session timeout, as Kafka's ``zookeeper.connection.timeout.ms``).
        """
        timeout = session_timeout if connection_timeout is None else connection_timeout
        if chroot is not None and chroot not in ("", "/"):
            validate_path(chroot)
            bootstrap = _start_client(hosts, session_timeout, timeout)
            try:
                bootstrap.ensure_path(chroot)
            except kz.KazooException as exc:
                raise _translate(exc, chroot) from exc
            finally:
                _stop_client(bootstrap)
            hosts = hosts + chroot
        return cls(_start_client(hosts, session_timeout, timeout), timeout)

    # --- state

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def client_id(self) -> tuple[int, bytes]:
        """ZooKeeper's (session id, password): another client given it joins this very session."""
        session_id, password = self._client.client_id
        return int(session_id), bytes(password)

    @property
    def closed(self) -> bool:
        return self._closed or self._lost

    def _check_open(self) -> None:
        if self._closed:
            raise SessionExpiredError(f"session {self._session_id:#x} is closed")
        if self._lost:
            raise SessionExpiredError(f"session {self._session_id:#x} expired")

    def _on_kazoo_state(self, state: Any) -> None:
        # kazoo's connection thread: record, hand on, never block.
        mapped = _SESSION_STATES.get(state)
        if mapped is None or self._lost:
            # After LOST, kazoo may connect a new session before it is stopped: not ours, not reported.
            return
        if mapped is SessionState.CONNECTED:
            self._connected.set()
            self._replace_timer(None)
            # Through kazoo's callback queue, so the watches the disconnect dropped are all collected first.
            self._client.handler.dispatch_callback(KazooCallback("watch", self._events.post, (self._rearm,)))
            self._post_state(SessionState.CONNECTED)
        elif mapped is SessionState.SUSPENDED:
            self._connected.clear()
            with self._lock:
                self._suspended_generation += 1
                generation = self._suspended_generation
            timer = threading.Timer(self._session_timeout_s(), self._suspended_too_long, (generation,))
            timer.daemon = True
            self._replace_timer(timer)
            timer.start()
            self._post_state(SessionState.SUSPENDED)
        else:
            self._declare_lost()

    def _replace_timer(self, timer: threading.Timer | None) -> None:
        with self._lock:
            previous, self._suspend_timer = self._suspend_timer, timer
        if previous is not None:
            previous.cancel()

    def _session_timeout_s(self) -> float:
        # The timeout we asked for. The server may have granted more (it clamps to 2..20 ticks) and kazoo
        # does not keep the granted value; calling the session lost early is the safe side: an ex-controller
        # stops acting sooner, and the server drops the session at the latest when its own timeout runs out.
        return float(self._client._session_timeout) / 1000.0

    def _suspended_too_long(self, generation: int) -> None:
        with self._lock:
            still = generation == self._suspended_generation and not self._connected.is_set()
        if still:
            log.warning("ZooKeeper session %#x: no connection for the whole session timeout, so it has "
                        "expired on the server", self._session_id)
            self._declare_lost()

    def _declare_lost(self) -> None:
        with self._lock:
            if self._lost:
                return
            self._lost = True
            self._connected.set()  # wake waiters, who now see the session is gone
        self._post_state(SessionState.LOST)
        # Not on kazoo's thread: stopping joins it.
        self._events.post(self._stop_kazoo)

    def _stop_kazoo(self) -> None:
        _stop_client(self._client)

    def _post_state(self, state: SessionState) -> None:
        for listener in list(self._listeners):
            self._events.post(functools.partial(listener, state))

    # --- watches

    def _new_watch(self, callback: WatchCallback | None, kind: str, path: str) -> _Watch | None:
        return None if callback is None else _Watch(self, callback, kind, path)

    def _on_kazoo_watch(self, watch: _Watch, event: Any) -> None:
        if event.type == KazooEventType.NONE:
            # The connection dropped and kazoo forgot this watch; re-armed on reconnect.
            with self._lock:
                self._dropped.append(watch)
            return
        mapped = WatchedEvent(_EVENT_TYPES[event.type], _keeper_state(event.state), event.path)
        self._events.post(lambda: self._deliver(watch, mapped, event))

    def _deliver(self, watch: _Watch, event: WatchedEvent, source: object) -> None:
        """Event thread. One notification may trigger a callback's data and child watch: call it once."""
        if self.closed or watch.cancelled:
            return
        if source is not self._last_event:
            self._last_event, self._delivered = source, []
        if any(cb == watch.callback for cb in self._delivered):
            return
        self._delivered.append(watch.callback)
        watch.callback(event)

    def _rearm(self) -> None:
        """Event thread, after a reconnect of the same session: set each dropped watch again, or fire it
        if its znode changed meanwhile (ZooKeeper's SetWatches rules)."""
        with self._lock:
            dropped, self._dropped = self._dropped, []
        fired: list[tuple[WatchCallback, EventType, str]] = []
        for index, old in enumerate(dropped):
            if self.closed:
                return
            self._wait_armed(old, self._connection_timeout)
            new = _Watch(self, old.callback, old.kind, old.path)
            try:
                event_type = self._rearm_one(old, new)
            except (kz.ConnectionLoss, kz.ConnectionClosedError, kz.SessionExpiredError):
                with self._lock:
                    self._dropped[:0] = dropped[index:]
                return
            if event_type is not None:
                new.cancelled = True
                key = (old.callback, event_type, old.path)
                if key not in fired:
                    fired.append(key)
        for callback, event_type, path in fired:
            if not self._closed:
                try:
                    callback(WatchedEvent(event_type, KeeperState.CONNECTED, path))
                except Exception:
                    log.exception("metadata store watch callback failed")

    def _rearm_one(self, old: _Watch, new: _Watch) -> EventType | None:
        client = self._client
        if old.kind == "child":
            try:
                _, kstat = client.get_children(old.path, watch=new, include_data=True)
            except kz.NoNodeError:
                return EventType.DELETED
            self._armed(new, kstat.pzxid)
            return EventType.CHILD if kstat.pzxid != old.baseline else None
        kstat = client.exists(old.path, watch=new)
        self._armed(new, _MISSING if kstat is None else kstat.mzxid)
        if old.baseline == _MISSING:
            return EventType.CREATED if kstat is not None else None
        if kstat is None:
            return EventType.DELETED
        return EventType.CHANGED if kstat.mzxid != old.baseline else None

    # --- calls

    def _wait_connected(self, deadline: float, path: str | None) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not self._connected.wait(remaining):
            raise ConnectionLossError(f"no ZooKeeper connection within {self._connection_timeout}s", path)
        self._check_open()

    def _sendable(self) -> bool:
        """Whether a request may be handed to kazoo now. kazoo queues a request made while it reconnects and wakes
        its connection thread with one byte per request on a socket pair that holds a few hundred; the next caller
        blocks in that write until the thread drains it, and for good once a lost client's thread is gone. So a
        pipelined caller checks before each request and queues at most the one it had begun when the connection
        dropped."""
        return not (self._lost or self._closed) and self._connected.is_set() and self._client.connected

    def _read(self, fn: Callable[[], Any], path: str | None) -> Any:
        """Reads are safe to resend: retried after a connection loss until the deadline."""
        deadline = time.monotonic() + self._connection_timeout
        while True:
            self._check_open()
            self._wait_connected(deadline, path)
            try:
                return fn()
            except (kz.ConnectionLoss, kz.ConnectionClosedError, kz.SessionExpiredError) as exc:
                # kazoo says SessionExpired for calls made while it reconnects; only LOST means it.
                self._check_open()
                if time.monotonic() >= deadline:
                    raise _translate(exc, path) from exc
            except kz.KazooException as exc:
                raise _translate(exc, path) from exc

    def _write(self, fn: Callable[[], Any], path: str | None) -> Any:
        """Writes wait for a connection but are sent once: a lost reply leaves the outcome unknown."""
        self._check_open()
        self._wait_connected(time.monotonic() + self._connection_timeout, path)
        try:
            return fn()
        except kz.KazooException as exc:
            if isinstance(exc, kz.SessionExpiredError):
                self._check_open()
                raise ConnectionLossError(f"connection lost during a write to {path}", path) from exc
            raise _translate(exc, path) from exc

    # --- MetadataStore

    def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        validate_path(path, sequential=sequence)
        if path == "/":
            raise NodeExistsError("/ exists", "/")
        data = _check_data(value, path)
        created: str = self._write(
            lambda: self._client.create(path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath),
            path,
        )
        return created

    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, ZnodeStat]:
        validate_path(path)
        kwatch = self._new_watch(watch, "data", path)
        data, kstat = self._read(lambda: self._client.get(path, watch=kwatch), path)
        self._armed(kwatch, kstat.mzxid)
        return (data or b""), _stat(kstat)

    def exists(self, path: str, watch: WatchCallback | None = None) -> ZnodeStat | None:
        validate_path(path)
        kwatch = self._new_watch(watch, "data", path)
        kstat = self._read(lambda: self._client.exists(path, watch=kwatch), path)
        self._armed(kwatch, _MISSING if kstat is None else kstat.mzxid)
        return None if kstat is None else _stat(kstat)

    def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        validate_path(path)
        kwatch = self._new_watch(watch, "child", path)
        children, kstat = self._read(
            lambda: self._client.get_children(path, watch=kwatch, include_data=True), path
        )
        self._armed(kwatch, kstat.pzxid)
        return sorted(children)

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        validate_path(path)
        data = _check_data(value, path)
        return _stat(self._write(lambda: self._client.set(path, data, version), path))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        validate_path(path)
        if path == "/":
            raise BadArgumentsError("the root cannot be deleted", "/")
        if not recursive:
            self._write(lambda: self._client.delete(path, version), path)
            return
        # Atomic, as the interface promises: the whole subtree in one multi. A child created or deleted
        # meanwhile fails it (NOTEMPTY / NONODE) and the subtree is read again, until the deadline.
        deadline = time.monotonic() + self._connection_timeout
        while True:
            ops = self._subtree_deletes(path, version)
            if not ops:
                return  # kazoo's recursive delete of a missing znode is a no-op; so is ours
            try:
                self.multi(ops)
                return
            except (NotEmptyError, NoNodeError):
                if time.monotonic() >= deadline:
                    raise

    def _subtree_deletes(self, path: str, version: int) -> list[Op]:
        ops: list[Op] = []

        def visit(p: str) -> bool:
            try:
                children = self.get_children(p)
            except NoNodeError:
                return False
            for child in children:
                visit(join(p, child))
            ops.append(DeleteOp(p, version if p == path else -1))
            return True

        visit(path)
        return ops

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        ops = list(ops)
        self._check_ops(ops)
        if not ops:
            return []
        outcome = self._multi_outcome(ops, self._write(lambda: list(self._transaction(ops).commit()), ops[0].path))
        if isinstance(outcome, StoreError):
            raise outcome
        return outcome

    def multi_many(self, transactions: Sequence[Sequence[Op]]) -> list[list[OpResult] | StoreError]:
        """Sent in windows of :data:`PIPELINE_WINDOW` transactions without waiting for each answer (ZooKeeper
        answers a session's requests in order). Like ``multi``, a transaction whose answer was lost with the
        connection is not resent: its place holds a :class:`ConnectionLossError`."""
        out: list[list[OpResult] | StoreError | None] = [None] * len(transactions)
        todo: list[tuple[int, list[Op]]] = []
        for index, ops in enumerate(transactions):
            listed = list(ops)
            try:
                self._check_ops(listed)
            except StoreError as exc:
                out[index] = exc
                continue
            if listed:
                todo.append((index, listed))
            else:
                out[index] = []
        if todo:
            self._check_open()
            self._wait_connected(time.monotonic() + self._connection_timeout, todo[0][1][0].path)
        for start in range(0, len(todo), PIPELINE_WINDOW):
            sent = []
            for index, ops in todo[start:start + PIPELINE_WINDOW]:
                if self._sendable():
                    sent.append((index, ops, self._transaction(ops).commit_async()))
                else:  # never sent, so certainly not applied; the caller learns it as it learns a lost answer
                    out[index] = ConnectionLossError(f"no ZooKeeper connection for a write to {ops[0].path}", ops[0].path)
            for index, ops, pending in sent:
                try:
                    results = list(pending.get())
                except kz.KazooException as exc:
                    if isinstance(exc, kz.SessionExpiredError | kz.ConnectionLoss | kz.ConnectionClosedError):
                        self._check_open()
                        out[index] = ConnectionLossError(f"connection lost during a write to {ops[0].path}", ops[0].path)
                    else:
                        out[index] = _translate(exc, ops[0].path)
                    continue
                out[index] = self._multi_outcome(ops, results)
        return [o if o is not None else [] for o in out]

    def get_many(self, paths: Sequence[str], watch: WatchCallback | None = None) -> list[tuple[bytes, ZnodeStat] | None]:
        """Sent in windows of :data:`PIPELINE_WINDOW` reads without waiting for each answer; reads lost with the
        connection are sent again (with a fresh watch, as the read is), until the connection timeout."""
        for path in paths:
            validate_path(path)
        results: list[tuple[bytes, ZnodeStat] | None] = [None] * len(paths)
        watches: dict[int, _Watch | None] = {}
        pending = list(range(len(paths)))
        deadline = time.monotonic() + self._connection_timeout
        client = self._client

        def send(i: int, read: Callable[..., Any]) -> Any:
            watches[i] = self._new_watch(watch, "data", paths[i])
            return read(paths[i], watch=watches[i])

        while pending:
            self._check_open()
            self._wait_connected(deadline, paths[pending[0]])
            again: list[int] = []
            missing: list[int] = []
            unsent: list[int] = []
            for i, answer in self._pipelined(pending, lambda i: send(i, client.get_async), paths, deadline, again,
                                             unsent):
                if answer is _NO_NODE:
                    missing.append(i)
                    continue
                data, kstat = answer
                self._armed(watches[i], kstat.mzxid)
                results[i] = (data or b""), _stat(kstat)
            # A missing znode gets an existence watch; one created meanwhile is read again.
            for i, kstat in self._pipelined(missing, lambda i: send(i, client.exists_async), paths, deadline, again,
                                            unsent):
                self._armed(watches[i], _MISSING if kstat is None else kstat.mzxid)
                if kstat is not None:
                    again.append(i)
            if unsent and len(unsent) == len(pending):
                time.sleep(_RESEND_PAUSE_S)  # nothing could be sent: the connection is going or coming back
            pending = sorted(again + unsent)
        return results

    def _pipelined(self, indexes: list[int], send: Callable[[int], Any], paths: Sequence[str], deadline: float,
                   again: list[int], unsent: list[int]) -> Iterator[tuple[int, Any]]:
        """``send(i)`` for each index, a window at a time; yields each answer (``_NO_NODE`` for NONODE) in order.
        An index whose answer was lost with the connection goes to ``again``, until ``deadline``; one not sent
        because there was no connection, to ``unsent``."""
        for start in range(0, len(indexes), PIPELINE_WINDOW):
            sent = []
            for i in indexes[start:start + PIPELINE_WINDOW]:
                if self._sendable():
                    sent.append((i, send(i)))
                else:
                    unsent.append(i)
            for i, reply in sent:
                try:
                    answer = reply.get()
                except kz.NoNodeError:
                    answer = _NO_NODE
                except (kz.ConnectionLoss, kz.ConnectionClosedError, kz.SessionExpiredError) as exc:
                    self._check_open()
                    if time.monotonic() >= deadline:
                        raise _translate(exc, paths[i]) from exc
                    again.append(i)
                    continue
                except kz.KazooException as exc:
                    raise _translate(exc, paths[i]) from exc
                yield i, answer

    def _armed(self, kwatch: _Watch | None, baseline: int) -> None:
        """The read that set ``kwatch`` was answered (any thread). Costs no lock unless a re-arm waits."""
        if kwatch is not None:
            kwatch.baseline = baseline
            kwatch.armed = True
            if self._arm_waiters:
                with self._arming:
                    self._arming.notify_all()

    def _wait_armed(self, kwatch: _Watch, timeout: float) -> bool:
        """Event thread, re-arming: wait until the read that set ``kwatch`` was answered (its baseline known), up
        to ``timeout``. ``_armed`` sets the flag before it looks for waiters, and a waiter counts itself before it
        looks at the flag, so one of them sees the other."""
        deadline = time.monotonic() + timeout
        with self._arming:
            self._arm_waiters += 1
            try:
                while not kwatch.armed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._arming.wait(remaining)
                return True
            finally:
                self._arm_waiters -= 1

    def get_async(self, path: str, watch: WatchCallback | None, callback: ReadCallback) -> None:
        """Sent at once; kazoo hands the answer to its completion thread, which posts it to our event thread in
        the order the answers arrived (the order the reads were sent: ZooKeeper answers a session in order). A
        later ``sync`` completes through that same thread, after these answers were posted, and its marker then
        follows them on our event thread. What the fast path cannot settle (a missing znode, which needs its
        existence watch, or a lost connection) is settled there by ``get_many``, which retries."""
        validate_path(path)
        kwatch = self._new_watch(watch, "data", path)
        try:
            if not self._sendable():
                raise ConnectionLossError(f"no ZooKeeper connection for a read of {path}", path)
            reply = self._client.get_async(path, watch=kwatch)
        except (StoreError, kz.KazooException):
            self._events.post(lambda: self._settle_read(path, watch, callback))
            return

        def answered(done: Any) -> None:
            # kazoo's completion thread: note what the watch saw (a re-arm after a reconnect waits for it, on our
            # event thread), then hand on.
            if done.successful():
                self._armed(kwatch, done.value[1].mzxid)
            self._events.post(lambda: self._got(path, watch, done, callback))

        reply.rawlink(answered)

    def _got(self, path: str, watch: WatchCallback | None, done: Any, callback: ReadCallback) -> None:
        if not done.successful():
            self._settle_read(path, watch, callback)
            return
        data, kstat = done.value
        callback(((data or b""), _stat(kstat)))

    def _settle_read(self, path: str, watch: WatchCallback | None, callback: ReadCallback) -> None:
        try:
            result: tuple[bytes, ZnodeStat] | StoreError | None = self.get_many([path], watch)[0]
        except StoreError as exc:
            result = exc
        callback(result)

    @staticmethod
    def _check_ops(ops: Sequence[Op]) -> None:
        for index, op in enumerate(ops):
            try:
                validate_path(op.path, sequential=isinstance(op, CreateOp) and op.sequence)
                if isinstance(op, CreateOp | SetDataOp):
                    _check_data(op.data, op.path)
            except StoreError as exc:
                exc.op_index = index
                raise

    def _transaction(self, ops: Sequence[Op]) -> Any:
        tx = self._client.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                tx.create(op.path, bytes(op.data), ephemeral=op.ephemeral, sequence=op.sequence)
            elif isinstance(op, DeleteOp):
                tx.delete(op.path, op.version)
            elif isinstance(op, SetDataOp):
                tx.set_data(op.path, bytes(op.data), op.version)
            elif isinstance(op, CheckOp):
                tx.check(op.path, op.version)
            else:
                raise BadArgumentsError(f"unknown operation {op!r}")
        return tx

    @staticmethod
    def _multi_outcome(ops: Sequence[Op], results: Sequence[Any]) -> list[OpResult] | StoreError:
        for index, result in enumerate(results):
            if isinstance(result, Exception) and not isinstance(result, kz.RolledBackError | kz.RuntimeInconsistency):
                error = _translate(result, ops[index].path)
                error.op_index = index
                return error
        if any(isinstance(r, Exception) for r in results):
            return StoreError(f"multi failed without naming an operation: {results!r}")
        converted: list[OpResult] = []
        for op, result in zip(ops, results, strict=True):
            if isinstance(op, CreateOp):
                converted.append(str(result))
            elif isinstance(op, SetDataOp):
                converted.append(_stat(result))
            else:
                converted.append(None)
        return converted

    def sync(self, timeout: float | None = None) -> None:
        if threading.current_thread() is self._events._thread or self._closed:
            return  # close() delivered everything before returning
        if self._lost:
            # Nothing more comes from the server; what is queued is all there is (the embedded store's
            # sync works on a dead session too, and the controller relies on it to drain its events).
            self._events.sync(timeout)
            return
        started = time.monotonic()
        self._read(lambda: self._client.sync("/"), "/")
        done = threading.Event()
        self._client.handler.dispatch_callback(KazooCallback("watch", self._events.post, (done.set,)))
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        if not done.wait(remaining):
            raise TimeoutError("watch events were not delivered in time")

    def close(self) -> None:
        """End the session (the server deletes its ephemerals at once), then deliver LOST to listeners."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            _stop_client(self._client)
        finally:
            self._replace_timer(None)
            self._declare_lost()
            self._events.stop()


def _keeper_state(state: Any) -> KeeperState:
    try:
        return KeeperState(str(state))
    except ValueError:
        return KeeperState.CONNECTED


def _start_client(hosts: str, session_timeout: float, connection_timeout: float) -> Any:
    client = KazooClient(hosts=hosts, timeout=session_timeout, handler=PollHandler())
    try:
        client.start(timeout=connection_timeout)
    except Exception as exc:
        _stop_client(client)
        raise ConnectionLossError(f"no ZooKeeper at {hosts} within {connection_timeout}s: {exc}") from exc
    return client


_STOP_WAKE_TIMEOUT_S = 5.0
"""How long stopping a client waits to put its wake-up byte into the connection thread's pipe."""


def _stop_client(client: Any) -> None:
    # kazoo's stop queues a Close and wakes the connection thread with a byte on its socket pair; only that byte
    # makes a connected thread send the Close and end. The pair holds a few hundred queued bytes (each is a
    # socket buffer of its own), so the byte may have to wait while the thread drains the requests before it: a
    # dropped byte left a connected thread waiting in its select and the stop joining it forever. A lost client's
    # thread may never drain again, so the wait is bounded; that thread ends anyway (it checks the stop flag
    # between connection attempts), and ``close`` then closes the pair, which wakes anyone still blocked on it.
    with contextlib.suppress(Exception):
        client._connection._write_sock.settimeout(_STOP_WAKE_TIMEOUT_S)
    with contextlib.suppress(Exception):
        client.stop()
    with contextlib.suppress(Exception):
        client.close()


def generate_broker_sequence_id(store: MetadataStore) -> int:
    """A cluster-unique number from ``/brokers/seqid``'s version, as Kafka 2.6 generates broker ids: an
    unconditional set bumps the version atomically, so two brokers never get the same one. The broker adds
    ``reserved.broker.max.id``."""
    for _ in range(3):
        try:
            return store.set(BROKER_SEQUENCE_ID_PATH, b"").version
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                store.create(BROKER_SEQUENCE_ID_PATH, b"", makepath=True)
    # Only someone deleting the node as fast as we create it gets here.
    raise NoNodeError(f"{BROKER_SEQUENCE_ID_PATH} keeps disappearing", BROKER_SEQUENCE_ID_PATH)


def resolve_broker_id(store: MetadataStore, log_dirs: Sequence[Path], reserved_max_id: int) -> int:
    """``broker.id=-1`` as Kafka 2.6 resolves it: the id the log dirs' ``meta.properties`` already carry
    (a restarted broker keeps its id and its data), else a new one above ``reserved.broker.max.id``."""
    stored: set[int] = set()
    for log_dir in log_dirs:
        meta = log_dir / META_PROPERTIES
        if meta.exists():
            broker_id = read_meta_properties(meta).get("broker.id")
            if broker_id is not None:
                stored.add(int(broker_id))
    if len(stored) > 1:
        raise StoreError(f"log dirs {[str(d) for d in log_dirs]} hold different broker ids {sorted(stored)}")
    if stored:
        return stored.pop()
    return generate_broker_sequence_id(store) + reserved_max_id
