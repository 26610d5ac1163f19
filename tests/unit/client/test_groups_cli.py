"""The pieces of ``sofakafka groups`` that need no broker: time parsing and the assignment decoder."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.broker.group.consumer_protocol import Assignment, encode_assignment
from sofakafka.cli.common import UsageError
from sofakafka.cli.consumer_groups import parse_datetime_ms, parse_duration_ms
from sofakafka.client.groups import decode_consumer_assignment

EPOCH_2020 = 1_577_836_800_000  # 2020-01-01T00:00:00Z


@pytest.mark.parametrize(("text", "expected"), [
    ("2020-01-01T00:00:00.000Z", EPOCH_2020),
    ("2020-01-01T00:00:00Z", EPOCH_2020),
    ("2020-01-01T01:00:00.000+01:00", EPOCH_2020),
    ("2020-01-01T01:00:00.000+0100", EPOCH_2020),
    ("2019-12-31T23:00:00.250-01:00", EPOCH_2020 + 250),
])
def test_datetimes_with_a_zone_are_absolute(text: str, expected: int) -> None:
    assert parse_datetime_ms(text) == expected


def test_datetimes_without_a_zone_are_local_time() -> None:
    local = dt.datetime(2020, 6, 1, 12, 30, 0).astimezone()
    assert parse_datetime_ms("2020-06-01T12:30:00.000") == int(local.timestamp() * 1000)


@pytest.mark.parametrize("text", ["yesterday", "2020-13-01T00:00:00", ""])
def test_bad_datetimes_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_datetime_ms(text)


@pytest.mark.parametrize(("text", "ms"), [("PT1H", 3_600_000), ("P1DT2H30M", 95_400_000), ("PT0.5S", 500),
                                          ("pt10m", 600_000), ("P2D", 172_800_000)])
def test_iso_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "1H", "PT1X"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_duration_ms(text)


topic_names = st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=20)


@given(st.dictionaries(topic_names, st.lists(st.integers(0, 2**31 - 1), max_size=8), max_size=5),
       st.sampled_from([0, 1]), st.one_of(st.none(), st.binary(max_size=16)))
def test_assignments_decode_as_the_coordinator_encodes_them(
        partitions: dict[str, list[int]], version: int, user_data: bytes | None) -> None:
    encoded = encode_assignment(Assignment(tuple((t, tuple(ps)) for t, ps in partitions.items()), user_data,
                                           version))
    assert decode_consumer_assignment(encoded) == tuple((t, p) for t, ps in partitions.items() for p in ps)


def test_bytes_that_are_no_assignment_are_refused() -> None:
    assert decode_consumer_assignment(b"") == ()
    with pytest.raises(ValueError):
        decode_consumer_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x05ab")
