"""Transactional offset commits in the group coordinator: pending until their marker, kept pending over a reload."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from sofakafka.broker.group import GroupConfig, GroupCoordinator, ManualTime, OffsetsRecord
from sofakafka.protocol.errors import ErrorCode as E
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest
from sofakafka.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest

PARTITIONS = 3
PID = 4000


class TxnLog:
    """__consumer_offsets in memory, transactional batches kept apart per producer until a marker decides them,
    the way the loader reads the real log (read_offsets_log_and_pending)."""

    def __init__(self) -> None:
        self.committed: dict[int, list[tuple[bytes | None, bytes | None]]] = defaultdict(list)
        self.pending: dict[int, dict[int, list[tuple[bytes | None, bytes | None]]]] = defaultdict(dict)

    def append(self, partition: int, records: Sequence[OffsetsRecord], done: Callable[[E], None]) -> None:
        self.committed[partition].extend((r.key, r.value) for r in records)
        done(E.NONE)

    def append_transactional(self, partition: int, records: Sequence[OffsetsRecord], producer_id: int,
                             producer_epoch: int, done: Callable[[E], None]) -> None:
        self.pending[partition].setdefault(producer_id, []).extend((r.key, r.value) for r in records)
        done(E.NONE)

    def marker(self, partition: int, producer_id: int, commit: bool) -> None:
        pairs = self.pending[partition].pop(producer_id, [])
        if commit:
            self.committed[partition].extend(pairs)


def coordinator(log: TxnLog) -> GroupCoordinator:
    time = ManualTime()
    c = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=PARTITIONS), time, time, log)
    for p in range(PARTITIONS):
        c.load_partition(p, list(log.committed[p]), dict(log.pending[p]))
    return c


def txn_commit(c: GroupCoordinator, group: str, offset: int, *, member_id: str = "", generation: int = -1,
               version: int = 3) -> int:
    t = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    request = TxnOffsetCommitRequest(transactional_id="t", group_id=group, producer_id=PID, producer_epoch=0,
                                     member_id=member_id, generation_id=generation, topics=[
                                         t(name="in", partitions=[t.TxnOffsetCommitRequestPartition(
                                             partition_index=0, committed_offset=offset)])])
    response = c.txn_offset_commit(request, version).result()
    response.encode(version)
    return int(response.topics[0].partitions[0].error_code)


def fetch(c: GroupCoordinator, group: str, *, stable: bool) -> tuple[int, int]:
    t = OffsetFetchRequest.OffsetFetchRequestTopic
    r = c.offset_fetch(OffsetFetchRequest(group_id=group, topics=[t(name="in", partition_indexes=[0])],
                                          require_stable=stable), 7).result()
    p = r.topics[0].partitions[0]
    return int(p.committed_offset), int(p.error_code)


def test_pending_until_commit_and_gone_at_abort() -> None:
    log = TxnLog()
    c = coordinator(log)
    partition = c.partition_for("g")
    assert txn_commit(c, "g", 10) == E.NONE
    assert fetch(c, "g", stable=False) == (-1, E.NONE)
    assert fetch(c, "g", stable=True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    c.complete_txn_offsets(PID, partition, commit=True)
    assert fetch(c, "g", stable=True) == (10, E.NONE)
    assert txn_commit(c, "g", 20) == E.NONE
    c.complete_txn_offsets(PID, partition, commit=False)
    assert fetch(c, "g", stable=True) == (10, E.NONE)
    # A marker of another partition or another producer settles nothing here.
    assert txn_commit(c, "g", 30) == E.NONE
    c.complete_txn_offsets(PID + 1, partition, commit=True)
    c.complete_txn_offsets(PID, (partition + 1) % PARTITIONS, commit=True)
    assert fetch(c, "g", stable=True) == (-1, E.UNSTABLE_OFFSET_COMMIT)


def test_pending_offsets_survive_a_reload_and_settle_at_the_marker() -> None:
    log = TxnLog()
    c = coordinator(log)
    assert txn_commit(c, "g", 42) == E.NONE
    fresh = coordinator(log)  # the new leader of the offsets partition loads before the marker comes
    assert fetch(fresh, "g", stable=True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    log.marker(fresh.partition_for("g"), PID, commit=True)
    fresh.complete_txn_offsets(PID, fresh.partition_for("g"), commit=True)
    assert fetch(fresh, "g", stable=True) == (42, E.NONE)
    assert fetch(coordinator(log), "g", stable=True) == (42, E.NONE)


def test_a_group_with_only_pending_offsets_is_not_expired() -> None:
    log = TxnLog()
    c = coordinator(log)
    assert txn_commit(c, "g", 1) == E.NONE
    assert c.expire_offsets() == 0
    assert "g" in c.groups()


def test_member_and_generation_checks_of_v3() -> None:
    log = TxnLog()
    c = coordinator(log)
    assert txn_commit(c, "g", 1, member_id="ghost") == E.UNKNOWN_MEMBER_ID
    assert txn_commit(c, "g", 1, generation=2) == E.ILLEGAL_GENERATION
    # Before v3 the request carries neither, so neither is checked.
    assert txn_commit(c, "g", 1, member_id="ghost", generation=2, version=2) == E.NONE
    assert not log.committed[c.partition_for("g")]


def test_an_empty_group_id_is_invalid_and_nothing_is_written() -> None:
    """Unlike OffsetCommit, TxnOffsetCommit has no empty-group form (Kafka 2.6's isValidGroupId; found by
    tests/conformance): every version answers INVALID_GROUP_ID and writes nothing."""
    log = TxnLog()
    c = coordinator(log)
    for version in range(4):
        assert txn_commit(c, "", 10, version=version) == E.INVALID_GROUP_ID
    assert not any(log.pending.values()) and not any(log.committed.values())
