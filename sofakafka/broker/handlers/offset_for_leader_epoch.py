"""OffsetForLeaderEpoch (API key 23), versions 0-3.

For each partition: the end offset of the requested leader epoch from the log's leader-epoch cache (the
start offset of the next higher epoch, or the log end offset for the current one), and from v1 the largest
epoch at or below the requested one, so a follower or a KIP-320 consumer truncates to where its log and ours
agree. An epoch the cache cannot place answers -1/-1 (UNDEFINED).

Version notes: v2 adds ``current_leader_epoch`` (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when it is older
or newer than ours); v3 adds ``replica_id`` (-1 consumer, -2 debug), which changes nothing for a leader.

Authorization (with an authorizer), as Kafka 2.6 checks it whoever asks (consumers use this API since KIP-320,
followers always did): CLUSTER_ACTION on the cluster answers every partition; without it each topic needs
DESCRIBE, else its partitions are TOPIC_AUTHORIZATION_FAILED (an unknown topic too).
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.replica_manager import ReplicaManager, storage_error_code
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
PartitionResult = TopicResult.OffsetForLeaderPartitionResult
PartitionRequest = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition


def offset_for_leader_epoch_error_response(request: OffsetForLeaderEpochRequest, version: int, code: int
                                           ) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(topics=[
        TopicResult(name=t.name, partitions=[PartitionResult(partition_index=p.partition_index, error_code=code,
                                                             leader_epoch=-1, end_offset=-1) for p in t.partitions])
        for t in request.topics])


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 3, error_response=offset_for_leader_epoch_error_response)
async def handle_offset_for_leader_epoch(ctx: RequestContext, request: OffsetForLeaderEpochRequest
                                         ) -> OffsetForLeaderEpochResponse:
    rm = ctx.broker.replica_manager
    visible: set[str] | None = None
    if authz.enabled(ctx) and not authz.authorize_cluster(ctx, authz.AclOperation.CLUSTER_ACTION,
                                                          log_if_denied=False):
        visible = authz.authorized_names(ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.TOPIC,
                                         (t.name for t in request.topics))

    def denied(p: PartitionRequest) -> PartitionResult:
        return PartitionResult(partition_index=p.partition_index, leader_epoch=-1, end_offset=-1,
                               error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)

    def lookup_all() -> list[TopicResult]:
        return [TopicResult(name=t.name, partitions=[
            _end_offset(rm, t.name, p) if visible is None or t.name in visible else denied(p)
            for p in t.partitions]) for t in request.topics]

    return OffsetForLeaderEpochResponse(topics=await rm.run_read(lookup_all))


def _end_offset(rm: ReplicaManager, topic: str, req: PartitionRequest) -> PartitionResult:
    result = PartitionResult(partition_index=req.partition_index, leader_epoch=-1, end_offset=-1)
    try:
        part = rm.partition_or_error(topic, req.partition_index)
        part.check_leader_epoch(req.current_leader_epoch)
        result.leader_epoch, result.end_offset = part.log.end_offset_for_epoch(req.leader_epoch)
    except (KafkaError, OSError) as exc:  # one partition's failure must not fail its neighbours
        result.error_code = storage_error_code(exc)
    return result
