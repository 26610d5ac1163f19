"""AlterConfigs (API key 33), versions 0-1.

The legacy, non-incremental alter: a resource's dynamic configs become exactly the ones sent (a key left out
is removed; a null value is dropped, as Kafka drops it). Topic resources replace ``/config/topics/<t>``
after validating every key and value as topic configs; broker resources replace ``/config/brokers/<id>``
(this broker's id only) or ``/config/brokers/<default>`` (empty name) and accept only keys Kafka can change
dynamically: a read-only key, a per-broker key at the cluster-default level, an unknown key or a bad value
fails the resource, while a key Kafka does not know is stored unvalidated as Kafka stores it. Password keys are refused because we have no ``password.encoder.secret`` to store them
encrypted, which is what Kafka requires too. ``validate_only`` checks without writing.

Errors follow Kafka 2.6, which answers a bad config value with INVALID_REQUEST (not INVALID_CONFIG) and the
message "Invalid config value for resource ConfigResource(type=..., name='...'): ..." naming the key; an
unknown topic config name is INVALID_CONFIG ("Unknown topic config name: ..."), an unknown topic
UNKNOWN_SERVER_ERROR without a message (what Kafka 2.6 answers; tests/conformance compares), another broker's
id or another resource type INVALID_REQUEST.

Version notes: v1 only adds throttle-time semantics; the layout is the same. The helpers here
(``apply_topic_configs``, ``apply_broker_configs``) also serve IncrementalAlterConfigs.

Authorization (with an authorizer): ALTER_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for
brokers, on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from sofakafka.broker.config import (
    CONFIG_KEYS,
    LISTENER_MAX_CONNECTIONS_RE,
    ConfigError,
    ConfigType,
    DynamicUpdateMode,
    parse_connection_overrides,
    parse_max_connections,
    parse_value,
)
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers._group_configs import RESOURCE_GROUP, apply_group_configs
from sofakafka.broker.handlers.describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    parse_broker_resource,
)
from sofakafka.controller.topics import validate_topic_name
from sofakafka.ldc import LdcError, LdcModel, RoutingRules
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from sofakafka.storage.config import TOPIC_CONFIG_NAMES

ResourceResponse = AlterConfigsResponse.AlterConfigsResourceResponse

_TYPE_NAMES = {RESOURCE_TOPIC: "TOPIC", RESOURCE_BROKER: "BROKER", 8: "BROKER_LOGGER", RESOURCE_GROUP: "GROUP"}


def resource_repr(resource_type: int, name: str) -> str:
    """How Kafka's messages name a resource: ``ConfigResource(type=TOPIC, name='orders')``."""
    return f"ConfigResource(type={_TYPE_NAMES.get(resource_type, 'UNKNOWN')}, name='{name}')"


def invalid_value(resource_type: int, name: str, reason: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST,
                      f"Invalid config value for resource {resource_repr(resource_type, name)}: {reason}")


def validate_ldc_configs(configs: Mapping[str, str]) -> None:
    """The routing rules name only cells of the stored model: checked on the cluster-default entity's whole
    new config set, so neither a rule naming an unknown cell nor a model that drops a cell a rule uses is
    ever stored."""
    rules_text = configs.get("sofakafka.router.rules")
    if not rules_text:
        return
    model_text = configs.get("sofakafka.ldc.model")
    if not model_text:
        raise ConfigError("sofakafka.router.rules", "routing rules need an LDC model (set sofakafka.ldc.model)")
    try:
        RoutingRules.from_text(rules_text, "rules.json").check(LdcModel.from_json(model_text))
    except LdcError as exc:
        raise ConfigError("sofakafka.router.rules", f"does not fit sofakafka.ldc.model: {exc}") from None


