"""EndTxn (API key 26), versions 0-1.

Commit or abort the producer's transaction: the coordinator writes PrepareCommit/PrepareAbort and answers, then
writes the markers to every partition of the transaction and finally CompleteCommit/CompleteAbort (until then the
producer's next request is answered CONCURRENT_TRANSACTIONS). Kafka 2.6's answers: INVALID_TXN_STATE for a
transaction that never added a partition (Empty) or for the opposite outcome of one already decided, NONE for a
retry of the same outcome once complete, CONCURRENT_TRANSACTIONS while it is completing,
INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (empty id).

Authorization (Kafka 2.6's check): WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

Version notes: v1 is v0 with throttling semantics.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse


@handles(ApiKey.END_TXN, 0, 1)
async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not authz.authorize(ctx, authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID,
                           request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error = await wait_for(ctx.broker.transaction_coordinator.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed))
    return EndTxnResponse(error_code=error)
