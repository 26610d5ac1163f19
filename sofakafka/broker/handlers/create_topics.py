"""CreateTopics (API key 19), versions 0-5.

Only the controller creates topics; any other broker answers NOT_CONTROLLER for every topic so the client
re-routes. Each topic is validated and written by the controller's :class:`TopicAdmin` (name rules,
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
INVALID_CONFIG naming the key, INVALID_REQUEST for partitions/replication factor given together with an
explicit assignment). A name that appears twice in one request fails both entries with INVALID_REQUEST, as in
Kafka. ``validate_only`` runs every check and writes nothing. After writing, the answer waits (up to
``timeout_ms``) until the controller has elected a leader for every new partition, so a client may produce
right away; past the deadline the topic still exists but the answer is REQUEST_TIMED_OUT, and a
``timeout_ms`` <= 0 does not wait at all.

Version notes: v1 adds ``validate_only`` and error messages; v2 throttle time; v4 lets
``num_partitions``/``replication_factor`` be -1 for the broker's ``num.partitions`` /
``default.replication.factor`` (we accept -1 in every version, as Kafka's broker does); v5 (flexible) reports
the partition count, replication factor and every config of the created topic with its source.

The helpers here (``wait_for_leaders``, ``error_result``) serve the other controller-routed handlers too; the
waits park no thread (sofakafka/broker/metadata_wait.py).

Authorization (with an authorizer): CREATE on the cluster, or else on each topic; a topic without it is
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Sequence

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers._controller import is_controller, not_controller
from sofakafka.broker.handlers.describe_configs import read_dynamic_broker_configs, topic_config_entries
from sofakafka.broker.metadata_wait import wait_for_metadata
from sofakafka.controller.metadata import ClusterMetadata
from sofakafka.controller.topics import CreatedTopic, NewTopic
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse

log = logging.getLogger(__name__)

TopicResult = CreateTopicsResponse.CreatableTopicResult
TopicConfig = TopicResult.CreatableTopicConfigs


def partitions_have_leaders(topic: str, partitions: Sequence[int]) -> Callable[[ClusterMetadata], bool]:
    def check(snapshot: ClusterMetadata) -> bool:
        found = snapshot.topics.get(topic)
        if found is None:
            return False
        return all(p in found.partitions and found.partitions[p].leader >= 0 for p in partitions)

    return check


# How often a waiting admin request looks whether the replica manager hosts new partitions yet.
_HOSTED_CHECK_S = 0.01


async def wait_until_hosted(ctx: RequestContext, topic: str, partitions: Sequence[int], timeout_ms: int) -> bool:
    """After the metadata names leaders: wait until this broker serves the partitions it leads, so a client
    producing right after the answer (acks=0 included, which never hears of a failure) finds them.

    The broker applies metadata on the loop shortly after the cache changes but announces nothing when done,
    so this looks again every few milliseconds, bounded by the request's timeout; only admin requests wait
    here, never produce or fetch."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    rm = ctx.broker.replica_manager
    own = ctx.broker.broker_id
    while True:
        snapshot = ctx.broker.metadata_cache.snapshot()
        found = snapshot.topics.get(topic)
        if found is None:
            return False
        led = [p for p in partitions if p in found.partitions and found.partitions[p].leader == own]
        if all(rm.get_partition((topic, p)) is not None for p in led):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_HOSTED_CHECK_S)


async def wait_for_leaders(ctx: RequestContext, topic: str, partitions: Sequence[int], timeout_ms: int) -> bool:
    """Leaders elected (metadata) and, where this broker leads, the partitions served."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    if not await wait_for_metadata(ctx.broker.metadata_cache, partitions_have_leaders(topic, partitions), timeout_ms):
        return False
    left_ms = timeout_ms - int((loop.time() - start) * 1000)
    return await wait_until_hosted(ctx, topic, partitions, max(left_ms, 0))


def error_result(name: str, exc: KafkaError) -> TopicResult:
    return TopicResult(name=name, error_code=exc.code, error_message=exc.message)


@handles(ApiKey.CREATE_TOPICS, 0, 5)
async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    counts = Counter(t.name for t in request.topics)
    if not is_controller(ctx):
        return CreateTopicsResponse(topics=[error_result(n, not_controller()) for n in counts])
    admin = ctx.broker.topic_admin
    results: list[TopicResult] = []
    created: list[CreatedTopic] = []
    duplicates = sorted(n for n, c in counts.items() if c > 1)
    for name in duplicates:
        results.append(error_result(name, KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Create topics request from client `{ctx.client_id}` contains multiple entries for the following "
            f"topics: {', '.join(duplicates)}")))
    creatable: set[str] | None = None
    if authz.enabled(ctx) and not authz.authorize_cluster(ctx, authz.AclOperation.CREATE, log_if_denied=False):
        creatable = authz.authorized_names(ctx, authz.AclOperation.CREATE, authz.ResourceType.TOPIC, counts)
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        if creatable is not None and topic.name not in creatable:
            denied = error_result(topic.name, KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                         "Authorization failed."))
            if ctx.api_version >= 5:
                denied.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # as Kafka 2.6 fills it
            results.append(denied)
            continue
        new = NewTopic(
            name=topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments={a.partition_index: list(a.broker_ids) for a in topic.assignments} or None,
            configs={c.name: c.value for c in topic.configs},
        )
        try:
            done = await asyncio.to_thread(admin.create_topic, new, request.validate_only)
        except KafkaError as exc:
            results.append(error_result(topic.name, exc))
            continue
        created.append(done)
        results.append(TopicResult(name=topic.name, num_partitions=done.num_partitions,
                                   replication_factor=done.replication_factor, error_message=None))
    if not request.validate_only:
        for done in created:
            ready = await wait_for_leaders(ctx, done.name, list(done.assignment), request.timeout_ms)
            if not ready and request.timeout_ms > 0:
                result = next(r for r in results if r.name == done.name)
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = f"Topic {done.name} was created but its leaders were not elected in time."
    if ctx.api_version >= 5:
        dynamic = await asyncio.to_thread(read_dynamic_broker_configs, ctx)
        by_name = {d.name: d for d in created}
        for result in results:
            topic_done = by_name.get(result.name)
            if topic_done is None or result.error_code != ErrorCode.NONE:
                result.num_partitions, result.replication_factor, result.configs = -1, -1, []
                continue
            result.configs = [
                TopicConfig(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                            is_sensitive=e.is_sensitive)
                for e in topic_config_entries(ctx, topic_done.configs, dynamic, include_synonyms=False)
            ]
    order = {name: i for i, name in enumerate(counts)}
    results.sort(key=lambda r: order[r.name])
    return CreateTopicsResponse(topics=results)
