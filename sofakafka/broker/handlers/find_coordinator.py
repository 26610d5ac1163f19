"""FindCoordinator (API key 10), versions 0-3.

Key type 0 (group; the only kind before v1): the coordinator of a group is the leader of its
``__consumer_offsets`` partition, ``abs(String.hashCode(group_id)) % partitions``. The first request creates the
topic (offsets_topic.py: Kafka's createInternalTopic, which also refuses while fewer brokers are alive than
``offsets.topic.replication.factor``) and is answered COORDINATOR_NOT_AVAILABLE, as is any request while the
partition has no leader, or while this broker was elected but does not serve the partition yet (the same
LeaderAndIsr-before-UpdateMetadata order the Metadata handler keeps). Clients retry that error.

Key type 1 (transaction): the same for a transactional id and ``__transaction_state`` (partition
``abs(String.hashCode(transactional_id)) % partitions``, created on first use by transaction_topic.py with
Kafka's enforced configs and ``transaction.state.log.*``). Any other key type is INVALID_REQUEST.

The coordinator's address is given on the listener the client connected through. Version notes: v1 adds
``key_type``, the throttle time and ``error_message`` (Kafka sends "NONE" on success); v2 changes only
throttling semantics; v3 is flexible.

Authorization (with an authorizer): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) or on the
transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from sofakafka.broker.context import InternalTopicRuntime
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.offsets_topic import GROUP_METADATA_TOPIC
from sofakafka.broker.txn import TRANSACTION_STATE_TOPIC
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1

_MESSAGES = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client "
                               "library or the message was sent to an incompatible broker. See the broker logs "
                               "for more details.",
}


def _error(code: ErrorCode) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(error_code=code, error_message=_MESSAGES.get(code, code.name), node_id=-1,
                                   host="", port=-1)


@handles(ApiKey.FIND_COORDINATOR, 0, 3)
async def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    key_type = request.key_type if ctx.api_version >= 1 else KEY_TYPE_GROUP
    if key_type == KEY_TYPE_GROUP and not authz.authorize(ctx, authz.AclOperation.DESCRIBE,
                                                          authz.ResourceType.GROUP, request.key):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if key_type == KEY_TYPE_TRANSACTION and not authz.authorize(ctx, authz.AclOperation.DESCRIBE,
                                                                authz.ResourceType.TRANSACTIONAL_ID, request.key):
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    broker = ctx.broker
    snap = broker.metadata()
    runtime: InternalTopicRuntime
    if key_type == KEY_TYPE_GROUP:
        topic_name, runtime = GROUP_METADATA_TOPIC, broker.group_runtime
        index = broker.group_coordinator.partition_for(request.key)
    elif key_type == KEY_TYPE_TRANSACTION:
        topic_name, runtime = TRANSACTION_STATE_TOPIC, broker.transaction_runtime
        index = broker.transaction_coordinator.partition_for(request.key)
    else:
        return _error(ErrorCode.INVALID_REQUEST)
    topic = snap.topics.get(topic_name)
    if topic is None:
        return _error(await runtime.create_topic(ctx.client_id))
    partition = topic.partitions.get(index)
    if partition is None or partition.leader < 0:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    leader = partition.leader
    if leader == broker.broker_id and broker.replica_manager.get_partition((topic_name, partition.partition)) is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    endpoint = snap.endpoint(leader, ctx.listener_name)
    if endpoint is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    host = endpoint.host
    if not host and leader == broker.broker_id:
        own = next((b for b in broker.listeners if b.listener_name == ctx.listener_name), None)
        host = own.advertised_host if own is not None else ""
    return FindCoordinatorResponse(error_code=ErrorCode.NONE, error_message="NONE", node_id=leader, host=host or "",
                                   port=endpoint.port)
