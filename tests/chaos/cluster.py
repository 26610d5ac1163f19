"""ZooKeeper and N brokers, each in its own network namespace of a ``ChaosNetwork``, for the nemesis to hurt.

The brokers' configuration comes from the launcher's one template (``broker_properties``: RF=3,
min.insync.replicas=2, unclean election off), with each broker's INTERNAL and EXTERNAL listeners on its own
namespace address, so a partition between two namespaces really is one between two brokers (and between a
broker and ZooKeeper). Every process is started with ``ip netns exec`` in a new session and kept as a Popen so
it is reaped; ``close`` continues paused processes and stops everything, killing what will not stop.

Each broker has two log dirs, as a JBOD broker has: ``data`` on the test's disk and ``data-b``, a tmpfs of its own
(``SECOND_DIR_MB``, mounted before the broker first starts so the broker's mount namespace, made by ``ip netns
exec``, has it), which the nemesis fills to fail that dir alone (``fail-log-dir``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import sofakafka
from sofakafka.cli import cluster as cl
from sofakafka.client import ClientError, KafkaClient, NewTopic
from sofakafka.protocol.errors import ErrorCode
from tests.chaos.netns import ChaosNetwork, Node

ZK_PORT = 2181
EXTERNAL_PORT = 9092
INTERNAL_PORT = 9093
WAIT_S = 90.0
SECOND_DIR_MB = 512  # a limit, not an allocation: tmpfs takes memory as it is written


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = WAIT_S, interval: float = 0.2) -> float:
    start = time.monotonic()
    while True:
        try:
            if predicate():
                return time.monotonic() - start
        except (ClientError, OSError):
            pass
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Process:
    def __init__(self, name: str, node: Node, cmd: list[str], log: Path, cwd: Path,
                 env: Mapping[str, str] | None = None) -> None:
        self.name, self.node, self.cmd, self.log, self.cwd = name, node, cmd, log, cwd
        self.env = dict(env or os.environ)
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    def start(self) -> None:
        assert not self.alive(), f"{self.name} already runs"
        with open(self.log, "ab") as log:
            log.write(f"\n===== {time.strftime('%H:%M:%S')} {' '.join(self.cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen([*self.node.exec_prefix(), *self.cmd], cwd=self.cwd,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=self.env)
        self.paused = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)
        self.paused = False

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def stop(self, deadline_s: float = 30.0) -> None:
        if not self.alive():
            return
        self.resume()
        self.signal(signal.SIGTERM)
        assert self.proc is not None
        try:
            self.proc.wait(deadline_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(line for line in text if "kazoo" not in line)[-lines * 200:].split("\n", 1)[-1]


class ChaosCluster:
    def __init__(self, directory: Path, brokers: int = 3, overrides: Mapping[str, str] | None = None,
                 zk_tick_ms: int = 500) -> None:
        self.directory = directory
        self.broker_ids = list(range(1, brokers + 1))
        self.overrides = dict(overrides or {})
        self.zk_tick_ms = zk_tick_ms
        self.net = ChaosNetwork.create(["zk", *[f"b{b}" for b in self.broker_ids]])
        self.zk: Process | None = None
        self.brokers: dict[int, Process] = {}
        self.broker_overrides: dict[int, dict[str, str]] = {b: {} for b in self.broker_ids}
        self._mounted: list[Path] = []

    # -- addresses ------------------------------------------------------------------------------------------
    def node(self, broker_id: int) -> Node:
        return self.net.nodes[f"b{broker_id}"]

    @property
    def zk_address(self) -> str:
        return f"{self.net.nodes['zk'].address}:{ZK_PORT}"

    def bootstrap(self, broker_ids: list[int] | None = None) -> str:
        ids = broker_ids if broker_ids is not None else self.broker_ids
        return ",".join(f"{self.node(b).address}:{EXTERNAL_PORT}" for b in ids)

    # -- processes -----------------------------------------------------------------------------------------------
    def data_dirs(self, broker_id: int) -> tuple[Path, Path]:
        """The broker's log dirs: on the test's disk, and on its own tmpfs."""
        broker_dir = self.directory / f"broker-{broker_id}"
        return broker_dir / "data", broker_dir / "data-b"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.start_zookeeper()
        for b in self.broker_ids:
            second = self.data_dirs(b)[1]
            second.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SECOND_DIR_MB}m", "tmpfs", str(second)], check=True)
            self._mounted.append(second)
            self._write_properties(b)
            self.brokers[b] = self._broker_process(b)
            self.brokers[b].start()
        self.wait_for_brokers()

    def start_zookeeper(self) -> None:
        zk_dir = self.directory / "zookeeper"
        (zk_dir / "data").mkdir(parents=True, exist_ok=True)
        node = self.net.nodes["zk"]
        cfg = zk_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.zk_tick_ms}\n"
            f"dataDir={zk_dir / 'data'}\n"
            f"clientPort={ZK_PORT}\n"
            f"clientPortAddress={node.address}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=srvr,ruok,stat,mntr,cons\n"
            "autopurge.purgeInterval=0\n")
        java = shutil.which("java")
        assert java, "java missing: apt-get install zookeeper pulls a JRE (scripts/test.sh does)"
        classpath = [str(zk_dir), str(cl.ZK_JAR)] + ([str(cl.SLF4J_SIMPLE_JAR)] if cl.SLF4J_SIMPLE_JAR.exists() else [])
        cmd = [java, "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dzookeeper.jmx.log4j.disable=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
               "-cp", ":".join(classpath), "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)]
        if self.zk is None:
            self.zk = Process("zookeeper", node, cmd, zk_dir / "zookeeper.log", zk_dir)
        self.zk.start()
        wait_for("ZooKeeper to serve", lambda: "Mode:" in self.four_letter_word("srvr"), 60, 0.1)

    def four_letter_word(self, word: str) -> str:
        host = self.net.nodes["zk"].address
        try:
            with socket.create_connection((host, ZK_PORT), timeout=2) as s:
                s.sendall(word.encode())
                chunks = []
                while chunk := s.recv(4096):
                    chunks.append(chunk)
        except OSError:
            return ""
        return b"".join(chunks).decode(errors="replace")

    def _write_properties(self, broker_id: int) -> Path:
        node = self.node(broker_id)
        address = cl.BrokerAddress(node.address, node.address, INTERNAL_PORT, node.address, node.address,
                                   EXTERNAL_PORT)
        broker_dir = self.directory / f"broker-{broker_id}"
        broker_dir.mkdir(parents=True, exist_ok=True)
        props = cl.broker_properties(broker_id, len(self.broker_ids), address, zookeeper_connect=self.zk_address,
                                     log_dir=",".join(str(d) for d in self.data_dirs(broker_id)),
                                     overrides={**self.overrides, **self.broker_overrides[broker_id]})
        path = broker_dir / "server.properties"
        path.write_text(cl.render_properties(props, f"chaos broker {broker_id}"))
        return path

    def _broker_process(self, broker_id: int) -> Process:
        broker_dir = self.directory / f"broker-{broker_id}"
        package_root = str(Path(sofakafka.__file__).resolve().parent.parent)
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=package_root)
        return Process(f"broker-{broker_id}", self.node(broker_id),
                       [sys.executable, "-m", "sofakafka", "serve", str(broker_dir / "server.properties")],
                       broker_dir / "broker.log", broker_dir, env)

    def restart_broker(self, broker_id: int, overrides: Mapping[str, str] | None = None) -> None:
        """Start a dead broker again on its data; ``overrides`` replace the broker's own extra settings
        (``{}`` drops them: a skewed clock goes back to the system's)."""
        process = self.brokers[broker_id]
        assert not process.alive(), f"broker {broker_id} still runs"
        if overrides is not None:
            self.broker_overrides[broker_id] = dict(overrides)
        self._write_properties(broker_id)
        self.wait_unregistered(broker_id)
        process.start()

    def wait_unregistered(self, broker_id: int) -> None:
        """Until the stopped broker's registration is gone. A broker stopped while ZooKeeper was just restarted
        may leave its old session's registration behind for a session timeout (the server restarted its
        clock); a new process finding it refuses to start, as Kafka's does (its ephemeral node exists)."""
        def gone() -> bool:
            with self.client(5000) as c:
                return broker_id not in c.metadata([]).brokers

        wait_for(f"broker {broker_id}'s registration to go", gone, WAIT_S, 0.2)

    def live_brokers(self) -> list[int]:
        return [b for b, p in self.brokers.items() if p.alive() and not p.paused]

    def client(self, timeout_ms: int = 10_000) -> KafkaClient:
        return KafkaClient(self.bootstrap(self.live_brokers() or self.broker_ids), request_timeout_ms=timeout_ms)

    def wait_for_brokers(self, timeout: float = WAIT_S) -> None:
        def everyone_registered() -> bool:
            with self.client(5000) as c:
                md = c.metadata([])
            return set(md.brokers) == set(self.broker_ids) and md.controller_id in self.broker_ids

        wait_for("every broker registered and a controller", everyone_registered, timeout)

    # -- topics and leadership --------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None) -> None:
        with self.client() as c:
            result = c.create_topics([NewTopic(name, partitions, len(self.broker_ids), configs=dict(configs or {}))])
        assert result[name].error == ErrorCode.NONE, result
        self.wait_full_isr([name])

    def partitions(self, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
        with self.client(5000) as c:
            info = c.metadata([topic]).topics[topic]
        return {p: (i.leader, tuple(sorted(i.isr))) for p, i in info.partitions.items()}

    def leader(self, topic: str, partition: int) -> int:
        return self.partitions(topic)[partition][0]

    def controller(self) -> int:
        with self.client(5000) as c:
            return c.metadata([]).controller_id

    def wait_full_isr(self, topics: list[str], timeout: float = 2 * WAIT_S) -> None:
        everyone = tuple(self.broker_ids)
        for topic in topics:
            wait_for(f"every replica in every ISR of {topic}",
                     lambda t=topic: all(leader in everyone and isr == everyone  # type: ignore[misc]
                                         for leader, isr in self.partitions(t).values()), timeout, 0.5)

    # -- teardown ---------------------------------------------------------------------------------------------
    def logs(self, lines: int = 40) -> str:
        procs = ([self.zk] if self.zk else []) + list(self.brokers.values())
        return "\n".join(f"----- {p.name} ({p.log})\n{p.log_tail(lines)}" for p in procs)

    def close(self) -> None:
        try:
            self.net.heal()
            for p in self.brokers.values():
                p.resume()
            for p in self.brokers.values():
                p.stop(20)
            if self.zk is not None:
                self.zk.resume()
                self.zk.kill()
        finally:
            for mount in self._mounted:
                subprocess.run(["umount", "-l", str(mount)], check=False)
            self.net.close()

    def __enter__(self) -> ChaosCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
