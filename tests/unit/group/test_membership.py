"""Join/sync/heartbeat/leave through the coordinator, with Kafka 2.6's codes, on hand-driven time."""

from __future__ import annotations

from sofakafka.broker.group import GroupState
from sofakafka.broker.group.consumer_protocol import decode_assignment, encode_assignment
from sofakafka.protocol.errors import ErrorCode as E
from sofakafka.protocol.messages.describe_groups import DescribeGroupsRequest
from sofakafka.protocol.messages.list_groups import ListGroupsRequest
from tests.unit.group.harness import Harness, consumer_metadata


def stable_group_of_one(h: Harness, group: str = "g") -> tuple[str, int]:
    joined = h.join_new(group)
    assert joined.done()
    r = joined.result()
    assert r.error_code == 0
    assert r.leader == r.member_id
    synced = h.sync(group, r.generation_id, r.member_id, {r.member_id: encode_assignment({"t": [0, 1]})})
    assert synced.done() and synced.result().error_code == 0
    return r.member_id, r.generation_id


def test_first_join_requires_member_id_then_the_member_leads_generation_one() -> None:
    h = Harness()
    first = h.join("g")
    assert first.result().error_code == E.MEMBER_ID_REQUIRED
    assert first.result().member_id.startswith("client-")
    second = h.join("g", first.result().member_id)
    r = second.result()
    assert (r.error_code, r.generation_id, r.protocol_name, r.protocol_type) == (0, 1, "range", "consumer")
    assert [m.member_id for m in r.members] == [r.member_id]
    synced = h.sync("g", 1, r.member_id, {r.member_id: encode_assignment({"t": [0]})}).result()
    assert synced.error_code == 0
    assert decode_assignment(synced.assignment).topic_partitions() == [("t", 0)]
    assert synced.protocol_name == "range"
    assert h.coordinator.groups()["g"].state is GroupState.STABLE


def test_join_v3_has_no_member_id_round_trip_and_v0_uses_session_as_rebalance_timeout() -> None:
    h = Harness()
    r = h.join("g", version=3).result()
    assert r.error_code == 0 and r.generation_id == 1
    h0 = Harness()
    r0 = h0.join("g", version=0, session=5000).result()
    assert r0.error_code == 0
    assert h0.coordinator.groups()["g"].members[r0.member_id].rebalance_timeout_ms == 5000


def test_second_member_triggers_rebalance_that_completes_when_the_first_rejoins() -> None:
    h = Harness()
    m1, gen = stable_group_of_one(h)
    pending = h.join_new("g")
    assert not pending.done()
    assert h.heartbeat("g", gen, m1) == E.REBALANCE_IN_PROGRESS
    rejoin = h.join("g", m1)
    assert rejoin.done() and pending.done()
    leader, follower = rejoin.result(), pending.result()
    assert leader.generation_id == follower.generation_id == gen + 1
    assert leader.leader == m1 == follower.leader
    assert {m.member_id for m in leader.members} == {m1, follower.member_id}
    assert follower.members == []
    # The follower's SyncGroup parks until the leader's assignment is stored.
    fsync = h.sync("g", gen + 1, follower.member_id)
    assert not fsync.done()
    h.sync("g", gen + 1, m1, {m1: encode_assignment({"t": [0]}), follower.member_id: encode_assignment({"t": [1]})})
    assert decode_assignment(fsync.result().assignment).topic_partitions() == [("t", 1)]


def test_member_that_misses_its_session_is_removed_and_the_rest_rebalance() -> None:
    h = Harness()
    m1, gen = stable_group_of_one(h)
    pending = h.join_new("g", session=5000)
    h.join("g", m1, session=5000)
    m2 = pending.result().member_id
    gen = pending.result().generation_id
    h.sync("g", gen, m1, {m1: b"", m2: b""})
    h.time.advance(4000)
    assert h.heartbeat("g", gen, m1) == 0
    h.time.advance(4000)  # m2 said nothing for 8 s > 5 s; m1 heartbeated 4 s ago (but its session is 10 s)
    group = h.coordinator.groups()["g"]
    assert m2 not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", gen, m2) == E.UNKNOWN_MEMBER_ID
    rejoin = h.join("g", m1, session=5000)
    assert rejoin.result().generation_id == gen + 1


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    m1, _ = stable_group_of_one(h)
    newcomer = h.join_new("g", rebalance=20_000)
    assert not newcomer.done()
    for _ in range(5):  # m1 keeps its session alive by heartbeating, but never rejoins
        h.time.advance(5_000)
        assert h.heartbeat("g", 1, m1) == E.REBALANCE_IN_PROGRESS
    h.time.advance(5_000)  # the rebalance timeout (the largest of the members', 30 s) runs out
    r = newcomer.result()
    assert r.error_code == 0 and r.leader == r.member_id and r.generation_id == 2
    assert set(h.coordinator.groups()["g"].members) == {r.member_id}


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    a = h.join_new("g")
    h.time.advance(2000)
    b = h.join_new("g")
    h.time.advance(1500)  # the first delay ran out, but a member arrived during it: wait another period
    assert not a.done() and not b.done()
    h.time.advance(3000)
    assert a.result().generation_id == b.result().generation_id == 1
    assert len(h.coordinator.groups()["g"].members) == 2


