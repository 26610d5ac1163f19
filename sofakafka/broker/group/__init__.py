"""The group coordinator: consumer groups and committed offsets, as Kafka 2.6's GroupCoordinator does them.

Pure logic: no sockets, no asyncio in the coordinator itself. Time, timers and the log are injected, so unit
tests drive time by hand and the broker plugs in its event loop and its replica manager.

Public API (the handlers in sofakafka/broker/handlers/ code against it; keep it stable)
======================================================================================

Construction (once per broker, on the event loop thread)::

    from sofakafka.broker.group import GroupConfig, GroupCoordinator, OffsetsRecord, SystemClock
    from sofakafka.broker.group.asyncio_bridge import LoopScheduler, wait_for

    coordinator = GroupCoordinator(
        config=GroupConfig.from_config(kafka_config),  # anything with get_int(key) for Kafka's keys
        clock=SystemClock(),                           # Clock: now_ms() -> int (wall clock, epoch millis)
        scheduler=LoopScheduler(loop),                 # Scheduler: call_later(delay_ms, fn) -> handle.cancel()
        writer=writer,                                 # RecordWriter, below
        partition_count=None,                          # __consumer_offsets partitions if the topic exists
                                                       # with another count; None = offsets.topic.num.partitions
        partition_exists=None,                         # (topic, partition) -> bool: OffsetCommit/OffsetDelete
    )                                                  # answer UNKNOWN_TOPIC_OR_PARTITION when False
    coordinator.start()                                # schedules the offsets.retention expiry sweep
    ...
    coordinator.shutdown()                             # cancels timers, answers waiters NOT_COORDINATOR

``RecordWriter`` is the only way state reaches the log::

    class RecordWriter(Protocol):
        def append(self, partition: int, records: Sequence[OffsetsRecord],
                   done: Callable[[ErrorCode], None]) -> None: ...

Append ``records`` (each ``OffsetsRecord(key: bytes, value: bytes | None)``; a None value is a tombstone) as
ONE batch to ``__consumer_offsets``/``partition`` (CreateTime, message format v2,
``offsets.topic.compression.codec``) with acks=all semantics, then call ``done(ErrorCode.NONE)``, or
``done(code)`` with the append's error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT,
MESSAGE_TOO_LARGE, KAFKA_STORAGE_ERROR, ...). ``done`` must be called exactly once, on the coordinator's
thread (the event loop); calling it synchronously from inside ``append`` is allowed. The coordinator maps
append errors to group error codes the way Kafka does (NOT_ENOUGH_REPLICAS -> COORDINATOR_NOT_AVAILABLE,
NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR, MESSAGE_TOO_LARGE -> INVALID_COMMIT_OFFSET_SIZE for commits...).
Offsets become visible to OffsetFetch only after ``done(NONE)``: state changes by replaying what was written.

Operations: every request API is one method taking the decoded request and its version and returning a
``Completion[Response]``. Most complete before they return (``completion.done()``); JoinGroup waits for the
rebalance, SyncGroup for the leader's assignment, anything that writes waits for ``done``::

    join_group(request, version, client_id, client_host) -> Completion[JoinGroupResponse]     # v0-7
    sync_group(request, version) -> Completion[SyncGroupResponse]                              # v0-5
    heartbeat(request, version) -> Completion[HeartbeatResponse]                               # v0-4
    leave_group(request, version) -> Completion[LeaveGroupResponse]                            # v0-4
    offset_commit(request, version) -> Completion[OffsetCommitResponse]                        # v0-8
    offset_fetch(request, version) -> Completion[OffsetFetchResponse]                          # v0-7
    describe_groups(request, version) -> Completion[DescribeGroupsResponse]                    # v0-5
    list_groups(request, version) -> Completion[ListGroupsResponse]                            # v0-4
    delete_groups(request, version) -> Completion[DeleteGroupsResponse]                        # v0-2
    offset_delete(request, version) -> Completion[OffsetDeleteResponse]                        # v0

A thin handler is then::

    @handles(ApiKey.JOIN_GROUP, 0, 7)
    async def handle_join_group(ctx, request):
        v = ctx.header.request_api_version
        return await wait_for(ctx.broker.group_coordinator.join_group(
            request, v, ctx.header.client_id or "", ctx.client_host))

``wait_for(completion)`` (asyncio_bridge) awaits a Completion on the running loop; plain code may use
``completion.add_done_callback(fn)`` / ``completion.result()``. Responses carry every error in their
``error_code`` fields (NOT_COORDINATOR when this broker does not own the group's partition,
COORDINATOR_LOAD_IN_PROGRESS while it loads, INVALID_GROUP_ID for an empty id, ...); operations never raise
for a client's mistake. Request fields are read at ``version`` (e.g. LeaveGroup v0-2 ``member_id`` versus
v3+ ``members``), and responses are built so they encode at ``version``.

Ownership of ``__consumer_offsets`` partitions (the broker calls these as leadership changes)::

    partition_for(group_id) -> int          # abs(Java String.hashCode) % partition count (module function
                                            # partition_for(group_id, count) too)
    begin_loading(partition)                # its groups answer COORDINATOR_LOAD_IN_PROGRESS from now on
    load_partition(partition, records)      # records: Iterable[tuple[key bytes | None, value bytes | None]]
                                            # in log order (committed, non-transactional records); replays
                                            # them and starts serving the partition's groups
    unload_partition(partition)             # no longer leader: forget its groups, waiters get NOT_COORDINATOR
    owns(partition) -> bool
    on_topics_deleted(topics)               # writes tombstones for offsets of deleted topics
    expire_offsets() -> int                 # one offsets.retention sweep now (start() schedules them)
    groups() -> dict[str, GroupMetadata]    # the live groups, read-only, for tests and tools

Records and codecs (``sofakafka.broker.group.records``): ``OffsetKey``, ``GroupMetadataKey``,
``OffsetValue`` (value v0-v3), ``GroupMetadataValue`` / ``MemberValue`` (value v0-v3), ``encode_key``,
``decode_key``, ``encode_offset_value``, ``decode_offset_value``, ``encode_group_value``,
``decode_group_value``: Kafka's ``__consumer_offsets`` formats (INTERNAL-TOPICS.md), usable by tools that
read the topic. ``sofakafka.broker.group.consumer_protocol`` decodes the "consumer" protocol's subscription
and assignment bytes (for describe output and for offset expiry of unsubscribed topics).

Test time: ``ManualTime`` (sofakafka.broker.group.runtime) is both a Clock and a Scheduler; ``advance(ms)``
runs due timers in deadline order.

Threading: every method, and every ``done``/timer callback, runs on one thread (the event loop).
"""

from sofakafka.broker.group.coordinator import GroupConfig, GroupCoordinator
from sofakafka.broker.group.metadata import GroupMetadata, GroupState, MemberMetadata
from sofakafka.broker.group.records import partition_for
from sofakafka.broker.group.runtime import (
    Clock,
    Completion,
    ManualTime,
    OffsetsRecord,
    RecordWriter,
    Scheduler,
    SystemClock,
)

__all__ = [
    "Clock",
    "Completion",
    "GroupConfig",
    "GroupCoordinator",
    "GroupMetadata",
    "GroupState",
    "ManualTime",
    "MemberMetadata",
    "OffsetsRecord",
    "RecordWriter",
    "Scheduler",
    "SystemClock",
    "partition_for",
]
