"""JoinGroup (API key 11), versions 0-7.

A member joins (or rejoins) a group and waits until the rebalance completes: the coordinator answers once
every known member rejoined or the rebalance timeout passed (DelayedJoin), after
``group.initial.rebalance.delay.ms`` for a new group, or at once with MEMBER_ID_REQUIRED for an unknown member
of v4+ (KIP-394). The leader gets every member's subscription; the others get an empty member list. Static
members (``group.instance.id``, KIP-345) rejoining keep their assignment without a rebalance; a second live
member with the same instance id is fenced (FENCED_INSTANCE_ID). The client host recorded for DescribeGroups is
written as Kafka writes it, ``/<address>``.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 adds ``rebalance_timeout_ms`` (v0 uses the session timeout for both); v2 the throttle
time; v3 nothing; v4 requires a known member id; v5 adds ``group_instance_id``; v6 is flexible; v7 adds the
protocol type and name to the response.

Authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse


@handles(ApiKey.JOIN_GROUP, 0, 7)
async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    if not authz.authorize(ctx, authz.AclOperation.READ, authz.ResourceType.GROUP, request.group_id):
        denied = JoinGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if ctx.api_version >= 7:
            denied.protocol_name = None  # nullable from v7, and null in Kafka's answer
        return denied
    response = await wait_for(ctx.broker.group_coordinator.join_group(
        request, ctx.api_version, ctx.client_id or "", "/" + ctx.client_host))
    # A member of a filtered group is known to every broker before it is answered (group_filters).
    broker = ctx.broker
    await broker.group_filters.publish_members(broker.group_coordinator, request.group_id, broker.run_blocking)
    return response
