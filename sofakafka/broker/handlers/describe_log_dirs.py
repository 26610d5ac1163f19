"""DescribeLogDirs (API key 35), versions 0-2.

One result per log dir of this broker (``log.dirs``), each listing the partitions stored there with their
size in bytes (all segments) and offset lag. For a current replica Kafka reports the lag as how far its log
end is behind the high watermark, never negative, which is 0 on a leader. A future replica (the copy a move
between dirs fills, AlterReplicaLogDirs) is listed in its own dir with ``is_future_key`` true and, as its lag,
how far its log end is behind the current replica's. ``topics`` null asks about every
partition; otherwise only the named partitions are listed (unknown ones are left out, as in Kafka). A dir
with no partitions is still listed, so a client can see every dir. A dir that went offline (a full disk, an
I/O error: storage/log_manager.py) is listed with KAFKA_STORAGE_ERROR and no partitions, as Kafka lists it.

Version notes: v1 only changes throttling semantics, v2 is flexible.

Authorization (with an authorizer): DESCRIBE on the cluster, else the answer lists no log dirs (Kafka 2.6).
"""

from __future__ import annotations

from pathlib import Path

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from sofakafka.storage.log_manager import LogManager

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = Result.DescribeLogDirsTopic
#: Kafka's answer when the lag cannot be known (the current replica is gone).
INVALID_OFFSET_LAG = -1
PartitionResult = TopicResult.DescribeLogDirsPartition


def _describe(lm: LogManager, wanted: set[tuple[str, int]] | None) -> list[Result]:
    by_dir: dict[Path, dict[str, list[PartitionResult]]] = {Path(d): {} for d in lm.log_dirs}
    for log in lm.all_logs + lm.future_logs:
        if wanted is not None and (log.topic, log.partition) not in wanted:
            continue
        if log.is_future:
            current = lm.get_log(log.topic, log.partition)
            lag = current.log_end_offset - log.log_end_offset if current is not None else INVALID_OFFSET_LAG
        else:
            lag = max(log.high_watermark - log.log_end_offset, 0)
        parent = Path(log.dir).parent
        topics = by_dir.setdefault(parent, {})
        topics.setdefault(log.topic, []).append(PartitionResult(
            partition_index=log.partition,
            partition_size=log.size,
            offset_lag=lag,
            is_future_key=log.is_future,
        ))
    offline = lm.offline_log_dirs
    return [
        Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(d), topics=[]) if d in offline else
        Result(error_code=ErrorCode.NONE, log_dir=str(d), topics=[
            TopicResult(name=t, partitions=sorted(ps, key=lambda p: p.partition_index))
            for t, ps in sorted(topics.items())
        ])
        for d, topics in by_dir.items()
    ]


@handles(ApiKey.DESCRIBE_LOG_DIRS, 0, 2)
async def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    wanted = None if request.topics is None else {
        (t.topic, p) for t in request.topics for p in t.partition_index}
    if not authz.authorize_cluster(ctx, authz.AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(results=[])
    lm: LogManager = ctx.broker.log_manager
    results = await ctx.broker.replica_manager.run_read(lambda: _describe(lm, wanted))
    return DescribeLogDirsResponse(results=results)
