"""Random sequences of admin operations and broker restarts against a dict model: the answers carry Kafka's
codes, and after every step the tree and the metadata cache hold exactly the model's topics, partitions,
leaders and configs; restarts lose nothing and move no leader epoch."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sofakafka.controller import zk_paths
from sofakafka.controller.embedded import EmbeddedMetadataStore
from sofakafka.controller.node import ControllerNode
from sofakafka.controller.topics import NewTopic
from sofakafka.protocol.errors import ErrorCode, KafkaError

from .conftest import SETTLE_TIMEOUT, plaintext, settle

NAMES = st.sampled_from(["orders", "pay.ments", "pay_ments", "logs", "a-b"])
RETENTION = st.sampled_from(["1000", "-1", "86400000", "soon", "-7"])


def valid_retention(value: str) -> bool:
    return value.lstrip("-").isdigit() and int(value) >= -1


class TopicAdminMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="sofakafka-topics-"))
        self.store: EmbeddedMetadataStore | None = None
        self.node: ControllerNode | None = None
        self.partitions: dict[str, int] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self._open()

    def _open(self) -> None:
        self.store = EmbeddedMetadataStore.open(self.directory, fsync=False)
        self.node = ControllerNode.start(self.store, 1, plaintext())
        settle(self.node)

    def _close(self) -> None:
        if self.node is not None:
            self.node.shutdown()
            self.node = None
        if self.store is not None:
            self.store.close()
            self.store = None

    def teardown(self) -> None:
        self._close()
        shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def live(self) -> ControllerNode:
        assert self.node is not None
        return self.node

    def outcome(self, fn: object, *args: object) -> ErrorCode:
        assert callable(fn)
        try:
            fn(*args)
        except KafkaError as exc:
            return exc.code
        return ErrorCode.NONE

    # ------------------------------------------------------------------------------------------- rules

    @rule(name=NAMES, count=st.integers(0, 4), retention=st.none() | RETENTION)
    def create(self, name: str, count: int, retention: str | None) -> None:
        configs = {} if retention is None else {"retention.ms": retention}
        code = self.outcome(self.live.admin.create_topic, NewTopic(name, count, 1, configs=configs))
        if name in self.partitions:
            expected = ErrorCode.TOPIC_ALREADY_EXISTS
        elif count == 0:
            expected = ErrorCode.INVALID_PARTITIONS
        elif any(zk_paths.topics_collide(name, other) for other in self.partitions):
            expected = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif retention is not None and not valid_retention(retention):
            expected = ErrorCode.INVALID_CONFIG
        else:
            expected = ErrorCode.NONE
            self.partitions[name] = count
            self.configs[name] = configs
        assert code == expected

    @rule(name=NAMES)
    def delete(self, name: str) -> None:
        code = self.outcome(self.live.admin.delete_topic, name)
        if name in self.partitions:
            assert code == ErrorCode.NONE
            del self.partitions[name]
            del self.configs[name]
        else:
            assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    @rule(name=NAMES, total=st.integers(1, 6))
    def add_partitions(self, name: str, total: int) -> None:
        code = self.outcome(self.live.admin.create_partitions, name, total)
        if name not in self.partitions:
            assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif total <= self.partitions[name]:
            assert code == ErrorCode.INVALID_PARTITIONS
        else:
            assert code == ErrorCode.NONE
            self.partitions[name] = total

    @rule(name=NAMES, retention=RETENTION)
    def alter_config(self, name: str, retention: str) -> None:
        code = self.outcome(self.live.admin.set_topic_config, name, {"retention.ms": retention})
        if name not in self.partitions:
            assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif not valid_retention(retention):
            assert code == ErrorCode.INVALID_CONFIG
        else:
            assert code == ErrorCode.NONE
            self.configs[name] = {"retention.ms": retention}

    @rule()
    def restart(self) -> None:
        states_before = self._leader_epochs()
        self._close()
        self._open()
        assert self._leader_epochs() == states_before

    # --------------------------------------------------------------------------------------- invariant

    def _leader_epochs(self) -> dict[tuple[str, int], tuple[int, int]]:
        snap = self.live.cache.snapshot()
        return {
            (t, p): (meta.leader, meta.leader_epoch)
            for t, topic in snap.topics.items()
            for p, meta in topic.partitions.items()
        }

    @invariant()
    def tree_and_cache_match_the_model(self) -> None:
        node = self.live
        settle(node)
        expected = dict(self.partitions)
        assert node.cache.wait_until(
            lambda s: {t: len(m.partitions) for t, m in s.topics.items()} == expected
            and not s.deleting
            and all(s.has_leaders(t) for t in expected)
            and {t: dict(s.topic_config(t)) for t in expected} == self.configs,
            SETTLE_TIMEOUT,
        ), (node.cache.snapshot(), expected, self.configs)
        store = node.store
        assert sorted(store.get_children("/brokers/topics")) == sorted(expected)
        assert sorted(store.get_children("/config/topics")) == sorted(expected)
        assert store.get_children("/admin/delete_topics") == []
        for topic, count in expected.items():
            assert node.admin.assignment(topic) == {p: [1] for p in range(count)}


TopicAdminMachine.TestCase.settings = settings(
    TopicAdminMachine.TestCase.settings, max_examples=30, stateful_step_count=20, deadline=None
)
test_topic_admin_matches_its_model = TopicAdminMachine.TestCase
