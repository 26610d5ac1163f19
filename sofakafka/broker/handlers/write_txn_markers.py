"""WriteTxnMarkers (API key 27), version 0: inter-broker, from a transaction coordinator to a partition leader.

Each marker entry (producer id, epoch, commit or abort, coordinator epoch, partitions) becomes one COMMIT/ABORT
control batch per partition, appended with acks=all as the partition's leader (transaction_topic.py's ``write_markers``): the
last stable offset moves past the transaction, an ABORT goes into the segment's ``.txnindex``, and in
``__consumer_offsets`` the transaction's pending offset commits are settled. Per partition the answer is NONE,
NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION (not led here), NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
REQUEST_TIMED_OUT, INVALID_PRODUCER_EPOCH (the producer moved on to a newer epoch) or
TRANSACTION_COORDINATOR_FENCED (a newer coordinator already wrote there).

Authorization (with an authorizer): CLUSTER_ACTION on the cluster, as Kafka's inter-broker APIs; without it
every partition is CLUSTER_AUTHORIZATION_FAILED. The coordinators log in as the inter-broker principal.
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.replica_manager import MarkerEntry
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


def write_txn_markers_error_response(request: WriteTxnMarkersRequest, version: int,
                                     code: int) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(markers=[
        MarkerResult(producer_id=m.producer_id, topics=[
            TopicResult(name=t.name, partitions=[PartitionResult(partition_index=p, error_code=code)
                                                 for p in t.partition_indexes]) for t in m.topics])
        for m in request.markers])


@handles(ApiKey.WRITE_TXN_MARKERS, 0, 0, error_response=write_txn_markers_error_response)
async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    authz.require_cluster_action(ctx)
    entries: list[MarkerEntry] = [
        ((t.name, p), m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result)
        for m in request.markers for t in m.topics for p in t.partition_indexes]
    codes = iter(await ctx.broker.transaction_runtime.write_markers(entries))
    out = []
    for m in request.markers:
        topics = [TopicResult(name=t.name, partitions=[PartitionResult(partition_index=p, error_code=next(codes))
                                                       for p in t.partition_indexes]) for t in m.topics]
        out.append(MarkerResult(producer_id=m.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=out)
