"""SyncGroup (API key 14), versions 0-5.

After JoinGroup the leader sends the assignment of every member and each follower asks for its own; all
wait until the leader's assignment is written to ``__consumer_offsets`` (acks=all), then get their share.
Stale generations are ILLEGAL_GENERATION, unknown members UNKNOWN_MEMBER_ID, a sync while the group
rebalances again REBALANCE_IN_PROGRESS.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 adds the throttle time; v2 changes only throttling semantics; v3 adds
``group_instance_id``; v4 is flexible; v5 adds the protocol type and name (checked against the group's, as
INCONSISTENT_GROUP_PROTOCOL).

Authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse


@handles(ApiKey.SYNC_GROUP, 0, 5)
async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if not authz.authorize(ctx, authz.AclOperation.READ, authz.ResourceType.GROUP, request.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    response = await wait_for(ctx.broker.group_coordinator.sync_group(request, ctx.api_version))
    # A member of a filtered group is known to every broker before it is answered (group_filters).
    broker = ctx.broker
    await broker.group_filters.publish_members(broker.group_coordinator, request.group_id, broker.run_blocking)
    return response
