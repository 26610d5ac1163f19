"""IncrementalAlterConfigs' operations and the dynamic broker config rules, as pure functions.

The handlers that use them are tested end to end against a real broker in tests/unit/client/; here the
operation semantics are checked against a model over many generated cases.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.broker.config import ConfigError
from sofakafka.broker.handlers.alter_configs import validate_broker_configs
from sofakafka.broker.handlers.incremental_alter_configs import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    AlterableConfig,
    apply_operations,
)
from sofakafka.protocol.errors import ErrorCode, KafkaError

TOPIC, BROKER = 2, 4
_items = st.sampled_from(["compact", "delete", "a", "b"])
_keys = st.sampled_from(["retention.ms", "segment.bytes", "flush.ms"])


@given(st.dictionaries(_keys, st.text(max_size=5)),
       st.dictionaries(_keys, st.tuples(st.sampled_from([SET, DELETE]), st.text(max_size=5))))
def test_set_and_delete_behave_like_a_dict(current: dict[str, str], ops: dict[str, tuple[int, str]]) -> None:
    expected = dict(current)
    for name, (op, value) in ops.items():
        if op == SET:
            expected[name] = value
        else:
            expected.pop(name, None)
    request = [AlterableConfig(name=n, config_operation=op, value=v if op == SET else None)
               for n, (op, v) in ops.items()]
    assert apply_operations(TOPIC, current, request) == expected


@given(st.lists(_items, unique=True), st.lists(_items, min_size=1), st.sampled_from([APPEND, SUBTRACT]))
def test_append_and_subtract_edit_list_items(start: list[str], change: list[str], op: int) -> None:
    current = {"cleanup.policy": ",".join(start)} if start else {}
    result = apply_operations(TOPIC, current, [AlterableConfig(name="cleanup.policy", config_operation=op,
                                                               value=",".join(change))])
    items = [i for i in result["cleanup.policy"].split(",") if i]
    base = start if start else ["delete"]  # an unset list starts from its default
    if op == APPEND:
        assert items == base + [c for c in dict.fromkeys(change) if c not in base]
    else:
        assert items == [i for i in base if i not in change]


@pytest.mark.parametrize(("ops", "fragment"), [
    ([AlterableConfig(name="retention.ms", config_operation=APPEND, value="1")], "append is not allowed"),
    ([AlterableConfig(name="retention.ms", config_operation=SET, value=None)], "Null value"),
    ([AlterableConfig(name="x", config_operation=SET, value="1"),
      AlterableConfig(name="x", config_operation=DELETE, value=None)], "duplicate config keys"),
    ([AlterableConfig(name="x", config_operation=9, value="1")], "Unknown config operation"),
])
def test_ill_formed_operations_are_invalid_requests(ops: list[AlterableConfig], fragment: str) -> None:
    with pytest.raises(KafkaError) as info:
        apply_operations(TOPIC, {}, ops)
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert fragment in (info.value.message or "")


def test_broker_list_keys_append_from_their_default() -> None:
    result = apply_operations(BROKER, {}, [AlterableConfig(name="log.cleanup.policy", config_operation=APPEND,
                                                           value="compact")])
    assert result == {"log.cleanup.policy": "delete,compact"}


@pytest.mark.parametrize(("broker_id", "configs", "key"), [
    (0, {"broker.id": "3"}, "broker.id"),                          # read-only
    (None, {"listeners": "PLAINTEXT://:9"}, "listeners"),          # per-broker key at the default level
    (0, {"ssl.keystore.password": "x"}, "ssl.keystore.password"),  # no password encoder secret
    (0, {"log.retention.hours": "1"}, "log.retention.hours"),      # only its .ms form is dynamic in Kafka 2.6
    (0, {"log.cleaner.threads": "many"}, "log.cleaner.threads"),   # bad value
])
def test_dynamic_broker_config_refusals_name_the_key(broker_id: int | None, configs: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_broker_configs(broker_id, configs)
    assert info.value.key == key


def test_unknown_broker_keys_are_accepted_unvalidated_as_kafka_accepts_them() -> None:
    """Kafka 2.6 stores a broker key it does not know (custom configs); tests/conformance compares."""
    validate_broker_configs(0, {"no.such.key": "1"})
    validate_broker_configs(None, {"log.cleaner.dedupe.buffer.size": "134217728"})


def test_dynamic_broker_configs_accept_cluster_wide_and_per_broker_keys() -> None:
    validate_broker_configs(None, {"log.retention.bytes": "10", "log.cleaner.threads": "2"})
    validate_broker_configs(0, {"listeners": "PLAINTEXT://:9", "message.max.bytes": "2000"})
