"""A coordinator on hand-driven time with an in-memory __consumer_offsets, and client-side request helpers.

The log is real in the sense that matters: whatever the coordinator appended is what a reload replays, and a
failed append writes nothing. Every response is encoded at its request version before a test sees it, so a
field a version cannot carry fails the test instead of a client.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from sofakafka.broker.group import GroupConfig, GroupCoordinator, ManualTime, OffsetsRecord
from sofakafka.broker.group.consumer_protocol import Subscription, encode_subscription
from sofakafka.broker.group.runtime import Completion
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.heartbeat import HeartbeatRequest
from sofakafka.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from sofakafka.protocol.messages.leave_group import LeaveGroupRequest
from sofakafka.protocol.messages.offset_commit import OffsetCommitRequest
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest
from sofakafka.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

PARTITIONS = 3


class MemoryLog:
    """__consumer_offsets in memory: one list of (key, value) per partition, with injectable failures."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes | None, bytes | None]]] = defaultdict(list)
        self.fail_next: ErrorCode | None = None
        self.appends = 0

    def append(self, partition: int, records: Sequence[OffsetsRecord], done: Callable[[ErrorCode], None]) -> None:
        self.appends += 1
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            done(error)
            return
        self.partitions[partition].extend((r.key, r.value) for r in records)
        done(ErrorCode.NONE)


def consumer_metadata(topics: Sequence[str]) -> bytes:
    return encode_subscription(Subscription(tuple(topics)))


class Harness:
    def __init__(self, **config: Any) -> None:
        defaults: dict[str, Any] = {
            "offsets_topic_num_partitions": PARTITIONS,
            "group_initial_rebalance_delay_ms": 0,
            "group_min_session_timeout_ms": 1000,
        }
        defaults.update(config)
        self.config = GroupConfig(**defaults)
        self.time = ManualTime()
        self.log = MemoryLog()
        self.coordinator = self.new_coordinator()
        for p in range(PARTITIONS):
            self.coordinator.load_partition(p, [])

    def new_coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(self.config, self.time, self.time, self.log)

    def reload(self) -> GroupCoordinator:
        """A fresh coordinator (as after a restart or a move) loading everything the log holds."""
        fresh = self.new_coordinator()
        for p in range(PARTITIONS):
            fresh.load_partition(p, list(self.log.partitions[p]))
        return fresh

    # --- requests, as a client sends them

    def join(
        self, group: str, member_id: str = "", *, instance: str | None = None, topics: Sequence[str] = ("t",),
        protocols: Sequence[tuple[str, bytes]] | None = None, session: int = 10_000, rebalance: int = 30_000,
        version: int = 7, client_id: str = "client", protocol_type: str = "consumer",
        coordinator: GroupCoordinator | None = None,
    ) -> Completion[JoinGroupResponse]:
        if protocols is None:
            protocols = [("range", consumer_metadata(topics))]
        request = JoinGroupRequest(
            group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance if version >= 1 else -1,
            member_id=member_id, group_instance_id=instance if version >= 5 else None,
            protocol_type=protocol_type,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
        )
        request.encode(version)
        c = (coordinator or self.coordinator).join_group(request, version, client_id, "/127.0.0.1")
        c.add_done_callback(lambda r: r.encode(version))
        self.time.advance(0)  # the event loop runs due timers (a zero initial rebalance delay) after the request
        return c

    def join_new(self, group: str, **kw: Any) -> Completion[JoinGroupResponse]:
        """KIP-394: the first JoinGroup only hands out a member id; the second one joins."""
        first = self.join(group, **kw)
        assert first.done()
        response = first.result()
        if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            return self.join(group, response.member_id, **kw)
        return first

    def sync(
        self, group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None, *,
        instance: str | None = None, version: int = 5, protocol_name: str | None = "range",
        coordinator: GroupCoordinator | None = None,
    ) -> Completion[SyncGroupResponse]:
        request = SyncGroupRequest(
            group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance if version >= 3 else None,
            protocol_type="consumer" if version >= 5 else None,
            protocol_name=protocol_name if version >= 5 else None,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()],
        )
        c = (coordinator or self.coordinator).sync_group(request, version)
        c.add_done_callback(lambda r: r.encode(version))
        return c

    def heartbeat(self, group: str, generation: int, member_id: str, *, instance: str | None = None,
                  version: int = 4) -> int:
        request = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                   group_instance_id=instance if version >= 3 else None)
        c = self.coordinator.heartbeat(request, version)
        assert c.done()
        c.result().encode(version)
        return c.result().error_code

    def leave(self, group: str, member_id: str, *, version: int = 4, instance: str | None = None) -> Any:
        if version >= 3:
            request = LeaveGroupRequest(group_id=group, members=[
                LeaveGroupRequest.MemberIdentity(member_id=member_id, group_instance_id=instance)])
        else:
            request = LeaveGroupRequest(group_id=group, member_id=member_id)
        c = self.coordinator.leave_group(request, version)
        assert c.done()
        c.result().encode(version)
        return c.result()

    def commit(self, group: str, offsets: dict[tuple[str, int], int], *, generation: int = -1,
               member_id: str = "", metadata: str | None = "m", version: int = 8,
               instance: str | None = None) -> dict[tuple[str, int], int]:
        topics: dict[str, list[OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition]] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append(
                OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_metadata=metadata,
                    committed_leader_epoch=3 if version >= 6 else -1))
        request = OffsetCommitRequest(
            group_id=group, generation_id=generation if version >= 1 else -1,
            member_id=member_id if version >= 1 else "", group_instance_id=instance if version >= 7 else None,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
        request.encode(version)
        c = self.coordinator.offset_commit(request, version)
        assert c.done()
        c.result().encode(version)
        return {(t.name, p.partition_index): p.error_code for t in c.result().topics for p in t.partitions}

    def fetch(self, group: str, partitions: Sequence[tuple[str, int]] | None = None, *, version: int = 7,
              coordinator: GroupCoordinator | None = None) -> dict[tuple[str, int], tuple[int, str | None]]:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                      for t, ps in by_topic.items()]
        request = OffsetFetchRequest(group_id=group, topics=topics)
        c = (coordinator or self.coordinator).offset_fetch(request, version)
        assert c.done()
        c.result().encode(version)
        assert c.result().error_code == 0
        return {(t.name, p.partition_index): (p.committed_offset, p.metadata)
                for t in c.result().topics for p in t.partitions if p.error_code == 0}
