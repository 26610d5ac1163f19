"""DeleteRecords (API key 21), versions 0-2.

Moves each partition's log start offset up to the requested offset, so records below it can no longer be
fetched and their segments are removed by the next retention pass (as in Kafka, space comes back when whole
segments fall below the log start). Offset -1 means the high watermark. An offset below 0 (other than -1) or
above the high watermark is OFFSET_OUT_OF_RANGE; a partition the metadata has but another broker leads
NOT_LEADER_OR_FOLLOWER, one it does not have (unknown topic, partition number out of range)
UNKNOWN_TOPIC_OR_PARTITION, as Kafka 2.6 answers; a topic whose ``cleanup.policy`` lacks ``delete``
POLICY_VIOLATION. An offset at or below the current log start changes nothing. The answer carries the
partition's low watermark (its log start offset afterwards); with a single replica there is nobody else to
wait for, so ``timeout_ms`` only matters once followers exist.

Version notes: v1 only changes throttling semantics, v2 is flexible.

Authorization (with an authorizer): DELETE on each topic, else its partitions are TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import functools

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.replica_manager import ReplicaManager, TopicPartition, storage_error_code
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1


def _delete_before(rm: ReplicaManager, topic: str, partition: int, offset: int) -> int:
    """On the append thread: the new low watermark."""
    log = rm.partition_or_error(topic, partition).log
    if not log.config.delete:
        raise KafkaError(ErrorCode.POLICY_VIOLATION,
                         f"Records of partition {topic}-{partition} can not be deleted due to the configured policy")
    target = log.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                         f"The offset {target} for partition {topic}-{partition} is not valid")
    log.maybe_increment_log_start_offset(target)
    return log.log_start_offset


@handles(ApiKey.DELETE_RECORDS, 0, 2)
async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    rm: ReplicaManager = ctx.broker.replica_manager
    topics: list[TopicResult] = []
    moved: list[TopicPartition] = []
    deletable = (authz.authorized_names(ctx, authz.AclOperation.DELETE, authz.ResourceType.TOPIC,
                                        (t.name for t in request.topics)) if authz.enabled(ctx) else None)
    for topic in request.topics:
        partitions: list[PartitionResult] = []
        for p in topic.partitions:
            result = PartitionResult(partition_index=p.partition_index, low_watermark=-1)
            if deletable is not None and topic.name not in deletable:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                partitions.append(result)
                continue
            try:
                result.low_watermark = await rm.run_append(
                    functools.partial(_delete_before, rm, topic.name, p.partition_index, p.offset))
                moved.append((topic.name, p.partition_index))
            except (KafkaError, OSError) as exc:  # one partition's failure must not fail its neighbours
                result.error_code = storage_error_code(exc)
            partitions.append(result)
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    # Fetches waiting below the new log start must learn they are out of range.
    rm.partitions_changed(moved)
    return DeleteRecordsResponse(topics=topics)
