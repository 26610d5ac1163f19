"""TxnOffsetCommit (API key 28), versions 0-3.

The offsets of ``sendOffsetsToTransaction``: the group coordinator writes them to ``__consumer_offsets`` as a
transactional batch of the producer and keeps them pending; they become the group's committed offsets when the
transaction's COMMIT marker reaches that partition and vanish at ABORT (OffsetFetch v7 with ``require_stable``
answers UNSTABLE_OFFSET_COMMIT for them meanwhile). Errors per partition as Kafka 2.6 gives them:
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (COORDINATOR_NOT_AVAILABLE before v2), INVALID_GROUP_ID,
UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster lacks, and from v3 (KIP-447) UNKNOWN_MEMBER_ID for a member
id the group does not have, ILLEGAL_GENERATION for another generation, FENCED_INSTANCE_ID; an offset whose
metadata is too long is OFFSET_METADATA_TOO_LARGE. Nothing is written when the request is refused.

Authorization (Kafka 2.6's checks, in its order): WRITE on the transactional id (else every partition is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else GROUP_AUTHORIZATION_FAILED), then READ on each
topic: a topic without it is TOPIC_AUTHORIZATION_FAILED and only the others reach the group coordinator.

Version notes: v2 adds the committed leader epoch; v3 (flexible) the member id, generation and group instance id.
"""

from __future__ import annotations

import copy

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse

T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
P = T.TxnOffsetCommitResponsePartition


def txn_offset_commit_error_response(request: TxnOffsetCommitRequest, version: int,
                                     code: int) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in request.topics])


@handles(ApiKey.TXN_OFFSET_COMMIT, 0, 3, error_response=txn_offset_commit_error_response)
async def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    if not authz.authorize(ctx, authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID,
                           request.transactional_id):
        return txn_offset_commit_error_response(request, ctx.api_version,
                                                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authz.authorize(ctx, authz.AclOperation.READ, authz.ResourceType.GROUP, request.group_id):
        return txn_offset_commit_error_response(request, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = authz.authorized_names(ctx, authz.AclOperation.READ, authz.ResourceType.TOPIC,
                                      (t.name for t in request.topics))
    refused = [t for t in request.topics if t.name not in readable]
    if refused:
        request = copy.copy(request)
        request.topics = [t for t in request.topics if t.name in readable]
    response = await wait_for(ctx.broker.group_coordinator.txn_offset_commit(request, ctx.api_version))
    response.topics += [T(name=t.name, partitions=[P(partition_index=p.partition_index,
                                                     error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                                   for p in t.partitions]) for t in refused]
    return response
