"""AlterPartitionReassignments (API key 45), version 0 (flexible).

KIP-455: per partition, a replica list starts a reassignment (or replaces the running one, measured from the
original replicas), ``replicas`` null cancels it. Only the controller answers; another broker answers
NOT_CONTROLLER at the top level with no partition results, so admin clients find the controller and retry.
Per partition: NONE (started: completion is seen through ListPartitionReassignments or Metadata, as in
Kafka), INVALID_REPLICA_ASSIGNMENT (empty, duplicates, negative ids, added brokers not alive),
UNKNOWN_TOPIC_OR_PARTITION (also a topic being deleted), NO_REASSIGNMENT_IN_PROGRESS (cancelling nothing).
A partition named twice counts once (its last entry). The work runs on the controller's thread
(:meth:`~sofakafka.controller.reassignment.ReassignmentManager.alter_partition_reassignments`); if that
thread does not get to it within ``timeout_ms`` the answer is REQUEST_TIMED_OUT at the top level.

Authorization (with an authorizer): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top level and
for every partition asked for.
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers._controller import ask_controller
from sofakafka.controller.reassignment import ReassignmentResult
from sofakafka.controller.zk_data import TopicPartition
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)

TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResponse = TopicResponse.ReassignablePartitionResponse


def _top_level(code: ErrorCode, message: str | None) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(error_code=code, error_message=message)


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0)
async def handle_alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    if not authz.authorize_cluster(ctx, authz.AclOperation.ALTER):
        # Kafka's error response: the code at the top and on every partition asked for.
        denied, why = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        return AlterPartitionReassignmentsResponse(error_code=denied, error_message=why, responses=[
            TopicResponse(name=t.name, partitions=[
                PartitionResponse(partition_index=p.partition_index, error_code=denied, error_message=why)
                for p in t.partitions]) for t in request.topics])
    wanted: dict[TopicPartition, list[int] | None] = {}
    for topic in request.topics:
        for partition in topic.partitions:
            wanted[TopicPartition(topic.name, partition.partition_index)] = (
                None if partition.replicas is None else list(partition.replicas))
    timeout_s = max(request.timeout_ms, 0) / 1000
    try:
        results: dict[TopicPartition, ReassignmentResult] = await ask_controller(
            ctx, lambda c: c.reassignments.alter_partition_reassignments(wanted, timeout_s) if wanted else {},
            "The controller did not handle the reassignment in time.")
    except KafkaError as exc:
        return _top_level(exc.code, exc.message)
    by_topic: dict[str, list[PartitionResponse]] = {}
    for tp, (code, message) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            PartitionResponse(partition_index=tp.partition, error_code=code, error_message=message))
    return AlterPartitionReassignmentsResponse(
        error_message=None,
        responses=[TopicResponse(name=topic, partitions=parts) for topic, parts in by_topic.items()])
