"""`sofakafka cluster up --brokers 3` as a user runs it: a real ZooKeeper and three broker processes,
detached, that stock clients (kafka-python, confluent-kafka, kcat) use through any broker as bootstrap;
`down` leaves no process behind."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from sofakafka.cli import cluster as cl
from sofakafka.client import KafkaClient, NewTopic
from sofakafka.protocol.errors import ErrorCode

REPO = Path(__file__).resolve().parents[2]
BROKERS = 3


def _free(port: int) -> bool:
    with socket.socket() as s:
        # As a server binds (asyncio sets SO_REUSEADDR): connections in TIME_WAIT do not hold the port.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block() -> tuple[int, int]:
    """A base port whose EXTERNAL, INTERNAL and metrics blocks are free, and a free ZooKeeper port."""
    rng = random.Random()
    for _ in range(200):
        # Below Linux's ephemeral range (32768+), where client sockets could take a port between the check
        # and the bind.
        base = rng.randrange(20000, 32768 - cl.METRICS_PORT_OFFSET - BROKERS)
        zk = base + 200
        if all(_free(p) for p in [*cl.broker_ports(base, BROKERS), zk]):
            return base, zk
    raise AssertionError("no free port block")


def sofakafka(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    return subprocess.run([sys.executable, "-m", "sofakafka", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


@dataclass
class Cluster:
    directory: Path
    base_port: int
    zk_port: int

    def bootstrap(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.base_port + broker_id - 1}"

    @property
    def all_bootstrap(self) -> str:
        return ",".join(self.bootstrap(i) for i in range(1, BROKERS + 1))

    def processes(self) -> list[cl.ProcessRecord]:
        return cl.ClusterState.load(self.directory).processes

    def logs(self) -> str:
        out = []
        for path in sorted(self.directory.glob("*/*.log")):
            lines = path.read_text(errors="replace").splitlines()[-60:]
            out.append(f"----- {path}\n" + "\n".join(lines))
        return "\n".join(out)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("cluster")
    base, zk = free_port_block()
    result = sofakafka("cluster", "up", "--brokers", str(BROKERS), "--dir", str(directory),
                       "--base-port", str(base), "--zk-port", str(zk))
    started = Cluster(directory, base, zk)
    records: list[cl.ProcessRecord] = []
    try:
        assert result.returncode == 0, result.stdout + result.stderr + started.logs()
        records = started.processes()
        yield started
    finally:
        # Whatever the tests did: nothing of this cluster survives the module.
        if (directory / "cluster.json").exists():
            records = started.processes()
        cl.stop_processes(records, deadline_s=10)


def test_up_reports_every_process_and_bootstrap(cluster: Cluster) -> None:
    result = sofakafka("cluster", "status", "--dir", str(cluster.directory))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["zookeeper", "broker-1", "broker-2", "broker-3"]
    assert all(": running pid " in line for line in lines)
    for record in cluster.processes():
        assert record.alive()
        pid_file = Path(record.marker).parent / ("zookeeper.pid" if record.name == "zookeeper" else "broker.pid")
        assert int(pid_file.read_text()) == record.pid
    for broker_id in range(1, BROKERS + 1):
        props = (cluster.directory / f"broker-{broker_id}" / "server.properties").read_text()
        assert f"broker.id={broker_id}\n" in props
        assert f"zookeeper.connect=127.0.0.1:{cluster.zk_port}\n" in props
        assert f"log.dirs={cluster.directory.resolve() / f'broker-{broker_id}' / 'data'}\n" in props
        # Every broker serves its metrics on BASE+300+N-1, named in status and answering /ready.
        metrics = f"http://127.0.0.1:{cluster.base_port + cl.METRICS_PORT_OFFSET + broker_id - 1}"
        assert f"metrics.listener={metrics}\n" in props
        assert f"metrics {metrics}/metrics," in lines[broker_id]
        with urllib.request.urlopen(metrics + "/ready", timeout=10) as ready:
            assert ready.status == 200


def test_zookeeper_runs_with_kafkas_heap(cluster: Cluster) -> None:
    """Kafka's start script gives ZooKeeper 512 MB; 256 MB was too little for 100,000 partitions."""
    (zk,) = [r for r in cluster.processes() if r.name == "zookeeper"]
    args = Path(f"/proc/{zk.pid}/cmdline").read_bytes().split(b"\0")
    assert [a for a in args if a.startswith(b"-Xmx")] == [f"-Xmx{cl.ZK_HEAP_MB}m".encode()] == [b"-Xmx512m"]


