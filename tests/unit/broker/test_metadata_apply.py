"""A broker applies a metadata change at the cost of what changed: leading, following, stray-log and config work
look at the partitions whose metadata differs from the snapshot applied last, not at every partition the broker
holds; and what a pass could not settle, or what was stopped outside a pass, is looked at again by the next.
On a real (single, embedded-store) broker; operations are counted, never timed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sofakafka.broker.handlers.stop_replica import NO_EPOCH
from sofakafka.broker.replica_manager import Partition, ReplicaManager
from sofakafka.client import KafkaClient, NewTopic
from sofakafka.client.client import ConfigResourceType
from sofakafka.controller.zk_data import TopicPartition
from tests.unit.broker.broker_harness import BrokerThread, running_broker

PARTITIONS = 200


def wait_until(what: str, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def applied(b: BrokerThread) -> bool:
    """No metadata pass running or due (reads a private: the test waits for the pass it counts)."""
    broker = b.broker
    assert broker is not None
    task = broker._metadata_task
    return not broker._metadata_dirty and (task is None or task.done())


def test_a_new_topic_is_applied_without_looking_at_the_other_partitions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The ISR check walks every led partition on its own schedule (replica.lag.time.max.ms / 2): not in this window.
    with running_broker(tmp_path / "data", {"replica.lag.time.max.ms": "600000"}) as b, \
            KafkaClient(f"127.0.0.1:{b.port}") as c:
        assert c.create_topics([NewTopic("big", PARTITIONS, 1)])["big"].error == 0
        broker = b.broker
        assert broker is not None
        rm = broker.replica_manager
        wait_until("every partition led", lambda: len(rm.partitions) >= PARTITIONS and applied(b))
        c.metadata()  # "big" answered once, its entry encoded
        looked_at: list[tuple[str, int]] = []
        real = rm.get_partition

        def counting(tp: tuple[str, int]) -> Partition | None:
            looked_at.append(tp)
            return real(tp)

        listed = 0
        every_partition = ReplicaManager.partitions

        def counting_list(self: ReplicaManager) -> list[Partition]:
            nonlocal listed
            listed += 1
            return every_partition.fget(self)  # type: ignore[attr-defined,no-any-return]

        rm.get_partition = counting  # type: ignore[method-assign]
        monkeypatch.setattr(ReplicaManager, "partitions", property(counting_list))
        try:
            assert c.create_topics([NewTopic("small", 1, 1)])["small"].error == 0
            c.metadata()  # all topics: "big"'s encoded entry is still good, without a look at its partitions
            wait_until("the pass applied", lambda: applied(b))
        finally:
            rm.get_partition = real  # type: ignore[method-assign]
            monkeypatch.undo()
        assert rm.get_partition(("small", 0)) is not None
        assert [tp for tp in looked_at if tp[0] == "big"] == []
        assert listed == 0  # nothing listed every partition led here (the coordinators' topics are looked up)


def test_a_partition_stopped_outside_a_pass_is_led_again_by_the_next(tmp_path: Path) -> None:
    """A StopReplica without delete stops serving a partition the metadata still says this broker leads; the next
    metadata pass, whatever it is about, leads it again (as it did when every pass looked at everything)."""
    with running_broker(tmp_path / "data") as b, KafkaClient(f"127.0.0.1:{b.port}") as c:
        assert c.create_topics([NewTopic("kept", 4, 1)])["kept"].error == 0
        broker = b.broker
        assert broker is not None and b.loop is not None
        rm = broker.replica_manager
        wait_until("every partition led", lambda: len(rm.partitions) == 4 and applied(b))
        assert c.metadata(["kept"]).topics["kept"].partitions[2].leader == broker.broker_id
        stop = broker.stop_partitions({TopicPartition("kept", 2): (NO_EPOCH, False)})
        asyncio.run_coroutine_threadsafe(stop, b.loop).result(30)
        assert rm.get_partition(("kept", 2)) is None
        # Led here by the metadata but not served: Metadata says no leader (its cached entry was encoded again).
        assert c.metadata(["kept"]).topics["kept"].partitions[2].leader == -1
        assert c.create_topics([NewTopic("other", 1, 1)])["other"].error == 0
        wait_until("kept-2 led again", lambda: rm.get_partition(("kept", 2)) is not None)


def test_config_changes_reach_the_logs_they_concern(tmp_path: Path) -> None:
    """A topic's overrides reach every log of that topic, whether or not its partitions' metadata changed; a change
    of the dynamic broker defaults reaches every log."""
    with running_broker(tmp_path / "data") as b, KafkaClient(f"127.0.0.1:{b.port}") as c:
        for name in ("a", "b"):
            assert c.create_topics([NewTopic(name, 3, 1)])[name].error == 0
        broker = b.broker
        assert broker is not None
        lm = broker.log_manager

        def retention(topic: str) -> set[int]:
            found = [lm.get_log(topic, p) for p in range(3)]
            return {lg.config.retention_ms for lg in found if lg is not None}

        wait_until("every log", lambda: all(lm.get_log(t, p) is not None for t in "ab" for p in range(3)))
        c.alter_configs({(ConfigResourceType.TOPIC, "a"): {"retention.ms": "123456"}})[0].raise_for_error()
        wait_until("a's logs reconfigured", lambda: retention("a") == {123456})
        default = retention("b")
        c.alter_configs({(ConfigResourceType.BROKER, ""): {"log.retention.ms": "654321"}})[0].raise_for_error()
        wait_until("b's logs reconfigured", lambda: retention("b") == {654321})
        assert default != {654321} and retention("a") == {123456}
