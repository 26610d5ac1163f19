"""The local-first choice of partition: own room while it leads anything, elsewhere only when it leads nothing."""

from __future__ import annotations

import itertools
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from sofakafka.client.partitioner import murmur2
from sofakafka.router.local_first import choose_partition, local_partitions

RACKS = {1: "A", 2: "A", 3: "B", 4: "B"}
LEADERS = {0: 1, 1: 3, 2: 2, 3: 4, 4: 1, 5: 3}  # A leads 0, 2, 4; B leads 1, 3, 5


def counter() -> itertools.count[int]:
    return itertools.count()


def test_unkeyed_records_go_round_robin_over_the_rooms_own_partitions() -> None:
    c = counter()
    chosen = [choose_partition(LEADERS, RACKS, "A", None, c.__next__) for _ in range(9)]
    assert chosen == [0, 2, 4] * 3
    c = counter()
    assert Counter(choose_partition(LEADERS, RACKS, "B", None, c.__next__) for _ in range(9)) == {1: 3, 3: 3, 5: 3}


def test_keyed_records_hash_over_the_rooms_own_partitions() -> None:
    for key in (b"alice", b"bob", b"", b"\x00" * 7):
        p = choose_partition(LEADERS, RACKS, "A", key, counter().__next__)
        assert p == [0, 2, 4][(murmur2(key) & 0x7FFFFFFF) % 3]


def test_all_of_the_room_down_sends_to_the_other_room_and_back_when_it_leads_again() -> None:
    failed_over = {0: 3, 1: 3, 2: 4, 3: 4, 4: 3, 5: 3}  # the controller moved A's leaderships to B
    c = counter()
    assert {choose_partition(failed_over, RACKS, "A", None, c.__next__) for _ in range(12)} == set(range(6))
    one_back = {**failed_over, 2: 2}  # a returning A broker leads partition 2 again
    assert {choose_partition(one_back, RACKS, "A", None, c.__next__) for _ in range(12)} == {2}


def test_partitions_without_a_leader_are_avoided_while_others_have_one() -> None:
    offline = {0: -1, 1: -1, 2: 3}
    assert {choose_partition(offline, RACKS, "A", None, counter().__next__) for _ in range(5)} == {2}
    nobody = {0: -1, 1: -1}
    c = counter()
    assert {choose_partition(nobody, RACKS, "A", None, c.__next__) for _ in range(5)} == {0, 1}


def test_a_room_unknown_to_the_cluster_uses_every_partition() -> None:
    c = counter()
    assert {choose_partition(LEADERS, RACKS, "C", None, c.__next__) for _ in range(12)} == set(range(6))
    assert local_partitions(LEADERS, RACKS, "C") == []
    assert local_partitions(LEADERS, RACKS, "A") == [0, 2, 4]


@given(leaders=st.dictionaries(st.integers(0, 20), st.sampled_from([-1, 1, 2, 3, 4]), min_size=1),
       room=st.sampled_from(["A", "B"]), key=st.none() | st.binary(max_size=8), n=st.integers(0, 100))
def test_choice_is_local_whenever_the_room_leads_something(leaders: dict[int, int], room: str, key: bytes | None,
                                                           n: int) -> None:
    p = choose_partition(leaders, RACKS, room, key, lambda: n)
    assert p in leaders
    local = local_partitions(leaders, RACKS, room)
    if local:
        assert p in local
    elif any(leader >= 0 for leader in leaders.values()):
        assert leaders[p] >= 0
