"""Replication across three real broker processes coordinated by a real ZooKeeper.

Every test starts brokers 0, 1 and 2 under its own chroot, creates topics with replication factor 3 and
``min.insync.replicas=2`` and drives them with stock clients (kafka-python, confluent-kafka). What is checked is
what a user relies on: acknowledged records are on every in-sync replica byte for byte, survive kill -9 of the
leader at the offsets they were acknowledged at, and a restarted broker truncates, catches up and rejoins the
ISR. Partition state is read from the znodes with kazoo, as an operator's tooling would.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kazoo.client import KazooClient

from sofakafka.client.connection import BrokerConnection
from sofakafka.protocol.api import ApiKey, decode_response, encode_request, size_prefixed
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.headers import RequestHeader
from sofakafka.protocol.messages.fetch import FetchRequest, FetchResponse
from sofakafka.protocol.messages.produce import ProduceRequest, ProduceResponse
from sofakafka.protocol.records import RecordBatchBuilder
from tests.cluster.conftest import ZooKeeperServer, forget_dead_broker_sockets
from tests.integration import wire
from tests.integration.conftest import BrokerProcess

WAIT_S = 60.0
"""A bound on waiting for the cluster to converge, never a timing assertion."""

BROKER_SETTINGS = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    # A frozen follower (still registered) leaves ISRs by this lag instead of Kafka's default 30 s.
    "replica.lag.time.max.ms": "6000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
}


@dataclass
class Cluster:
    brokers: list[BrokerProcess]
    zk: KazooClient
    chroot: str
    topics: list[str] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.alive())

    def state(self, topic: str, partition: int) -> dict[str, object]:
        data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        state: dict[str, object] = json.loads(data)
        return state

    def leader(self, topic: str, partition: int) -> int:
        leader = self.state(topic, partition)["leader"]
        assert isinstance(leader, int)
        return leader

    def isr(self, topic: str, partition: int) -> list[int]:
        isr = self.state(topic, partition)["isr"]
        assert isinstance(isr, list)
        return sorted(int(r) for r in isr)

    def wait_for(self, what: str, predicate: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_S
        while not predicate():
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- broker {i}\n{b.log_tail()}" for i, b in enumerate(self.brokers))
                raise AssertionError(f"timed out waiting for {what}\n{tails}")
            time.sleep(0.2)

    def restart(self, broker: int) -> None:
        """Start a killed broker again once ZooKeeper has expired its old session (its registration would
        otherwise still be there, and a second registration of the same id is refused, as in Kafka)."""
        self.wait_for(f"broker {broker}'s old session to expire",
                      lambda: self.zk.exists(f"/brokers/ids/{broker}") is None)
        self.brokers[broker].start()

    def create_topic(self, name: str, partitions: int = 3) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30000)
        try:
            admin.create_topics([NewTopic(name, partitions, 3)], timeout_ms=30000)
        finally:
            admin.close()
        self.wait_for(f"{name} fully in sync",
                      lambda: all(self._exists(name, p) and self.isr(name, p) == [0, 1, 2] for p in range(partitions)))

    def _exists(self, topic: str, partition: int) -> bool:
        return self.zk.exists(f"/brokers/topics/{topic}/partitions/{partition}/state") is not None

    def log_bytes(self, broker: int, topic: str, partition: int) -> bytes:
        """Every segment of the replica, in offset order: what the byte comparison compares."""
        directory = self.brokers[broker].data_dir / f"{topic}-{partition}"
        if not directory.exists():
            return b""
        return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))

    def wait_identical(self, topic: str, partition: int, brokers: list[int]) -> bytes:
        def same() -> bool:
            contents = {self.log_bytes(b, topic, partition) for b in brokers}
            return len(contents) == 1
        self.wait_for(f"identical replicas of {topic}-{partition} on {brokers}", same)
        return self.log_bytes(brokers[0], topic, partition)


@pytest.fixture
def make_cluster(zk_broker_factory: Callable[..., BrokerProcess], zookeeper: ZooKeeperServer,
                 zk_chroot: str) -> Iterator[Callable[..., Cluster]]:
    clients: list[KazooClient] = []

    def make(extra: dict[str, str] | None = None,
             per_broker: Callable[[int], dict[str, str]] = lambda _i: {}) -> Cluster:
        settings = {**BROKER_SETTINGS, **(extra or {})}

        def unstarted(i: int) -> BrokerProcess:
            return zk_broker_factory({**settings, **per_broker(i), "broker.id": str(i)}, name=f"broker{i}-",
                                     start=False)

        brokers = [unstarted(i) for i in range(3)]
        # Ports are picked before any broker binds one, so two picks may coincide: pick again.
        while len({b.port for b in brokers}) < len(brokers):
            brokers = [unstarted(i) for i in range(3)]
        # Started together: most of a start is waiting for the broker to come up.
        with ThreadPoolExecutor(len(brokers)) as pool:
            list(pool.map(BrokerProcess.start, brokers))
        zk = KazooClient(hosts=zookeeper.hosts + zk_chroot)
        clients.append(zk)
        zk.start(timeout=30)
        c = Cluster(brokers, zk, zk_chroot)
        c.wait_for("three registered brokers", lambda: sorted(zk.get_children("/brokers/ids")) == ["0", "1", "2"])
        return c

    try:
        yield make
    finally:
        for zk in clients:
            zk.stop()
            zk.close()
        forget_dead_broker_sockets()


@pytest.fixture
def cluster(make_cluster: Callable[..., Cluster]) -> Cluster:
    return make_cluster()


def _produce_acks_1(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    builder = RecordBatchBuilder()
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append_record(i, now, None, value)
    request = ProduceRequest(acks=1, timeout_ms=10000, topics=[ProduceRequest.TopicProduceData(
        name=topic, partitions=[ProduceRequest.TopicProduceData.PartitionProduceData(
            partition_index=0, records=builder.build())])])
    with BrokerConnection(broker.host, broker.port, timeout_s=30) as conn:
        response = conn.send(request, 8)
    assert isinstance(response, ProduceResponse)
    assert response.responses[0].partitions[0].error_code == 0


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[tuple[int, int], bytes]:
    """Every record of ``topic`` by (partition, offset), read with kafka-python from the beginning."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        found: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + WAIT_S
        while len(found) < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=1000).items():
                for r in records:
                    found[(tp.partition, r.offset)] = r.value
        return found
    finally:
        consumer.close()


