"""ListPartitionReassignments (API key 46), version 0 (flexible).

KIP-455: the partitions being reassigned, each with its full replica list and the replicas being added and
removed. ``topics`` null lists every ongoing reassignment; named partitions that are not moving, or do not
exist, are left out without an error, as in Kafka. Only the controller answers; another broker answers
NOT_CONTROLLER at the top level. Read on the controller's thread, whose view is what completes them; past
``timeout_ms`` the answer is REQUEST_TIMED_OUT.

Authorization (with an authorizer): DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers._controller import ask_controller
from sofakafka.controller.reassignment import OngoingReassignment
from sofakafka.controller.zk_data import TopicPartition
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

TopicReassignment = ListPartitionReassignmentsResponse.OngoingTopicReassignment
PartitionReassignment = TopicReassignment.OngoingPartitionReassignment


def _top_level(code: ErrorCode, message: str | None) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=code, error_message=message)


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def handle_list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not authz.authorize_cluster(ctx, authz.AclOperation.DESCRIBE):
        return _top_level(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    wanted = None if request.topics is None else list(dict.fromkeys(
        TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes))
    timeout_s = max(request.timeout_ms, 0) / 1000
    try:
        ongoing: dict[TopicPartition, OngoingReassignment] = await ask_controller(
            ctx, lambda c: c.reassignments.list_partition_reassignments(wanted, timeout_s),
            "The controller did not list the reassignments in time.")
    except KafkaError as exc:
        return _top_level(exc.code, exc.message)
    by_topic: dict[str, list[PartitionReassignment]] = {}
    for tp, r in ongoing.items():
        by_topic.setdefault(tp.topic, []).append(PartitionReassignment(
            partition_index=tp.partition, replicas=list(r.replicas), adding_replicas=list(r.adding_replicas),
            removing_replicas=list(r.removing_replicas)))
    return ListPartitionReassignmentsResponse(
        error_message=None, topics=[TopicReassignment(name=topic, partitions=parts) for topic, parts in by_topic.items()])
