"""OffsetCommit (API key 8), versions 0-8.

A group's consumed positions, with their metadata strings, written to the group's ``__consumer_offsets``
partition as one batch with acks=all; the answer comes once the append is acknowledged, and only then does
OffsetFetch see the offsets. Members of a live generation must name it (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS); a group with no members (generation -1) may commit freely, which is
what tools resetting offsets do. Metadata over ``offset.metadata.max.bytes`` is OFFSET_METADATA_TOO_LARGE,
partitions the cluster does not have UNKNOWN_TOPIC_OR_PARTITION.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v0 has no generation or member (Kafka 2.6 kept v0 commits in ZooKeeper; here they go to
the same log as every other version); v1 adds the generation, member id and a per-partition commit
timestamp; v2-v4 a retention time; v3 the throttle time; v5 drops the retention time
(``offsets.retention.minutes`` applies); v6 adds the committed leader epoch; v7 ``group_instance_id``; v8 is
flexible.

Authorization (with an authorizer): READ on the group, else every partition is GROUP_AUTHORIZATION_FAILED;
READ on each topic, else its partitions are TOPIC_AUTHORIZATION_FAILED (the others are committed).
"""

from __future__ import annotations

import copy

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse


@handles(ApiKey.OFFSET_COMMIT, 0, 8)
async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    if not authz.enabled(ctx):
        return await wait_for(ctx.broker.group_coordinator.offset_commit(request, ctx.api_version))

    def failed(topics: list[OffsetCommitRequest.OffsetCommitRequestTopic], code: int) -> list[RespTopic]:
        return [RespTopic(name=t.name, partitions=[RespPartition(partition_index=p.partition_index, error_code=code)
                                                   for p in t.partitions]) for t in topics]

    if not authz.authorize(ctx, authz.AclOperation.READ, authz.ResourceType.GROUP, request.group_id):
        return OffsetCommitResponse(topics=failed(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    readable = authz.authorized_names(ctx, authz.AclOperation.READ, authz.ResourceType.TOPIC,
                                      (t.name for t in request.topics))
    denied = [t for t in request.topics if t.name not in readable]
    if not denied:
        return await wait_for(ctx.broker.group_coordinator.offset_commit(request, ctx.api_version))
    allowed = copy.copy(request)
    allowed.topics = [t for t in request.topics if t.name in readable]
    response = (await wait_for(ctx.broker.group_coordinator.offset_commit(allowed, ctx.api_version))
                if allowed.topics else OffsetCommitResponse(topics=[]))
    response.topics = list(response.topics) + failed(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return response


RespTopic = OffsetCommitResponse.OffsetCommitResponseTopic
RespPartition = RespTopic.OffsetCommitResponsePartition
