from pathlib import Path

import pytest

from sofakafka.protocol.records import iter_batches
from sofakafka.storage.checkpoints import OffsetCheckpointFile
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import LogDirError
from sofakafka.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager

from .storage_helpers import make_batch


def test_reopen_in_a_fresh_log_manager_reads_everything_back_byte_for_byte(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    config = LogConfig.from_props({"segment.bytes": 2000, "index.interval.bytes": 300})
    manager = LogManager(dirs, default_config=config, broker_id=3, cluster_id="abc")
    manager.startup()
    written: dict[tuple[str, int], list[bytes]] = {}
    for topic, partition in [("a", 0), ("a", 1), ("b", 0), ("c.x_y", 7)]:
        log = manager.get_or_create_log(topic, partition)
        for i in range(30):
            buf = make_batch(1 + i % 4, value_size=10 * (i % 7), timestamp=1000 + i)
            log.append_as_leader(buf, i // 10)
            written.setdefault((topic, partition), []).append(bytes(buf))
        log.high_watermark = log.log_end_offset
    stored = {tp: list(manager.get_log(*tp).iter_batches_bytes()) for tp in written}  # type: ignore[union-attr]
    manager.shutdown()
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    # Partitions are spread over both dirs, the emptier one first.
    assert sorted(p.name for p in dirs[0].iterdir() if p.is_dir()) == ["a-0", "b-0"]
    assert sorted(p.name for p in dirs[1].iterdir() if p.is_dir()) == ["a-1", "c.x_y-7"]

    fresh = LogManager(dirs, default_config=config, broker_id=3)
    fresh.startup()
    assert fresh.cluster_id == "abc"
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    for tp, batches in written.items():
        log = fresh.get_log(*tp)
        assert log is not None
        assert list(log.iter_batches_bytes()) == stored[tp] == batches
        assert log.log_end_offset == sum(1 + i % 4 for i in range(30))
        assert log.high_watermark == log.log_end_offset
        assert log.leader_epoch_cache.latest_epoch == 2
        data = b""
        offset = 0
        while offset < log.log_end_offset:
            chunk = log.read(offset, 100_000).records.read_bytes()
            data += chunk
            offset = list(iter_batches(chunk))[-1].last_offset + 1
        assert data == b"".join(batches)
    fresh.shutdown()


def test_log_dir_files_have_kafkas_names_and_formats(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], broker_id=5, cluster_id="cluster-1")
    manager.startup()
    log = manager.get_or_create_log("orders", 2)
    log.append_as_leader(make_batch(3), 0)
    log.high_watermark = 3
    manager.checkpoint_recovery_points()
    manager.checkpoint_log_start_offsets()
    manager.checkpoint_high_watermarks()
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\norders 2 3\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\norders 2 0\n"
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 2 0\n"
    manager.shutdown()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 2 3\n"
    props = (tmp_path / "meta.properties").read_text().splitlines()
    assert "version=0" in props and "broker.id=5" in props and "cluster.id=cluster-1" in props
    assert sorted(p.name for p in (tmp_path / "orders-2").iterdir()) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "00000000000000000003.snapshot", "leader-epoch-checkpoint"]
    assert (tmp_path / "orders-2" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"


def test_meta_properties_mismatch_is_refused(tmp_path: Path) -> None:
    first = LogManager([tmp_path], broker_id=1, cluster_id="x")
    first.startup()
    with pytest.raises(LogDirError, match="locked"):
        LogManager([tmp_path], broker_id=1).startup()  # a second broker on the same dir
    first.shutdown()
    with pytest.raises(LogDirError, match=r"broker\.id"):
        LogManager([tmp_path], broker_id=2).startup()
    with pytest.raises(LogDirError, match=r"cluster\.id"):
        LogManager([tmp_path], broker_id=1, cluster_id="y").startup()


def test_unclean_start_recovers_from_the_recovery_point(tmp_path: Path) -> None:
    config = LogConfig.from_props({"segment.bytes": 500})
    manager = LogManager([tmp_path], default_config=config)
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    for _ in range(10):
        log.append_as_leader(make_batch(2, value_size=50), 0)
    log.flush()
    manager.checkpoint_recovery_points()
    log.append_as_leader(make_batch(2, value_size=50), 0)
    manager.abandon()  # crash: no marker, no trimming
    segment = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    with open(segment, "ab") as f:
        f.write(b"\x00" * 7 + b"\x01" + b"\xff" * 30)
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read() == {("t", 0): 20}
    again = LogManager([tmp_path], default_config=config)
    again.startup()
    recovered = again.get_log("t", 0)
    assert recovered is not None and recovered.log_end_offset == 22
    again.shutdown()


def test_delete_log_renames_dir_with_uuid_delete_suffix_then_removes_it(tmp_path: Path) -> None:
    now = [1_000]
    manager = LogManager([tmp_path], default_config=LogConfig.from_props({"file.delete.delay.ms": 500}),
                         time_ms=lambda: now[0])
    manager.startup()
    manager.get_or_create_log("gone", 0).append_as_leader(make_batch(1), 0)
    assert manager.delete_log("gone", 0)
    assert manager.get_log("gone", 0) is None
    renamed = [p.name for p in tmp_path.iterdir() if p.is_dir()]
    assert len(renamed) == 1
    name = renamed[0]
    assert name.startswith("gone-0.") and name.endswith("-delete") and len(name) == len("gone-0.") + 32 + 7
    manager.cleanup_logs()
    assert (tmp_path / name).exists()
    now[0] += 500
    manager.cleanup_logs()
    assert not (tmp_path / name).exists()
    manager.shutdown()


def test_leftover_delete_dirs_are_removed_at_startup(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.startup()
    manager.get_or_create_log("x", 0).append_as_leader(make_batch(1), 0)
    manager.shutdown()
    (tmp_path / "x-0").rename(tmp_path / "x-0.0123456789abcdef0123456789abcdef-delete")
    again = LogManager([tmp_path])
    again.startup()
    assert again.all_logs == []
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []
    again.shutdown()


def test_cleanup_and_flush_passes_apply_each_logs_config(tmp_path: Path) -> None:
    now = [10_000_000]
    configs = {"short": LogConfig.from_props({"segment.bytes": 300, "retention.ms": 1000, "file.delete.delay.ms": 0,
                                              "flush.ms": 100}),
               "long": LogConfig.from_props({"segment.bytes": 300})}
    manager = LogManager([tmp_path], topic_configs=lambda t: configs[t], time_ms=lambda: now[0])
    manager.startup()
    for topic in configs:
        log = manager.get_or_create_log(topic, 0)
        for _ in range(6):
            log.append_as_leader(make_batch(2, timestamp=now[0]), 0)
        log.high_watermark = log.log_end_offset
    short, long_ = manager.get_log("short", 0), manager.get_log("long", 0)
    assert short is not None and long_ is not None
    short_segments, long_segments = short.number_of_segments, long_.number_of_segments
    assert short_segments > 1
    now[0] += 5_000
    assert manager.flush_dirty_logs() == 1  # only "short" has a flush.ms
    assert short.recovery_point == short.log_end_offset
    moved: list[tuple[str, int]] = []
    assert manager.cleanup_logs(moved) == short_segments - 1  # retention.ms breached; never the active segment
    assert short.number_of_segments == 1
    assert long_.number_of_segments == long_segments and long_.log_start_offset == 0
    # The pass names the logs whose log start it moved (the broker tells their followers' fetch sessions).
    assert moved == [("short", 0)] and short.log_start_offset > 0
    manager.shutdown()


def test_logs_needing_more_mappings_than_vm_max_map_count_are_warned_of_once_per_crossing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Two index mappings per log plus MAP_RESERVE for the rest of the process: a warning the moment that is
    over the kernel's limit (the limit read from /proc is the layer faked here), none at the limit, and again
    after the logs dropped back under it."""
    from sofakafka.storage import log_manager as lm
    from sofakafka.storage import mapping

    limit = 2 * 3 + lm.MAP_RESERVE  # exactly three logs' worth
    monkeypatch.setattr(mapping, "max_map_count", lambda: limit)
    manager = LogManager([tmp_path])
    manager.startup()

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "vm.max_map_count" in r.getMessage()]

    with caplog.at_level("WARNING", logger="sofakafka.storage.log_manager"):
        manager.get_or_create_logs([("t", 0), ("t", 1), ("t", 2)])
        assert warnings() == []  # needed == limit
        manager.get_or_create_logs([("t", 3)])
        assert len(warnings()) == 1  # one over
        assert f"4 logs need about {8 + lm.MAP_RESERVE} memory mappings" in warnings()[0]
        assert f"over vm.max_map_count {limit}" in warnings()[0]
        manager.get_or_create_logs([("t", 4)])
        assert len(warnings()) == 1  # still over: said once
        manager.delete_log("t", 4)
        manager.delete_log("t", 3)  # back at the limit: re-armed
        manager.get_or_create_logs([("t", 3)])
        assert len(warnings()) == 2
    manager.shutdown()

    monkeypatch.setattr(mapping, "max_map_count", lambda: limit - 1)  # the restart holds 4 logs: over
    caplog.clear()
    with caplog.at_level("WARNING", logger="sofakafka.storage.log_manager"):
        again = LogManager([tmp_path])
        again.startup()
        assert len(warnings()) == 1
    again.shutdown()


def test_a_mapping_refused_with_enomem_names_vm_max_map_count(tmp_path: Path) -> None:
    """A real refusal: a child process whose address space is capped just above its use maps 1 GB."""
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "big"
    path.write_bytes(b"")
    code = textwrap.dedent(f"""
        import os, resource
        from sofakafka.storage.mapping import FileMapping, max_map_count
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (used + (64 << 20), resource.RLIM_INFINITY))
        fd = os.open({str(path)!r}, os.O_RDWR)
        os.ftruncate(fd, 1 << 30)
        try:
            FileMapping(fd, 1 << 30)
        except OSError as e:
            print(e.errno, e.strerror, "|", max_map_count())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    errno_, _, rest = out.stdout.strip().partition(" ")
    strerror, _, limit = rest.rpartition(" | ")
    assert int(errno_) == 12, out
    assert strerror.startswith(f"mmap of {1 << 30} bytes failed: Cannot allocate memory (the process may be at "
                               f"vm.max_map_count, {limit}:"), strerror
