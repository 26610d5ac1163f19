"""The embedded single-node metadata store: the znode tree in memory, made durable in a directory.

Used when ``zookeeper.connect`` is unset. :class:`EmbeddedMetadataServer` plays the ZooKeeper ensemble (the
tree, zxids, the journal, watch delivery); each :class:`EmbeddedMetadataStore` it hands out plays one client
session, so a broker's code sees the same :class:`~sofakafka.controller.store.MetadataStore` semantics as it
will against ZooKeeper.

Durability. Every committed transaction (a single create/set/delete or a whole multi-op) is one journal
record, appended and fsync'd before the call returns, so an acknowledged change survives a crash. A record
is ``u32 length, u32 crc32(payload), payload`` where the payload is JSON holding the zxid, the commit time
and the *resolved* changes (a sequential create records the name it got), so replay is deterministic and
reproduces every stat. A torn or corrupt tail of the newest journal is cut off on open: those bytes were
never acknowledged. Every ``snapshot_interval_ops`` records the whole tree is written to a snapshot
(temporary file, fsync, rename, directory fsync) and a new journal begins; older files are then removed.
Recovery loads the newest valid snapshot and replays the journal records after it.

Sessions do not outlive the process, like ZooKeeper sessions do not outlive their timeout: ephemeral znodes
left in the files are deleted on open (and that deletion is journaled like any change, so zxids and
``cversion`` stay consistent across restarts). A lock file keeps a second process from opening the same
directory.

Threads. All tree access happens under one lock, so any thread may call any method; calls that change the
tree block on ``fsync`` (about a millisecond on SSDs), so an asyncio caller should prefer a worker thread.
Watch callbacks and session-state listeners run on the server's event thread, in commit order, outside the
lock.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import queue
import secrets
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sofakafka.controller.store import (
    BadArgumentsError,
    BadVersionError,
    CheckOp,
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
    SessionExpiredError,
    SessionState,
    SetDataOp,
    StateListener,
    StoreError,
    WatchCallback,
    WatchedEvent,
    ZnodeStat,
    join,
    parent_of,
    validate_path,
)

log = logging.getLogger(__name__)

MAX_DATA_BYTES = 1024 * 1024 - 1
"""ZooKeeper refuses znode data of 1 MiB or more (jute.maxbuffer); refusing it here too keeps the embedded
store from accepting what the ZooKeeper backend would not."""

_FRAME_HEADER = struct.Struct(">II")
_SNAPSHOT_PREFIX = "snapshot."
_JOURNAL_PREFIX = "journal."
_FORMAT_VERSION = 1


class StoreCorruptedError(StoreError):
    """The files cannot be recovered without losing acknowledged changes (not a torn tail)."""


class StoreInUseError(StoreError):
    """Another process (or another open server) holds the directory's lock."""


# ------------------------------------------------------------------------------------------------ tree


@dataclass
class _Znode:
    data: bytes
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    ephemeral_owner: int
    pzxid: int
    children: set[str] = field(default_factory=set)

    def stat(self) -> ZnodeStat:
        return ZnodeStat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            aversion=0,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
            pzxid=self.pzxid,
        )


# A resolved change, as journaled: ("c", path, data, ephemeral_owner) | ("s", path, data) | ("d", path).
_Change = tuple[Any, ...]
_Undo = Callable[[], None]


