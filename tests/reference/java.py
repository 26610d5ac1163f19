"""Running Apache Kafka's Java code from the tests: classpaths, one-shot mains, and the scenario JVM.

The jars come from Maven Central through ``interop/java/pom.xml``: ``scripts/test.sh`` resolves them once per
machine into one folder per classpath (``interop/java/target/lib/<name>/``). The names:

- ``clients-2.6``: kafka-clients 2.6.3 (the protocol level sofakafka matches);
- ``clients-4``: kafka-clients 4.x (what users run today);
- ``streams-2.6``: kafka-streams 2.6.3 with its clients;
- ``kafka-2.6``: kafka_2.13 2.6.3, Apache Kafka's broker (``kafka.Kafka``) and its tools.

Our scenario runner (``interop/java/scenarios``) is compiled here with ``javac`` against clients and streams 2.6
when its sources changed (a hash stamp), so editing a scenario needs no Maven run.

Only a missing ``java`` skips (with the reason shown by ``-ra``); a machine with java but without the jars is a
broken install, and the tests fail saying which command fills it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
INTEROP_JAVA = REPO / "interop" / "java"
LIB = INTEROP_JAVA / "target" / "lib"
SCENARIO_SOURCES = INTEROP_JAVA / "scenarios" / "src" / "main" / "java"
SCENARIO_CLASSES = INTEROP_JAVA / "target" / "scenario-classes"
RESOLVE_COMMAND = "mvn -q -B -f interop/java/pom.xml process-resources (scripts/test.sh runs it)"

# A JVM that starts fast and stays small: the tests start many short-lived ones on a 2-core machine.
QUICK_JVM_FLAGS = ("-Xms32m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
LOG4J_QUIET = INTEROP_JAVA / "log4j-tools.properties"

CLASSPATHS = ("clients-2.6", "clients-4", "streams-2.6", "kafka-2.6")
# The client classpaths a scenario runs with: the oldest we match and the newest users run.
CLIENT_VERSIONS = ("clients-2.6", "clients-4")


def java_binary() -> str | None:
    """The ``java`` the tests use: ``$SOFAKAFKA_JAVA`` when set (another JDK), else the one on PATH."""
    return os.environ.get("SOFAKAFKA_JAVA") or shutil.which("java")


def require_java() -> str:
    """The java binary, or a skip naming the reason when there is none (the only reason to skip)."""
    java = java_binary()
    if java is None:
        pytest.skip("no `java` on PATH: the Apache Kafka interop tests need a JDK (scripts/test.sh installs one)")
    return java


def lib_dir(name: str) -> Path:
    """The folder of jars of one classpath; fails (not skips) when they were not resolved."""
    assert name in CLASSPATHS, f"unknown classpath {name!r}; known: {CLASSPATHS}"
    d = LIB / name
    if not d.is_dir() or not any(d.glob("*.jar")):
        pytest.fail(f"{d} has no jars: resolve them with {RESOLVE_COMMAND}")
    return d


def classpath(*names: str, extra: Sequence[Path] = ()) -> str:
    """A -cp value: the given extra dirs/jars first, then each named folder's jars (``dir/*``)."""
    parts = [str(p) for p in extra] + [str(lib_dir(n) / "*") for n in names]
    return os.pathsep.join(parts)


_compile_lock = threading.Lock()


def scenario_classes() -> Path:
    """The compiled scenario runner, rebuilt with javac when a source file changed since the last build."""
    sources = sorted(SCENARIO_SOURCES.rglob("*.java"))
    digest = hashlib.sha256()
    for src in sources:
        digest.update(str(src.relative_to(SCENARIO_SOURCES)).encode())
        digest.update(src.read_bytes())
    stamp = SCENARIO_CLASSES / ".sources-sha256"
    with _compile_lock:
        if stamp.exists() and stamp.read_text() == digest.hexdigest():
            return SCENARIO_CLASSES
        java = require_java()
        javac = str(Path(os.path.realpath(java)).with_name("javac"))
        if not Path(javac).exists():
            javac = shutil.which("javac") or ""
        if not javac:
            pytest.fail("no javac next to java nor on PATH: apt-get install openjdk-17-jdk-headless (scripts/test.sh does)")
        shutil.rmtree(SCENARIO_CLASSES, ignore_errors=True)
        SCENARIO_CLASSES.mkdir(parents=True)
        result = subprocess.run(
            [javac, "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d", str(SCENARIO_CLASSES),
             "-cp", classpath("streams-2.6"), *map(str, sources)],
            capture_output=True, text=True, timeout=300,
        )
        if result.returncode != 0:
            pytest.fail(f"javac failed on interop/java/scenarios:\n{result.stdout}\n{result.stderr}")
        stamp.write_text(digest.hexdigest())
    return SCENARIO_CLASSES