def test_a_second_up_on_a_running_cluster_is_refused(cluster: Cluster) -> None:
    result = sofakafka("cluster", "up", "--brokers", str(BROKERS), "--dir", str(cluster.directory),
                       "--base-port", str(cluster.base_port), "--zk-port", str(cluster.zk_port))
    assert result.returncode == 1
    assert "already running" in result.stderr
    assert all(r.alive() for r in cluster.processes())


def test_every_broker_sees_the_cluster_and_rf3_leaders_spread(cluster: Cluster) -> None:
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    with KafkaClient(cluster.bootstrap(2)) as client:
        result = client.create_topics([NewTopic(topic, 6, 3)])[topic]
        assert result.error == ErrorCode.NONE, result
        for broker_id in range(1, BROKERS + 1):
            with KafkaClient(cluster.bootstrap(broker_id)) as each:
                meta = each.metadata([topic])
                assert sorted(meta.brokers) == [1, 2, 3]
                # Each broker is advertised to clients at its EXTERNAL (client) port.
                assert {b.node_id: b.port for b in meta.brokers.values()} == \
                       {i: cluster.base_port + i - 1 for i in range(1, BROKERS + 1)}
        partitions = client.metadata([topic]).topics[topic].partitions
        assert len(partitions) == 6
        assert all(len(p.replicas) == 3 for p in partitions.values())
        leaders = sorted(p.leader for p in partitions.values())
        assert leaders == [1, 1, 2, 2, 3, 3]


def _records(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


@pytest.mark.parametrize("producer_broker", [1, 2, 3])
def test_kafka_python_through_any_bootstrap(cluster: Cluster, producer_broker: int) -> None:
    topic = f"kp-{producer_broker}-{uuid.uuid4().hex[:8]}"
    with KafkaClient(cluster.bootstrap(1)) as client:
        assert client.create_topics([NewTopic(topic, 1, 3)])[topic].error == ErrorCode.NONE
    sent = _records(20, topic)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(producer_broker), acks="all",
                             request_timeout_ms=30000)
    try:
        metas = [producer.send(topic, value).get(timeout=60) for value in sent]
    finally:
        producer.close(timeout=10)
    assert [m.offset for m in metas] == list(range(len(sent)))
    consumer_broker = producer_broker % BROKERS + 1  # a different broker bootstraps the reader
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(consumer_broker), group_id=None,
                             auto_offset_reset="earliest", consumer_timeout_ms=20000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got = []
        for message in consumer:
            got.append((message.offset, message.value))
            if len(got) == len(sent):
                break
    finally:
        consumer.close()
    assert got == list(enumerate(sent))


