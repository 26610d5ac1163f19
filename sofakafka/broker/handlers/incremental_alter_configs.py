"""IncrementalAlterConfigs (API key 44), versions 0-1.

KIP-339: each resource carries operations on its current dynamic configs instead of a replacement set.
SET gives a key a value, DELETE removes the override (the key falls back to its default), APPEND and
SUBTRACT add or remove comma-separated items of a list-typed key (``cleanup.policy``,
``leader.replication.throttled.replicas``...; on any other key they are INVALID_REQUEST), starting from
the current override or else the key's default. A key named twice in one resource, a null value for
anything but DELETE, or an unknown operation fail the resource with INVALID_REQUEST. The result is then
validated and written exactly as AlterConfigs does (see ``alter_configs``): the same INVALID_REQUEST
"Invalid config value for resource ..." naming the key, only dynamic broker keys, ``validate_only``.

Version notes: v1 is the first flexible version; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sofakafka.broker.config import CONFIG_KEYS, ConfigType, format_value
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers.alter_configs import apply_configs
from sofakafka.broker.handlers.describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    check_topic,
    parse_broker_resource,
)
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
    key = CONFIG_KEYS.get(name)
    return key is not None and key.type is ConfigType.LIST


def _default(resource_type: int, name: str) -> str:
    if resource_type == RESOURCE_TOPIC:
        return LogConfig().to_props().get(name, "")
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
            result[op.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op.config_operation} for {op.name}")
    return result


def _current(ctx: RequestContext, resource_type: int, name: str) -> Mapping[str, str]:
    if resource_type == RESOURCE_TOPIC:
        return check_topic(ctx, name)
    if resource_type == RESOURCE_BROKER:
        broker_id = parse_broker_resource(ctx, name)
        return ctx.broker.metadata_cache.snapshot().broker_config(broker_id)
    raise KafkaError(ErrorCode.INVALID_REQUEST,
                     f"IncrementalAlterConfigs is only supported for topics and brokers, not resource type "
                     f"{resource_type}")


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses: list[ResourceResponse] = []
    for resource in request.resources:
        response = ResourceResponse(resource_type=resource.resource_type, resource_name=resource.resource_name,
                                    error_message=None)
        try:
            current = _current(ctx, resource.resource_type, resource.resource_name)
            updated = apply_operations(resource.resource_type, current, resource.configs)
            await apply_configs(ctx, resource.resource_type, resource.resource_name, updated,
                                request.validate_only)
        except KafkaError as exc:
            response.error_code = exc.code
            response.error_message = exc.message
        responses.append(response)
    return IncrementalAlterConfigsResponse(responses=responses)
