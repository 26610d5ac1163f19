"""ElectLeaders (API key 43), versions 0-2.

Asks the controller to elect leaders: PREFERRED (v0 always; ``election_type`` 0 from v1) moves leadership
to each partition's first assigned replica when it is alive and in the ISR, UNCLEAN (1) gives a partition
with no live leader one from its live replicas even outside the ISR. Only the controller answers; another
broker returns NOT_CONTROLLER (per partition in v0, which has no top-level error, and top-level from v1), so
admin clients find the controller and retry. ``topic_partitions`` null means every partition that needs
the election. Per partition: NONE, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION for a topic being deleted
(Kafka 2.6's answer). A partition named twice is answered once. The election itself runs on the controller's
thread (:meth:`KafkaController.elect_leaders`); past ``timeout_ms`` the answer is REQUEST_TIMED_OUT.

Version notes: v1 adds ``election_type`` and the top-level ``error_code``; v2 is flexible.

Authorization (with an authorizer): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition
(and at the top level from v1).
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers._controller import ask_controller
from sofakafka.controller.context import ElectionResult, ElectionType
from sofakafka.controller.zk_data import TopicPartition
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse

TopicResult = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = ElectLeadersResponse.ReplicaElectionResult.PartitionResult


def _requested(request: ElectLeadersRequest) -> list[TopicPartition] | None:
    if request.topic_partitions is None:
        return None
    seen: dict[TopicPartition, None] = {}
    for topic in request.topic_partitions:
        for partition in topic.partition_id:
            seen[TopicPartition(topic.topic, partition)] = None
    return list(seen)


def _response(results: dict[TopicPartition, ElectionResult], error: ErrorCode = ErrorCode.NONE) -> ElectLeadersResponse:
    by_topic: dict[str, list[PartitionResult]] = {}
    for tp, (code, message) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            PartitionResult(partition_id=tp.partition, error_code=code, error_message=message))
    return ElectLeadersResponse(error_code=error, replica_election_results=[
        TopicResult(topic=topic, partition_result=parts) for topic, parts in by_topic.items()])


@handles(ApiKey.ELECT_LEADERS, 0, 2)
async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    wanted = _requested(request)
    if ctx.api_version == 0:
        election_type = ElectionType.PREFERRED
    else:
        try:
            election_type = ElectionType(request.election_type)
        except ValueError:
            return _response({tp: (ErrorCode.INVALID_REQUEST, f"Unknown election type {request.election_type}.")
                              for tp in wanted or []}, ErrorCode.INVALID_REQUEST)
    if not authz.authorize_cluster(ctx, authz.AclOperation.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _response({tp: (code, None) for tp in wanted or []},
                         code if ctx.api_version >= 1 else ErrorCode.NONE)
    timeout_s = max(request.timeout_ms, 0) / 1000
    try:
        results: dict[TopicPartition, ElectionResult] = await ask_controller(
            ctx, lambda c: c.elect_leaders(wanted, election_type, timeout_s), "The election did not complete in time.")
    except KafkaError as exc:
        # v0 has no top-level error: every partition carries it. A timeout is per partition in every version.
        top = exc.code if ctx.api_version >= 1 and exc.code == ErrorCode.NOT_CONTROLLER else ErrorCode.NONE
        return _response({tp: (exc.code, exc.message) for tp in wanted or []}, top)
    if ctx.api_version >= 1 and all(code == ErrorCode.NOT_CONTROLLER for code, _ in results.values()) and (
            results or not ctx.broker.controller.is_active):
        # The controller resigned between the check above and its thread running the election: say so at the
        # top as well, which is what makes clients look the controller up again and retry.
        return _response(results, ErrorCode.NOT_CONTROLLER)
    return _response(results)
