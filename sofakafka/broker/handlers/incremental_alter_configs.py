"""IncrementalAlterConfigs (API key 44), versions 0-1.

KIP-339: each resource carries operations on its current dynamic configs instead of a replacement set.
SET gives a key a value, DELETE removes the override (the key falls back to its default), APPEND and
SUBTRACT add or remove comma-separated items of a list-typed key (``cleanup.policy``,
``leader.replication.throttled.replicas``...; on any other key they are INVALID_REQUEST), starting from
the current override or else the key's default. A key named twice in one resource, a null value for
anything but DELETE, or an unknown operation fail the resource with INVALID_REQUEST. The result is then
validated and written exactly as AlterConfigs does (see ``alter_configs``): the same INVALID_REQUEST
"Invalid config value for resource ..." naming the key, only dynamic broker keys, ``validate_only``.

Broker-logger resources (type 8, KIP-412, this broker's id only) change log levels of this process at once
and only in memory, as Kafka does: SET takes a log4j level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL), DELETE
makes a logger inherit its parent's level again (not allowed for ``root``), APPEND/SUBTRACT are
INVALID_REQUEST; an unknown logger or level is INVALID_REQUEST naming it.

Version notes: v1 is the first flexible version; nothing else changes.

Authorization (with an authorizer): ALTER_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for
brokers and broker loggers, on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

Resource type 100 is sofakafka's own: SCRAM users (SET a stored credential, DELETE a mechanism; see
sofakafka.broker.handlers._scram_users).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from sofakafka.broker.config import CONFIG_KEYS, ConfigType, format_value
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers import _scram_users as scram_users
from sofakafka.broker.handlers._group_configs import RESOURCE_GROUP, read_group_config
from sofakafka.broker.handlers.alter_configs import apply_configs, unknown_topic_as_kafka_answers
from sofakafka.broker.handlers.describe_configs import (
    LOG_LEVELS,
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
    ROOT_LOGGER,
    parse_broker_resource,
    parse_logger_resource,
    python_logger,
    read_topic_overrides,
)
from sofakafka.ldc.filters import FILTER_CONFIG_PREFIX
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from sofakafka.storage.config import LogConfig

ResourceResponse = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
AlterableConfig = IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

_TOPIC_LIST_KEYS = frozenset({
    "cleanup.policy",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
})


def _is_list(resource_type: int, name: str) -> bool:
    if resource_type == RESOURCE_TOPIC:
        return name in _TOPIC_LIST_KEYS
    if resource_type == RESOURCE_GROUP:
        return name.startswith(FILTER_CONFIG_PREFIX)  # every filter key is a list of alternatives
    key = CONFIG_KEYS.get(name)
    return key is not None and key.type is ConfigType.LIST


def _default(resource_type: int, name: str) -> str:
    if resource_type == RESOURCE_TOPIC:
        return LogConfig().to_props().get(name, "")
    if resource_type == RESOURCE_GROUP:
        return ""
    key = CONFIG_KEYS.get(name)
    return (format_value(key, key.default) or "") if key is not None else ""


def apply_operations(resource_type: int, current: Mapping[str, str], ops: Sequence[AlterableConfig]) -> dict[str, str]:
    """The dynamic config set after ``ops``; raises INVALID_REQUEST for ill-formed operations."""
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    result = dict(current)
    for op in ops:
        if op.config_operation != DELETE and op.value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {op.name}")
        if op.config_operation == SET:
            assert op.value is not None
            result[op.name] = op.value
        elif op.config_operation == DELETE:
            result.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            assert op.value is not None
            verb = "append" if op.config_operation == APPEND else "subtract"
            if not _is_list(resource_type, op.name):
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Config value {verb} is not allowed for config key: {op.name}")
            old = result.get(op.name, _default(resource_type, op.name))
            items = [i.strip() for i in old.split(",") if i.strip()]
            change = [i.strip() for i in op.value.split(",") if i.strip()]
            if op.config_operation == APPEND:
                for item in change:
                    if item not in items:
                        items.append(item)
            else:
                items = [i for i in items if i not in change]
            if not items and resource_type == RESOURCE_GROUP:
                result.pop(op.name, None)  # a filter condition with no alternative left is no condition
            else:
                result[op.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op.config_operation} for {op.name}")
    return result


def alter_loggers(ops: Sequence[AlterableConfig], validate_only: bool) -> None:
    """Check every operation first, then apply them all: a bad entry changes nothing."""
    changes: list[tuple[logging.Logger, int]] = []
    for op in ops:
        logger = python_logger(op.name)
        if logger is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Logger {op.name} does not exist!")
        if op.config_operation == SET:
            level = LOG_LEVELS.get((op.value or "").upper())
            if level is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Cannot set the log level of {op.name} to {op.value} as it is not a supported log "
                                 f"level. Valid log levels are {', '.join(LOG_LEVELS)}")
            changes.append((logger, level))
        elif op.config_operation == DELETE:
            if op.name == ROOT_LOGGER:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
            changes.append((logger, logging.NOTSET))
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Operation {op.config_operation} is not allowed for the BROKER_LOGGER resource")
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(level)


def _current(ctx: RequestContext, resource_type: int, name: str) -> Mapping[str, str]:
    """Blocking: the dynamic configs as the store holds them, so operations apply to the latest write (the
    metadata cache may not have caught up with an AlterConfigs answered a moment ago)."""
    if resource_type == RESOURCE_TOPIC:
        return read_topic_overrides(ctx, name)
    if resource_type == RESOURCE_BROKER:
        broker_id = parse_broker_resource(ctx, name)
        current: Mapping[str, str] = ctx.broker.topic_admin.broker_config(broker_id)
        return current
    if resource_type == RESOURCE_GROUP:
        return read_group_config(ctx, name)
    raise KafkaError(ErrorCode.INVALID_REQUEST,
                     f"IncrementalAlterConfigs is only supported for topics, brokers and groups, not resource "
                     f"type {resource_type}")


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses: list[ResourceResponse] = []
    allowed, refused = authz.split_config_resources(ctx, request.resources, authz.AclOperation.ALTER_CONFIGS)
    for resource in allowed:
        response = ResourceResponse(resource_type=resource.resource_type, resource_name=resource.resource_name,
                                    error_message=None)
        try:
            if resource.resource_type == scram_users.RESOURCE_USER:
                ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
                await asyncio.to_thread(scram_users.alter, ctx, resource.resource_name, ops, request.validate_only)
                responses.append(response)
                continue
            if resource.resource_type == RESOURCE_BROKER_LOGGER:
                parse_logger_resource(ctx, resource.resource_name)
                names = [c.name for c in resource.configs]
                if len(set(names)) != len(names):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
                alter_loggers(resource.configs, request.validate_only)
                responses.append(response)
                continue
            try:
                current = await asyncio.to_thread(_current, ctx, resource.resource_type, resource.resource_name)
            except KafkaError as exc:
                raise unknown_topic_as_kafka_answers(exc) from None
            updated = apply_operations(resource.resource_type, current, resource.configs)
            await apply_configs(ctx, resource.resource_type, resource.resource_name, updated,
                                request.validate_only)
        except KafkaError as exc:
            response.error_code = exc.code
            response.error_message = exc.message
        responses.append(response)
    responses += [ResourceResponse(resource_type=r.resource_type, resource_name=r.resource_name, error_code=code,
                                   error_message=None) for r, code in refused]
    return IncrementalAlterConfigsResponse(responses=responses)
