"""Followers replicate through incremental fetch sessions (KIP-227), seen on the wire.

Broker 0 leads every partition and advertises a recording TCP proxy in front of its real listener, so every
follower's Fetch to it, and the answer, passes through the proxy and is decoded with our codec. The proxy only
watches: bytes are forwarded as they are. What must hold, with real ZooKeeper and real broker processes:

* a follower opens a session with one full fetch, then sends incremental fetches of the same session with
  consecutive epochs;
* while nothing is produced, those requests and the leader's answers carry no partitions, and yet the ISR
  stays whole well past ``replica.lag.time.max.ms`` (the leader still counts the follower as caught up on every
  partition of the session), which is what the ISR and the high watermark depend on;
* records produced to one partition travel alone: only that partition is answered and sent again, the high
  watermark moves, replicas stay byte-identical;
* a follower killed and restarted opens a new session, catches up and rejoins every ISR.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Producer as CKProducer
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KPTopicPartition
from kafka.admin import NewTopic

from sofakafka.protocol.api import ApiKey, decode_request, decode_response
from sofakafka.protocol.messages.fetch import FetchRequest, FetchResponse
from tests.cluster.test_replication import Cluster, make_cluster  # noqa: F401  (make_cluster is a fixture)

TOPIC = "sessions"
PARTITIONS = 4
LAG_MS = 4000


@dataclass
class Exchange:
    """One follower Fetch through the proxy and, once it came back, its response."""

    replica_id: int
    sent_at: float
    session_id: int
    epoch: int
    sent: dict[tuple[str, int], int]  # partition -> fetch offset
    forgotten: list[tuple[str, int]]
    answered_at: float = 0.0
    answered_session_id: int | None = None
    error_code: int | None = None
    answered: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)  # -> (record bytes, HW)

    @property
    def full(self) -> bool:
        return self.epoch in (0, -1)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    return _read_exactly(sock, int.from_bytes(head, "big", signed=True))


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class FetchRecorder:
    """A TCP proxy that decodes replica fetchers' Fetch requests and responses on their way through."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._target: int | None = None
        self._target_known = threading.Event()
        self._lock = threading.Lock()
        self._exchanges: list[Exchange] = []
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._spawn(self._accept)

    def forward_to(self, port: int) -> None:
        self._target = port
        self._target_known.set()

    def exchanges(self, replica_id: int | None = None, since: float = 0.0) -> list[Exchange]:
        with self._lock:
            return [e for e in self._exchanges if (replica_id is None or e.replica_id == replica_id)
                    and e.error_code is not None and e.answered_at >= since]

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name="fetch-recorder")
        self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self._target_known.wait(60)
            try:
                upstream = socket.create_connection(("127.0.0.1", self._target or 0), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            pending: dict[int, tuple[int, Exchange]] = {}
            self._spawn(self._requests, client, upstream, pending)
            self._spawn(self._responses, upstream, client, pending)

    def _requests(self, src: socket.socket, dst: socket.socket, pending: dict[int, tuple[int, Exchange]]) -> None:
        try:
            while (frame := _read_frame(src)) is not None:
                header, body = decode_request(frame)
                if isinstance(body, FetchRequest) and body.replica_id >= 0:
                    exchange = Exchange(
                        body.replica_id, time.monotonic(), body.session_id, body.epoch,
                        {(t.name, p.partition_index): p.fetch_offset for t in body.topics for p in t.fetch_partitions},
                        [(f.name, i) for f in body.forgotten for i in f.forgotten_partition_indexes])
                    with self._lock:
                        pending[header.correlation_id] = (header.request_api_version, exchange)
                        self._exchanges.append(exchange)
                dst.sendall(len(frame).to_bytes(4, "big") + frame)
        except OSError:
            pass
        finally:
            _shutdown(dst)

    def _responses(self, src: socket.socket, dst: socket.socket, pending: dict[int, tuple[int, Exchange]]) -> None:
        try:
            while (frame := _read_frame(src)) is not None:
                with self._lock:
                    found = pending.pop(int.from_bytes(frame[:4], "big", signed=True), None)
                if found is not None:
                    version, exchange = found
                    _, body = decode_response(frame, ApiKey.FETCH, version)
                    assert isinstance(body, FetchResponse)
                    with self._lock:
                        exchange.answered = {(t.name, p.partition_index): (len(p.records or b""), p.high_watermark)
                                             for t in body.topics for p in t.partitions}
                        exchange.answered_session_id = body.session_id
                        exchange.answered_at = time.monotonic()
                        exchange.error_code = body.error_code
                dst.sendall(len(frame).to_bytes(4, "big") + frame)
        except OSError:
            pass
        finally:
            _shutdown(dst)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets = list(self._sockets)
        self._target_known.set()
        _shutdown(self._server)
        self._server.close()
        for s in sockets:
            _shutdown(s)
        for t in self._threads:
            t.join(10)
        for s in sockets:
            s.close()


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@pytest.fixture
def recorder() -> Iterator[FetchRecorder]:
    r = FetchRecorder()
    try:
        yield r
    finally:
        r.close()


def _high_watermarks(cluster: Cluster) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    try:
        ends = consumer.end_offsets([KPTopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        return {tp.partition: end for tp, end in ends.items()}
    finally:
        consumer.close()


def _produce(cluster: Cluster, per_partition: dict[int, int], tag: str) -> None:
    # librdkafka rather than kafka-python: one produce happens while a broker is dead, and kafka-python leaks
    # the socket of a refused connection to it.
    producer = CKProducer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    errors: list[object] = []
    for p, count in per_partition.items():
        for n in range(count):
            producer.produce(TOPIC, value=f"{tag}-{p}-{n}".encode(), partition=p,
                             on_delivery=lambda err, _msg: errors.append(err) if err is not None else None)
    assert producer.flush(30) == 0 and not errors, errors


def _assert_one_session_with_consecutive_epochs(exchanges: list[Exchange], partitions: set[tuple[str, int]]) -> int:
    """The first fetch opened a session; every later one continued it, and between them all partitions came."""
    first, rest = exchanges[0], exchanges[1:]
    assert (first.session_id, first.epoch) == (0, 0), first
    assert first.error_code == 0 and first.answered_session_id not in (None, 0), first
    assert set(first.answered) == set(first.sent)  # a full response answers everything asked
    assert {tp for e in exchanges for tp in e.sent} == partitions
    for i, e in enumerate(rest, start=1):
        assert (e.session_id, e.epoch, e.error_code, e.answered_session_id) == (
            first.answered_session_id, i, 0, first.answered_session_id), e
    return int(first.answered_session_id or 0)


def test_followers_replicate_through_incremental_fetch_sessions(
        make_cluster: Callable[..., Cluster], recorder: FetchRecorder) -> None:  # noqa: F811
    cluster = make_cluster({"replica.lag.time.max.ms": str(LAG_MS)},
                           per_broker=lambda i: {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{recorder.port}"}
                           if i == 0 else {})
    recorder.forward_to(cluster.brokers[0].port)
    partitions = {(TOPIC, p) for p in range(PARTITIONS)}
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={
            p: [0, 1 + p % 2, 2 - p % 2] for p in range(PARTITIONS)})], timeout_ms=30000)
    finally:
        admin.close()
    cluster.wait_for("the topic fully in sync", lambda: all(
        cluster.zk.exists(f"/brokers/topics/{TOPIC}/partitions/{p}/state") is not None
        and cluster.isr(TOPIC, p) == [0, 1, 2] for p in range(PARTITIONS)))
    assert all(cluster.leader(TOPIC, p) == 0 for p in range(PARTITIONS))

    _produce(cluster, dict.fromkeys(range(PARTITIONS), 50), "first")
    cluster.wait_for("high watermarks at 50", lambda: _high_watermarks(cluster) == dict.fromkeys(range(PARTITIONS), 50))
    for p in range(PARTITIONS):
        cluster.wait_identical(TOPIC, p, [0, 1, 2])

    # Quiet: followers keep fetching, and nothing travels either way.
    versions = {p: cluster.zk.exists(f"/brokers/topics/{TOPIC}/partitions/{p}/state").version
                for p in range(PARTITIONS)}
    quiet = time.monotonic()

    def quiet_longer_than_the_lag_time(follower: int) -> bool:
        empty = [e for e in recorder.exchanges(follower, since=quiet) if not e.full and not e.sent
                 and not e.forgotten and not e.answered]
        # The leader looks for laggards every LAG_MS / 2: any follower it failed to count would be out by now.
        return bool(empty) and empty[-1].sent_at - quiet > 1.5 * LAG_MS / 1000 + 0.5

    for follower in (1, 2):
        cluster.wait_for(f"follower {follower} fetching with empty incremental requests past the lag time",
                         lambda f=follower: quiet_longer_than_the_lag_time(f))  # type: ignore[misc]
    for follower in (1, 2):
        _assert_one_session_with_consecutive_epochs(recorder.exchanges(follower), partitions)
    # Nobody fell out of (or needed to rejoin) an ISR: the state znodes were not written.
    assert {p: cluster.zk.exists(f"/brokers/topics/{TOPIC}/partitions/{p}/state").version
            for p in range(PARTITIONS)} == versions
    assert all(cluster.isr(TOPIC, p) == [0, 1, 2] for p in range(PARTITIONS))

    # Records to one partition: only it is answered, and only its new offset is sent.
    busy = time.monotonic()
    _produce(cluster, {2: 10}, "second")
    cluster.wait_for("partition 2's high watermark at 60", lambda: _high_watermarks(cluster)[2] == 60)
    for follower in (1, 2):
        cluster.wait_for(f"follower {follower} sending its new offset of partition 2", lambda f=follower: any(
            e.sent.get((TOPIC, 2)) == 60 for e in recorder.exchanges(f, since=busy)))  # type: ignore[misc]
        during = recorder.exchanges(follower, since=busy)
        assert all(not e.full for e in during)
        assert {tp for e in during for tp in e.sent} == {(TOPIC, 2)} and not any(e.forgotten for e in during)
        assert {tp for e in during for tp in e.answered} == {(TOPIC, 2)}
        assert sum(e.answered.get((TOPIC, 2), (0, 0))[0] for e in during) > 0
    cluster.wait_identical(TOPIC, 2, [0, 1, 2])
    assert _high_watermarks(cluster) == {0: 50, 1: 50, 2: 60, 3: 50}

    # A follower killed and restarted: the new process opens a new session, catches up and rejoins every ISR.
    cluster.brokers[2].kill()
    cluster.wait_for("broker 2 out of every ISR", lambda: all(cluster.isr(TOPIC, p) == [0, 1]
                                                               for p in range(PARTITIONS)))
    _produce(cluster, dict.fromkeys(range(PARTITIONS), 20), "third")
    restarted = time.monotonic()
    cluster.restart(2)
    for p in range(PARTITIONS):
        cluster.wait_for(f"broker 2 back in the ISR of {TOPIC}-{p}",
                         lambda p=p: cluster.isr(TOPIC, p) == [0, 1, 2])  # type: ignore[misc]
        cluster.wait_identical(TOPIC, p, [0, 1, 2])
    cluster.wait_for("a few fetches of the new session",
                     lambda: len(recorder.exchanges(2, since=restarted)) >= 3)
    _assert_one_session_with_consecutive_epochs(recorder.exchanges(2, since=restarted), partitions)
    assert _high_watermarks(cluster) == {0: 70, 1: 70, 2: 80, 3: 70}
