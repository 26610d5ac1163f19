"""DescribeConfigs (API key 32), versions 0-3.

Topic resources (type 2) list every topic config Kafka 2.6 has, with the topic's override
(DYNAMIC_TOPIC_CONFIG) or else the value this broker gives topics by default, whose source is that of the
broker key it comes from (``log.segment.bytes`` for ``segment.bytes``: dynamic broker, dynamic cluster
default, static from server.properties, or Kafka's default). Broker resources (type 4) name this broker's
id and list every broker key with its effective value; the empty name is the cluster-wide default entity,
which lists only the dynamic defaults set on it. Group resources (type 32, Kafka 3.8's number) list the
group's stored filter keys (``_group_configs``). Broker-logger resources (type 8, KIP-412) name this broker
and list every logger of the process with its effective level in log4j's words (``root`` is the root
logger). Any other broker id is INVALID_REQUEST (the client must ask that broker), an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, an illegal topic name INVALID_TOPIC_EXCEPTION, other resource types
INVALID_REQUEST.

Broker value precedence, as in Kafka: ``/config/brokers/<id>`` > ``/config/brokers/<default>`` >
server.properties > default. Synonyms (v1+, when asked) list, source by source in that order, each key of
the same setting that has a value there (``log.retention.ms``, ``.minutes``, ``.hours``); for a broker key
the list starts at the key itself, as Kafka's does. Password-typed keys are ``is_sensitive`` and their
values are never sent. ``read_only`` marks broker keys that cannot be changed dynamically; topic configs are
never read-only.

Overrides are read from the metadata store itself, as Kafka reads ZooKeeper, not from the broker's
metadata cache, which follows the store a moment later: a client must see its own AlterConfigs at once.

Version notes: v0 has ``is_default`` instead of ``config_source`` and no synonyms; v1 adds sources and
synonyms; v3 adds ``config_type`` and ``documentation`` (when ``include_documentation`` asks for it, broker
keys carry their doc string; topic configs and unasked ones null). A topic config's broker synonyms start at
its primary broker key, as Kafka 2.6's do (a default ``log.retention.hours`` is not a synonym of
``retention.ms`` while ``log.retention.ms`` is unset). ``configuration_keys`` null (or empty) means every key; unknown names are left out.

The entry builders (``topic_config_entries``, ``broker_config_entries``) also serve CreateTopics v5 and the
alter handlers' validation.

Authorization (with an authorizer): DESCRIBE_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for
brokers and broker loggers, on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

Resource type 100 is sofakafka's own: SCRAM users (see sofakafka.broker.handlers._scram_users).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sofakafka.broker.config import (
    BROKER_SYNONYMS,
    CONFIG_KEYS,
    LISTED_ONLY_WHEN_SET,
    TOPIC_CONFIG_SYNONYMS,
    ConfigError,
    ConfigSource,
    ConfigType,
    ConfigValue,
    KafkaConfig,
    format_value,
)
from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers import _scram_users as scram_users
from sofakafka.broker.handlers._group_configs import RESOURCE_GROUP, group_config_entries, read_group_config
from sofakafka.controller.topics import validate_topic_name
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from sofakafka.storage.config import TOPIC_CONFIG_NAMES

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

# DescribeConfigsResponse's config_type wire values (v3).
_TYPE_CODES = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.SHORT: 4,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
    ConfigType.CLASS: 8,
    ConfigType.PASSWORD: 9,
}

# Topic keys whose type differs from their first broker synonym's, or that have no broker synonym.
_TOPIC_TYPES = {
    "segment.ms": ConfigType.LONG,
    "segment.jitter.ms": ConfigType.LONG,
    "retention.ms": ConfigType.LONG,
    "flush.ms": ConfigType.LONG,
    "leader.replication.throttled.replicas": ConfigType.LIST,
    "follower.replication.throttled.replicas": ConfigType.LIST,
}


@dataclass(frozen=True)
class ConfigEntryView:
    """One described config, independent of the response version."""

    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    config_type: int
    documentation: str | None = None
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)


def _text(value: ConfigValue) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


@dataclass(frozen=True)
class DynamicBrokerConfigs:
    """``/config/brokers/<this broker>`` and ``/config/brokers/<default>`` as the store holds them now."""

    broker: Mapping[str, str]
    default: Mapping[str, str]


def read_dynamic_broker_configs(ctx: RequestContext) -> DynamicBrokerConfigs:
    """Blocking (store reads). Read from the store, not the metadata cache, as Kafka reads ZooKeeper: the
    cache follows the store a moment later, and a client must see its own AlterConfigs at once."""
    admin = ctx.broker.topic_admin
    return DynamicBrokerConfigs(admin.broker_config(ctx.broker.broker_id), admin.broker_config(None))


def read_topic_overrides(ctx: RequestContext, name: str) -> Mapping[str, str]:
    """Blocking. The topic's overrides from the store; INVALID_TOPIC_EXCEPTION / UNKNOWN_TOPIC_OR_PARTITION
    as Kafka answers."""
    validate_topic_name(name)
    overrides: Mapping[str, str] = ctx.broker.topic_admin.topic_config(name)
    return overrides


def broker_layers(ctx: RequestContext, broker_id: int | None,
                  dynamic: DynamicBrokerConfigs) -> list[tuple[int, Mapping[str, str | None]]]:
    """(source, key -> value text) in precedence order: what decides a broker key's value."""
    config: KafkaConfig = ctx.broker.config
    layers: list[tuple[int, Mapping[str, str | None]]] = []
    if broker_id is not None:
        layers.append((ConfigSource.DYNAMIC_BROKER_CONFIG, dynamic.broker))
    layers.append((ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic.default))
    layers.append((ConfigSource.STATIC_BROKER_CONFIG,
                   {k: config.value_string(k) for k in config.originals if k in CONFIG_KEYS}))
    layers.append((ConfigSource.DEFAULT_CONFIG,
                   {k.name: format_value(k, k.default) for k in CONFIG_KEYS.values() if k.default is not None}))
    return layers