class _Tree:
    """The znodes and the rules that change them. Not thread-safe: the server's lock guards it."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Znode] = {"/": _Znode(b"", 0, 0, 0, 0, 0, 0, 0, 0)}
        self.last_zxid = 0

    def node(self, path: str) -> _Znode:
        found = self.nodes.get(path)
        if found is None:
            raise NoNodeError(f"no node {path}", path)
        return found

    # Each _do_* changes the tree and pushes the function that reverts it, so a multi-op that fails
    # half-way (or whose journal write fails) leaves no trace.

    def do_create(self, path: str, data: bytes, owner: int, zxid: int, now: int, undo: list[_Undo]) -> None:
        parent_path = parent_of(path)
        parent = self.nodes[parent_path]
        name = path[len(parent_path) :].lstrip("/")
        saved = (parent.cversion, parent.pzxid)
        self.nodes[path] = _Znode(data, zxid, zxid, now, now, 0, 0, owner, zxid)
        parent.children.add(name)
        parent.cversion += 1
        parent.pzxid = zxid

        def revert() -> None:
            del self.nodes[path]
            parent.children.discard(name)
            parent.cversion, parent.pzxid = saved

        undo.append(revert)

    def do_set(self, path: str, data: bytes, zxid: int, now: int, undo: list[_Undo]) -> None:
        node = self.nodes[path]
        saved = (node.data, node.version, node.mzxid, node.mtime)
        node.data, node.version, node.mzxid, node.mtime = data, node.version + 1, zxid, now

        def revert() -> None:
            node.data, node.version, node.mzxid, node.mtime = saved

        undo.append(revert)

    def do_delete(self, path: str, zxid: int, undo: list[_Undo]) -> None:
        parent_path = parent_of(path)
        parent = self.nodes[parent_path]
        name = path[len(parent_path) :].lstrip("/")
        node = self.nodes.pop(path)
        saved = (parent.cversion, parent.pzxid)
        parent.children.discard(name)
        parent.cversion += 1
        parent.pzxid = zxid

        def revert() -> None:
            self.nodes[path] = node
            parent.children.add(name)
            parent.cversion, parent.pzxid = saved

        undo.append(revert)

    def apply_change(self, change: _Change, zxid: int, now: int, undo: list[_Undo]) -> None:
        kind = change[0]
        if kind == "c":
            self.do_create(change[1], change[2], change[3], zxid, now, undo)
        elif kind == "s":
            self.do_set(change[1], change[2], zxid, now, undo)
        elif kind == "d":
            self.do_delete(change[1], zxid, undo)
        else:
            raise StoreCorruptedError(f"unknown change kind {kind!r}")


def _check_version(node: _Znode, expected: int, path: str) -> None:
    if expected != -1 and node.version != expected:
        raise BadVersionError(f"{path}: version is {node.version}, expected {expected}", path)


# -------------------------------------------------------------------------------------- file encoding


def _frame(payload: bytes) -> bytes:
    return _FRAME_HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def _read_frames(buf: bytes) -> tuple[list[bytes], int]:
    """Complete, checksummed frames and the byte length they span; whatever follows is a torn tail."""
    frames: list[bytes] = []
    pos = 0
    while pos + _FRAME_HEADER.size <= len(buf):
        length, crc = _FRAME_HEADER.unpack_from(buf, pos)
        end = pos + _FRAME_HEADER.size + length
        if end > len(buf):
            break
        payload = buf[pos + _FRAME_HEADER.size : end]
        if zlib.crc32(payload) != crc:
            break
        frames.append(payload)
        pos = end
    return frames, pos


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _encode_record(zxid: int, now: int, changes: Sequence[_Change]) -> bytes:
    ops: list[list[Any]] = []
    for change in changes:
        if change[0] == "c":
            ops.append(["c", change[1], _b64(change[2]), change[3]])
        elif change[0] == "s":
            ops.append(["s", change[1], _b64(change[2])])
        else:
            ops.append(["d", change[1]])
    return json.dumps({"zxid": zxid, "time": now, "ops": ops}, separators=(",", ":")).encode()


def _decode_record(payload: bytes) -> tuple[int, int, list[_Change]]:
    doc = json.loads(payload)
    changes: list[_Change] = []
    for op in doc["ops"]:
        if op[0] == "c":
            changes.append(("c", op[1], _unb64(op[2]), int(op[3])))
        elif op[0] == "s":
            changes.append(("s", op[1], _unb64(op[2])))
        elif op[0] == "d":
            changes.append(("d", op[1]))
        else:
            raise StoreCorruptedError(f"unknown journal op {op[0]!r}")
    return int(doc["zxid"]), int(doc["time"]), changes


def _open_journal(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------- events


class _EventThread:
    """Delivers watch events and state changes in order on one thread, like ZooKeeper's event thread."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sofakafka-metadata-events", daemon=True)
        self._thread.start()

    def post(self, task: Callable[[], None]) -> None:
        self._queue.put(task)

    def _run(self) -> None:
        while True:
            task = self._queue.get()
            if task is None:
                return
            try:
                task()
            except Exception:
                # A broken watcher must not stop delivery to every other one (ZooKeeper logs and goes on).
                log.exception("metadata store watch callback failed")

    def sync(self, timeout: float | None) -> None:
        if threading.current_thread() is self._thread:
            return
        done = threading.Event()
        self._queue.put(done.set)
        if not done.wait(timeout):
            raise TimeoutError("watch events were not delivered in time")

    def stop(self) -> None:
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()


