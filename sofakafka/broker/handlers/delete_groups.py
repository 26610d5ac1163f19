"""DeleteGroups (API key 42), versions 0-2.

Deletes groups with no members: a tombstone for the group and for each of its committed offsets goes to
``__consumer_offsets``; a group with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 changes only throttling semantics; v2 is flexible.

Authorization (with an authorizer): DELETE on each group, else that group is GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import copy

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse


@handles(ApiKey.DELETE_GROUPS, 0, 2)
async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    if not authz.enabled(ctx):
        return await wait_for(ctx.broker.group_coordinator.delete_groups(request, ctx.api_version))
    deletable = authz.authorized_names(ctx, authz.AclOperation.DELETE, authz.ResourceType.GROUP, request.groups_names)
    allowed = copy.copy(request)
    allowed.groups_names = [g for g in request.groups_names if g in deletable]
    response = (await wait_for(ctx.broker.group_coordinator.delete_groups(allowed, ctx.api_version))
                if allowed.groups_names else DeleteGroupsResponse(results=[]))
    Result = DeleteGroupsResponse.DeletableGroupResult
    response.results = list(response.results) + [
        Result(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        for g in dict.fromkeys(request.groups_names) if g not in deletable]
    return response
