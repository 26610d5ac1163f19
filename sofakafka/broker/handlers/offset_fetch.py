"""OffsetFetch (API key 9), versions 0-7.

The committed offsets of a group, for the partitions asked or (v2+, null topics) every partition with one.
A partition without a committed offset answers offset -1 with no error.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 reads the same offsets as v0 (Kafka 2.6 read v0 from ZooKeeper); v2 adds a top-level
error and null topics meaning all; v3 the throttle time; v5 the committed leader epoch; v6 is flexible; v7 adds
``require_stable`` (KIP-447): with no transaction coordinator yet there are never pending transactional
offsets, so every offset is already stable.

Authorization (with an authorizer): DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; DESCRIBE on
each topic: asked by name, an undescribable topic's partitions are TOPIC_AUTHORIZATION_FAILED; asked for all
(null topics), undescribable topics are left out.
"""

from __future__ import annotations

import copy

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse


@handles(ApiKey.OFFSET_FETCH, 0, 7)
async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    version = ctx.api_version
    if not authz.enabled(ctx):
        return await wait_for(ctx.broker.group_coordinator.offset_fetch(request, version))
    if not authz.authorize(ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.GROUP, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if version >= 2:
            return OffsetFetchResponse(error_code=code, topics=[])
        return OffsetFetchResponse(topics=_failed(request.topics or [], code))
    if request.topics is None:
        response = await wait_for(ctx.broker.group_coordinator.offset_fetch(request, version))
        visible = authz.authorized_names(ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.TOPIC,
                                         (t.name for t in response.topics), log_if_denied=False)
        response.topics = [t for t in response.topics if t.name in visible]
        return response
    visible = authz.authorized_names(ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.TOPIC,
                                     (t.name for t in request.topics))
    denied = [t for t in request.topics if t.name not in visible]
    if not denied:
        return await wait_for(ctx.broker.group_coordinator.offset_fetch(request, version))
    allowed = copy.copy(request)
    allowed.topics = [t for t in request.topics if t.name in visible]
    response = (await wait_for(ctx.broker.group_coordinator.offset_fetch(allowed, version))
                if allowed.topics else OffsetFetchResponse(topics=[]))
    response.topics = list(response.topics) + _failed(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return response


RespTopic = OffsetFetchResponse.OffsetFetchResponseTopic
RespPartition = RespTopic.OffsetFetchResponsePartition


def _failed(topics: list[OffsetFetchRequest.OffsetFetchRequestTopic], code: int) -> list[RespTopic]:
    return [RespTopic(name=t.name, partitions=[RespPartition(partition_index=i, committed_offset=-1, metadata="",
                                                             error_code=code) for i in t.partition_indexes])
            for t in topics]
