"""OffsetDelete (API key 47), versions 0-0.

KIP-496: deletes the committed offsets of some partitions of a group, with tombstones, provided the group
is not consuming those topics (GROUP_SUBSCRIBED_TO_TOPIC per partition otherwise).

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: only v0 exists in Kafka 2.6.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse


@handles(ApiKey.OFFSET_DELETE, 0, 0)
async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    return await wait_for(ctx.broker.group_coordinator.offset_delete(request, ctx.api_version))
