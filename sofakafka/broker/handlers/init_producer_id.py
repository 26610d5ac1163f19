"""InitProducerId (API key 22), versions 0-3.

An idempotent producer (``transactional_id`` null) gets a fresh producer id with epoch 0, from the block this
broker claimed in ``/latest_producer_id_block`` (``producer_id_manager``); as in Kafka 2.6 one that sends its
current id and epoch (v3, KIP-360) also gets a fresh id: only transactional ids keep theirs across epoch bumps.

A transactional producer asks the coordinator of its id (the leader of its ``__transaction_state`` partition,
which FindCoordinator named): the first request for an id allocates its producer id at epoch 0, each later one
bumps the epoch, fencing older instances. An open transaction is aborted first at a new epoch and the answer is
CONCURRENT_TRANSACTIONS, so the client retries. Errors as Kafka 2.6 gives them: INVALID_REQUEST for an empty id
or for a v3 request with only one of producer id and epoch set, INVALID_TRANSACTION_TIMEOUT when
``transaction_timeout_ms`` is not in (0, ``transaction.max.timeout.ms``], NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_EPOCH for a fenced v3 producer (KIP-360).

Version notes: v1 is v0 with throttling semantics; v2 is the flexible encoding; v3 adds the producer's
current id and epoch (KIP-360).

Authorization (with an authorizer, Kafka 2.6's checks, made before anything else): WRITE on the
transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) or, for an idempotent producer, IDEMPOTENT_WRITE on
the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _error(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)


@handles(ApiKey.INIT_PRODUCER_ID, 0, 3)
async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None and not authz.authorize(
            ctx, authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if request.transactional_id is None and not authz.authorize_cluster(ctx, authz.AclOperation.IDEMPOTENT_WRITE):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker = ctx.broker
    manager = broker.producer_id_manager
    pid, epoch = (request.producer_id, request.producer_epoch) if ctx.api_version >= 3 else (-1, -1)
    if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _error(ErrorCode.INVALID_REQUEST)
    if request.transactional_id is None:
        producer_id = await broker.run_blocking(manager.generate_producer_id)
        return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
    coordinator = broker.transaction_coordinator
    # Claiming a block may write to the metadata store, so a fresh id is taken off the loop beforehand; the
    # coordinator uses it only for a new transactional id or an exhausted epoch (an unused one is simply skipped).
    fresh = await broker.run_blocking(manager.generate_producer_id)
    result = await wait_for(coordinator.init_producer_id(
        request.transactional_id, request.transaction_timeout_ms,
        None if pid == NO_PRODUCER_ID else (pid, epoch), lambda: fresh))
    if result.error is not ErrorCode.NONE:
        return _error(result.error)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)
