"""`sofakafka cluster up|down|status`: a ZooKeeper and N brokers on this machine, for tests and for people.

Layout under the cluster directory (``--dir``, default ``./sofakafka-cluster``)::

    cluster.json                 what `up` started: ports, pids, the command line of each process
    zookeeper/zoo.cfg, data/, zookeeper.log, zookeeper.pid
    broker-<id>/server.properties, data/, broker.log, broker.pid

Every process is detached (its own session, stdin from /dev/null, output to its log file) so the cluster
outlives the shell that started it; the pid files are how `down` finds them again. Before signalling a pid,
`down` checks that the process still runs the command it wrote down (``/proc/<pid>/cmdline`` names this
cluster's own files), so a pid reused by the system after a crash is never killed by mistake.

One template, two deployments. :func:`broker_properties` is the only place broker configs are written:
the launcher calls it with loopback addresses, ``--emit-compose`` calls it with Docker's service names,
and ``docker/`` holds what ``--emit-compose`` wrote (a test keeps the two equal). Each broker has two
listeners, because one address cannot serve both sides of a container network: INTERNAL is what brokers
and containers dial (``broker-N:9092`` in Docker), EXTERNAL what the host dials (``localhost:1909N``,
published). Advertising the in-network name to the host, or ``localhost`` to other containers, is the
classic first-run failure: the bootstrap connection works, and every request after Metadata goes nowhere.
Every broker also serves Prometheus metrics (``metrics.listener``, docs/metrics.md): on loopback broker N on
``BASE+300+N-1``, in Docker on 9308 inside its container, published on the host as ``19391``, ``19392``, ...

ZooKeeper is Debian's ``zookeeper`` package run as a plain JVM, as a service manager would but without one:
``QuorumPeerMain`` with a standalone ``zoo.cfg``. Readiness is the ``srvr`` four-letter word answering a
``Mode:`` line; ZooKeeper 3.8 answers ``ruok`` before it serves, so ``ruok`` would race the brokers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sofakafka

VERB = "cluster"
SUMMARY = "a local ZooKeeper and N brokers: up, down, status"

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
DEFAULT_DIR = "sofakafka-cluster"
DEFAULT_BASE_PORT = 19091
DEFAULT_ZK_PORT = 2181
# Loopback INTERNAL listeners sit this far above the EXTERNAL ones, so `--base-port P` reserves two
# predictable blocks: P..P+N-1 for clients, P+100..P+100+N-1 between brokers.
INTERNAL_PORT_OFFSET = 100
# Broker N serves /metrics, /health and /ready (metrics.listener) on BASE+METRICS_PORT_OFFSET+N-1.
METRICS_PORT_OFFSET = 300
DOCKER_METRICS_PORT = 9308
DOCKER_INTERNAL_PORT = 9092
DOCKER_ZK_CONNECT = "zookeeper:2181"
DOCKER_DATA_DIR = "/var/lib/sofakafka"
DOCKER_PROPERTIES_PATH = "/etc/sofakafka/server.properties"
STOP_DEADLINE_S = 30.0
START_DEADLINE_S = 90.0


# Children started by this process, by pid. Used in-process (tests, the benchmark) the launcher outlives
# the processes it starts: keeping the Popen objects lets it reap them (no zombies) and keeps Popen from
# warning that a child it forgot about still runs. From the command line the launcher exits first and init
# adopts its children.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class LauncherError(Exception):
    """A failure the user can act on; the message says what happened and where the log is."""


# -- the one template ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerAddress:
    """Where one broker listens and what it advertises, per listener."""

    internal_bind: str
    internal_advertised: str
    internal_port: int
    external_bind: str
    external_advertised: str
    external_port: int
    metrics_port: int = 0
    """Where metrics.listener binds (on ``external_bind``); 0: metrics off (a cluster.json from before them)."""

    @property
    def metrics_url(self) -> str | None:
        if not self.metrics_port:
            return None
        host = self.external_bind
        return f"http://{f'[{host}]' if ':' in host else host}:{self.metrics_port}"


def broker_properties(
    broker_id: int, brokers: int, address: BrokerAddress, *, zookeeper_connect: str, log_dir: str,
    rack: str | None = None, overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The server.properties of broker ``broker_id`` in a cluster of ``brokers``, in file order.

    Replication defaults follow the cluster's size so a 3-broker cluster is durable out of the box (RF=3,
    min.insync.replicas=2: an acknowledged acks=all write survives losing any one broker) while 1 or 2
    brokers still start (Kafka would refuse __consumer_offsets with RF 3 on fewer brokers)."""
    rf = min(3, brokers)
    min_isr = max(1, rf - 1)
    props: dict[str, str] = {
        "broker.id": str(broker_id),
        "listeners": f"INTERNAL://{address.internal_bind}:{address.internal_port},"
                     f"EXTERNAL://{address.external_bind}:{address.external_port}",
        "advertised.listeners": f"INTERNAL://{address.internal_advertised}:{address.internal_port},"
                                f"EXTERNAL://{address.external_advertised}:{address.external_port}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "zookeeper.connect": zookeeper_connect,
        "log.dirs": log_dir,
        "num.partitions": "3",
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(min_isr),
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(min_isr),
        "unclean.leader.election.enable": "false",
        "auto.leader.rebalance.enable": "true",
    }
    if address.metrics_url is not None:
        props["metrics.listener"] = address.metrics_url
    if rack is not None:
        props["broker.rack"] = rack
    props.update(overrides or {})
    return props


