"""JBOD: a replica moved between two log dirs of a live broker (AlterReplicaLogDirs) while librdkafka produces to it
with acks=all, as Kafka 2.6 moves it: a future replica filled alongside, then swapped in.

Every acknowledged record is at its offset afterwards, a consumer reads them all, the old dir's files go once
``log.segment.delete.delay.ms`` has passed, and a restart finds the log in its new dir. A kill -9 in the middle of
a move (slowed down by ``replica.alter.log.dirs.io.max.bytes.per.second``, set dynamically) loses nothing
acknowledged either: the restarted broker resumes the move from the copy it has, as Kafka does, and completes it.
One broker for the module's scenario; the move itself takes a second or two.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from sofakafka.client import KafkaClient, NewTopic
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.records import Record
from tests.integration.conftest import BrokerProcess
from tests.integration.helpers import wait_for

TOPIC = "moving"
BROKER_RESOURCE = 4  # ConfigResource type BROKER
SET = 0


class Load:
    """librdkafka producing acks=all to partition 0, remembering every acknowledgement."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: dict[int, bytes] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                   "enable.idempotence": False, "message.timeout.ms": 5000,
                                   "reconnect.backoff.max.ms": 500})
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._next = 0

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            with self._lock:
                self.acked[msg.offset()] = msg.value()

    def _run(self) -> None:
        # About 4000 records a second: a steady stream the copy has to chase, not a flood that makes the log (and
        # the test's reads) needlessly long.
        while not self._stop.is_set():
            for _ in range(20):
                try:
                    self._producer.produce(TOPIC, value=b"record-%08d-" % self._next + b"x" * 200, partition=0,
                                           on_delivery=self._delivered)
                    self._next += 1
                except BufferError:
                    self._producer.poll(0.05)
            self._producer.poll(0.005)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def wait_for_acks(self, n: int) -> None:
        wait_for(f"{n} acknowledgements", lambda: True if len(self.acked) >= n else None, 120)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(10)

    def survivors(self) -> dict[int, bytes]:
        with self._lock:
            return dict(self.acked)


def consume_all(bootstrap: str, end: int) -> dict[int, bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    stored: dict[int, bytes] = {}
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])

        def poll() -> bool | None:
            for m in consumer.consume(num_messages=10000, timeout=0.5):
                assert m.error() is None, m.error()
                stored[m.offset()] = m.value()
            return True if len(stored) >= end else None

        wait_for(f"offsets 0..{end - 1} (have {len(stored)})", poll, 60)
    finally:
        consumer.close()
    return stored


def where(client: KafkaClient) -> tuple[str | None, str | None, int]:
    """(dir of the current replica, dir of the future one, the future one's lag) of partition 0 on broker 0."""
    current = future = None
    lag = -1
    for d in client.describe_log_dirs(0, {TOPIC: [0]}):
        for p in d.partitions:
            if p.is_future:
                future, lag = d.log_dir, p.offset_lag
            else:
                current = d.log_dir
    return current, future, lag


def assert_kept(acked: dict[int, bytes], stored: dict[int, bytes]) -> None:
    lost = [o for o, v in acked.items() if stored.get(o) != v]
    assert not lost, f"{len(lost)} acknowledged records lost or changed, first offsets {sorted(lost)[:10]}"


