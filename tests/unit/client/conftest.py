"""A real broker process for the client and CLI tests.

The client is the layer under test; its peer is ``python -m sofakafka serve`` exactly as a user starts it,
on an ephemeral port (``listeners=...:0``, the port read back from the "started" line) with a data dir
under pytest's tmp dir. The broker's stderr goes to a log file whose tail is printed when start-up fails.
Every process started here is terminated (then killed) at teardown, whatever the tests did.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 60.0
_STARTED = re.compile(r"sofakafka broker (\d+) started, listening on PLAINTEXT://([^:,\s]+):(\d+)")


@dataclass
class RunningBroker:
    process: subprocess.Popen[bytes]
    host: str
    port: int
    broker_id: int
    data_dir: Path
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


def start_broker(base: Path, overrides: dict[str, str] | None = None) -> RunningBroker:
    data_dir = base / "data"
    log_path = base / "broker.log"
    settings = {
        "broker.id": "0",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        **(overrides or {}),
    }
    args = [sys.executable, "-m", "sofakafka", "serve"]
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    log_file = log_path.open("wb")
    process = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=log_file,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    log_file.close()
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = process.stdout.readline()
        if not line:
            break
        seen += line
        match = _STARTED.search(line.decode("utf-8", "replace"))
        if match:
            return RunningBroker(process, match.group(2), int(match.group(3)), int(match.group(1)), data_dir,
                                 log_path)
    stop_broker(process)
    tail = log_path.read_text(errors="replace")[-4000:]
    raise RuntimeError(f"broker did not start; stdout: {seen!r}\nlog tail:\n{tail}")


def stop_broker(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    running = start_broker(tmp_path_factory.mktemp("broker"))
    try:
        yield running
    finally:
        stop_broker(running.process)