def test_session_timeout_outside_broker_bounds_is_refused() -> None:
    h = Harness(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=10_000)
    assert h.join("g", session=5999).result().error_code == E.INVALID_SESSION_TIMEOUT
    assert h.join("g", session=10_001).result().error_code == E.INVALID_SESSION_TIMEOUT


def test_group_max_size_refuses_extra_members() -> None:
    h = Harness(group_max_size=1)
    stable_group_of_one(h)
    assert h.join_new("g").result().error_code == E.GROUP_MAX_SIZE_REACHED


def test_inconsistent_protocols_are_refused() -> None:
    h = Harness()
    stable_group_of_one(h)
    r = h.join_new("g", protocols=[("roundrobin", consumer_metadata(["t"]))]).result()
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join_new("g", protocol_type="connect").result().error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_selection_takes_the_most_preferred_common_assignor() -> None:
    h = Harness()
    meta = consumer_metadata(["t"])
    a = h.join_new("g", protocols=[("roundrobin", meta), ("range", meta)])
    assert a.result().protocol_name == "roundrobin"
    b = h.join_new("g", protocols=[("sticky", meta), ("range", meta)])
    h.join("g", a.result().member_id, protocols=[("roundrobin", meta), ("range", meta)])
    # Only "range" is supported by both.
    assert b.result().protocol_name == "range"


def test_generation_and_member_fencing_on_sync_and_heartbeat() -> None:
    h = Harness()
    m1, gen = stable_group_of_one(h)
    assert h.heartbeat("g", gen + 1, m1) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", gen, "stranger") == E.UNKNOWN_MEMBER_ID
    assert h.sync("g", gen - 1, m1).result().error_code == E.ILLEGAL_GENERATION
    assert h.sync("g", gen, m1, protocol_name="other").result().error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync("g", gen, m1, protocol_name=None).result().error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync("g", gen, m1, protocol_name=None, version=4).result().error_code == 0
    assert h.heartbeat("nope", 1, m1) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("", 1, m1) == E.INVALID_GROUP_ID


def test_follower_rejoining_a_stable_group_unchanged_gets_the_current_generation() -> None:
    h = Harness()
    m1, _ = stable_group_of_one(h)
    p = h.join_new("g")
    h.join("g", m1)
    m2, gen = p.result().member_id, p.result().generation_id
    h.sync("g", gen, m1, {m1: b"", m2: b""})
    again = h.join("g", m2).result()
    assert (again.error_code, again.generation_id, again.members) == (0, gen, [])
    assert h.coordinator.groups()["g"].state is GroupState.STABLE
    # The leader's JoinGroup is how it asks for a new rebalance.
    assert not h.join("g", m1).done()
    assert h.coordinator.groups()["g"].state is GroupState.PREPARING_REBALANCE


def test_leave_group_v0_and_batch_v3() -> None:
    h = Harness()
    m1, _ = stable_group_of_one(h)
    assert h.leave("g", "ghost", version=0).error_code == E.UNKNOWN_MEMBER_ID
    assert h.leave("g", m1, version=1).error_code == 0
    group = h.coordinator.groups()["g"]
    assert group.state is GroupState.EMPTY and group.generation_id == 2
    m1, _ = stable_group_of_one(h)
    r = h.leave("g", m1, version=3)
    assert r.error_code == 0 and [(m.member_id, m.error_code) for m in r.members] == [(m1, 0)]
    r = h.leave("g", "ghost", version=4)
    assert [(m.member_id, m.error_code) for m in r.members] == [("ghost", E.UNKNOWN_MEMBER_ID)]


def test_pending_member_that_never_rejoins_expires_without_holding_up_rebalance() -> None:
    h = Harness()
    m1, _ = stable_group_of_one(h)
    first = h.join("g", session=5000)
    assert first.result().error_code == E.MEMBER_ID_REQUIRED
    assert "g" in h.coordinator.groups() and h.coordinator.groups()["g"].pending_members
    h.time.advance(5000)
    assert not h.coordinator.groups()["g"].pending_members
    assert h.heartbeat("g", 1, m1) == 0


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    h = Harness()
    a = h.join("g", instance="i-a")
    assert a.result().error_code == 0  # static members skip MEMBER_ID_REQUIRED
    a_id = a.result().member_id
    b = h.join("g", instance="i-b")
    assert not b.done()
    h.join("g", a_id, instance="i-a")
    gen = b.result().generation_id
    b_id = b.result().member_id
    h.sync("g", gen, a_id, {a_id: encode_assignment({"t": [0]}), b_id: encode_assignment({"t": [1]})},
           instance="i-a")
    # b restarts: a new JoinGroup with its instance id and no member id.
    rejoin = h.join("g", instance="i-b").result()
    assert rejoin.error_code == 0 and rejoin.generation_id == gen and rejoin.member_id != b_id
    assert h.coordinator.groups()["g"].state is GroupState.STABLE
    synced = h.sync("g", gen, rejoin.member_id, instance="i-b").result()
    assert decode_assignment(synced.assignment).topic_partitions() == [("t", 1)]
    # The old process, if still alive, is fenced.
    assert h.heartbeat("g", gen, b_id, instance="i-b") == E.FENCED_INSTANCE_ID
    assert h.heartbeat("g", gen, a_id, instance="i-a") == 0
    # And the new member id is what a reloaded coordinator knows.
    reloaded = h.reload().groups()["g"]
    assert reloaded.static_members["i-b"] == rejoin.member_id


