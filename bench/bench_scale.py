"""One broker at scale: partitions per broker and idle connections, measured as a user would.

For each partition count asked for (default 1,000 and 10,000), a fresh broker (``python -m sofakafka serve``,
embedded metadata store, a temporary ``log.dirs``) gets, one after the other:

1. **create**: topics of ``--partitions-per-topic`` partitions (replication factor 1) created with CreateTopics
   until every partition is created; time from the first request to the last answer, then until Metadata
   names a leader for every partition.
2. **one record into every partition** (one Produce request per topic), so every partition has written a
   segment, as a live broker's would.
3. **open files**: entries of ``/proc/<pid>/fd`` of the broker process, after 1 and 2.
4. **metadata**: a Metadata request for all topics, and one for a single topic, ``--metadata-samples``
   times each: p50 and max.
5. **produce and fetch latency with idle connections**: ``--samples`` produce requests (acks=1, one 100-byte
   record) and as many fetches, one at a time, from a client on its own connection: first with no other
   connection, then with ``--idle-connections`` more connections open and idle (each has sent an
   ApiVersions, as a client does when it connects, and then nothing), in the same run. p50, p99 and max.
6. **recovery after kill -9**: the broker is killed with SIGKILL and started again on the same data; time
   from the start until it listens, and until Metadata names a leader for every partition and a produce to
   the last partition succeeds. Open files again after that.

With ``--brokers N`` (N > 1) the same partition counts go to a cluster of N brokers on one ZooKeeper
(``sofakafka cluster up``, in a temporary directory), replication factor ``--replication-factor`` (default
min(3, N)), ``--session-timeout-ms`` for the brokers' ZooKeeper sessions:

1. **create** as above, until Metadata names a live leader for every partition and every replica is in its ISR.
2. **one record into every partition** (one Produce request per topic and leader); ``--no-produce`` skips it.
3. **metadata** from broker 1, all topics and one topic, as above.
4. **kill -9 of a broker that is not the controller**: time until Metadata (from the others) names a live
   leader for every partition again (this includes the ZooKeeper session timeout, the time ZooKeeper takes to
   notice) and until the killed broker has left every ISR.
5. **its restart** on the same data: time until it listens, and until it is back in the ISR of every
   partition it is a replica of.

Open files and RSS are the largest of the brokers'. Idle connections and produce/fetch latency are measured
in single-broker runs only.

Every wait has a deadline. The broker's stderr goes to ``<dir>/broker-<n>.log``; processes are killed and
directories removed at the end, also on Ctrl-C. Needs an open-file limit above ``--idle-connections`` for
this process and the broker (both raise their soft limit to the hard one). Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_scale.py [--partitions 1000,10000] [--idle-connections 10000]
    PYTHONPATH=. .venv/bin/python bench/bench_scale.py --brokers 3 --partitions 10000,100000 --idle-connections 0
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from sofakafka.cli import cluster as cl
from sofakafka.client.client import KafkaClient, NewTopic
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest
from sofakafka.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sofakafka.protocol.messages.produce import ProduceRequest, ProduceResponse
from sofakafka.protocol.records import Record, RecordBatchBuilder
from sofakafka.storage.log_manager import mappings_needed

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def ensure_map_count(per_broker: int) -> tuple[str, int | None]:
    """Every partition a broker holds with records keeps its two indexes mapped, and past ``vm.max_map_count``
    (65,530 by default) its appends fail with ENOMEM and take the log dir offline, as Kafka's would. A run that
    needs more raises the setting when it may (root), like Kafka's operations guide says to; otherwise it stops
    before starting anything. Returns what to say and the value to set back at the end (None: unchanged)."""
    path = Path("/proc/sys/vm/max_map_count")
    current = int(path.read_text())
    needed = mappings_needed(per_broker)
    if current >= needed:
        return f"vm.max_map_count {current}", None
    wanted = max(262_144, 2 * needed)
    try:
        path.write_text(str(wanted))
    except OSError as exc:
        raise SystemExit(f"{per_broker:,} partitions per broker need about {needed:,} memory mappings, over "
                         f"vm.max_map_count {current}; raise it (sysctl -w vm.max_map_count={wanted}): {exc}") from exc
    return (f"vm.max_map_count raised from {current} to {wanted} for {per_broker:,} partitions per broker (set back "
            f"at the end)", current)


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def wait_for(what: str, condition: Callable[[], bool], deadline_s: float, interval: float = 0.05) -> float:
    """Seconds until ``condition()`` held; raises after ``deadline_s``."""
    start = time.monotonic()
    last: BaseException | None = None
    while True:
        try:
            if condition():
                return time.monotonic() - start
        except (OSError, TimeoutError, RuntimeError) as exc:
            last = exc
        else:
            last = None
        if time.monotonic() - start > deadline_s:
            raise SystemExit(f"timed out after {deadline_s:.0f} s waiting for {what} (last error: {last})")
        time.sleep(interval)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


class Broker:
    def __init__(self, data: Path, port: int, log_path: Path, overrides: list[str]) -> None:
        self.data, self.port, self.log_path, self.overrides = data, port, log_path, overrides
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        command = [
            sys.executable, "-m", "sofakafka", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data}",
            "--override", "broker.id=0",
            "--override", "offsets.topic.replication.factor=1",
            "--override", "transaction.state.log.replication.factor=1",
            *[x for kv in self.overrides for x in ("--override", kv)],
        ]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        out = open(self.log_path, "ab")  # the child keeps its own copy of the descriptor
        start = time.monotonic()
        self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        out.close()
        wait_for("the broker to listen", self._listening, 600)
        return time.monotonic() - start

    def _listening(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise SystemExit(f"broker exited with {self.process.returncode}; see {self.log_path}")
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)


def topic_names(partitions: int, per_topic: int) -> list[tuple[str, int]]:
    names = []
    left, i = partitions, 0
    while left > 0:
        n = min(per_topic, left)
        names.append((f"scale-{i:04d}", n))
        left -= n
        i += 1
    return names


def all_led(client: KafkaClient, topics: list[tuple[str, int]], *, live: set[int] | None = None,
            full_isr: bool = False, not_in_isr: int | None = None) -> bool:
    """Every partition of ``topics`` has a leader (one of ``live`` when given); with ``full_isr`` every replica
    is in the ISR; with ``not_in_isr`` that broker is in no ISR."""
    md = client.metadata([t for t, _ in topics])
    for name, n in topics:
        info = md.topics.get(name)
        if info is None or len(info.partitions) != n:
            return False
        for p in info.partitions.values():
            if p.leader < 0 or (live is not None and p.leader not in live):
                return False
            if full_isr and set(p.isr) != set(p.replicas):
                return False
            if not_in_isr is not None and not_in_isr in p.isr:
                return False
    return True


def one_record_batch(value: bytes) -> bytes:
    b = RecordBatchBuilder()
    b.append_record(0, int(time.time() * 1000), None, value)
    return b.build()


def produce_everywhere(client: KafkaClient, topics: list[tuple[str, int]]) -> None:
    """One record into every partition: one Produce request per topic and leader."""
    records = one_record_batch(b"x" * 100)
    md = client.metadata([t for t, _ in topics])
    for name, _ in topics:
        by_leader: dict[int, list[int]] = {}
        for p in md.topics[name].partitions.values():
            by_leader.setdefault(p.leader, []).append(p.partition)
        for leader, partitions in sorted(by_leader.items()):
            request = ProduceRequest(acks=1, timeout_ms=30_000, transactional_id=None, topics=[
                ProduceRequest.TopicProduceData(name=name, partitions=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(partition_index=p, records=records)
                    for p in sorted(partitions)])])
            response = client.send(request, node_id=leader)
            assert isinstance(response, ProduceResponse)
            bad = [p for t in response.responses for p in t.partitions if p.error_code != 0]
            if bad:
                raise SystemExit(f"produce to {name} on broker {leader}: {len(bad)} partitions failed, "
                                 f"e.g. error {bad[0].error_code}")


def time_metadata(client: KafkaClient, topics: list[str] | None, samples: int, node_id: int = 0) -> list[float]:
    """Round trips of a Metadata request, until the last byte of the answer is in: the broker's time and the
    bytes', not this client's decoding of 10,000 partitions."""
    conn = client.connection(node_id)
    version = client.version(conn, ApiKey.METADATA)
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    request = MetadataRequest(topics=wanted, allow_auto_topic_creation=False)
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        conn._round_trip(request, version, conn._deadline(None))
        out.append((time.perf_counter() - t0) * 1000)
    response = conn.send(request, version)  # answered and decodable
    assert isinstance(response, MetadataResponse) and all(t.error_code == 0 for t in response.topics)
    return out


def time_produce_fetch(client: KafkaClient, topic: str, samples: int) -> tuple[list[float], list[float]]:
    record = [Record(offset=0, timestamp=0, key=None, value=b"y" * 100)]
    produce_ms, fetch_ms = [], []
    for _ in range(samples):
        t0 = time.perf_counter()
        result = client.produce(topic, 0, record, acks=1)
        produce_ms.append((time.perf_counter() - t0) * 1000)
        assert result is not None
        t0 = time.perf_counter()
        client.fetch(topic, 0, result.base_offset, max_wait_ms=0)
        fetch_ms.append((time.perf_counter() - t0) * 1000)
    return produce_ms, fetch_ms


@contextmanager
def idle_connections(port: int, count: int, deadline_s: float = 300) -> Iterator[list[socket.socket]]:
    """``count`` connections that each send one ApiVersions v0, read its answer, then stay idle."""
    header = bytearray()
    request = ApiVersionsRequest()
    from sofakafka.protocol.headers import RequestHeader

    RequestHeader(request_api_key=ApiKey.API_VERSIONS, request_api_version=0, correlation_id=1,
                  client_id="idle").encode_into(header, 1)
    request.encode_into(header, 0)
    frame = len(header).to_bytes(4, "big") + bytes(header)
    socks: list[socket.socket] = []
    start = time.monotonic()
    try:
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            socks.append(s)
            s.sendall(frame)
            size = int.from_bytes(_recv_exactly(s, 4), "big")
            _recv_exactly(s, size)
            if time.monotonic() - start > deadline_s:
                raise SystemExit(f"only {len(socks)} idle connections opened in {deadline_s} s")
        yield socks
    finally:
        for s in socks:
            with suppress(OSError):
                s.close()


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def fmt(values: list[float]) -> str:
    return f"p50 {statistics.median(values):7.2f}  p99 {percentile(values, 0.99):7.2f}  max {max(values):7.2f} ms"


def run_one(root: Path, partitions: int, args: argparse.Namespace, overrides: list[str]) -> dict[str, str]:
    data = root / f"data-{partitions}"
    port = free_port()
    broker = Broker(data, port, root / f"broker-{partitions}.log", overrides)
    topics = topic_names(partitions, args.partitions_per_topic)
    row: dict[str, str] = {"partitions": f"{partitions:,}"}
    print(f"\n== {partitions:,} partitions in {len(topics)} topics (broker log: {broker.log_path})")
    try:
        startup_s = broker.start()
        fds_empty = open_files(broker.pid)
        print(f"started in {startup_s:.1f} s; open files {fds_empty}")
        client = KafkaClient(f"127.0.0.1:{port}", request_timeout_ms=600_000)
        t0 = time.monotonic()
        for name, n in topics:
            result = client.create_topics([NewTopic(name, n, 1)], timeout_ms=600_000)[name]
            if result.error != 0:
                raise SystemExit(f"create {name}: {result.error.name} {result.error_message}")
        create_s = time.monotonic() - t0
        led_s = create_s + wait_for("leaders for every partition", lambda: all_led(client, topics), 600, 0.5)
        fds_created = open_files(broker.pid)
        print(f"create: answered after {create_s:.1f} s, all led after {led_s:.1f} s; open files {fds_created}")
        t0 = time.monotonic()
        produce_everywhere(client, topics)
        produce_all_s = time.monotonic() - t0
        fds_written = open_files(broker.pid)
        print(f"one record into each partition: {produce_all_s:.1f} s; open files {fds_written}, "
              f"rss {rss_mb(broker.pid):.0f} MB")
        md_all = time_metadata(client, None, args.metadata_samples)
        md_one = time_metadata(client, [topics[0][0]], args.metadata_samples)
        print(f"metadata, all topics:   {fmt(md_all)}")
        print(f"metadata, one topic:    {fmt(md_one)}")
        latency_topic = topics[-1][0]
        time_produce_fetch(client, latency_topic, 50)  # warm-up
        p_none, f_none = time_produce_fetch(client, latency_topic, args.samples)
        print(f"produce, no other connections:  {fmt(p_none)}")
        print(f"fetch,   no other connections:  {fmt(f_none)}")
        row.update({
            "fds_created": str(fds_created), "fds_written": str(fds_written), "create_s": f"{create_s:.1f}",
            "produce_all_s": f"{produce_all_s:.1f}",
            "led_s": f"{led_s:.1f}", "md_all": f"{statistics.median(md_all):.1f}",
            "md_one": f"{statistics.median(md_one):.2f}",
            "produce_none": f"{statistics.median(p_none):.2f} / {percentile(p_none, 0.99):.2f}",
            "fetch_none": f"{statistics.median(f_none):.2f} / {percentile(f_none, 0.99):.2f}",
        })
        if args.idle_connections:
            t0 = time.monotonic()
            with idle_connections(port, args.idle_connections) as socks:
                opened_s = time.monotonic() - t0
                fds_idle = open_files(broker.pid)
                print(f"{len(socks):,} idle connections opened in {opened_s:.1f} s; broker open files "
                      f"{fds_idle}, rss {rss_mb(broker.pid):.0f} MB")
                p_idle, f_idle = time_produce_fetch(client, latency_topic, args.samples)
                print(f"produce, {len(socks):,} idle connections: {fmt(p_idle)}")
                print(f"fetch,   {len(socks):,} idle connections: {fmt(f_idle)}")
                md_idle = time_metadata(client, [topics[0][0]], args.metadata_samples)
                print(f"metadata one topic, idle conns:  {fmt(md_idle)}")
                alive = sum(1 for s in socks if _still_open(s))
                print(f"idle connections still open at the end: {alive:,}")
            row.update({
                "fds_idle": str(fds_idle),
                "produce_idle": f"{statistics.median(p_idle):.2f} / {percentile(p_idle, 0.99):.2f}",
                "fetch_idle": f"{statistics.median(f_idle):.2f} / {percentile(f_idle, 0.99):.2f}",
            })
        client.close()
        broker.kill9()
        t0 = time.monotonic()
        listen_s = broker.start()
        client = KafkaClient(f"127.0.0.1:{port}", request_timeout_ms=600_000)
        wait_for("leaders after the restart", lambda: all_led(client, topics), 900, 0.5)
        client.produce(topics[-1][0], topics[-1][1] - 1, [Record(offset=0, timestamp=0, key=None, value=b"z")])
        recovered_s = time.monotonic() - t0
        fds_recovered = open_files(broker.pid)
        print(f"kill -9 and restart: listening after {listen_s:.1f} s, all led and producing after "
              f"{recovered_s:.1f} s; open files {fds_recovered}")
        row.update({"recovery_listen_s": f"{listen_s:.1f}", "recovery_s": f"{recovered_s:.1f}",
                    "fds_recovered": str(fds_recovered)})
        client.close()
    finally:
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)
    return row


def free_port_block(brokers: int) -> tuple[int, int]:
    """A base port whose client, inter-broker and metrics blocks are free, and a ZooKeeper port."""
    for _ in range(200):
        # Below Linux's ephemeral range (32768+), where client sockets could take a port between check and bind.
        base = random.randrange(20000, 32768 - cl.METRICS_PORT_OFFSET - brokers - 1)
        wanted = [p for b in range(1, brokers + 1) for p in (base + b - 1, base + cl.INTERNAL_PORT_OFFSET + b - 1,
                                                              base + cl.METRICS_PORT_OFFSET + b - 1)]
        if all(cl._port_free("127.0.0.1", p) for p in [*wanted, base + 200]):
            return base, base + 200
    raise SystemExit("no free port block")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def run_cluster(root: Path, partitions: int, args: argparse.Namespace, overrides: list[str]) -> dict[str, str]:
    """One partition count on a fresh cluster of ``args.brokers`` brokers (module docstring)."""
    directory = root / f"cluster-{partitions}"
    base, zk_port = free_port_block(args.brokers)
    rf = args.replication_factor or min(3, args.brokers)
    topics = topic_names(partitions, args.partitions_per_topic)
    deadline = args.deadline_s
    row: dict[str, str] = {"partitions": f"{partitions:,}", "brokers": str(args.brokers), "rf": str(rf)}
    extra = dict(kv.split("=", 1) for kv in overrides)
    # ZooKeeper holds two znodes and a watch per broker for each partition: Kafka's 512 MB heap up to 50,000,
    # then 1 MB per 100 partitions (100,000: 1,000 MB; 256 MB was a stop-the-world collection after another).
    zk_heap_mb = max(cl.ZK_HEAP_MB, partitions // 100)
    print(f"ZooKeeper heap {zk_heap_mb} MB", flush=True)
    spec = cl.ClusterSpec(args.brokers, directory, base, zk_port, zk_tick_ms=500, zk_heap_mb=zk_heap_mb, overrides={
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms), **extra})
    print(f"\n== {partitions:,} partitions in {len(topics)} topics, {args.brokers} brokers, RF {rf} "
          f"(cluster in {directory})", flush=True)
    state = None
    try:
        state = cl.up(spec, deadline_s=300)
        ids = sorted(state.brokers)

        def pids() -> dict[int, int]:
            processes = cl.ClusterState.load(directory.resolve()).processes
            return {i: next(p.pid for p in processes if p.name == f"broker-{i}") for i in ids}

        def fds_and_rss() -> tuple[int, float]:
            alive = [pid for pid in pids().values() if Path(f"/proc/{pid}").exists()]
            return max(open_files(pid) for pid in alive), max(rss_mb(pid) for pid in alive)

        client = KafkaClient(state.bootstrap_servers, request_timeout_ms=600_000)
        t0 = time.monotonic()
        for name, n in topics:
            result = client.create_topics([NewTopic(name, n, rf)], timeout_ms=600_000)[name]
            if result.error != 0:
                raise SystemExit(f"create {name}: {result.error.name} {result.error_message}")
        create_s = time.monotonic() - t0
        led_s = create_s + wait_for("leaders for every partition", lambda: all_led(client, topics), deadline, 0.5)
        isr_s = create_s + wait_for("every replica in its ISR", lambda: all_led(client, topics, full_isr=True),
                                    deadline, 0.5)
        fds, rss = fds_and_rss()
        print(f"create: answered after {create_s:.1f} s, all led after {led_s:.1f} s, full ISRs after {isr_s:.1f} s; "
              f"open files (largest broker) {fds}, rss {rss:.0f} MB", flush=True)
        row.update({"create_s": f"{create_s:.1f}", "led_s": f"{led_s:.1f}", "isr_s": f"{isr_s:.1f}",
                    "fds_created": str(fds)})
        if not args.no_produce:
            t0 = time.monotonic()
            produce_everywhere(client, topics)
            produce_all_s = time.monotonic() - t0
            wait_for("every replica in its ISR after the writes", lambda: all_led(client, topics, full_isr=True),
                     deadline, 0.5)
            fds, rss = fds_and_rss()
            print(f"one record into each partition: {produce_all_s:.1f} s; open files {fds}, rss {rss:.0f} MB",
                  flush=True)
            row.update({"produce_all_s": f"{produce_all_s:.1f}", "fds_written": str(fds)})
        md_all = time_metadata(client, None, args.metadata_samples, node_id=ids[0])
        md_one = time_metadata(client, [topics[0][0]], args.metadata_samples, node_id=ids[0])
        print(f"metadata, all topics:   {fmt(md_all)}")
        print(f"metadata, one topic:    {fmt(md_one)}", flush=True)
        row.update({"md_all": f"{statistics.median(md_all):.1f}", "md_one": f"{statistics.median(md_one):.2f}"})
        controller = client.metadata([]).controller_id
        victim = max(i for i in ids if i != controller)
        others = set(ids) - {victim}
        led_by_victim = sum(1 for name, _ in topics for p in client.metadata([name]).topics[name].partitions.values()
                            if p.leader == victim)
        client.close()
        client = KafkaClient(",".join(f"127.0.0.1:{state.brokers[i].external_port}" for i in sorted(others)),
                             request_timeout_ms=600_000)
        victim_pid = pids()[victim]
        t0 = time.monotonic()
        os.kill(victim_pid, signal.SIGKILL)
        moved_s = wait_for("leaders on the surviving brokers", lambda: all_led(client, topics, live=others),
                           deadline, 0.5)
        left_isr_s = moved_s + wait_for("the killed broker out of every ISR",
                                        lambda: all_led(client, topics, live=others, not_in_isr=victim), deadline, 0.5)
        print(f"kill -9 of broker {victim} (led {led_by_victim:,}; controller {controller}; session timeout "
              f"{args.session_timeout_ms} ms): every partition led by a live broker after {moved_s:.1f} s, "
              f"out of every ISR after {left_isr_s:.1f} s", flush=True)
        t0 = time.monotonic()
        cl.restart_broker(directory, victim)
        victim_port = state.brokers[victim].external_port
        listen_s = wait_for("the restarted broker to listen", lambda: _listening(victim_port), deadline, 0.2)
        back_s = listen_s + wait_for("the restarted broker back in every ISR",
                                     lambda: all_led(client, topics, full_isr=True), deadline, 0.5)
        fds, rss = fds_and_rss()
        print(f"restart of broker {victim}: listening after {listen_s:.1f} s, back in every ISR after {back_s:.1f} s; "
              f"open files {fds}, rss {rss:.0f} MB", flush=True)
        row.update({"led_by_victim": f"{led_by_victim:,}", "failover_s": f"{moved_s:.1f}",
                    "isr_shrunk_s": f"{left_isr_s:.1f}", "restart_listen_s": f"{listen_s:.1f}",
                    "restart_isr_s": f"{back_s:.1f}", "fds_end": str(fds), "rss_end": f"{rss:.0f}"})
        client.close()
    finally:
        if state is not None or (directory / "cluster.json").exists():
            with suppress(cl.LauncherError):
                cl.down(directory)
        shutil.rmtree(directory, ignore_errors=True)
    return row


def _still_open(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def keep_logs(root: Path) -> None:
    """A failed run's data goes (it can be tens of GB), but its brokers' and ZooKeeper's logs are what says why:
    they are copied beside it first."""
    kept = root.with_name(root.name + "-logs")
    for path in [*root.glob("*/*/broker.log"), *root.glob("*/*/zookeeper.log"), *root.glob("broker-*.log")]:
        target = kept / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    print(f"the run failed: its logs are in {kept}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", default="1000,10000", help="comma-separated partition counts")
    parser.add_argument("--partitions-per-topic", type=int, default=1000)
    parser.add_argument("--idle-connections", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=1000, help="produce and fetch requests timed per case")
    parser.add_argument("--metadata-samples", type=int, default=20)
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="extra broker override (repeatable)")
    parser.add_argument("--dir", default=None, help="where to put the brokers' data (default: a temp dir)")
    parser.add_argument("--brokers", type=int, default=1,
                        help="1: one broker, embedded metadata store; more: a ZooKeeper cluster (`sofakafka cluster up`)")
    parser.add_argument("--replication-factor", type=int, default=0, help="cluster runs: default min(3, brokers)")
    parser.add_argument("--session-timeout-ms", type=int, default=6000, help="cluster runs: zookeeper.session.timeout.ms")
    parser.add_argument("--no-produce", action="store_true", help="cluster runs: skip the record into every partition")
    parser.add_argument("--deadline-s", type=float, default=3600, help="cluster runs: the deadline of each wait")
    args = parser.parse_args()
    limit = raise_nofile()
    if limit < args.idle_connections + 100:
        raise SystemExit(f"open-file limit {limit} is too low for {args.idle_connections} idle connections")
    counts = [int(x) for x in args.partitions.split(",") if x]
    rf = args.replication_factor or min(3, args.brokers)
    per_broker = max(counts, default=0) * (rf if args.brokers > 1 else 1) // max(args.brokers, 1)
    maps, restore_map_count = ensure_map_count(per_broker)
    root = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=args.dir))
    print(maps)
    print(f"machine: {os.cpu_count()} cpus, {platform.platform()}, Python {platform.python_version()}; "
          f"open-file limit {limit}; data in {root}")
    rows = []
    try:
        for n in counts:
            if args.brokers > 1:
                rows.append(run_cluster(root, n, args, args.override))
            else:
                rows.append(run_one(root, n, args, args.override))
    except BaseException:
        keep_logs(root)
        raise
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if restore_map_count is not None:
            Path("/proc/sys/vm/max_map_count").write_text(str(restore_map_count))
    if args.brokers > 1:
        keys = ["partitions", "brokers", "rf", "fds_created", "fds_written", "create_s", "led_s", "isr_s",
                "produce_all_s", "md_all", "md_one", "led_by_victim", "failover_s", "isr_shrunk_s",
                "restart_listen_s", "restart_isr_s", "fds_end", "rss_end"]
    else:
        keys = ["partitions", "fds_created", "fds_written", "fds_idle", "fds_recovered", "create_s", "led_s",
                "produce_all_s", "md_all", "md_one", "produce_none", "produce_idle", "fetch_none", "fetch_idle",
                "recovery_listen_s", "recovery_s"]
    print("\nsummary (latencies p50 / p99 ms; metadata p50 ms):")
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(row.get(k, "-") for k in keys))


if __name__ == "__main__":
    main()
