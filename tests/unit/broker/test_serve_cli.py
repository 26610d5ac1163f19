"""`python -m sofakafka serve` as a process: the ready line, SIGTERM's clean shutdown, refusing bad configs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest
from tests.unit.broker.broker_harness import Client

REPO = Path(__file__).resolve().parents[3]


def _serve(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "sofakafka", "serve", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@contextmanager
def serving(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = _serve("--override", f"log.dirs={tmp_path / 'data'}", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                  *args, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield proc, line
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def test_the_ready_line_names_the_listener_and_the_data_dir_and_sigterm_shuts_down_cleanly(tmp_path: Path) -> None:
    with serving(tmp_path) as (proc, line):
        assert line.startswith("sofakafka broker 0 started, listening on PLAINTEXT://127.0.0.1:"), line
        assert str(tmp_path / "data") in line
        port = int(line.split("127.0.0.1:")[1].split(";")[0])
        with Client(port) as c:
            assert c.call(ApiVersionsRequest(), 2).error_code == ErrorCode.NONE
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


@pytest.mark.parametrize("override,named", [
    ("log.retention.hourz=1", "log.retention.hourz"),
    ("num.partitions=zero", "num.partitions"),
    ("zookeeper.connect=127.0.0.1", "zookeeper.connect"),
])
def test_a_wrong_key_or_value_stops_start_up_naming_it(tmp_path: Path, override: str, named: str) -> None:
    proc = _serve("--override", f"log.dirs={tmp_path}", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                  "--override", override, cwd=tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert named in err and "started" not in out


def test_an_unreachable_zookeeper_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    proc = _serve("--override", f"log.dirs={tmp_path}", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                  "--override", "zookeeper.connect=127.0.0.1:1", "--override", "zookeeper.connection.timeout.ms=500",
                  cwd=tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "cannot start" in err and "127.0.0.1:1" in err and "Traceback" not in err and "started" not in out


def test_a_properties_file_is_read_and_overrides_win(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"broker.id=7\nlog.dirs={tmp_path / 'data'}\nlisteners=PLAINTEXT://127.0.0.1:1\n")
    proc = _serve(str(props), "--override", "listeners=PLAINTEXT://127.0.0.1:0", cwd=tmp_path)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("sofakafka broker 7 started"), line
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