def _synonyms(names: Sequence[str], layers: Sequence[tuple[int, Mapping[str, str | None]]],
              sensitive: bool) -> list[tuple[str, str | None, int]]:
    out: list[tuple[str, str | None, int]] = []
    for source, values in layers:
        for name in names:
            if name in values:
                out.append((name, None if sensitive else values[name], source))
    return out


def broker_config_entries(ctx: RequestContext, broker_id: int | None, dynamic: DynamicBrokerConfigs,
                          names: Sequence[str] | None = None) -> list[ConfigEntryView]:
    """Entries of a broker resource: this broker (``broker_id``) or the cluster default entity (None)."""
    layers = broker_layers(ctx, broker_id, dynamic)
    if broker_id is None:
        # The default entity describes only what is set on it.
        keys = [CONFIG_KEYS[k] for k in sorted(layers[0][1]) if k in CONFIG_KEYS]
        layers = layers[:1]
    else:
        keys = list(CONFIG_KEYS.values())
    out: list[ConfigEntryView] = []
    for key in keys:
        if names is not None and key.name not in names:
            continue
        if key.name in LISTED_ONLY_WHEN_SET and not any(key.name in values for source, values in layers
                                                        if source != ConfigSource.DEFAULT_CONFIG):
            continue
        sensitive = key.type is ConfigType.PASSWORD
        synonyms = _synonyms(BROKER_SYNONYMS.get(key.name, (key.name,)), layers, sensitive)
        while synonyms and synonyms[0][0] != key.name:
            synonyms.pop(0)
        value = next((values[key.name] for _, values in layers if key.name in values), None)
        out.append(ConfigEntryView(
            name=key.name,
            value=None if sensitive else value,
            source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=key.dynamic.value == "read-only",
            is_sensitive=sensitive,
            config_type=_TYPE_CODES[key.type],
            documentation=key.doc,
            synonyms=synonyms,
        ))
    return out


def effective_broker_config(ctx: RequestContext, dynamic: DynamicBrokerConfigs) -> KafkaConfig:
    """The static config with this broker's dynamic overrides applied (they were validated when written)."""
    config: KafkaConfig = ctx.broker.config
    # Keys Kafka does not know are stored as they are (custom configs) and play no part here.
    merged = {k: v for k, v in {**dynamic.default, **dynamic.broker}.items() if k in CONFIG_KEYS}
    if not merged:
        return config
    try:
        return KafkaConfig.from_properties({**config.originals, **merged})
    except ConfigError:
        return config


