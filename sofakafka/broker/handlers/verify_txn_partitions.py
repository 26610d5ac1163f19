"""VerifyTxnPartitions (sofakafka's inter-broker key 10024, version 0; not advertised, not Kafka's).

A partition leader asks the transaction coordinator whether partitions belong to producers' ongoing
transactions before accepting the first transactional batch of a transaction there (KIP-890-style
verification, ``transaction.partition.verification.enable``). Read-only: per partition NONE (in the ongoing
transaction), INVALID_TXN_STATE (not in it, or no transaction open), INVALID_PRODUCER_EPOCH,
INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS (the transaction is ending), NOT_COORDINATOR or
COORDINATOR_LOAD_IN_PROGRESS. See sofakafka/protocol/internal.py for the layout.

Authorization (with an authorizer): CLUSTER_ACTION, like every inter-broker request; without it every
partition is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.internal import (
    VERIFY_TXN_PARTITIONS,
    VerifyTxnPartitionsRequest,
    VerifyTxnPartitionsResponse,
)

Result = VerifyTxnPartitionsResponse.Result


def verify_error_response(request: VerifyTxnPartitionsRequest, version: int,
                          code: int) -> VerifyTxnPartitionsResponse:
    return VerifyTxnPartitionsResponse(results=[
        Result(transactional_id=txn.transactional_id, topics=[
            Result.Topic(name=t.name, partitions=[Result.Topic.Partition(partition_index=p, error_code=code)
                                                  for p in t.partitions]) for t in txn.topics])
        for txn in request.transactions])


@handles(VERIFY_TXN_PARTITIONS, 0, 0, advertised=False, error_response=verify_error_response)
async def handle_verify_txn_partitions(ctx: RequestContext,
                                       request: VerifyTxnPartitionsRequest) -> VerifyTxnPartitionsResponse:
    authz.require_cluster_action(ctx)
    coordinator = ctx.broker.transaction_coordinator
    results = []
    for txn in request.transactions:
        partitions = [(t.name, p) for t in txn.topics for p in t.partitions]
        errors = coordinator.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions)
        by_topic: dict[str, list[Result.Topic.Partition]] = {}
        for (topic, partition), code in errors.items():
            by_topic.setdefault(topic, []).append(Result.Topic.Partition(partition_index=partition, error_code=code))
        results.append(Result(transactional_id=txn.transactional_id,
                              topics=[Result.Topic(name=n, partitions=ps) for n, ps in by_topic.items()]))
    return VerifyTxnPartitionsResponse(results=results)
