"""Metadata (API key 3), versions 0-9.

Answers from the metadata cache's current snapshot: the live brokers with their endpoint on the listener the
client came through, the controller, the cluster id, and for each topic asked (all topics when the list is
null, or empty in v0) its partitions with leader, leader epoch, replicas, ISR and offline replicas.

A topic that does not exist is created when ``auto.create.topics.enable`` is true and the request allows it
(always before v4, ``allow_auto_topic_creation`` from v4), with ``num.partitions`` and
``default.replication.factor`` (``__consumer_offsets`` with its own settings, as the group coordinator creates it;
``__transaction_state`` never); like Kafka the answer for it is LEADER_NOT_AVAILABLE until the controller has
elected its leaders, and the client asks again. An invalid name is INVALID_TOPIC_EXCEPTION; otherwise an unknown
topic is UNKNOWN_TOPIC_OR_PARTITION. A partition without a leader is LEADER_NOT_AVAILABLE with leader -1.

Version notes: v1 adds the controller id, racks, ``is_internal`` and null for "all topics"; v2 the cluster id;
v3 throttle time; v4 ``allow_auto_topic_creation``; v5 offline replicas; v7 leader epochs; v8 authorized
operations (bit fields of AclOperation codes, every operation allowed while no authorizer is configured; the
INT32 minimum when not asked for); v9 is the flexible encoding.

Each topic's entry is encoded once per metadata change and version, and the response is spliced from those
bytes (a ``RawResponse``): the metadata cache keeps a topic's ``TopicMetadata`` object while the topic does not
change, so a broker with 10,000 partitions answers "all topics" without building and encoding 10,000 partition
structs on its event loop every time a client refreshes (about a second of this machine's CPU before). Whether
the entry is still right is two comparisons per topic (the object, and the replica manager's count of changes to
what it serves of the topic), not a look per partition, so "all topics" costs per topic, plus the bytes. An entry
asked with its authorized operations under an authorizer is the principal's own and is encoded per request.

Authorization (with an authorizer, as Kafka 2.6): a topic needs DESCRIBE to be listed. Asked for all topics,
the others are left out without a trace; asked by name, they are answered TOPIC_AUTHORIZATION_FAILED without
saying whether they exist. Auto-creation needs CREATE on the cluster or on the topic, else the missing topic
is TOPIC_AUTHORIZATION_FAILED. Authorized operations (v8+) are the principal's own.
"""

from __future__ import annotations

import logging
import struct

from sofakafka.broker.handlers import RawResponse, RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.controller.metadata import ClusterMetadata, TopicMetadata
from sofakafka.controller.topics import NewTopic, validate_topic_name
from sofakafka.protocol.acl import CLUSTER_NAME
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sofakafka.protocol.primitives import encode_unsigned_varint
from sofakafka.security.authorizer import authorized_operations_bits

log = logging.getLogger(__name__)

Broker = MetadataResponse.MetadataResponseBroker
Topic = MetadataResponse.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def metadata_error_response(request: MetadataRequest, version: int, code: int) -> MetadataResponse:
    return MetadataResponse(topics=[Topic(error_code=code, name=t.name) for t in request.topics or []])