def test_acks_all_through_every_bootstrap_reaches_every_replica_byte_for_byte(cluster: Cluster) -> None:
    topic = "replicated"
    cluster.create_topic(topic)
    acked: dict[tuple[int, int], bytes] = {}
    for i, broker in enumerate(cluster.brokers):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
        futures = [(f"kp-{i}-{n}".encode(), producer.send(topic, value=f"kp-{i}-{n}".encode(), partition=n % 3))
                   for n in range(60)]
        producer.flush(30)
        for value, fut in futures:
            md = fut.get(timeout=30)
            acked[(md.partition, md.offset)] = value
        producer.close()

    delivered: list[tuple[int, int, bytes]] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]

    for broker in cluster.brokers:
        ck = CKProducer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
        for n in range(60):
            ck.produce(topic, value=f"ck-{broker.port}-{n}".encode(), partition=n % 3, on_delivery=on_delivery)
        assert ck.flush(30) == 0
    for partition, offset, value in delivered:
        acked[(partition, offset)] = value
    assert len(acked) == 360

    for p in range(3):
        stored = cluster.wait_identical(topic, p, [0, 1, 2])
        assert stored, f"{topic}-{p} is empty"
        assert cluster.isr(topic, p) == [0, 1, 2]

    assert _consume_all(cluster.bootstrap, topic, 3, len(acked)) == acked

    ck_consumer = CKConsumer({"bootstrap.servers": cluster.brokers[2].bootstrap, "group.id": "replication-ck",
                              "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        ck_consumer.subscribe([topic])
        seen: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + WAIT_S
        while len(seen) < len(acked) and time.monotonic() < deadline:
            msg = ck_consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen[(msg.partition(), msg.offset())] = msg.value()
        assert seen == acked
    finally:
        ck_consumer.close()


class _LoadProducer:
    """acks=all records until stopped, remembering where each acknowledged one went."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=2**31 - 1,
                                      max_in_flight_requests_per_connection=1, request_timeout_ms=10000,
                                      retry_backoff_ms=200, linger_ms=2, max_block_ms=60000)
        self.topic = topic
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="load producer")

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            value = f"load-{n}".encode()
            fut = self.producer.send(self.topic, value=value, partition=n % 3)
            fut.add_callback(self._acked, value)
            fut.add_errback(self._failed)
            n += 1
            if n % 50 == 0:
                self.producer.flush(60)

    def _acked(self, value: bytes, md: object) -> None:
        with self._lock:
            self.acked[(md.partition, md.offset)] = value  # type: ignore[attr-defined]

    def _failed(self, _exc: object) -> None:
        with self._lock:
            self.failed += 1

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def __enter__(self) -> _LoadProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)
        self.producer.flush(60)
        self.producer.close(30)


def test_kill_9_of_the_leader_under_acks_all_load_loses_no_acknowledged_record(cluster: Cluster) -> None:
    topic = "failover"
    cluster.create_topic(topic)
    victim = cluster.leader(topic, 0)
    with _LoadProducer(cluster.bootstrap, topic) as load:
        cluster.wait_for("records acknowledged before the kill", lambda: load.count() >= 300)
        cluster.brokers[victim].kill()
        before = load.count()
        cluster.wait_for("a new leader", lambda: cluster.leader(topic, 0) not in (victim, -1))
        cluster.wait_for("producers continuing after the failover", lambda: load.count() >= before + 300)
    acked = dict(load.acked)
    survivors = [b for b in range(3) if b != victim]
    for p in range(3):
        assert victim not in cluster.isr(topic, p)
        cluster.wait_identical(topic, p, survivors)
    found = _consume_all(cluster.bootstrap, topic, 3, len(acked))
    missing = {k: v for k, v in acked.items() if found.get(k) != v}
    assert not missing, f"{len(missing)} acknowledged records not where they were acknowledged, e.g. " \
                        f"{sorted(missing.items())[:5]}"

    # The killed broker comes back: it truncates what the new leader never had, catches up and rejoins.
    cluster.restart(victim)
    for p in range(3):
        cluster.wait_for(f"broker {victim} back in the ISR of {topic}-{p}",
                         lambda p=p: cluster.isr(topic, p) == [0, 1, 2])  # type: ignore[misc]
        cluster.wait_identical(topic, p, [0, 1, 2])
    assert _consume_all(cluster.bootstrap, topic, 3, len(acked)).items() >= acked.items()


def _pipelined_acks_all_produces(broker: BrokerProcess, topic: str, values: list[bytes]) -> list[int]:
    """Produce requests with acks=all, one record each, written to one connection at once (as librdkafka
    pipelines them); the error code of each answer, in order."""
    frames = []
    for corr, value in enumerate(values, 1):
        batch = RecordBatchBuilder()
        batch.append_record(0, int(time.time() * 1000), b"k", value)
        body = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=int(WAIT_S * 1000), topics=[
            ProduceRequest.TopicProduceData(name=topic, partitions=[
                ProduceRequest.TopicProduceData.PartitionProduceData(partition_index=0, records=batch.build())])])
        header = RequestHeader(request_api_key=body.API_KEY, request_api_version=8, correlation_id=corr,
                               client_id="pipelined")
        frames.append(size_prefixed(encode_request(header, body)))
    codes = []
    with socket.create_connection((broker.host, broker.port), timeout=2 * WAIT_S) as s:
        s.sendall(b"".join(frames))
        for corr in range(1, len(values) + 1):
            answer_header, response = decode_response(wire.recv_frame(s), ApiKey.PRODUCE, 8)
            assert answer_header.correlation_id == corr
            assert isinstance(response, ProduceResponse)
            codes.append(response.responses[0].partitions[0].error_code)
    return codes


def test_acks_all_is_refused_when_the_isr_is_below_min_insync_replicas(cluster: Cluster, tmp_path: Path) -> None:
    """Below min.insync.replicas an acks=all append is refused, and one already appended is answered
    NOT_ENOUGH_REPLICAS_AFTER_APPEND. A Produce pipelined behind an unanswered acks=all one on the same
    connection is checked only once that one is answered, as in Kafka (which handles a connection's requests
    one at a time): here the second is refused before its append, not appended beside the first."""
    topic = "too-few"
    cluster.create_topic(topic, partitions=1)
    leader = cluster.leader(topic, 0)
    for b in range(3):
        if b != leader:
            cluster.brokers[b].kill()
    # The leader still counts the dead followers in its ISR (until their lag or sessions run out): the first
    # append waits for them, and is answered when the ISR shrinks below min.insync.replicas.
    codes = _pipelined_acks_all_produces(cluster.brokers[leader], topic, [b"first", b"second"])
    assert codes == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NOT_ENOUGH_REPLICAS]
    cluster.wait_for("an ISR of the leader alone", lambda: cluster.isr(topic, 0) == [leader])
    ck = CKProducer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": "all",
                     "message.timeout.ms": 3000, "retries": 0})
    errors: list[str] = []
    ck.produce(topic, value=b"x", on_delivery=lambda err, _msg: errors.append(err.name() if err else "NONE"))
    ck.flush(30)
    assert errors == ["NOT_ENOUGH_REPLICAS"]
    # acks=1 needs the leader alone.
    ok: list[str] = []
    ck1 = CKProducer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": 1})
    ck1.produce(topic, value=b"y", on_delivery=lambda err, _msg: ok.append(err.name() if err else "NONE"))
    ck1.flush(30)
    assert ok == ["NONE"]


def test_a_former_leader_truncates_records_only_it_had_by_leader_epoch(make_cluster: Callable[..., Cluster]) -> None:
    """KIP-101: records a leader appended with acks=1 after its followers died are not committed. When the
    followers come back without it, one of them leads the next epoch (unclean election, the only way forward
    here) and writes other records at those offsets; the former leader, back as a follower, must drop its own
    records by leader epoch and end byte-identical to the others."""
    cluster = make_cluster({"unclean.leader.election.enable": "true"})
    topic = "diverging"
    cluster.create_topic(topic, partitions=1)
    first = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for n in range(20):
        first.send(topic, value=f"committed-{n}".encode(), partition=0).get(timeout=30)
    first.close()
    old_leader = cluster.leader(topic, 0)
    cluster.wait_identical(topic, 0, [0, 1, 2])
    followers = [b for b in range(3) if b != old_leader]

    for b in followers:
        cluster.brokers[b].kill()
    # Straight to the leader over one connection: a stock client would keep asking the dead brokers.
    _produce_acks_1(cluster.brokers[old_leader], topic, [f"diverged-{n}".encode() for n in range(10)])
    assert b"diverged" in cluster.log_bytes(old_leader, topic, 0)
    cluster.brokers[old_leader].kill()
    for b in followers:
        cluster.restart(b)
    cluster.wait_for("a leader of the next epoch", lambda: cluster.leader(topic, 0) in followers)
    cluster.wait_for("two replicas in sync", lambda: len(cluster.isr(topic, 0)) >= 2)

    after = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    acked = {}
    for n in range(30):
        md = after.send(topic, value=f"after-{n}".encode(), partition=0).get(timeout=30)
        acked[md.offset] = f"after-{n}".encode()
    after.close()

    cluster.restart(old_leader)
    cluster.wait_for(f"broker {old_leader} back in the ISR", lambda: cluster.isr(topic, 0) == [0, 1, 2])
    stored = cluster.wait_identical(topic, 0, [0, 1, 2])
    assert b"diverged" not in stored
    found = _consume_all(cluster.bootstrap, topic, 1, 50)
    values = [v for _, v in sorted(found.items())]
    assert values == [f"committed-{n}".encode() for n in range(20)] + [f"after-{n}".encode() for n in range(30)]
    assert {off: found[(0, off)] for off in acked} == acked


def _fetch_v11(broker: BrokerProcess, topic: str, rack: str, current_leader_epoch: int = -1
               ) -> FetchResponse.FetchableTopicResponse.FetchablePartitionResponse:
    request = FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, epoch=-1, rack_id=rack, topics=[FetchRequest.FetchableTopic(
                               name=topic, fetch_partitions=[FetchRequest.FetchableTopic.FetchPartition(
                                   partition_index=0, fetch_offset=0, max_bytes=1 << 20,
                                   current_leader_epoch=current_leader_epoch)])])
    with BrokerConnection(broker.host, broker.port, timeout_s=30) as conn:
        response = conn.send(request, 11)
    assert isinstance(response, FetchResponse)
    return response.topics[0].partitions[0]


def test_a_consumer_naming_its_rack_is_sent_to_the_replica_in_that_rack(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster({"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"},
                           per_broker=lambda i: {"broker.rack": f"rack-{i}"})
    topic = "racks"
    cluster.create_topic(topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for n in range(20):
        producer.send(topic, value=f"rack-record-{n}".encode(), partition=0).get(timeout=30)
    producer.close()
    leader = cluster.leader(topic, 0)
    follower = (leader + 1) % 3

    # The leader in its own rack serves; asked from the follower's rack, it answers with the follower and no data.
    own = _fetch_v11(cluster.brokers[leader], topic, f"rack-{leader}")
    assert (own.error_code, own.preferred_read_replica) == (0, -1) and own.records
    redirected = _fetch_v11(cluster.brokers[leader], topic, f"rack-{follower}")
    assert (redirected.error_code, redirected.preferred_read_replica) == (0, follower)
    assert not redirected.records
    # The follower serves that consumer up to its own high watermark.
    cluster.wait_for("the follower to serve all 20 records",
                     lambda: _fetch_v11(cluster.brokers[follower], topic, f"rack-{follower}").high_watermark == 20)
    served = _fetch_v11(cluster.brokers[follower], topic, f"rack-{follower}")
    assert served.error_code == 0 and b"rack-record-19" in bytes(served.records or b"")
    # KIP-320 holds on the follower too: an epoch it has not seen yet is not served.
    ahead = _fetch_v11(cluster.brokers[follower], topic, f"rack-{follower}", current_leader_epoch=7)
    assert ahead.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH

    consumer = CKConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": "racks", "client.rack": f"rack-{follower}",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        seen: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        assert seen == [f"rack-record-{n}".encode() for n in range(20)]
    finally:
        consumer.close()


def _offsets_partition(group: str, partitions: int) -> int:
    """Kafka's mapping of a group to its __consumer_offsets partition: abs(String.hashCode) mod count (for an
    ASCII id, whose UTF-16 code units are its characters)."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


def test_committed_offsets_survive_kill_9_of_the_group_coordinator(cluster: Cluster) -> None:
    topic, group = "grouped", "survivors"
    cluster.create_topic(topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for n in range(10):
        producer.send(topic, value=f"g-{n}".encode(), partition=0).get(timeout=30)
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=20000)
    read = []
    for record in consumer:
        read.append(record.value)
        if len(read) == 10:
            break
    consumer.commit()
    consumer.close()
    assert read == [f"g-{n}".encode() for n in range(10)]

    offsets_partition = _offsets_partition(group, 3)
    coordinator = cluster.leader("__consumer_offsets", offsets_partition)
    cluster.wait_identical("__consumer_offsets", offsets_partition, [0, 1, 2])
    cluster.brokers[coordinator].kill()
    cluster.wait_for("a new coordinator", lambda: cluster.leader("__consumer_offsets", offsets_partition)
                     not in (coordinator, -1))
    for n in range(10, 15):
        producer.send(topic, value=f"g-{n}".encode(), partition=0).get(timeout=30)
    producer.close()

    # The new coordinator first loads the group's offsets partition; on a loaded machine that, the rejoin and
    # the first fetch have taken more than 20 s (a full suite run beside other work got nothing in 20 s).
    again = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False,
                          auto_offset_reset="earliest", consumer_timeout_ms=int(WAIT_S * 1000))
    try:
        rest = []
        for record in again:
            rest.append((record.offset, record.value))
            if len(rest) == 5:
                break
        assert rest == [(n, f"g-{n}".encode()) for n in range(10, 15)]
    finally:
        again.close()
