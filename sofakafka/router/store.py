"""Where LDC clients, the router and the console find the model, the rules and the group filters.

All three live in the metadata store (embedded or ZooKeeper), reached the way any client reaches configs:

* the model and the routing rules are the cluster-wide dynamic broker configs ``sofakafka.ldc.model`` and
  ``sofakafka.router.rules`` (JSON), i.e. ``/config/brokers/<default>`` in Kafka's layout, read with
  DescribeConfigs and written with IncrementalAlterConfigs on the BROKER resource with the empty name;
* a group's filter is the configs of Kafka's GROUP config resource (type 32) named by the physical group,
  ``/config/groups/<group>`` (see :mod:`sofakafka.ldc.filters`).

Stock admin clients reach them the same way (``kafka-configs.sh --entity-type brokers --entity-default``,
kafka-python's and confluent-kafka's ``describe_configs``/``incremental_alter_configs``); the broker checks
every value it is given, so a bad model or rule is refused whoever sends it. This module is the thin,
typed wrapper our own client uses.
"""

from __future__ import annotations

from sofakafka.client.client import AlterConfigOp, ConfigResourceType, KafkaClient
from sofakafka.client.groups import GroupAdmin
from sofakafka.ldc import LdcError, LdcModel, RecordFilter, RoutingRules
from sofakafka.protocol.errors import ErrorCode, KafkaError

MODEL_CONFIG = "sofakafka.ldc.model"
RULES_CONFIG = "sofakafka.router.rules"


def _read_default_broker_config(client: KafkaClient, name: str) -> str | None:
    (result,) = client.describe_configs([(ConfigResourceType.BROKER, "", [name])])
    if result.error != ErrorCode.NONE:
        raise KafkaError(result.error, result.error_message or f"DescribeConfigs of {name} failed")
    for entry in result.entries:
        if entry.name == name:
            return entry.value
    return None


def _write_default_broker_config(client: KafkaClient, name: str, value: str | None, *,
                                 validate_only: bool = False) -> None:
    op = (name, AlterConfigOp.DELETE, None) if value is None else (name, AlterConfigOp.SET, value)
    (result,) = client.incremental_alter_configs({(ConfigResourceType.BROKER, ""): [op]},
                                                 validate_only=validate_only)
    if result.error != ErrorCode.NONE:
        raise KafkaError(result.error, result.error_message or f"IncrementalAlterConfigs of {name} failed")


def read_model(client: KafkaClient) -> LdcModel | None:
    """The stored model, or None when none is stored."""
    text = _read_default_broker_config(client, MODEL_CONFIG)
    if not text:
        return None
    return LdcModel.from_json(text)


def require_model(client: KafkaClient) -> LdcModel:
    model = read_model(client)
    if model is None:
        raise LdcError("model", "no LDC model is stored in this cluster (sofakafka ldc load FILE stores one)")
    return model


def write_model(client: KafkaClient, model: LdcModel | None, *, validate_only: bool = False) -> None:
    _write_default_broker_config(client, MODEL_CONFIG, None if model is None else model.to_json(),
                                 validate_only=validate_only)


def read_rules(client: KafkaClient) -> RoutingRules:
    text = _read_default_broker_config(client, RULES_CONFIG)
    return RoutingRules() if not text else RoutingRules.from_text(text, "rules.json")


def write_rules(client: KafkaClient, rules: RoutingRules | None, *, validate_only: bool = False) -> None:
    _write_default_broker_config(client, RULES_CONFIG, None if rules is None or not rules.rules else rules.to_json(),
                                 validate_only=validate_only)


# -- group filters ------------------------------------------------------------------------------------------------
def read_group_filter(client: KafkaClient, group: str) -> RecordFilter:
    """The group's filter (empty when it has none); asked of the group's coordinator."""

    def call(node: int) -> RecordFilter:
        (result,) = client.describe_configs([(ConfigResourceType.GROUP, group, None)], node_id=node)
        if result.error != ErrorCode.NONE:
            raise KafkaError(result.error, result.error_message or f"DescribeConfigs of group {group} failed")
        return RecordFilter.from_configs({e.name: e.value for e in result.entries if e.value is not None})

    return GroupAdmin(client).at_coordinator(group, "DescribeConfigs", call)


def write_group_filter(client: KafkaClient, group: str, record_filter: RecordFilter, *,
                       validate_only: bool = False) -> None:
    """Replace the group's filter (an empty one removes it) at the group's coordinator, which refuses a
    group that does not exist (GROUP_ID_NOT_FOUND) and a bad value (INVALID_REQUEST), naming them."""
    configs: dict[str, str | None] = dict(record_filter.to_configs())

    def call(node: int) -> None:
        (result,) = client.alter_configs({(ConfigResourceType.GROUP, group): configs}, validate_only=validate_only,
                                         node_id=node)
        if result.error != ErrorCode.NONE:
            raise KafkaError(result.error, result.error_message or f"AlterConfigs of group {group} failed")

    GroupAdmin(client).at_coordinator(group, "AlterConfigs", call)


def list_group_filters(client: KafkaClient) -> dict[str, RecordFilter]:
    """Every listed group that has a filter (a filter kept for a group that no longer exists is not listed
    here: ``read_group_filter`` still finds it)."""
    out: dict[str, RecordFilter] = {}
    for listing in GroupAdmin(client).list_groups():
        f = read_group_filter(client, listing.group_id)
        if not f.is_empty:
            out[listing.group_id] = f
    return out
