"""StopReplica (API key 5), versions 0-3: the controller tells a broker to stop a replica and, for topic deletion,
to delete its log.

In the watch design (docs/cluster.md) the controller sends one kind of StopReplica: ``delete`` for the replicas of
a topic being deleted, to every live broker holding one, because it must learn when each replica is gone before
it removes the topic's znodes. The controller broker's sender (``Broker.stop_replicas``) builds the request with
:func:`stop_replica_request` and reads the answer with :func:`partition_errors`; this module answers it.

Checks, in Kafka 2.6's order:

* v1+: ``broker_epoch`` older than our registration's (the request was meant for an earlier life of this broker,
  which restarted meanwhile): STALE_BROKER_EPOCH, with no partitions. -1 is "unknown" and not checked, as Kafka
  accepts requests from controllers that predate KIP-380.
* ``controller_epoch`` older than the newest we know: STALE_CONTROLLER_EPOCH for the request and every
  partition. The newest is read from ``/controller_epoch`` itself (ZooKeeper orders it; a controller writes its
  epoch there before it sends anything), falling back to the largest epoch in the partition states we hold when
  the store cannot be read. Kafka's broker remembers the largest epoch of the requests it obeyed instead;
  reading the znode knows at least as much.
* v3, per partition (KIP-570): a leader epoch of -2 (Kafka's "epoch during delete", what deletion sends) or -1
  (none given, as v0-v2 imply), or one newer than ours, stops the replica; an older one is FENCED_LEADER_EPOCH;
  an equal one STALE_CONTROLLER_EPOCH (the same generation cannot ask twice). A replica we do not host is
  "stopped" too: its log on disk, if any, is deleted (a broker that was down while its topic was deleted).

The work is the broker's ``stop_partitions`` (sofakafka/broker/context.py): stop fetching, stop serving, and with
``delete`` delete the log (the cleaner paused around it); a deletion also waits until our own metadata no longer
has the topic live, so a metadata apply in flight cannot re-create the log. Errors per partition: KAFKA_STORAGE_ERROR when the deletion
failed, REQUEST_TIMED_OUT when our metadata still shows the topic live (retried by the controller).

Not checked: CLUSTER_ACTION authorization (no handler authorizes yet), nor which listener the request came in on
(Kafka does not check it either).

Authorization (with an authorizer): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.controller import zk_data, zk_paths
from sofakafka.controller.metadata import ClusterMetadata
from sofakafka.controller.store import MetadataStore, StoreError
from sofakafka.controller.zk_data import TopicPartition, ZkDataError
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse

log = logging.getLogger(__name__)

EPOCH_DURING_DELETE = -2
"""The leader epoch a deletion's StopReplica carries (Kafka's ``LeaderAndIsr.EpochDuringDelete``): deletion does
not bump the partition's epoch, so the request says "whatever yours is"."""
NO_EPOCH = -1
UNKNOWN_BROKER_EPOCH = -1

_PartitionV0 = StopReplicaRequest.StopReplicaPartitionV0
_TopicV1 = StopReplicaRequest.StopReplicaTopicV1
_TopicState = StopReplicaRequest.StopReplicaTopicState
_PartitionState = StopReplicaRequest.StopReplicaTopicState.StopReplicaPartitionState
_PartitionError = StopReplicaResponse.StopReplicaPartitionError


def request_partitions(request: StopReplicaRequest, version: int) -> dict[TopicPartition, tuple[int, bool]]:
    """The partitions of a request of any version, each with its leader epoch and delete flag."""
    if version == 0:
        return {TopicPartition(p.topic_name, p.partition_index): (NO_EPOCH, request.delete_partitions)
                for p in request.ungrouped_partitions}
    if version <= 2:
        return {TopicPartition(t.name, p): (NO_EPOCH, request.delete_partitions)
                for t in request.topics for p in t.partition_indexes}
    return {TopicPartition(t.topic_name, p.partition_index): (p.leader_epoch, p.delete_partition)
            for t in request.topic_states for p in t.partition_states}


