"""A full disk, for real: log directories on a small tmpfs this test mounts (it needs root) and unmounts.

An append that cannot be written fails with KAFKA_STORAGE_ERROR, the directory goes offline (its logs closed,
its partitions refused), nothing acknowledged is lost, and a restart with space recovers every acknowledged
batch. A write through an index mapping never meets a full disk unprepared (that would be a SIGBUS, the end of
the process): blocks are reserved with fallocate first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sofakafka.protocol.errors import ErrorCode
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import KafkaStorageError
from sofakafka.storage.log_manager import LogManager

from .storage_helpers import make_batch

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted (whatever is left in it discarded) at the end."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path: Path, leave: int) -> None:
    """Write a filler file until ``leave`` bytes or fewer are free on ``path``'s filesystem."""
    with open(path, "wb") as f:
        while True:
            st = os.statvfs(path.parent)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                break
            try:
                f.write(b"\0" * min(64 * 1024, free - leave))
                f.flush()
            except OSError:
                break


def test_a_full_disk_fails_the_append_takes_the_dir_offline_and_loses_nothing_acknowledged(
        small_fs: Path, tmp_path: Path) -> None:
    healthy = tmp_path / "healthy"
    config = LogConfig.from_props({"segment.bytes": 256 * 1024, "segment.index.bytes": 64 * 1024})
    manager = LogManager([healthy, small_fs / "logs"], default_config=config)
    manager.startup()
    heard: list[tuple[Path, list[tuple[str, int]]]] = []
    went_offline = threading.Event()

    def listener(d: Path, tps: list[tuple[str, int]]) -> None:
        heard.append((d, tps))
        went_offline.set()

    manager.add_dir_failure_listener(listener)
    full = manager.get_or_create_log("t", 0)  # the emptier dir first: the healthy one ...
    doomed = manager.get_or_create_log("t", 1)  # ... then the small one
    assert doomed.dir.parent == (small_fs / "logs").resolve()
    fill(small_fs / "filler", leave=600 * 1024)
    acknowledged: list[bytes] = []
    error: KafkaStorageError | None = None
    for i in range(10_000):
        buf = make_batch(10, value_size=500, key_prefix=b"%d-" % i)
        try:
            doomed.append_as_leader(buf, 0)
        except KafkaStorageError as exc:
            error = exc
            break
        acknowledged.append(bytes(buf))
        full.append_as_leader(make_batch(1), 0)
    assert error is not None, "the tmpfs never filled up"
    assert error.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert len(acknowledged) > 10
    assert went_offline.wait(10)
    assert heard == [((small_fs / "logs").resolve(), [("t", 1)])]
    assert manager.offline_log_dirs.keys() == {(small_fs / "logs").resolve()}
    assert manager.get_log("t", 1) is None
    assert manager.is_offline("t", 1)
    with pytest.raises(KafkaStorageError):
        manager.get_or_create_log("t", 1)  # never re-created empty somewhere else
    with pytest.raises(KafkaStorageError):
        doomed.append_as_leader(make_batch(1), 0)
    # The healthy directory goes on: appends, new partitions (placed there), checkpoints, a clean shutdown.
    full.append_as_leader(make_batch(1), 0)
    assert manager.get_or_create_log("t", 2).dir.parent == healthy.resolve()
    manager.checkpoint_recovery_points()
    manager.shutdown()
    assert (healthy / ".kafka_cleanshutdown").exists()
    assert not (small_fs / "logs" / ".kafka_cleanshutdown").exists()

    (small_fs / "filler").unlink()  # space again: a restart recovers the offline directory like after a crash
    again = LogManager([healthy, small_fs / "logs"], default_config=config)
    again.startup()
    lg = again.get_log("t", 1)
    assert lg is not None and not again.offline_log_dirs
    assert list(lg.iter_batches_bytes())[: len(acknowledged)] == acknowledged
    lg.append_as_leader(make_batch(1), 0)
    again.shutdown()


def test_an_index_write_on_a_full_disk_is_an_error_not_a_sigbus(small_fs: Path) -> None:
    """In a child process, since a SIGBUS would end it: the preallocated (sparse) index has no block for its
    next page and the disk is full; the append must raise ENOSPC."""
    code = textwrap.dedent(f"""
        import errno, os
        from pathlib import Path
        from sofakafka.storage.index import OffsetIndex
        idx = OffsetIndex(Path({str(small_fs)!r}) / "00000000000000000000.index", 0, 1 << 20)
        idx.resize(1 << 20)
        fd = os.open({str(small_fs / "filler")!r}, os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except OSError:
            os.close(fd)
        try:
            for i in range(1, 200_000):
                idx.append(i, i * 10)
        except OSError as exc:
            print("refused", errno.errorcode[exc.errno], idx.entries)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    assert done.returncode == 0, f"child died with {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.startswith("refused ENOSPC"), done.stdout
