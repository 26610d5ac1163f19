"""The release tables, checked against Kafka's version history as the repository keeps it
(tests/data/kafka-2.6/api_versions.json, written from Kafka 2.6's API-VERSIONS.md and message JSON by
tools/gen_reference_data.py).

The tables are written as deltas; these tests rebuild the full matrix from that data so a wrong delta shows up as
the exact (release, api key) it corrupts.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from sofakafka.protocol import versions
from sofakafka.protocol.versions import BROKER_2_6, RELEASES, changes, versions_for
from tests import reference_data

REFERENCE_RELEASES = reference_data.releases()
_RANGES = reference_data.per_release_ranges()
REFERENCE_MAX = {release: {key: high for key, (_, high) in table.items()} for release, table in _RANGES.items()}

# Table 2's prose states the one exception to "all minimum versions are 0"; assert the prose still says so,
# so that this rule cannot drift away from the reference unnoticed.
_MIN_RULE = re.compile(r"ControlledShutdown \(key 7\) which was 1-1 in 0\.10\.0 through 0\.11\.0")


def _reference_min(release: str, api_key: int) -> int:
    return _RANGES[release][api_key][0]


def test_reference_prose_still_states_the_controlled_shutdown_minimum(kafka_reference: Path) -> None:
    API_VERSIONS_MD = (kafka_reference / "API-VERSIONS.md").read_text(encoding="utf-8")
    assert _MIN_RULE.search(API_VERSIONS_MD)


def test_releases_are_the_reference_columns_in_order() -> None:
    assert list(RELEASES) == REFERENCE_RELEASES
    assert RELEASES[0] == "0.10.0"
    assert RELEASES[-1] == "2.6"


@pytest.mark.parametrize("release", REFERENCE_RELEASES)
def test_every_release_matches_the_reference_matrix(release: str) -> None:
    expected = {
        api_key: (_reference_min(release, api_key), max_version)
        for api_key, max_version in REFERENCE_MAX[release].items()
    }
    assert versions_for(release) == expected


def test_broker_2_6_matches_the_versions_a_2_6_broker_accepts() -> None:
    # Table 1 is a different source from Table 2 (ApiKeys.java vs the per-release history).
    accepted = reference_data.accepted_by_2_6()
    assert dict(BROKER_2_6) == accepted
    assert sorted(BROKER_2_6) == list(range(50))


def test_broker_2_6_matches_the_valid_versions_of_kafkas_message_json() -> None:
    found = reference_data.valid_versions_in_message_json()
    assert dict(BROKER_2_6) == found


@pytest.mark.parametrize("release", REFERENCE_RELEASES)
def test_changes_are_exactly_the_difference_from_the_previous_release(release: str) -> None:
    index = REFERENCE_RELEASES.index(release)
    previous = versions_for(REFERENCE_RELEASES[index - 1]) if index else {}
    current = versions_for(release)
    expected = {key: value for key, value in current.items() if previous.get(key) != value}
    assert changes(release) == expected
    assert expected, "a release without changes would not need its own entry"


def test_no_release_drops_an_api_or_lowers_a_max_version() -> None:
    # Clients that negotiated against an older broker must keep working against a newer one.
    for older, newer in itertools.pairwise(RELEASES):
        old_table, new_table = versions_for(older), versions_for(newer)
        assert set(old_table) <= set(new_table)
        for api_key, (_, old_max) in old_table.items():
            assert new_table[api_key][1] >= old_max, (older, newer, api_key)


def test_versions_for_returns_a_copy_the_caller_may_change() -> None:
    table = versions_for("2.6")
    table[0] = (0, 0)
    assert versions_for("2.6")[0] == (0, 8)
    assert BROKER_2_6[0] == (0, 8)
    with pytest.raises(TypeError):
        BROKER_2_6[0] = (0, 0)  # type: ignore[index]


def test_unknown_release_is_rejected_with_the_known_ones_listed() -> None:
    with pytest.raises(ValueError, match=r"0\.10\.0"):
        versions_for("0.9.0")
    with pytest.raises(ValueError, match=r"2\.6"):
        changes("3.0")


def test_tables_are_written_as_deltas_not_as_full_rows() -> None:
    # The point of kversion-style tables is that a release reads as what it changed; a later release
    # restating every key would hide its real changes from a reviewer.
    for (release, delta), previous in zip(versions._DELTAS[1:], RELEASES, strict=False):
        old_table = versions_for(previous)
        restated = [
            key
            for key, value in delta.items()
            if isinstance(value, int) and old_table.get(key, (0, -1))[1] == value
        ]
        assert not restated, (release, restated)
