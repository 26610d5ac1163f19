"""``sofakafka serve`` as a user starts it: a server.properties file, overrides on top, and start-up refusing a
wrong key or value with a message that names it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaProducer

from tests.integration import wire
from tests.integration.conftest import REPO, BrokerProcess, free_port


def test_properties_file_with_overrides_on_top(broker_factory: Callable[..., BrokerProcess]) -> None:
    properties = "\n".join(
        [
            "# as Kafka's sample server.properties writes it",
            "num.partitions=4",
            "default.replication.factor = 1",
            "auto.create.topics.enable=true",
            "log.segment.bytes=1048576",
        ]
    )
    # listeners and log.dirs come from the fixture's overrides; num.partitions is overridden to 2.
    b = broker_factory({"num.partitions": "2"}, properties=properties)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, enable_idempotence=False)
    try:
        p.send("from-properties", value=b"x").get(timeout=30)
    finally:
        p.close(timeout=10)
    assert len(wire.wait_for_leaders(b.host, b.port, "from-properties").partitions) == 2
    assert (b.data_dir / "meta.properties").exists()


def run_serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sofakafka", "serve", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_unknown_key_stops_start_up_naming_it(tmp_path: Path) -> None:
    (tmp_path / "server.properties").write_text("broker.id=0\nlog.dirz=/tmp/nowhere\n")
    done = run_serve(
        tmp_path,
        str(tmp_path / "server.properties"),
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
    )
    assert done.returncode != 0
    assert "log.dirz" in done.stdout + done.stderr


def test_bad_value_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    done = run_serve(
        tmp_path,
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
        "--override",
        f"log.dirs={tmp_path / 'data'}",
        "--override",
        "num.partitions=many",
    )
    assert done.returncode != 0
    assert "num.partitions" in done.stdout + done.stderr
    assert not (tmp_path / "data" / "meta.properties").exists()
