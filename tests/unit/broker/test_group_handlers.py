"""The group APIs over real sockets to an in-process broker, and how ``__consumer_offsets`` is written and read.

What the coordinator decides is tested in tests/unit/group; here: FindCoordinator and topic creation, that
each handler reaches the coordinator at the request's version, that commits land in ``__consumer_offsets``
in Kafka's formats, that a restart (and only what was written) rebuilds them, that transactional records
take effect at their COMMIT marker, and that deleted topics lose their offsets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sofakafka.broker.group.records import (
    GroupMetadataKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_key,
    encode_offset_value,
    partition_for,
)
from sofakafka.broker.offsets_topic import GROUP_METADATA_TOPIC, read_offsets_log
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.create_topics import CreateTopicsRequest
from sofakafka.protocol.messages.delete_topics import DeleteTopicsRequest
from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest
from sofakafka.protocol.messages.heartbeat import HeartbeatRequest
from sofakafka.protocol.messages.join_group import JoinGroupRequest
from sofakafka.protocol.messages.leave_group import LeaveGroupRequest
from sofakafka.protocol.messages.list_groups import ListGroupsRequest
from sofakafka.protocol.messages.metadata import MetadataRequest
from sofakafka.protocol.messages.offset_commit import OffsetCommitRequest
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest
from sofakafka.protocol.messages.sync_group import SyncGroupRequest
from sofakafka.protocol.records import (
    CREATE_TIME,
    MAGIC_V2,
    RecordBatchBuilder,
    build_end_txn_marker,
    decode_records,
    iter_batches,
)
from sofakafka.storage.config import LogConfig
from sofakafka.storage.log import Log
from tests.unit.broker.broker_harness import BrokerThread, Client, running_broker

OFFSETS_PARTITIONS = 4
GROUPS = {"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
          "group.initial.rebalance.delay.ms": "0"}


def wait_until(what: str, check: Any, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def find_coordinator(client: Client, group: str, version: int = 3) -> Any:
    return client.call(FindCoordinatorRequest(key=group), version)


def coordinator_ready(client: Client, group: str = "any") -> Any:
    return wait_until("the coordinator", lambda: (r := find_coordinator(client, group)).error_code == 0 and r)


def create_topic(client: Client, name: str, partitions: int) -> None:
    t = CreateTopicsRequest.CreatableTopic
    resp = client.call(CreateTopicsRequest(topics=[t(name=name, num_partitions=partitions, replication_factor=1)],
                                           timeout_ms=30_000), 5)
    assert resp.topics[0].error_code == ErrorCode.NONE

    def led() -> bool:
        (topic,) = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 9).topics
        return topic.error_code == 0 and all(p.leader_id >= 0 for p in topic.partitions)

    wait_until(f"leaders of {name}", led)


def commit(client: Client, group: str, offsets: dict[tuple[str, int], int], version: int = 8,
           metadata: str = "") -> dict[tuple[str, int], int]:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), offset in offsets.items():
        by_topic.setdefault(topic, []).append(T.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=offset, committed_metadata=metadata))
    resp = client.call(OffsetCommitRequest(group_id=group, topics=[T(name=t, partitions=ps)
                                                                   for t, ps in by_topic.items()]), version)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch_offsets(client: Client, group: str, version: int = 7) -> dict[tuple[str, int], tuple[int, str]]:
    resp = client.call(OffsetFetchRequest(group_id=group, topics=None), version)
    assert resp.error_code == ErrorCode.NONE
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in resp.topics for p in t.partitions}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    with running_broker(tmp_path_factory.mktemp("groups"), GROUPS) as b:
        yield b


@pytest.fixture
def client(broker: BrokerThread) -> Iterator[Client]:
    with Client(broker.port) as c:
        coordinator_ready(c)
        yield c


def test_first_find_coordinator_creates_a_compacted_offsets_topic_and_then_names_this_broker(tmp_path: Path) -> None:
    with running_broker(tmp_path, GROUPS) as b, Client(b.port) as c:
        first = find_coordinator(c, "g", version=1)
        assert (first.error_code, first.node_id, first.host, first.port) == (
            ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
        assert b.broker is not None
        broker = b.broker
        # The creation is in the store when FindCoordinator answers; the metadata cache learns of it through a
        # watch on its own thread, so wait for it rather than race it.
        snap = wait_until("the offsets topic in the metadata cache",
                          lambda: (s := broker.metadata()).topics.get(GROUP_METADATA_TOPIC) and s)
        assert len(snap.topics[GROUP_METADATA_TOPIC].partitions) == OFFSETS_PARTITIONS
        assert snap.topic_config(GROUP_METADATA_TOPIC)["cleanup.policy"] == "compact"
        for version in range(4):
            found = wait_until("the coordinator", lambda v=version: (r := find_coordinator(c, "g", v)).error_code == 0
                               and r)
            assert (found.node_id, found.host, found.port) == (0, "127.0.0.1", b.port)
            if version >= 1:
                assert found.error_message == "NONE"
        (topic,) = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=GROUP_METADATA_TOPIC)]),
                          9).topics
        assert topic.is_internal


def test_too_few_brokers_for_the_offsets_replication_factor_creates_nothing(tmp_path: Path) -> None:
    with running_broker(tmp_path, {"offsets.topic.replication.factor": "2"}) as b, Client(b.port) as c:
        for _ in range(2):
            assert find_coordinator(c, "g").error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert b.broker is not None
        assert GROUP_METADATA_TOPIC not in b.broker.metadata().topics


def test_transaction_coordinators_are_not_available_yet_and_unknown_key_types_are_invalid(client: Client) -> None:
    txn = client.call(FindCoordinatorRequest(key="txn-id", key_type=1), 3)
    assert (txn.error_code, txn.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    other = client.call(FindCoordinatorRequest(key="x", key_type=7), 3)
    assert other.error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", range(9))
def test_commits_of_every_version_are_fetched_back(client: Client, version: int) -> None:
    topic = f"commit-v{version}"
    create_topic(client, topic, 2)
    group = f"commit-group-v{version}"
    assert commit(client, group, {(topic, 0): 5, (topic, 1): 7}, version, metadata="m") == {
        (topic, 0): 0, (topic, 1): 0}
    assert fetch_offsets(client, group) == {(topic, 0): (5, "m"), (topic, 1): (7, "m")}


def test_a_commit_for_a_partition_the_cluster_lacks_is_unknown(client: Client) -> None:
    assert commit(client, "lacking", {("no-such-topic", 0): 1}) == {
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def read_partition(client: Client, partition: int) -> list[tuple[Any, Any, Any]]:
    """(batch header, key, value) of every record in __consumer_offsets-``partition``."""
    t = FetchRequest.FetchableTopic
    resp = client.call(FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 24, topics=[
        t(name=GROUP_METADATA_TOPIC, fetch_partitions=[t.FetchPartition(partition_index=partition, fetch_offset=0,
                                                                         max_bytes=1 << 24)])]), 11)
    p = resp.topics[0].partitions[0]
    assert p.error_code == ErrorCode.NONE
    data = bytes(p.records or b"")
    return [(h, r.key, r.value) for h in iter_batches(data) for r in decode_records(data, h)]


def test_commits_and_rebalances_are_written_in_kafkas_formats(client: Client) -> None:
    topic = "formats"
    create_topic(client, topic, 1)
    group = "formats-group"
    join = client.call(JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                        member_id="", protocol_type="consumer",
                                        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                             metadata=b"sub")]), 4)
    assert join.error_code == ErrorCode.MEMBER_ID_REQUIRED
    member_id = join.member_id
    join = client.call(JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                        member_id=member_id, protocol_type="consumer",
                                        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                             metadata=b"sub")]), 7)
    assert (join.error_code, join.leader, join.protocol_name) == (ErrorCode.NONE, member_id, "range")
    A = SyncGroupRequest.SyncGroupRequestAssignment
    sync = client.call(SyncGroupRequest(group_id=group, generation_id=join.generation_id, member_id=member_id,
                                        protocol_type="consumer", protocol_name="range",
                                        assignments=[A(member_id=member_id, assignment=b"assigned")]), 5)
    assert (sync.error_code, sync.assignment) == (ErrorCode.NONE, b"assigned")
    beat = client.call(HeartbeatRequest(group_id=group, generation_id=join.generation_id, member_id=member_id), 4)
    assert beat.error_code == ErrorCode.NONE
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    committed = client.call(OffsetCommitRequest(
        group_id=group, generation_id=join.generation_id, member_id=member_id,
        topics=[T(name=topic, partitions=[T.OffsetCommitRequestPartition(partition_index=0, committed_offset=42,
                                                                         committed_leader_epoch=0,
                                                                         committed_metadata="meta")])]), 8)
    assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
    M = LeaveGroupRequest.MemberIdentity
    left = client.call(LeaveGroupRequest(group_id=group, members=[M(member_id=member_id)]), 4)
    assert (left.error_code, [m.error_code for m in left.members]) == (ErrorCode.NONE, [ErrorCode.NONE])

    def group_records() -> list[tuple[Any, Any, Any]] | None:
        written = read_partition(client, partition_for(group, OFFSETS_PARTITIONS))
        found = [(h, decode_key(k), v) for h, k, v in written if decode_key(k).group == group]
        # LeaveGroup is answered before the group's Empty state is written, as in Kafka.
        return found if sum(isinstance(k, GroupMetadataKey) for _, k, _ in found) >= 2 else None

    mine = wait_until("the group's records", group_records)
    assert all(h.magic == MAGIC_V2 and h.timestamp_type == CREATE_TIME and not h.is_transactional
               for h, _, _ in mine)
    offsets = [(k, decode_offset_value(v)) for _, k, v in mine if isinstance(k, OffsetKey)]
    assert [(k.topic, k.partition, v.offset, v.metadata, v.leader_epoch) for k, v in offsets] == [
        (topic, 0, 42, "meta", 0)]
    states = [decode_group_value(v) for _, k, v in mine if isinstance(k, GroupMetadataKey)]
    # The completed rebalance (Stable, one member with its assignment), then Empty after the leave.
    assert [(s.generation, [m.member_id for m in s.members]) for s in states] == [
        (join.generation_id, [member_id]), (join.generation_id + 1, [])]
    assert states[0].members[0].assignment == b"assigned"
    listed = client.call(ListGroupsRequest(states_filter=["Empty"]), 4)
    assert (group, "Empty") in [(g.group_id, g.group_state) for g in listed.groups]


def test_restarts_rebuild_the_groups_from_the_log(tmp_path: Path) -> None:
    with running_broker(tmp_path, GROUPS) as b, Client(b.port) as c:
        coordinator_ready(c)
        create_topic(c, "durable", 3)
        assert set(commit(c, "reloaded", {("durable", p): 10 * p for p in range(3)}, metadata="x").values()) == {0}
        assert set(commit(c, "reloaded", {("durable", 1): 11}).values()) == {0}
    with running_broker(tmp_path, GROUPS) as b, Client(b.port) as c:
        coordinator_ready(c, "reloaded")
        # FindCoordinator names this broker while its offsets partition may still be loading, as Kafka's does;
        # a client retries COORDINATOR_LOAD_IN_PROGRESS, and so does this test.
        wait_until("the offsets partition to load", lambda: c.call(
            OffsetFetchRequest(group_id="reloaded", topics=None), 7).error_code
            != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        assert fetch_offsets(c, "reloaded") == {("durable", 0): (0, "x"), ("durable", 1): (11, ""),
                                                ("durable", 2): (20, "x")}


def test_offsets_of_a_deleted_topic_are_tombstoned(client: Client) -> None:
    create_topic(client, "doomed", 1)
    create_topic(client, "kept", 1)
    assert set(commit(client, "deleting", {("doomed", 0): 3, ("kept", 0): 4}).values()) == {0}
    resp = client.call(DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=30_000), 4)
    assert resp.responses[0].error_code == ErrorCode.NONE
    wait_until("the deleted topic's offsets to go",
               lambda: fetch_offsets(client, "deleting") == {("kept", 0): (4, "")})
    written = read_partition(client, partition_for("deleting", OFFSETS_PARTITIONS))
    tombstones = [decode_key(k) for _, k, v in written if v is None]
    assert OffsetKey("deleting", "doomed", 0) in tombstones


def _batch(records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1, transactional: bool = False) -> bytes:
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                           base_sequence=0 if producer_id >= 0 else -1, is_transactional=transactional)
    for i, (k, v) in enumerate(records):
        b.append_record(i, 1_600_000_000_000, k, v)
    return b.build()


def test_loading_applies_transactional_commits_at_their_marker_and_drops_aborted_ones(tmp_path: Path) -> None:
    def offset_record(group: str, offset: int) -> tuple[bytes, bytes]:
        from sofakafka.broker.group.records import OffsetValue
        return (encode_key(OffsetKey(group, "t", 0)),
                encode_offset_value(OffsetValue(offset=offset, metadata="", commit_timestamp=1, expire_timestamp=None,
                                                leader_epoch=-1)))

    lg = Log(tmp_path / f"{GROUP_METADATA_TOPIC}-0", LogConfig.from_props({"cleanup.policy": "compact"}))
    try:
        lg.append_as_leader(bytearray(_batch([offset_record("plain", 1)])), 0)
        lg.append_as_leader(bytearray(_batch([offset_record("txn", 5)], producer_id=7, transactional=True)), 0)
        lg.append_as_leader(bytearray(_batch([offset_record("aborted", 9)], producer_id=8, transactional=True)), 0)
        lg.append_as_leader(bytearray(_batch([offset_record("plain", 2)])), 0)
        lg.append_as_leader(bytearray(build_end_txn_marker(producer_id=8, producer_epoch=0, coordinator_epoch=0,
                                                           commit=False, timestamp=1)), 0)
        lg.append_as_leader(bytearray(build_end_txn_marker(producer_id=7, producer_epoch=0, coordinator_epoch=0,
                                                           commit=True, timestamp=1)), 0)
        lg.append_as_leader(bytearray(_batch([(encode_key(OffsetKey("plain", "t", 0)), None)])), 0)
        lg.maybe_increment_high_watermark(lg.log_end_offset)
        loaded = read_offsets_log(lg, buffer_size=64)  # smaller than a batch: one batch per read
    finally:
        lg.close()
    seen = [(decode_key(k).group, None if v is None else decode_offset_value(v).offset) for k, v in loaded]
    assert seen == [("plain", 1), ("plain", 2), ("txn", 5), ("plain", None)]
