"""The option syntaxes the console verbs share with Kafka's tools, parsed without a broker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.cli.common import UsageError, unescape
from sofakafka.cli.configs import split_config_list
from sofakafka.cli.topics import replica_assignment

_token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=8)


@given(st.lists(st.tuples(_token, st.lists(_token, min_size=1, max_size=3)), min_size=1, max_size=5))
def test_add_config_lists_keep_bracketed_commas_in_the_value(items: list[tuple[str, list[str]]]) -> None:
    text = ",".join(f"{k}=[{','.join(v)}]" if len(v) > 1 else f"{k}={v[0]}" for k, v in items)
    assert split_config_list(text) == [f"{k}={','.join(v)}" for k, v in items]


def test_unbalanced_brackets_are_a_usage_error() -> None:
    with pytest.raises(UsageError):
        split_config_list("a=[x,y")


@given(st.lists(st.lists(st.integers(min_value=0, max_value=99), min_size=1, max_size=3), min_size=1, max_size=6))
def test_replica_assignment_lists_partitions_by_comma_and_replicas_by_colon(assignment: list[list[int]]) -> None:
    text = ",".join(":".join(map(str, replicas)) for replicas in assignment)
    assert replica_assignment(text) == dict(enumerate(assignment))


def test_replica_assignment_refuses_non_numbers() -> None:
    with pytest.raises(UsageError, match="broker ids must be integers"):
        replica_assignment("0:a")


def test_separators_from_a_shell_arrive_escaped() -> None:
    assert unescape("\\t") == "\t"
    assert unescape(":") == ":"
