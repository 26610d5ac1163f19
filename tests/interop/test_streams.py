"""Kafka Streams 2.6 against sofakafka and against Apache Kafka 2.6: the word count of Kafka's quickstart.

One application (interop/java/scenarios: ``streams.word_count``) keeps its counts in a RocksDB state store,
re-keys the stream by word through its repartition topic and logs the store to its changelog topic; two
instances run it, sharing its eight tasks (two sub-topologies, four partitions) after a rebalance, then the first leaves and the second restores the
first's stores from the changelog. The counts on the output topic and in the store must be exact at each step,
and what the scenario reports (task shares, the group, the internal topics and the configs Streams created them
with) must be the same from both brokers.
"""

from __future__ import annotations

import pytest

from tests.reference.scenarios import Outcome, scenario

pytestmark = pytest.mark.timeout(600)


@scenario("streams.word_count", applicationId="wordcount", guarantee="at_least_once")
def test_word_count_at_least_once_two_instances_rebalancing(outcome: Outcome) -> None:
    r = outcome.same()
    assert r["tasksWhileTwo"] == [4, 4] and r["groupMembersWhileTwo"] == 2
    assert r["kafkaCount"] == 5
    internal = r["internalTopics"]
    assert set(internal) == {"counts-store-changelog", "counts-store-repartition"}, internal
    assert internal["counts-store-changelog"]["cleanup.policy"] == "compact@DYNAMIC_TOPIC_CONFIG"
    assert internal["counts-store-repartition"]["cleanup.policy"] == "delete@DYNAMIC_TOPIC_CONFIG"
    assert internal["counts-store-repartition"]["partitions"] == 4


@scenario("streams.word_count", applicationId="wordcount-eos", guarantee="exactly_once")
def test_word_count_exactly_once(outcome: Outcome) -> None:
    """The same application with exactly_once (issue 11's transactions): its producers are transactional and
    its consumers read_committed, and the counts must be exact and alike on both brokers."""
    r = outcome.same()
    assert r["tasksWhileTwo"] == [4, 4] and r["groupMembersWhileTwo"] == 2
    assert r["kafkaCount"] == 5
