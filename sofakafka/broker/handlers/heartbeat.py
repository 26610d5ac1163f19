"""Heartbeat (API key 12), versions 0-4.

A member's liveness: each heartbeat restarts its session timer (DelayedHeartbeat, a timer on the loop,
never polled). During a rebalance it is answered REBALANCE_IN_PROGRESS, which tells the member to rejoin.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 adds the throttle time; v2 changes only throttling semantics; v3 adds
``group_instance_id``; v4 is flexible.

Authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse


@handles(ApiKey.HEARTBEAT, 0, 4)
async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not authz.authorize(ctx, authz.AclOperation.READ, authz.ResourceType.GROUP, request.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await wait_for(ctx.broker.group_coordinator.heartbeat(request, ctx.api_version))