def test_a_replica_moves_between_log_dirs_under_acks_all_load_and_survives_kill_9_mid_move(
        tmp_path: Path, broker_factory: Callable[..., BrokerProcess]) -> None:
    dirs = [tmp_path / "disk-a", tmp_path / "disk-b"]
    b = broker_factory({"log.dirs": ",".join(map(str, dirs)), "log.segment.bytes": str(256 * 1024),
                        "log.segment.delete.delay.ms": "500"})
    with KafkaClient(b.bootstrap) as client:
        assert client.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].error == ErrorCode.NONE
        source, _, _ = where(client)
        assert source is not None
        dest = next(str(d.resolve()) for d in dirs if str(d.resolve()) != source)

        # 1. A move under load: the copy catches up with a log that keeps growing, then takes its place.
        with Load(b.bootstrap) as load:
            load.wait_for_acks(10_000)
            assert client.alter_replica_log_dirs(0, {(TOPIC, 0): dest}) == {(TOPIC, 0): ErrorCode.NONE}
            wait_for("the move to complete", lambda: True if where(client) == (dest, None, -1) else None, 60)
            moved_at = len(load.acked)
            load.wait_for_acks(moved_at + 2000)  # acks=all goes on, from the new dir
        acked = load.survivors()
        assert_kept(acked, consume_all(b.bootstrap, max(acked) + 1))
        old = Path(source)
        wait_for("the old dir's files to go", lambda: True if not any(
            p.name.startswith(f"{TOPIC}-0") for p in old.iterdir()) else None, 30)
        assert (Path(dest) / f"{TOPIC}-0").is_dir()

        # 2. Back the other way, throttled so it is still copying when the broker is killed.
        throttle = {(BROKER_RESOURCE, "0"): [("replica.alter.log.dirs.io.max.bytes.per.second", SET, "200000")]}
        assert [r.error for r in client.incremental_alter_configs(throttle)] == [ErrorCode.NONE]
        time.sleep(1)  # the broker applies dynamic configs from its metadata
        with Load(b.bootstrap) as load:
            load.wait_for_acks(2000)
            assert client.alter_replica_log_dirs(0, {(TOPIC, 0): source}) == {(TOPIC, 0): ErrorCode.NONE}
            wait_for("the copy to be under way", lambda: True if where(client)[2] > 0 else None, 30)
            load.wait_for_acks(len(load.acked) + 1000)
            b.kill()
        acked |= load.survivors()
    b.start()
    with KafkaClient(b.bootstrap) as client:
        # Resumed from the copy on disk; without its throttle now, it completes.
        client.incremental_alter_configs(
            {(BROKER_RESOURCE, "0"): [("replica.alter.log.dirs.io.max.bytes.per.second", 1, None)]})
        wait_for("the resumed move to complete", lambda: True if where(client) == (source, None, -1) else None, 60)
    assert_kept(acked, consume_all(b.bootstrap, max(acked) + 1))
    assert "beginning or resuming the copy" in b.log_text().split("===== start #2")[-1]

    # 3. A clean restart finds the log where the last move put it.
    b.restart(clean=True)
    with KafkaClient(b.bootstrap) as client:
        assert where(client) == (source, None, -1)
    assert_kept(acked, consume_all(b.bootstrap, max(acked) + 1))


def test_the_log_dirs_and_reassign_tools_move_replicas_between_dirs(
        tmp_path: Path, broker_factory: Callable[..., BrokerProcess]) -> None:
    dirs = [str((tmp_path / d).resolve()) for d in ("disk-a", "disk-b")]
    b = broker_factory({"log.dirs": ",".join(dirs), "log.segment.delete.delay.ms": "0"})
    with KafkaClient(b.bootstrap) as client:
        assert client.create_topics([NewTopic("tools", 2, 1)])["tools"].error == ErrorCode.NONE
        for p in (0, 1):
            client.produce("tools", p, [Record(0, -1, None, b"x%d" % i) for i in range(50)], acks=-1)
        before = {p.partition: d.log_dir for d in client.describe_log_dirs(0) for p in d.partitions}
    other = {p: next(d for d in dirs if d != before[p]) for p in (0, 1)}

    moved = cli("log-dirs", "--bootstrap-server", b.bootstrap, "--broker-list", "0", "--wait",
                "--move", f"tools:0={other[0]}", "--move", f"tools:9={other[0]}", "--move", "tools:1=/nowhere")
    assert moved.returncode == 1
    assert f"Moving tools-0 on broker 0 to {other[0]}" in moved.stdout and "Every move has completed." in moved.stdout
    assert "Cannot move tools-9 on broker 0 to" in moved.stderr and "UNKNOWN_TOPIC_OR_PARTITION" in moved.stderr
    assert "Cannot move tools-1 on broker 0 to /nowhere: LOG_DIR_NOT_FOUND" in moved.stderr
    described = json.loads(cli("log-dirs", "--bootstrap-server", b.bootstrap, "--describe", "--json").stdout)
    where = {p["partition"]: d["logDir"] for d in described["brokers"][0]["logDirs"] for p in d["partitions"]}
    assert where == {"tools-0": other[0], "tools-1": before[1]}

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tools", "partition": 1, "replicas": [0], "log_dirs": [other[1]]}]}))
    executed = cli("reassign", "--bootstrap-server", b.bootstrap, "--reassignment-json-file", str(plan), "--execute",
                   "--replica-alter-log-dirs-throttle", "100000000")
    assert executed.returncode == 0, executed.stderr
    assert "Successfully started log directory move for: tools-1-0" in executed.stdout
    assert "The replica-alter-dir throttle limit was set to 100000000 B/s" in executed.stdout

    def verified() -> str | None:
        out = cli("reassign", "--bootstrap-server", b.bootstrap, "--reassignment-json-file", str(plan), "--verify")
        return out.stdout if out.returncode == 0 else None

    out = wait_for("the move to be verified", verified, 30)
    assert "Reassignment of replica tools-1-0 completed successfully." in out
    assert "Clearing broker-level throttles" in out
    with KafkaClient(b.bootstrap) as client:
        assert {p.partition: d.log_dir for d in client.describe_log_dirs(0) for p in d.partitions} == other
        assert len(client.fetch("tools", 1, 0, max_wait_ms=0).records) == 50


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sofakafka", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
