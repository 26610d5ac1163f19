"""The stand-in for the LDC naming module: ``--instance/--cell/--topic`` -> ``$NS.$CELL.$TOPIC``."""

from __future__ import annotations

import pytest

from sofakafka.pipelines.naming import MAX_TOPIC_LENGTH, physical_topic


def test_instance_and_cell_prefix_the_logical_topic() -> None:
    assert physical_topic("orders", instance="shop", cell="gz01") == "shop.gz01.orders"


def test_without_instance_and_cell_the_topic_is_used_as_it_is() -> None:
    assert physical_topic("access-logs") == "access-logs"
    assert physical_topic("a.b.c") == "a.b.c"


@pytest.mark.parametrize(("instance", "cell", "missing"), [("shop", None, "--cell"), (None, "gz01", "--instance")])
def test_one_of_instance_and_cell_without_the_other_names_the_missing_option(
        instance: str | None, cell: str | None, missing: str) -> None:
    with pytest.raises(ValueError, match=f"^{missing} is required"):
        physical_topic("orders", instance=instance, cell=cell)


@pytest.mark.parametrize(("kwargs", "option"), [
    ({"topic": "bad topic"}, "--topic"), ({"topic": ""}, "--topic"), ({"topic": ".."}, "--topic"),
    ({"topic": "t", "instance": "a.b", "cell": "c"}, "--instance"),
    ({"topic": "t", "instance": "a", "cell": "c/d"}, "--cell"),
])
def test_illegal_parts_are_refused_naming_the_option(kwargs: dict[str, str], option: str) -> None:
    topic = kwargs.pop("topic")
    with pytest.raises(ValueError, match=f"^{option} "):
        physical_topic(topic, **kwargs)


def test_the_length_limit_is_kafkas_249_characters_at_its_edge() -> None:
    prefix = "ns.cell."
    assert len(physical_topic("t" * (MAX_TOPIC_LENGTH - len(prefix)), instance="ns", cell="cell")) == 249
    with pytest.raises(ValueError, match="longer than 249"):
        physical_topic("t" * (MAX_TOPIC_LENGTH - len(prefix) + 1), instance="ns", cell="cell")
    assert physical_topic("t" * (MAX_TOPIC_LENGTH - len(prefix) - 1), instance="ns", cell="cell")