def render_properties(props: Mapping[str, str], comment: str) -> str:
    lines = [f"# {line}" if line else "#" for line in comment.splitlines()]
    lines += [f"{key}={value}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


def loopback_address(broker_id: int, base_port: int, host: str = "127.0.0.1") -> BrokerAddress:
    external = base_port + broker_id - 1
    return BrokerAddress(host, host, external + INTERNAL_PORT_OFFSET, host, host, external,
                         external + METRICS_PORT_OFFSET)


def broker_ports(base_port: int, brokers: int) -> list[int]:
    """Every port the brokers of a loopback cluster bind (EXTERNAL, INTERNAL, metrics), for callers that pick a
    free block; the highest is below ``base_port + METRICS_PORT_OFFSET + brokers``."""
    return [p for i in range(1, brokers + 1) for a in [loopback_address(i, base_port)]
            for p in (a.external_port, a.internal_port, a.metrics_port)]


def docker_address(broker_id: int) -> BrokerAddress:
    # Inside its container a broker binds every interface; the names it advertises are the compose service
    # name (resolvable on the compose network) and localhost with the port published 1:1 on the host.
    return BrokerAddress("0.0.0.0", f"broker-{broker_id}", DOCKER_INTERNAL_PORT,
                         "0.0.0.0", "localhost", DEFAULT_BASE_PORT + broker_id - 1, DOCKER_METRICS_PORT)


def docker_metrics_host_port(broker_id: int) -> int:
    """The host port broker ``broker_id``'s /metrics is published on (its container serves it on 9308)."""
    return DEFAULT_BASE_PORT + METRICS_PORT_OFFSET + broker_id - 1


def docker_broker_properties(broker_id: int, brokers: int = 3) -> dict[str, str]:
    return broker_properties(broker_id, brokers, docker_address(broker_id),
                             zookeeper_connect=DOCKER_ZK_CONNECT, log_dir=DOCKER_DATA_DIR)


DOCKER_PROPERTIES_COMMENT = (
    "Written by `sofakafka cluster up --emit-compose docker/` from the launcher's template; edit the\n"
    "template (sofakafka/cli/cluster.py), not this file, and emit again.")


def compose_document(brokers: int = 3) -> dict[str, object]:
    """docker-compose.yml as data: ZooKeeper plus ``brokers`` brokers built from docker/Dockerfile."""
    services: dict[str, object] = {
        "zookeeper": {
            "image": "zookeeper:3.8",
            "hostname": "zookeeper",
            "environment": {"ZOO_4LW_COMMANDS_WHITELIST": "srvr,ruok,stat,mntr"},
            "volumes": ["zookeeper-data:/data", "zookeeper-datalog:/datalog"],
            "healthcheck": {
                "test": ["CMD-SHELL", "echo srvr | nc -w 2 localhost 2181 | grep -q Mode"],
                "interval": "5s", "timeout": "5s", "retries": 12,
            },
        },
    }
    volumes: dict[str, object] = {"zookeeper-data": {}, "zookeeper-datalog": {}}
    for broker_id in range(1, brokers + 1):
        external = DEFAULT_BASE_PORT + broker_id - 1
        services[f"broker-{broker_id}"] = {
            "build": {"context": "..", "dockerfile": "docker/Dockerfile"},
            "image": "sofakafka:latest",
            "hostname": f"broker-{broker_id}",
            "depends_on": {"zookeeper": {"condition": "service_healthy"}},
            "ports": [f"{external}:{external}", f"{docker_metrics_host_port(broker_id)}:{DOCKER_METRICS_PORT}"],
            "volumes": [
                f"./broker-{broker_id}/server.properties:{DOCKER_PROPERTIES_PATH}:ro",
                f"broker-{broker_id}-data:{DOCKER_DATA_DIR}",
            ],
            # /ready answers 200 once the broker serves clients (docs/metrics.md); the image has Python, not curl.
            "healthcheck": {
                "test": ["CMD", "python", "-c", "import urllib.request; urllib.request.urlopen("
                         f"'http://127.0.0.1:{DOCKER_METRICS_PORT}/ready', timeout=3)"],
                "interval": "5s", "timeout": "5s", "retries": 24,
            },
            "stop_grace_period": "30s",
        }
        volumes[f"broker-{broker_id}-data"] = {}
    return {"services": services, "volumes": volumes}


def _yaml_scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    # Always quoted: "19091:19091" unquoted is a base-60 integer to YAML 1.1 parsers.
    return json.dumps(str(value))


def to_yaml(node: object, indent: int = 0) -> str:
    """Block-style YAML for the dict/list/scalar trees of :func:`compose_document` (JSON-quoted strings
    are valid YAML scalars, so no YAML library is needed to write it)."""
    pad = "  " * indent
    out: list[str] = []
    if isinstance(node, Mapping):
        for key, value in node.items():
            if isinstance(value, Mapping) and not value:
                out.append(f"{pad}{key}: {{}}")
            elif isinstance(value, (Mapping, list)):
                out.append(f"{pad}{key}:")
                out.append(to_yaml(value, indent + 1))
            else:
                out.append(f"{pad}{key}: {_yaml_scalar(value)}")
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, (Mapping, list)):
                raise ValueError("lists of collections are not used in compose_document")
            out.append(f"{pad}- {_yaml_scalar(item)}")
    else:
        out.append(f"{pad}{_yaml_scalar(node)}")
    return "\n".join(out)


