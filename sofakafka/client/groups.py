"""Consumer-group administration over the wire, as Kafka's AdminClient does it for kafka-consumer-groups.sh.

Every call first finds the group's coordinator (FindCoordinator, retried while the broker answers
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS, e.g. while ``__consumer_offsets`` is being
created) and sends the group request there; a NOT_COORDINATOR answer sends it to the new coordinator.
Listing asks every broker, since each knows only the groups it coordinates.

Offsets are committed the way the Kafka tool resets them: as a "simple" member (generation -1, empty member
id), which the coordinator accepts only while the group has no members.

The "consumer" protocol's assignment bytes are decoded here (client/ may import protocol only, not the
broker's group package): version int16, [topic string, [partition int32]], user data bytes.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sofakafka.client.client import KafkaClient
from sofakafka.client.errors import BrokerConnectionError, NoBrokersAvailableError, RequestTimeoutError
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from sofakafka.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from sofakafka.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from sofakafka.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

T = TypeVar("T")
TopicPartition = tuple[str, int]

_COORDINATOR_RETRIABLE = frozenset({
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
})


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    """Empty when the broker answered ListGroups below v4, which carries no state."""


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...]
    """Decoded when the group speaks the "consumer" protocol; empty otherwise or while rebalancing."""


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: tuple[MemberDescription, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str
    leader_epoch: int = -1


def decode_consumer_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a "consumer" protocol assignment; raises ValueError on bytes that are not one."""
    if not data:
        return ()
    try:
        pos = 2  # version: every version starts with the same topic array
        (topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out: list[TopicPartition] = []
        for _ in range(max(0, topics)):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos:pos + length].decode()
            pos += length
            (count,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for _ in range(max(0, count)):
                (partition,) = struct.unpack_from(">i", data, pos)
                pos += 4
                out.append((topic, partition))
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"not a consumer protocol assignment: {exc}") from None
    return tuple(out)


