"""A hypothesis state machine drives one group through random client behaviour and checks Kafka's invariants.

Clients are slots (one process each; two of them static members with their own instance id) that join, sync,
heartbeat, commit, leave, crash and restart, while time jumps, appends fail and the coordinator reloads from
its log. After every step:

* one leader per generation: every successful JoinGroup of a generation names the same leading process (a
  generation lost with a coordinator move before it reached the log is forgotten: its number is reused);
* every partition is assigned to at most one client within a generation (assignments are decoded from the
  consumer protocol bytes SyncGroup hands out);
* the selected protocol is one every member of the generation offered;
* offsets never move unless a commit was acknowledged: OffsetFetch equals a model updated only by successful
  commits (members commit forward, "reset" commits of an Empty group may move them anywhere), and DeleteGroups
  clears them;
* replaying the log rebuilds the same state: a coordinator loaded from the written records has the same
  offsets and, for a Stable or Empty group whose last metadata write succeeded, the same generation,
  protocol, leader, members and assignments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sofakafka.broker.group import GroupState, OffsetsRecord
from sofakafka.broker.group.consumer_protocol import decode_assignment, encode_assignment
from sofakafka.broker.group.records import GroupMetadataKey, decode_key
from sofakafka.broker.group.runtime import Completion
from sofakafka.protocol.errors import ErrorCode as E
from sofakafka.protocol.messages.delete_groups import DeleteGroupsRequest
from sofakafka.protocol.messages.join_group import JoinGroupResponse
from sofakafka.protocol.messages.sync_group import SyncGroupResponse
from tests.unit.group.harness import Harness, MemoryLog, consumer_metadata

GROUP = "g"
TOPIC = "t"
PARTITIONS = 6
SLOTS = 4
STATIC = {0: "static-0", 1: "static-1"}
META = consumer_metadata([TOPIC])
PROTOCOL_CHOICES = [[("range", META)], [("roundrobin", META), ("range", META)]]


class TrackingLog(MemoryLog):
    """Remembers whether the group's last metadata write failed: the live group then differs from the log."""

    def __init__(self) -> None:
        super().__init__()
        self.group_diverged = False

    def append(self, partition: int, records: Sequence[OffsetsRecord], done: Callable[[E], None]) -> None:
        writes_group = any(isinstance(decode_key(r.key), GroupMetadataKey) for r in records)
        failing = self.fail_next is not None
        super().append(partition, records, done)
        if writes_group:
            self.group_diverged = failing


