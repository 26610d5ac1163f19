"""DescribeGroups (API key 15), versions 0-5.

State, protocol and members (client id, host, subscription and assignment bytes once Stable) of each
named group this broker coordinates; a group it does not coordinate answers NOT_COORDINATOR, an unknown group
the Dead state with no members, as Kafka does.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 adds the throttle time; v2 changes only throttling semantics; v3 adds the authorized
operations when asked (no authorizer yet: everything a group allows); v4 adds each member's
``group_instance_id``; v5 is flexible.

Authorization (with an authorizer): DESCRIBE on each group, else that group is GROUP_AUTHORIZATION_FAILED;
authorized operations (v3+, when asked) are the principal's own.
"""

from __future__ import annotations

import copy

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from sofakafka.security.authorizer import authorized_operations_bits


@handles(ApiKey.DESCRIBE_GROUPS, 0, 5)
async def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    if not authz.enabled(ctx):
        return await wait_for(ctx.broker.group_coordinator.describe_groups(request, ctx.api_version))
    visible = authz.authorized_names(ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.GROUP, request.groups)
    allowed = copy.copy(request)
    allowed.groups = [g for g in request.groups if g in visible]
    described = {}
    if allowed.groups:
        response = await wait_for(ctx.broker.group_coordinator.describe_groups(allowed, ctx.api_version))
        described = {g.group_id: g for g in response.groups}
        authorizer = ctx.broker.authorizer
        if ctx.api_version >= 3 and request.include_authorized_operations and authorizer is not None:
            ops = (authz.AclOperation.READ, authz.AclOperation.DESCRIBE, authz.AclOperation.DELETE)
            for g in described.values():  # KIP-430: what this principal may do, not every operation
                g.authorized_operations = authorized_operations_bits(authorizer.authorized_operations(
                    ctx.principal, ctx.client_host, authz.ResourceType.GROUP, g.group_id, ops))
    Group = DescribeGroupsResponse.DescribedGroup
    return DescribeGroupsResponse(groups=[
        described[g] if g in described else Group(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=g)
        for g in request.groups if g in described or g not in visible])
