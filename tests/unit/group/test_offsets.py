"""Committed offsets: commit/fetch by version, fencing, the log as the source of truth, expiry and deletion."""

from __future__ import annotations

import pytest

from sofakafka.broker.group import GroupCoordinator, GroupState
from sofakafka.broker.group.consumer_protocol import encode_assignment
from sofakafka.broker.group.coordinator import wrap_int64
from sofakafka.broker.group.records import GroupMetadataKey, OffsetKey, decode_key, decode_offset_value
from sofakafka.protocol.errors import ErrorCode as E
from sofakafka.protocol.messages.delete_groups import DeleteGroupsRequest
from sofakafka.protocol.messages.offset_commit import OffsetCommitRequest
from sofakafka.protocol.messages.offset_delete import OffsetDeleteRequest
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest
from tests.unit.group.harness import PARTITIONS, Harness

T0 = ("t", 0)
T1 = ("t", 1)


def member_of_stable_group(h: Harness, group: str = "g", topics: tuple[str, ...] = ("t",)) -> tuple[str, int]:
    r = h.join_new(group, topics=topics).result()
    assert h.sync(group, r.generation_id, r.member_id, {r.member_id: encode_assignment({"t": [0]})}).result().error_code == 0
    return r.member_id, r.generation_id


def keep_alive(h: Harness, ms: int, group: str, generation: int, member_id: str) -> None:
    """Let time pass the way it does for a live consumer: heartbeating well within its session."""
    for _ in range(ms // 5000):
        h.time.advance(5000)
        assert h.heartbeat(group, generation, member_id) == 0
    h.time.advance(ms % 5000)


def test_standalone_commit_and_fetch_at_every_version() -> None:
    for version in range(9):
        h = Harness()
        assert h.commit("g", {T0: 10, T1: 20}, version=version) == {T0: 0, T1: 0}
        for fetch_version in range(8):
            assert h.fetch("g", [T0, T1, ("u", 0)], version=fetch_version) == {
                T0: (10, "m"), T1: (20, "m"), ("u", 0): (-1, "")}
        assert h.fetch("g", None, version=7) == {T0: (10, "m"), T1: (20, "m")}


def test_null_metadata_is_stored_as_empty_and_leader_epoch_kept_from_v6() -> None:
    h = Harness()
    h.commit("g", {T0: 1}, metadata=None)
    assert h.fetch("g", [T0]) == {T0: (1, "")}
    c = h.coordinator.offset_fetch(OffsetFetchRequest(group_id="g", topics=None), 7).result()
    assert c.topics[0].partitions[0].committed_leader_epoch == 3


def test_metadata_over_the_limit_is_refused_per_partition() -> None:
    h = Harness(offset_metadata_max_bytes=4)
    assert h.commit("g", {T0: 1}, metadata="12345") == {T0: E.OFFSET_METADATA_TOO_LARGE}
    assert h.fetch("g", [T0]) == {T0: (-1, "")}


def test_failed_append_is_not_visible_and_maps_the_error() -> None:
    h = Harness()
    h.commit("g", {T0: 1})
    for append_error, answer in [
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
        (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE),
        (E.REQUEST_TIMED_OUT, E.REQUEST_TIMED_OUT),
    ]:
        h.log.fail_next = append_error
        assert h.commit("g", {T0: 99}) == {T0: answer}
        assert h.fetch("g", [T0]) == {T0: (1, "m")}


def test_an_offset_is_visible_only_once_the_log_acknowledged_it() -> None:
    h = Harness()
    parked: list[tuple[int, list[object], object]] = []
    h.coordinator = GroupCoordinator(h.config, h.time, h.time, type("W", (), {
        "append": lambda self, p, records, done: parked.append((p, list(records), done))})())
    for p in range(PARTITIONS):
        h.coordinator.load_partition(p, [])
    request = OffsetCommitRequest(group_id="g", topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
        name="t", partitions=[OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=7)])])
    c = h.coordinator.offset_commit(request, 8)
    assert not c.done()
    assert h.fetch("g", [T0]) == {T0: (-1, "")}
    parked[0][2](E.NONE)  # type: ignore[operator]
    assert c.result().topics[0].partitions[0].error_code == 0
    assert h.fetch("g", [T0]) == {T0: (7, "")}