@pytest.mark.parametrize("producer_broker", [1, 2, 3])
def test_confluent_kafka_through_any_bootstrap_with_a_group(cluster: Cluster, producer_broker: int) -> None:
    topic = f"ck-{producer_broker}-{uuid.uuid4().hex[:8]}"
    with KafkaClient(cluster.bootstrap(1)) as client:
        assert client.create_topics([NewTopic(topic, 3, 3)])[topic].error == ErrorCode.NONE
    sent = set(_records(30, topic))
    acked: list[bytes] = []
    errors: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.value())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": cluster.bootstrap(producer_broker), "acks": "all",
                         "enable.idempotence": True})
    for value in sorted(sent):
        producer.produce(topic, value, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert not errors and set(acked) == sent
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(producer_broker % BROKERS + 1),
                         "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    got: set[bytes] = set()
    try:
        consumer.subscribe([topic])
        for _ in range(120):
            if got == sent:
                break
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.add(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == sent


@pytest.mark.parametrize("producer_broker", [1, 2, 3])
def test_kcat_through_any_bootstrap(cluster: Cluster, producer_broker: int) -> None:
    topic = f"kcat-{producer_broker}-{uuid.uuid4().hex[:8]}"
    with KafkaClient(cluster.bootstrap(1)) as client:
        assert client.create_topics([NewTopic(topic, 1, 3)])[topic].error == ErrorCode.NONE
    lines = [f"line-{i}" for i in range(10)]
    produced = subprocess.run(
        ["kcat", "-P", "-b", cluster.bootstrap(producer_broker), "-t", topic, "-p", "0",
         "-X", "topic.request.required.acks=-1"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-C", "-b", cluster.bootstrap(producer_broker % BROKERS + 1), "-t", topic, "-p", "0",
         "-o", "beginning", "-e", "-f", "%o %s\\n"],
        capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]


def test_down_stops_every_process(cluster: Cluster) -> None:
    # Last in the module: the cluster fixture's other users are done with it.
    records = cluster.processes()
    assert len(records) == BROKERS + 1 and all(r.alive() for r in records)
    result = sofakafka("cluster", "down", "--dir", str(cluster.directory))
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(line.split(":")[0] for line in result.stdout.splitlines()) == \
           ["broker-1", "broker-2", "broker-3", "zookeeper"]
    assert all(": stopped" in line for line in result.stdout.splitlines()), result.stdout
    assert not any(r.alive() for r in records)
    assert not any(Path(f"/proc/{r.pid}").exists() and r.alive() for r in records)
    assert not (cluster.directory / "cluster.json").exists()
    # Every port is free again.
    ports = [cluster.zk_port, *cl.broker_ports(cluster.base_port, BROKERS)]
    assert all(_free(p) for p in ports)
    status = sofakafka("cluster", "status", "--dir", str(cluster.directory))
    assert status.returncode == 1 and "no cluster" in status.stderr


def test_bad_arguments_start_nothing(tmp_path: Path) -> None:
    base, zk = free_port_block()
    racks = sofakafka("cluster", "up", "--brokers", "3", "--dir", str(tmp_path / "a"), "--base-port", str(base),
                      "--zk-port", str(zk), "--rack", "r1,r2")
    assert racks.returncode == 1 and "2 racks for 3 brokers" in racks.stderr
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", base + 1))
        busy = sofakafka("cluster", "up", "--brokers", "3", "--dir", str(tmp_path / "b"), "--base-port",
                         str(base), "--zk-port", str(zk))
    assert busy.returncode == 1 and f"ports already in use: [{base + 1}]" in busy.stderr
    assert not (tmp_path / "b" / "zookeeper").exists()
    for heap, refused in (("63", True), ("64", False)):
        result = sofakafka("cluster", "up", "--brokers", "3", "--dir", str(tmp_path / f"h{heap}"), "--base-port",
                           str(base), "--zk-port", str(zk), "--zk-heap-mb", heap, "--rack", "r1")
        assert result.returncode == 1
        # 63 is refused by name before anything else; 64 passes that check and stops at the racks.
        assert ("--zk-heap-mb must be at least 64" in result.stderr) is refused, result.stderr
        assert ("1 racks for 3 brokers" in result.stderr) is not refused, result.stderr
        assert not (tmp_path / f"h{heap}" / "zookeeper").exists()


def test_rack_and_overrides_reach_every_broker() -> None:
    props = cl.broker_properties(2, 3, cl.loopback_address(2, 40000), zookeeper_connect="127.0.0.1:1/c",
                                 log_dir="/d", rack="r2", overrides={"min.insync.replicas": "3"})
    assert props["broker.rack"] == "r2"
    assert props["min.insync.replicas"] == "3"
    assert props["listeners"] == "INTERNAL://127.0.0.1:40101,EXTERNAL://127.0.0.1:40001"
    assert props["inter.broker.listener.name"] == "INTERNAL"
    one = cl.broker_properties(1, 1, cl.loopback_address(1, 40000), zookeeper_connect="z:1", log_dir="/d")
    assert (one["default.replication.factor"], one["min.insync.replicas"],
            one["offsets.topic.replication.factor"]) == ("1", "1", "1")


def test_zookeeper_grants_the_brokers_session_past_twenty_ticks(tmp_path: Path) -> None:
    """With 500 ms ticks ZooKeeper grants at most 10 s unless its zoo.cfg says more; `up` says what the brokers
    ask for (here Kafka's default, 18 s), and a client asking 18 s gets 18 s (``cons`` shows ``to=``)."""
    from kazoo.client import KazooClient

    _, zk_port = free_port_block()
    for asked, granted in ((18_000, "to=18000"), (None, "to=10000")):
        directory = tmp_path / f"zk-{asked}"
        record = cl.start_zookeeper(directory, zk_port, time.monotonic() + 60, tick_ms=500, session_timeout_ms=asked)
        client = KazooClient(hosts=f"127.0.0.1:{zk_port}", timeout=18.0)
        try:
            client.start(timeout=30)
            assert granted in cl.four_letter_word(zk_port, "cons")
        finally:
            client.stop()
            client.close()
            cl.stop_processes([record])
