"""A group's in-memory state: members, generation, selected protocol, committed offsets, and its state machine.

The states and their allowed transitions are a table (``VALID_PREVIOUS_STATES``), as in Kafka's
GroupMetadata: a transition not in the table is a coordinator bug and raises instead of corrupting a group.

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup stored--> Stable
    Stable | CompletingRebalance --join with new metadata / leave / expiry--> PreparingRebalance
    PreparingRebalance --nobody left--> Empty
    any --DeleteGroups / offsets expired / partition unloaded--> Dead
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sofakafka.broker.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from sofakafka.broker.group.records import OffsetValue
from sofakafka.broker.group.runtime import Cancellable
from sofakafka.protocol.errors import ErrorCode, ProtocolError


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
}


class IllegalStateTransition(RuntimeError):
    """A transition the table forbids: a bug in the coordinator, never a client's doing."""


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a waiting JoinGroup is answered with; the coordinator turns it into a response at its version."""

    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (name, metadata) in the member's order of preference.
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Callable[[JoinResult], None] | None = None
    awaiting_sync: Callable[[SyncResult], None] | None = None
    # New members expire on a long join timeout, not the session timeout: they cannot heartbeat yet.
    is_new: bool = False
    heartbeat_timer: Cancellable | None = None
    # Bumped on every reschedule so a timer that fires after being replaced knows it is stale.
    heartbeat_token: int = 0

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return list(protocols) == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol that everyone supports: its ballot in protocol selection."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    current_state_timestamp: int | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    pending_member_timers: dict[str, Cancellable] = field(default_factory=dict)
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    pending_offset_commits: Counter[tuple[str, int]] = field(default_factory=Counter)
    # TxnOffsetCommit offsets written but not yet decided: producer id -> partition -> offset. A COMMIT marker
    # of the producer in the group's __consumer_offsets partition moves them into ``offsets``, an ABORT drops them.
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetValue]] = field(default_factory=dict)
    subscribed_topics: frozenset[str] | None = None
    # Set while a generation-0 group waits out group.initial.rebalance.delay.ms and someone else joins.
    new_member_added: bool = False
    join_timer: Cancellable | None = None
    join_is_initial_delay: bool = False
    join_token: int = 0

    # --- state machine

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {target.value} is not a valid transition"
            )
        self.state = target
        self.current_state_timestamp = now_ms

    # --- members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id

    def update_member(
        self, member: MemberMetadata, protocols: Sequence[tuple[str, bytes]],
        callback: Callable[[JoinResult], None] | None,
    ) -> None:
        member.supported_protocols = list(protocols)
        if member.awaiting_join is not None and callback is not None:
            # A client re-sent JoinGroup (its first one timed out): answer the stale one so nothing waits
            # on it forever; a client still listening simply rejoins.
            stale, member.awaiting_join = member.awaiting_join, None
            stale(JoinResult(error=ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.awaiting_join = callback

    def remove(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def current_static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """KIP-345: a known instance id with another member id is a duplicate (or stale) instance."""
        registered = self.current_static_member_id(instance_id)
        return registered is not None and registered != member_id

    def replace_static_member(self, old_member_id: str, new_member_id: str, instance_id: str) -> MemberMetadata:
        member = self.members.pop(old_member_id)
        # The old id's pending join/sync must learn it was replaced, or its client would wait forever.
        if member.awaiting_join is not None:
            cb, member.awaiting_join = member.awaiting_join, None
            cb(JoinResult(error=ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id))
        if member.awaiting_sync is not None:
            scb, member.awaiting_sync = member.awaiting_sync, None
            scb(SyncResult(error=ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return member

    def supports_protocols(self, protocol_type: str, protocols: Sequence[str]) -> bool:
        if self.is_state(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        if self.protocol_type != protocol_type:
            return False
        return bool(self._candidate_protocols() & set(protocols)) if self.members else bool(protocols)

    def _candidate_protocols(self) -> set[str]:
        counts: Counter[str] = Counter()
        for m in self.members.values():
            counts.update(set(m.protocol_names()))
        return {name for name, n in counts.items() if n == len(self.members)}

    def select_protocol(self) -> str:
        """Each member votes for its favourite among the protocols all support; most votes wins.

        Kafka breaks ties arbitrarily (a hash map's order); we break them by name so replay and tests are
        deterministic.
        """
        candidates = self._candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: members share no protocol")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return min(votes, key=lambda name: (-votes[name], name))

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics the consumer group subscribes to, or None when unknowable (not the consumer protocol)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        if not self.members:
            return frozenset()
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(decode_subscription(m.metadata(self.protocol_name)).topics)
        except (ProtocolError, KeyError):
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        assert self.protocol_name is not None
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        )

    def maybe_invoke_join(self, member: MemberMetadata, result: JoinResult) -> None:
        if member.awaiting_join is not None:
            cb, member.awaiting_join = member.awaiting_join, None
            cb(result)

    def maybe_invoke_sync(self, member: MemberMetadata, result: SyncResult) -> bool:
        if member.awaiting_sync is not None:
            cb, member.awaiting_sync = member.awaiting_sync, None
            cb(result)
            return True
        return False

    @property
    def protocol_type_or_empty(self) -> str:
        return self.protocol_type or ""