# ---------------------------------------------------------------------------------------------- server


_WatchKey = tuple[int, WatchCallback]


class EmbeddedMetadataServer:
    """The tree, its files and its sessions. Open with :meth:`open`; :meth:`connect` gives a session."""

    def __init__(self, directory: Path, snapshot_interval_ops: int, fsync: bool) -> None:
        self.directory = directory
        self.snapshot_interval_ops = snapshot_interval_ops
        self._fsync_enabled = fsync
        self._lock = threading.RLock()
        self._tree = _Tree()
        self._sessions: dict[int, EmbeddedMetadataStore] = {}
        self._data_watches: dict[str, dict[_WatchKey, None]] = {}
        self._child_watches: dict[str, dict[_WatchKey, None]] = {}
        # A raw descriptor, not a buffered file: after a failed write a buffer would keep the frame and
        # flush it later, behind our back, after we truncated it away.
        self._journal: int | None = None
        self._journal_size = 0
        self._records_since_snapshot = 0
        self._lock_fd: int | None = None
        self._events: _EventThread | None = None
        self._failed: BaseException | None = None
        self._closed = False

    @classmethod
    def open(
        cls, directory: str | os.PathLike[str], *, snapshot_interval_ops: int = 1000, fsync: bool = True
    ) -> EmbeddedMetadataServer:
        """Open (creating if needed) the store in ``directory`` and recover it.

        ``fsync=False`` is for tests only: it keeps crash safety against a killed process but not against
        a power loss.
        """
        if snapshot_interval_ops < 1:
            raise ValueError("snapshot_interval_ops must be >= 1")
        server = cls(Path(directory), snapshot_interval_ops, fsync)
        server.directory.mkdir(parents=True, exist_ok=True)
        server._acquire_lock()
        try:
            server._recover()
            server._events = _EventThread()
            server._expire_leftover_ephemerals()
        except BaseException:
            server.close()
            raise
        return server

    # --- lifecycle

    def _acquire_lock(self) -> None:
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StoreInUseError(f"metadata store {self.directory} is in use by another process") from exc
        self._lock_fd = fd

    def connect(self) -> EmbeddedMetadataStore:
        """Start a new session."""
        with self._lock:
            self._ensure_usable()
            session_id = 0
            owners = {n.ephemeral_owner for n in self._tree.nodes.values()}
            while session_id == 0 or session_id in self._sessions or session_id in owners:
                session_id = secrets.randbits(63)
            store = EmbeddedMetadataStore(self, session_id)
            self._sessions[session_id] = store
            return store

    def close(self) -> None:
        """Close every session (deleting their ephemerals), deliver pending events, release the files."""
        with self._lock:
            if self._closed:
                return
            for store in list(self._sessions.values()):
                with contextlib.suppress(StoreError):
                    store.close()
            self._closed = True
            if self._journal is not None:
                os.close(self._journal)
                self._journal = None
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            events, self._events = self._events, None
        if events is not None:
            events.stop()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_zxid(self) -> int:
        with self._lock:
            return self._tree.last_zxid

    def __enter__(self) -> EmbeddedMetadataServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_usable(self) -> None:
        if self._closed:
            raise SessionExpiredError("the embedded metadata store is closed")
        if self._failed is not None:
            raise StoreError(f"the embedded metadata store failed to write its journal: {self._failed}")

    # --- recovery

    def _files(self, prefix: str) -> list[tuple[int, Path]]:
        found: list[tuple[int, Path]] = []
        for entry in self.directory.iterdir():
            name = entry.name
            if name.startswith(prefix) and name[len(prefix) :].isdigit():
                found.append((int(name[len(prefix) :]), entry))
        return sorted(found)

    def _recover(self) -> None:
        for entry in self.directory.iterdir():
            if entry.name.endswith(".tmp"):
                entry.unlink()
        snapshot_zxid = 0
        for zxid, path in reversed(self._files(_SNAPSHOT_PREFIX)):
            if self._load_snapshot(path):
                snapshot_zxid = zxid
                break
            log.warning("ignoring unreadable metadata snapshot %s", path)
        journals = self._files(_JOURNAL_PREFIX)
        for index, (_, path) in enumerate(journals):
            is_last = index == len(journals) - 1
            buf = path.read_bytes()
            frames, good = _read_frames(buf)
            for payload in frames:
                zxid, now, changes = _decode_record(payload)
                if zxid <= snapshot_zxid or zxid <= self._tree.last_zxid:
                    continue
                if zxid != self._tree.last_zxid + 1:
                    raise StoreCorruptedError(
                        f"{path}: record zxid {zxid} follows {self._tree.last_zxid}; journal records are missing"
                    )
                try:
                    for change in changes:
                        self._tree.apply_change(change, zxid, now, [])
                except (KeyError, ValueError, IndexError) as exc:
                    raise StoreCorruptedError(f"{path}: record zxid {zxid} does not apply: {exc!r}") from exc
                self._tree.last_zxid = zxid
                self._records_since_snapshot += 1
            if good < len(buf):
                log.warning("metadata journal %s: dropping %d bytes of torn tail", path, len(buf) - good)
                if is_last:
                    with path.open("r+b") as f:
                        f.truncate(good)
                        os.fsync(f.fileno())
        if journals:
            last_path = journals[-1][1]
            self._journal = _open_journal(last_path)
            self._journal_size = os.fstat(self._journal).st_size
        else:
            self._start_journal()

    def _load_snapshot(self, path: Path) -> bool:
        frames, _ = _read_frames(path.read_bytes())
        if len(frames) != 1:
            return False
        doc = json.loads(frames[0])
        if doc.get("format") != _FORMAT_VERSION:
            raise StoreCorruptedError(f"{path}: unknown snapshot format {doc.get('format')!r}")
        tree = _Tree()
        tree.last_zxid = int(doc["zxid"])
        for row in doc["nodes"]:
            path_, data, czxid, mzxid, ctime, mtime, version, cversion, owner, pzxid = row
            tree.nodes[path_] = _Znode(_unb64(data), czxid, mzxid, ctime, mtime, version, cversion, owner, pzxid)
        for path_ in tree.nodes:
            if path_ != "/":
                parent = parent_of(path_)
                tree.nodes[parent].children.add(path_[len(parent) :].lstrip("/"))
        self._tree = tree
        return True

    def _expire_leftover_ephemerals(self) -> None:
        with self._lock:
            leftovers = [p for p, n in self._tree.nodes.items() if n.ephemeral_owner != 0]
            if leftovers:
                # Deepest first is irrelevant (ephemerals have no children), but order by path for stable logs.
                self._commit(0, [DeleteOp(p) for p in sorted(leftovers)])

    # --- journal and snapshots

    def _start_journal(self) -> None:
        path = self.directory / f"{_JOURNAL_PREFIX}{self._tree.last_zxid + 1:020d}"
        self._journal = _open_journal(path)
        self._journal_size = os.fstat(self._journal).st_size
        if self._fsync_enabled:
            _fsync_dir(self.directory)

    def _append(self, frame: bytes) -> None:
        """Write framed records (one or several) and fsync them."""
        journal = self._journal
        assert journal is not None
        try:
            view = memoryview(frame)
            while view:
                written = os.write(journal, view)
                view = view[written:]
            if self._fsync_enabled:
                os.fsync(journal)
        except OSError:
            # Leave no partial frame behind: records appended after garbage would be unreachable on recovery.
            try:
                os.ftruncate(journal, self._journal_size)
            except OSError as exc:
                self._failed = exc
            raise
        self._journal_size += len(frame)

    def _write_snapshot(self) -> None:
        tree = self._tree
        rows = [
            [p, _b64(n.data), n.czxid, n.mzxid, n.ctime, n.mtime, n.version, n.cversion, n.ephemeral_owner, n.pzxid]
            for p, n in sorted(tree.nodes.items())
        ]
        payload = json.dumps({"format": _FORMAT_VERSION, "zxid": tree.last_zxid, "nodes": rows}, separators=(",", ":"))
        final = self.directory / f"{_SNAPSHOT_PREFIX}{tree.last_zxid:020d}"
        tmp = final.with_name(final.name + ".tmp")
        with tmp.open("wb") as f:
            f.write(_frame(payload.encode()))
            f.flush()
            if self._fsync_enabled:
                os.fsync(f.fileno())
        os.replace(tmp, final)
        if self._fsync_enabled:
            _fsync_dir(self.directory)
        # The snapshot is durable: everything older is redundant.
        if self._journal is not None:
            os.close(self._journal)
            self._journal = None
        self._start_journal()
        current_journal = self.directory / f"{_JOURNAL_PREFIX}{tree.last_zxid + 1:020d}"
        for _, path in self._files(_JOURNAL_PREFIX):
            if path != current_journal:
                path.unlink()
        for _, path in self._files(_SNAPSHOT_PREFIX):
            if path != final:
                path.unlink()
        self._records_since_snapshot = 0

    # --- commits

    def _commit(self, session_id: int, ops: Sequence[Op]) -> list[OpResult]:
        """Validate and apply ``ops`` atomically, journal them, then queue their watch events."""
        outcome = self._commit_many(session_id, [ops])[0]
        if isinstance(outcome, StoreError):
            raise outcome
        return outcome

    def _commit_many(self, session_id: int, transactions: Sequence[Sequence[Op]]) -> list[list[OpResult] | StoreError]:
        """Each of ``transactions`` validated and applied atomically on its own (a failed one is reverted and its
        error returned in its place), the successful ones journaled as one record each in a single write and
        fsync (a group commit), then their watch events queued. A failed journal write reverts them all."""
        with self._lock:
            self._ensure_usable()
            tree = self._tree
            first_zxid = tree.last_zxid
            applied: list[_Undo] = []
            committed: list[list[_Change]] = []
            frames: list[bytes] = []
            outcomes: list[list[OpResult] | StoreError] = []
            try:
                for ops in transactions:
                    zxid = tree.last_zxid + 1
                    now = int(time.time() * 1000)
                    undo: list[_Undo] = []
                    changes: list[_Change] = []
                    results: list[OpResult] = []
                    try:
                        for index, op in enumerate(ops):
                            try:
                                results.append(self._plan(tree, op, session_id, zxid, now, undo, changes))
                            except StoreError as exc:
                                exc.op_index = index
                                raise
                    except StoreError as exc:
                        for revert in reversed(undo):
                            revert()
                        outcomes.append(exc)
                        continue
                    if changes:
                        frames.append(_frame(_encode_record(zxid, now, changes)))
                        tree.last_zxid = zxid
                        applied.extend(undo)
                        committed.append(changes)
                    outcomes.append(results)
                if frames:
                    self._append(b"".join(frames))
            except BaseException:
                for revert in reversed(applied):
                    revert()
                tree.last_zxid = first_zxid
                raise
            for changes in committed:
                self._records_since_snapshot += 1
                self._fire(changes)
            if committed and self._records_since_snapshot >= self.snapshot_interval_ops:
                try:
                    self._write_snapshot()
                except OSError:
                    # The change itself is durable in the journal; a failed snapshot is retried later.
                    log.exception("metadata snapshot failed")
            return outcomes

    def _plan(
        self,
        tree: _Tree,
        op: Op,
        session_id: int,
        zxid: int,
        now: int,
        undo: list[_Undo],
        changes: list[_Change],
    ) -> OpResult:
        if isinstance(op, CreateOp):
            validate_path(op.path, sequential=op.sequence)
            if op.path == "/":
                raise NodeExistsError("/ exists", "/")
            _check_data(op.data, op.path)
            parent_path = parent_of(op.path if not op.path.endswith("/") else op.path + "x")
            parent = tree.nodes.get(parent_path)
            if parent is None:
                raise NoNodeError(f"parent {parent_path} of {op.path} does not exist", op.path)
            if parent.ephemeral_owner != 0:
                raise NoChildrenForEphemeralsError(f"{parent_path} is ephemeral", op.path)
            path = f"{op.path}{parent.cversion:010d}" if op.sequence else op.path
            if path in tree.nodes:
                raise NodeExistsError(f"{path} exists", path)
            owner = session_id if op.ephemeral else 0
            if op.ephemeral and session_id == 0:
                raise BadArgumentsError("ephemeral znodes need a session", path)
            tree.do_create(path, op.data, owner, zxid, now, undo)
            changes.append(("c", path, op.data, owner))
            return path
        validate_path(op.path)
        node = tree.node(op.path)
        if isinstance(op, SetDataOp):
            _check_data(op.data, op.path)
            _check_version(node, op.version, op.path)
            tree.do_set(op.path, op.data, zxid, now, undo)
            changes.append(("s", op.path, op.data))
            return node.stat()
        if isinstance(op, DeleteOp):
            if op.path == "/":
                raise BadArgumentsError("the root cannot be deleted", "/")
            _check_version(node, op.version, op.path)
            if node.children:
                raise NotEmptyError(f"{op.path} has children", op.path)
            tree.do_delete(op.path, zxid, undo)
            changes.append(("d", op.path))
            return None
        if isinstance(op, CheckOp):
            _check_version(node, op.version, op.path)
            return None
        raise BadArgumentsError(f"unknown operation {op!r}")

    # --- watches

    def _register(self, table: dict[str, dict[_WatchKey, None]], path: str, session_id: int, cb: WatchCallback) -> None:
        table.setdefault(path, {})[(session_id, cb)] = None

    def _take(self, table: dict[str, dict[_WatchKey, None]], path: str) -> list[_WatchKey]:
        return list(table.pop(path, {}))

    def _fire(self, changes: Sequence[_Change]) -> None:
        """Queue the events of committed changes; each watch fires once, then it is gone."""
        events = self._events
        for change in changes:
            kind, path = change[0], change[1]
            fired: list[tuple[_WatchKey, EventType, str]] = []
            if kind == "c":
                fired += [(w, EventType.CREATED, path) for w in self._take(self._data_watches, path)]
                fired += [(w, EventType.CHILD, parent_of(path)) for w in self._take(self._child_watches, parent_of(path))]
            elif kind == "s":
                fired += [(w, EventType.CHANGED, path) for w in self._take(self._data_watches, path)]
            else:
                deleted = self._take(self._data_watches, path)
                deleted += [w for w in self._take(self._child_watches, path) if w not in deleted]
                fired += [(w, EventType.DELETED, path) for w in deleted]
                fired += [(w, EventType.CHILD, parent_of(path)) for w in self._take(self._child_watches, parent_of(path))]
            if events is None:
                continue
            for (session_id, callback), event_type, event_path in fired:
                store = self._sessions.get(session_id)
                if store is not None:
                    event = WatchedEvent(event_type, KeeperState.CONNECTED, event_path)
                    events.post(store._deliver_watch(callback, event))

    def _drop_watches(self, session_id: int) -> None:
        for table in (self._data_watches, self._child_watches):
            for path in list(table):
                watchers = table[path]
                for key in [k for k in watchers if k[0] == session_id]:
                    del watchers[key]
                if not watchers:
                    del table[path]

    # --- reads used by sessions

    def _read(self, path: str, session_id: int, watch: WatchCallback | None, kind: str) -> Any:
        validate_path(path)
        with self._lock:
            self._ensure_usable()
            node = self._tree.nodes.get(path)
            if kind == "exists":
                if watch is not None:
                    self._register(self._data_watches, path, session_id, watch)
                return None if node is None else node.stat()
            if node is None:
                raise NoNodeError(f"no node {path}", path)
            if kind == "get":
                if watch is not None:
                    self._register(self._data_watches, path, session_id, watch)
                return node.data, node.stat()
            if watch is not None:
                self._register(self._child_watches, path, session_id, watch)
            return sorted(node.children)

    def _subtree_deletes(self, path: str, version: int) -> list[Op]:
        ops: list[Op] = []

        def visit(p: str) -> None:
            for child in sorted(self._tree.nodes[p].children):
                visit(join(p, child))
            ops.append(DeleteOp(p, version if p == path else -1))

        visit(path)
        return ops

    def _missing_parents(self, path: str) -> list[str]:
        missing: list[str] = []
        parent = parent_of(path)
        while parent != "/" and parent not in self._tree.nodes:
            missing.append(parent)
            parent = parent_of(parent)
        return list(reversed(missing))


