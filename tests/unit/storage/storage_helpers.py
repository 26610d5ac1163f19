"""Batch builders and a fake clock shared by the storage tests."""

from __future__ import annotations

from sofakafka.protocol.records import (
    ControlRecordType,
    EndTransactionMarker,
    RecordBatchBuilder,
    encode_control_key,
)


def make_batch(count: int, *, timestamp: int = 1_000, value_size: int = 20, producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
               base_offset: int = 0, partition_leader_epoch: int = -1, key_prefix: bytes = b"k",
               compression: int = 0) -> bytearray:
    """A v2 batch of ``count`` records with offsets from ``base_offset`` and increasing timestamps."""
    b = RecordBatchBuilder(base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                           base_sequence=base_sequence, is_transactional=transactional,
                           partition_leader_epoch=partition_leader_epoch, compression=compression)
    for i in range(count):
        b.append_record(base_offset + i, timestamp + i, key_prefix + str(i).encode(),
                        bytes([65 + i % 26]) * value_size)
    return bytearray(b.build())


def make_marker(producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int = 0,
                timestamp: int = 1_000) -> bytearray:
    control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True,
                           is_control=True)
    b.append_record(0, timestamp, encode_control_key(control),
                    EndTransactionMarker(control, coordinator_epoch).encode_value())
    return bytearray(b.build())


class FakeClock:
    """Milliseconds under the test's control, so roll-by-time and retention never depend on real time."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms
