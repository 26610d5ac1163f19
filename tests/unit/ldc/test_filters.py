"""RecordFilter: what matches, and its stored form as group configs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.ldc import FilterError, RecordFilter
from sofakafka.ldc.filters import HEADER_CONFIG_PREFIX, KEY_EQUALS_CONFIG, KEY_PREFIX_CONFIG

H = [("__UNIT.ORIUNIT", b"R1"), ("__UNIT.TARGET_R", b"R2")]


def test_empty_filter_passes_everything() -> None:
    f = RecordFilter()
    assert f.is_empty
    assert f.matches(None, [])
    assert f.matches(b"k", H)
    assert f.to_configs() == {}


def test_header_equals() -> None:
    f = RecordFilter.build(headers=[("__UNIT.TARGET_R", "R2")])
    assert f.matches(None, H)
    assert not f.matches(None, [("__UNIT.TARGET_R", b"R1")])
    assert not f.matches(None, [("__UNIT.TARGET_R", b"R22")])
    assert not f.matches(None, [("__UNIT.TARGET_R", b"R")])
    assert not f.matches(None, [("__UNIT.TARGET_R", None)])
    assert not f.matches(None, [("__unit.target_r", b"R2")])  # header names are case-sensitive, as in Kafka
    assert not f.matches(b"k", [])
    # a repeated header matches when any occurrence does
    assert f.matches(None, [("__UNIT.TARGET_R", b"R1"), ("__UNIT.TARGET_R", b"R2")])


def test_values_of_one_header_are_alternatives_and_headers_all_must_hold() -> None:
    f = RecordFilter.build(headers=[("a", "1"), ("a", "2"), ("b", "x")])
    assert f.matches(None, [("a", b"1"), ("b", b"x")])
    assert f.matches(None, [("a", b"2"), ("b", b"x")])
    assert not f.matches(None, [("a", b"3"), ("b", b"x")])
    assert not f.matches(None, [("a", b"1")])


def test_key_equals_and_prefix_at_their_edges() -> None:
    f = RecordFilter.build(key_equals=["user-7"], key_prefixes=["acct-"])
    assert f.matches(b"user-7", [])
    assert not f.matches(b"user-70", [])
    assert not f.matches(b"user-", [])
    assert f.matches(b"acct-", [])          # the prefix itself
    assert f.matches(b"acct-1", [])
    assert not f.matches(b"acct", [])       # one short of the prefix
    assert not f.matches(None, [])          # no key matches no key condition
    both = RecordFilter.build(key_prefixes=["acct-"], headers=[("h", "v")])
    assert both.matches(b"acct-1", [("h", b"v")])
    assert not both.matches(b"acct-1", [("h", b"w")])
    assert not both.matches(b"user-1", [("h", b"v")])


def test_stored_form() -> None:
    f = RecordFilter.build(key_equals=["b", "a"], key_prefixes=["p-"], headers={"__UNIT.ORIUNIT": ["R1", "R2"]})
    assert f.to_configs() == {KEY_EQUALS_CONFIG: "a,b", KEY_PREFIX_CONFIG: "p-",
                              HEADER_CONFIG_PREFIX + "__UNIT.ORIUNIT": "R1,R2"}
    assert RecordFilter.from_configs(f.to_configs()) == f
    assert RecordFilter.from_configs({KEY_EQUALS_CONFIG: " a , b "}) == RecordFilter.build(key_equals=["a", "b"])
    assert f.describe() == "key=a|b key-prefix=p- header:__UNIT.ORIUNIT=R1|R2"


token = st.text(alphabet=st.characters(blacklist_characters=",", blacklist_categories=("Cs", "Zs", "Cc")),
                min_size=1, max_size=12)


@given(keys=st.lists(token, max_size=3), prefixes=st.lists(token, max_size=3),
       headers=st.dictionaries(token, st.lists(token, min_size=1, max_size=3), max_size=3))
def test_stored_form_round_trips(keys: list[str], prefixes: list[str], headers: dict[str, list[str]]) -> None:
    f = RecordFilter.build(key_equals=keys, key_prefixes=prefixes, headers=headers)
    assert RecordFilter.from_configs(f.to_configs()) == f


@pytest.mark.parametrize(("configs", "key", "words"), [
    ({KEY_EQUALS_CONFIG: "a,,b"}, KEY_EQUALS_CONFIG, "empty value"),
    ({KEY_PREFIX_CONFIG: ""}, KEY_PREFIX_CONFIG, "no value given"),
    ({"sofakafka.filter.keyprefix": "a"}, "sofakafka.filter.keyprefix", "unknown group config"),
    ({HEADER_CONFIG_PREFIX: "a"}, HEADER_CONFIG_PREFIX, "unknown group config"),
    ({"consumer.session.timeout.ms": "1"}, "consumer.session.timeout.ms", "unknown group config"),
])
def test_bad_stored_forms_name_the_key(configs: dict[str, str], key: str, words: str) -> None:
    with pytest.raises(FilterError) as err:
        RecordFilter.from_configs(configs)
    assert err.value.key == key
    assert words in str(err.value)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"key_equals": ["a,b"]}, "contains a comma"),
    ({"key_prefixes": [""]}, "empty value"),
    ({"headers": [("h", " v")]}, "whitespace"),
    ({"headers": [("", "v")]}, "header name"),
    ({"key_equals": [b"\xff"]}, "not UTF-8"),
])
def test_values_the_stored_form_cannot_carry_are_refused(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(FilterError, match=words):
        RecordFilter.build(**kwargs)  # type: ignore[arg-type]
