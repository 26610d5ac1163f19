"""Moving a log between log dirs (AlterReplicaLogDirs): Kafka 2.6's answers, its future-replica layout, the
preferred dir of a replica not created yet, and what a restart finds, including one inside the swap."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from sofakafka.protocol.errors import ErrorCode
from sofakafka.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import (
    InvalidTopicError,
    KafkaStorageError,
    LogDirNotFoundError,
    ReplicaNotAvailableError,
)
from sofakafka.storage.log import Log
from sofakafka.storage.log_manager import LogManager, delete_dir_name
from sofakafka.storage.log_mover import MoveProgress, common_prefix_end, copy_chunk, follow_current, reconcile

from .storage_helpers import make_batch

CONFIG = LogConfig.from_props({"segment.bytes": 4000, "index.interval.bytes": 300, "file.delete.delay.ms": 0})


def manager(tmp_path: Path, *, threads: int | None = 0, config: LogConfig = CONFIG) -> LogManager:
    lm = LogManager([tmp_path / "a", tmp_path / "b"], default_config=config, alter_log_dirs_threads=threads)
    lm.startup()
    return lm


def fill(lg: Log, batches: int, epoch: int = 0) -> list[bytes]:
    out = []
    for i in range(batches):
        buf = make_batch(1 + i % 3, value_size=60, timestamp=1000 + i)
        lg.append_as_leader(buf, epoch)
        out.append(bytes(buf))
    lg.update_high_watermark(lg.log_end_offset)
    return out


def other_dir(lm: LogManager, topic: str = "t", partition: int = 0) -> Path:
    return next(d for d in lm.log_dirs if d != lm.log_dir_of(topic, partition))


def run_move(lm: LogManager, tp: tuple[str, int] = ("t", 0)) -> MoveProgress:
    progress = MoveProgress()
    for _ in range(10_000):
        done, _ = lm.mover.move_once(tp, progress)
        if done:
            return progress
    raise AssertionError("the move never ended")


def test_a_move_copies_the_log_into_a_future_replica_and_swaps_it_in(tmp_path: Path) -> None:
    lm = manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    written = fill(lg, 80)
    source, dest = lm.log_dir_of("t", 0), other_dir(lm)
    assert source is not None
    assert lm.alter_replica_log_dir("t", 0, str(dest)) is True
    future = lm.get_future_log("t", 0)
    assert future is not None and future.is_future and future.dir.parent == dest
    name, _, suffix = future.dir.name.partition(".")
    assert name == "t-0" and len(suffix) == len("0123456789abcdef0123456789abcdef-future")  # Kafka 2.6's name
    assert run_move(lm).swapped
    assert lm.get_future_log("t", 0) is None
    assert lm.log_dir_of("t", 0) == dest and lg.dir == dest / "t-0"
    assert list(lg.iter_batches_bytes()) == written
    assert not any(p.name.startswith("t-0") for p in source.iterdir())  # file.delete.delay.ms 0: gone at once
    first = lg.read(0, 10_000_000).records.read_bytes()  # reads find the new segments (one segment's worth)
    assert first and b"".join(written).startswith(first)
    # The log goes on where it is now.
    lg.append_as_leader(make_batch(2), 1)
    lm.shutdown()
    again = manager(tmp_path)
    back = again.get_log("t", 0)
    assert back is not None and back.dir == dest / "t-0" and back.log_end_offset == lg.log_end_offset
    assert back.leader_epoch_cache.latest_epoch == 1
    again.shutdown()


def test_copier_threads_move_a_log_that_is_appended_to_all_along(tmp_path: Path) -> None:
    lm = manager(tmp_path, threads=None, config=LogConfig.from_props(
        {"segment.bytes": 20_000, "file.delete.delay.ms": 0}))
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 300)
    stop = threading.Event()
    appended: list[tuple[int, bytes]] = []

    def produce() -> None:
        while not stop.is_set():
            buf = make_batch(2, value_size=40)
            appended.append((lg.append_as_leader(buf, 0).first_offset, bytes(buf)))
            lg.update_high_watermark(lg.log_end_offset)
            time.sleep(0.0005)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        dest = other_dir(lm)
        assert lm.alter_replica_log_dir("t", 0, str(dest))
        deadline = time.monotonic() + 30
        while lm.get_future_log("t", 0) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lm.log_dir_of("t", 0) == dest, "the move never completed"
        time.sleep(0.05)  # appends go on after the swap
    finally:
        stop.set()
        producer.join()
    stored = {}
    for data in lg.iter_batches_bytes():
        stored[int.from_bytes(data[:8], "big")] = data
    assert appended and all(stored.get(offset) == data for offset, data in appended)
    lm.shutdown()


def test_kafkas_answers_to_alter_replica_log_dirs(tmp_path: Path) -> None:
    lm = manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 3)
    current = lm.log_dir_of("t", 0)
    assert current is not None
    with pytest.raises(LogDirNotFoundError) as missing:
        lm.alter_replica_log_dir("t", 0, str(tmp_path / "elsewhere"))
    assert missing.value.code == ErrorCode.LOG_DIR_NOT_FOUND
    with pytest.raises(LogDirNotFoundError):
        lm.alter_replica_log_dir("t", 0, "a")  # relative: not how Kafka names a dir
    # The configured form made absolute is accepted, as Kafka's getAbsolutePath comparison does.
    assert lm.alter_replica_log_dir("t", 0, os.path.abspath(str(tmp_path / "a"))) == (current.name != "a")
    lm.alter_replica_log_dir("t", 0, str(current))  # back: nothing moves
    assert lm.get_future_log("t", 0) is None
    # A topic whose future replica's name would exceed 255 bytes (KAFKA-4893): 213 characters fit, 214 do not.
    fits, too_long = "x" * 213, "x" * 214
    with pytest.raises(ReplicaNotAvailableError):
        lm.alter_replica_log_dir(fits, 0, str(current))
    with pytest.raises(InvalidTopicError) as invalid:
        lm.alter_replica_log_dir(too_long, 0, str(current))
    assert invalid.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    with pytest.raises(ReplicaNotAvailableError):
        lm.alter_replica_log_dir(fits[:-1], 10, str(current))  # the partition number counts too: 212 + "-10" fit
    with pytest.raises(InvalidTopicError):
        lm.alter_replica_log_dir(fits, 10, str(current))
    lm.shutdown()


def test_a_replica_not_created_yet_is_created_in_the_dir_asked_for(tmp_path: Path) -> None:
    lm = manager(tmp_path)
    for p in range(3):
        lm.get_or_create_log("busy", p)  # the emptier dir would be the other one
    emptier = min(lm.log_dirs, key=lambda d: sum(1 for c in d.iterdir() if c.is_dir()))
    fuller = next(d for d in lm.log_dirs if d != emptier)
    with pytest.raises(ReplicaNotAvailableError) as not_here:
        lm.alter_replica_log_dir("later", 0, str(fuller))
    assert not_here.value.code == ErrorCode.REPLICA_NOT_AVAILABLE
    assert lm.preferred_log_dir("later", 0) == fuller
    lm.get_or_create_log("later", 0)
    assert lm.log_dir_of("later", 0) == fuller
    assert lm.preferred_log_dir("later", 0) is None  # used once, then forgotten
    lm.shutdown()


def test_moving_to_another_dir_cancels_the_move_under_way(tmp_path: Path) -> None:
    lm = LogManager([tmp_path / "a", tmp_path / "b", tmp_path / "c"], default_config=CONFIG,
                    alter_log_dirs_threads=0)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 20)
    current = lm.log_dir_of("t", 0)
    assert current is not None
    first, second = [d for d in lm.log_dirs if d != current]
    assert lm.alter_replica_log_dir("t", 0, str(first))
    copy = lm.get_future_log("t", 0)
    assert copy is not None and copy_chunk(lg, copy, 300) > 0  # some of it copied
    assert lm.alter_replica_log_dir("t", 0, str(first)) is False  # already on its way there
    assert lm.alter_replica_log_dir("t", 0, str(second))
    assert not any(p.name.endswith("-future") for p in first.iterdir())
    assert run_move(lm).swapped and lm.log_dir_of("t", 0) == second
    assert not lm.cleaner.is_paused(lg.dir) and not lm.cleaner.is_paused(current / "t-0")
    lm.shutdown()


def test_no_move_starts_while_a_dir_is_offline_and_an_offline_dest_is_refused(tmp_path: Path) -> None:
    lm = LogManager([tmp_path / "a", tmp_path / "b", tmp_path / "c"], default_config=CONFIG,
                    alter_log_dirs_threads=0)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 3)
    current = lm.log_dir_of("t", 0)
    others = [d for d in lm.log_dirs if d != current]
    lm.take_dir_offline(others[0], "test")
    with pytest.raises(KafkaStorageError):
        lm.alter_replica_log_dir("t", 0, str(others[0]))
    with pytest.raises(KafkaStorageError):
        lm.alter_replica_log_dir("t", 0, str(others[1]))
    assert lm.get_future_log("t", 0) is None
    lm.shutdown()


def test_a_move_into_a_dir_that_fails_stops_and_the_log_stays_where_it_was(tmp_path: Path) -> None:
    lm = manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 20)
    source, dest = lm.log_dir_of("t", 0), other_dir(lm)
    assert lm.alter_replica_log_dir("t", 0, str(dest))
    lm.take_dir_offline(dest, "test")
    assert lm.get_future_log("t", 0) is None and lm.log_dir_of("t", 0) == source
    assert lm.mover.move_once(("t", 0), MoveProgress()) == (True, 0)
    assert not lm.cleaner.is_paused(lg.dir)
    fill(lg, 1)  # still serving
    lm.shutdown()


def test_a_restart_resumes_the_move_from_the_copy_it_has(tmp_path: Path) -> None:
    lm = manager(tmp_path, config=LogConfig.from_props({"segment.bytes": 1000, "file.delete.delay.ms": 0}))
    lg = lm.get_or_create_log("t", 0)
    written = fill(lg, 60)
    dest = other_dir(lm)
    lm.alter_replica_log_dir("t", 0, str(dest))
    progress = MoveProgress()
    lm.mover.move_once(("t", 0), progress)
    copied = lm.get_future_log("t", 0)
    assert copied is not None and 0 < copied.log_end_offset < lg.log_end_offset
    lm.abandon()  # kill -9
    again = manager(tmp_path)
    future = again.get_future_log("t", 0)
    assert future is not None and future.dir.parent == dest and future.log_end_offset > 0
    assert again.cleaner.is_paused(tmp_path.resolve() / "a" / "t-0") or again.cleaner.is_paused(
        tmp_path.resolve() / "b" / "t-0")
    assert run_move(again).swapped
    back = again.get_log("t", 0)
    assert back is not None and list(back.iter_batches_bytes()) == written and back.dir.parent == dest
    again.shutdown()


def test_a_crash_between_the_swaps_two_renames_is_finished_at_the_next_start(tmp_path: Path) -> None:
    """The current dir was renamed for deletion and the copy had not yet taken its name."""
    lm = manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    written = fill(lg, 40)
    source, dest = lm.log_dir_of("t", 0), other_dir(lm)
    assert source is not None
    lm.alter_replica_log_dir("t", 0, str(dest))
    future = lm.get_future_log("t", 0)
    assert future is not None
    while copy_chunk(lg, future, 500):  # the copier's steps, up to the swap
        pass
    assert future.log_end_offset == lg.log_end_offset
    future.flush()
    lm.abandon()
    os.replace(source / "t-0", source / delete_dir_name("t", 0))
    again = manager(tmp_path)
    back = again.get_log("t", 0)
    assert back is not None and back.dir == dest / "t-0" and again.get_future_log("t", 0) is None
    assert list(back.iter_batches_bytes()) == written
    assert not any(p.name.startswith("t-0") for p in source.iterdir())
    again.shutdown()


def test_the_clean_point_and_the_checkpoints_move_with_the_log(tmp_path: Path) -> None:
    lm = manager(tmp_path, config=LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": 1000,
                                                         "file.delete.delay.ms": 0}))
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 30)
    source, dest = lm.log_dir_of("t", 0), other_dir(lm)
    assert source is not None
    lm.cleaner.update_checkpoint(lg, 7)
    lm.checkpoint_recovery_points()
    lm.alter_replica_log_dir("t", 0, str(dest))
    assert lm.clean_compacted_logs() == 0  # no pass over a log being moved
    run_move(lm)
    assert OffsetCheckpointFile(dest / CLEANER_OFFSET_CHECKPOINT).read() == {("t", 0): 7}
    assert ("t", 0) not in OffsetCheckpointFile(source / CLEANER_OFFSET_CHECKPOINT).read()
    assert ("t", 0) not in OffsetCheckpointFile(source / "recovery-point-offset-checkpoint").read()
    assert OffsetCheckpointFile(dest / "replication-offset-checkpoint").read()[("t", 0)] == lg.high_watermark
    assert not lm.cleaner.is_paused(lg.dir)
    lm.shutdown()


def test_reads_of_the_old_segments_in_flight_during_the_swap_still_read(tmp_path: Path) -> None:
    lm = manager(tmp_path, config=LogConfig.from_props({"segment.bytes": 1000, "file.delete.delay.ms": 60_000}))
    lg = lm.get_or_create_log("t", 0)
    written = fill(lg, 40)
    in_flight = lg.read(0, 10_000_000)  # a fetch that has found its bytes but not read them yet
    lm.alter_replica_log_dir("t", 0, str(other_dir(lm)))
    run_move(lm)
    assert in_flight.records.read_bytes() == b"".join(written)[: in_flight.records.size]
    source = next(d for d in lm.log_dirs if d != lm.log_dir_of("t", 0))
    assert [p.name.endswith("-delete") for p in source.iterdir() if p.name.startswith("t-0")] == [True]
    lm.delete_due_logs()
    assert any(p.name.startswith("t-0") for p in source.iterdir())  # its delay has not passed
    lm.shutdown()  # a clean shutdown removes it
    assert not any(p.name.startswith("t-0") for p in source.iterdir())


def test_deleting_a_partition_being_moved_deletes_both_copies(tmp_path: Path) -> None:
    lm = manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 10)
    lm.alter_replica_log_dir("t", 0, str(other_dir(lm)))
    assert lm.delete_log("t", 0)
    assert lm.get_future_log("t", 0) is None
    assert not any(p.name.startswith("t-0") for d in lm.log_dirs for p in d.iterdir())
    lm.shutdown()


def test_a_log_cut_back_while_it_is_copied_cuts_the_copy_back_before_it_goes_on(tmp_path: Path) -> None:
    """A follower truncating by leader epoch while its log is moved: the copy holds batches the log no longer has,
    and must lose them, even where the log's new batches start exactly where the copy ends."""
    lm = manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    for _ in range(10):
        lg.append_as_leader(make_batch(2, value_size=30), 0)  # offsets 0..19, epoch 0
    lg.update_high_watermark(10)
    lm.alter_replica_log_dir("t", 0, str(other_dir(lm)))
    future = lm.get_future_log("t", 0)
    assert future is not None
    progress = MoveProgress()
    while future.log_end_offset < lg.log_end_offset:
        copy_chunk(lg, future, 100)
    progress.reconciled_at = lg.truncations  # the copier's state: copied all of it at this count
    lm.truncate_to("t", 0, 12)  # the new leader of epoch 1 did not have 12..19
    replacement = []
    for _ in range(4):
        buf = make_batch(2, value_size=31, key_prefix=b"new")
        lg.append_as_leader(buf, 1)  # 12..19 again, the same batch boundaries, other records
        replacement.append(bytes(buf))
    lg.update_high_watermark(lg.log_end_offset)
    for _ in range(100):
        done, _ = lm.mover.move_once(("t", 0), progress)
        if done:
            break
    assert progress.swapped
    stored = list(lg.iter_batches_bytes(12))
    assert stored == replacement


