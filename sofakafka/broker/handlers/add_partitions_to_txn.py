"""AddPartitionsToTxn (API key 24), versions 0-1.

A transactional producer names the partitions it is about to write before its first write to each; its
coordinator records them (Ongoing in ``__transaction_state``) so that EndTxn knows where markers go. As in
Kafka 2.6, a partition the metadata does not know fails the whole request: it gets UNKNOWN_TOPIC_OR_PARTITION
and every other partition OPERATION_NOT_ATTEMPTED, and nothing is written. Otherwise every partition gets the
coordinator's answer: NONE, INVALID_PRODUCER_ID_MAPPING (unknown id, or another producer id), INVALID_PRODUCER_EPOCH
(fenced), CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written), NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (empty id).

Authorization (Kafka 2.6's checks, made before the coordinator is asked): WRITE on the transactional id, else
every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then WRITE on each topic. A topic without it (and,
as in Kafka, an internal topic, whoever asks: ``__consumer_offsets`` joins a transaction only through
AddOffsetsToTxn) fails the whole request like an unknown partition: TOPIC_AUTHORIZATION_FAILED for its
partitions, UNKNOWN_TOPIC_OR_PARTITION for unknown ones, OPERATION_NOT_ATTEMPTED for the rest.

Version notes: v1 is v0 with throttling semantics.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers.produce import INTERNAL_TOPICS
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult


def _response(errors: dict[tuple[str, int], int]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=partition, error_code=code))
    return AddPartitionsToTxnResponse(results=[TopicResult(name=t, results=ps) for t, ps in by_topic.items()])


def add_partitions_error_response(request: AddPartitionsToTxnRequest, version: int,
                                  code: int) -> AddPartitionsToTxnResponse:
    return _response({(t.name, p): code for t in request.topics for p in t.partitions})


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 1, error_response=add_partitions_error_response)
async def handle_add_partitions_to_txn(ctx: RequestContext,
                                       request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    partitions = [(t.name, p) for t in request.topics for p in t.partitions]
    if not authz.authorize(ctx, authz.AclOperation.WRITE, authz.ResourceType.TRANSACTIONAL_ID,
                           request.transactional_id):
        return _response(dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    writable = authz.authorized_names(ctx, authz.AclOperation.WRITE, authz.ResourceType.TOPIC,
                                      (t for t, _ in partitions if t not in INTERNAL_TOPICS))
    snap = ctx.broker.metadata()
    failed: dict[tuple[str, int], int] = {}
    for tp in partitions:
        if tp[0] not in writable:
            failed[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif snap.partition(*tp) is None:
            failed[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if failed:
        return _response({tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions})
    error = await wait_for(ctx.broker.transaction_coordinator.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, partitions))
    return _response(dict.fromkeys(partitions, error))