def test_static_member_missing_a_rebalance_keeps_its_place() -> None:
    h = Harness()
    a = h.join("g", instance="i-a", session=60_000).result()
    h.sync("g", 1, a.member_id, {a.member_id: b""}, instance="i-a")
    dyn = h.join_new("g", session=60_000)
    h.time.advance(30_000)  # i-a never rejoins during the rebalance timeout, but its session lasts
    r = dyn.result()
    assert r.generation_id == 2
    assert a.member_id in h.coordinator.groups()["g"].members


def test_describe_and_list_groups() -> None:
    h = Harness()
    m1, _ = stable_group_of_one(h, "g")
    h.commit("solo", {("t", 0): 5})
    for version in range(6):
        d = h.coordinator.describe_groups(DescribeGroupsRequest(groups=["g", "solo", "none"],
                                                                include_authorized_operations=version >= 3),
                                          version).result()
        d.encode(version)
        g, solo, none = d.groups
        assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
        assert [m.member_id for m in g.members] == [m1]
        assert decode_assignment(g.members[0].member_assignment).topic_partitions() == [("t", 0), ("t", 1)]
        assert (solo.group_state, solo.protocol_type, solo.members) == ("Empty", "", [])
        assert (none.group_state, none.error_code) == ("Dead", 0)
    for version in range(5):
        r = h.coordinator.list_groups(ListGroupsRequest(states_filter=["Stable"] if version >= 4 else []),
                                      version).result()
        r.encode(version)
        names = sorted(g.group_id for g in r.groups)
        assert names == (["g"] if version >= 4 else ["g", "solo"])


def test_groups_of_partitions_not_owned_answer_not_coordinator_or_loading() -> None:
    h = Harness()
    p = h.coordinator.partition_for("g")
    h.coordinator.unload_partition(p)
    assert h.join("g").result().error_code == E.NOT_COORDINATOR
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): E.NOT_COORDINATOR}
    h.coordinator.begin_loading(p)
    assert h.join("g").result().error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("g", 1, "m") == 0  # loading: heartbeats are answered blindly
    assert h.sync("g", 1, "m").result().error_code == E.REBALANCE_IN_PROGRESS
    h.coordinator.load_partition(p, [])
    assert h.join("g").result().error_code == E.MEMBER_ID_REQUIRED


def test_unloading_a_partition_answers_parked_requests_not_coordinator() -> None:
    h = Harness()
    stable_group_of_one(h)
    newcomer = h.join_new("g")
    h.coordinator.unload_partition(h.coordinator.partition_for("g"))
    assert newcomer.result().error_code == E.NOT_COORDINATOR
    assert "g" not in h.coordinator.groups()


def test_failed_group_write_resets_the_rebalance() -> None:
    h = Harness()
    r = h.join_new("g").result()
    h.log.fail_next = E.NOT_ENOUGH_REPLICAS
    synced = h.sync("g", r.generation_id, r.member_id, {r.member_id: b"x"}).result()
    assert synced.error_code == E.COORDINATOR_NOT_AVAILABLE
    assert h.coordinator.groups()["g"].state is GroupState.PREPARING_REBALANCE


def test_a_repeated_join_answers_the_one_it_replaces() -> None:
    h = Harness()
    m1, _ = stable_group_of_one(h)
    p = h.join_new("g")
    h.join("g", m1)
    m2, gen = p.result().member_id, p.result().generation_id
    h.sync("g", gen, m1, {m1: b"", m2: b""})
    stale = h.join("g", m1)  # the leader asks for a rebalance; m2 has not rejoined yet
    assert not stale.done()
    retry = h.join("g", m1)  # the client gave up on its first JoinGroup and sent another
    assert stale.result().error_code == E.REBALANCE_IN_PROGRESS  # nothing is left waiting forever
    assert not retry.done()
    h.join("g", m2)
    assert (retry.result().error_code, retry.result().generation_id) == (0, gen + 1)


def test_group_max_size_counts_members_awaiting_join_during_a_rebalance() -> None:
    h = Harness(group_max_size=2, group_initial_rebalance_delay_ms=1000)
    a, b = h.join_new("g"), h.join_new("g")
    assert h.join_new("g").result().error_code == E.GROUP_MAX_SIZE_REACHED
    h.time.advance(3000)
    assert a.result().generation_id == b.result().generation_id == 1
    assert len(h.coordinator.groups()["g"].members) == 2