def test_the_copy_follows_the_logs_start(tmp_path: Path) -> None:
    lm = manager(tmp_path, config=LogConfig.from_props({"segment.bytes": 500, "file.delete.delay.ms": 0,
                                                         "retention.ms": -1}))
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 40)
    lm.alter_replica_log_dir("t", 0, str(other_dir(lm)))
    future = lm.get_future_log("t", 0)
    assert future is not None
    while copy_chunk(lg, future, 2000):
        pass
    start = lg.log_segments()[3].base_offset
    assert lg.maybe_increment_log_start_offset(start)
    lg.delete_old_segments()
    follow_current(lg, future)
    assert future.log_start_offset == start and future.high_watermark == lg.high_watermark
    assert future.log_segments()[0].base_offset <= start < future.log_segments()[1].base_offset


def test_the_common_prefix_is_found_by_leader_epoch_as_a_follower_finds_it(tmp_path: Path) -> None:
    """``common_prefix_end`` on two logs as a power failure could leave them: the copy holds an epoch the log lost,
    the log having gone on in its earlier epoch and then a later one. The copy keeps only what both hold (KIP-279's
    rule: the lower of the log's end for the copy's epoch and the copy's end for the log's)."""
    current = Log(tmp_path / "a" / "t-0", CONFIG)
    copy = Log(tmp_path / "b" / "t-0.0123456789abcdef0123456789abcdef-future", CONFIG)
    for _ in range(10):
        current.append_as_leader(make_batch(2), 0)  # epoch 0: 0..19
    current.append_as_leader(make_batch(2), 2)  # epoch 2: 20..21
    for _ in range(5):
        copy.append_as_leader(make_batch(2), 0)  # epoch 0: 0..9
    for _ in range(3):
        copy.append_as_leader(make_batch(2), 1)  # epoch 1: 10..15, which the log does not have
    current.update_high_watermark(current.log_end_offset)
    assert common_prefix_end(current, copy) == 10
    reconcile(current, copy)
    assert copy.log_end_offset == 10
    # Equal epochs: the lower of the two ends.
    assert common_prefix_end(current, copy) == 10
    # A copy whose latest epoch the log never reached (its cache knows no later one): it starts over.
    copy.append_as_leader(make_batch(2), 3)
    assert common_prefix_end(current, copy) is None
    # Nothing in common (the log starts past the copy's end): start over.
    assert current.maybe_increment_log_start_offset(12)
    assert common_prefix_end(current, copy) is None
    current.close()
    copy.close()
