"""Replica placement: Kafka's published assignments, and the spreading properties it promises."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.controller.placement import (
    BrokerMetadata,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)
from sofakafka.protocol.errors import ErrorCode, KafkaError


def brokers(ids: list[int], racks: dict[int, str] | None = None) -> list[BrokerMetadata]:
    return [BrokerMetadata(i, None if racks is None else racks[i]) for i in ids]


# Facts from Kafka 2.6's own tests of AdminUtils (AdminRackAwareTest, AdminUtilsTest): same inputs and
# fixed start index must give the same replica lists, so a topic lands where a Kafka controller puts it.


def test_rack_unaware_assignment_matches_kafka() -> None:
    assert assign_replicas_to_brokers(brokers(list(range(5))), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_broker_list_matches_kafka() -> None:
    assert rack_alternated_broker_list(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_assignment_matches_kafka() -> None:
    assignment = assign_replicas_to_brokers(brokers(list(RACKS), RACKS), 7, 3, fixed_start_index=0, start_partition_id=0)
    assert assignment == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_partitions_are_numbered_from_start_partition_id() -> None:
    assignment = assign_replicas_to_brokers(brokers([1, 2, 3]), 4, 2, fixed_start_index=1, start_partition_id=5)
    assert sorted(assignment) == [5, 6, 7, 8]


def test_broker_ids_need_not_be_contiguous_or_sorted() -> None:
    assignment = assign_replicas_to_brokers(brokers([30, 10, 20]), 3, 3, fixed_start_index=0)
    assert assignment[0] == [10, 20, 30]
    assert {tuple(sorted(r)) for r in assignment.values()} == {(10, 20, 30)}


@pytest.mark.parametrize(
    ("count", "partitions", "rf", "code"),
    [
        (3, 0, 1, ErrorCode.INVALID_PARTITIONS),
        (3, -5, 1, ErrorCode.INVALID_PARTITIONS),
        (3, 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
        (3, 1, 4, ErrorCode.INVALID_REPLICATION_FACTOR),
        (0, 1, 1, ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_impossible_requests_carry_kafkas_codes(count: int, partitions: int, rf: int, code: ErrorCode) -> None:
    with pytest.raises(KafkaError) as info:
        assign_replicas_to_brokers(brokers(list(range(count))), partitions, rf)
    assert info.value.code == code


def test_replication_factor_error_names_the_broker_count() -> None:
    with pytest.raises(KafkaError, match="Replication factor: 3 larger than available brokers: 1"):
        assign_replicas_to_brokers(brokers([1]), 1, 3)


def test_brokers_with_and_without_racks_are_refused() -> None:
    with pytest.raises(KafkaError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers([BrokerMetadata(1, "a"), BrokerMetadata(2, None)], 1, 1)


def test_same_seed_same_placement() -> None:
    first = assign_replicas_to_brokers(brokers(list(range(7))), 20, 3, rng=random.Random(42))
    again = assign_replicas_to_brokers(brokers(list(range(7))), 20, 3, rng=random.Random(42))
    assert first == again


# ------------------------------------------------------------------------------------------ properties

broker_counts = st.integers(min_value=1, max_value=12)


@st.composite
def cluster(draw: st.DrawFn, racks: bool) -> tuple[list[BrokerMetadata], int, int, int]:
    n = draw(broker_counts)
    ids = draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True))
    if racks:
        rack_count = draw(st.integers(1, n))
        metadata = [BrokerMetadata(b, f"rack{draw(st.integers(0, rack_count - 1))}") for b in ids]
    else:
        metadata = [BrokerMetadata(b) for b in ids]
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 60))
    seed = draw(st.integers(0, 2**32))
    return metadata, partitions, rf, seed


@given(cluster(racks=False))
def test_every_partition_gets_rf_distinct_live_brokers(case: tuple[list[BrokerMetadata], int, int, int]) -> None:
    metadata, partitions, rf, seed = case
    assignment = assign_replicas_to_brokers(metadata, partitions, rf, rng=random.Random(seed))
    ids = {b.id for b in metadata}
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= ids


@given(cluster(racks=False))
def test_leaders_are_spread_evenly(case: tuple[list[BrokerMetadata], int, int, int]) -> None:
    metadata, partitions, rf, seed = case
    assignment = assign_replicas_to_brokers(metadata, partitions, rf, rng=random.Random(seed))
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b.id, 0) for b in metadata]
    assert max(counts) - min(counts) <= 1


@given(cluster(racks=False), st.integers(1, 5))
def test_whole_rounds_give_every_broker_the_same_replica_count(
    case: tuple[list[BrokerMetadata], int, int, int], rounds: int
) -> None:
    metadata, _, rf, seed = case
    partitions = rounds * len(metadata)
    assignment = assign_replicas_to_brokers(metadata, partitions, rf, rng=random.Random(seed))
    load = Counter(b for replicas in assignment.values() for b in replicas)
    assert {load[b.id] for b in metadata} == {rounds * rf}


@given(cluster(racks=True))
def test_rack_aware_placement_spans_as_many_racks_as_it_can(case: tuple[list[BrokerMetadata], int, int, int]) -> None:
    metadata, partitions, rf, seed = case
    racks = {b.id: b.rack for b in metadata}
    assignment = assign_replicas_to_brokers(metadata, partitions, rf, rng=random.Random(seed))
    rack_count = len(set(racks.values()))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, rack_count)


@given(cluster(racks=True))
def test_rack_aware_leaders_are_spread_evenly(case: tuple[list[BrokerMetadata], int, int, int]) -> None:
    metadata, partitions, rf, seed = case
    assignment = assign_replicas_to_brokers(metadata, partitions, rf, rng=random.Random(seed))
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b.id, 0) for b in metadata]
    assert max(counts) - min(counts) <= 1


@given(st.dictionaries(st.integers(0, 50), st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=20))
def test_rack_alternated_list_is_a_permutation_alternating_while_racks_last(racks: dict[int, str]) -> None:
    order = rack_alternated_broker_list(racks)
    assert sorted(order) == sorted(racks)
    # The first round takes one broker from each rack, in rack order.
    rack_names = sorted(set(racks.values()))
    assert [racks[b] for b in order[: len(rack_names)]] == rack_names


def test_a_small_room_leads_a_partition_of_a_topic_with_fewer_partitions_than_brokers() -> None:
    # Room b has one broker of four: Kafka's walk over [0, 3, 1, 2] gives two partitions starting at index 2
    # to brokers 1 and 2, both in room a; room b's local-first producers would have nothing local.
    racks = {0: "a", 1: "a", 2: "a", 3: "b"}
    for start in range(4):
        assignment = assign_replicas_to_brokers(brokers(list(racks), racks), 2, 2, fixed_start_index=start)
        assert {racks[r[0]] for r in assignment.values()} == {"a", "b"}, (start, assignment)
        assert all({racks[b] for b in r} == {"a", "b"} for r in assignment.values())


@given(cluster(racks=True))
def test_every_rack_leads_when_partitions_and_replicas_allow(case: tuple[list[BrokerMetadata], int, int, int]) -> None:
    metadata, partitions, rf, seed = case
    racks = {b.id: b.rack for b in metadata}
    rack_count = len(set(racks.values()))
    assignment = assign_replicas_to_brokers(metadata, partitions, rf, rng=random.Random(seed))
    leading = {racks[r[0]] for r in assignment.values()}
    if partitions >= rack_count and rf >= rack_count:
        assert len(leading) == rack_count
    else:
        assert len(leading) >= min(partitions, 1)
