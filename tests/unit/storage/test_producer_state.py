"""ProducerStateManager: idempotence checks, transactions, snapshots in Kafka's layout, restart behaviour."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import crc32c
import pytest

from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.records import (
    BatchHeader,
    RecordBatchBuilder,
    build_end_txn_marker,
    read_batch_header,
)
from sofakafka.storage.producer_state import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    INT32_MAX,
    AppendOrigin,
    CompletedTxn,
    ProducerStateManager,
    decode_snapshot,
    snapshot_file_name,
)
from sofakafka.storage.transaction_index import AbortedTxn

NOW = 1_700_000_000_000


def data_batch(base_offset: int, count: int, *, pid: int = 1, epoch: int = 0, seq: int = 0,
               transactional: bool = False, timestamp: int = NOW) -> BatchHeader:
    builder = RecordBatchBuilder(base_offset=base_offset, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, is_transactional=transactional)
    for i in range(count):
        builder.append_record(base_offset + i, timestamp, b"k%d" % i, b"v")
    header = read_batch_header(builder.build())
    assert header is not None
    return header


def marker(offset: int, *, pid: int = 1, epoch: int = 0, commit: bool = True, coordinator_epoch: int = 0,
           timestamp: int = NOW) -> BatchHeader:
    header = read_batch_header(build_end_txn_marker(producer_id=pid, producer_epoch=epoch,
                                                    coordinator_epoch=coordinator_epoch, commit=commit,
                                                    timestamp=timestamp, base_offset=offset))
    assert header is not None
    return header


def apply_marker(psm: ProducerStateManager, header: BatchHeader, *, commit: bool,
                 coordinator_epoch: int = 0) -> CompletedTxn | None:
    return psm.update(header, CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT,
                      coordinator_epoch=coordinator_epoch)


def error_of(psm: ProducerStateManager, header: BatchHeader, **kw: object) -> ErrorCode | None:
    try:
        psm.check_append(header, **kw)  # type: ignore[arg-type]
    except KafkaError as e:
        return e.code
    return None


# -- idempotence ---------------------------------------------------------------------------------------


def test_in_sequence_batches_are_accepted_and_gaps_refused(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    b0 = data_batch(0, 3, seq=0)
    assert psm.check_append(b0) is None
    psm.update(b0)
    assert error_of(psm, data_batch(3, 2, seq=3)) is None
    assert error_of(psm, data_batch(3, 2, seq=4)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(psm, data_batch(3, 2, seq=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_retried_batch_among_the_last_five_returns_its_original_offsets(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    offset = 100
    for n in range(6):
        b = data_batch(offset, 2, seq=2 * n)
        assert psm.check_append(b) is None
        psm.update(b)
        offset += 2
    # Batches 1..5 are remembered, batch 0 has been pushed out.
    for n in range(1, 6):
        dup = psm.check_append(data_batch(0, 2, seq=2 * n))  # the client's retry carries no broker offsets
        assert dup is not None
        assert (dup.first_offset, dup.last_offset, dup.first_seq, dup.last_seq) == (
            100 + 2 * n, 101 + 2 * n, 2 * n, 2 * n + 1)
    assert error_of(psm, data_batch(0, 2, seq=0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_an_older_epoch_is_fenced_and_a_new_epoch_must_start_at_zero(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 1, epoch=3, seq=0))
    assert error_of(psm, data_batch(1, 1, epoch=2, seq=1)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert error_of(psm, data_batch(1, 1, epoch=4, seq=5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(psm, data_batch(1, 1, epoch=4, seq=0)) is None
    # Coordinator writes (offset commits, markers) are fenced by epoch too but carry no sequence.
    assert error_of(psm, marker(1, epoch=2), origin=AppendOrigin.COORDINATOR,
                    control_type=CONTROL_TYPE_COMMIT) == ErrorCode.INVALID_PRODUCER_EPOCH
    # Replication replays what a leader accepted and checks nothing.
    assert psm.check_append(data_batch(1, 1, epoch=2, seq=9), origin=AppendOrigin.REPLICATION) is None


def test_an_unknown_producer_may_start_at_any_sequence_as_in_kafka_2_6(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    assert psm.check_append(data_batch(0, 1, pid=7, epoch=0, seq=42)) is None


def test_sequences_wrap_past_int32_max(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    b = data_batch(0, 2, seq=INT32_MAX - 1)
    psm.update(b)
    entry = psm.last_entry(1)
    assert entry is not None and entry.last_seq == INT32_MAX
    assert error_of(psm, data_batch(2, 3, seq=0)) is None
    psm.update(data_batch(2, 3, seq=0))
    dup = psm.check_append(data_batch(0, 2, seq=INT32_MAX - 1))
    assert dup is not None and dup.first_offset == 0


def test_non_transactional_write_during_an_open_transaction_is_refused(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 1, seq=0, transactional=True))
    assert error_of(psm, data_batch(1, 1, seq=1)) == ErrorCode.INVALID_TXN_STATE
    assert error_of(psm, data_batch(1, 1, seq=1, transactional=True)) is None


def test_a_marker_from_an_older_coordinator_is_fenced(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 1, transactional=True))
    apply_marker(psm, marker(1), commit=True, coordinator_epoch=5)
    assert error_of(psm, marker(2), origin=AppendOrigin.COORDINATOR, control_type=CONTROL_TYPE_ABORT,
                    coordinator_epoch=4) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert error_of(psm, marker(2), origin=AppendOrigin.COORDINATOR, control_type=CONTROL_TYPE_ABORT,
                    coordinator_epoch=5) is None


def test_batches_without_producer_id_are_not_tracked(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    b = data_batch(0, 4, pid=-1, epoch=-1, seq=-1)
    assert psm.check_append(b) is None
    assert psm.update(b) is None
    assert psm.active_producers == {}
    assert psm.map_end_offset == 4


# -- transactions --------------------------------------------------------------------------------------


def test_first_unstable_offset_follows_open_and_unreplicated_transactions(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 2, pid=1, transactional=True))
    psm.update(data_batch(2, 2, pid=2, transactional=True))
    psm.update(data_batch(4, 2, pid=1, seq=2, transactional=True))
    assert psm.first_unstable_offset() == 0
    completed = apply_marker(psm, marker(6, pid=1), commit=False)
    assert completed == CompletedTxn(1, 0, 6, True)
    # pid 2's transaction from offset 2 is still open: it is the LSO the aborted entry records.
    assert psm.aborted_txn(completed) == AbortedTxn(1, 0, 6, 2)
    assert psm.first_undecided_offset() == 2
    # Decided but not yet below the high watermark: still unstable.
    assert psm.first_unstable_offset() == 0
    psm.on_high_watermark_updated(7)
    assert psm.first_unstable_offset() == 2
    committed = apply_marker(psm, marker(7, pid=2), commit=True)
    assert committed == CompletedTxn(2, 2, 7, False)
    assert psm.last_stable_offset(committed) == 8
    psm.on_high_watermark_updated(8)
    assert psm.first_unstable_offset() is None


class _Watched(dict):  # type: ignore[type-arg]
    """A producer state's transaction table that runs ``on_change`` after every insert and delete, as a fetch on
    another thread may run between any two steps of an append."""

    def __init__(self, items: dict, on_change: object) -> None:  # type: ignore[type-arg]
        super().__init__(items)
        self.on_change = on_change

    def __setitem__(self, key: object, value: object) -> None:
        super().__setitem__(key, value)
        self.on_change()  # type: ignore[operator]

    def __delitem__(self, key: object) -> None:
        super().__delitem__(key)
        self.on_change()  # type: ignore[operator]

    def pop(self, key: object, *default: object) -> object:
        value = super().pop(key, *default)
        self.on_change()  # type: ignore[operator]
        return value


def test_a_completing_marker_never_leaves_its_transaction_out_of_the_first_unstable_offset(tmp_path: Path) -> None:
    """A read_committed fetch computes the LSO from the open and the unreplicated transactions without the log's
    lock: a transaction moving from one to the other must be in one of them at every step, or the LSO jumps to
    the high watermark over aborted data whose index entry is not written yet."""
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 2, pid=1, transactional=True))
    seen: list[int | None] = []

    def look() -> None:
        seen.append(psm.first_unstable_offset())

    psm._ongoing_txns = _Watched(psm._ongoing_txns, look)
    psm._unreplicated_txns = _Watched(psm._unreplicated_txns, look)
    apply_marker(psm, marker(2, pid=1), commit=False)
    assert seen and all(offset == 0 for offset in seen), seen
    psm.on_high_watermark_updated(3)
    assert psm.first_unstable_offset() is None


def test_a_marker_without_data_completes_an_empty_transaction_and_bumps_the_epoch(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 1, epoch=0, seq=0))
    completed = apply_marker(psm, marker(1, epoch=1), commit=False, coordinator_epoch=3)
    assert completed == CompletedTxn(1, 1, 1, True)
    entry = psm.last_entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.coordinator_epoch, entry.is_empty) == (1, 3, True)
    assert psm.last_records_of_active_producers()[1].last_data_offset is None


def test_an_emptied_control_batch_changes_nothing(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 1, transactional=True))
    assert psm.update(marker(1), None) is None
    assert psm.first_unstable_offset() == 0


# -- expiry --------------------------------------------------------------------------------------------


def test_idle_producers_expire_but_not_while_a_transaction_is_open(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    psm.update(data_batch(0, 1, pid=1, timestamp=NOW))
    psm.update(data_batch(1, 1, pid=2, timestamp=NOW, transactional=True))
    psm.remove_expired_producers(NOW + 999)
    assert set(psm.active_producers) == {1, 2}
    psm.remove_expired_producers(NOW + 1000)
    assert set(psm.active_producers) == {2}


def test_default_expiry_is_transactional_id_expiration_ms() -> None:
    assert ProducerStateManager(Path("/nonexistent")).producer_id_expiration_ms == 604_800_000


# -- snapshots -----------------------------------------------------------------------------------------


def test_snapshot_file_matches_kafkas_layout_byte_for_byte(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(10, 3, pid=5, epoch=2, seq=7, timestamp=1234))
    psm.update(data_batch(13, 1, pid=9, epoch=0, seq=0, transactional=True, timestamp=99))
    apply_marker(psm, marker(14, pid=9), commit=True, coordinator_epoch=4)
    psm.update(data_batch(15, 2, pid=9, epoch=0, seq=1, transactional=True, timestamp=100))
    psm.take_snapshot()
    path = tmp_path / "00000000000000000017.snapshot"
    assert snapshot_file_name(17) == path.name
    data = path.read_bytes()
    body = struct.pack(">i", 2)
    body += struct.pack(">qhiqiqiq", 5, 2, 9, 12, 2, 1234, -1, -1)
    body += struct.pack(">qhiqiqiq", 9, 0, 2, 16, 1, 100, 4, 15)
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert [e.producer_id for e in decode_snapshot(data)] == [5, 9]


def test_no_second_snapshot_at_the_same_offset(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 1))
    psm.take_snapshot()
    (tmp_path / snapshot_file_name(1)).unlink()
    psm.take_snapshot()
    assert psm.snapshot_offsets() == []
    psm.update(data_batch(1, 1, seq=1))
    psm.take_snapshot()
    assert psm.snapshot_offsets() == [2]


def test_restart_keeps_idempotence_and_open_transactions(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 2, pid=1, epoch=3, seq=0))
    psm.update(data_batch(2, 2, pid=1, epoch=3, seq=2))
    psm.update(data_batch(4, 1, pid=2, epoch=0, seq=0, transactional=True))
    psm.take_snapshot()

    restarted = ProducerStateManager(tmp_path)
    assert restarted.load(0, 5, NOW) == 5
    assert restarted.map_end_offset == 5
    # Only the last batch survives a snapshot, as in Kafka.
    dup = restarted.check_append(data_batch(0, 2, pid=1, epoch=3, seq=2))
    assert dup is not None and (dup.first_offset, dup.last_offset) == (2, 3)
    assert error_of(restarted, data_batch(5, 1, pid=1, epoch=3, seq=5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(restarted, data_batch(5, 1, pid=1, epoch=3, seq=4)) is None
    assert error_of(restarted, data_batch(5, 1, pid=1, epoch=2, seq=4)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert restarted.first_unstable_offset() == 4
    completed = apply_marker(restarted, marker(5, pid=2), commit=True)
    assert completed == CompletedTxn(2, 4, 5, False)


def test_load_drops_snapshots_outside_the_log_and_asks_for_a_replay(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    for n in range(4):
        psm.update(data_batch(10 * n, 10, seq=10 * n))
        psm.take_snapshot()
    assert psm.snapshot_offsets() == [10, 20, 30, 40]
    restarted = ProducerStateManager(tmp_path)
    # The log now ends at 25 (a torn tail was truncated): replay from the snapshot at 20.
    assert restarted.load(10, 25, NOW) == 20
    assert restarted.snapshot_offsets() == [20]
    entry = restarted.last_entry(1)
    assert entry is not None and entry.last_seq == 19
    for header in [data_batch(20, 5, seq=20)]:
        restarted.update(header)
    restarted.update_map_end_offset(25)
    restarted.take_snapshot()
    assert restarted.snapshot_offsets() == [20, 25]


def test_load_without_snapshots_replays_from_the_log_start(tmp_path: Path) -> None:
    assert ProducerStateManager(tmp_path).load(7, 100, NOW) == 7


def test_load_skips_producers_that_expired_while_the_broker_was_down(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    psm.update(data_batch(0, 1, pid=1, timestamp=NOW))
    psm.update(data_batch(1, 1, pid=2, timestamp=NOW + 5000))
    psm.take_snapshot()
    restarted = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    restarted.load(0, 2, NOW + 5500)
    assert set(restarted.active_producers) == {2}


@pytest.mark.parametrize("damage", ["flip_entry_byte", "truncate", "bad_version", "empty"])
def test_corrupt_snapshot_is_deleted_and_an_older_one_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 5, seq=0))
    psm.take_snapshot()
    psm.update(data_batch(5, 5, seq=5))
    psm.take_snapshot()
    latest = tmp_path / snapshot_file_name(10)
    data = bytearray(latest.read_bytes())
    if damage == "flip_entry_byte":
        data[-3] ^= 0xFF
    elif damage == "truncate":
        data = data[:-5]
    elif damage == "bad_version":
        data[1] = 2
    else:
        data = bytearray()
    latest.write_bytes(bytes(data))

    restarted = ProducerStateManager(tmp_path)
    with caplog.at_level(logging.WARNING, logger="sofakafka.storage.producer_state"):
        replay_from = restarted.load(0, 10, NOW)
    assert replay_from == 5
    assert not latest.exists()
    assert any("corrupt producer snapshot" in r.getMessage() for r in caplog.records)
    entry = restarted.last_entry(1)
    assert entry is not None and entry.last_seq == 4


def test_truncate_to_reloads_from_the_last_snapshot_below(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.load(0, 0, NOW)
    psm.update(data_batch(0, 5, seq=0))
    psm.take_snapshot()
    psm.update(data_batch(5, 5, seq=5, transactional=True))
    psm.take_snapshot()
    assert psm.first_unstable_offset() == 5
    assert psm.truncate_to(7) == 5
    assert psm.snapshot_offsets() == [5]
    assert psm.first_unstable_offset() is None
    entry = psm.last_entry(1)
    assert entry is not None and entry.last_seq == 4


def test_truncate_fully_and_start_at_forgets_everything(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 5, seq=0, transactional=True))
    psm.take_snapshot()
    psm.truncate_fully_and_start_at(500)
    assert psm.active_producers == {}
    assert psm.snapshot_offsets() == []
    assert psm.map_end_offset == 500
    assert psm.first_unstable_offset() is None


def test_truncate_head_deletes_older_snapshots_but_keeps_producers(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    for n in range(3):
        psm.update(data_batch(10 * n, 10, seq=10 * n))
        psm.take_snapshot()
    psm.truncate_head(25)
    assert psm.snapshot_offsets() == [30]
    assert 1 in psm.active_producers
    psm.delete_snapshots_before(31)
    assert psm.snapshot_offsets() == []


def test_truncate_head_remembers_the_newest_snapshot_left(tmp_path: Path) -> None:
    """After the head moves past the oldest snapshot, the newest one left still counts as taken: a snapshot at
    the same map end is not written again."""
    psm = ProducerStateManager(tmp_path)
    for n in range(3):
        psm.update(data_batch(10 * n, 10, seq=10 * n))
        psm.take_snapshot()
    psm.truncate_head(15)
    assert psm.snapshot_offsets() == [20, 30]
    newest = tmp_path / snapshot_file_name(30)
    newest.write_bytes(b"left alone")
    psm.take_snapshot()
    assert newest.read_bytes() == b"left alone"


def test_load_deletes_the_temporary_file_of_an_interrupted_snapshot(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 10, seq=0))
    psm.take_snapshot()
    stale = tmp_path / (snapshot_file_name(20) + ".tmp")
    stale.write_bytes(b"torn")
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 10, 0) == 10
    assert not stale.exists()
    assert fresh.snapshot_offsets() == [10]
    assert 1 in fresh.active_producers
