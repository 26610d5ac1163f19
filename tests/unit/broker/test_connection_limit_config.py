"""The connection limits in force (static, cluster-wide dynamic, per-broker dynamic) and their validation, as
Kafka 2.6 layers and checks ``max.connections``, ``max.connections.per.ip``, its overrides and a listener's own
``listener.name.<listener>.max.connections``."""

from __future__ import annotations

import pytest

from sofakafka.broker.config import ConfigError, KafkaConfig
from sofakafka.broker.handlers.alter_configs import validate_broker_configs
from sofakafka.broker.server import ConnectionLimits, connection_limits

TWO_LISTENERS = {
    "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
}


def test_static_limits_and_a_listener_without_its_own_key_falls_back_to_max_connections() -> None:
    limits = connection_limits(KafkaConfig.from_properties({
        **TWO_LISTENERS, "max.connections": "50", "max.connections.per.ip": "7",
        "max.connections.per.ip.overrides": "127.0.0.2:9", "listener.name.external.max.connections": "20"}))
    assert limits == ConnectionLimits(50, 7, "127.0.0.2:9", {"EXTERNAL": 20})
    assert limits.listener_limit("EXTERNAL") == 20
    assert limits.listener_limit("INTERNAL") == 50


def test_dynamic_values_win_over_static_ones() -> None:
    static = KafkaConfig.from_properties({**TWO_LISTENERS, "max.connections": "50",
                                          "listener.name.external.max.connections": "20"})
    limits = connection_limits(static, {"max.connections": "60", "max.connections.per.ip": "3",
                                        "max.connections.per.ip.overrides": "127.0.0.3:1",
                                        "listener.name.external.max.connections": "30",
                                        "listener.name.internal.max.connections": "10"})
    assert limits == ConnectionLimits(60, 3, "127.0.0.3:1", {"EXTERNAL": 30, "INTERNAL": 10})


def test_a_bad_dynamic_value_keeps_the_layer_below_and_an_unknown_listener_is_ignored() -> None:
    static = KafkaConfig.from_properties({**TWO_LISTENERS, "max.connections": "50"})
    limits = connection_limits(static, {"max.connections": "-1", "max.connections.per.ip.overrides": "nocount",
                                        "listener.name.other.max.connections": "5"})
    assert limits == ConnectionLimits(50, static.get_int("max.connections.per.ip"), "", {})


@pytest.mark.parametrize(("value", "ok"), [("-1", False), ("0", True), ("1", True), ("x", False)])
def test_a_listener_limit_at_its_edge_at_start_up(value: str, ok: bool) -> None:
    props = {**TWO_LISTENERS, "listener.name.external.max.connections": value}
    if ok:
        assert connection_limits(KafkaConfig.from_properties(props)).listener_max == {"EXTERNAL": int(value)}
    else:
        with pytest.raises(ConfigError, match=r"listener\.name\.external\.max\.connections"):
            KafkaConfig.from_properties(props)


@pytest.mark.parametrize("broker_id", [None, 0])
@pytest.mark.parametrize(("key", "value", "ok"), [
    ("max.connections", "-1", False), ("max.connections", "0", True),
    ("max.connections.per.ip", "-1", False), ("max.connections.per.ip", "0", True),
    ("listener.name.external.max.connections", "-1", False),
    ("listener.name.external.max.connections", "0", True),
    ("max.connections.per.ip.overrides", "127.0.0.1:x", False),
    ("max.connections.per.ip.overrides", "127.0.0.1:2,localhost:3", True),
])
def test_alter_configs_validates_each_dynamic_connection_key_cluster_wide_and_per_broker(
        broker_id: int | None, key: str, value: str, ok: bool) -> None:
    if ok:
        validate_broker_configs(broker_id, {key: value})
    else:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            validate_broker_configs(broker_id, {key: value})
