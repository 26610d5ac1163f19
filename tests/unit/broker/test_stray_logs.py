"""A broker deletes the log of a topic its metadata no longer has (deleted while the broker was away after a
reassignment had moved the replica off it, so no controller will ever ask it to), and of a partition number beyond
its topic's; the logs of partitions it is a replica of stay. On a real (single, embedded-store) broker: the stray
directories are planted while it is stopped, as a broker that was away finds them."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from sofakafka.client import KafkaClient
from sofakafka.protocol.records import Record
from tests.unit.broker.broker_harness import running_broker

SETTINGS = {"auto.create.topics.enable": "true", "log.segment.delete.delay.ms": "0",
            "log.retention.check.interval.ms": "100"}


def wait_until(what: str, predicate: object, timeout: float = 30.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_stray_logs_go_and_the_broker_own_replicas_stay(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_broker(data, SETTINGS) as b, KafkaClient(f"127.0.0.1:{b.port}") as c:
        c.topic("kept", allow_auto_topic_creation=True)
        c.produce("kept", 0, [Record(0, int(time.time() * 1000), None, b"x%d" % i) for i in range(5)], acks=-1)
    # While the broker is down: the log of a topic that is gone, and of a partition the topic does not have.
    shutil.copytree(data / "kept-0", data / "gone-0")
    shutil.copytree(data / "kept-0", data / "kept-7")
    with running_broker(data, SETTINGS) as b, KafkaClient(f"127.0.0.1:{b.port}") as c:
        wait_until("the stray logs deleted", lambda: not any(
            d.name.startswith(("gone-0", "kept-7")) for d in data.iterdir()))
        assert (data / "kept-0").is_dir()
        assert [r.value for r in c.fetch("kept", 0, 0).records] == [b"x%d" % i for i in range(5)]
