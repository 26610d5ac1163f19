"""The ``MetadataStore`` interface: a ZooKeeper-shaped tree of znodes, whatever holds it.

The cluster's metadata lives in Kafka 2.6's ZooKeeper layout (see ``zk_paths`` and ``zk_data``). Two
backends hold that tree: the embedded single-node store (``embedded``) and, in a later issue, ZooKeeper
through kazoo. Everything above this interface (controller, broker) must behave the same on either, so
the interface copies ZooKeeper's semantics, and kazoo's method names, rather than inventing friendlier ones:

* A store object is one **session**. Ephemeral znodes belong to the session that created them and vanish
  when it closes or expires; ``/brokers/ids/<id>`` and ``/controller`` depend on it. The one exception is
  :class:`~sofakafka.controller.session.SessionRenewingStore`, a broker's handle on ZooKeeper: it replaces a
  lost session with a new one and tells its :meth:`MetadataStore.add_new_session_listener` listeners, who
  re-create what the lost session took (registration, watches, the controller election).
* Every znode has a :class:`ZnodeStat`. ``version`` counts data changes and is the optimistic-concurrency
  token (Kafka's "zkVersion"); ``czxid`` of ``/brokers/ids/<id>`` is the broker epoch; the sequence suffix
  of a sequential znode is the parent's ``cversion`` at creation.
* Watches are one-shot, set by a read and fired by the next matching change, as in ZooKeeper: ``get`` and
  ``exists`` set data watches (fired by set, delete, and for ``exists`` on a missing node, create);
  ``get_children`` sets a child watch (fired by a child's create or delete, or the node's own delete).
  Callbacks run on the backend's event thread, never in the caller's frame and never under the store's
  lock, in the order the changes committed. A callback should hand the event to its owner's queue and
  return; it may call the store.
* :meth:`MetadataStore.multi` is ZooKeeper's multi-op: all operations commit atomically with one zxid or
  none does, and the error of the first failing operation is raised.
* Errors are our classes named after ZooKeeper's codes (:class:`NoNodeError` for NONODE ...), so a kazoo
  backend maps kazoo's exceptions one to one.

A backend may hold nodes of its own (ZooKeeper's ``/zookeeper``), so nobody should assume the children of
``/`` are only Kafka's. Paths are absolute, ``/``-separated, without a trailing slash (except the root), without empty, ``.`` or
``..`` components. Data is bytes; ZooKeeper's null data is ``b""``.
"""

from __future__ import annotations

import contextlib
import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# ---------------------------------------------------------------------------------------------- errors


class StoreError(Exception):
    """Base of every metadata store failure. ``path`` is the znode concerned, when there is one."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.op_index: int | None = None
        """Position of the failing operation when raised by :meth:`MetadataStore.multi`."""


class NoNodeError(StoreError):
    """ZooKeeper NONODE: the znode (or, for a create, its parent) does not exist."""


class NodeExistsError(StoreError):
    """ZooKeeper NODEEXISTS."""


class BadVersionError(StoreError):
    """ZooKeeper BADVERSION: the znode's version is not the expected one."""


class NotEmptyError(StoreError):
    """ZooKeeper NOTEMPTY: a znode with children cannot be deleted (unless recursively)."""


class NoChildrenForEphemeralsError(StoreError):
    """ZooKeeper NOCHILDRENFOREPHEMERALS."""


class BadArgumentsError(StoreError, ValueError):
    """ZooKeeper BADARGUMENTS: an invalid path or argument."""


class SessionExpiredError(StoreError):
    """ZooKeeper SESSIONEXPIRED: the session is closed; its ephemerals are gone."""


class ConnectionLossError(StoreError):
    """ZooKeeper CONNECTIONLOSS: the outcome of the operation is unknown; retry with care."""


# ------------------------------------------------------------------------------------------ znode stat