def compose_files(brokers: int = 3) -> dict[str, str]:
    """Every generated file under docker/, by relative path."""
    files = {"docker-compose.yml": "# Written by `sofakafka cluster up --emit-compose docker/`; see docker/README.md.\n"
                                   + to_yaml(compose_document(brokers)) + "\n"}
    for broker_id in range(1, brokers + 1):
        files[f"broker-{broker_id}/server.properties"] = render_properties(
            docker_broker_properties(broker_id, brokers), DOCKER_PROPERTIES_COMMENT)
    return files


def emit_compose(target: Path, brokers: int = 3) -> list[Path]:
    written = []
    for rel, text in compose_files(brokers).items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


# -- processes ----------------------------------------------------------------------------------------------


@dataclass
class ProcessRecord:
    """One process `up` started: enough for `down` to find it and be sure it is still ours."""

    name: str
    pid: int
    marker: str  # a path on its command line; /proc/<pid>/cmdline must still contain it
    log: str

    def alive(self) -> bool:
        child = _CHILDREN.get(self.pid)
        if child is not None and child.poll() is not None:
            del _CHILDREN[self.pid]
            return False
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        # Empty while the kernel swaps the image in during exec; the state check below still applies.
        if cmdline and self.marker.encode() not in cmdline:
            return False  # the pid was reused by an unrelated process
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        # A zombie (state Z) has exited; only its parent's wait is missing.
        return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class ClusterState:
    directory: Path
    zk_port: int
    brokers: dict[int, BrokerAddress] = field(default_factory=dict)
    processes: list[ProcessRecord] = field(default_factory=list)

    @property
    def state_file(self) -> Path:
        return self.directory / "cluster.json"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{a.external_advertised}:{a.external_port}" for a in self.brokers.values())

    def save(self) -> None:
        doc = {
            "zk_port": self.zk_port,
            "brokers": {str(i): a.__dict__ for i, a in self.brokers.items()},
            "processes": [p.__dict__ for p in self.processes],
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(self.state_file)

    @classmethod
    def load(cls, directory: Path) -> ClusterState:
        try:
            doc = json.loads((directory / "cluster.json").read_text())
        except FileNotFoundError:
            raise LauncherError(f"no cluster in {directory} (no cluster.json)") from None
        return cls(directory, int(doc["zk_port"]),
                   {int(i): BrokerAddress(**a) for i, a in doc["brokers"].items()},
                   [ProcessRecord(**p) for p in doc["processes"]])


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As the brokers bind: a port whose last connections sit in TIME_WAIT is free to them.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _spawn(cmd: Sequence[str], log_path: Path, cwd: Path,
           env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        log.write(f"\n===== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(cmd)}\n".encode())
        log.flush()
        # A new session: the process keeps running when the launching terminal closes, and a Ctrl-C in it
        # reaches only the launcher. Popen's child is reaped by nobody once we exit: init adopts it.
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, env=dict(env or os.environ))
    _CHILDREN[proc.pid] = proc
    return proc


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


def _log_tail(path: str | Path, lines: int = 20) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def zookeeper_config(data_dir: Path, port: int, tick_ms: int, session_timeout_ms: int | None = None) -> str:
    """``zoo.cfg`` for the cluster's ZooKeeper. ZooKeeper grants a session at most 20 ticks unless told otherwise
    (``maxSessionTimeout``), silently: brokers asking for more (Kafka's default ``zookeeper.session.timeout.ms`` is
    18 s, 36 ticks of 500 ms) would be expired sooner than they were configured for."""
    max_session = (f"maxSessionTimeout={session_timeout_ms}\n"
                   if session_timeout_ms is not None and session_timeout_ms > 20 * tick_ms else "")
    return (f"tickTime={tick_ms}\n"
            f"{max_session}"
            f"dataDir={data_dir}\n"
            f"clientPort={port}\n"
            "clientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=srvr,ruok,stat,mntr,cons\n"
            "autopurge.purgeInterval=0\n")


#: ZooKeeper's heap, Kafka's zookeeper-server-start.sh default (-Xmx512M). Each partition costs ZooKeeper two
#: znodes and a watch per broker: at 100,000 partitions on three brokers a 256 MB heap was 98% full after
#: each collection and had spent 83 s in 118 full collections.
ZK_HEAP_MB = 512


def start_zookeeper(directory: Path, port: int, deadline: float, tick_ms: int = 2000,
                    session_timeout_ms: int | None = None, heap_mb: int = ZK_HEAP_MB) -> ProcessRecord:
    """``session_timeout_ms``: the longest session the brokers ask for, which ZooKeeper must grant; ``heap_mb``:
    its -Xmx."""
    if not ZK_JAR.exists():
        raise LauncherError(f"{ZK_JAR} is missing: install Debian's zookeeper package (apt-get install zookeeper)")
    java = shutil.which("java")
    if java is None:
        raise LauncherError("java is missing: Debian's zookeeper package pulls one in (apt-get install zookeeper)")
    zk_dir = directory / "zookeeper"
    (zk_dir / "data").mkdir(parents=True, exist_ok=True)
    cfg = zk_dir / "zoo.cfg"
    cfg.write_text(zookeeper_config(zk_dir / "data", port, tick_ms, session_timeout_ms))
    # The jar's manifest Class-Path names its dependencies under /usr/share/java; slf4j-simple, when
    # present, makes the log readable (without a binding slf4j says nothing at all).
    classpath = [str(zk_dir), str(ZK_JAR)] + ([str(SLF4J_SIMPLE_JAR)] if SLF4J_SIMPLE_JAR.exists() else [])
    cmd = [java, "-Xms64m", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-Dzookeeper.jmx.log4j.disable=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
           "-cp", ":".join(classpath), "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)]
    log = zk_dir / "zookeeper.log"
    proc = _spawn(cmd, log, zk_dir)
    (zk_dir / "zookeeper.pid").write_text(f"{proc.pid}\n")
    record = ProcessRecord("zookeeper", proc.pid, str(cfg), str(log))
    while "Mode:" not in four_letter_word(port, "srvr"):
        if proc.poll() is not None:
            raise LauncherError(f"ZooKeeper exited during start-up; {log}:\n{_log_tail(log)}")
        if time.monotonic() > deadline:
            raise LauncherError(f"ZooKeeper not serving on 127.0.0.1:{port} in time; see {log}")
        time.sleep(0.2)
    return record


def start_broker(directory: Path, broker_id: int, props: Mapping[str, str]) -> ProcessRecord:
    broker_dir = directory / f"broker-{broker_id}"
    broker_dir.mkdir(parents=True, exist_ok=True)
    properties = broker_dir / "server.properties"
    properties.write_text(render_properties(props, f"broker {broker_id}, written by `sofakafka cluster up`"))
    log = broker_dir / "broker.log"
    # This very installation of sofakafka, first on the path, whether or not it is installed.
    package_root = str(Path(sofakafka.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p))
    proc = _spawn([sys.executable, "-m", "sofakafka", "serve", str(properties)], log, broker_dir, env)
    (broker_dir / "broker.pid").write_text(f"{proc.pid}\n")
    return ProcessRecord(f"broker-{broker_id}", proc.pid, str(properties), str(log))


def restart_broker(directory: Path, broker_id: int) -> ProcessRecord:
    """Start broker ``broker_id`` of a running cluster again with its existing server.properties and data
    (after a crash or a kill); refuses while it still runs."""
    state = ClusterState.load(directory.resolve())
    name = f"broker-{broker_id}"
    old = next((p for p in state.processes if p.name == name), None)
    if old is None:
        raise LauncherError(f"no {name} in {state.directory}")
    if old.alive():
        raise LauncherError(f"{name} is running (pid {old.pid})")
    properties = Path(old.marker)
    props = load_properties_file(properties)
    record = start_broker(state.directory, broker_id, props)
    state.processes[state.processes.index(old)] = record
    state.save()
    return record


def load_properties_file(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def wait_for_cluster(state: ClusterState, deadline: float) -> None:
    """Until every broker answers Metadata on its EXTERNAL listener listing every broker and a controller:
    only then can a client bootstrap from any of them."""
    from sofakafka.client import ClientError, KafkaClient

    wanted = set(state.brokers)
    pending = dict(state.brokers)
    while pending:
        for broker_id, address in list(pending.items()):
            record = next(p for p in state.processes if p.name == f"broker-{broker_id}")
            if not record.alive():
                raise LauncherError(f"broker {broker_id} exited during start-up; {record.log}:\n"
                                    f"{_log_tail(record.log)}")
            try:
                with KafkaClient(f"{address.external_advertised}:{address.external_port}",
                                 request_timeout_ms=2000) as client:
                    cluster = client.metadata()
            except (ClientError, OSError):
                continue
            if set(cluster.brokers) == wanted and cluster.controller_id in wanted:
                del pending[broker_id]
        if pending and time.monotonic() > deadline:
            raise LauncherError(f"brokers {sorted(pending)} did not see the whole cluster in time; "
                                f"see their broker.log under {state.directory}")
        if pending:
            time.sleep(0.3)


@dataclass(frozen=True)
class ClusterSpec:
    brokers: int = 3
    directory: Path = Path(DEFAULT_DIR)
    base_port: int = DEFAULT_BASE_PORT
    zk_port: int = DEFAULT_ZK_PORT
    racks: tuple[str, ...] = ()
    overrides: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    # ZooKeeper's tickTime (its default). Sessions expire on tick boundaries, up to one tick late, and may last
    # 2 to 20 ticks: tests with short sessions use a smaller tick so that a dead broker is noticed sooner.
    zk_tick_ms: int = 2000
    zk_heap_mb: int = ZK_HEAP_MB


def _session_timeout_ms(spec: ClusterSpec) -> int | None:
    """The ZooKeeper session the brokers will ask for: the override, else Kafka's default (18 s). An override
    that is not a number is left to the broker to refuse, by name."""
    # As serve.py: the broker's config is imported only when a cluster starts.
    from sofakafka.broker.config import CONFIG_KEYS

    raw = spec.overrides.get("zookeeper.session.timeout.ms")
    try:
        return int(raw) if raw is not None else int(str(CONFIG_KEYS["zookeeper.session.timeout.ms"].default))
    except ValueError:
        return None


def up(spec: ClusterSpec, *, deadline_s: float = START_DEADLINE_S) -> ClusterState:
    """Start ZooKeeper and the brokers; on any failure, stop whatever was started and raise."""
    if spec.brokers < 1:
        raise LauncherError("--brokers must be at least 1")
    if spec.zk_heap_mb < 64:
        raise LauncherError(f"--zk-heap-mb must be at least 64 (ZooKeeper's -Xmx in MB), not {spec.zk_heap_mb}")
    if spec.racks and len(spec.racks) != spec.brokers:
        raise LauncherError(f"--rack: {len(spec.racks)} racks for {spec.brokers} brokers (give one per broker)")
    directory = spec.directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / "cluster.json").exists():
        old = ClusterState.load(directory)
        if any(p.alive() for p in old.processes):
            raise LauncherError(f"a cluster is already running in {directory}; `sofakafka cluster down` first")
    addresses = {i: loopback_address(i, spec.base_port, spec.host) for i in range(1, spec.brokers + 1)}
    ports = [spec.zk_port] + [p for a in addresses.values() for p in (a.internal_port, a.external_port, a.metrics_port)]
    busy = [p for p in ports if not _port_free(spec.host, p)]
    if busy:
        raise LauncherError(f"ports already in use: {busy} (choose --base-port / --zk-port)")
    state = ClusterState(directory, spec.zk_port, addresses)
    deadline = time.monotonic() + deadline_s
    try:
        state.processes.append(start_zookeeper(directory, spec.zk_port, deadline, spec.zk_tick_ms,
                                               _session_timeout_ms(spec), spec.zk_heap_mb))
        state.save()
        for broker_id, address in addresses.items():
            props = broker_properties(
                broker_id, spec.brokers, address, zookeeper_connect=f"127.0.0.1:{spec.zk_port}",
                log_dir=str(directory / f"broker-{broker_id}" / "data"),
                rack=spec.racks[broker_id - 1] if spec.racks else None, overrides=spec.overrides)
            state.processes.append(start_broker(directory, broker_id, props))
            state.save()
        wait_for_cluster(state, deadline)
    except BaseException:
        stop_processes(state.processes)
        raise
    return state


def stop_processes(processes: Iterable[ProcessRecord], deadline_s: float = STOP_DEADLINE_S) -> list[str]:
    """SIGTERM brokers first (a controlled shutdown still needs ZooKeeper), then ZooKeeper; SIGKILL whatever
    outlives the deadline. Returns a line per process for the user."""
    processes = list(processes)
    brokers = [p for p in processes if p.name != "zookeeper"]
    others = [p for p in processes if p.name == "zookeeper"]
    report: list[str] = []
    for group in (brokers, others):
        running = [p for p in group if p.alive()]
        for p in group:
            if p not in running:
                report.append(f"{p.name}: not running")
        for p in running:
            _signal(p.pid, signal.SIGTERM)
        end = time.monotonic() + deadline_s
        while running and time.monotonic() < end:
            time.sleep(0.1)
            for p in [p for p in running if not p.alive()]:
                running.remove(p)
                report.append(f"{p.name}: stopped (pid {p.pid})")
        for p in running:
            _signal(p.pid, signal.SIGKILL)
            while p.alive():
                time.sleep(0.05)
            report.append(f"{p.name}: killed after {deadline_s:.0f}s (pid {p.pid}); see {p.log}")
    return report


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def down(directory: Path, *, deadline_s: float = STOP_DEADLINE_S) -> list[str]:
    state = ClusterState.load(directory.resolve())
    report = stop_processes(state.processes, deadline_s)
    for p in state.processes:
        pid_file = Path(p.marker).parent / f"{'zookeeper' if p.name == 'zookeeper' else 'broker'}.pid"
        pid_file.unlink(missing_ok=True)
    state.state_file.unlink(missing_ok=True)
    return report


def status(directory: Path) -> list[str]:
    state = ClusterState.load(directory.resolve())
    lines = []
    for p in state.processes:
        metrics = ""
        if p.name == "zookeeper":
            where = f"127.0.0.1:{state.zk_port}"
        else:
            address = state.brokers[int(p.name.split("-")[1])]
            where = f"{address.external_advertised}:{address.external_port}"
            if address.metrics_url is not None:
                metrics = f", metrics {address.metrics_url}/metrics"
        lines.append(f"{p.name}: {'running' if p.alive() else 'NOT RUNNING'} pid {p.pid} on {where}{metrics}, "
                     f"log {p.log}")
    return lines


# -- command line -------------------------------------------------------------------------------------------


def _parse_overrides(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise LauncherError(f"--override wants KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"sofakafka {VERB}", description="A ZooKeeper and N brokers on this machine (loopback).")
    verbs = parser.add_subparsers(dest="verb", required=True)
    up_p = verbs.add_parser("up", help="start ZooKeeper and the brokers, detached")
    up_p.add_argument("--brokers", type=int, default=3)
    up_p.add_argument("--dir", default=DEFAULT_DIR, help="cluster directory (configs, data, logs, pid files)")
    up_p.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT,
                      help=f"client port of broker 1; broker N listens on BASE+N-1 (and BASE+{INTERNAL_PORT_OFFSET}+N-1 "
                           f"between brokers) and serves /metrics on BASE+{METRICS_PORT_OFFSET}+N-1")
    up_p.add_argument("--zk-port", type=int, default=DEFAULT_ZK_PORT)
    up_p.add_argument("--zk-heap-mb", type=int, default=ZK_HEAP_MB,
                      help=f"ZooKeeper's heap (-Xmx) in MB (default {ZK_HEAP_MB}, as Kafka's start script); about "
                           "1,000 for 100,000 partitions")
    up_p.add_argument("--rack", action="append", default=[], help="broker.rack, one per broker in id order; "
                      "or one comma-separated list")
    up_p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                      help="a broker config for every broker (repeatable)")
    up_p.add_argument("--emit-compose", metavar="DIR",
                      help="write docker-compose.yml and the brokers' server.properties to DIR, start nothing")
    down_p = verbs.add_parser("down", help="stop the cluster (SIGTERM, SIGKILL after a deadline)")
    down_p.add_argument("--dir", default=DEFAULT_DIR)
    down_p.add_argument("--timeout", type=float, default=STOP_DEADLINE_S, help="seconds before SIGKILL")
    status_p = verbs.add_parser("status", help="which processes run")
    status_p.add_argument("--dir", default=DEFAULT_DIR)
    args = parser.parse_args(list(argv))
    try:
        if args.verb == "up":
            if args.emit_compose:
                for path in emit_compose(Path(args.emit_compose), args.brokers):
                    print(f"wrote {path}")
                return 0
            racks = tuple(r for item in args.rack for r in item.split(",") if r)
            state = up(ClusterSpec(args.brokers, Path(args.dir), args.base_port, args.zk_port, racks,
                                   _parse_overrides(args.override), zk_heap_mb=args.zk_heap_mb))
            for line in status(state.directory):
                print(line)
            print(f"bootstrap.servers={state.bootstrap_servers}")
            return 0
        if args.verb == "down":
            for line in down(Path(args.dir), deadline_s=args.timeout):
                print(line)
            return 0
        lines = status(Path(args.dir))
        for line in lines:
            print(line)
        return 0 if all("NOT RUNNING" not in line for line in lines) else 3
    except LauncherError as exc:
        print(f"sofakafka cluster: {exc}", file=sys.stderr)
        return 1