def validate_broker_configs(broker_id: int | None, configs: Mapping[str, str]) -> None:
    """Kafka's checks of a dynamic broker config update; raises ConfigError naming the first bad key.

    A key Kafka does not know is stored as it is, unvalidated, as Kafka 2.6 stores it (custom keys for
    plugins; its checks only refuse known static keys): refusing it made kafka-configs fail where Kafka
    succeeds (found by tests/conformance)."""
    known = {k: v for k, v in configs.items() if k in CONFIG_KEYS}
    static = sorted(k for k in known if CONFIG_KEYS[k].dynamic is DynamicUpdateMode.READ_ONLY)
    if static:
        raise ConfigError(static[0], f"Cannot update these configs dynamically: Set({', '.join(static)})")
    passwords = sorted(k for k in known if CONFIG_KEYS[k].type is ConfigType.PASSWORD)
    if passwords:
        raise ConfigError(passwords[0], "Password encoder secret not configured: cannot store password configs "
                                        f"dynamically: {', '.join(passwords)}")
    if broker_id is None:
        per_broker = sorted(k for k in known if CONFIG_KEYS[k].dynamic is DynamicUpdateMode.PER_BROKER)
        if per_broker:
            raise ConfigError(per_broker[0], "Cannot update these configs at default cluster level, broker id "
                                             f"must be specified: {', '.join(per_broker)}")
    for key_name, value in known.items():
        parse_value(CONFIG_KEYS[key_name], value)
    if "max.connections.per.ip.overrides" in known:
        parse_connection_overrides("max.connections.per.ip.overrides", known["max.connections.per.ip.overrides"])
    for key_name, value in configs.items():
        # A listener's own max.connections (listener.name.<listener>.max.connections), validated as the key it
        # prefixes; Kafka lets it be set cluster-wide or per broker.
        if LISTENER_MAX_CONNECTIONS_RE.fullmatch(key_name):
            parse_max_connections(key_name, value)
    if broker_id is None:
        validate_ldc_configs(configs)


def unknown_topic_as_kafka_answers(exc: KafkaError) -> KafkaError:
    """Kafka 2.6 answers an alter of a topic that does not exist with UNKNOWN_SERVER_ERROR and no message
    (its admin path throws a plain exception there); clients and tools were written against that."""
    if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
    return exc


async def apply_topic_configs(ctx: RequestContext, topic: str, configs: Mapping[str, str],
                              validate_only: bool) -> None:
    validate_topic_name(topic)
    admin = ctx.broker.topic_admin  # its set_topic_config answers UNKNOWN_TOPIC_OR_PARTITION
    unknown = sorted(k for k in configs if k not in TOPIC_CONFIG_NAMES)
    try:
        if unknown:
            await asyncio.to_thread(admin.topic_config, topic)  # an unknown topic still wins, as in Kafka
            # Kafka's LogConfig.validateNames: INVALID_CONFIG, not the INVALID_REQUEST of a bad value.
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}")
        await asyncio.to_thread(admin.set_topic_config, topic, dict(configs), validate_only)
    except KafkaError as exc:
        if exc.code == ErrorCode.INVALID_CONFIG and not unknown:
            raise invalid_value(RESOURCE_TOPIC, topic, exc.message or exc.code.name) from None
        raise unknown_topic_as_kafka_answers(exc) from None


async def apply_broker_configs(ctx: RequestContext, name: str, configs: Mapping[str, str],
                               validate_only: bool) -> None:
    broker_id = parse_broker_resource(ctx, name)
    try:
        validate_broker_configs(broker_id, configs)
    except ConfigError as exc:
        raise invalid_value(RESOURCE_BROKER, name, str(exc)) from None
    admin = ctx.broker.topic_admin
    await asyncio.to_thread(admin.set_broker_config, broker_id, dict(configs), None, validate_only)


async def apply_configs(ctx: RequestContext, resource_type: int, name: str, configs: Mapping[str, str],
                        validate_only: bool) -> None:
    if resource_type == RESOURCE_TOPIC:
        await apply_topic_configs(ctx, name, configs, validate_only)
    elif resource_type == RESOURCE_BROKER:
        await apply_broker_configs(ctx, name, configs, validate_only)
    elif resource_type == RESOURCE_GROUP:
        await apply_group_configs(ctx, name, configs, validate_only)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"AlterConfigs is only supported for topics, brokers and groups, but resource type is "
                         f"{_TYPE_NAMES.get(resource_type, resource_type)}")


@handles(ApiKey.ALTER_CONFIGS, 0, 1)
async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses: list[ResourceResponse] = []
    allowed, refused = authz.split_config_resources(ctx, request.resources, authz.AclOperation.ALTER_CONFIGS)
    for resource in allowed:
        response = ResourceResponse(resource_type=resource.resource_type, resource_name=resource.resource_name,
                                    error_message=None)
        configs = {c.name: c.value for c in resource.configs if c.value is not None}
        try:
            await apply_configs(ctx, resource.resource_type, resource.resource_name, configs,
                                request.validate_only)
        except KafkaError as exc:
            response.error_code = exc.code
            response.error_message = exc.message
        responses.append(response)
    responses += [ResourceResponse(resource_type=r.resource_type, resource_name=r.resource_name, error_code=code,
                                   error_message=None) for r, code in refused]
    return AlterConfigsResponse(responses=responses)
