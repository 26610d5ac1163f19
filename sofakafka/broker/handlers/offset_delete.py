"""OffsetDelete (API key 47), versions 0-0.

KIP-496: deletes the committed offsets of some partitions of a group, with tombstones, provided the group
is not consuming those topics (GROUP_SUBSCRIBED_TO_TOPIC per partition otherwise).

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: only v0 exists in Kafka 2.6.

Authorization (with an authorizer): DELETE on the group, else GROUP_AUTHORIZATION_FAILED; READ on each topic,
else its partitions are TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import copy

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse


@handles(ApiKey.OFFSET_DELETE, 0, 0)
async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not authz.enabled(ctx):
        return await wait_for(ctx.broker.group_coordinator.offset_delete(request, ctx.api_version))
    if not authz.authorize(ctx, authz.AclOperation.DELETE, authz.ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = authz.authorized_names(ctx, authz.AclOperation.READ, authz.ResourceType.TOPIC,
                                      (t.name for t in request.topics))
    denied = [t for t in request.topics if t.name not in readable]
    allowed = copy.copy(request)
    allowed.topics = [t for t in request.topics if t.name in readable]
    response = await wait_for(ctx.broker.group_coordinator.offset_delete(allowed, ctx.api_version))
    Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
    Partition = Topic.OffsetDeleteResponsePartition
    response.topics = list(response.topics) + [
        Topic(name=t.name, partitions=[Partition(partition_index=p.partition_index,
                                                 error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                       for p in t.partitions]) for t in denied]
    return response