def run_main(
    main_class: str,
    args: Sequence[str],
    *,
    classpaths: Sequence[str] = ("kafka-2.6",),
    extra_classpath: Sequence[Path] = (),
    jvm_flags: Sequence[str] = QUICK_JVM_FLAGS,
    timeout: float = 120.0,
    input: str | None = None,
    check: bool = True,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one Java main class to completion (a Kafka tool such as ``kafka.admin.TopicCommand``).

    Kafka's log4j output goes to stderr at WARN (``interop/java/log4j-tools.properties``); ``check`` fails the
    test with both streams when the exit code is not 0."""
    java = require_java()
    cmd = [java, *jvm_flags, f"-Dlog4j.configuration=file:{LOG4J_QUIET}",
           "-cp", classpath(*classpaths, extra=extra_classpath), main_class, *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input, cwd=cwd,
                            stdin=None if input is not None else subprocess.DEVNULL)
    if check and result.returncode != 0:
        pytest.fail(
            f"{main_class} {' '.join(args)} exited with {result.returncode}\n"
            f"--- stdout\n{result.stdout[-6000:]}\n--- stderr\n{result.stderr[-6000:]}"
        )
    return result


class ScenarioError(AssertionError):
    """A scenario failed inside the JVM; the message carries the Java exception and its stack."""


class JsonLineJVM:
    """A long-lived JVM answering one JSON line per JSON request line, matched by ``id``.

    A reader thread hands each answer to the future of its request, so requests may be in flight together
    (the scenario runner runs them concurrently) and a caller waits on its own answer alone. Everything the JVM
    writes to stderr goes to ``log_path``."""

    what = "JVM"

    def __init__(self, command: list[str], log_path: Path, start_timeout: float = 60.0) -> None:
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     text=True, encoding="utf-8", bufsize=1, start_new_session=True)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._hello: Future[dict[str, Any]] = Future()
        self._reader = threading.Thread(target=self._read_answers, name=f"{self.what} reader", daemon=True)
        self._reader.start()
        try:
            self.hello = self._hello.result(start_timeout)
        except FutureTimeout:
            self.close()
            raise AssertionError(f"{self.what} did not start within {start_timeout}s\n{self.log_tail()}") from None
        assert self.hello.get("ready"), f"{self.what} did not start: {self.hello}\n{self.log_tail()}"

    def _read_answers(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            answer: dict[str, Any] = json.loads(line)
            if not self._hello.done():
                self._hello.set_result(answer)
                continue
            with self._lock:
                future = self._pending.pop(answer.get("id", -1), None)
            if future is None:
                raise AssertionError(f"{self.what} answered an unknown request: {line[:500]}")
            future.set_result(answer)
        # The JVM is gone: nothing pending will ever be answered.
        gone = AssertionError(f"{self.what} exited ({self.proc.wait()})\n{self.log_tail()}")
        if not self._hello.done():
            self._hello.set_exception(gone)
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            future.set_exception(gone)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, body: dict[str, Any]) -> Future[dict[str, Any]]:
        """Send one request; the future holds the JVM's answer."""
        future: Future[dict[str, Any]] = Future()
        with self._lock:
            assert self.alive(), f"{self.what} is gone\n{self.log_tail()}"
            assert self.proc.stdin is not None
            request_id = next(self._ids)
            self._pending[request_id] = future
            self.proc.stdin.write(json.dumps({"id": request_id, **body}) + "\n")
            self.proc.stdin.flush()
        return future

    def wait(self, future: Future[dict[str, Any]], timeout: float, what: str) -> dict[str, Any]:
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise AssertionError(f"{self.what} gave no answer to {what} within {timeout}s\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 80) -> str:
        if not self._log.closed:
            self._log.flush()
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def close(self) -> None:
        with self._lock:
            unanswered = bool(self._pending)
        if self.proc.poll() is None and unanswered:
            # Requests nobody will wait for (the run stopped early): no reason to let them finish.
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(30)
            except (subprocess.TimeoutExpired, OSError, BrokenPipeError):
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


class ScenarioJVM(JsonLineJVM):
    """One long-lived JVM running ``io.sofakafka.interop.Scenarios`` with one client version on its classpath.

    A request is ``{"scenario": name, "bootstrap": "host:port", "params": {...}}``; the JVM runs up to
    ``parallel`` of them at a time, so a module pays JVM start-up once and its scenarios, against sofakafka and
    against Apache Kafka, wait on the brokers together rather than in turn. Client logging goes to ``log_path``."""

    what = "scenario JVM"

    def __init__(self, client: str, log_path: Path, *, with_streams: bool = False, parallel: int = 1) -> None:
        assert client in CLIENT_VERSIONS, client
        self.client = client
        java = require_java()
        names = [client] + (["streams-2.6"] if with_streams else [])
        cp = classpath(*names, extra=[scenario_classes()])
        super().__init__(
            [java, *QUICK_JVM_FLAGS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-Dorg.slf4j.simpleLogger.showDateTime=true", f"-Dscenarios.parallel={parallel}",
             "-cp", cp, "io.sofakafka.interop.Scenarios"], log_path)
        self.kafka_version: str = self.hello.get("kafkaVersion", "?")

    def submit(self, scenario: str, bootstrap: str, **params: Any) -> Future[dict[str, Any]]:
        """Start one scenario; the future holds the JVM's answer (see :meth:`result`)."""
        return self.request({"scenario": scenario, "bootstrap": bootstrap, "params": params})

    def result(self, future: Future[dict[str, Any]], scenario: str, bootstrap: str,
               timeout: float = 300.0) -> dict[str, Any]:
        """The scenario's result object; a failure inside Java raises ScenarioError."""
        answer = self.wait(future, timeout, f"scenario {scenario} against {bootstrap}")
        if not answer.get("ok"):
            raise ScenarioError(
                f"scenario {scenario} ({self.client}, kafka-clients {self.kafka_version}) against {bootstrap} failed:\n"
                f"{answer.get('error')}\n{answer.get('trace', '')}"
            )
        result: dict[str, Any] = answer["result"]
        return result

    def run(self, scenario: str, bootstrap: str, timeout: float = 300.0, **params: Any) -> dict[str, Any]:
        """Run one scenario and return its result object; a failure inside Java raises ScenarioError."""
        return self.result(self.submit(scenario, bootstrap, **params), scenario, bootstrap, timeout)


class ToolJVM(JsonLineJVM):
    """Kafka 2.6's command-line tools run one after another in one JVM (``io.sofakafka.interop.Tools``): each
    invocation is its main class with its arguments and stdin, answered with its exit code, stdout and stderr,
    as ``java -cp <kafka_2.13's jars> <main>`` would give them, without paying a JVM and Scala's start-up each
    time."""

    what = "tool JVM"

    def __init__(self, log_path: Path) -> None:
        java = require_java()
        super().__init__(
            [java, *QUICK_JVM_FLAGS, f"-Dlog4j.configuration=file:{LOG4J_QUIET}",
             "-cp", classpath("kafka-2.6", extra=[scenario_classes()]), "io.sofakafka.interop.Tools"], log_path)

    def run(self, main_class: str, args: Sequence[str], *, timeout: float = 120.0, input: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        future = self.request({"main": main_class, "args": list(args), "stdin": input})
        answer = self.wait(future, timeout, f"{main_class} {' '.join(args)}")
        if "runnerError" in answer:
            raise AssertionError(f"the tool JVM could not run {main_class}:\n{answer['runnerError']}")
        result = subprocess.CompletedProcess([main_class, *args], answer["exit"], answer["stdout"], answer["stderr"])
        if check and result.returncode != 0:
            pytest.fail(
                f"{main_class} {' '.join(args)} exited with {result.returncode}\n"
                f"--- stdout\n{result.stdout[-6000:]}\n--- stderr\n{result.stderr[-6000:]}"
            )
        return result
