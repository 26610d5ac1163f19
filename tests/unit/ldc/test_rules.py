"""Routing rules: parsing, checks against the model, and the loop-proof path header."""

from __future__ import annotations

import pytest

from sofakafka.ldc import ROUTER_PATH_HEADER, LdcError, LdcModel, RecordFilter, RoutingRules
from sofakafka.ldc.rules import parse_path, with_path
from tests.ldc_data import RULE_R1_TO_R2

BILL_RULES = RULE_R1_TO_R2 + """
[[rules]]
name = "bills-to-r1"
from = "R2"
topic = "bills"
to = "R1"
target_topic = "bills_in"
[rules.match]
headers = { "__UNIT.TARGET_R" = ["R1"] }
key_prefix = "B-"
"""


def test_bill_rules_parse_and_check(model: LdcModel) -> None:
    rules = RoutingRules.from_text(BILL_RULES)
    rules.check(model)
    first, second = rules.rules
    assert first.source_physical(model) == "ANT.R1.bills"
    assert first.target_physical(model, "R2") == "ANT.R2.bills"
    assert first.match == RecordFilter.build(headers=[("__UNIT.TARGET_R", "R2")])
    assert second.target_physical(model, "R1") == "ANT.R1.bills_in"
    assert second.match.key_prefixes == (b"B-",)
    assert RoutingRules.from_text(rules.to_json()) == rules
    assert rules.cells_used() == {"R1", "R2"}
    assert rules.by_name("bills-to-r1") is second


@pytest.mark.parametrize(("text", "part", "words"), [
    ("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 'bills'\nto = ['R9']", "rules[0] (x).to", "'R9' is not a cell"),
    ("[[rules]]\nname = 'x'\nfrom = 'R7'\ntopic = 'bills'\nto = ['R2']", "rules[0] (x).from", "'R7' is not a cell"),
])
def test_rules_naming_unknown_cells_fail_the_model_check(model: LdcModel, text: str, part: str,
                                                         words: str) -> None:
    rules = RoutingRules.from_text(text)
    with pytest.raises(LdcError) as err:
        rules.check(model)
    assert err.value.part == part
    assert words in str(err.value)


@pytest.mark.parametrize(("text", "part", "words"), [
    ("[[rules]\nname = 'x'", "TOML", ""),
    ("{\"rules\": [", "JSON", ""),
    ("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 'bills'", "rules[0] (x).to", "missing"),
    ("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 'b.c'\nto = 'R2'", "rules[0] (x).topic", "contains a dot"),
    ("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 'b'\nto = ['R1']", "rules[0] (x).to", "into itself"),
    ("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 'b'\nto = ['R2', 'R2']", "rules[0] (x).to", "twice"),
    ("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 'b'\nto = 'R2'\nfrm = 1", "rules[0] (x).frm", "unknown key"),
    ("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 'b'\nto = 'R2'\n[rules.match]\nkey = 'a,b'", "rules[0] (x).match",
     "comma"),
    ("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 'b'\nto = 'R2'\n[rules.match]\nvalue = 'a'",
     "rules[0] (x).match.value", "unknown key"),
    ("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 'b'\nto = 'R2'\n[[rules]]\nname = 'x'\nfrom = 'R2'\ntopic = 'b'\n"
     "to = 'R1'", "rules[1] (x).name", "same name"),
    ("[[rules]]\nname = 'a b'\nfrom = 'R1'\ntopic = 'b'\nto = 'R2'", "rules[0] (a b).name", "must be ASCII"),
    ("rules = 3", "rules", "array of tables"),
])
def test_bad_rule_files_name_the_wrong_part(text: str, part: str, words: str) -> None:
    with pytest.raises(LdcError) as err:
        RoutingRules.from_text(text)
    assert err.value.part == part
    assert words in str(err.value)


def test_path_header_stops_loops_both_ways(model: LdcModel) -> None:
    rules = RoutingRules.from_text(
        "[[rules]]\nname='a'\nfrom='R1'\ntopic='t'\nto=['R2','CZ01']\n"
        "[[rules]]\nname='b'\nfrom='R2'\ntopic='t'\nto=['R1','CZ02']")
    there, back = rules.rules
    original = [("k", b"v")]
    assert there.targets_for(parse_path(original)) == ["R2", "CZ01"]
    copied = with_path(original, "R1")
    assert copied == [("k", b"v"), (ROUTER_PATH_HEADER, b"R1")]
    # in R2, the copy may go on to CZ02 but never back to R1
    assert back.targets_for(parse_path(copied)) == ["CZ02"]
    twice = with_path(copied, "R2")
    assert parse_path(twice) == ["R1", "R2"]
    assert there.targets_for(parse_path(twice)) == ["CZ01"]
