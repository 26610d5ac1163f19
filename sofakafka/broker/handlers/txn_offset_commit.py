"""TxnOffsetCommit (API key 28), versions 0-3.

The offsets of ``sendOffsetsToTransaction``: the group coordinator writes them to ``__consumer_offsets`` as a
transactional batch of the producer and keeps them pending; they become the group's committed offsets when the
transaction's COMMIT marker reaches that partition and vanish at ABORT (OffsetFetch v7 with ``require_stable``
answers UNSTABLE_OFFSET_COMMIT for them meanwhile). Errors per partition as Kafka 2.6 gives them:
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (COORDINATOR_NOT_AVAILABLE before v2), INVALID_GROUP_ID,
UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster lacks, and from v3 (KIP-447) UNKNOWN_MEMBER_ID for a member
id the group does not have, ILLEGAL_GENERATION for another generation, FENCED_INSTANCE_ID; an offset whose
metadata is too long is OFFSET_METADATA_TOO_LARGE. Nothing is written when the request is refused.

Version notes: v2 adds the committed leader epoch; v3 (flexible) the member id, generation and group instance id.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.protocol.api import ApiKey
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
    return await wait_for(ctx.broker.group_coordinator.txn_offset_commit(request, ctx.api_version))
