"""The embedded MetadataStore: ZooKeeper semantics against a dict model, durability, crash recovery."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sofakafka.controller.embedded import (
    MAX_DATA_BYTES,
    EmbeddedMetadataServer,
    EmbeddedMetadataStore,
    StoreCorruptedError,
    StoreInUseError,
)
from sofakafka.controller.store import (
    BadArgumentsError,
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    EventType,
    MetadataStore,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionExpiredError,
    SessionState,
    SetDataOp,
    StoreError,
    WatchedEvent,
    ZnodeStat,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EmbeddedMetadataStore]:
    s = EmbeddedMetadataStore.open(tmp_path / "meta", fsync=False)
    yield s
    s.close()


class Recorder:
    """A watch callback that remembers what it saw, thread-safely (events come from the event thread)."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, str]] = []
        self._lock = threading.Lock()

    def __call__(self, event: WatchedEvent) -> None:
        with self._lock:
            self.events.append((event.type, event.path))

    def take(self) -> list[tuple[EventType, str]]:
        with self._lock:
            events, self.events = self.events, []
        return events


# ------------------------------------------------------------------------------------- basic semantics


def test_create_get_set_delete_with_versions(store: MetadataStore) -> None:
    assert store.create("/brokers", b"") == "/brokers"
    store.create("/brokers/topics/t", b"x", makepath=True)
    data, stat = store.get("/brokers/topics/t")
    assert (data, stat.version, stat.data_length, stat.num_children) == (b"x", 0, 1, 0)
    stat = store.set("/brokers/topics/t", b"yy", version=0)
    assert stat.version == 1 and stat.data_length == 2
    with pytest.raises(BadVersionError):
        store.set("/brokers/topics/t", b"z", version=0)
    with pytest.raises(NodeExistsError):
        store.create("/brokers/topics/t")
    with pytest.raises(NoNodeError):
        store.create("/missing/child")
    with pytest.raises(NotEmptyError):
        store.delete("/brokers")
    with pytest.raises(BadVersionError):
        store.delete("/brokers/topics/t", version=0)
    store.delete("/brokers/topics/t", version=1)
    assert store.exists("/brokers/topics/t") is None
    store.delete("/brokers", recursive=True)
    assert store.get_children("/") == []
    store.delete("/never-existed", recursive=True)


def test_parent_stats_track_children(store: MetadataStore) -> None:
    store.create("/p")
    store.create("/p/a")
    store.create("/p/b")
    store.delete("/p/a")
    stat = store.exists("/p")
    assert stat is not None
    assert (stat.cversion, stat.num_children, stat.version) == (3, 1, 0)
    assert stat.pzxid > stat.czxid


def test_sequential_names_use_the_parent_cversion(store: MetadataStore) -> None:
    store.create("/config/changes", makepath=True)
    first = store.create("/config/changes/config_change_", b"{}", sequence=True)
    second = store.create("/config/changes/config_change_", b"{}", sequence=True)
    store.delete(second)
    third = store.create("/config/changes/config_change_", b"{}", sequence=True)
    assert (first, second, third) == (
        "/config/changes/config_change_0000000000",
        "/config/changes/config_change_0000000001",
        "/config/changes/config_change_0000000003",
    )


def test_invalid_paths_and_data_are_refused(store: MetadataStore) -> None:
    for path in ("relative", "/trailing/", "/double//slash", "/dot/./x", "/dot/../x", "/nul\x00"):
        with pytest.raises(BadArgumentsError):
            store.create(path)
    with pytest.raises(BadArgumentsError):
        store.delete("/")
    with pytest.raises(BadArgumentsError):
        store.create("/big", b"x" * (MAX_DATA_BYTES + 1))
    store.create("/limit", b"x" * MAX_DATA_BYTES)