@handles(ApiKey.METADATA, 0, 9, error_response=metadata_error_response)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> RawResponse:
    broker = ctx.broker
    version = ctx.api_version
    snap = broker.metadata()
    if request.topics is None or (version == 0 and not request.topics):
        names = sorted(snap.topics)
        requested_all = True
    else:
        names = list(dict.fromkeys(t.name for t in request.topics))
        requested_all = False
    allow_create = (broker.config.get_bool("auto.create.topics.enable")
                    and (version < 4 or request.allow_auto_topic_creation) and not requested_all)
    flexible = MetadataResponse.is_flexible(version)
    topics: list[bytes] = []
    may_create: set[str] | None = None
    if authz.enabled(ctx):
        describable = authz.authorized_names(ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.TOPIC, names,
                                             log_if_denied=not requested_all)
        if not requested_all:
            topics.extend(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=n, is_internal=False,
                                partitions=[]).encode(version, flexible=flexible)
                          for n in names if n not in describable)
        names = [n for n in names if n in describable]
        missing = [n for n in names if n not in snap.topics]
        if allow_create and missing and not authz.authorize_cluster(ctx, authz.AclOperation.CREATE,
                                                                    log_if_denied=False):
            may_create = authz.authorized_names(ctx, authz.AclOperation.CREATE, authz.ResourceType.TOPIC, missing)
    for name in names:
        found = snap.topics.get(name)
        if found is not None:
            topics.append(_encoded_topic(found, version, request.include_topic_authorized_operations, ctx))
            continue
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if allow_create and name not in snap.deleting:
            if may_create is not None and name not in may_create:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                error = await _auto_create(ctx, name)
        topics.append(Topic(error_code=error, name=name, is_internal=False, partitions=[]).encode(
            version, flexible=flexible))
    _prune(snap)
    return splice_response(
        MetadataResponse(
            brokers=_brokers(ctx, snap),
            cluster_id=snap.cluster_id,
            controller_id=snap.controller_id,
            topics=[],
            cluster_authorized_operations=(
                _authorized_operations(ctx, authz.ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
                if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED),
        ),
        version, topics)


def splice_response(empty: MetadataResponse, version: int, topics: list[bytes]) -> RawResponse:
    """``empty`` (its ``topics`` empty, no tagged fields set) encoded with ``topics``' encoded entries (each
    encoded with the message's flexibility) in place of its empty array. The array is followed only by
    ``cluster_authorized_operations`` (v8+) and the response's tagged fields (v9+, none set: one byte), so the
    empty array sits at a known distance from the end."""
    data = empty.encode(version)
    flexible = MetadataResponse.is_flexible(version)
    tail = (4 if version >= 8 else 0) + (1 if flexible else 0)
    empty_array = 1 if flexible else 4
    cut = len(data) - tail
    count = encode_unsigned_varint(len(topics) + 1) if flexible else struct.pack(">i", len(topics))
    # v3+ starts with throttle_time_ms: the connection raises it there when a request quota throttles us.
    return RawResponse([bytearray(data[: cut - empty_array]), count, *topics, data[cut:]],
                       throttle_time_at=0 if version >= 3 else None)


# (topic, version, include operations) -> the TopicMetadata it was encoded from, the replica manager's
# hosted_version of the topic then, the partitions shown without a leader (led here but not served yet), the
# encoded entry.
_ENCODED: dict[tuple[str, int, bool], tuple[TopicMetadata, int, tuple[int, ...], bytes]] = {}


def _encoded_topic(topic: TopicMetadata, version: int, include_operations: bool, ctx: RequestContext) -> bytes:
    """The topic's entry, encoded again only when its metadata or the partitions this broker serves of it changed:
    a hit costs two comparisons, whatever the number of partitions."""
    if include_operations and ctx.broker.authorizer is not None:  # the principal's own operations: not shared
        return _topic(topic, version, include_operations, ctx).encode(
            version, flexible=MetadataResponse.is_flexible(version))
    rm = ctx.broker.replica_manager
    hosted = rm.hosted_version(topic.name)
    key = (topic.name, version, include_operations)
    hit = _ENCODED.get(key)
    if hit is not None and hit[0] is topic and hit[1] == hosted:
        return hit[3]
    me = ctx.broker.broker_id
    unserved = tuple(i for i, p in topic.partitions.items()
                     if p.leader == me and rm.get_partition((topic.name, i)) is None)
    if hit is not None and hit[0] is topic and hit[2] == unserved:
        data = hit[3]
    else:
        data = _topic(topic, version, include_operations, ctx).encode(
            version, flexible=MetadataResponse.is_flexible(version))
    _ENCODED[key] = (topic, hosted, unserved, data)
    return data


def _prune(snap: ClusterMetadata) -> None:
    """Forget entries of topics that are gone (the cache holds at most a few entries per topic)."""
    if len(_ENCODED) > 8 * (len(snap.topics) + len(snap.deleting)) + 64:
        for key in [k for k in _ENCODED if k[0] not in snap.topics]:
            del _ENCODED[key]


async def _auto_create(ctx: RequestContext, name: str) -> ErrorCode:
    if name == OFFSETS_TOPIC:
        # Internal topics get their own partitions and configs (Kafka's createInternalTopic), not the defaults.
        await ctx.broker.group_runtime.create_topic(ctx.client_id)
        return ErrorCode.LEADER_NOT_AVAILABLE
    if name == TRANSACTION_STATE_TOPIC:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # created by the transaction coordinator, not by Metadata
    try:
        validate_topic_name(name)
    except KafkaError as exc:
        return exc.code
    admin = ctx.broker.topic_admin
    try:
        created = await ctx.broker.run_blocking(lambda: admin.create_topic(NewTopic(name)))
        log.info("auto-created topic %s with %d partitions, replication factor %d (requested by %s)", name,
                 created.num_partitions, created.replication_factor, ctx.client_id)
    except KafkaError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.info("auto-creating topic %s failed: %s", name, exc)
            return exc.code
    return ErrorCode.LEADER_NOT_AVAILABLE


def _brokers(ctx: RequestContext, snap: ClusterMetadata) -> list[Broker]:
    own = next((b for b in ctx.broker.listeners if b.listener_name == ctx.listener_name), None)
    out: list[Broker] = []
    for broker_id in snap.alive_broker_ids():
        endpoint = snap.endpoint(broker_id, ctx.listener_name)
        if endpoint is None:
            continue
        host = endpoint.host
        if host is None or host == "":
            host = own.advertised_host if own is not None and broker_id == ctx.broker.broker_id else ""
        out.append(Broker(node_id=broker_id, host=host, port=endpoint.port, rack=snap.brokers[broker_id].rack))
    return out


def _topic(topic: TopicMetadata, version: int, include_operations: bool, ctx: RequestContext) -> Topic:
    partitions: list[Partition] = []
    me = ctx.broker.broker_id
    rm = ctx.broker.replica_manager
    for index in sorted(topic.partitions):
        p = topic.partitions[index]
        leader = p.leader
        if leader == me and rm.get_partition((topic.name, index)) is None:
            # The controller elected us but our replica manager has not taken over yet: saying so now would
            # send clients here before we can serve them (Kafka's LeaderAndIsr-before-UpdateMetadata order).
            leader = -1
        partitions.append(Partition(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE if leader < 0 else ErrorCode.NONE,
            partition_index=index,
            leader_id=leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            offline_replicas=list(p.offline_replicas),
        ))
    return Topic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=(_authorized_operations(ctx, authz.ResourceType.TOPIC, topic.name, TOPIC_OPERATIONS)
                                     if include_operations else AUTHORIZED_OPERATIONS_OMITTED),
    )


def _authorized_operations(ctx: RequestContext, resource_type: authz.ResourceType, name: str, supported: int) -> int:
    """KIP-430 bits: everything supported without an authorizer, else what the principal may do."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return supported
    ops = [op for op in authz.AclOperation if supported & (1 << op)]
    return authorized_operations_bits(authorizer.authorized_operations(ctx.principal, ctx.client_host,
                                                                       resource_type, name, ops))
