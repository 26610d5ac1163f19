"""AlterReplicaLogDirs (API key 34), versions 0-1: move replicas of this broker between its log dirs (KIP-113).

Each partition named goes to the dir its entry names (a partition named under two dirs goes to the last, as
Kafka 2.6's request keeps one dir per partition, and is answered once). The work is the log manager's
(``LogManager.alter_replica_log_dir``, storage/log_mover.py copies): a future replica
``<topic>-<partition>.<id>-future`` in the new dir, filled while the partition keeps serving, swapped in once it
has caught up; DescribeLogDirs shows it with ``is_future_key`` and its lag until then. Answers per partition, in
Kafka 2.6's order of checks:

* INVALID_TOPIC_EXCEPTION: the future replica's directory name would be longer than 255 bytes (KAFKA-4893);
* LOG_DIR_NOT_FOUND: the dir is not one of ``log.dirs`` (named as DescribeLogDirs names it, or as configured,
  absolute); KAFKA_STORAGE_ERROR: that dir is offline, or the partition's own is;
* a move under way to another dir is cancelled (its copy deleted); asking for the dir the log is in ends a move;
* the dir is remembered for a replica created on this broker later (REPLICA_NOT_AVAILABLE for it now, when the
  metadata knows the partition; UNKNOWN_TOPIC_OR_PARTITION when it does not);
* KAFKA_STORAGE_ERROR when any log dir is offline: no copy is started then, as in Kafka;
* NONE: the move started, was under way to that dir already, or the log is there.

Version notes: v1 only changes throttling semantics.

Authorization (with an authorizer): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition.
"""

from __future__ import annotations

import logging

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
)
from sofakafka.storage.errors import ReplicaNotAvailableError

log = logging.getLogger(__name__)

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = TopicResult.AlterReplicaLogDirPartitionResult


def partition_dirs(request: AlterReplicaLogDirsRequest) -> dict[tuple[str, int], str]:
    """Partition -> dir, the last entry winning (Kafka's ``partitionDirs``)."""
    out: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                out[(t.name, p)] = d.path
    return out


def _response(results: dict[tuple[str, int], ErrorCode]) -> AlterReplicaLogDirsResponse:
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=partition, error_code=code))
    return AlterReplicaLogDirsResponse(results=[TopicResult(topic_name=t, partitions=ps)
                                                for t, ps in by_topic.items()])


@handles(ApiKey.ALTER_REPLICA_LOG_DIRS, 0, 1)
async def handle_alter_replica_log_dirs(ctx: RequestContext,
                                        request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    wanted = partition_dirs(request)
    if not authz.authorize_cluster(ctx, authz.AclOperation.ALTER):
        return _response(dict.fromkeys(wanted, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    broker = ctx.broker
    lm = broker.log_manager
    snapshot = broker.metadata()

    def alter_all() -> dict[tuple[str, int], ErrorCode]:
        results: dict[tuple[str, int], ErrorCode] = {}
        for (topic, partition), path in wanted.items():
            try:
                started = lm.alter_replica_log_dir(topic, partition, path)
                results[(topic, partition)] = ErrorCode.NONE
                if started:
                    log.info("AlterReplicaLogDirs from %s: moving %s-%d to %s", ctx.principal, topic, partition, path)
            except ReplicaNotAvailableError:
                known = snapshot.partition(topic, partition) is not None
                results[(topic, partition)] = (ErrorCode.REPLICA_NOT_AVAILABLE if known
                                               else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            except KafkaError as exc:
                log.warning("AlterReplicaLogDirs: cannot move %s-%d to %s: %s", topic, partition, path, exc)
                results[(topic, partition)] = exc.code
        return results

    # Off the loop: creating the copy fsyncs, and waits for a cleaner pass over the log to stop.
    return _response(await broker.run_blocking(alter_all))