@dataclass(frozen=True)
class ZnodeStat:
    """ZooKeeper's Stat, field for field (kazoo's ZnodeStat has the same names)."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int

    @property
    def created(self) -> float:
        return self.ctime / 1000.0

    @property
    def last_modified(self) -> float:
        return self.mtime / 1000.0


# --------------------------------------------------------------------------------------------- watches


class EventType(enum.Enum):
    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILD = "CHILD"


class KeeperState(enum.Enum):
    CONNECTED = "CONNECTED"
    CONNECTED_RO = "CONNECTED_RO"
    CONNECTING = "CONNECTING"
    EXPIRED_SESSION = "EXPIRED_SESSION"
    CLOSED = "CLOSED"


class SessionState(enum.Enum):
    """Session states a listener sees (kazoo's KazooState): SUSPENDED may come back, LOST does not."""

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


@dataclass(frozen=True)
class WatchedEvent:
    type: EventType
    state: KeeperState
    path: str


WatchCallback = Callable[[WatchedEvent], None]
StateListener = Callable[[SessionState], None]
ReadCallback = Callable[[tuple[bytes, ZnodeStat] | StoreError | None], None]
"""What :meth:`MetadataStore.get_async` calls with its answer."""
NewSessionListener = Callable[[], None]
"""Called after a renewing store replaced a lost session (Kafka's ``afterInitializingSession``)."""


# ---------------------------------------------------------------------------------------- multi-op ops


@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = -1


@dataclass(frozen=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class CheckOp:
    """Fails the transaction unless the znode exists with this version (Kafka's controller-epoch fence)."""

    path: str
    version: int


Op = CreateOp | DeleteOp | SetDataOp | CheckOp
OpResult = str | ZnodeStat | None
"""CreateOp -> the created path; SetDataOp -> the new stat; DeleteOp and CheckOp -> None."""


class Transaction:
    """Builder over :meth:`MetadataStore.multi`, shaped like kazoo's ``client.transaction()``."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self.operations: list[Op] = []

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False, sequence: bool = False) -> None:
        self.operations.append(CreateOp(path, value, ephemeral, sequence))

    def delete(self, path: str, version: int = -1) -> None:
        self.operations.append(DeleteOp(path, version))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self.operations.append(SetDataOp(path, value, version))

    def check(self, path: str, version: int) -> None:
        self.operations.append(CheckOp(path, version))

    def commit(self) -> list[OpResult]:
        return self._store.multi(self.operations)


# ------------------------------------------------------------------------------------------- interface


class MetadataStore(ABC):
    """One session on the metadata tree. Thread-safe: any thread may call any method.

    Calls block until the change is durable (embedded) or acknowledged by a quorum (ZooKeeper), so an
    asyncio caller should run them in a worker thread when latency matters.
    """

    @property
    @abstractmethod
    def session_id(self) -> int:
        """The session's id, the ``ephemeral_owner`` of the ephemeral znodes it creates."""

    @abstractmethod
    def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create a znode and return its path (with the sequence suffix for sequential ones).

        ``makepath`` creates missing parents as persistent znodes with no data (not atomically, as kazoo).
        """

    @abstractmethod
    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, ZnodeStat]:
        """Data and stat; NoNodeError (and no watch left) if missing."""

    @abstractmethod
    def exists(self, path: str, watch: WatchCallback | None = None) -> ZnodeStat | None:
        """Stat or None; the watch fires on create as well when the znode is missing."""

    @abstractmethod
    def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        """Child names (not paths), sorted; NoNodeError (and no watch left) if missing."""

    @abstractmethod
    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        """Replace the data if the version matches (-1 matches any); returns the new stat."""

    @abstractmethod
    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        """Delete a znode; ``recursive`` deletes its subtree first (atomically here, unlike kazoo)."""

    @abstractmethod
    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Commit every operation or none; raises the first failure's error with ``op_index`` set."""

    def get_many(self, paths: Sequence[str], watch: WatchCallback | None = None) -> list[tuple[bytes, ZnodeStat] | None]:
        """``get`` of every path, in order, with None for a znode that does not exist; with ``watch``, a missing
        znode is left an existence watch (as ``exists`` leaves), so its creation fires it.

        For reading many znodes at once (the states of a topic's partitions): the ZooKeeper backend sends the
        requests without waiting for each answer, so a thousand reads cost a few round trips, not a thousand.
        This default reads one after the other."""
        out: list[tuple[bytes, ZnodeStat] | None] = []
        for path in paths:
            while True:
                try:
                    out.append(self.get(path, watch))
                    break
                except NoNodeError:
                    if self.exists(path, watch) is None:
                        out.append(None)
                        break
        return out

    def get_async(self, path: str, watch: WatchCallback | None, callback: ReadCallback) -> None:
        """``get_many([path], watch)[0]`` with the answer handed to ``callback`` instead of returned (a
        :class:`StoreError` too, instead of raised). For a watch callback that re-reads what changed: the
        ZooKeeper backend sends the read and returns at once, and ``callback`` runs on the event thread when the
        answer is in, so a burst of a thousand changed znodes is read in a few round trips, not a thousand one
        after the other. Callbacks of reads issued one after the other run in that order, and a ``sync`` issued
        after this call returns only after ``callback`` ran. This default reads at once and calls ``callback``
        before returning."""
        try:
            result: tuple[bytes, ZnodeStat] | StoreError | None = self.get_many([path], watch)[0]
        except StoreError as exc:
            result = exc
        callback(result)

    def multi_many(self, transactions: Sequence[Sequence[Op]]) -> list[list[OpResult] | StoreError]:
        """Independent multi-ops, committed in order, each one wholly or not at all: a transaction's failure is
        returned in its place (the first failing operation's error, ``op_index`` set), never raised, and does
        not stop the others. Durable (acknowledged) when this returns, like ``multi``.

        For writes of many partitions at once (a failed broker's leaderships): the ZooKeeper backend sends them
        without waiting for each answer, the embedded store journals them with one fsync. This default commits
        one after the other."""
        out: list[list[OpResult] | StoreError] = []
        for ops in transactions:
            try:
                out.append(self.multi(ops))
            except StoreError as exc:
                out.append(exc)
        return out

    _listeners: list[StateListener]
    """Set by each backend's ``__init__``; the backend delivers session states to these on its event thread."""

    def add_listener(self, listener: StateListener) -> None:
        """Call ``listener`` on the event thread whenever the session state changes."""
        self._listeners.append(listener)

    def remove_listener(self, listener: StateListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def add_new_session_listener(self, listener: NewSessionListener) -> None:  # noqa: B027 - optional hook
        """Call ``listener`` each time this store replaces a lost session with a new one, after the swap and
        before anything else is done on the new session's behalf, so the listener re-creates ephemerals and
        re-arms watches. A store that is one session (both backends) never renews: nothing to remember."""

    def remove_new_session_listener(self, listener: NewSessionListener) -> None:  # noqa: B027 - optional hook
        """Forget ``listener``; a store that never renews has none."""

    @abstractmethod
    def sync(self, timeout: float | None = None) -> None:
        """Block until every watch event of changes committed before the call has been delivered."""

    @abstractmethod
    def close(self) -> None:
        """End the session: its ephemeral znodes are deleted and their watches fire. Idempotent."""

    @property
    @abstractmethod
    def closed(self) -> bool: ...

    # --- conveniences shared by every backend

    def transaction(self) -> Transaction:
        return Transaction(self)

    def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing parents as empty persistent znodes (kazoo's ensure_path)."""
        validate_path(path)
        if path == "/":
            return
        current = ""
        for part in path.strip("/").split("/"):
            current += "/" + part
            if self.exists(current) is None:
                try:
                    self.create(current)
                except NodeExistsError:
                    pass

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------------------------ paths


def validate_path(path: str, *, sequential: bool = False) -> None:
    """ZooKeeper's path rules (PathUtils.validatePath); a sequential create may end in ``/``."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadArgumentsError(f"path must be absolute: {path!r}", str(path))
    if path == "/":
        return
    body = path[:-1] if sequential and path.endswith("/") else path
    if body.endswith("/"):
        raise BadArgumentsError(f"path must not end with '/': {path!r}", path)
    if "\x00" in path:
        raise BadArgumentsError(f"path must not contain NUL: {path!r}", path)
    if body != "" and body != "/":
        for part in body[1:].split("/"):
            if part in ("", ".", ".."):
                raise BadArgumentsError(f"invalid path component {part!r} in {path!r}", path)


def parent_of(path: str) -> str:
    head, _, _ = path.rpartition("/")
    return head or "/"


def join(parent: str, child: str) -> str:
    return parent + child if parent == "/" else f"{parent}/{child}"