def test_member_commits_are_fenced_by_generation_and_member_id() -> None:
    h = Harness()
    m, gen = member_of_stable_group(h)
    assert h.commit("g", {T0: 5}, generation=gen, member_id=m) == {T0: 0}
    assert h.commit("g", {T0: 6}, generation=gen + 1, member_id=m) == {T0: E.ILLEGAL_GENERATION}
    assert h.commit("g", {T0: 6}, generation=gen, member_id="x") == {T0: E.UNKNOWN_MEMBER_ID}
    assert h.commit("g", {T0: 6}) == {T0: E.UNKNOWN_MEMBER_ID}  # standalone commits only into an Empty group
    assert h.commit("other", {T0: 6}, generation=3, member_id="x") == {T0: E.ILLEGAL_GENERATION}
    assert h.fetch("g", [T0]) == {T0: (5, "m")}
    # While the next generation is being assigned, commits are told to wait for the rebalance.
    newcomer = h.join_new("g")
    assert h.commit("g", {T0: 7}, generation=gen, member_id=m) == {T0: 0}  # PreparingRebalance: allowed
    h.join("g", m)
    assert newcomer.done()
    assert h.commit("g", {T0: 8}, generation=gen + 1, member_id=m) == {T0: E.REBALANCE_IN_PROGRESS}


def test_static_member_commit_with_stale_instance_owner_is_fenced() -> None:
    h = Harness()
    r = h.join("g", instance="i").result()
    h.sync("g", 1, r.member_id, {r.member_id: b""}, instance="i")
    h.join("g", instance="i")  # a second process with the same instance id takes over
    assert h.commit("g", {T0: 1}, generation=1, member_id=r.member_id, instance="i", version=7) == {
        T0: E.FENCED_INSTANCE_ID}


def test_reload_rebuilds_offsets_and_group_from_the_log() -> None:
    h = Harness()
    m, gen = member_of_stable_group(h)
    h.commit("g", {T0: 5}, generation=gen, member_id=m)
    h.commit("g", {T0: 6}, generation=gen, member_id=m)
    h.commit("solo", {T1: 9})
    fresh = h.reload()
    g = fresh.groups()["g"]
    assert (g.state, g.generation_id, g.protocol_name, g.leader_id) == (GroupState.STABLE, gen, "range", m)
    assert g.members[m].assignment == encode_assignment({"t": [0]})
    assert h.fetch("g", [T0], coordinator=fresh) == {T0: (6, "m")}
    assert h.fetch("solo", [T1], coordinator=fresh) == {T1: (9, "m")}
    assert fresh.groups()["solo"].state is GroupState.EMPTY


def test_loaded_members_must_heartbeat_within_their_session() -> None:
    h = Harness()
    m, gen = member_of_stable_group(h)
    fresh = h.reload()
    h.coordinator = fresh
    h.time.advance(6000)
    assert h.heartbeat("g", gen, m) == 0  # still a member after the move
    h.time.advance(10_001)
    assert m not in fresh.groups()["g"].members


def test_empty_group_offsets_expire_after_retention_from_when_it_became_empty() -> None:
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    h.coordinator.start()
    m, gen = member_of_stable_group(h)
    h.commit("g", {T0: 5}, generation=gen, member_id=m)
    keep_alive(h, 50_000, "g", gen, m)
    h.leave("g", m)
    assert h.coordinator.groups()["g"].state is GroupState.EMPTY
    h.time.advance(50_000)  # 100 s after the commit, but only 50 s after the group became empty
    assert h.fetch("g", [T0]) == {T0: (5, "m")}
    h.time.advance(20_000)
    assert "g" not in h.coordinator.groups()
    assert h.fetch("g", [T0]) == {T0: (-1, "")}
    assert h.reload().groups() == {}
    h.coordinator.shutdown()


def test_consumer_group_offsets_of_unsubscribed_topics_expire_while_members_stay() -> None:
    h = Harness(offsets_retention_minutes=1)
    m, gen = member_of_stable_group(h, topics=("t",))
    h.commit("g", {T0: 5, ("gone", 0): 3}, generation=gen, member_id=m)
    keep_alive(h, 60_000, "g", gen, m)
    assert h.coordinator.expire_offsets() == 1
    assert h.fetch("g", None) == {T0: (5, "m")}


def test_explicit_retention_of_commit_v2_expires_at_its_own_time() -> None:
    h = Harness()
    request = OffsetCommitRequest(group_id="g", generation_id=-1, retention_time_ms=1000, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=4)])])
    assert h.coordinator.offset_commit(request, 2).result().topics[0].partitions[0].error_code == 0
    written = [v for p in h.log.partitions.values() for _, v in p]
    assert written[-1] is not None and written[-1][:2] == b"\x00\x01"  # value v1 carries the expiry
    assert decode_offset_value(written[-1]).expire_timestamp == h.time.now_ms() + 1000
    h.time.advance(999)
    assert h.coordinator.expire_offsets() == 0
    h.time.advance(1)
    assert h.coordinator.expire_offsets() == 1


