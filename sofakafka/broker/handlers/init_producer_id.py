"""InitProducerId (API key 22), versions 0-3.

An idempotent producer (``transactional_id`` null) gets a fresh producer id with epoch 0, from the block this
broker claimed in ``/latest_producer_id_block`` (``producer_id_manager``). As in Kafka 2.6, an idempotent
producer that sends its current id and epoch (v3, KIP-360) also gets a fresh id: only transactional ids keep
theirs across epoch bumps. The produce path then enforces the producer's sequence numbers and epoch through
the log's producer state (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, duplicates answered with
their original offsets).

Transactional producers need the transaction coordinator, which is not part of this broker yet: a non-null
``transactional_id`` is answered COORDINATOR_NOT_AVAILABLE (retriable, so a client retries until its own
timeout and reports it) and logged once per request.

Version notes: v1 is v0 with throttling semantics; v2 is the flexible encoding; v3 adds the producer's
current id and epoch.

Authorization (with an authorizer): WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
or, for an idempotent producer, IDEMPOTENT_WRITE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

log = logging.getLogger(__name__)


@handles(ApiKey.INIT_PRODUCER_ID, 0, 3)
async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None and not authz.authorize(
            ctx, authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                                      producer_epoch=-1)
    if request.transactional_id is None and not authz.authorize_cluster(ctx, authz.AclOperation.IDEMPOTENT_WRITE):
        return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1,
                                      producer_epoch=-1)
    if request.transactional_id is not None:
        log.info("InitProducerId for transactional id %r from %s: transactions are not supported yet",
                 request.transactional_id, ctx.client_id)
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1,
                                      producer_epoch=-1)
    manager = ctx.broker.producer_id_manager
    producer_id = await ctx.broker.run_blocking(manager.generate_producer_id)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