def test_ephemeral_znodes_cannot_have_children(store: MetadataStore) -> None:
    store.create("/e", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        store.create("/e/child")


def test_multi_is_all_or_nothing_and_names_the_failing_op(store: MetadataStore) -> None:
    store.create("/controller_epoch", b"0")
    with pytest.raises(BadVersionError) as info:
        store.multi([CreateOp("/controller", b"{}", ephemeral=True), SetDataOp("/controller_epoch", b"1", version=7)])
    assert info.value.op_index == 1
    assert store.exists("/controller") is None
    assert store.get("/controller_epoch")[0] == b"0"
    results = store.multi(
        [
            CheckOp("/controller_epoch", 0),
            CreateOp("/controller", b"{}", ephemeral=True),
            SetDataOp("/controller_epoch", b"1", version=0),
            CreateOp("/s", b""),
            DeleteOp("/s"),
        ]
    )
    assert results[0] is None and results[1] == "/controller" and results[4] is None
    stat = results[2]
    assert not isinstance(stat, str) and stat is not None and stat.version == 1
    controller = store.exists("/controller")
    epoch = store.exists("/controller_epoch")
    assert controller is not None and epoch is not None
    # One multi is one transaction: one zxid.
    assert controller.czxid == epoch.mzxid
    assert controller.ephemeral_owner == store.session_id


def test_transaction_builder(store: MetadataStore) -> None:
    tx = store.transaction()
    tx.create("/a", b"1")
    tx.create("/a/b", b"2")
    tx.set_data("/a", b"3")
    tx.check("/a", 1)
    assert tx.commit() == ["/a", "/a/b", store.exists("/a"), None]


def test_closed_session_refuses_calls(store: MetadataStore) -> None:
    store.close()
    store.close()
    with pytest.raises(SessionExpiredError):
        store.get("/")


# ----------------------------------------------------------------------------------------- sessions


def test_closing_a_session_deletes_its_ephemerals_and_fires_watches(tmp_path: Path) -> None:
    with EmbeddedMetadataServer.open(tmp_path / "meta", fsync=False) as server:
        broker = server.connect()
        controller = server.connect()
        lost: list[SessionState] = []
        broker.add_listener(lost.append)
        controller.ensure_path("/brokers/ids")
        broker.create("/brokers/ids/1", b"{}", ephemeral=True)
        seen = Recorder()
        assert controller.get_children("/brokers/ids", watch=seen) == ["1"]
        assert controller.exists("/brokers/ids/1", watch=seen) is not None
        broker.close()
        controller.sync()
        assert controller.get_children("/brokers/ids") == []
        assert seen.take() == [(EventType.DELETED, "/brokers/ids/1"), (EventType.CHILD, "/brokers/ids")]
        assert lost == [SessionState.LOST]


def test_broker_epoch_is_the_registration_czxid_and_grows(store: MetadataStore) -> None:
    store.ensure_path("/brokers/ids")
    first = store.create("/brokers/ids/0", b"{}", ephemeral=True)
    epoch1 = store.get(first)[1].czxid
    store.delete(first)
    store.create("/brokers/ids/0", b"{}", ephemeral=True)
    assert store.get(first)[1].czxid > epoch1


def test_ephemerals_do_not_survive_a_crash(tmp_path: Path) -> None:
    directory = tmp_path / "meta"
    # A real crash: the child process exits without closing anything.
    script = (
        "import os, sys\n"
        "from sofakafka.controller.embedded import EmbeddedMetadataStore\n"
        "s = EmbeddedMetadataStore.open(sys.argv[1])\n"
        "s.create('/brokers/ids/0', b'{}', ephemeral=True, makepath=True)\n"
        "s.create('/keep', b'k')\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(directory)], check=True, timeout=120)
    with EmbeddedMetadataStore.open(directory) as reopened:
        assert reopened.get_children("/brokers/ids") == []
        assert reopened.get("/keep")[0] == b"k"
        ids = reopened.exists("/brokers/ids")
        assert ids is not None and ids.cversion == 2


def test_a_failed_journal_write_is_not_applied_and_leaves_no_torn_frame(tmp_path: Path) -> None:
    directory = tmp_path / "meta"
    # A real write failure: the child caps its file size (RLIMIT_FSIZE) so the append fails half-way.
    script = (
        "import os, resource, signal, sys\n"
        "from sofakafka.controller.embedded import EmbeddedMetadataStore\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "s = EmbeddedMetadataStore.open(sys.argv[1])\n"
        "s.create('/before', b'1')\n"
        "journal = max(p for p in os.listdir(sys.argv[1]) if p.startswith('journal.'))\n"
        "size = os.path.getsize(os.path.join(sys.argv[1], journal))\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (size + 20, hard))\n"
        "try:\n"
        "    s.create('/refused', b'x' * 1000)\n"
        "    sys.exit('the write should have failed')\n"
        "except OSError:\n"
        "    pass\n"
        "assert s.exists('/refused') is None\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))\n"
        "s.create('/after', b'2')\n"
        "s.close()\n"
    )
    subprocess.run([sys.executable, "-c", script, str(directory)], check=True, timeout=120)
    with EmbeddedMetadataStore.open(directory) as reopened:
        assert reopened.get_children("/") == ["after", "before"]
        assert reopened.get("/after")[0] == b"2"


def test_many_multi_ops_are_journaled_with_one_fsync_and_survive_a_reopen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """multi_many is a group commit: a controller writing the states of a failed broker's thousand partitions pays
    one fsync, not a thousand; each transaction still commits or fails alone. Counted, not timed."""
    directory = tmp_path / "meta"
    with EmbeddedMetadataStore.open(directory, snapshot_interval_ops=100_000) as store:
        store.create("/p")
        fsyncs: list[int] = []
        real_fsync = os.fsync

        def counting_fsync(fd: int) -> None:
            fsyncs.append(fd)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", counting_fsync)
        outcomes = store.multi_many([[CreateOp(f"/p/{i}", b"%d" % i)] for i in range(50)]
                                    + [[CreateOp("/p/0")], [SetDataOp("/p", b"x", 0)],
                                       [CheckOp("/p", 0), CreateOp("/p/late")]])
        monkeypatch.setattr(os, "fsync", real_fsync)
        assert len(fsyncs) == 1
        assert all(isinstance(o, list) for o in outcomes[:50])
        assert isinstance(outcomes[50], NodeExistsError) and outcomes[50].op_index == 0
        assert isinstance(outcomes[51], list)
        assert isinstance(outcomes[52], BadVersionError) and outcomes[52].op_index == 0  # /p was set by then
    with EmbeddedMetadataStore.open(directory) as reopened:
        assert len(reopened.get_children("/p")) == 50 and reopened.get("/p")[0] == b"x"
        assert reopened.get("/p/49")[0] == b"49"


def test_a_second_process_cannot_open_the_same_directory(tmp_path: Path) -> None:
    with EmbeddedMetadataServer.open(tmp_path / "meta", fsync=False):
        with pytest.raises(StoreInUseError):
            EmbeddedMetadataServer.open(tmp_path / "meta", fsync=False)


# ---------------------------------------------------------------------------------------------- watches


def test_watches_are_one_shot_and_typed(store: MetadataStore) -> None:
    seen = Recorder()
    assert store.exists("/w", watch=seen) is None
    store.create("/w", b"1")
    store.get("/w", watch=seen)
    store.get_children("/w", watch=seen)
    store.set("/w", b"2")
    store.set("/w", b"3")
    store.create("/w/c")
    store.create("/w/d")
    store.sync()
    assert seen.take() == [(EventType.CREATED, "/w"), (EventType.CHANGED, "/w"), (EventType.CHILD, "/w")]


def test_failed_reads_leave_no_watch(store: MetadataStore) -> None:
    seen = Recorder()
    with pytest.raises(NoNodeError):
        store.get("/x", watch=seen)
    with pytest.raises(NoNodeError):
        store.get_children("/x", watch=seen)
    store.create("/x")
    store.sync()
    assert seen.take() == []


def test_a_failing_multi_fires_nothing(store: MetadataStore) -> None:
    seen = Recorder()
    store.exists("/a", watch=seen)
    with pytest.raises(NoNodeError):
        store.multi([CreateOp("/a"), DeleteOp("/missing")])
    store.sync()
    assert seen.take() == []


def test_callbacks_run_off_the_caller_thread_and_may_call_the_store(store: MetadataStore) -> None:
    threads: list[str] = []
    reads: list[bytes] = []

    def on_change(event: WatchedEvent) -> None:
        threads.append(threading.current_thread().name)
        reads.append(store.get(event.path)[0])

    store.create("/n", b"1")
    store.get("/n", watch=on_change)
    store.set("/n", b"2")
    store.sync()
    assert reads == [b"2"]
    assert threads and threads[0] != threading.current_thread().name


def test_a_raising_callback_does_not_stop_delivery(store: MetadataStore, caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: WatchedEvent) -> None:
        raise RuntimeError("boom")

    seen = Recorder()
    store.create("/n")
    store.get("/n", watch=broken)
    store.exists("/n", watch=seen)
    store.set("/n", b"x")
    store.sync()
    assert seen.take() == [(EventType.CHANGED, "/n")]
    assert "watch callback failed" in caplog.text


# ------------------------------------------------------------------------------------------ durability


def dump(store: MetadataStore, path: str = "/") -> dict[str, tuple[bytes, int, int, int]]:
    """Every persistent znode's data, version, cversion and czxid."""
    result: dict[str, tuple[bytes, int, int, int]] = {}
    data, stat = store.get(path)
    if stat.ephemeral_owner == 0:
        result[path] = (data, stat.version, stat.cversion, stat.czxid)
    for child in store.get_children(path):
        result.update(dump(store, (path if path != "/" else "") + "/" + child))
    return result


def test_state_survives_reopen_across_snapshots(tmp_path: Path) -> None:
    directory = tmp_path / "meta"
    with EmbeddedMetadataStore.open(directory, snapshot_interval_ops=4) as store:
        for i in range(11):
            store.create(f"/n{i}", str(i).encode())
            store.set(f"/n{i}", b"v" + str(i).encode())
        store.delete("/n3")
        before = dump(store)
    files = sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))
    assert len([f for f in files if f.startswith("snapshot.")]) == 1
    assert len([f for f in files if f.startswith("journal.")]) == 1
    with EmbeddedMetadataStore.open(directory, snapshot_interval_ops=4) as store:
        assert dump(store) == before
        store.create("/after")
    with EmbeddedMetadataStore.open(directory) as store:
        assert set(dump(store)) == set(before) | {"/after"}