def test_a_retention_time_near_2_63_wraps_as_a_java_long_and_expires_at_the_next_sweep() -> None:
    # Found by the fuzzer: now + retention overflowed int64 and the encoder's error reached the connection.
    # 2.6 adds two longs, the sum wraps to a past time, and the sweep drops the offset.
    h = Harness()
    request = OffsetCommitRequest(group_id="g", generation_id=-1, retention_time_ms=2**63 - 1, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=4)])])
    assert h.coordinator.offset_commit(request, 2).result().topics[0].partitions[0].error_code == 0
    written = [v for p in h.log.partitions.values() for _, v in p]
    now = h.time.now_ms()
    assert decode_offset_value(written[-1]).expire_timestamp == now + 2**63 - 1 - 2**64
    assert h.fetch("g", None) == {T0: (4, "")}
    assert h.coordinator.expire_offsets() == 1
    assert h.fetch("g", None) == {}


@pytest.mark.parametrize("n, java", [(2**63 - 1, 2**63 - 1), (2**63, -2**63), (-2**63, -2**63),
                                     (-2**63 - 1, 2**63 - 1), (0, 0)])
def test_wrap_int64_is_java_long_arithmetic(n: int, java: int) -> None:
    assert wrap_int64(n) == java


def test_delete_groups_writes_tombstones_and_refuses_live_groups() -> None:
    h = Harness()
    member_of_stable_group(h, "live")
    h.commit("idle", {T0: 1, T1: 2})
    for version in range(3):
        r = h.coordinator.delete_groups(DeleteGroupsRequest(groups_names=["live", "idle", "nope"]), version).result()
        r.encode(version)
        assert {x.group_id: x.error_code for x in r.results} == {
            "live": E.NON_EMPTY_GROUP,
            "idle": 0 if version == 0 else E.GROUP_ID_NOT_FOUND,
            "nope": E.GROUP_ID_NOT_FOUND,
        }
    p = h.coordinator.partition_for("idle")
    tombstones = [decode_key(k) for k, v in h.log.partitions[p] if v is None and k is not None]
    assert set(tombstones) >= {OffsetKey("idle", "t", 0), OffsetKey("idle", "t", 1), GroupMetadataKey("idle")}
    assert "idle" not in h.reload().groups()


def test_offset_delete_refuses_topics_a_consumer_group_subscribes_to() -> None:
    h = Harness()
    m, gen = member_of_stable_group(h, topics=("t",))
    h.commit("g", {T0: 1, ("u", 0): 2}, generation=gen, member_id=m)
    h.coordinator = GroupCoordinator(h.config, h.time, h.time, h.log,
                                     partition_exists=lambda t, p: t != "missing")
    for part in range(PARTITIONS):
        h.coordinator.load_partition(part, list(h.log.partitions[part]))
    request = OffsetDeleteRequest(group_id="g", topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=n, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])
        for n in ("t", "u", "missing")])
    r = h.coordinator.offset_delete(request, 0).result()
    r.encode(0)
    assert r.error_code == 0
    assert {t.name: t.partitions[0].error_code for t in r.topics} == {
        "t": E.GROUP_SUBSCRIBED_TO_TOPIC, "u": 0, "missing": E.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.fetch("g", None) == {T0: (1, "m")}
    r = h.coordinator.offset_delete(OffsetDeleteRequest(group_id="nope", topics=[]), 0).result()
    assert r.error_code == E.GROUP_ID_NOT_FOUND


def test_offsets_of_deleted_topics_are_tombstoned() -> None:
    h = Harness()
    h.commit("g", {T0: 1, ("u", 0): 2})
    h.coordinator.on_topics_deleted(["u"])
    assert h.fetch("g", None) == {T0: (1, "m")}
    assert h.fetch("g", None, coordinator=h.reload()) == {T0: (1, "m")}


def test_offset_fetch_errors_by_version() -> None:
    h = Harness()
    h.coordinator.unload_partition(h.coordinator.partition_for("g"))
    request = OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
        name="t", partition_indexes=[0])])
    old = h.coordinator.offset_fetch(request, 1).result()
    old.encode(1)
    assert old.topics[0].partitions[0].error_code == E.NOT_COORDINATOR
    new = h.coordinator.offset_fetch(request, 2).result()
    new.encode(2)
    assert new.error_code == E.NOT_COORDINATOR and new.topics == []