class GroupAdmin:
    """Group operations on top of a :class:`KafkaClient` (which bounds each call by its request timeout)."""

    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    # -- routing ---------------------------------------------------------------------------------------------
    def _until(self, attempt: Callable[[], T], what: str) -> T:
        deadline = time.monotonic() + self.client.request_timeout_s
        backoff = self.client.retry_backoff_s
        while True:
            try:
                return attempt()
            except KafkaError as e:
                if e.code not in _COORDINATOR_RETRIABLE or time.monotonic() + backoff >= deadline:
                    raise
            except (BrokerConnectionError, NoBrokersAvailableError, RequestTimeoutError):
                if time.monotonic() + backoff >= deadline:
                    raise
            time.sleep(backoff)
            try:
                self.client.metadata([])
            except (BrokerConnectionError, NoBrokersAvailableError, RequestTimeoutError) as exc:
                if time.monotonic() >= deadline:
                    raise RequestTimeoutError(f"{what}: no broker answered before the deadline") from exc

    def _find_coordinator_once(self, group_id: str) -> int:
        response = self.client.send(FindCoordinatorRequest(key=group_id, key_type=0))
        assert isinstance(response, FindCoordinatorResponse)
        code = ErrorCode.for_code(response.error_code)
        if code != ErrorCode.NONE:
            raise KafkaError(code, f"FindCoordinator for group {group_id}: {code.name}")
        return response.node_id

    def find_coordinator(self, group_id: str) -> int:
        """The node id of the group's coordinator."""
        return self._until(lambda: self._find_coordinator_once(group_id), "FindCoordinator")

    def _at_coordinator(self, group_id: str, what: str, call: Callable[[int], T]) -> T:
        return self._until(lambda: call(self._find_coordinator_once(group_id)), what)

    def at_coordinator(self, group_id: str, what: str, call: Callable[[int], T]) -> T:
        """``call(coordinator node id)``, found again and retried while it raises a coordinator error
        (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) until the client's request timeout: for requests
        about a group outside the group APIs (its configs)."""
        return self._at_coordinator(group_id, what, call)

    # -- ListGroups ------------------------------------------------------------------------------------------
    def list_groups(self, states: Sequence[str] = ()) -> list[GroupListing]:
        """Every group of every live broker, sorted by id; ``states`` filters by state (done here too when
        the broker is older than ListGroups v4)."""
        brokers = sorted(self.client.metadata([]).brokers)
        found: dict[str, GroupListing] = {}
        for node_id in brokers:
            def attempt(node_id: int = node_id) -> list[GroupListing]:
                conn = self.client.connection(node_id)
                version = self.client.version(conn, ApiKey.LIST_GROUPS)
                request = ListGroupsRequest()
                if version >= 4:
                    request.states_filter = list(states)
                response = conn.send(request, version)
                assert isinstance(response, ListGroupsResponse)
                code = ErrorCode.for_code(response.error_code)
                if code != ErrorCode.NONE:
                    raise KafkaError(code, f"ListGroups at broker {node_id}: {code.name}")
                return [GroupListing(g.group_id, g.protocol_type, g.group_state if version >= 4 else "")
                        for g in response.groups]

            for g in self._until(attempt, "ListGroups"):
                found[g.group_id] = g
        listed = sorted(found.values(), key=lambda g: g.group_id)
        if states:
            wanted = {s.lower() for s in states}
            listed = [g for g in listed if not g.state or g.state.lower() in wanted]
        return listed

    # -- DescribeGroups --------------------------------------------------------------------------------------
    def describe_group(self, group_id: str) -> GroupDescription:
        def call(node_id: int) -> GroupDescription:
            conn = self.client.connection(node_id)
            version = self.client.version(conn, ApiKey.DESCRIBE_GROUPS)
            response = conn.send(DescribeGroupsRequest(groups=[group_id]), version)
            assert isinstance(response, DescribeGroupsResponse)
            g = response.groups[0]
            code = ErrorCode.for_code(g.error_code)
            if code in _COORDINATOR_RETRIABLE:
                raise KafkaError(code, f"DescribeGroups {group_id}: {code.name}")
            members = []
            for m in g.members:
                assignment: tuple[TopicPartition, ...] = ()
                if g.protocol_type == "consumer":
                    try:
                        assignment = decode_consumer_assignment(bytes(m.member_assignment))
                    except ValueError:
                        assignment = ()
                members.append(MemberDescription(m.member_id, m.group_instance_id if version >= 4 else None,
                                                 m.client_id, m.client_host, assignment))
            return GroupDescription(g.group_id, code, g.group_state, g.protocol_type, g.protocol_data, node_id,
                                    tuple(members))

        return self._at_coordinator(group_id, "DescribeGroups", call)

    # -- OffsetFetch / OffsetCommit --------------------------------------------------------------------------
    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
                      ) -> dict[TopicPartition, CommittedOffset]:
        """Committed offsets (all of the group's when ``partitions`` is None); partitions with none are left out."""
        wanted = None if partitions is None else sorted(set(partitions))

        def call(node_id: int) -> dict[TopicPartition, CommittedOffset]:
            conn = self.client.connection(node_id)
            version = self.client.version(conn, ApiKey.OFFSET_FETCH)
            if wanted is None and version < 2:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "fetching all offsets needs OffsetFetch v2+")
            topics: list[OffsetFetchRequest.OffsetFetchRequestTopic] | None = None
            if wanted is not None:
                by_topic: dict[str, list[int]] = {}
                for t, p in wanted:
                    by_topic.setdefault(t, []).append(p)
                topics = [OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                          for t, ps in by_topic.items()]
            response = conn.send(OffsetFetchRequest(group_id=group_id, topics=topics), version)
            assert isinstance(response, OffsetFetchResponse)
            code = ErrorCode.for_code(response.error_code) if version >= 2 else ErrorCode.NONE
            if code != ErrorCode.NONE:
                raise KafkaError(code, f"OffsetFetch {group_id}: {code.name}")
            out: dict[TopicPartition, CommittedOffset] = {}
            for rt in response.topics:
                for rp in rt.partitions:
                    pcode = ErrorCode.for_code(rp.error_code)
                    if pcode != ErrorCode.NONE:
                        raise KafkaError(pcode, f"OffsetFetch {group_id} {rt.name}-{rp.partition_index}: {pcode.name}")
                    if rp.committed_offset >= 0:
                        out[(rt.name, rp.partition_index)] = CommittedOffset(
                            rp.committed_offset, rp.metadata or "", rp.committed_leader_epoch if version >= 5 else -1)
            return out

        return self._at_coordinator(group_id, "OffsetFetch", call)

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int | CommittedOffset]
                       ) -> dict[TopicPartition, ErrorCode]:
        """Commit as a simple (member-less) client; the error of each partition (NONE when stored)."""
        by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition]] = {}
        for (topic, partition), value in sorted(offsets.items()):
            committed = value if isinstance(value, CommittedOffset) else CommittedOffset(value, "")
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=committed.offset,
                    committed_metadata=committed.metadata, committed_leader_epoch=committed.leader_epoch))

        def call(node_id: int) -> dict[TopicPartition, ErrorCode]:
            conn = self.client.connection(node_id)
            version = self.client.version(conn, ApiKey.OFFSET_COMMIT)
            request = OffsetCommitRequest(
                group_id=group_id, generation_id=-1, member_id="",
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])
            response = conn.send(request, version)
            assert isinstance(response, OffsetCommitResponse)
            out: dict[TopicPartition, ErrorCode] = {}
            for rt in response.topics:
                for rp in rt.partitions:
                    code = ErrorCode.for_code(rp.error_code)
                    if code in _COORDINATOR_RETRIABLE:
                        raise KafkaError(code, f"OffsetCommit {group_id}: {code.name}")
                    out[(rt.name, rp.partition_index)] = code
            return out

        return self._at_coordinator(group_id, "OffsetCommit", call)

    # -- DeleteGroups ----------------------------------------------------------------------------------------
    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            def call(node_id: int, group_id: str = group_id) -> ErrorCode:
                conn = self.client.connection(node_id)
                version = self.client.version(conn, ApiKey.DELETE_GROUPS)
                response = conn.send(DeleteGroupsRequest(groups_names=[group_id]), version)
                assert isinstance(response, DeleteGroupsResponse)
                code = ErrorCode.for_code(response.results[0].error_code)
                if code in _COORDINATOR_RETRIABLE:
                    raise KafkaError(code, f"DeleteGroups {group_id}: {code.name}")
                return code

            try:
                out[group_id] = self._at_coordinator(group_id, "DeleteGroups", call)
            except KafkaError as e:
                out[group_id] = e.code
        return out
