"""OffsetFetch (API key 9), versions 0-7.

The committed offsets of a group, for the partitions asked or (v2+, null topics) every partition with one.
A partition without a committed offset answers offset -1 with no error.

The handler only hands the request to the group coordinator (sofakafka.broker.group) and waits for its
completion; every error travels in the response's error codes.

Version notes: v1 reads the same offsets as v0 (Kafka 2.6 read v0 from ZooKeeper); v2 adds a top-level
error and null topics meaning all; v3 the throttle time; v5 the committed leader epoch; v6 is flexible; v7 adds
``require_stable`` (KIP-447): with no transaction coordinator yet there are never pending transactional
offsets, so every offset is already stable.
"""

from __future__ import annotations

from sofakafka.broker.group.asyncio_bridge import wait_for
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse


@handles(ApiKey.OFFSET_FETCH, 0, 7)
async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    return await wait_for(ctx.broker.group_coordinator.offset_fetch(request, ctx.api_version))
