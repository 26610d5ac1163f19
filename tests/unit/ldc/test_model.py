"""The LDC model: physical names round-trip, bad names and bad models are refused naming the wrong part."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.ldc import (
    UNIT_ORIUNIT,
    UNIT_TARGET_C,
    UNIT_TARGET_G,
    UNIT_TARGET_R,
    Cell,
    LdcError,
    LdcModel,
    PhysicalName,
    RecordFilter,
    SubscriptionMode,
    Zone,
)
from sofakafka.ldc.model import MAX_TOPIC_NAME_LENGTH

from .conftest import BILL_MODEL_TOML

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=1,
                max_size=40)


@given(instance=names, cells=st.lists(names, min_size=1, max_size=5, unique=True), data=st.data())
def test_physical_topic_and_group_names_parse_back_to_their_parts(instance: str, cells: list[str],
                                                                  data: st.DataObject) -> None:
    model = LdcModel(instance, tuple(Cell(c, Zone.RZONE, "city") for c in cells))
    cell = data.draw(st.sampled_from(cells))
    logical = data.draw(names)
    topic = model.physical_topic(cell, logical)
    assert topic == f"{instance}.{cell}.{logical}"
    assert model.parse_physical(topic) == PhysicalName(instance, cell, logical)
    assert str(model.parse_physical(topic)) == topic
    group = model.physical_group(cell, logical)
    assert model.parse_physical(group, "group") == PhysicalName(instance, cell, logical)


@given(st.data())
def test_model_survives_its_stored_and_file_forms(data: st.DataObject) -> None:
    cells = data.draw(st.lists(names, min_size=0, max_size=6, unique=True))
    cut = data.draw(st.integers(0, 99))
    built = []
    for i, name in enumerate(cells):
        if i == 0:
            built.append(Cell(name, Zone.RZONE, "c1", ((0, cut),)))
        elif i == 1 and cut < 99:
            built.append(Cell(name, Zone.RZONE, "c2", ((cut + 1, 99),)))
        elif i == 2:
            built.append(Cell(name, Zone.GZONE, "c1"))
        else:
            built.append(Cell(name, Zone.CZONE, f"city{i}"))
    model = LdcModel(data.draw(names), tuple(built))
    assert LdcModel.from_json(model.to_json()) == model
    assert LdcModel.from_toml(model.to_toml()) == model
    assert LdcModel.from_text(model.to_toml()) == model
    assert LdcModel.from_text(model.to_json()) == model


def test_bill_model_loads_from_toml(model: LdcModel) -> None:
    assert model.instance == "ANT"
    assert model.cell_names == ["CZ01", "CZ02", "GZ00", "R1", "R2"]
    assert model.cities == ["hangzhou", "shanghai"]
    assert model.cell("CZ02").zone is Zone.CZONE
    assert model.cell("R1").uids == ((0, 49),)


@pytest.mark.parametrize(("cell", "logical", "part", "words"), [
    ("R1", "bills.v2", "logical topic", "contains a dot"),
    ("R1", "bills v2", "logical topic", "' '"),
    ("R1", "", "logical topic", "must not be empty"),
    ("R9", "bills", "cell", "'R9' is not a cell of instance ANT (cells: CZ01, CZ02, GZ00, R1, R2)"),
    ("R.1", "bills", "cell", "contains a dot"),
])
def test_bad_names_are_refused_naming_the_wrong_part(model: LdcModel, cell: str, logical: str, part: str,
                                                     words: str) -> None:
    with pytest.raises(LdcError) as err:
        model.physical_topic(cell, logical)
    assert err.value.part == part
    assert words in str(err.value)
    assert str(err.value).startswith(part + ": ")


def test_bad_group_names_say_group(model: LdcModel) -> None:
    with pytest.raises(LdcError, match=r"^logical group: 'a\.b' contains a dot"):
        model.physical_group("R1", "a.b")


@pytest.mark.parametrize(("name", "part", "words"), [
    ("ANT.R1", "physical topic", "has 1 dots"),
    ("ANT.R1.bills.x", "physical topic", "has 3 dots"),
    ("BOB.R1.bills", "instance", "not this model's instance ANT"),
    ("ANT.R7.bills", "cell", "'R7' is not a cell"),
    ("ANT.R1.", "logical topic", "must not be empty"),
])
def test_bad_physical_names_are_refused_naming_the_wrong_part(model: LdcModel, name: str, part: str,
                                                              words: str) -> None:
    with pytest.raises(LdcError) as err:
        model.parse_physical(name)
    assert err.value.part == part
    assert words in str(err.value)


def test_physical_topic_length_limit_at_its_edge() -> None:
    model = LdcModel("N", (Cell("C", Zone.RZONE, "x"),))
    room = MAX_TOPIC_NAME_LENGTH - len("N.C.")
    assert len(model.physical_topic("C", "t" * room)) == MAX_TOPIC_NAME_LENGTH
    assert model.physical_topic("C", "t" * (room - 1))
    with pytest.raises(LdcError, match=r"^logical topic: .* 250 characters"):
        model.physical_topic("C", "t" * (room + 1))


@pytest.mark.parametrize(("toml", "part", "words"), [
    ('instance = "A.B"', "instance", "contains a dot"),
    ('cells = {}', "instance", "missing"),
    ('instance = "A"\nextra = 1', "extra", "unknown key"),
    ('instance = "A"\n[cells.R1]\nzone = "Rzone2"\ncity = "x"', "cells.R1.zone", "not a zone"),
    ('instance = "A"\n[cells.R1]\nzone = "RZone"', "cells.R1.city", "missing"),
    ('instance = "A"\n[cells.R1]\nzone = "RZone"\ncity = "x"\nzon = 1', "cells.R1.zon", "unknown key"),
    ('instance = "A"\n[cells.G]\nzone = "GZone"\ncity = "x"\nuids = ["01"]', "cells.G.uids", "only an RZone"),
    ('instance = "A"\n[cells.R1]\nzone = "RZone"\ncity = "x"\nuids = ["00-100"]', "cells.R1.uids", "within 00-99"),
    ('instance = "A"\n[cells.R1]\nzone = "RZone"\ncity = "x"\nuids = ["50-10"]', "cells.R1.uids", "lo <= hi"),
    ('instance = "A"\n[cells.R1]\nzone = "RZone"\ncity = "x"\nuids = ["a-b"]', "cells.R1.uids", "not a uid range"),
    ('instance = "A"\n[cells.R1]\nzone = "RZone"\ncity = "x"\nuids = ["00-49"]\n'
     '[cells.R2]\nzone = "RZone"\ncity = "y"\nuids = ["49-99"]', "cells.R2.uids", "uid 49 is already owned by R1"),
    ('instance = "A"\n[cells.G1]\nzone = "GZone"\ncity = "x"\n[cells.G2]\nzone = "GZone"\ncity = "y"',
     "cells.G2.zone", "a second GZone (G1 is one)"),
    ('instance = "A"\n[cells.C1]\nzone = "CZone"\ncity = "x"\n[cells.C2]\nzone = "CZone"\ncity = "x"',
     "cells.C2.zone", "a second CZone in city x"),
    ('instance = "A"\n[cells.R1]\nzone = "RZone"\ncity = "hang zhou"', "cells.R1.city", "' '"),
    ('instance = "A"\n[cells.R1\nzone = 1', "TOML", ""),
])
def test_bad_models_are_refused_naming_the_wrong_part(toml: str, part: str, words: str) -> None:
    with pytest.raises(LdcError) as err:
        LdcModel.from_toml(toml)
    assert err.value.part == part
    assert words in str(err.value)


def test_uid_ranges_at_their_edges(model: LdcModel) -> None:
    assert model.rzone_for_uid(0).name == "R1"
    assert model.rzone_for_uid(49).name == "R1"
    assert model.rzone_for_uid(50).name == "R2"
    assert model.rzone_for_uid(99).name == "R2"
    assert model.rzone_for_uid("2088000012345650").name == "R2"  # a user id: its last two digits
    for bad in (-1, 100, "12a", True):
        with pytest.raises(LdcError, match=r"^uid: "):
            model.rzone_for_uid(bad)  # type: ignore[arg-type]
    partial = LdcModel("A", (Cell("R1", Zone.RZONE, "x", ((0, 9),)),))
    with pytest.raises(LdcError, match="uid 10 is owned by no RZone"):
        partial.rzone_for_uid(10)


def test_unit_headers_from_each_kind_of_cell(model: LdcModel) -> None:
    assert model.unit_headers("R1") == [(UNIT_ORIUNIT, b"R1"), (UNIT_TARGET_G, b"GZ00"), (UNIT_TARGET_C, b"CZ01")]
    assert model.unit_headers("R1", uid=57) == [(UNIT_ORIUNIT, b"R1"), (UNIT_TARGET_G, b"GZ00"),
                                                (UNIT_TARGET_C, b"CZ01"), (UNIT_TARGET_R, b"R2")]
    assert model.unit_headers("R2", uid=3)[-2:] == [(UNIT_TARGET_C, b"CZ02"), (UNIT_TARGET_R, b"R1")]
    lonely = LdcModel("A", (Cell("R1", Zone.RZONE, "x", ((0, 99),)),))
    assert lonely.unit_headers("R1") == [(UNIT_ORIUNIT, b"R1")]  # no GZone, no CZone: no such header


def test_subscription_filters_and_where_they_may_start(model: LdcModel) -> None:
    assert model.subscription_filter("R1", SubscriptionMode.LOCAL) == RecordFilter.build(headers=[(UNIT_ORIUNIT, "R1")])
    assert model.subscription_filter("R2", SubscriptionMode.RZONE) == RecordFilter.build(
        headers=[(UNIT_TARGET_R, "R2")])
    assert model.subscription_filter("GZ00", SubscriptionMode.GZONE).headers == ((UNIT_TARGET_G, (b"GZ00",)),)
    assert model.subscription_filter("CZ02", SubscriptionMode.CZONE).headers == ((UNIT_TARGET_C, (b"CZ02",)),)
    assert model.subscription_filter("GZ00", SubscriptionMode.LOCAL).headers == ((UNIT_ORIUNIT, (b"GZ00",)),)
    with pytest.raises(LdcError, match=r"^subscription mode: a RZone subscription starts only in a RZone; cell GZ00"):
        model.subscription_filter("GZ00", SubscriptionMode.RZONE)
    with pytest.raises(LdcError, match="starts only in a GZone"):
        model.subscription_filter("R1", SubscriptionMode.GZONE)
    with pytest.raises(LdcError, match="starts only in a CZone"):
        model.subscription_filter("R1", SubscriptionMode.CZONE)
    assert SubscriptionMode.parse("rzone") is SubscriptionMode.RZONE
    with pytest.raises(LdcError, match=r"^subscription mode: 'Zone' is not one of"):
        SubscriptionMode.parse("Zone")


def test_edits_return_checked_models(model: LdcModel) -> None:
    bigger = model.with_cell(Cell("R3", Zone.RZONE, "shenzhen"))
    assert "R3" in bigger.cell_names and "R3" not in model.cell_names
    assert "R1" not in model.without_cell("R1").cell_names
    with pytest.raises(LdcError, match="uid 10 is already owned by R1"):
        model.with_cell(Cell("R3", Zone.RZONE, "shenzhen", ((10, 10),)))
    with pytest.raises(LdcError, match="'R9' is not a cell"):
        model.without_cell("R9")


def test_toml_round_trip_of_the_bill_model_keeps_what_was_written(model: LdcModel) -> None:
    assert LdcModel.from_toml(model.to_toml()) == model
    assert LdcModel.from_toml(BILL_MODEL_TOML).to_json() == model.to_json()
