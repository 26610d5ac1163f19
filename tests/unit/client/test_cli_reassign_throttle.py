"""``sofakafka reassign --throttle``: the topic lists it writes, as kafka-reassign-partitions.sh computes them,
and its usage rules. The whole flow (configs in ZooKeeper, --verify removing them) is in
tests/cluster/test_reassignment_throttle.py."""

from __future__ import annotations

import pytest

from sofakafka.cli import reassign_partitions


def test_leaders_are_the_current_replicas_and_followers_the_added_ones() -> None:
    plan = {("t", 0): [2, 3], ("t", 1): [1, 2], ("u", 4): [5, 1]}
    current: dict[tuple[str, int], tuple[int, ...]] = {("t", 0): (1, 2), ("t", 1): (1, 2), ("u", 4): (1, 3)}
    assert reassign_partitions.throttled_replicas(plan, current) == {
        "t": ("0:1,0:2,1:1,1:2", "0:3"),
        "u": ("4:1,4:3", "4:5"),
    }


@pytest.mark.parametrize("argv", [
    ["--bootstrap-server", "h:1", "--reassignment-json-file", "f", "--verify", "--throttle", "10"],
    ["--bootstrap-server", "h:1", "--list", "--throttle", "10"],
    ["--bootstrap-server", "h:1", "--reassignment-json-file", "f", "--execute", "--throttle", "-1"],
])
def test_throttle_only_goes_with_execute_and_is_not_negative(argv: list[str],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert reassign_partitions.main(argv) == 2
    assert "--throttle" in capsys.readouterr().err
