"""ListOffsets (API key 2), versions 0-5.

Per partition: timestamp -2 is the log start offset, -1 the end (the high watermark for read_uncommitted,
the last stable offset for read_committed, the log end for followers), any other timestamp the first offset
whose record timestamp is at or after it (-1/-1 when there is none below the bound).

Version notes: v0 answers a list of up to ``max_num_offsets`` offsets (``old_style_offsets``): for -1 the end
offset followed by segment base offsets, newest first; for -2 the log start offset; for a timestamp, the base
offsets of segments whose records are all older than it. v1 returns one timestamp/offset pair; v2 adds the
isolation level; v4 the leader epoch of the offset (for -1 the partition's current leader epoch, as Kafka answers)
and ``current_leader_epoch`` checking (KIP-320).

Authorization (with an authorizer): DESCRIBE on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.replica_manager import (
    ISOLATION_READ_COMMITTED,
    Partition,
    ReplicaManager,
    storage_error_code,
)
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.list_offset import ListOffsetRequest, ListOffsetResponse
from sofakafka.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

TopicResponse = ListOffsetResponse.ListOffsetTopicResponse
PartitionResponse = TopicResponse.ListOffsetPartitionResponse
PartitionRequest = ListOffsetRequest.ListOffsetTopic.ListOffsetPartition


def list_offsets_error_response(request: ListOffsetRequest, version: int, code: int) -> ListOffsetResponse:
    return ListOffsetResponse(topics=[
        TopicResponse(name=t.name, partitions=[PartitionResponse(partition_index=p.partition_index, error_code=code)
                                               for p in t.partitions])
        for t in request.topics])


@handles(ApiKey.LIST_OFFSETS, 0, 5, error_response=list_offsets_error_response)
async def handle_list_offsets(ctx: RequestContext, request: ListOffsetRequest) -> ListOffsetResponse:
    rm = ctx.broker.replica_manager
    version = ctx.api_version

    visible = (authz.authorized_names(ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.TOPIC,
                                      (t.name for t in request.topics)) if authz.enabled(ctx) else None)

    def lookup_all() -> list[TopicResponse]:
        out: list[TopicResponse] = []
        for topic in request.topics:
            if visible is not None and topic.name not in visible:
                out.append(TopicResponse(name=topic.name, partitions=[
                    _unknown(p, version, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic.partitions]))
                continue
            parts = [_lookup(rm, topic.name, p, request.replica_id, request.isolation_level, version)
                     for p in topic.partitions]
            out.append(TopicResponse(name=topic.name, partitions=parts))
        return out

    return ListOffsetResponse(topics=await rm.run_read(lookup_all))


def _unknown(req: PartitionRequest, version: int, error: ErrorCode = ErrorCode.NONE) -> PartitionResponse:
    """A partition's answer before anything is known of it: no offset, no timestamp, no epoch."""
    resp = PartitionResponse(partition_index=req.partition_index, error_code=error)
    if version >= 4:
        resp.leader_epoch = -1
    return resp


def _lookup(rm: ReplicaManager, topic: str, req: PartitionRequest, replica_id: int, isolation_level: int,
            version: int) -> PartitionResponse:
    resp = _unknown(req, version)
    try:
        part = rm.partition_or_error(topic, req.partition_index)
        if version >= 4:
            part.check_leader_epoch(req.current_leader_epoch)
        if version == 0:
            resp.old_style_offsets = _old_style_offsets(part, req.timestamp, req.max_num_offsets, replica_id)
            return resp
        lg = part.log
        if replica_id >= 0:
            bound = lg.log_end_offset
        elif isolation_level == ISOLATION_READ_COMMITTED:
            bound = lg.last_stable_offset
        else:
            bound = lg.high_watermark
        if req.timestamp == LATEST_TIMESTAMP:
            # The partition's current leader epoch, whatever the offset (Kafka's Partition.fetchOffsetForTimestamp):
            # also for an empty log, and for a last stable offset held back by an open transaction.
            resp.timestamp, resp.offset = -1, bound
            epoch: int | None = part.leader_epoch
        elif req.timestamp == EARLIEST_TIMESTAMP:
            resp.timestamp, resp.offset = -1, lg.log_start_offset
            epoch = lg.leader_epoch_cache.epoch_for_offset(lg.log_start_offset)
        else:
            found = lg.fetch_offset_by_timestamp(req.timestamp)
            if found is None or found.offset >= bound:
                resp.timestamp, resp.offset = -1, -1
                epoch = None
            else:
                resp.timestamp, resp.offset = found.timestamp, found.offset
                epoch = found.leader_epoch
        if version >= 4:
            resp.leader_epoch = -1 if epoch is None else epoch
    except (KafkaError, OSError) as exc:  # one partition's failure must not fail its neighbours
        resp.error_code = storage_error_code(exc)
    return resp


def _old_style_offsets(part: Partition, timestamp: int, max_num: int, replica_id: int) -> list[int]:
    lg = part.log
    if max_num <= 0:
        return []
    if timestamp == EARLIEST_TIMESTAMP:
        return [lg.log_start_offset]
    end = lg.log_end_offset if replica_id >= 0 else lg.high_watermark
    segments = lg.log_segments()
    bases = [s.base_offset for s in segments]
    if timestamp == LATEST_TIMESTAMP:
        candidates = [end, *(b for b in reversed(bases) if b < end)]
    else:
        candidates = [s.base_offset for s in reversed(segments) if s.largest_timestamp() <= timestamp]
    offsets = sorted({max(o, lg.log_start_offset) for o in candidates}, reverse=True)
    return offsets[:max_num]
