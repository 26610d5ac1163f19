"""CreatePartitions (API key 37), versions 0-2.

Only the controller adds partitions; other brokers answer NOT_CONTROLLER. For each topic the controller's
:class:`TopicAdmin` checks and writes the new assignment: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic,
INVALID_PARTITIONS when the count does not grow or its assignment would not fit in a znode (1 MiB),
INVALID_REPLICA_ASSIGNMENT for assignments of the wrong number, size or brokers, INVALID_TOPIC_EXCEPTION for a
topic being deleted, REASSIGNMENT_IN_PROGRESS while a partition of the topic moves (as Kafka 2.6). A topic named
twice in one request fails with INVALID_REQUEST.
``validate_only`` checks without writing. After writing, the answer waits up to ``timeout_ms`` for the new
partitions' leaders (REQUEST_TIMED_OUT past it).

Version notes: v1 only changes throttling semantics, v2 is flexible.

Authorization (with an authorizer): ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers._controller import NOT_CONTROLLER_MESSAGE, is_controller
from sofakafka.broker.handlers.create_topics import wait_for_leaders
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def create_partitions_error_response(request: CreatePartitionsRequest, _version: int, code: int) -> CreatePartitionsResponse:
    """Every topic answered ``code``: a failure of the whole request still gets an answer, not a closed
    connection (the response has no top-level error code)."""
    names = dict.fromkeys(t.name for t in request.topics)
    return CreatePartitionsResponse(results=[Result(name=n, error_code=code, error_message=None) for n in names])


@handles(ApiKey.CREATE_PARTITIONS, 0, 2, error_response=create_partitions_error_response)
async def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    if not is_controller(ctx):
        return CreatePartitionsResponse(results=[
            Result(name=n, error_code=ErrorCode.NOT_CONTROLLER, error_message=NOT_CONTROLLER_MESSAGE) for n in counts])
    admin = ctx.broker.topic_admin
    results: dict[str, Result] = {}
    added: dict[str, list[int]] = {}
    for topic in request.topics:
        if counts[topic.name] > 1:
            results[topic.name] = Result(name=topic.name, error_code=ErrorCode.INVALID_REQUEST,
                                         error_message="Duplicate topic in request.")
            continue
        if not authz.authorize(ctx, authz.AclOperation.ALTER, authz.ResourceType.TOPIC, topic.name):
            results[topic.name] = Result(name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                         error_message="Authorization failed.")
            continue
        assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        try:
            new = await asyncio.to_thread(admin.create_partitions, topic.name, topic.count, assignments,
                                          request.validate_only)
        except KafkaError as exc:
            results[topic.name] = Result(name=topic.name, error_code=exc.code, error_message=exc.message)
            continue
        results[topic.name] = Result(name=topic.name, error_code=ErrorCode.NONE, error_message=None)
        added[topic.name] = sorted(new)
    if not request.validate_only and request.timeout_ms > 0:
        for name, partitions in added.items():
            if not await wait_for_leaders(ctx, name, partitions, request.timeout_ms):
                results[name].error_code = ErrorCode.REQUEST_TIMED_OUT
                results[name].error_message = "The new partitions were created but their leaders were not elected in time."
    return CreatePartitionsResponse(results=[results[n] for n in counts])