def stop_replica_request(version: int, *, controller_id: int, controller_epoch: int, broker_epoch: int,
                         partitions: Sequence[TopicPartition], delete: bool,
                         leader_epoch: int = EPOCH_DURING_DELETE) -> StopReplicaRequest:
    """The controller's request at ``version`` (the layout changed at v1 and v3; the delete flag and leader epoch
    went per partition at v3)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    request = StopReplicaRequest(controller_id=controller_id, controller_epoch=controller_epoch)
    if version >= 1:
        request.broker_epoch = broker_epoch
    if version == 0:
        request.delete_partitions = delete
        request.ungrouped_partitions = [_PartitionV0(topic_name=tp.topic, partition_index=tp.partition)
                                        for tp in partitions]
    elif version <= 2:
        request.delete_partitions = delete
        request.topics = [_TopicV1(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
    else:
        request.topic_states = [
            _TopicState(topic_name=t, partition_states=[
                _PartitionState(partition_index=p, leader_epoch=leader_epoch, delete_partition=delete) for p in ps])
            for t, ps in by_topic.items()]
    return request


def partition_errors(response: StopReplicaResponse, asked: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """The outcome of every partition asked about: a request-level error is every partition's (a STALE_BROKER_EPOCH
    answer names none), and a partition the answer leaves out did not get stopped."""
    asked = list(asked)
    if response.error_code != ErrorCode.NONE:
        return dict.fromkeys(asked, ErrorCode.for_code(response.error_code))
    answered = {TopicPartition(e.topic_name, e.partition_index): ErrorCode.for_code(e.error_code)
                for e in response.partition_errors}
    return {tp: answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in asked}


def newest_controller_epoch(store: MetadataStore, snap: ClusterMetadata) -> int:
    """The newest controller epoch we can know: ``/controller_epoch``, else the largest our partition states carry.
    Blocks on the store."""
    try:
        data, _ = store.get(zk_paths.CONTROLLER_EPOCH_PATH)
        return zk_data.decode_controller_epoch(data)
    except (StoreError, ZkDataError):
        return max((p.controller_epoch for topics in (snap.topics, snap.deleting) for t in topics.values()
                    for p in t.partitions.values()), default=-1)


def broker_epoch_is_stale(request_epoch: int, current_epoch: int) -> bool:
    """A newer epoch than ours is accepted: the controller can see our new registration before we learn its
    czxid ourselves."""
    return request_epoch != UNKNOWN_BROKER_EPOCH and request_epoch < current_epoch


def _error_response(partitions: Iterable[TopicPartition], code: ErrorCode) -> StopReplicaResponse:
    return StopReplicaResponse(error_code=code, partition_errors=[
        _PartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=code) for tp in partitions])


def _request_error(request: StopReplicaRequest, version: int, code: int) -> StopReplicaResponse:
    return _error_response(request_partitions(request, version), ErrorCode.for_code(code))


@handles(ApiKey.STOP_REPLICA, 0, 3, error_response=_request_error)
async def handle_stop_replica(ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    authz.require_cluster_action(ctx)
    broker = ctx.broker
    partitions = request_partitions(request, ctx.api_version)
    if ctx.api_version >= 1 and broker_epoch_is_stale(request.broker_epoch, broker.broker_epoch):
        return StopReplicaResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    store, snap = broker.metadata_store, broker.metadata()
    newest = await broker.run_blocking(lambda: newest_controller_epoch(store, snap))
    if request.controller_epoch < newest:
        log.info("StopReplica from controller %d with epoch %d, older than %d: ignored", request.controller_id,
                 request.controller_epoch, newest)
        return _error_response(partitions, ErrorCode.STALE_CONTROLLER_EPOCH)
    log.info("StopReplica from controller %d (epoch %d): %s", request.controller_id, request.controller_epoch,
             ", ".join(f"{tp.topic}-{tp.partition}{' (delete)' if delete else ''}"
                       for tp, (_, delete) in list(partitions.items())[:20]))
    results = await broker.stop_partitions(partitions)
    return StopReplicaResponse(error_code=ErrorCode.NONE, partition_errors=[
        _PartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=code)
        for tp, code in results.items()])
