"""A broker's handle on ZooKeeper that outlives its sessions: Kafka's ZooKeeperClient re-initialisation.

A :class:`~sofakafka.controller.zookeeper.ZooKeeperMetadataStore` is one session and is final once LOST (a
new session has none of the old one's ephemerals or watches, so pretending it is the same would be a lie).
A broker, though, must come back by itself, as a Kafka 2.6 broker does: its ``KafkaZkClient`` opens a new
session, and its state-change handlers register the broker again (a new broker epoch), re-run the controller
election and re-register their znode watches.

:class:`SessionRenewingStore` is that client. It owns the current session and presents one
:class:`~sofakafka.controller.store.MetadataStore` for the broker's whole life, so every component handed
the store at start-up (controller, metadata cache, topic admin, ISR writes, producer-id blocks, the group
runtime through the topic admin) uses whichever session is current without being told. On LOST:

1. its state listeners see LOST, on the lost session's event thread, before anything else happens (the
   controller stops acting on a context whose ``/controller`` znode may already be someone else's);
2. the renewal thread (never the event loop, never the lost session's event thread) opens a new session.
   Each attempt is bounded by the connection timeout the ``connect`` callable applies; failures are retried
   with exponential backoff, as long as the store is open (Kafka retries forever too: a broker without a
   session is useless, and giving up would leave it so until a restart);
3. the new session becomes current and the lost one is closed, which drops any late event of it;
4. the new-session listeners run on the renewal thread, in the order they were added. They re-create what
   the lost session took: the node's listener reloads the metadata cache (re-arming every watch), then
   re-registers ``/brokers/ids/<id>`` (waiting out the lost session's registration if the server has not
   removed it yet) and puts the controller back into the election. A listener that fails with a
   :class:`StoreError` makes all of them run again after a backoff, so they must be idempotent; if the new
   session is lost meanwhile, renewal starts over instead.

While no session is open, a call waits up to ``session_wait_s`` (the broker gives its
``zookeeper.connection.timeout.ms``) for the new one, as calls on a SUSPENDED session wait for the connection,
then goes to it; with none by then it raises :class:`SessionExpiredError`, which callers already treat as "try
again later" (an ISR write is retried by the next check, a request answers an error the client retries).
Waiting without a bound would hold worker threads for as long as ZooKeeper is unreachable.

Why a wrapper rather than building a new ControllerNode per session: a new node would have to be handed to
every component that captured the old store or node (the replication wiring, the producer-id manager, the
group runtime, handlers in flight), and any one forgotten would keep writing through a dead session. With one
store object nobody can hold a stale session; the only things tied to a session are its ephemerals and
watches, and those are exactly what the new-session listeners re-create.

The embedded store never loses its session and is used as it is, without this wrapper.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Sequence

from sofakafka.controller.store import (
    MetadataStore,
    NewSessionListener,
    Op,
    OpResult,
    ReadCallback,
    SessionExpiredError,
    SessionState,
    StateListener,
    StoreError,
    WatchCallback,
    ZnodeStat,
)

log = logging.getLogger(__name__)

DEFAULT_RETRY_BACKOFF_S = 0.1
DEFAULT_MAX_RETRY_BACKOFF_S = 2.0


class SessionRenewingStore(MetadataStore):
    """One ZooKeeper handle for a broker's lifetime; see the module docstring. ``connect`` opens a session
    (raising :class:`StoreError` when it cannot within its own deadline); the first call happens here."""

    def __init__(
        self,
        connect: Callable[[], MetadataStore],
        *,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        max_retry_backoff_s: float = DEFAULT_MAX_RETRY_BACKOFF_S,
        session_wait_s: float = 0.0,
    ) -> None:
        self._connect = connect
        self._session_wait_s = session_wait_s
        self._retry_backoff_s = retry_backoff_s
        self._max_retry_backoff_s = max_retry_backoff_s
        self._listeners: list[StateListener] = []
        self._new_session_listeners: list[NewSessionListener] = []
        self._lock = threading.Condition()
        self._closed = False
        self._current = connect()
        self._lost_session: MetadataStore | None = None
        self.sessions_opened = 1
        """How many sessions this handle has had; grows by one with each renewal (for logs and tests)."""
        self._attach(self._current)
        self._thread = threading.Thread(target=self._run, name="metadata-session-renewal", daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------------------------------- sessions

    @property
    def current_session(self) -> MetadataStore:
        """The session calls go to now (lost, until the renewal thread has replaced it)."""
        return self._current

    def _attach(self, session: MetadataStore) -> None:
        session.add_listener(functools.partial(self._on_session_state, session))

    def _on_session_state(self, session: MetadataStore, state: SessionState) -> None:
        """The session's event thread. Only the current session speaks for this store."""
        with self._lock:
            if session is not self._current or self._closed:
                return
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:  # one listener's bug must not keep the others, or the renewal, from running
                log.exception("metadata session state listener failed")
        if state is SessionState.LOST:
            with self._lock:
                if session is self._current:
                    self._lost_session = session
                    self._lock.notify_all()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._closed or self._lost_session is not None)
                if self._closed:
                    return
                lost = self._lost_session
            assert lost is not None
            log.warning("ZooKeeper session %#x expired; opening a new one", lost.session_id)
            new = self._open_session()
            if new is None:
                return
            with self._lock:
                closing = self._closed
                if not closing:
                    self._current = new
                    self._lost_session = None
                    self.sessions_opened += 1
                    self._lock.notify_all()  # calls waiting for a session
                    if new.closed:
                        # Lost between opening and becoming current: its LOST was not ours to report yet.
                        self._lost_session = new
            if closing:
                _close_quietly(new)
                return
            _close_quietly(lost)
            log.info("ZooKeeper session %#x replaces the expired %#x", new.session_id, lost.session_id)
            self._run_new_session_listeners(new)

    def _open_session(self) -> MetadataStore | None:
        backoff = self._retry_backoff_s
        while True:
            with self._lock:
                if self._closed:
                    return None
            try:
                new = self._connect()
            except StoreError as exc:  # connect's own deadline passed, or the server refused: try again
                log.warning("opening a new ZooKeeper session failed (%s); retrying in %.1f s", exc, backoff)
            except Exception:  # not ours to understand, but giving up would leave the broker out for good
                log.exception("opening a new ZooKeeper session failed; retrying in %.1f s", backoff)
            else:
                self._attach(new)
                return new
            if self._pause(backoff):
                return None
            backoff = min(2 * backoff, self._max_retry_backoff_s)

    def _run_new_session_listeners(self, session: MetadataStore) -> None:
        backoff = self._retry_backoff_s
        while True:
            try:
                for listener in list(self._new_session_listeners):
                    listener()
                return
            except Exception as exc:
                with self._lock:
                    if self._closed or self._current is not session or self._lost_session is not None:
                        return  # closing, or lost again: the next renewal runs the listeners afresh
                if isinstance(exc, StoreError):
                    log.warning("re-initialising after a new ZooKeeper session failed (%s); retrying in %.1f s",
                                exc, backoff)
                else:
                    log.exception("re-initialising after a new ZooKeeper session failed; retrying in %.1f s",
                                  backoff)
            if self._pause(backoff):
                return
            backoff = min(2 * backoff, self._max_retry_backoff_s)

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` unless closed first; True when closed."""
        with self._lock:
            return self._lock.wait_for(lambda: self._closed, seconds)

    def _session(self) -> MetadataStore:
        current = self._current
        if (current.closed and not self._closed and self._session_wait_s > 0
                and threading.current_thread() is not self._thread):  # the one thread that would end the wait
            with self._lock:
                self._lock.wait_for(lambda: self._closed or not self._current.closed, self._session_wait_s)
                current = self._current
        if self._closed:
            raise SessionExpiredError("the metadata store is closed")
        return current

    # --------------------------------------------------------------------------------- MetadataStore

    @property
    def session_id(self) -> int:
        return self._current.session_id

    def add_new_session_listener(self, listener: NewSessionListener) -> None:
        with self._lock:
            self._new_session_listeners.append(listener)

    def remove_new_session_listener(self, listener: NewSessionListener) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._new_session_listeners.remove(listener)

    def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        return self._session().create(path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath)

    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, ZnodeStat]:
        return self._session().get(path, watch)

    def exists(self, path: str, watch: WatchCallback | None = None) -> ZnodeStat | None:
        return self._session().exists(path, watch)

    def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        return self._session().get_children(path, watch)

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return self._session().set(path, value, version)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        self._session().delete(path, version, recursive)

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        return self._session().multi(ops)

    def get_many(self, paths: Sequence[str], watch: WatchCallback | None = None) -> list[tuple[bytes, ZnodeStat] | None]:
        return self._session().get_many(paths, watch)

    def multi_many(self, transactions: Sequence[Sequence[Op]]) -> list[list[OpResult] | StoreError]:
        return self._session().multi_many(transactions)

    def get_async(self, path: str, watch: WatchCallback | None, callback: ReadCallback) -> None:
        self._session().get_async(path, watch, callback)

    def sync(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._current.sync(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the current session and stop renewing. Waits for the renewal thread, which is bounded by
        one connection attempt."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._lock.notify_all()
            current = self._current
        _close_quietly(current)
        if threading.current_thread() is not self._thread:
            self._thread.join()


def _close_quietly(session: MetadataStore) -> None:
    try:
        session.close()
    except Exception:
        log.exception("closing a metadata session failed")