def test_a_corrupt_snapshot_is_detected_not_silently_emptied(tmp_path: Path) -> None:
    directory = tmp_path / "meta"
    with EmbeddedMetadataStore.open(directory, snapshot_interval_ops=2, fsync=False) as store:
        for i in range(5):
            store.create(f"/n{i}")
    snapshot = next(p for p in directory.iterdir() if p.name.startswith("snapshot."))
    raw = bytearray(snapshot.read_bytes())
    raw[-3] ^= 0xFF
    snapshot.write_bytes(bytes(raw))
    with pytest.raises(StoreCorruptedError):
        EmbeddedMetadataServer.open(directory)


def test_crash_between_snapshot_and_journal_switch_recovers(tmp_path: Path) -> None:
    directory = tmp_path / "meta"
    with EmbeddedMetadataStore.open(directory, snapshot_interval_ops=1000) as store:
        for i in range(5):
            store.create(f"/n{i}", b"x")
        before = dump(store)
    saved = tmp_path / "saved"
    shutil.copytree(directory, saved)
    # Take a snapshot (which removes the old journal), then put the old journal back: the state a crash
    # right after the snapshot's rename leaves.
    with EmbeddedMetadataStore.open(directory, snapshot_interval_ops=1) as store:
        store.create("/n5")
        before = dump(store)
    for journal in saved.glob("journal.*"):
        shutil.copy(journal, directory / journal.name)
    with EmbeddedMetadataStore.open(directory) as store:
        assert dump(store) == before


