"""GroupCoordinator: Kafka 2.6's group membership protocol and offset storage, as pure logic.

Each request API is one method returning a :class:`Completion` of its response (see the package docstring
for the contract). Membership changes (joins, syncs, expirations) live in memory as Kafka keeps them; what
must survive a coordinator move is written to ``__consumer_offsets`` through the injected writer:

* offsets reach the cache only by replaying the records once the writer acknowledged them, so an unacked
  commit is never visible and loading the log rebuilds exactly what was acknowledged;
* a group metadata record is written when a rebalance completes (leader's SyncGroup), when a group becomes
  Empty and when a static member replaces its member id; deletions write tombstones.

Delayed operations are timers (Scheduler): the rebalance (DelayedJoin / InitialDelayedJoin), each member's
session (DelayedHeartbeat), each pending member's KIP-394 expiry and the offsets retention sweep. Each timer
carries a token and does nothing if it was superseded, so cancellation races cannot remove a live member.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sofakafka.broker.group.metadata import (
    GroupMetadata,
    GroupState,
    IllegalStateTransition,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from sofakafka.broker.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    partition_for,
)
from sofakafka.broker.group.runtime import (
    Cancellable,
    Clock,
    Completion,
    OffsetsRecord,
    RecordWriter,
    Scheduler,
    TransactionalRecordWriter,
)
from sofakafka.protocol.errors import ErrorCode, ProtocolError
from sofakafka.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from sofakafka.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from sofakafka.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from sofakafka.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from sofakafka.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from sofakafka.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from sofakafka.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from sofakafka.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from sofakafka.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from sofakafka.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse

P_ = TypeVar("P_")  # a partition entry of a commit request

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState
INT32_MIN = -(2**31)
# DescribeGroups v3+ with include_authorized_operations and no authorizer: READ(3), DELETE(6), DESCRIBE(8).
ALL_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)

TopicPartition = tuple[str, int]
_FetchPartition = OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition
_DeletePartition = OffsetDeleteResponse.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition
_TxnCommitPartition = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition


class _IntConfig(Protocol):
    def get_int(self, key: str) -> int: ...


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker keys the coordinator obeys, with Kafka 2.6's defaults."""

    offsets_topic_num_partitions: int = 50
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member that never completes its join is dropped.
    new_member_join_timeout_ms: int = 300000

    @classmethod
    def from_config(cls, config: _IntConfig) -> GroupConfig:
        return cls(
            offsets_topic_num_partitions=config.get_int("offsets.topic.num.partitions"),
            group_min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            group_max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            group_initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            group_max_size=config.get_int("group.max.size"),
            offsets_retention_minutes=config.get_int("offsets.retention.minutes"),
            offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
            offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


def wrap_int64(n: int) -> int:
    """``n`` as a Java long holds it: the sum of two longs wraps instead of growing past 2^63 - 1."""
    return (n + (1 << 63)) % (1 << 64) - (1 << 63)


def _store_group_error(error: ErrorCode) -> ErrorCode:
    """GroupMetadataManager.storeGroup's mapping of append errors to what members understand."""
    if error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error is E.REQUEST_TIMED_OUT:
        return E.REBALANCE_IN_PROGRESS
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    return error


def _store_offsets_error(error: ErrorCode) -> ErrorCode:
    """GroupMetadataManager.storeOffsets's mapping: a too-large batch is the commit's fault, not the server's."""
    if error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return error


@dataclass(slots=True)
class _LoadedState:
    groups: dict[str, GroupMetadataValue]
    offsets: dict[str, dict[TopicPartition, OffsetValue]]


def replay_records(records: Iterable[tuple[bytes | None, bytes | None]]) -> _LoadedState:
    """Fold a partition's records (log order) into the last word on each group and offset.

    Undecodable records are skipped with a warning rather than failing the whole partition: one bad record
    must not take every group of the partition offline (Kafka fails the load; we prefer availability).
    """
    state = _LoadedState({}, {})
    for key_bytes, value_bytes in records:
        if key_bytes is None:
            continue
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetKey):
                group_offsets = state.offsets.setdefault(key.group, {})
                if value_bytes is None:
                    group_offsets.pop((key.topic, key.partition), None)
                else:
                    group_offsets[(key.topic, key.partition)] = decode_offset_value(value_bytes)
            elif value_bytes is None:
                state.groups.pop(key.group, None)
            else:
                state.groups[key.group] = decode_group_value(value_bytes)
        except ProtocolError as e:
            log.warning("skipping an undecodable __consumer_offsets record: %s", e)
    return state


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        scheduler: Scheduler,
        writer: RecordWriter,
        partition_count: int | None = None,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._scheduler = scheduler
        self._writer = writer
        self.partition_count = partition_count or config.offsets_topic_num_partitions
        # OffsetCommit/OffsetDelete answer UNKNOWN_TOPIC_OR_PARTITION for partitions the cluster lacks.
        self._partition_exists = partition_exists
        self._groups: dict[str, GroupMetadata] = {}
        self._owned: set[int] = set()
        self._loading: set[int] = set()
        self._active = True
        self._expiry_timer: Cancellable | None = None
        self._token = 0

    # ------------------------------------------------------------------ lifecycle and ownership

    def start(self) -> None:
        self._active = True
        self._schedule_expiry_sweep()

    def shutdown(self) -> None:
        self._active = False
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        for partition in list(self._owned | self._loading):
            self.unload_partition(partition)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def begin_loading(self, partition: int) -> None:
        self._loading.add(partition)

    def load_partition(self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]],
                       pending_txn: Mapping[int, Sequence[tuple[bytes | None, bytes | None]]] | None = None) -> None:
        """``records``: the partition's committed records in the order they take effect; ``pending_txn``: per
        producer id, transactional offset commits with no marker after them yet (still pending)."""
        self._loading.add(partition)
        state = replay_records(records)
        pending: dict[str, dict[int, dict[TopicPartition, OffsetValue]]] = {}
        for producer_id, pairs in (pending_txn or {}).items():
            for group_id, offsets in replay_records(pairs).offsets.items():
                pending.setdefault(group_id, {})[producer_id] = offsets
        now = self._clock.now_ms()
        for group_id in set(state.groups) | {g for g, offs in state.offsets.items() if offs} | set(pending):
            if self.partition_for(group_id) != partition:
                log.warning("group %s found in __consumer_offsets-%d, which is not its partition", group_id, partition)
            old = self._groups.pop(group_id, None)
            if old is not None:
                self._drop_group(old, E.NOT_COORDINATOR)
            group = self._group_from_value(group_id, state.groups.get(group_id), now)
            group.offsets = dict(state.offsets.get(group_id, {}))
            group.pending_txn_offsets = pending.get(group_id, {})
            self._groups[group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
        self._loading.discard(partition)
        self._owned.add(partition)

    def unload_partition(self, partition: int) -> None:
        self._loading.discard(partition)
        self._owned.discard(partition)
        for group_id in [g for g in self._groups if self.partition_for(g) == partition]:
            self._drop_group(self._groups.pop(group_id), E.NOT_COORDINATOR)

    def _group_from_value(self, group_id: str, value: GroupMetadataValue | None, now: int) -> GroupMetadata:
        group = GroupMetadata(group_id)
        if value is None:
            return group
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.current_state_timestamp = None if value.current_state_timestamp < 0 else value.current_state_timestamp
        for m in value.members:
            member = MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                supported_protocols=[(value.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        group.state = S.STABLE if group.members else S.EMPTY
        if group.members and group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def _drop_group(self, group: GroupMetadata, error: ErrorCode) -> None:
        """Forget a group (unloaded or replaced): whoever waits on it is told to find the coordinator again."""
        self._cancel_join_timer(group)
        for member in list(group.members.values()):
            self._cancel_heartbeat(member)
            group.maybe_invoke_join(member, JoinResult(error=error, member_id=member.member_id))
            group.maybe_invoke_sync(member, SyncResult(error=error))
        for timer in group.pending_member_timers.values():
            timer.cancel()
        group.pending_member_timers.clear()
        group.transition_to(S.DEAD, self._clock.now_ms())

    def groups(self) -> dict[str, GroupMetadata]:
        """The live groups, for tests and tools; callers must not mutate them."""
        return self._groups

    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        """None when this coordinator serves ``group_id`` now, else the error a request about it gets
        (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...): for handlers that act on a group outside
        the group APIs (its configs)."""
        return self._validate(group_id, allow_empty_id=False)

    # ------------------------------------------------------------------ common checks

    def _validate(self, group_id: str | None, allow_empty_id: bool) -> ErrorCode | None:
        if group_id is None or (not allow_empty_id and group_id == ""):
            return E.INVALID_GROUP_ID
        if not self._active:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return E.NOT_COORDINATOR
        return None

    def _group_not_exists(self, group_id: str) -> bool:
        group = self._groups.get(group_id)
        return group is None or group.is_state(S.DEAD)

    def _next_token(self) -> int:
        self._token += 1
        return self._token

    def _now(self) -> int:
        return self._clock.now_ms()

    # ------------------------------------------------------------------ writing

    def _append(self, group_id: str, records: Sequence[OffsetsRecord], done: Callable[[ErrorCode], None]) -> None:
        self._append_to(self.partition_for(group_id), records, done)

    def _append_to(self, partition: int, records: Sequence[OffsetsRecord], done: Callable[[ErrorCode], None]) -> None:
        answered = False

        def once(error: ErrorCode) -> None:
            nonlocal answered
            if answered:
                raise RuntimeError("RecordWriter called done twice")
            answered = True
            done(ErrorCode(error))

        self._writer.append(partition, list(records), once)

    def _group_record(self, group: GroupMetadata, assignment: dict[str, bytes]) -> OffsetsRecord:
        protocol = group.protocol_name
        members = tuple(
            MemberValue(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        value = GroupMetadataValue(
            protocol_type=group.protocol_type_or_empty,
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id if group.members else None,
            current_state_timestamp=-1 if group.current_state_timestamp is None else group.current_state_timestamp,
            members=members,
        )
        return OffsetsRecord(encode_key(GroupMetadataKey(group.group_id)), encode_group_value(value))

    def _store_group(
        self, group: GroupMetadata, assignment: dict[str, bytes], callback: Callable[[ErrorCode], None]
    ) -> None:
        record = self._group_record(group, assignment)
        self._append(group.group_id, [record], lambda error: callback(_store_group_error(error)))

    # ------------------------------------------------------------------ timers

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        self._cancel_heartbeat(member)
        token = self._next_token()
        member.heartbeat_token = token
        delay = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self._scheduler.call_later(
            delay, lambda: self._on_heartbeat_expired(group, member, token)
        )

    @staticmethod
    def _cancel_heartbeat(member: MemberMetadata) -> None:
        member.heartbeat_token = -1
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata, token: int) -> None:
        if member.heartbeat_token != token:
            return
        member.heartbeat_timer = None
        if group.is_state(S.DEAD) or self._groups.get(group.group_id) is not group:
            return
        if group.members.get(member.member_id) is not member:
            return
        # Members waiting for a rebalance to finish cannot heartbeat; only brand-new ones may expire then.
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        log.info("member %s of group %s missed its session, removing it", member.member_id, group.group_id)
        self._remove_member_and_update_group(group, member)

    def _add_pending_member(self, group: GroupMetadata, member_id: str, session_timeout_ms: int) -> None:
        group.pending_members.add(member_id)

        def expire() -> None:
            if group.pending_member_timers.get(member_id) is handle_box[0] and member_id in group.pending_members:
                del group.pending_member_timers[member_id]
                self._remove_pending_member_and_update_group(group, member_id)

        handle_box: list[Cancellable | None] = [None]
        handle = self._scheduler.call_later(session_timeout_ms, expire)
        handle_box[0] = handle
        group.pending_member_timers[member_id] = handle

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        timer = group.pending_member_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        if group.is_state(S.PREPARING_REBALANCE):
            self._check_join(group)

    def _cancel_join_timer(self, group: GroupMetadata) -> None:
        group.join_token = -1
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    def _schedule_expiry_sweep(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()

        def sweep() -> None:
            self._expiry_timer = None
            if not self._active:
                return
            self.expire_offsets()
            self._schedule_expiry_sweep()

        self._expiry_timer = self._scheduler.call_later(self.config.offsets_retention_check_interval_ms, sweep)

    # ------------------------------------------------------------------ rebalance machinery

    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_state(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        initial = group.is_state(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE, self._now())
        self._cancel_join_timer(group)
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            self._schedule_initial_join(group, delay, max(group.rebalance_timeout_ms() - delay, 0))
        else:
            group.join_is_initial_delay = False
            if not self._check_join(group):
                self._schedule_join(group, group.rebalance_timeout_ms())

    def _schedule_join(self, group: GroupMetadata, delay_ms: int) -> None:
        token = self._next_token()
        group.join_token = token
        group.join_is_initial_delay = False

        def expire() -> None:
            if group.join_token == token:
                group.join_timer = None
                self._complete_join(group)

        group.join_timer = self._scheduler.call_later(delay_ms, expire)

    def _schedule_initial_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        """group.initial.rebalance.delay.ms: a new group waits for more members, longer while they keep coming."""
        token = self._next_token()
        group.join_token = token
        group.join_is_initial_delay = True

        def expire() -> None:
            if group.join_token != token:
                return
            group.join_timer = None
            if group.new_member_added and remaining_ms != 0:
                group.new_member_added = False
                delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_join(group, delay, max(remaining_ms - delay_ms, 0))
            else:
                self._complete_join(group)

        group.join_timer = self._scheduler.call_later(delay_ms, expire)

    def _check_join(self, group: GroupMetadata) -> bool:
        """DelayedJoin.tryComplete: done early once every known member rejoined (never during the initial delay)."""
        if (
            group.is_state(S.PREPARING_REBALANCE)
            and not group.join_is_initial_delay
            and group.has_all_members_joined()
        ):
            self._cancel_join_timer(group)
            self._complete_join(group)
            return True
        return False

    def _complete_join(self, group: GroupMetadata) -> None:
        self._cancel_join_timer(group)
        if not group.is_state(S.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined_members():
            if member.is_static:
                continue  # static members keep their place across a rebalance they miss (KIP-345)
            log.info("removing member %s of group %s: it did not rejoin", member.member_id, group.group_id)
            self._cancel_heartbeat(member)
            group.maybe_invoke_sync(member, SyncResult(error=E.REBALANCE_IN_PROGRESS))
            group.remove(member.member_id)
        if not self._maybe_elect_new_joined_leader(group) and group.members:
            # Nobody rejoined: wait another rebalance timeout for the session timeouts to clear them out.
            self._schedule_join(group, group.rebalance_timeout_ms())
            return
        group.init_next_generation(self._now())
        if group.is_state(S.EMPTY):
            self._store_group(group, {}, lambda error: self._log_store_failure(group, error))
            return
        members = group.current_member_metadata()
        for member in list(group.members.values()):
            result = JoinResult(
                error=E.NONE,
                member_id=member.member_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader_id=group.leader_id or "",
                members=members if group.is_leader(member.member_id) else (),
            )
            group.maybe_invoke_join(member, result)
            self._schedule_heartbeat(group, member)
            member.is_new = False

    @staticmethod
    def _maybe_elect_new_joined_leader(group: GroupMetadata) -> bool:
        if group.leader_id is None:
            return False
        leader = group.members.get(group.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in group.members.values():
            if member.is_awaiting_join:
                group.leader_id = member.member_id
                return True
        return False

    def _log_store_failure(self, group: GroupMetadata, error: ErrorCode) -> None:
        # An unwritten Empty generation is harmless: it has no members that could act on the old one.
        if error is not E.NONE:
            log.warning("could not write the Empty generation %d of group %s: %s",
                        group.generation_id, group.group_id, error.name)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error is E.NONE
        for member in list(group.members.values()):
            result = SyncResult(
                error=error,
                assignment=member.assignment,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
            )
            if group.maybe_invoke_sync(member, result):
                # Its session restarts now: it could not heartbeat while its SyncGroup was parked.
                self._schedule_heartbeat(group, member)

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        respond: Callable[[JoinResult], None],
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            supported_protocols=protocols,
            awaiting_join=respond,
            is_new=True,
        )
        if group.is_state(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        else:
            group.pending_members.discard(member_id)
            timer = group.pending_member_timers.pop(member_id, None)
            if timer is not None:
                timer.cancel()
        self._maybe_prepare_rebalance(group)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        group.maybe_invoke_join(member, JoinResult(error=E.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        # Kafka leaves a parked SyncGroup of a removed member unanswered until the client times out; we answer
        # it, because a connection answers in order and would otherwise hold everything behind it.
        group.maybe_invoke_sync(member, SyncResult(error=E.UNKNOWN_MEMBER_ID))
        self._cancel_heartbeat(member)
        group.remove(member.member_id)
        if member.group_instance_id is not None and group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_state(S.PREPARING_REBALANCE):
            self._check_join(group)

    # ------------------------------------------------------------------ JoinGroup

    def join_group(
        self, request: JoinGroupRequest, version: int, client_id: str, client_host: str
    ) -> Completion[JoinGroupResponse]:
        completion: Completion[JoinGroupResponse] = Completion()

        def respond(result: JoinResult) -> None:
            completion.complete(_join_response(result, version))

        rebalance_timeout = request.session_timeout_ms if version == 0 else request.rebalance_timeout_ms
        self._handle_join(
            group_id=request.group_id,
            member_id=request.member_id,
            instance_id=request.group_instance_id if version >= 5 else None,
            require_known_member_id=version >= 4,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
            respond=respond,
        )
        return completion

    def _handle_join(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        respond: Callable[[JoinResult], None],
    ) -> None:
        error = self._validate(group_id, allow_empty_id=False)
        if error is not None:
            respond(JoinResult(error=error, member_id=member_id))
            return
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            respond(JoinResult(error=E.INVALID_SESSION_TIMEOUT, member_id=member_id))
            return
        is_unknown = member_id == ""
        group = self._groups.get(group_id)
        if group is None:
            if not is_unknown:
                respond(JoinResult(error=E.UNKNOWN_MEMBER_ID, member_id=member_id))
                return
            group = GroupMetadata(group_id, current_state_timestamp=self._now())
            self._groups[group_id] = group
        if not self._accept_joining_member(group, member_id):
            existing = group.members.get(member_id)
            if existing is not None:
                self._remove_member_and_update_group(group, existing)
            respond(JoinResult(error=E.GROUP_MAX_SIZE_REACHED, member_id=""))
        elif is_unknown:
            self._do_unknown_join(group, instance_id, require_known_member_id, client_id, client_host,
                                  rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond)
        else:
            self._do_join(group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                          session_timeout_ms, protocol_type, protocols, respond)
        if group.is_state(S.PREPARING_REBALANCE):
            self._check_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_state(S.PREPARING_REBALANCE):
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join() < limit
        return member is not None or len(group.members) < limit

    def _do_unknown_join(
        self, group: GroupMetadata, instance_id: str | None, require_known_member_id: bool, client_id: str,
        client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], respond: Callable[[JoinResult], None],
    ) -> None:
        if group.is_state(S.DEAD):
            respond(JoinResult(error=E.COORDINATOR_NOT_AVAILABLE, member_id=""))
            return
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            respond(JoinResult(error=E.INCONSISTENT_GROUP_PROTOCOL, member_id=""))
            return
        # Kafka names a static member after its group.instance.id, a dynamic one after its client id.
        new_member_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_member_id = group.current_static_member_id(instance_id)
            if old_member_id is not None and old_member_id in group.members:
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, instance_id,
                                                         protocols, respond)
                return
        elif require_known_member_id:
            # KIP-394: hand out the id first, so a client that times out its join does not leave a ghost member.
            self._add_pending_member(group, new_member_id, session_timeout_ms)
            respond(JoinResult(error=E.MEMBER_ID_REQUIRED, member_id=new_member_id))
            return
        self._add_member_and_rebalance(group, new_member_id, instance_id, client_id, client_host,
                                       rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond)

    def _do_join(
        self, group: GroupMetadata, member_id: str, instance_id: str | None, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], respond: Callable[[JoinResult], None],
    ) -> None:
        if group.is_state(S.DEAD):
            respond(JoinResult(error=E.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            respond(JoinResult(error=E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if member_id in group.pending_members and instance_id is None:
            self._add_member_and_rebalance(group, member_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, respond)
            return
        if group.is_static_member_fenced(member_id, instance_id):
            respond(JoinResult(error=E.FENCED_INSTANCE_ID, member_id=member_id))
            return
        instance_unknown = instance_id is not None and instance_id not in group.static_members
        member = group.members.get(member_id)
        if member is None or instance_unknown:
            respond(JoinResult(error=E.UNKNOWN_MEMBER_ID, member_id=member_id))
            return
        state = group.state
        if state is S.PREPARING_REBALANCE:
            group.update_member(member, protocols, respond)
            self._maybe_prepare_rebalance(group)
        elif state is S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member lost our JoinGroup answer: give it the current generation again.
                respond(self._current_join_result(group, member))
            else:
                group.update_member(member, protocols, respond)
                self._maybe_prepare_rebalance(group)
        elif state is S.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader's JoinGroup is how it asks for a rebalance (e.g. topic metadata changed).
                group.update_member(member, protocols, respond)
                self._maybe_prepare_rebalance(group)
            else:
                respond(self._current_join_result(group, member, with_members=False))
        else:
            respond(JoinResult(error=E.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _current_join_result(self, group: GroupMetadata, member: MemberMetadata, with_members: bool = True) -> JoinResult:
        members = group.current_member_metadata() if with_members and group.is_leader(member.member_id) else ()
        return JoinResult(
            error=E.NONE,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=members,
        )

    def _update_static_member_and_rebalance(
        self, group: GroupMetadata, old_member_id: str, new_member_id: str, instance_id: str,
        protocols: list[tuple[str, bytes]], respond: Callable[[JoinResult], None],
    ) -> None:
        current_leader = group.leader_id or ""
        old_protocols = list(group.members[old_member_id].supported_protocols)
        member = group.replace_static_member(old_member_id, new_member_id, instance_id)
        self._schedule_heartbeat(group, member)
        group.update_member(member, protocols, respond)
        state = group.state
        if state is S.STABLE:
            if group.protocol_name == group.select_protocol():
                # KIP-345: same protocol, so keep the generation and the assignment; only persist the new id.
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def stored(error: ErrorCode) -> None:
                    if error is not E.NONE:
                        # Revert, so the old id (still in the log) stays the one we know.
                        group.update_member(member, old_protocols, None)
                        if group.members.get(new_member_id) is member:
                            restored = group.replace_static_member(new_member_id, old_member_id, instance_id)
                            self._schedule_heartbeat(group, restored)
                        respond(JoinResult(error=error, member_id="", generation_id=group.generation_id,
                                           protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                                           leader_id=current_leader))
                    else:
                        # The generation's leader stays the one its members were told (Kafka 2.6 answers
                        # with the leader as it was before the replacement); only that leader gets members.
                        leads = current_leader == new_member_id
                        members = group.current_member_metadata() if leads else ()
                        group.maybe_invoke_join(member, JoinResult(
                            error=E.NONE, member_id=new_member_id, generation_id=group.generation_id,
                            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                            leader_id=current_leader, members=members))

                self._store_group(group, assignment, stored)
            else:
                self._maybe_prepare_rebalance(group)
        elif state is S.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old id: only a new rebalance makes the ids agree.
            self._prepare_rebalance(group)
        elif state is not S.PREPARING_REBALANCE:
            raise IllegalStateTransition(f"group {group.group_id}: static member rejoined in {state.value}")

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(self, request: SyncGroupRequest, version: int) -> Completion[SyncGroupResponse]:
        completion: Completion[SyncGroupResponse] = Completion()

        def respond(result: SyncResult) -> None:
            completion.complete(SyncGroupResponse(
                error_code=result.error,
                assignment=result.assignment,
                protocol_type=result.protocol_type if version >= 5 else None,
                protocol_name=result.protocol_name if version >= 5 else None,
            ))

        error = self._validate(request.group_id, allow_empty_id=False)
        if error is E.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the move; old clients do not know LOAD_IN_PROGRESS here.
            respond(SyncResult(error=E.REBALANCE_IN_PROGRESS))
        elif error is not None:
            respond(SyncResult(error=error))
        elif version >= 5 and (request.protocol_type is None or request.protocol_name is None):
            respond(SyncResult(error=E.INCONSISTENT_GROUP_PROTOCOL))
        else:
            group = self._groups.get(request.group_id)
            if group is None:
                respond(SyncResult(error=E.UNKNOWN_MEMBER_ID))
            else:
                assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
                self._do_sync(group, request.generation_id, request.member_id,
                              request.group_instance_id if version >= 3 else None,
                              request.protocol_type if version >= 5 else None,
                              request.protocol_name if version >= 5 else None, assignments, respond)
        return completion

    def _do_sync(
        self, group: GroupMetadata, generation_id: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
        respond: Callable[[SyncResult], None],
    ) -> None:
        if group.is_state(S.DEAD):
            respond(SyncResult(error=E.COORDINATOR_NOT_AVAILABLE))
        elif group.is_static_member_fenced(member_id, instance_id):
            respond(SyncResult(error=E.FENCED_INSTANCE_ID))
        elif not group.has(member_id):
            respond(SyncResult(error=E.UNKNOWN_MEMBER_ID))
        elif generation_id != group.generation_id:
            respond(SyncResult(error=E.ILLEGAL_GENERATION))
        elif (protocol_type is not None and group.protocol_type != protocol_type) or (
            protocol_name is not None and group.protocol_name != protocol_name
        ):
            respond(SyncResult(error=E.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_state(S.EMPTY):
            respond(SyncResult(error=E.UNKNOWN_MEMBER_ID))
        elif group.is_state(S.PREPARING_REBALANCE):
            respond(SyncResult(error=E.REBALANCE_IN_PROGRESS))
        elif group.is_state(S.COMPLETING_REBALANCE):
            member = group.members[member_id]
            if member.awaiting_sync is not None:
                stale, member.awaiting_sync = member.awaiting_sync, None
                stale(SyncResult(error=E.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = respond
            if group.is_leader(member_id):
                assignment = {m: assignments.get(m, b"") for m in group.members}
                generation = group.generation_id

                def stored(error: ErrorCode) -> None:
                    # Anyone may have joined while the record was being written: act only if nothing moved.
                    if not (group.is_state(S.COMPLETING_REBALANCE) and group.generation_id == generation
                            and self._groups.get(group.group_id) is group):
                        return
                    if error is not E.NONE:
                        self._reset_and_propagate_assignment_error(group, error)
                        self._maybe_prepare_rebalance(group)
                    else:
                        for m in group.members.values():
                            m.assignment = assignment.get(m.member_id, b"")
                        group.transition_to(S.STABLE, self._now())
                        self._propagate_assignment(group, E.NONE)

                self._store_group(group, assignment, stored)
        else:  # Stable: the assignment is settled, hand it out again.
            member = group.members[member_id]
            respond(SyncResult(error=E.NONE, assignment=member.assignment,
                               protocol_type=group.protocol_type, protocol_name=group.protocol_name))
            self._schedule_heartbeat(group, member)

    # ------------------------------------------------------------------ Heartbeat

    def heartbeat(self, request: HeartbeatRequest, version: int) -> Completion[HeartbeatResponse]:
        error = self._heartbeat_error(
            request.group_id, request.member_id, request.group_instance_id if version >= 3 else None,
            request.generation_id,
        )
        return Completion.of(HeartbeatResponse(error_code=error))

    def _heartbeat_error(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> int:
        error = self._validate(group_id, allow_empty_id=False)
        if error is E.COORDINATOR_LOAD_IN_PROGRESS:
            return E.NONE  # the group is loading: keep the member calm, its session is not being tracked yet
        if error is not None:
            return error
        group = self._groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_state(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, instance_id):
            return E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_state(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, member)
        return E.REBALANCE_IN_PROGRESS if group.is_state(S.PREPARING_REBALANCE) else E.NONE

    # ------------------------------------------------------------------ LeaveGroup

    def leave_group(self, request: LeaveGroupRequest, version: int) -> Completion[LeaveGroupResponse]:
        if version >= 3:
            leaving = [(m.member_id, m.group_instance_id) for m in request.members]
        else:
            leaving = [(request.member_id, None)]
        top, per_member = self._handle_leave(request.group_id, leaving)
        if version >= 3:
            return Completion.of(LeaveGroupResponse(
                error_code=top,
                members=[LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=e)
                         for m, i, e in per_member],
            ))
        error = top if top != E.NONE or not per_member else per_member[0][2]
        return Completion.of(LeaveGroupResponse(error_code=error))

    def _handle_leave(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        error = self._validate(group_id, allow_empty_id=False)
        if error is not None:
            return error, []
        group = self._groups.get(group_id)
        if group is None:
            return E.NONE, [(m, i, E.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.is_state(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        results: list[tuple[str, str | None, int]] = []
        for member_id, instance_id in leaving:
            if member_id != "" and group.is_static_member_fenced(member_id, instance_id):
                results.append((member_id, instance_id, E.FENCED_INSTANCE_ID))
            elif member_id in group.pending_members:
                self._remove_pending_member_and_update_group(group, member_id)
                results.append((member_id, instance_id, E.NONE))
            else:
                # KIP-345 batch leave: a static member may be named by its instance id alone.
                target = group.current_static_member_id(instance_id) if instance_id is not None else member_id
                member = group.members.get(target) if target is not None else None
                if member is None:
                    results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                else:
                    log.info("member %s leaves group %s", member.member_id, group_id)
                    self._remove_member_and_update_group(group, member)
                    results.append((member_id, instance_id, E.NONE))
        return E.NONE, results

    # ------------------------------------------------------------------ OffsetCommit

    def offset_commit(self, request: OffsetCommitRequest, version: int) -> Completion[OffsetCommitResponse]:
        now = self._now()
        generation_id = request.generation_id if version >= 1 else -1
        member_id = request.member_id if version >= 1 else ""
        instance_id = request.group_instance_id if version >= 7 else None
        retention_ms = request.retention_time_ms if 2 <= version <= 4 else -1

        def value(p: OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition) -> OffsetValue:
            return OffsetValue(
                offset=p.committed_offset,
                metadata=p.committed_metadata or "",
                commit_timestamp=p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now,
                expire_timestamp=wrap_int64(now + retention_ms) if retention_ms != -1 else None,
                leader_epoch=p.committed_leader_epoch if version >= 6 and p.committed_leader_epoch >= 0 else -1,
            )

        order, errors, offsets = self._partitions_to_commit(
            [(t.name, p.partition_index, p) for t in request.topics for p in t.partitions], value)
        completion: Completion[OffsetCommitResponse] = Completion()

        def respond(results: dict[TopicPartition, int]) -> None:
            errors.update(results)
            topics: dict[str, list[OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition]] = {}
            for tp in order:
                topics.setdefault(tp[0], []).append(
                    OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                        partition_index=tp[1], error_code=errors.get(tp, E.NONE)))
            completion.complete(OffsetCommitResponse(topics=[
                OffsetCommitResponse.OffsetCommitResponseTopic(name=name, partitions=parts)
                for name, parts in topics.items()
            ]))

        if not offsets:
            respond({})
        else:
            self._handle_commit(request.group_id, member_id, instance_id, generation_id, offsets, respond)
        return completion

    def _partitions_to_commit(self, partitions: Sequence[tuple[str, int, P_]], value: Callable[[P_], OffsetValue]
                              ) -> tuple[list[TopicPartition], dict[TopicPartition, int],
                                         dict[TopicPartition, OffsetValue]]:
        """An (Txn)OffsetCommit's partitions in request order, UNKNOWN_TOPIC_OR_PARTITION for each the cluster
        does not have, and the value to store for each of the others."""
        order: list[TopicPartition] = []
        errors: dict[TopicPartition, int] = {}
        offsets: dict[TopicPartition, OffsetValue] = {}
        for topic, partition, p in partitions:
            tp = (topic, partition)
            order.append(tp)
            if self._partition_exists is not None and not self._partition_exists(*tp):
                errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = value(p)
        return order, errors, offsets

    def _handle_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
        offsets: dict[TopicPartition, OffsetValue], respond: Callable[[dict[TopicPartition, int]], None],
    ) -> None:
        def fail(error: int) -> None:
            respond({tp: error for tp in offsets})

        error = self._validate(group_id, allow_empty_id=True)
        if error is not None:
            fail(error)
            return
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                fail(E.ILLEGAL_GENERATION)  # a commit from a generation this coordinator never saw
                return
            # Not using Kafka for membership: the group exists only to hold offsets.
            group = GroupMetadata(group_id, current_state_timestamp=self._now())
            self._groups[group_id] = group
        if group.is_state(S.DEAD):
            fail(E.COORDINATOR_NOT_AVAILABLE)
        elif group.is_static_member_fenced(member_id, instance_id):
            fail(E.FENCED_INSTANCE_ID)
        elif generation_id < 0 and group.is_state(S.EMPTY):
            self._store_offsets(group, offsets, respond)
        elif not group.has(member_id):
            fail(E.UNKNOWN_MEMBER_ID)
        elif generation_id != group.generation_id:
            fail(E.ILLEGAL_GENERATION)
        elif group.state in (S.STABLE, S.PREPARING_REBALANCE):
            # Commits stay allowed while rebalancing: the member learns of the rebalance from its heartbeat.
            self._schedule_heartbeat(group, group.members[member_id])
            self._store_offsets(group, offsets, respond)
        else:
            fail(E.REBALANCE_IN_PROGRESS)

    def _offset_records(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetValue]
                        ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, OffsetValue], list[OffsetsRecord]]:
        """OFFSET_METADATA_TOO_LARGE for each offset whose metadata is over ``offset.metadata.max.bytes``; the
        others, and their records."""
        limit = self.config.offset_metadata_max_bytes
        results: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetValue] = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode("utf-8")) > limit:
                results[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = value
        records = [OffsetsRecord(encode_key(OffsetKey(group.group_id, t, p)), encode_offset_value(v))
                   for (t, p), v in valid.items()]
        return results, valid, records

    def _store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetValue],
        respond: Callable[[dict[TopicPartition, int]], None],
    ) -> None:
        results, valid, records = self._offset_records(group, offsets)
        if not valid:
            respond(results)
            return
        group.pending_offset_commits.update(valid.keys())

        def appended(error: ErrorCode) -> None:
            group.pending_offset_commits.subtract(valid.keys())
            group.pending_offset_commits += Counter()  # drops the zero counts
            if error is E.NONE and not group.is_state(S.DEAD):
                for record in records:
                    self._replay_offset(group, record)
            mapped = _store_offsets_error(error)
            results.update({tp: mapped for tp in valid})
            respond(results)

        self._append(group.group_id, records, appended)

    @staticmethod
    def _replay_offset(group: GroupMetadata, record: OffsetsRecord) -> None:
        key = decode_key(record.key)
        assert isinstance(key, OffsetKey)
        tp = (key.topic, key.partition)
        if record.value is None:
            group.offsets.pop(tp, None)
        else:
            group.offsets[tp] = decode_offset_value(record.value)

    # ------------------------------------------------------------------ TxnOffsetCommit

    def txn_offset_commit(self, request: TxnOffsetCommitRequest, version: int) -> Completion[TxnOffsetCommitResponse]:
        """TxnOffsetCommit (v0-3): offsets written as a transactional batch of the producer, visible to OffsetFetch
        only once the transaction coordinator's COMMIT marker reaches the group's partition
        (:meth:`complete_txn_offsets`), dropped at ABORT. Kafka 2.6's checks: the group's coordinator status,
        then (v3, KIP-447) a member id that is set must be a member and a generation that is set must be the
        group's; the group need not use Kafka for membership (it is created, Empty, when unknown). An empty group
        id is INVALID_GROUP_ID (only OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups accept one)."""
        P = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition
        T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
        now = self._now()

        def value(p: TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition
                  ) -> OffsetValue:
            return OffsetValue(
                offset=p.committed_offset, metadata=p.committed_metadata or "", commit_timestamp=now,
                leader_epoch=p.committed_leader_epoch if version >= 2 and p.committed_leader_epoch >= 0 else -1)

        order, errors, offsets = self._partitions_to_commit(
            [(t.name, p.partition_index, p) for t in request.topics for p in t.partitions], value)
        completion: Completion[TxnOffsetCommitResponse] = Completion()

        def respond(results: dict[TopicPartition, int]) -> None:
            errors.update(results)
            topics: dict[str, list[_TxnCommitPartition]] = {}
            for tp in order:
                error = errors.get(tp, E.NONE)
                if version < 2 and error == E.COORDINATOR_LOAD_IN_PROGRESS:
                    error = E.COORDINATOR_NOT_AVAILABLE  # clients before KAFKA-7296 do not know it here
                topics.setdefault(tp[0], []).append(P(partition_index=tp[1], error_code=error))
            completion.complete(TxnOffsetCommitResponse(topics=[T(name=n, partitions=ps) for n, ps in topics.items()]))

        def fail(error: int) -> None:
            respond(dict.fromkeys(offsets, error))

        if not offsets:
            respond({})
            return completion
        error = self._validate(request.group_id, allow_empty_id=False)
        if error is not None:
            fail(error)
            return completion
        member_id = request.member_id if version >= 3 else ""
        instance_id = request.group_instance_id if version >= 3 else None
        generation_id = request.generation_id if version >= 3 else -1
        group = self._groups.get(request.group_id)
        if group is None:
            group = GroupMetadata(request.group_id, current_state_timestamp=now)
            self._groups[request.group_id] = group
        if group.is_state(S.DEAD):
            fail(E.COORDINATOR_NOT_AVAILABLE)
        elif group.is_static_member_fenced(member_id, instance_id):
            fail(E.FENCED_INSTANCE_ID)
        elif member_id and not group.has(member_id):
            fail(E.UNKNOWN_MEMBER_ID)
        elif generation_id >= 0 and generation_id != group.generation_id:
            fail(E.ILLEGAL_GENERATION)
        elif not isinstance(self._writer, TransactionalRecordWriter):
            fail(E.UNSUPPORTED_VERSION)
        else:
            self._store_txn_offsets(group, request.producer_id, request.producer_epoch, offsets, respond)
        return completion

    def _store_txn_offsets(self, group: GroupMetadata, producer_id: int, producer_epoch: int,
                           offsets: dict[TopicPartition, OffsetValue],
                           respond: Callable[[dict[TopicPartition, int]], None]) -> None:
        writer = self._writer
        assert isinstance(writer, TransactionalRecordWriter)
        results, valid, records = self._offset_records(group, offsets)
        if not valid:
            respond(results)
            return
        answered = False

        def appended(error: ErrorCode) -> None:
            nonlocal answered
            if answered:
                raise RuntimeError("RecordWriter called done twice")
            answered = True
            error = ErrorCode(error)
            if error is E.NONE and not group.is_state(S.DEAD):
                group.pending_txn_offsets.setdefault(producer_id, {}).update(valid)
            mapped = _store_offsets_error(error)
            results.update(dict.fromkeys(valid, mapped))
            respond(results)

        writer.append_transactional(self.partition_for(group.group_id), records, producer_id, producer_epoch, appended)

    def complete_txn_offsets(self, producer_id: int, partition: int, commit: bool) -> None:
        """The transaction's marker is written in ``__consumer_offsets``/``partition``: its pending offsets there
        become the groups' committed offsets (COMMIT) or vanish (ABORT)."""
        for group in self._groups.values():
            if self.partition_for(group.group_id) != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and commit and not group.is_state(S.DEAD):
                group.offsets.update(pending)

    # ------------------------------------------------------------------ OffsetFetch

    def offset_fetch(self, request: OffsetFetchRequest, version: int) -> Completion[OffsetFetchResponse]:
        P = _FetchPartition
        T = OffsetFetchResponse.OffsetFetchResponseTopic
        requested: list[TopicPartition] | None = None
        if request.topics is not None:
            requested = [(t.name, p) for t in request.topics for p in t.partition_indexes]
        error = self._validate(request.group_id, allow_empty_id=True)
        if error is not None:
            if version >= 2:
                return Completion.of(OffsetFetchResponse(error_code=error))
            topics: dict[str, list[_FetchPartition]] = {}
            for name, p in requested or []:
                topics.setdefault(name, []).append(P(partition_index=p, committed_offset=-1, metadata="",
                                                     error_code=error))
            return Completion.of(OffsetFetchResponse(topics=[T(name=n, partitions=ps) for n, ps in topics.items()]))
        group = self._groups.get(request.group_id)
        live = group is not None and not group.is_state(S.DEAD)
        known = group.offsets if group is not None and live else {}
        if requested is None:
            requested = sorted(known)
        unstable: set[TopicPartition] = set()
        if version >= 7 and request.require_stable and group is not None and live:
            # KIP-447: offsets a transaction may still change are not handed out to a consumer that asks for stable
            # ones; it retries (UNSTABLE_OFFSET_COMMIT) until the marker decides them.
            unstable = {tp for pending in group.pending_txn_offsets.values() for tp in pending}
            unstable |= {tp for tp, n in group.pending_offset_commits.items() if n > 0}
        topics = {}
        for tp in requested:
            value = known.get(tp)
            if tp in unstable:
                part = P(partition_index=tp[1], committed_offset=-1, metadata="", error_code=E.UNSTABLE_OFFSET_COMMIT)
            elif value is None:
                part = P(partition_index=tp[1], committed_offset=-1, metadata="", error_code=E.NONE)
            else:
                part = P(partition_index=tp[1], committed_offset=value.offset,
                         committed_leader_epoch=value.leader_epoch if version >= 5 else -1,
                         metadata=value.metadata, error_code=E.NONE)
            topics.setdefault(tp[0], []).append(part)
        return Completion.of(OffsetFetchResponse(topics=[T(name=n, partitions=ps) for n, ps in topics.items()]))

    # ------------------------------------------------------------------ DescribeGroups / ListGroups

    def describe_groups(self, request: DescribeGroupsRequest, version: int) -> Completion[DescribeGroupsResponse]:
        G = DescribeGroupsResponse.DescribedGroup
        M = G.DescribedGroupMember
        described = []
        for group_id in request.groups:
            ops = ALL_GROUP_OPERATIONS if version >= 3 and request.include_authorized_operations else INT32_MIN
            error = self._validate(group_id, allow_empty_id=True)
            if error is not None:
                described.append(G(error_code=error, group_id=group_id, authorized_operations=ops))
                continue
            group = self._groups.get(group_id)
            if group is None:
                described.append(G(group_id=group_id, group_state=S.DEAD.value, authorized_operations=ops))
                continue
            stable = group.is_state(S.STABLE) and group.protocol_name is not None
            members = [
                M(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id if version >= 4 else None,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                    member_assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            ]
            described.append(G(
                group_id=group_id,
                group_state=group.state.value,
                protocol_type=group.protocol_type_or_empty,
                protocol_data=(group.protocol_name or "") if stable else "",
                members=members,
                authorized_operations=ops,
            ))
        return Completion.of(DescribeGroupsResponse(groups=described))

    def list_groups(self, request: ListGroupsRequest, version: int) -> Completion[ListGroupsResponse]:
        L = ListGroupsResponse.ListedGroup
        if not self._active:
            return Completion.of(ListGroupsResponse(error_code=E.COORDINATOR_NOT_AVAILABLE))
        states = set(request.states_filter) if version >= 4 else set()
        listed = [
            L(group_id=g.group_id, protocol_type=g.protocol_type_or_empty,
              group_state=g.state.value if version >= 4 else "")
            for g in self._groups.values()
            if not g.is_state(S.DEAD) and (not states or g.state.value in states)
        ]
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self._loading else E.NONE
        return Completion.of(ListGroupsResponse(error_code=error, groups=listed))

    # ------------------------------------------------------------------ DeleteGroups / OffsetDelete / expiry

    def delete_groups(self, request: DeleteGroupsRequest, version: int) -> Completion[DeleteGroupsResponse]:
        R = DeleteGroupsResponse.DeletableGroupResult
        errors: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for group_id in request.groups_names:
            error = self._validate(group_id, allow_empty_id=True)
            if error is not None:
                errors[group_id] = error
                continue
            group = self._groups.get(group_id)
            if group is None or group.is_state(S.DEAD):
                errors[group_id] = E.GROUP_ID_NOT_FOUND
            elif group.is_state(S.EMPTY):
                eligible.append(group)
            else:
                errors[group_id] = E.NON_EMPTY_GROUP
        completion: Completion[DeleteGroupsResponse] = Completion()

        def respond(results: dict[str, int]) -> None:
            errors.update(results)
            completion.complete(DeleteGroupsResponse(
                results=[R(group_id=g, error_code=errors.get(g, E.NONE)) for g in request.groups_names]))

        self._cleanup_groups([(g, set(g.offsets)) for g in eligible], respond, force_dead=True)
        return completion

    def offset_delete(self, request: OffsetDeleteRequest, version: int) -> Completion[OffsetDeleteResponse]:
        T = OffsetDeleteResponse.OffsetDeleteResponseTopic
        P = _DeletePartition
        requested = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        group_id = request.group_id
        error = self._validate(group_id, allow_empty_id=False)
        group = self._groups.get(group_id)
        if error is None and (group is None or group.is_state(S.DEAD)):
            error = E.GROUP_ID_NOT_FOUND
        if error is not None:
            return Completion.of(OffsetDeleteResponse(error_code=error))
        assert group is not None
        errors: dict[TopicPartition, int] = {}
        eligible: set[TopicPartition] = set()
        for tp in requested:
            if self._partition_exists is not None and not self._partition_exists(*tp):
                errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif group.is_state(S.EMPTY) or not group.is_subscribed_to_topic(tp[0]):
                eligible.add(tp)
            else:
                errors[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
        if not group.is_state(S.EMPTY) and group.protocol_type != "consumer":
            return Completion.of(OffsetDeleteResponse(error_code=E.NON_EMPTY_GROUP))
        completion: Completion[OffsetDeleteResponse] = Completion()

        def respond(results: dict[str, int]) -> None:
            written = results.get(group_id, E.NONE)
            topics: dict[str, list[_DeletePartition]] = {}
            for tp in requested:
                topics.setdefault(tp[0], []).append(P(partition_index=tp[1], error_code=errors.get(tp, written)))
            completion.complete(OffsetDeleteResponse(topics=[T(name=n, partitions=ps) for n, ps in topics.items()]))

        self._cleanup_groups([(group, eligible)] if eligible else [], respond, force_dead=False)
        return completion

    def expire_offsets(self) -> int:
        """The offsets.retention sweep (GroupMetadata.removeExpiredOffsets); returns how many offsets expired."""
        now = self._now()
        retention = self.config.offsets_retention_ms
        work: list[tuple[GroupMetadata, set[TopicPartition]]] = []
        for group in list(self._groups.values()):
            if group.is_state(S.DEAD):
                continue
            expired = self._expired_offsets(group, now, retention)
            if expired or (group.is_state(S.EMPTY) and not group.offsets and not group.pending_offset_commits
                           and not group.pending_txn_offsets):
                work.append((group, expired))
        count = sum(len(tps) for _, tps in work)
        self._cleanup_groups(work, lambda _results: None, force_dead=False)
        return count

    @staticmethod
    def _expired_offsets(group: GroupMetadata, now: int, retention_ms: int) -> set[TopicPartition]:
        if group.protocol_type is not None and group.is_state(S.EMPTY):
            subscribed: frozenset[str] = frozenset()
            state_ts = group.current_state_timestamp

            def base(v: OffsetValue) -> int:
                return state_ts if state_ts is not None else v.commit_timestamp
        elif group.protocol_type == "consumer" and group.subscribed_topics is not None:
            subscribed = group.subscribed_topics

            def base(v: OffsetValue) -> int:
                return v.commit_timestamp
        elif group.protocol_type is None:
            subscribed = frozenset()

            def base(v: OffsetValue) -> int:
                return v.commit_timestamp
        else:
            return set()
        expired = set()
        for tp, value in group.offsets.items():
            if tp[0] in subscribed or group.pending_offset_commits.get(tp, 0) > 0:
                continue
            if value.expire_timestamp is not None:
                if now >= value.expire_timestamp:
                    expired.add(tp)
            elif now - base(value) >= retention_ms:
                expired.add(tp)
        return expired

    def on_topics_deleted(self, topics: Iterable[str]) -> None:
        gone = set(topics)
        work = [(g, {tp for tp in g.offsets if tp[0] in gone}) for g in self._groups.values() if not g.is_state(S.DEAD)]
        self._cleanup_groups([(g, tps) for g, tps in work if tps], lambda _results: None, force_dead=False)

    def _cleanup_groups(
        self, work: list[tuple[GroupMetadata, set[TopicPartition]]],
        respond: Callable[[dict[str, int]], None], force_dead: bool,
    ) -> None:
        """GroupMetadataManager.cleanupGroupMetadata: drop offsets, kill groups left Empty without offsets.

        Unlike Kafka, which forgets first and writes the tombstones fire-and-forget, the offsets go only when
        the tombstones are acknowledged (replayed like any record), so a failed write cannot leave memory and
        log disagreeing. A dying group turns Dead at once, so nobody joins or commits into it meanwhile, and
        comes back Empty, as the log still has it, if the write fails.
        """
        batches: dict[int, list[OffsetsRecord]] = {}
        groups_of: dict[int, list[tuple[GroupMetadata, bool]]] = {}
        for group, tps in work:
            doomed = set(group.offsets) if force_dead else tps & set(group.offsets)
            dies = force_dead or (
                group.is_state(S.EMPTY) and set(group.offsets) <= doomed and not group.pending_offset_commits
                and not group.pending_txn_offsets)
            records = [OffsetsRecord(encode_key(OffsetKey(group.group_id, t, p)), None) for t, p in sorted(doomed)]
            if dies:
                records.append(OffsetsRecord(encode_key(GroupMetadataKey(group.group_id)), None))
                self._drop_group(group, E.COORDINATOR_NOT_AVAILABLE)
            if records:
                partition = self.partition_for(group.group_id)
                batches.setdefault(partition, []).extend(records)
                groups_of.setdefault(partition, []).append((group, dies))
        results: dict[str, int] = {}
        remaining = len(batches)
        if remaining == 0:
            respond(results)
            return

        def written(partition: int, records: list[OffsetsRecord], error: ErrorCode) -> None:
            nonlocal remaining
            by_group: dict[str, list[OffsetsRecord]] = {}
            for record in records:
                by_group.setdefault(decode_key(record.key).group, []).append(record)
            for group, dies in groups_of[partition]:
                current = self._groups.get(group.group_id) is group
                if error is E.NONE:
                    for record in by_group.get(group.group_id, []):
                        if isinstance(decode_key(record.key), OffsetKey):
                            self._replay_offset(group, record)
                    if dies and current:
                        del self._groups[group.group_id]
                elif dies and current:
                    self._groups[group.group_id] = self._revived(group)
                results[group.group_id] = _store_group_error(error)
            remaining -= 1
            if remaining == 0:
                respond(results)

        def done_for(partition: int, records: list[OffsetsRecord]) -> Callable[[ErrorCode], None]:
            return lambda error: written(partition, records, ErrorCode(error))

        for partition, records in batches.items():
            self._append_to(partition, records, done_for(partition, records))

    def _revived(self, dead: GroupMetadata) -> GroupMetadata:
        """The Empty group the log still holds after its tombstones failed to write."""
        group = GroupMetadata(
            dead.group_id,
            protocol_type=dead.protocol_type,
            generation_id=dead.generation_id,
            current_state_timestamp=dead.current_state_timestamp,
        )
        group.offsets = dict(dead.offsets)
        return group


def _join_response(result: JoinResult, version: int) -> JoinGroupResponse:
    M = JoinGroupResponse.JoinGroupResponseMember
    if version >= 7:
        protocol_name: str | None = result.protocol_name
    else:
        protocol_name = result.protocol_name or ""
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type if version >= 7 else None,
        protocol_name=protocol_name,
        leader=result.leader_id,
        member_id=result.member_id,
        members=[M(member_id=m, group_instance_id=i if version >= 5 else None, metadata=data)
                 for m, i, data in result.members],
    )
