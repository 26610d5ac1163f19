"""ListGroups (API key 16), versions 0-4.

The groups of every ``__consumer_offsets`` partition this broker coordinates (an admin client asks every
broker and merges); COORDINATOR_LOAD_IN_PROGRESS while a partition is still being loaded.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 adds the throttle time; v2 changes only throttling semantics; v3 is flexible; v4 adds
the ``states_filter`` and each group's state (KIP-518).

Authorization (with an authorizer): DESCRIBE on the cluster lists every group; otherwise only the groups the
principal may DESCRIBE are listed.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse


@handles(ApiKey.LIST_GROUPS, 0, 4)
async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    response = await wait_for(ctx.broker.group_coordinator.list_groups(request, ctx.api_version))
    if authz.enabled(ctx) and not authz.authorize_cluster(ctx, authz.AclOperation.DESCRIBE, log_if_denied=False):
        visible = authz.authorized_names(ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.GROUP,
                                         (g.group_id for g in response.groups), log_if_denied=False)
        response.groups = [g for g in response.groups if g.group_id in visible]
    return response
