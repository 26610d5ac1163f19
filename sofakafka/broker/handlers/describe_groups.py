"""DescribeGroups (API key 15), versions 0-5.

State, protocol and members (client id, host, subscription and assignment bytes once Stable) of each
named group this broker coordinates; a group it does not coordinate answers NOT_COORDINATOR, an unknown group
the Dead state with no members, as Kafka does.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 adds the throttle time; v2 changes only throttling semantics; v3 adds the authorized
operations when asked (no authorizer yet: everything a group allows); v4 adds each member's
``group_instance_id``; v5 is flexible.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse


@handles(ApiKey.DESCRIBE_GROUPS, 0, 5)
async def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    return await wait_for(ctx.broker.group_coordinator.describe_groups(request, ctx.api_version))
