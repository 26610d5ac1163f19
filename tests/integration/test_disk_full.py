"""A broker whose log disk fills up, for real: a small tmpfs the test mounts (root only) and unmounts.

The produce that cannot be written is answered KAFKA_STORAGE_ERROR and its log directory goes offline, as in
Kafka. With another directory online the broker goes on serving it (and lists the offline one with
KAFKA_STORAGE_ERROR in DescribeLogDirs); with none left it shuts itself down, saying why, as Kafka halts. Every
record acknowledged before is there after a restart with space again.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sofakafka.client import KafkaClient, NewTopic
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.records import Record
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

VALUE = b"v" * 8000


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path: Path, leave: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            st = os.statvfs(path.parent)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                return
            os.write(fd, b"\0" * min(64 * 1024, free - leave))
    except OSError:
        return
    finally:
        os.close(fd)


def produce_until_refused(client: KafkaClient, topic: str, partition: int) -> tuple[list[tuple[int, bytes]], KafkaError]:
    acknowledged: list[tuple[int, bytes]] = []
    for i in range(2000):
        value = b"%06d" % i + VALUE
        try:
            result = client.produce(topic, partition, [Record(0, -1, None, value)], acks=-1, timeout_ms=5000)
        except KafkaError as exc:
            return acknowledged, exc
        assert result is not None
        acknowledged.append((result.base_offset, value))
    raise AssertionError("the disk never filled up")


def read_all(client: KafkaClient, topic: str, partition: int) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = 0
    while True:
        fetched = client.fetch(topic, partition, offset, max_wait_ms=0, max_bytes=1 << 20)
        if not fetched.records:
            return out
        for r in fetched.records:
            assert r.value is not None
            out[r.offset] = r.value
        offset = fetched.records[-1].offset + 1


def test_with_another_dir_online_the_full_one_goes_offline_and_the_broker_serves_the_rest(
        tmp_path: Path, small_fs: Path) -> None:
    broker = BrokerProcess(tmp_path / "b", {"log.dirs": f"{tmp_path / 'healthy'},{small_fs / 'logs'}",
                                            "num.partitions": "2"})
    broker.start()
    try:
        with KafkaClient(broker.bootstrap) as client:
            assert client.create_topics([NewTopic("t", 2, 1)])["t"].error == ErrorCode.NONE
            dirs = {d.log_dir: d for d in client.describe_log_dirs(0)}
            on_tmpfs = [p.partition for p in dirs[str((small_fs / "logs").resolve())].partitions]
            assert len(on_tmpfs) == 1
            doomed, healthy = on_tmpfs[0], 1 - on_tmpfs[0]
            fill(small_fs / "filler", leave=400 * 1024)
            acknowledged, refused = produce_until_refused(client, "t", doomed)
            assert refused.code == ErrorCode.KAFKA_STORAGE_ERROR, refused
            assert len(acknowledged) > 5
            # The rest of the broker goes on.
            assert client.produce("t", healthy, [Record(0, -1, None, b"fine")], acks=-1) is not None
            with pytest.raises(KafkaError) as again:
                client.produce("t", doomed, [Record(0, -1, None, b"x")], acks=-1, timeout_ms=2000)
            assert again.value.code == ErrorCode.KAFKA_STORAGE_ERROR
            by_dir = {d.log_dir: d.error for d in client.describe_log_dirs(0)}
            assert by_dir[str((small_fs / "logs").resolve())] == ErrorCode.KAFKA_STORAGE_ERROR
            assert by_dir[str((tmp_path / "healthy").resolve())] == ErrorCode.NONE
        assert broker.alive()
        assert "is offline" in broker.log_text()
        assert broker.stop() == 0
        (small_fs / "filler").unlink()
        broker.start()
        with KafkaClient(broker.bootstrap) as client:
            stored = read_all(client, "t", doomed)
        assert all(stored.get(offset) == value for offset, value in acknowledged), "an acknowledged record is gone"
    finally:
        broker.kill()


def test_with_every_dir_offline_the_broker_stops_itself_and_a_restart_with_space_recovers(
        tmp_path: Path, small_fs: Path) -> None:
    broker = BrokerProcess(tmp_path / "b", {"log.dirs": str(small_fs / "logs")})
    broker.start()
    try:
        with KafkaClient(broker.bootstrap) as client:
            assert client.create_topics([NewTopic("t", 1, 1)])["t"].error == ErrorCode.NONE
            fill(small_fs / "filler", leave=400 * 1024)
            acknowledged, refused = produce_until_refused(client, "t", 0)
        assert refused.code == ErrorCode.KAFKA_STORAGE_ERROR, refused
        assert broker.proc is not None
        deadline = time.monotonic() + 60
        while broker.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not broker.alive(), "the broker went on without any log directory"
        assert broker.proc.returncode == 1
        assert "every log directory is offline" in broker.log_text()
        (small_fs / "filler").unlink()
        broker.start()
        with KafkaClient(broker.bootstrap) as client:
            stored = read_all(client, "t", 0)
            assert all(stored.get(offset) == value for offset, value in acknowledged), \
                "an acknowledged record is gone"
            assert client.produce("t", 0, [Record(0, -1, None, b"after")], acks=-1) is not None
    finally:
        broker.kill()
