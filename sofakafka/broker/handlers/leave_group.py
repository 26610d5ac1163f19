"""LeaveGroup (API key 13), versions 0-4.

Members leave at once instead of waiting out their session, so the rebalance starts now. From v3 a request
names a batch of members, by member id or by ``group.instance.id`` (KIP-345: tools remove static members
this way), each answered on its own.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 adds the throttle time; v2 changes only throttling semantics; v3 replaces
``member_id`` by the ``members`` batch with per-member errors; v4 is flexible.

Authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse


@handles(ApiKey.LEAVE_GROUP, 0, 4)
async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not authz.authorize(ctx, authz.AclOperation.READ, authz.ResourceType.GROUP, request.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    response = await wait_for(ctx.broker.group_coordinator.leave_group(request, ctx.api_version))
    # A member of a filtered group is known to every broker before it is answered (group_filters).
    broker = ctx.broker
    await broker.group_filters.publish_members(broker.group_coordinator, request.group_id, broker.run_blocking)
    return response
