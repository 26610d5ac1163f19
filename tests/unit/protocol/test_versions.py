"""The release tables, checked against the shared Kafka 2.6 reference parsed at test time.

The tables are written as deltas; these tests rebuild the full matrix from API-VERSIONS.md and the message
JSON so a wrong delta shows up as the exact (release, api key) it corrupts.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from sofakafka.protocol import versions
from sofakafka.protocol.versions import BROKER_2_6, RELEASES, changes, versions_for

REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "kafka-2.6"
API_VERSIONS_MD = (REFERENCE / "API-VERSIONS.md").read_text(encoding="utf-8")


def _section(title_prefix: str) -> str:
    _, _, rest = API_VERSIONS_MD.partition(f"\n## {title_prefix}")
    assert rest, f"section {title_prefix!r} not found in API-VERSIONS.md"
    return rest.split("\n## ", 1)[0]


def _table_rows(section: str) -> list[list[str]]:
    """Body rows of the first markdown table in ``section``, cells stripped (header and rule skipped)."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("|")
    ]
    return rows[2:]


def _release_matrix() -> tuple[list[str], dict[str, dict[int, int]]]:
    section = _section("Table 2")
    header = next(line for line in section.splitlines() if line.startswith("| Key"))
    releases = [cell.strip() for cell in header.strip().strip("|").split("|")][2:]
    matrix: dict[str, dict[int, int]] = {release: {} for release in releases}
    for row in _table_rows(section):
        api_key = int(row[0])
        for release, cell in zip(releases, row[2:], strict=True):
            if cell != "-":
                matrix[release][api_key] = int(cell)
    return releases, matrix


REFERENCE_RELEASES, REFERENCE_MAX = _release_matrix()

# Table 2's prose states the one exception to "all minimum versions are 0"; assert the prose still says so,
# so that this rule cannot drift away from the reference unnoticed.
_MIN_RULE = re.compile(r"ControlledShutdown \(key 7\) which was 1-1 in 0\.10\.0 through 0\.11\.0")
_CONTROLLED_SHUTDOWN_MIN_1 = {"0.10.0", "0.10.1", "0.10.2", "0.11.0"}


def _reference_min(release: str, api_key: int) -> int:
    return 1 if api_key == 7 and release in _CONTROLLED_SHUTDOWN_MIN_1 else 0


def test_reference_prose_still_states_the_controlled_shutdown_minimum() -> None:
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
    accepted = {}
    for row in _table_rows(_section("Table 1")):
        low, high = row[2].split("-")
        accepted[int(row[0])] = (int(low), int(high))
    assert dict(BROKER_2_6) == accepted
    assert sorted(BROKER_2_6) == list(range(50))


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def test_broker_2_6_matches_the_valid_versions_of_kafkas_message_json() -> None:
    found: dict[int, tuple[int, int]] = {}
    for path in sorted((REFERENCE / "message").glob("*Request.json")):
        spec = json.loads(_strip_comments(path.read_text(encoding="utf-8")))
        low, _, high = spec["validVersions"].partition("-")
        found[spec["apiKey"]] = (int(low), int(high or low))
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
