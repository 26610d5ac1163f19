"""DeleteGroups (API key 42), versions 0-2.

Deletes groups with no members: a tombstone for the group and for each of its committed offsets goes to
``__consumer_offsets``; a group with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 changes only throttling semantics; v2 is flexible.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse


@handles(ApiKey.DELETE_GROUPS, 0, 2)
async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    return await wait_for(ctx.broker.group_coordinator.delete_groups(request, ctx.api_version))