def _topic_type(name: str) -> int:
    if name in _TOPIC_TYPES:
        return _TYPE_CODES[_TOPIC_TYPES[name]]
    brokers = TOPIC_CONFIG_SYNONYMS.get(name)
    if brokers:
        return _TYPE_CODES[CONFIG_KEYS[brokers[0]].type]
    return 0


def topic_config_entries(ctx: RequestContext, overrides: Mapping[str, str], dynamic: DynamicBrokerConfigs, *,
                         include_synonyms: bool = True, names: Sequence[str] | None = None) -> list[ConfigEntryView]:
    """Every topic config: the override if set, else the broker's default for topics."""
    layers = broker_layers(ctx, ctx.broker.broker_id, dynamic)
    defaults = effective_broker_config(ctx, dynamic).topic_config_defaults()
    out: list[ConfigEntryView] = []
    for name in TOPIC_CONFIG_NAMES:
        if names is not None and name not in names:
            continue
        broker_names = TOPIC_CONFIG_SYNONYMS.get(name, ())
        synonyms = _synonyms(broker_names, layers, False)
        # Kafka 2.6 keeps a topic config's broker synonyms only from the first one of its primary broker key
        # (``log.retention.ms`` for retention.ms) on: with that key unset anywhere, a default
        # ``log.retention.hours=168`` is not listed, nor does it decide the source.
        while synonyms and synonyms[0][0] != broker_names[0]:
            synonyms.pop(0)
        if name in overrides:
            value: str | None = overrides[name]
            synonyms.insert(0, (name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        else:
            value = _text(defaults.get(name)) if name in defaults else _storage_default(name)
        out.append(ConfigEntryView(
            name=name,
            value=value,
            source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=False,
            is_sensitive=False,
            config_type=_topic_type(name),
            documentation=None,
            synonyms=synonyms if include_synonyms else [],
        ))
    return out


def _storage_default(name: str) -> str | None:
    from sofakafka.storage.config import LogConfig

    return LogConfig().to_props().get(name)


# log4j's levels, which Kafka's clients and tools speak, on Python's scale (Python has no TRACE or FATAL).
LOG_LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
ROOT_LOGGER = "root"
SOURCE_BROKER_LOGGER = 6  # DYNAMIC_BROKER_LOGGER_CONFIG


def log_level_name(level: int) -> str:
    """The log4j name of a Python level (the highest log4j level at or below it)."""
    return max(((v, k) for k, v in LOG_LEVELS.items() if v <= level), default=(5, "TRACE"))[1]


def python_logger(name: str) -> logging.Logger | None:
    """The logger a broker-logger entry names, or None when the process has no such logger."""
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def logger_entries(names: Sequence[str] | None) -> list[ConfigEntryView]:
    named = sorted(n for n, v in logging.Logger.manager.loggerDict.items() if isinstance(v, logging.Logger))
    loggers = [ROOT_LOGGER, *named]
    out: list[ConfigEntryView] = []
    for name in loggers:
        logger = python_logger(name)
        if logger is None or (names is not None and name not in names):
            continue
        out.append(ConfigEntryView(name=name, value=log_level_name(logger.getEffectiveLevel()),
                                   source=SOURCE_BROKER_LOGGER, read_only=False, is_sensitive=False,
                                   config_type=_TYPE_CODES[ConfigType.STRING], documentation=None))
    return out


def parse_logger_resource(ctx: RequestContext, name: str) -> None:
    """A broker-logger resource must name this broker (loggers are per process)."""
    own: int = ctx.broker.broker_id
    if name != str(own):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {own} but received {name}")


def parse_broker_resource(ctx: RequestContext, name: str) -> int | None:
    """The broker id a broker resource names (None: the cluster default entity), or INVALID_REQUEST."""
    if name == "":
        return None
    own: int = ctx.broker.broker_id
    try:
        broker_id = int(name)
    except ValueError:
        broker_id = None
    if broker_id != own:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {own} or empty string, but received {name}")
    return broker_id


async def _describe_users(ctx: RequestContext, name: str, version: int) -> list[Result]:
    """Our resource type 100 (SCRAM users, see sofakafka.broker.handlers._scram_users): one result per user."""
    try:
        users = await asyncio.to_thread(scram_users.describe, ctx, name)
    except KafkaError as exc:
        return [Result(resource_type=scram_users.RESOURCE_USER, resource_name=name, error_code=exc.code,
                       error_message=exc.message)]
    return [Result(resource_type=scram_users.RESOURCE_USER, resource_name=user, error_message=None, configs=[
        _to_entry(ConfigEntryView(mechanism, value, ConfigSource.UNKNOWN, False, False, _TYPE_CODES[ConfigType.STRING]), version)
        for mechanism, value in entries]) for user, entries in users]


def _to_entry(view: ConfigEntryView, version: int, include_documentation: bool = False) -> Entry:
    entry = Entry(name=view.name, value=view.value, read_only=view.read_only, is_sensitive=view.is_sensitive)
    if version == 0:
        entry.is_default = view.source == ConfigSource.DEFAULT_CONFIG
    else:
        entry.config_source = view.source
        entry.synonyms = [Synonym(name=n, value=v, source=s) for n, v, s in view.synonyms]
    if version >= 3:
        entry.config_type = view.config_type
        entry.documentation = view.documentation if include_documentation else None
    return entry


def describe_resource(ctx: RequestContext, resource_type: int, name: str, keys: Sequence[str] | None,
                      include_synonyms: bool) -> list[ConfigEntryView]:
    """Blocking (store reads): run it off the event loop."""
    describe: Callable[[], list[ConfigEntryView]]
    if resource_type == RESOURCE_TOPIC:
        overrides = read_topic_overrides(ctx, name)

        def describe() -> list[ConfigEntryView]:
            return topic_config_entries(ctx, overrides, read_dynamic_broker_configs(ctx),
                                        include_synonyms=include_synonyms, names=keys)
    elif resource_type == RESOURCE_BROKER:
        broker_id = parse_broker_resource(ctx, name)

        def describe() -> list[ConfigEntryView]:
            entries = broker_config_entries(ctx, broker_id, read_dynamic_broker_configs(ctx), keys)
            if not include_synonyms:
                entries = [ConfigEntryView(e.name, e.value, e.source, e.read_only, e.is_sensitive, e.config_type,
                                           e.documentation) for e in entries]
            return entries
    elif resource_type == RESOURCE_BROKER_LOGGER:
        parse_logger_resource(ctx, name)

        def describe() -> list[ConfigEntryView]:
            return logger_entries(keys)
    elif resource_type == RESOURCE_GROUP:
        stored = read_group_config(ctx, name)

        def describe() -> list[ConfigEntryView]:
            return [ConfigEntryView(name=k, value=v, source=source, read_only=False, is_sensitive=False,
                                    config_type=config_type, documentation=None)
                    for k, v, source, config_type in group_config_entries(stored, keys)]
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type} for DescribeConfigs")
    return describe()


@handles(ApiKey.DESCRIBE_CONFIGS, 0, 3)
async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    version = ctx.api_version
    include_synonyms = version >= 1 and request.include_synonyms
    results: list[Result] = []
    allowed, refused = authz.split_config_resources(ctx, request.resources, authz.AclOperation.DESCRIBE_CONFIGS)
    for resource in allowed:
        keys = resource.configuration_keys or None
        # An unknown resource type is echoed as UNKNOWN (0), as Kafka's ConfigResource.Type.forId makes it;
        # GROUP (32) is known here, as in Kafka 3.8+, and so is our own USER type (100).
        known_type = resource.resource_type in (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER,
                                                RESOURCE_GROUP, scram_users.RESOURCE_USER)
        result = Result(resource_type=resource.resource_type if known_type else 0,
                        resource_name=resource.resource_name, error_message=None)
        if resource.resource_type == scram_users.RESOURCE_USER:
            results.extend(await _describe_users(ctx, resource.resource_name, version))
            continue
        try:
            views = await asyncio.to_thread(describe_resource, ctx, resource.resource_type,
                                            resource.resource_name, keys, include_synonyms)
        except KafkaError as exc:
            result.error_code = exc.code
            # Kafka 2.6 answers an unknown topic here with the code alone.
            result.error_message = None if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else exc.message
        else:
            include_documentation = version >= 3 and request.include_documentation
            result.configs = [_to_entry(v, version, include_documentation) for v in views]
        results.append(result)
    results += [Result(resource_type=r.resource_type, resource_name=r.resource_name, error_code=code, error_message=None)
                for r, code in refused]
    return DescribeConfigsResponse(results=results)
