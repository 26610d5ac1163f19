"""Configs of Kafka's GROUP config resource (type 32): a consumer group's server-side filter.

Shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs (``describe_configs``, ``alter_configs``,
``incremental_alter_configs``). The resource type is Kafka's own number for group configs (KIP-848, Kafka
3.8), so kafka-python 3's ``ConfigResourceType.GROUP`` and a 3.8+ Java AdminClient reach it unchanged; the
keys are sofakafka's (``sofakafka.filter.*``, see :mod:`sofakafka.ldc.filters`), stored at
``/config/groups/<group>`` with the group's members (:mod:`sofakafka.broker.group_filters`).

* Describe: the stored keys, source DYNAMIC_GROUP_CONFIG (8, Kafka's number), and the two key conditions
  also when unset (no value, source DEFAULT_CONFIG), so tools that check names against a description (as
  kafka-python's ``alter_configs`` does unless ``raise_on_unknown=False``) know them; a header condition's
  key (``sofakafka.filter.header.<NAME>``) is open-ended and listed once set.
* Alter: only at the group's coordinator (else NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS: the client
  finds the coordinator with FindCoordinator, as for any group request), only for a group that exists there
  (any state but Dead: members, or committed offsets; else GROUP_ID_NOT_FOUND naming the group), every key
  and value checked before anything is written (INVALID_REQUEST "Invalid config value for resource
  ConfigResource(type=GROUP, name='...'): <key>: <reason>"). An empty set of configs removes the filter, also
  of a group that no longer exists. The filter and the group's current members are written in one store
  transaction, so every broker sees the group filtered and knows its members at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sofakafka.broker.group_filters import member_bindings, read_group_configs, write_group_filter
from sofakafka.broker.handlers import RequestContext
from sofakafka.ldc import FilterError, RecordFilter
from sofakafka.ldc.filters import KEY_EQUALS_CONFIG, KEY_PREFIX_CONFIG
from sofakafka.protocol.errors import ErrorCode, KafkaError

RESOURCE_GROUP = 32
SOURCE_DYNAMIC_GROUP_CONFIG = 8
SOURCE_DEFAULT_CONFIG = 5
_ALWAYS_LISTED = (KEY_EQUALS_CONFIG, KEY_PREFIX_CONFIG)
_CONFIG_TYPE_LIST = 7  # DescribeConfigs v3's config_type for LIST


def resource_repr(name: str) -> str:
    return f"ConfigResource(type=GROUP, name='{name}')"


def parse_group_configs(name: str, configs: Mapping[str, str]) -> RecordFilter:
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "A group config resource needs a group name")
    try:
        return RecordFilter.from_configs(configs)
    except FilterError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Invalid config value for resource {resource_repr(name)}: {exc}") from None


def group_config_entries(configs: Mapping[str, str], keys: Sequence[str] | None
                         ) -> list[tuple[str, str | None, int, int]]:
    """(name, value, source, config type) of each key asked for: the two key conditions always (unset: no
    value, source DEFAULT_CONFIG, as Kafka lists a resource's keys with their defaults, which is what
    kafka-python's ``alter_configs`` checks names against) and every stored header condition."""
    entries: dict[str, tuple[str | None, int]] = {k: (None, SOURCE_DEFAULT_CONFIG) for k in _ALWAYS_LISTED}
    entries.update({k: (v, SOURCE_DYNAMIC_GROUP_CONFIG) for k, v in configs.items()})
    return [(k, v, source, _CONFIG_TYPE_LIST) for k, (v, source) in sorted(entries.items())
            if keys is None or k in keys]


def read_group_config(ctx: RequestContext, name: str) -> dict[str, str]:
    """Blocking: the group's configs as the store holds them."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "A group config resource needs a group name")
    return read_group_configs(ctx.broker.metadata_store, name)


async def apply_group_configs(ctx: RequestContext, name: str, configs: Mapping[str, str],
                              validate_only: bool) -> None:
    record_filter = parse_group_configs(name, configs)
    coordinator = ctx.broker.group_coordinator
    error = coordinator.coordinator_error(name)
    if error is not None:
        raise KafkaError(error, f"this broker is not the coordinator of group {name} now; ask FindCoordinator")
    group = coordinator.groups().get(name)
    exists = group is not None and group.state.value != "Dead"
    if not exists and not record_filter.is_empty:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                         f"group {name} does not exist: start one of its consumers, or create it with committed "
                         f"offsets (sofakafka groups reset-offsets --group {name} ... --execute), then set its "
                         f"filter")
    if validate_only:
        return
    bindings = member_bindings(group) if group is not None else {}
    store = ctx.broker.metadata_store
    await ctx.broker.run_blocking(lambda: write_group_filter(store, name, record_filter, bindings))
    # Answered once this coordinator knows the filter itself: a JoinGroup it answers next publishes the member.
    await ctx.broker.run_blocking(ctx.broker.group_filters.reload)
