"""Fetch (API key 1), versions 0-11.

Reads each partition from its fetch offset up to the partition's ``max_bytes`` and, from v3, the response's
``max_bytes`` (the first non-empty partition returns at least one whole batch, KIP-74; v0-2 keep the hard
limit). When less than ``min_bytes`` is readable the request waits in the fetch purgatory for at most
``max_wait_ms`` and is woken by appends to its partitions, never by polling. Consumers read up to the high
watermark, or with ``isolation_level`` 1 (read_committed, v4+) up to the last stable offset with the aborted
transactions of the range listed; followers (``replica_id`` >= 0) read up to the log end.

Version notes: v0-3 fetchers cannot read record batches v2, so stored batches are down-converted (v0-1 to
magic 0, v2-3 to magic 1; refused with UNSUPPORTED_VERSION when ``message.downconversion.enable`` is false);
v4 adds last stable offset and aborted transactions; v5 log start offsets; v7 fetch sessions (KIP-227, see
``fetch_session``) with a top-level error code; before v10 a topic whose ``compression.type`` is zstd is
UNSUPPORTED_COMPRESSION_TYPE (Kafka 2.6 decides by the config, not by the stored batches); v9 ``current_leader_epoch`` (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH); v11 rack id and ``preferred_read_replica`` (KIP-392, see ``replica_selector``: with the
rack-aware selector a consumer in another rack is sent to a follower in its own, which serves v11+ consumer
fetches up to its high watermark).

Quotas (consumers only; followers answer to the replication throttles): the response's size counts against
``consumer_byte_rate`` and the handling time against ``request_percentage``; a throttled fetch is answered
without records (its bytes taken back out of the rate) and with the throttle time, and the connection mutes
itself for that time (KIP-219; before v8 the response itself waits). Kafka's throttled answer also leaves the
partitions out; this one lists them, without records.

Server-side filtering: a consumer that is a member of a group with a filter (``group_filters``: known by
its client id and host, since a Fetch names no group) gets the records of its subscribed topics rewritten to
the ones the filter passes, offsets kept (``record_filter``); every other fetch looks its client up once in
an index, finds nothing, and gets the stored bytes untouched. A consumer connection's first Fetch first waits
until this broker has caught up with the filters and members published before it (one store sync and reload,
shared by the connections that ask at once), since this broker's watches may be slower than the consumer.

Authorization (with an authorizer, as Kafka 2.6): a follower fetch needs CLUSTER_ACTION on the cluster, else
every partition is TOPIC_AUTHORIZATION_FAILED; a consumer needs READ on each topic, else that topic's
partitions are TOPIC_AUTHORIZATION_FAILED (the others are served).

Record bytes are not re-encoded: the response is assembled from the codec's encoding of everything but the
records, with each partition's stored bytes spliced in as their own chunk (a ``RawResponse``), so they are
copied once, from the file into memory. True zero-copy (``sendfile`` of the segment slice) is not used: uvloop
implements neither ``loop.sendfile`` nor a way to interleave ``os.sendfile`` with its transport's buffered
writes, and uvloop's cheaper syscalls and callbacks are worth more across all APIs than saving one copy on
fetch (FileSlice keeps the option open for a transport that allows it). Measured on the 2-core test machine:
the ``pread`` of a 10 MB page-cached slice costs about 7.5 ms (1.4 GB/s), against about 45 ms per 10 MB of
end-to-end consumption by librdkafka (roughly 220 MB/s), so the copy is under a fifth of the fetch path.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable

from sofakafka.broker.fetch_session import FetchContext
from sofakafka.broker.group_filters import CATCH_UP_TIMEOUT_S
from sofakafka.broker.handlers import RawResponse, RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.record_filter import RecordMatcher
from sofakafka.broker.replica_manager import FetchPartitionRequest, FetchPartitionResult
from sofakafka.broker.replica_selector import RACK_AWARE_REPLICA_SELECTOR, preferred_read_replica
from sofakafka.broker.replication_quota import leader_throttled
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.fetch import FetchRequest, FetchResponse
from sofakafka.protocol.records import MAGIC_V0, MAGIC_V1
from sofakafka.security.quotas import CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionResponse = TopicResponse.FetchablePartitionResponse
Aborted = PartitionResponse.AbortedTransaction

_INT32 = struct.Struct(">i")
# connection_state key: this consumer connection's first Fetch caught up with the group filters.
_FILTERS_CAUGHT_UP = "fetch.group_filters_caught_up"
log = logging.getLogger(__name__)


def _down_conversion_magic(version: int) -> int | None:
    if version <= 1:
        return MAGIC_V0
    if version <= 3:
        return MAGIC_V1
    return None


def fetch_error_response(request: FetchRequest, version: int, code: int) -> FetchResponse:
    """Every partition carries the code (older versions have no other place for it), v7+ the top level too."""
    return FetchResponse(
        error_code=code if version >= 7 else 0,
        topics=[TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index, error_code=code, high_watermark=-1,
                              last_stable_offset=-1, log_start_offset=-1, aborted=None if version >= 4 else [],
                              preferred_read_replica=-1, records=b"")
            for p in t.fetch_partitions]) for t in request.topics])


@handles(ApiKey.FETCH, 0, 11, error_response=fetch_error_response)
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> RawResponse | FetchResponse:
    version = ctx.api_version
    broker = ctx.broker
    requested = [
        FetchPartitionRequest(t.name, p.partition_index, p.fetch_offset, p.max_bytes, p.current_leader_epoch,
                              p.log_start_offset)
        for t in request.topics
        for p in t.fetch_partitions
    ]
    if version >= 7:
        forgotten = [(f.name, i) for f in request.forgotten for i in f.forgotten_partition_indexes]
        fetch_ctx = broker.fetch_sessions.new_context(request.session_id, request.epoch, requested, forgotten,
                                                      privileged=request.replica_id >= 0,
                                                      replica_id=request.replica_id)
        if fetch_ctx.error != ErrorCode.NONE:
            return FetchResponse(error_code=fetch_ctx.error, session_id=0)
    else:
        fetch_ctx = FetchContext(requested)
    if request.replica_id < 0 and _FILTERS_CAUGHT_UP not in ctx.connection_state:
        await _catch_up_group_filters(ctx)
    # A follower's session: idle partitions are parked in it (see fetch_session) and cost nothing per fetch.
    follower_session = fetch_ctx.session.follower if fetch_ctx.session is not None else None
    preferred = _preferred_read_replicas(ctx, request, fetch_ctx.partitions) if version >= 11 else {}

    def filters() -> dict[tuple[str, int], RecordMatcher] | None:
        return _group_filters(ctx, request, fetch_ctx.partitions)

    denied = _unauthorized(ctx, request, fetch_ctx.partitions)
    max_bytes = request.max_bytes if version >= 3 else 0x7FFFFFFF
    min_bytes = request.min_bytes
    if request.replica_id < 0:
        # A consumer's answer is capped at what its byte-rate quota lets through in one quota window, as Kafka
        # caps it (KAFKA-9677): a larger answer would be throttled, hence emptied, at every try, and the consumer
        # would never get a record.
        cap = broker.client_quotas.max_value_in_quota_window(CONSUMER_BYTE_RATE, ctx.principal, ctx.client_id)
        max_bytes = min(max_bytes, cap)
        min_bytes = min(min_bytes, max_bytes)

    async def fetch(partitions: list[FetchPartitionRequest], max_wait_ms: int,
                    min_bytes: int) -> list[FetchPartitionResult]:
        if denied:
            allowed = [p for p in partitions if p.tp not in denied]
            results = iter(await fetch_allowed(allowed, max_wait_ms, min_bytes) if allowed else ())
            return [_DENIED if p.tp in denied else next(results) for p in partitions]
        return await fetch_allowed(partitions, max_wait_ms, min_bytes)

    async def fetch_allowed(partitions: list[FetchPartitionRequest], max_wait_ms: int,
                            min_bytes: int) -> list[FetchPartitionResult]:
        return await broker.replica_manager.fetch_messages(
            replica_id=request.replica_id,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation_level=request.isolation_level,
            partitions=partitions,
            hard_max_bytes_limit=version <= 2,
            to_magic=_down_conversion_magic(version),
            zstd_readable=version >= 10,
            follower_reads=version >= 11,
            filters=None if request.replica_id >= 0 else filters,
            session=follower_session,
        )

    # KIP-73: a follower's throttled partitions may be held back; see replication_quota.
    quota, throttled, held = leader_throttled(broker, request.replica_id, fetch_ctx.partitions)
    if held:
        results = await _fetch_holding_back(fetch, fetch_ctx.partitions, held, request.max_wait, min_bytes)
    else:
        results = await fetch(fetch_ctx.partitions, 0 if preferred else request.max_wait, min_bytes)
    if follower_session is not None:
        # Parked partitions that changed while this fetch was served (it was woken for them): answer them now.
        woken = fetch_ctx.take_woken()
        if woken:
            results = [*results, *(await _fetch_holding_back(fetch, woken, held, 0, 0) if held
                                   else await fetch(woken, 0, 0))]
    if quota is not None:
        quota.record(sum(len(r.records) for req, r in zip(fetch_ctx.partitions, results, strict=True)
                         if req.tp in throttled))
    if preferred:
        # Kafka answers a redirected partition without records: the consumer fetches them from the replica.
        results = [FetchPartitionResult(r.error_code, r.high_watermark, r.last_stable_offset, r.log_start_offset,
                                        r.aborted, b"") if req.tp in preferred else r
                   for req, r in zip(fetch_ctx.partitions, results, strict=True)]
    if request.replica_id >= 0:
        ctx.quota_done = True  # followers answer to the replication throttles, not to client quotas
        response = encode_fetch_response(version, fetch_ctx.session_id,
                                         fetch_ctx.response_partitions(results, preferred), preferred)
        if follower_session is not None:
            broker.fetch_sessions.park_idle(fetch_ctx, results)
        return response
    response = encode_fetch_response(version, fetch_ctx.session_id, fetch_ctx.response_partitions(results, preferred),
                                     preferred)
    throttle_ms = _record_quotas(ctx, response.size)
    if throttle_ms <= 0:
        return response
    # Throttled: no records this time (Kafka answers a throttled fetch empty), the throttle time says why.
    empty = [FetchPartitionResult(r.error_code, r.high_watermark, r.last_stable_offset, r.log_start_offset, r.aborted,
                                  b"") for r in results]
    return encode_fetch_response(version, fetch_ctx.session_id, fetch_ctx.response_partitions(empty, preferred),
                                 preferred, throttle_time_ms=throttle_ms)


def _record_quotas(ctx: RequestContext, response_size: int) -> int:
    """A consumer's response bytes against ``consumer_byte_rate`` and the request's time against
    ``request_percentage``; when either throttles, the bytes are taken back out (the client gets none)."""
    quotas = ctx.broker.client_quotas
    now = quotas.now_ms()
    request_time = quotas.record_request_time(ctx.principal, ctx.client_id, ctx.handler_seconds[0], now)
    bandwidth = quotas.record(CONSUMER_BYTE_RATE, ctx.principal, ctx.client_id, response_size, now)
    throttle = max(request_time, bandwidth)
    if throttle > 0:
        quotas.unrecord(CONSUMER_BYTE_RATE, ctx.principal, ctx.client_id, response_size, now)
        if bandwidth > request_time:
            quotas.throttle(CONSUMER_BYTE_RATE, ctx.principal, ctx.client_id, bandwidth, now)
        else:
            quotas.throttle(REQUEST_PERCENTAGE, ctx.principal, ctx.client_id, request_time, now)
    ctx.quota_done = True
    ctx.throttle_ms = max(ctx.throttle_ms, throttle)
    return throttle


_DENIED = FetchPartitionResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, None, b"")


def _unauthorized(ctx: RequestContext, request: FetchRequest,
                  partitions: list[FetchPartitionRequest]) -> set[tuple[str, int]]:
    if not authz.enabled(ctx) or not partitions:
        return set()
    if request.replica_id >= 0:
        if authz.authorize_cluster(ctx, authz.AclOperation.CLUSTER_ACTION):
            return set()
        return {p.tp for p in partitions}
    readable = authz.authorized_names(ctx, authz.AclOperation.READ, authz.ResourceType.TOPIC,
                                      (p.topic for p in partitions))
    return {p.tp for p in partitions if p.topic not in readable}


async def _fetch_holding_back(
    fetch: Callable[[list[FetchPartitionRequest], int, int], Awaitable[list[FetchPartitionResult]]],
    partitions: list[FetchPartitionRequest], held: set[tuple[str, int]], max_wait_ms: int, min_bytes: int,
) -> list[FetchPartitionResult]:
    """Held partitions are answered without records (their high watermark and errors as usual) and their
    bytes do not count towards ``min_bytes``, so the request still waits as Kafka's DelayedFetch does instead
    of sending the follower straight back."""
    free = [req for req in partitions if req.tp not in held]
    if free:
        free_results = iter(await fetch(free, max_wait_ms, min_bytes))
    else:
        await asyncio.sleep(max(0, max_wait_ms) / 1000.0)
        free_results = iter(())
    held_results = iter(await fetch([req for req in partitions if req.tp in held], 0, 0))
    out: list[FetchPartitionResult] = []
    for req in partitions:
        if req.tp in held:
            r = next(held_results)
            out.append(FetchPartitionResult(r.error_code, r.high_watermark, r.last_stable_offset, r.log_start_offset,
                                            r.aborted, b""))
        else:
            out.append(next(free_results))
    return out


async def _catch_up_group_filters(ctx: RequestContext) -> None:
    """A consumer connection's first Fetch waits until this broker has every group filter and member that was
    published before it (``GroupFilterRegistry.catch_up``): a member of a filtered group fetches only after its
    coordinator has published it, but this broker's watch may not have fired yet. Bounded: with the metadata
    store out of reach, the fetch goes on with what the broker knows (its watches bring the rest later)."""
    ctx.connection_state[_FILTERS_CAUGHT_UP] = True
    broker = ctx.broker
    try:
        await asyncio.wait_for(asyncio.shield(broker.group_filters.catch_up(broker.run_blocking)),
                               CATCH_UP_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - any failure to catch up leaves the watches to do it
        log.warning("fetch from %s (client %s) goes on with this broker's view of the group filters: catching "
                    "up with the metadata store failed: %s", ctx.client_host, ctx.client_id, str(exc) or type(exc).__name__)


def _group_filters(ctx: RequestContext, request: FetchRequest,
                   partitions: list[FetchPartitionRequest]) -> dict[tuple[str, int], RecordMatcher] | None:
    """The partitions whose records must pass a filter: the fetching client is a member of a filtered group
    subscribed to their topic (``group_filters``). None for every other fetch, which stays untouched."""
    if request.replica_id >= 0:
        return None
    found = ctx.broker.group_filters.lookup(ctx.client_id, ctx.client_host)
    if found is None:
        return None
    out: dict[tuple[str, int], RecordMatcher] = {}
    for req in partitions:
        matcher = found.for_topic(req.topic)
        if matcher is not None:
            out[req.tp] = matcher
    return out or None


def _preferred_read_replicas(ctx: RequestContext, request: FetchRequest,
                             partitions: list[FetchPartitionRequest]) -> dict[tuple[str, int], int]:
    """KIP-392: partitions whose consumer should fetch from a follower in its rack instead of from us."""
    broker = ctx.broker
    if (request.replica_id >= 0 or not request.rack_id
            or broker.config.values.get("replica.selector.class") != RACK_AWARE_REPLICA_SELECTOR):
        return {}
    snapshot = broker.metadata()
    racks = {b.broker_id: b.rack for b in snapshot.brokers.values()}
    out: dict[tuple[str, int], int] = {}
    for req in partitions:
        part = broker.replica_manager.get_partition(req.tp)
        if part is not None:
            chosen = preferred_read_replica(part, req.fetch_offset, request.rack_id, racks)
            if chosen >= 0:
                out[req.tp] = chosen
    return out


def encode_fetch_response(version: int, session_id: int,
                          pairs: list[tuple[FetchPartitionRequest, FetchPartitionResult]],
                          preferred_read_replicas: dict[tuple[str, int], int] | None = None, *,
                          throttle_time_ms: int = 0) -> RawResponse:
    """The codec encodes every field but the records; each partition's records follow as their own chunk.

    Fetch v0-11 is not a flexible version, so records are the last field of a partition and every array is
    an int32 count followed by its elements: encoding a struct with an empty array or empty records and
    replacing the trailing int32 is exact.
    """
    by_topic: dict[str, list[tuple[FetchPartitionRequest, FetchPartitionResult]]] = {}
    for req, result in pairs:
        by_topic.setdefault(req.topic, []).append((req, result))
    head = bytearray(FetchResponse(error_code=ErrorCode.NONE, session_id=session_id,
                                   throttle_time_ms=throttle_time_ms if version >= 1 else 0).encode(version))
    _INT32.pack_into(head, len(head) - 4, len(by_topic))
    chunks: list[bytes | bytearray | memoryview] = [head]
    for topic, parts in by_topic.items():
        current = bytearray(TopicResponse(name=topic).encode(version))
        _INT32.pack_into(current, len(current) - 4, len(parts))
        for req, r in parts:
            aborted = None
            if r.aborted is not None:
                aborted = [Aborted(producer_id=pid, first_offset=first) for pid, first in r.aborted]
            pr = PartitionResponse(
                partition_index=req.partition,
                error_code=r.error_code,
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                aborted=aborted if version >= 4 else [],
                preferred_read_replica=(preferred_read_replicas or {}).get(req.tp, -1) if version >= 11 else -1,
                records=b"",
            )
            current += pr.encode(version)
            _INT32.pack_into(current, len(current) - 4, len(r.records))
            if r.records:
                chunks.append(current)
                chunks.append(r.records)
                current = bytearray()
        if current:
            chunks.append(current)
    return RawResponse(chunks)
