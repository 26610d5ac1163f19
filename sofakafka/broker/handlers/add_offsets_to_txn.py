"""AddOffsetsToTxn (API key 25), versions 0-1.

``sendOffsetsToTransaction`` first adds the group's ``__consumer_offsets`` partition to the transaction (the
partition the group coordinator keeps the group in), exactly as AddPartitionsToTxn adds a data partition, so the
transaction's COMMIT or ABORT marker also reaches the TxnOffsetCommit records the producer writes next. Errors are
the coordinator's, as for AddPartitionsToTxn.

Authorization (Kafka 2.6's checks): WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
then READ on the group (else GROUP_AUTHORIZATION_FAILED).

Version notes: v1 is v0 with throttling semantics.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.offsets_topic import GROUP_METADATA_TOPIC
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse


@handles(ApiKey.ADD_OFFSETS_TO_TXN, 0, 1)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not authz.authorize(ctx, authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID,
                           request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authz.authorize(ctx, authz.AclOperation.READ, authz.ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    broker = ctx.broker
    tp = (GROUP_METADATA_TOPIC, broker.group_coordinator.partition_for(request.group_id))
    error = await wait_for(broker.transaction_coordinator.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [tp]))
    return AddOffsetsToTxnResponse(error_code=error)