@dataclass
class Client:
    slot: int
    instance: str | None
    protocols: list[tuple[str, bytes]] = field(default_factory=lambda: PROTOCOL_CHOICES[0])
    member_id: str = ""
    generation: int = -1
    joined: JoinGroupResponse | None = None
    join: Completion[JoinGroupResponse] | None = None
    sync: Completion[SyncGroupResponse] | None = None

    def forget(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.joined = None
        self.join = None
        self.sync = None


class GroupMachine(RuleBasedStateMachine):
    INITIAL_DELAY_MS = 0

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(group_initial_rebalance_delay_ms=self.INITIAL_DELAY_MS, group_min_session_timeout_ms=1000)
        self.h.log = TrackingLog()
        self.h.coordinator = self.h.new_coordinator()
        for p in range(3):
            self.h.coordinator.load_partition(p, [])
        self.clients = [Client(i, STATIC.get(i)) for i in range(SLOTS)]
        self.leaders: dict[int, int] = {}
        self.slot_of: dict[str, int] = {}
        # JoinGroups of crashed processes: nobody reads their answers, but the member they create may lead.
        self.ghost_joins: list[tuple[int, Completion[JoinGroupResponse]]] = []
        self.owners: dict[int, dict[int, int]] = {}
        self.offsets: dict[int, int] = {}
        self._synced: dict[int, int] = {}

    @property
    def log(self) -> TrackingLog:
        assert isinstance(self.h.log, TrackingLog)
        return self.h.log

    # --- answers the clients receive

    def _forget(self, c: Client) -> None:
        if c.join is not None:
            self.ghost_joins.append((c.slot, c.join))
        c.forget()

    def _drain(self) -> None:
        progressed = True
        while progressed:
            progressed = False
            # Learn every new member id first, a crashed process's included: answers name each other as leader.
            pending = [(c.slot, c.join) for c in self.clients if c.join is not None] + self.ghost_joins
            for slot, join in pending:
                if join.done() and join.result().member_id:
                    self.slot_of[join.result().member_id] = slot
            self.ghost_joins = [(slot, join) for slot, join in self.ghost_joins if not join.done()]
            for c in self.clients:
                if c.join is not None and c.join.done():
                    response, c.join = c.join.result(), None
                    self._on_join(c, response)
                    progressed = True
                if c.sync is not None and c.sync.done():
                    sresponse, c.sync = c.sync.result(), None
                    self._on_sync(c, sresponse)
                    progressed = True

    def _on_join(self, c: Client, r: JoinGroupResponse) -> None:
        if r.member_id:
            self.slot_of[r.member_id] = c.slot
        if r.error_code == E.NONE:
            # Leaders are processes (slots): a restarted static leader keeps leading under a new member id.
            leader_slot = self.slot_of[r.leader]
            leader = self.leaders.setdefault(r.generation_id, leader_slot)
            assert leader == leader_slot, f"generation {r.generation_id} has two leaders: slots {leader}, {leader_slot}"
            assert r.protocol_name in [name for name, _ in c.protocols]
            if r.leader == r.member_id:
                assert r.member_id in {m.member_id for m in r.members}
            else:
                assert r.members == []
            c.member_id, c.generation, c.joined = r.member_id, r.generation_id, r
        elif r.error_code == E.MEMBER_ID_REQUIRED:
            c.member_id = r.member_id
        elif r.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            self._forget(c)
        else:
            c.joined = None

    def _on_sync(self, c: Client, r: SyncGroupResponse) -> None:
        if r.error_code == E.NONE:
            assert c.joined is not None
            self._synced[c.slot] = c.joined.generation_id
            owners = self.owners.setdefault(c.joined.generation_id, {})
            for topic, partition in decode_assignment(r.assignment).topic_partitions():
                assert topic == TOPIC
                holder = owners.setdefault(partition, c.slot)
                assert holder == c.slot, (
                    f"partition {partition} of generation {c.joined.generation_id} given to slots {holder} "
                    f"and {c.slot}")
        elif r.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            self._forget(c)
        else:
            c.joined = None

    # --- rules

    @rule(slot=st.integers(0, SLOTS - 1), protocols=st.integers(0, len(PROTOCOL_CHOICES) - 1),
          version=st.sampled_from([4, 5, 7]))
    def join(self, slot: int, protocols: int, version: int) -> None:
        c = self.clients[slot]
        if c.join is not None:
            return
        if c.member_id == "":
            c.protocols = PROTOCOL_CHOICES[protocols]
        c.join = self.h.join(GROUP, c.member_id, instance=c.instance, protocols=c.protocols, session=10_000,
                             rebalance=15_000, version=version if c.instance is None else 7)
        self._drain()

    @rule(slot=st.integers(0, SLOTS - 1))
    def sync(self, slot: int) -> None:
        c = self.clients[slot]
        if c.joined is None or c.sync is not None or c.join is not None:
            return
        assignments: dict[str, bytes] = {}
        if c.joined.leader == c.member_id:
            members = sorted(m.member_id for m in c.joined.members)
            for i, m in enumerate(members):
                assignments[m] = encode_assignment({TOPIC: list(range(i, PARTITIONS, len(members)))})
        c.sync = self.h.sync(GROUP, c.generation, c.member_id, assignments, instance=c.instance,
                             protocol_name=c.joined.protocol_name)
        self._drain()

    @rule(slot=st.integers(0, SLOTS - 1))
    def heartbeat(self, slot: int) -> None:
        c = self.clients[slot]
        if c.member_id == "":
            return
        error = self.h.heartbeat(GROUP, c.generation, c.member_id, instance=c.instance)
        if error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            self._forget(c)
        elif error in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
            c.joined = None  # time to rejoin

    @rule(protocols=st.integers(0, len(PROTOCOL_CHOICES) - 1))
    def everyone_takes_their_next_step(self, protocols: int) -> None:
        """What well-behaved consumers do next, all at once, so the group actually converges now and then."""
        for c in self.clients:
            if c.join is not None or c.sync is not None:
                continue
            if c.joined is None:
                self.join(c.slot, protocols, 7)
            elif c.generation != self._synced.get(c.slot):
                self.sync(c.slot)
            else:
                self.heartbeat(c.slot)

    @rule(slot=st.integers(0, SLOTS - 1))
    def leave(self, slot: int) -> None:
        c = self.clients[slot]
        if c.member_id == "":
            return
        self.h.leave(GROUP, c.member_id, instance=c.instance)
        self._drain()
        self._forget(c)

    @rule(slot=st.integers(0, SLOTS - 1))
    def crash(self, slot: int) -> None:
        """The process dies silently: its parked requests are never read and it stops heartbeating."""
        self._forget(self.clients[slot])

    @rule(slot=st.sampled_from(sorted(STATIC)))
    def restart_static_member(self, slot: int) -> None:
        """KIP-345: a static member's process restarts and joins again with its instance id and no member id."""
        self.crash(slot)
        self.join(slot, 0, 7)

    @rule(slot=st.integers(0, SLOTS - 1), partition=st.integers(0, PARTITIONS - 1), step=st.integers(0, 50))
    def commit(self, slot: int, partition: int, step: int) -> None:
        c = self.clients[slot]
        if c.member_id == "":
            return
        offset = self.offsets.get(partition, 0) + step
        errors = self.h.commit(GROUP, {(TOPIC, partition): offset}, generation=c.generation,
                               member_id=c.member_id, instance=c.instance)
        if errors[(TOPIC, partition)] == E.NONE:
            self.offsets[partition] = offset

    @rule(partition=st.integers(0, PARTITIONS - 1), offset=st.integers(0, 1000))
    def reset_offset(self, partition: int, offset: int) -> None:
        errors = self.h.commit(GROUP, {(TOPIC, partition): offset})
        if errors[(TOPIC, partition)] == E.NONE:
            self.offsets[partition] = offset

    @rule()
    def delete_group(self) -> None:
        r = self.h.coordinator.delete_groups(DeleteGroupsRequest(groups_names=[GROUP]), 2).result()
        if r.results[0].error_code == E.NONE:
            # A deleted group is gone with its generations; a new group of that name starts over.
            self.offsets.clear()
            self.leaders.clear()
            self.owners.clear()

    @rule(ms=st.sampled_from([0, 500, 3000, 7000, 12_000]))
    def advance(self, ms: int) -> None:
        self.h.time.advance(ms)
        self._drain()

    @rule(error=st.sampled_from([E.NOT_ENOUGH_REPLICAS, E.REQUEST_TIMED_OUT, E.NOT_LEADER_OR_FOLLOWER]))
    def fail_next_append(self, error: E) -> None:
        self.log.fail_next = error

    @rule()
    def move_coordinator(self) -> None:
        """The offsets partition moves (or the broker restarts): a new coordinator loads the log."""
        fresh = self.h.reload()
        self.h.coordinator.shutdown()
        self._drain()
        self.h.coordinator = fresh
        # A generation that never reached the log is lost with the coordinator, and its number will be
        # handed out again (as in Kafka): the invariants hold per generation the log knows.
        loaded = fresh.groups().get(GROUP)
        persisted = 0 if loaded is None else loaded.generation_id
        for per_generation in (self.leaders, self.owners):
            for generation in [g for g in per_generation if g > persisted]:
                del per_generation[generation]

    # --- invariants

    @invariant()
    def offsets_are_the_acknowledged_commits(self) -> None:
        fetched = self.h.fetch(GROUP, None)
        assert fetched == {(TOPIC, p): (o, "m") for p, o in self.offsets.items()}

    @invariant()
    def stable_group_has_a_leader_among_its_members(self) -> None:
        group = self.h.coordinator.groups().get(GROUP)
        if group is not None and group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            assert group.leader_id in group.members
            assert group.protocol_name is not None
            for m in group.members.values():
                assert group.protocol_name in m.protocol_names()

    @invariant()
    def replaying_the_log_rebuilds_the_state(self) -> None:
        fresh = self.h.reload()
        live = self.h.coordinator.groups().get(GROUP)
        loaded = fresh.groups().get(GROUP)
        live_offsets = {} if live is None else live.offsets
        assert live_offsets == ({} if loaded is None else loaded.offsets)
        if (live is not None and live.state in (GroupState.STABLE, GroupState.EMPTY)
                and live.generation_id > 0 and not self.log.group_diverged):
            assert loaded is not None
            assert (loaded.generation_id, loaded.protocol_name, loaded.state) == (
                live.generation_id, live.protocol_name, live.state)
            assert {m.member_id: (m.group_instance_id, m.assignment) for m in loaded.members.values()} == {
                m.member_id: (m.group_instance_id, m.assignment) for m in live.members.values()}
            if live.members:
                assert (loaded.leader_id, loaded.protocol_type) == (live.leader_id, live.protocol_type)
        fresh.shutdown()


class DelayedGroupMachine(GroupMachine):
    """The same with Kafka's default group.initial.rebalance.delay.ms, so new groups wait for their members."""

    INITIAL_DELAY_MS = 3000


GroupMachine.TestCase.settings = settings(stateful_step_count=60, deadline=None)
DelayedGroupMachine.TestCase.settings = settings(stateful_step_count=60, deadline=None)
test_group_coordinator_invariants = GroupMachine.TestCase
test_group_coordinator_invariants_with_initial_rebalance_delay = DelayedGroupMachine.TestCase