def _check_data(data: bytes, path: str) -> None:
    if not isinstance(data, bytes | bytearray):
        raise BadArgumentsError(f"{path}: znode data must be bytes", path)
    if len(data) > MAX_DATA_BYTES:
        raise BadArgumentsError(f"{path}: {len(data)} bytes is over ZooKeeper's 1 MiB znode limit", path)


# --------------------------------------------------------------------------------------------- session


class EmbeddedMetadataStore(MetadataStore):
    """One session on an :class:`EmbeddedMetadataServer`."""

    def __init__(self, server: EmbeddedMetadataServer, session_id: int) -> None:
        self._server = server
        self._session_id = session_id
        self._closed = False
        self._listeners: list[StateListener] = []

    @classmethod
    def open(
        cls, directory: str | os.PathLike[str], *, snapshot_interval_ops: int = 1000, fsync: bool = True
    ) -> EmbeddedMetadataStore:
        """A server with one session; closing that session closes the server (the single-broker case)."""
        server = EmbeddedMetadataServer.open(directory, snapshot_interval_ops=snapshot_interval_ops, fsync=fsync)
        store = server.connect()
        store._owns_server = True
        return store

    _owns_server = False

    @property
    def server(self) -> EmbeddedMetadataServer:
        return self._server

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise SessionExpiredError(f"session {self._session_id:#x} is closed")

    def _deliver_watch(self, callback: WatchCallback, event: WatchedEvent) -> Callable[[], None]:
        def deliver() -> None:
            # ZooKeeper delivers nothing to a session after it is closed.
            if not self._closed:
                callback(event)

        return deliver

    # --- MetadataStore

    def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        self._check_open()
        server = self._server
        with server._lock:
            ops: list[Op] = []
            if makepath:
                validate_path(path, sequential=sequence)
                base = path + "x" if path.endswith("/") else path
                ops += [CreateOp(p) for p in server._missing_parents(base)]
            ops.append(CreateOp(path, bytes(value), ephemeral, sequence))
            try:
                result = server._commit(self._session_id, ops)
            except StoreError as exc:
                exc.op_index = None
                raise
        created = result[-1]
        assert isinstance(created, str)
        return created

    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, ZnodeStat]:
        self._check_open()
        result: tuple[bytes, ZnodeStat] = self._server._read(path, self._session_id, watch, "get")
        return result

    def exists(self, path: str, watch: WatchCallback | None = None) -> ZnodeStat | None:
        self._check_open()
        result: ZnodeStat | None = self._server._read(path, self._session_id, watch, "exists")
        return result

    def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        self._check_open()
        result: list[str] = self._server._read(path, self._session_id, watch, "children")
        return result

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        self._check_open()
        result = self._single(SetDataOp(path, bytes(value), version))
        assert isinstance(result, ZnodeStat)
        return result

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        self._check_open()
        if not recursive:
            self._single(DeleteOp(path, version))
            return
        validate_path(path)
        server = self._server
        with server._lock:
            # kazoo's recursive delete of a missing node is a no-op; so is ours.
            if path not in server._tree.nodes:
                return
            try:
                server._commit(self._session_id, server._subtree_deletes(path, version))
            except StoreError as exc:
                exc.op_index = None
                raise

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        self._check_open()
        return self._server._commit(self._session_id, list(ops))

    def multi_many(self, transactions: Sequence[Sequence[Op]]) -> list[list[OpResult] | StoreError]:
        self._check_open()
        return self._server._commit_many(self._session_id, [list(ops) for ops in transactions])

    def get_many(self, paths: Sequence[str], watch: WatchCallback | None = None) -> list[tuple[bytes, ZnodeStat] | None]:
        self._check_open()
        server = self._server
        out: list[tuple[bytes, ZnodeStat] | None] = []
        with server._lock:  # one consistent view: nothing is created between a missing get and its exists
            for path in paths:
                validate_path(path)
                if path in server._tree.nodes:
                    out.append(server._read(path, self._session_id, watch, "get"))
                else:
                    server._read(path, self._session_id, watch, "exists")
                    out.append(None)
        return out

    def _single(self, op: Op) -> OpResult:
        try:
            return self._server._commit(self._session_id, [op])[0]
        except StoreError as exc:
            exc.op_index = None
            raise

    def sync(self, timeout: float | None = None) -> None:
        events = self._server._events
        if events is not None:
            events.sync(timeout)

    def close(self) -> None:
        server = self._server
        with server._lock:
            if self._closed:
                return
            self._closed = True
            server._drop_watches(self._session_id)
            try:
                if not server._closed and server._failed is None:
                    owned = sorted(p for p, n in server._tree.nodes.items() if n.ephemeral_owner == self._session_id)
                    if owned:
                        server._commit(0, [DeleteOp(p) for p in owned])
            finally:
                server._sessions.pop(self._session_id, None)
                listeners = list(self._listeners)
                if server._events is not None:
                    for listener in listeners:
                        server._events.post(_state_change(listener, SessionState.LOST))
        if self._owns_server:
            server.close()


def _state_change(listener: StateListener, state: SessionState) -> Callable[[], None]:
    return lambda: listener(state)