def _run_ops(store: MetadataStore, ops: list[tuple[str, int, bytes]]) -> None:
    for kind, n, data in ops:
        path = f"/n{n}"
        try:
            if kind == "create":
                store.create(path, data)
            elif kind == "set":
                store.set(path, data)
            elif kind == "delete":
                store.delete(path)
            elif kind == "seq":
                store.create("/n", data, sequence=True)
            else:
                store.multi([CreateOp(path + "m", data), SetDataOp(path + "m", data + b"!"), CreateOp(path + "m/c")])
        except StoreError:
            pass


_crash_ops = st.lists(
    st.tuples(st.sampled_from(["create", "set", "delete", "seq", "multi"]), st.integers(0, 4), st.binary(max_size=40)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(ops=_crash_ops, cuts=st.lists(st.floats(0, 1), min_size=1, max_size=5), garbage=st.binary(max_size=12))
def test_a_journal_cut_anywhere_recovers_every_fully_written_op(
    tmp_path: Path, ops: list[tuple[str, int, bytes]], cuts: list[float], garbage: bytes
) -> None:
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    directory = base / "meta"
    # After each acknowledged op: the journal's size, and the tree it stands for.
    checkpoints: list[tuple[int, dict[str, tuple[bytes, int, int, int]]]] = []
    with EmbeddedMetadataStore.open(directory, snapshot_interval_ops=10_000) as store:
        journal = next(directory.glob("journal.*"))
        checkpoints.append((journal.stat().st_size, dump(store)))
        for op in ops:
            _run_ops(store, [op])
            checkpoints.append((journal.stat().st_size, dump(store)))
    full = journal.read_bytes()
    for fraction in cuts:
        cut = int(fraction * len(full))
        trial = base / f"cut{cut}"
        shutil.rmtree(trial, ignore_errors=True)
        shutil.copytree(directory, trial)
        (trial / journal.name).write_bytes(full[:cut] + garbage)
        expected = [tree for size, tree in checkpoints if size <= cut][-1]
        with EmbeddedMetadataStore.open(trial) as recovered:
            assert dump(recovered) == expected
            # The torn tail is gone: new writes land after the last good record and survive.
            recovered.create("/after-crash", b"ok")
        with EmbeddedMetadataStore.open(trial) as again:
            after = dump(again)
            assert {k: v for k, v in after.items() if k not in ("/", "/after-crash")} == {
                k: v for k, v in expected.items() if k != "/"
            }
            assert after["/"][2] == expected["/"][2] + 1
            assert again.get("/after-crash")[0] == b"ok"
    shutil.rmtree(base)


# -------------------------------------------------------------------------------------- state machine


@dataclass
class ModelNode:
    data: bytes
    version: int = 0
    cversion: int = 0
    owner: int | None = None
    """Index of the owning session for ephemerals."""


@dataclass
class Model:
    nodes: dict[str, ModelNode] = field(default_factory=lambda: {"/": ModelNode(b"")})

    def copy(self) -> Model:
        return Model({p: ModelNode(n.data, n.version, n.cversion, n.owner) for p, n in self.nodes.items()})

    def children(self, path: str) -> list[str]:
        prefix = "/" if path == "/" else path + "/"
        return sorted(p[len(prefix) :] for p in self.nodes if p != path and p.startswith(prefix) and "/" not in p[len(prefix) :])


def _parent(path: str) -> str:
    return path.rpartition("/")[0] or "/"


def _join(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent) + "/" + name


class StoreMachine(RuleBasedStateMachine):
    """Drives a real embedded store and a dict model with the same calls; they must always agree."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="sofakafka-store-"))
        self.directory = self.tmp / "meta"
        self.server = EmbeddedMetadataServer.open(self.directory, snapshot_interval_ops=5, fsync=False)
        self.model = Model()
        self.sessions: list[MetadataStore | None] = []
        self.recorders: list[Recorder] = []
        # (session index, path) -> kind of watch pending: "data" and/or "child"
        self.watches: set[tuple[int, str, str]] = set()
        self.expected: list[list[tuple[EventType, str]]] = []
        self._new_session()

    def teardown(self) -> None:
        self.server.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- helpers

    def _new_session(self) -> None:
        self.sessions.append(self.server.connect())
        self.recorders.append(Recorder())
        self.expected.append([])

    def _open_sessions(self) -> list[int]:
        return [i for i, s in enumerate(self.sessions) if s is not None]

    def _expect_change(self, kind: str, path: str) -> None:
        """Record the events the model says this committed change must fire, and consume the watches."""
        parent = _parent(path)
        for index in self._open_sessions():
            events: list[tuple[EventType, str]] = []
            if kind == "create":
                if (index, path, "data") in self.watches:
                    events.append((EventType.CREATED, path))
                if (index, parent, "child") in self.watches:
                    events.append((EventType.CHILD, parent))
                self.watches -= {(index, path, "data"), (index, parent, "child")}
            elif kind == "set":
                if (index, path, "data") in self.watches:
                    events.append((EventType.CHANGED, path))
                self.watches -= {(index, path, "data")}
            else:
                if (index, path, "data") in self.watches or (index, path, "child") in self.watches:
                    events.append((EventType.DELETED, path))
                if (index, parent, "child") in self.watches:
                    events.append((EventType.CHILD, parent))
                self.watches -= {(index, path, "data"), (index, path, "child"), (index, parent, "child")}
            self.expected[index] += events

    def _apply(self, model: Model, op: Op, session: int, changes: list[tuple[str, str]]) -> object:
        """Model semantics of one op; raises the error class the store must raise."""
        if isinstance(op, CreateOp):
            parent = _parent(op.path)
            if parent not in model.nodes:
                raise NoNodeError("")
            if model.nodes[parent].owner is not None:
                raise NoChildrenForEphemeralsError("")
            path = f"{op.path}{model.nodes[parent].cversion:010d}" if op.sequence else op.path
            if path in model.nodes:
                raise NodeExistsError("")
            model.nodes[path] = ModelNode(op.data, owner=session if op.ephemeral else None)
            model.nodes[parent].cversion += 1
            changes.append(("create", path))
            return path
        if op.path not in model.nodes:
            raise NoNodeError("")
        node = model.nodes[op.path]
        if isinstance(op, SetDataOp | DeleteOp | CheckOp) and op.version not in (-1, node.version):
            raise BadVersionError("")
        if isinstance(op, SetDataOp):
            node.data, node.version = op.data, node.version + 1
            changes.append(("set", op.path))
            return node.version
        if isinstance(op, DeleteOp):
            if model.children(op.path):
                raise NotEmptyError("")
            del model.nodes[op.path]
            model.nodes[_parent(op.path)].cversion += 1
            changes.append(("delete", op.path))
            return None
        return None

    def _expect(self, session: int, ops: list[Op]) -> tuple[Model, list[tuple[str, str]], type[StoreError] | None,
                                                              list[object]]:
        """What the model says ``ops`` do: the model after them, the changes, the error or the results."""
        trial = self.model.copy()
        changes: list[tuple[str, str]] = []
        expected_results: list[object] = []
        for op in ops:
            try:
                expected_results.append(self._apply(trial, op, session, changes))
            except StoreError as exc:
                return trial, changes, type(exc), expected_results
        return trial, changes, None, expected_results

    def _check_results(self, ops: list[Op], results: list[object], expected: list[object]) -> None:
        for op, got, want in zip(ops, results, expected, strict=True):
            if isinstance(op, SetDataOp):
                assert isinstance(got, ZnodeStat) and got.version == want
            else:
                assert got == want

    def _run(self, session: int, ops: list[Op]) -> None:
        store = self.sessions[session]
        assert store is not None
        trial, changes, expected_error, expected_results = self._expect(session, ops)
        if expected_error is not None:
            with pytest.raises(expected_error):
                store.multi(ops)
            return
        self._check_results(ops, list(store.multi(ops)), expected_results)
        self.model = trial
        for kind, path in changes:
            self._expect_change(kind, path)

    # --- strategies drawn inside rules

    def _draw_path(self, data: st.DataObject, existing: bool) -> str:
        paths = sorted(self.model.nodes)
        if existing:
            return data.draw(st.sampled_from(paths))
        parent = data.draw(st.sampled_from([p for p in paths if p.count("/") < 3] or ["/"]))
        return _join(parent, data.draw(st.sampled_from(["a", "b", "c", "s-"])))

    def _draw_version(self, data: st.DataObject, path: str) -> int:
        current = self.model.nodes[path].version if path in self.model.nodes else 0
        return data.draw(st.sampled_from([-1, current, current + 1]))

    def _draw_op(self, data: st.DataObject) -> Op:
        kind = data.draw(st.sampled_from(["create", "set", "delete", "check"]))
        if kind == "create":
            return CreateOp(self._draw_path(data, False), data.draw(st.binary(max_size=8)), data.draw(st.booleans()), data.draw(st.booleans()))
        path = self._draw_path(data, data.draw(st.booleans()))
        version = self._draw_version(data, path)
        if kind == "set":
            return SetDataOp(path, data.draw(st.binary(max_size=8)), version)
        if kind == "delete":
            return DeleteOp(path, version)
        return CheckOp(path, version)

    def _draw_session(self, data: st.DataObject) -> int:
        return data.draw(st.sampled_from(self._open_sessions()))

    # --- rules

    @precondition(lambda self: self._open_sessions())
    @rule(data=st.data())
    def single_op(self, data: st.DataObject) -> None:
        op = self._draw_op(data)
        assume(not (isinstance(op, DeleteOp) and op.path == "/"))
        self._run(self._draw_session(data), [op])

    @precondition(lambda self: self._open_sessions())
    @rule(data=st.data(), size=st.integers(1, 4))
    def multi_op(self, data: st.DataObject, size: int) -> None:
        ops = [self._draw_op(data) for _ in range(size)]
        assume(not any(isinstance(op, DeleteOp) and op.path == "/" for op in ops))
        self._run(self._draw_session(data), ops)

    @precondition(lambda self: self._open_sessions())
    @rule(data=st.data(), count=st.integers(1, 4))
    def many_multis(self, data: st.DataObject, count: int) -> None:
        """multi_many: each multi-op commits or fails on its own, in order, as if sent one after the other."""
        index = self._draw_session(data)
        store = self.sessions[index]
        assert store is not None
        batches = [[self._draw_op(data) for _ in range(data.draw(st.integers(1, 3)))] for _ in range(count)]
        assume(not any(isinstance(op, DeleteOp) and op.path == "/" for ops in batches for op in ops))
        outcomes = store.multi_many(batches)
        assert len(outcomes) == len(batches)
        for ops, got in zip(batches, outcomes, strict=True):
            trial, changes, expected_error, expected_results = self._expect(index, ops)
            if expected_error is not None:
                assert isinstance(got, expected_error)
                continue
            assert not isinstance(got, StoreError)
            self._check_results(ops, list(got), expected_results)
            self.model = trial
            for kind, path in changes:
                self._expect_change(kind, path)

    @precondition(lambda self: self._open_sessions())
    @rule(data=st.data(), count=st.integers(1, 4))
    def read_many_with_watch(self, data: st.DataObject, count: int) -> None:
        """get_many: data of each existing znode, None for a missing one; a data watch on each either way."""
        index = self._draw_session(data)
        store = self.sessions[index]
        assert store is not None
        paths = [self._draw_path(data, data.draw(st.booleans())) for _ in range(count)]
        for path, got in zip(paths, store.get_many(paths, watch=self.recorders[index]), strict=True):
            node = self.model.nodes.get(path)
            assert (got is None) if node is None else (got is not None and got[0] == node.data)
            self.watches.add((index, path, "data"))

    @precondition(lambda self: self._open_sessions())
    @rule(data=st.data(), kind=st.sampled_from(["get", "exists", "children"]))
    def read_with_watch(self, data: st.DataObject, kind: str) -> None:
        index = self._draw_session(data)
        store = self.sessions[index]
        assert store is not None
        path = self._draw_path(data, data.draw(st.booleans()))
        recorder = self.recorders[index]
        node = self.model.nodes.get(path)
        if kind == "exists":
            stat = store.exists(path, watch=recorder)
            assert (stat is None) == (node is None)
            self.watches.add((index, path, "data"))
        elif node is None:
            with pytest.raises(NoNodeError):
                store.get(path, watch=recorder) if kind == "get" else store.get_children(path, watch=recorder)
        elif kind == "get":
            assert store.get(path, watch=recorder)[0] == node.data
            self.watches.add((index, path, "data"))
        else:
            assert store.get_children(path, watch=recorder) == self.model.children(path)
            self.watches.add((index, path, "child"))

    @precondition(lambda self: len(self.sessions) < 4)
    @rule()
    def open_session(self) -> None:
        self._new_session()

    @precondition(lambda self: self._open_sessions())
    @rule(data=st.data())
    def close_session(self, data: st.DataObject) -> None:
        index = self._draw_session(data)
        store = self.sessions[index]
        assert store is not None
        store.close()
        self.sessions[index] = None
        self.watches = {w for w in self.watches if w[0] != index}
        for path in sorted(p for p, n in self.model.nodes.items() if n.owner == index):
            del self.model.nodes[path]
            self.model.nodes[_parent(path)].cversion += 1
            self._expect_change("delete", path)

    @rule()
    def restart(self) -> None:
        self.server.close()
        self.server = EmbeddedMetadataServer.open(self.directory, snapshot_interval_ops=5, fsync=False)
        for path in sorted(p for p, n in self.model.nodes.items() if n.owner is not None):
            del self.model.nodes[path]
            self.model.nodes[_parent(path)].cversion += 1
        # Closing every session at once races their ephemeral deletions against delivery; nothing to check.
        for recorder in self.recorders:
            recorder.take()
        self.sessions = [None] * len(self.sessions)
        self.watches.clear()
        self.expected = [[] for _ in self.sessions]
        self._new_session()

    # --- invariants

    @invariant()
    def tree_matches_model(self) -> None:
        index = self._open_sessions()[0] if self._open_sessions() else None
        if index is None:
            return
        store = self.sessions[index]
        assert store is not None
        seen: dict[str, ModelNode] = {}

        def walk(path: str) -> None:
            data, stat = store.get(path)
            owner = None
            if stat.ephemeral_owner:
                owner = next(i for i, s in enumerate(self.sessions) if s is not None and s.session_id == stat.ephemeral_owner)
            seen[path] = ModelNode(data, stat.version, stat.cversion, owner)
            assert stat.num_children == len(self.model.children(path))
            for child in store.get_children(path):
                walk(_join(path, child))

        walk("/")
        assert seen == self.model.nodes

    @invariant()
    def watch_events_match_model(self) -> None:
        open_sessions = self._open_sessions()
        if not open_sessions:
            return
        store = self.sessions[open_sessions[0]]
        assert store is not None
        store.sync(timeout=30)
        for index in open_sessions:
            assert self.recorders[index].take() == self.expected[index]
            self.expected[index] = []


StoreMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
test_store_matches_a_dict_model = StoreMachine.TestCase
