"""Real broker processes for the integration tests.

Every test here talks to ``python -m sofakafka serve`` running as a separate process on a free port with a
data dir under pytest's tmp dir, exactly as a user would start it; nothing is faked in-process. The broker's
output goes to a log file next to its data; when a test fails, the tail of the log of every broker started
for it is attached to the failure report, because the client side of a failure ("connection closed",
"timed out") rarely says why.

Processes are tracked in one registry and killed at the end of the session whatever happened, so a failing
test never leaves a broker behind holding a port.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Start-up includes interpreter start and log recovery; after kill -9 recovery reads every segment.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 150

_LIVE: list[BrokerProcess] = []
_USED_BY_CURRENT_TEST: list[BrokerProcess] = []


def free_port() -> int:
    """A port nothing listens on right now (the kernel's choice for an ephemeral bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def api_versions_ok(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether a broker answers ApiVersions v0 with error code 0: the readiness probe every client does first."""
    request = struct.pack(">hhih", 18, 0, 7, len(b"probe")) + b"probe"
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            head = _recv_exactly(s, 4)
            (size,) = struct.unpack(">i", head)
            body = _recv_exactly(s, size)
    except OSError:
        return False
    correlation_id, error_code = struct.unpack_from(">ih", body)
    return correlation_id == 7 and error_code == 0


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


class BrokerProcess:
    """One ``sofakafka serve`` process; ``restart`` reuses the same data dir and port."""

    def __init__(
        self, base_dir: Path, overrides: dict[str, str] | None = None, properties: str | None = None
    ) -> None:
        """``overrides`` go on the command line as ``--override``; ``properties``, when given, is the text
        of a server.properties file passed as the positional argument (the overrides still win)."""
        self.base_dir = base_dir
        self.properties = properties
        self.data_dir = base_dir / "data"
        self.log_path = base_dir / "broker.log"
        self.port = free_port()
        self.host = "127.0.0.1"
        self.overrides: dict[str, str] = {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
        }
        self.overrides.update(overrides or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "sofakafka", "serve"]
        if self.properties is not None:
            cmd.append(str(self.base_dir / "server.properties"))
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self) -> BrokerProcess:
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if self.properties is not None:
            (self.base_dir / "server.properties").write_text(self.properties)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            log.flush()
            # The checkout first on the path: the broker under test is this tree's, installed or not.
            pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
            env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=pythonpath)
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.base_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C on the test run must not hit the broker before we stop it
            )
        if self not in _LIVE:
            _LIVE.append(self)
        if self not in _USED_BY_CURRENT_TEST:
            _USED_BY_CURRENT_TEST.append(self)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"broker exited with {self.proc.returncode} during start-up:\n{self.log_tail()}"
                )
            if api_versions_ok(self.host, self.port):
                return
            time.sleep(0.1)
        self.kill()
        raise AssertionError(
            f"broker did not answer ApiVersions within {START_TIMEOUT_S}s:\n{self.log_tail()}"
        )

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Clean shutdown by SIGTERM, as an init system does (or SIGINT, as Ctrl-C); returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"broker ignored SIGTERM for {STOP_TIMEOUT_S}s and was killed:\n{self.log_tail()}"
            ) from None

    def kill(self) -> None:
        """kill -9: no flush, no clean-shutdown marker, so the next start has to recover the logs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)

    def restart(self, *, clean: bool) -> BrokerProcess:
        if clean:
            rc = self.stop()
            assert rc == 0, f"clean shutdown exited with {rc}:\n{self.log_tail()}"
        else:
            self.kill()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no broker log)"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


@pytest.fixture(scope="session", autouse=True)
def _kill_every_broker_at_exit() -> Iterator[None]:
    yield
    for broker in _LIVE:
        broker.kill()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.failed:
        for broker in _USED_BY_CURRENT_TEST:
            report.sections.append((f"broker log {broker.log_path}", broker.log_tail()))
    if report.when == "teardown":
        _USED_BY_CURRENT_TEST.clear()


def _start(tmp: Path, overrides: dict[str, str] | None, properties: str | None = None) -> BrokerProcess:
    return BrokerProcess(tmp, overrides, properties).start()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker shared by the tests of a module: they use distinct topics so they do not interfere."""
    b = _start(tmp_path_factory.mktemp("broker"), None)
    try:
        yield b
    finally:
        b.kill()


@pytest.fixture
def broker(module_broker: BrokerProcess) -> Iterator[BrokerProcess]:
    """The module's broker, registered so that its log is attached if this test fails; a test after which
    the process is gone errors here, so a crash is blamed on the test that caused it, not on the next one."""
    if module_broker not in _USED_BY_CURRENT_TEST:
        _USED_BY_CURRENT_TEST.append(module_broker)
    assert module_broker.alive(), f"the module's broker died earlier:\n{module_broker.log_tail()}"
    yield module_broker
    assert module_broker.alive(), f"the broker process died during this test:\n{module_broker.log_tail()}"


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Brokers of this test alone (own configs, restarts); every one is killed at the end of the test."""
    started: list[BrokerProcess] = []

    def make(
        overrides: dict[str, str] | None = None, *, properties: str | None = None, name: str = "broker"
    ) -> BrokerProcess:
        b = _start(tmp_path / f"{name}{len(started)}", overrides, properties)
        started.append(b)
        return b

    try:
        yield make
    finally:
        for b in started:
            b.kill()


_topic_counter = 0


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique in the session, readable in broker logs (named after the test)."""
    global _topic_counter
    _topic_counter += 1
    base = "".join(c if c.isalnum() or c in "-_" else "-" for c in request.node.name)[:150]
    return f"{base}-{_topic_counter}"
