"""DeleteTopics (API key 20), versions 0-4.

Only the controller deletes topics; other brokers answer NOT_CONTROLLER for every name. With
``delete.topic.enable=false`` nothing is deleted and every name gets TOPIC_DELETION_DISABLED (INVALID_REQUEST
for v0-2 clients, which predate that code, as Kafka answers them). A name the broker's metadata does not have
is UNKNOWN_TOPIC_OR_PARTITION, as in Kafka: an unknown (or illegal) name, and a topic already being deleted
(deleting it twice gets that answer the second time). Otherwise the controller's :class:`TopicAdmin` writes the
deletion marker, the topic leaves every broker's metadata (the deletion has started) and the controller
removes it once its replicas are gone. The answer waits up to ``timeout_ms`` for the deletion to complete
(REQUEST_TIMED_OUT past it; the deletion still completes later). Different from Kafka 2.6, whose answer comes
once the topic left the metadata (when the deletion starts): ours comes when a topic created again under the
name can no longer meet the old one, so with a replica's broker down it is REQUEST_TIMED_OUT where Kafka's is
NONE. A name repeated in one request is answered once.

Version notes: v1 adds throttle time, v4 is flexible; the per-topic layout never changes (no error
message before v5, which 2.6 does not have).

Authorization (with an authorizer): DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (before whether
it exists).
"""

from __future__ import annotations

import asyncio

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers._controller import is_controller
from sofakafka.broker.metadata_wait import wait_for_metadata
from sofakafka.controller.metadata import ClusterMetadata
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse

Result = DeleteTopicsResponse.DeletableTopicResult


@handles(ApiKey.DELETE_TOPICS, 0, 4)
async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    names = list(dict.fromkeys(request.topic_names))
    if not is_controller(ctx):
        return DeleteTopicsResponse(responses=[Result(name=n, error_code=ErrorCode.NOT_CONTROLLER) for n in names])
    if not ctx.broker.config.get_bool("delete.topic.enable"):
        code = ErrorCode.TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else ErrorCode.INVALID_REQUEST
        return DeleteTopicsResponse(responses=[Result(name=n, error_code=code) for n in names])
    admin = ctx.broker.topic_admin
    results: dict[str, Result] = {}
    marked: list[str] = []
    deletable = (authz.authorized_names(ctx, authz.AclOperation.DELETE, authz.ResourceType.TOPIC, names)
                 if authz.enabled(ctx) else set(names))
    known = ctx.broker.metadata_cache.snapshot().topics
    for name in names:
        if name not in deletable:
            results[name] = Result(name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            continue
        if name not in known:
            results[name] = Result(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        try:
            await asyncio.to_thread(admin.delete_topic, name)
        except KafkaError as exc:
            results[name] = Result(name=name, error_code=exc.code)
            continue
        results[name] = Result(name=name, error_code=ErrorCode.NONE)
        marked.append(name)

    def gone(snapshot: ClusterMetadata) -> bool:
        return not any(n in snapshot.topics or n in snapshot.deleting for n in marked)

    if marked and request.timeout_ms > 0 and not await wait_for_metadata(ctx.broker.metadata_cache, gone,
                                                                         request.timeout_ms):
        snapshot = ctx.broker.metadata_cache.snapshot()
        for name in marked:
            if name in snapshot.topics or name in snapshot.deleting:
                results[name].error_code = ErrorCode.REQUEST_TIMED_OUT
    return DeleteTopicsResponse(responses=[results[n] for n in names])
