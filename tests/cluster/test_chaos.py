"""The model-based test of tests/cluster/chaos.py in its short form, for CI: two short sequences on one three-broker
cluster (a fixed seed, plus one new seed per run, printed so that a failure names it), and every sequence the long
form ever failed on (trimmed to the steps that matter), as regression tests. Short, because the whole suite's CI
budget is shared: a few minutes of wall time here; the long sequences are the long form's job.

The long form (an hour or more of twenty-step sequences; run it before a release, and after any change to the
controller, the metadata cache or the replica manager)::

    nice -n 10 .venv/bin/python -m tests.cluster.chaos --minutes 60 --failures chaos-failures.txt

``SOFAKAFKA_CHAOS_SEED=<n>`` makes the "new seed" test run that seed (to replay a CI failure), and
``SOFAKAFKA_CHAOS_STEPS=<n>`` gives both generated sequences more steps (the issue's "~20" is the long form's
default).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest

from tests.cluster import chaos

FIXED_SEEDS = (11,)
STEPS = int(os.environ.get("SOFAKAFKA_CHAOS_STEPS") or 6)


class Worlds:
    """The module's cluster; a failed sequence may leave it in any state, so the next test gets a new one."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._world: chaos.World | None = None

    def get(self) -> chaos.World:
        if self._world is None:
            self._world = chaos.World(self._factory.mktemp("chaos"))
        return self._world

    def discard(self) -> None:
        if self._world is not None:
            self._world.close()
            self._world = None


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worlds]:
    w = Worlds(tmp_path_factory)
    try:
        yield w
    finally:
        w.discard()


def run(worlds: Worlds, **kwargs: object) -> None:
    world = worlds.get()
    lines: list[str] = []
    outcome = chaos.run_sequence(world, out=lines.append, **kwargs)  # type: ignore[arg-type]
    print("\n".join(lines))
    if outcome.error is not None:
        logs = world.logs()
        worlds.discard()
        pytest.fail(f"{outcome.report()}\n{logs[-15000:]}", pytrace=False)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("seed", FIXED_SEEDS)
def test_fixed_seed(worlds: Worlds, seed: int) -> None:
    run(worlds, seed=seed, steps=STEPS)


@pytest.mark.timeout(1200)
def test_a_new_seed(worlds: Worlds) -> None:
    seed = int(os.environ.get("SOFAKAFKA_CHAOS_SEED") or random.randrange(1 << 30))
    print(f"chaos seed {seed} (SOFAKAFKA_CHAOS_SEED={seed} replays it)")
    run(worlds, seed=seed, steps=STEPS)


# Sequences the long form failed on, as it printed them (trimmed to the steps that matter), each with what it
# found; the fix is named in the commit that added it.
REGRESSIONS: dict[str, list[chaos.Step]] = {
    # Issue 21 itself: the controller waited for the move before deleting while every broker had stopped the topic
    # at the marker, so neither finished ("deletion not complete though every replica's broker [1, 2, 3] is up").
    "a move and the topic's deletion back to back": [
        [["create", 0, 1, 3], ["create", 1, 1, 2]],
        [["reassign", 1, 0, [1, 2, 3]], ["delete", 1]],
    ],
    # Seed 2005 (the model's mistake, not the broker's): new partitions get partition 0's replica count, which a
    # reassignment had made 2, so adding one with a broker down is NONE, not INVALID_REPLICATION_FACTOR.
    "partitions added after partition 0 moved to fewer replicas, a broker down": [
        [["create", 0, 2, 3]],
        [["reassign", 0, 0, [1, 2]]],
        [["stop", 3]],
        [["add_partitions", 0, 1]],
    ],
    # Seed 3006: a broker killed and restarted in one step refuses to start while ZooKeeper still holds its old
    # registration (as Kafka 2.6 does); the test now starts it once the registration expired, as a supervisor would.
    "a broker killed and restarted at once": [
        [["create", 0, 3, 3], ["create", 1, 3, 2]],
        [["kill", 1], ["restart", 1]],
    ],
    # Seeds 6026 and 6053 (the model's mistake, not the broker's; the hour-long run of 2026-11-28): an unclean
    # election made the replica being added leader, then the move was cancelled or replaced by one back to the
    # original replica; Kafka 2.6 and sofakafka both leave no leader and the dropped replica as the ISR's last
    # member, which the invariant took for a live ISR member without a leader. It now counts ISR members that are
    # replicas. Whether a run reaches that state depends on timing; test_operation_pairs.py's
    # test_a_move_cancelled_after_an_unclean_election_made_a_replica_being_added_leader reaches it every time.
    "an unclean election of a replica being added, then the move replaced": [
        [["create", 0, 1, 3], ["create", 1, 3, 2], ["create", 2, 1, 1]],
        [["kill", 3], ["delete", 0], ["reassign", 1, 2, [1, 7]]],
        [["restart", 3]],
        [["create", 3, 2, 2], ["elect", 2, 0, "preferred"]],
        [["reassign", 2, 0, [2, 1]], ["kill", 1]],
        [["elect", 2, 0, "unclean"], ["reassign", 2, 0, [1]]],
    ],
    # Seed 8004 (the hour-long run of 2026-11-29): broker 1 killed, so an acks=all produce of a partition whose
    # ISR still held it waited at broker 3, and the producer's later produces on that connection were held behind
    # it; broker 3 (the controller) was then stopped, and appended the held produces while shutting down,
    # answering them NONE with no follower having them. The follower that took over lacked acknowledged records.
    # Whether a run gets there depends on timing (one replay in seven did here);
    # test_replication_leader.py's test_a_shutting_down_leader_never_acknowledges_acks_all_records_the_isr_lacks
    # fails every time without the fix.
    "a leader stopped while produces wait behind an acks=all produce for a killed broker": [
        [["create", 0, 2, 3], ["create", 1, 3, 2], ["create", 2, 3, 1]],
        [["add_partitions", 2, 1], ["reassign", 2, 2, [3]]],
        [["kill", 1], ["cancel", 2, 1]],
        [["stop", 3], ["reassign", 2, 2, [2]]],
        [["reassign", 2, 2, [3, 2]]],
    ],
}


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression(worlds: Worlds, name: str) -> None:
    run(worlds, replay=REGRESSIONS[name])
