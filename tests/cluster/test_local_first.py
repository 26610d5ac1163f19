"""Local-first in two machine rooms of two brokers each, on loopback, with a real ZooKeeper.

``broker.rack`` names the room (A: brokers 1 and 2, B: brokers 3 and 4). A producer in room A using the
partitioner we ship writes only to partitions led in room A; when both room-A brokers are killed -9 it writes
to room B's partitions once the controller moved the leaderships there, losing no acknowledged record; when
they come back and the preferred-leader election returns their leaderships, it writes to room A again.
Consumers in room B (``client.rack`` = B) are sent to the room-B replica of partitions led in room A
(KIP-392), which the room-B brokers' own logs show.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition

from sofakafka.client import KafkaClient, NewTopic
from sofakafka.client.client import AlterConfigOp, ConfigResourceType
from sofakafka.protocol.errors import ErrorCode
from sofakafka.router.local_first import ConfluentLocalFirst, kafka_python_partitioner
from tests.cluster.conftest import ZooKeeperServer, forget_dead_broker_sockets
from tests.integration.conftest import BrokerProcess

ROOMS = {1: "A", 2: "A", 3: "B", 4: "B"}
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
WAIT_S = 90.0
_chroots = itertools.count()


def wait_for(what: str, predicate: object, timeout: float = WAIT_S) -> float:
    start = time.monotonic()
    while True:
        try:
            if predicate():  # type: ignore[operator]
                return time.monotonic() - start
        except Exception:  # noqa: BLE001 - brokers come and go in these tests; keep asking until the deadline
            pass
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Rooms:
    def __init__(self, brokers: dict[int, BrokerProcess], chroot: str) -> None:
        self.brokers = brokers
        self.chroot = chroot

    def live(self) -> list[int]:
        return [b for b, p in self.brokers.items() if p.alive()]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.brokers[b].bootstrap for b in self.brokers)

    def client(self) -> KafkaClient:
        return KafkaClient(",".join(self.brokers[b].bootstrap for b in self.live()), request_timeout_ms=10_000)

    def leaders(self, topic: str) -> dict[int, int]:
        with self.client() as c:
            info = c.metadata([topic]).topics[topic]
        return {p: i.leader for p, i in info.partitions.items()}

    def isrs(self, topic: str) -> dict[int, tuple[int, ...]]:
        with self.client() as c:
            info = c.metadata([topic]).topics[topic]
        return {p: tuple(sorted(i.isr)) for p, i in info.partitions.items()}

    def create_topic(self, name: str, partitions: int = 4, rf: int = 2) -> dict[int, int]:
        with self.client() as c:
            result = c.create_topics([NewTopic(name, partitions, rf, configs={"min.insync.replicas": "1"})])
        assert result[name].error == ErrorCode.NONE, result
        # Every partition named, not just those named so far: a broker that has not heard of the topic yet
        # answers it with no partitions, and "all of none" would pass.
        wait_for(f"full ISRs and leaders of {name}",
                 lambda: len(isrs := self.isrs(name)) == partitions and all(len(i) == rf for i in isrs.values())
                 and len(leaders := self.leaders(name)) == partitions and all(lr >= 0 for lr in leaders.values()))
        return self.leaders(name)

    def logs(self) -> str:
        return "\n".join(f"----- broker {b}\n{p.log_tail(40)}" for b, p in self.brokers.items())


@pytest.fixture(scope="module")
def rooms(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[Rooms]:
    base = tmp_path_factory.mktemp("rooms")
    chroot = f"/local-first-{next(_chroots)}"

    def make(i: int) -> BrokerProcess:
        return BrokerProcess(Path(base) / f"broker{i}", {
            "broker.id": str(i),
            "broker.rack": ROOMS[i],
            "zookeeper.connect": zookeeper.hosts + chroot,
            "zookeeper.session.timeout.ms": "6000",
            "replica.selector.class": RACK_AWARE,
            "replica.lag.time.max.ms": "6000",
            "offsets.topic.num.partitions": "4",
            "offsets.topic.replication.factor": "2",
            "group.initial.rebalance.delay.ms": "0",
            # The way back to room A: preferred leaders are elected again soon after their brokers return.
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": "2",
            "leader.imbalance.per.broker.percentage": "0",
        })

    brokers = {i: make(i) for i in ROOMS}
    while len({b.port for b in brokers.values()}) < len(brokers):
        brokers = {i: make(i) for i in ROOMS}
    try:
        with ThreadPoolExecutor(len(brokers)) as pool:
            list(pool.map(BrokerProcess.start, brokers.values()))
        r = Rooms(brokers, chroot)
        with r.client() as c:
            wait_for("four registered brokers", lambda: len(c.metadata([]).brokers) == 4)
        yield r
    finally:
        for b in brokers.values():
            b.kill()
        forget_dead_broker_sockets()


def test_model_rules_and_filters_are_kept_in_zookeeper(rooms: Rooms, zookeeper: ZooKeeperServer) -> None:
    """On the ZooKeeper backend the LDC model and rules are /config/brokers/<default> and a group's filter
    /config/groups/<group>, in Kafka's config-znode JSON, written through any broker."""
    import json

    from kazoo.client import KazooClient

    from sofakafka.client.groups import GroupAdmin
    from sofakafka.ldc import LdcModel, RecordFilter, RoutingRules
    from sofakafka.router.store import read_model, read_rules, write_group_filter, write_model, write_rules

    model = LdcModel.from_toml('instance = "ZK"\n[cells.R1]\nzone = "RZone"\ncity = "a"\n'
                               '[cells.R2]\nzone = "RZone"\ncity = "b"\n')
    rules = RoutingRules.from_text("[[rules]]\nname = 'x'\nfrom = 'R1'\ntopic = 't'\nto = 'R2'")
    rooms.create_topic("zk-filtered", partitions=2)
    with rooms.client() as c:
        write_model(c, model)
        write_rules(c, rules)
        assert read_model(c) == model and read_rules(c) == rules
        GroupAdmin(c).commit_offsets("zk-group", {("zk-filtered", 0): 0})
        write_group_filter(c, "zk-group", RecordFilter.build(key_prefixes=["user-"]))
    zk = KazooClient(hosts=zookeeper.hosts + rooms.chroot)
    zk.start(timeout=30)
    try:
        default = json.loads(zk.get("/config/brokers/<default>")[0])["config"]
        assert LdcModel.from_json(default["sofakafka.ldc.model"]) == model
        assert RoutingRules.from_text(default["sofakafka.router.rules"]) == rules
        group = json.loads(zk.get("/config/groups/zk-group")[0])
        assert group == {"version": 1, "config": {"sofakafka.filter.key.prefix": "user-"}}
        assert zk.exists("/sofakafka/group_members/zk-group") is not None
    finally:
        zk.stop()
        zk.close()
    with rooms.client() as c:
        write_rules(c, None)
        write_model(c, None)


def test_topics_spread_replicas_over_rooms_and_each_room_leads_a_share(rooms: Rooms) -> None:
    for partitions in (2, 4, 6):
        topic = f"spread-{partitions}"
        leaders = rooms.create_topic(topic, partitions)
        with rooms.client() as c:
            info = c.metadata([topic]).topics[topic]
        for p in info.partitions.values():
            assert {ROOMS[r] for r in p.replicas} == {"A", "B"}, info
        led = [ROOMS[leader] for leader in leaders.values()]
        assert led.count("A") == led.count("B") == partitions // 2, leaders


def test_kafka_python_producer_with_our_partitioner_writes_only_to_its_rooms_partitions(rooms: Rooms) -> None:
    from kafka import KafkaProducer

    leaders = rooms.create_topic("kp-local")
    producer = KafkaProducer(bootstrap_servers=rooms.bootstrap, acks="all", partitioner=kafka_python_partitioner("B"))
    try:
        futures = [producer.send("kp-local", f"v{i}".encode(), key=None if i % 2 else f"k{i}".encode())
                   for i in range(60)]
        partitions = {f.get(timeout=30).partition for f in futures}
    finally:
        producer.close()
    assert partitions == {p for p, leader in leaders.items() if ROOMS[leader] == "B"}


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_room_b_consumers_fetch_from_room_b_replicas(rooms: Rooms, client: str) -> None:
    topic = f"follower-reads-{client}"
    leaders = rooms.create_topic(topic)
    producer = Producer({"bootstrap.servers": rooms.bootstrap, "acks": "all"})
    for p in leaders:
        for i in range(20):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    with rooms.client() as c:
        for b in (3, 4):  # the room-B brokers say when they serve a consumer as a follower
            (result,) = c.incremental_alter_configs({(ConfigResourceType.BROKER_LOGGER, str(b)): [
                ("sofakafka.broker.replica_manager", AlterConfigOp.SET, "DEBUG")]})
            assert result.error == ErrorCode.NONE, result
    a_led = sorted(p for p, leader in leaders.items() if ROOMS[leader] == "A")
    assert a_led
    marks = {b: len(rooms.brokers[b].log_text()) for b in (3, 4)}
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    if client == "confluent":
        consumer = Consumer({"bootstrap.servers": rooms.bootstrap, "group.id": f"room-b-{client}",
                             "client.rack": "B", "auto.offset.reset": "earliest"})
        consumer.assign([CKTopicPartition(topic, p, 0) for p in a_led])
        try:
            while len(got) < 20 * len(a_led) and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.add(msg.value())
        finally:
            consumer.close()
    else:
        from kafka import KafkaConsumer, TopicPartition

        kc = KafkaConsumer(bootstrap_servers=rooms.bootstrap, client_rack="B", auto_offset_reset="earliest",
                           enable_auto_commit=False)
        kc.assign([TopicPartition(topic, p) for p in a_led])
        kc.seek_to_beginning()
        try:
            while len(got) < 20 * len(a_led) and time.monotonic() < deadline:
                for records in kc.poll(1000).values():
                    got.update(r.value for r in records)
        finally:
            kc.close()
    assert got == {f"{p}-{i}".encode() for p in a_led for i in range(20)}
    served = "".join(rooms.brokers[b].log_text()[marks[b]:] for b in (3, 4))
    for p in a_led:
        assert f"consumer fetch of {topic}-{p} at offset" in served, rooms.logs()


class LocalFirstLoad:
    """A room-A producer (stock confluent-kafka Producer + our partitioner) sending from a thread until
    stopped; ``acked`` holds (partition, offset, value, send time) of every delivery report."""

    def __init__(self, rooms: Rooms, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": rooms.bootstrap, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 180_000, "socket.timeout.ms": 10_000})
        self.partitioner = ConfluentLocalFirst(self.producer, "A", {"bootstrap.servers": rooms.bootstrap},
                                               refresh_interval_s=0.5)
        self.acked: list[tuple[int, int, bytes, float]] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name="local-first-load")

    def _run(self) -> None:
        for i in itertools.count():
            if self._stop.is_set():
                return
            sent = time.monotonic()
            value = f"v{i}".encode()

            def report(err: object, msg: object, sent: float = sent, value: bytes = value) -> None:
                with self._lock:
                    if err is not None:
                        self.failed.append(str(err))
                    else:
                        self.acked.append((msg.partition(), msg.offset(), value, sent))  # type: ignore[attr-defined]

            try:
                partition = self.partitioner.partition(self.topic, None)
            except Exception:  # noqa: BLE001 - metadata unavailable for a moment during the failover
                time.sleep(0.1)
                continue
            self.producer.produce(self.topic, value, partition=partition, on_delivery=report)
            self.producer.poll(0)
            time.sleep(0.005)

    def start(self) -> LocalFirstLoad:
        self._thread.start()
        return self

    def since(self, t: float) -> list[tuple[int, int, bytes, float]]:
        with self._lock:
            return [a for a in self.acked if a[3] >= t]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(180) == 0


def test_room_a_producer_fails_over_to_room_b_and_comes_back(rooms: Rooms) -> None:
    topic = "local-first-failover"
    leaders = rooms.create_topic(topic)
    a_led = {p for p, leader in leaders.items() if ROOMS[leader] == "A"}
    load = LocalFirstLoad(rooms, topic).start()
    try:
        wait_for("deliveries in room A", lambda: len(load.since(0)) >= 100)
        assert {a[0] for a in load.since(0)} == a_led

        killed_at = time.monotonic()
        for b in (1, 2):
            rooms.brokers[b].kill()
        # Records sent after the kill are delivered once the controller moved room A's leaderships to room B.
        took = wait_for("deliveries of records sent after room A died",
                        lambda: len({a[0] for a in load.since(killed_at + 0.5)}) > 0)
        print(f"first record sent after the kill acknowledged {took:.1f} s after the kill")
        wait_for("room B leading every partition", lambda: all(ROOMS.get(leader) == "B"
                                                               for leader in rooms.leaders(topic).values()))
        switched = time.monotonic() + 1.0  # the partitioner's metadata is at most 0.5 s old
        wait_for("deliveries to every partition", lambda: {a[0] for a in load.since(switched)} == set(leaders))

        for b in (1, 2):
            rooms.brokers[b].start()
        wait_for("room A leading its preferred partitions again",
                 lambda: {p for p, leader in rooms.leaders(topic).items() if ROOMS.get(leader) == "A"} == a_led)
        back = time.monotonic() + 1.0
        wait_for("deliveries after room A's return", lambda: len(load.since(back)) >= 100)
        assert {a[0] for a in load.since(back)} == a_led
    finally:
        load.stop()
    assert not load.failed, load.failed[:5]

    # Every acknowledged record is where its delivery report said, read by a plain consumer.
    acked = {(p, o): v for p, o, v, _ in load.acked}
    found: dict[tuple[int, int], bytes] = {}
    consumer = Consumer({"bootstrap.servers": rooms.bootstrap, "group.id": "verify-failover",
                         "enable.auto.commit": False})
    consumer.assign([CKTopicPartition(topic, p, 0) for p in leaders])
    deadline = time.monotonic() + 120
    try:
        while not set(acked) <= set(found) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                found[(msg.partition(), msg.offset())] = msg.value()
    finally:
        consumer.close()
    lost = [k for k in acked if found.get(k) != acked[k]]
    assert not lost, f"{len(lost)} acknowledged records missing or different, e.g. {lost[:5]}"


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_a_filtered_group_is_filtered_by_every_broker_it_fetches_from(rooms: Rooms, client: str) -> None:
    """The group's coordinator is one broker; the partitions are led by all four, and a room-B consumer reads
    room-A-led partitions from room-B followers: each of those brokers filters what it serves."""
    from sofakafka.client.groups import GroupAdmin
    from sofakafka.ldc import RecordFilter
    from sofakafka.router.store import write_group_filter

    topic, group = f"filtered-{client}", f"filtered-app-{client}"
    leaders = rooms.create_topic(topic, partitions=4)
    producer = Producer({"bootstrap.servers": rooms.bootstrap, "acks": "all"})
    for p in leaders:
        for i in range(30):
            producer.produce(topic, f"{p}-{i}".encode(), f"k{i}".encode(), partition=p,
                             headers=[("__UNIT.TARGET_R", b"R1" if i % 3 == 0 else b"R2")])
    assert producer.flush(30) == 0
    with rooms.client() as c:
        GroupAdmin(c).commit_offsets(group, {(topic, p): 0 for p in leaders})
        write_group_filter(c, group, RecordFilter.build(headers=[("__UNIT.TARGET_R", "R1")]))
        coordinator = GroupAdmin(c).find_coordinator(group)
    expected = {f"{p}-{i}".encode() for p in leaders for i in range(30) if i % 3 == 0}
    got: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 60
    if client == "confluent":
        consumer = Consumer({"bootstrap.servers": rooms.bootstrap, "group.id": group, "client.id": group,
                             "client.rack": "B", "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        try:
            while len(got) < len(expected) and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got[(msg.partition(), msg.offset())] = msg.value()
            end = time.monotonic() + 2
            while time.monotonic() < end:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    got[(msg.partition(), msg.offset())] = msg.value()
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
    else:
        from kafka import KafkaConsumer

        kc = KafkaConsumer(bootstrap_servers=rooms.bootstrap, group_id=group, client_id=group, client_rack="B",
                           auto_offset_reset="earliest", enable_auto_commit=False)
        while not kc.partitions_for_topic(topic) and time.monotonic() < deadline:
            time.sleep(0.1)
        kc.subscribe([topic])
        try:
            end = deadline
            while time.monotonic() < end:
                for records in kc.poll(1000).values():
                    got.update(((r.partition, r.offset), r.value) for r in records)
                if len(got) >= len(expected) and end == deadline:
                    end = time.monotonic() + 2
            kc.commit()
        finally:
            kc.close()
    assert set(got.values()) == expected and len(got) == len(expected)
    with rooms.client() as c:
        committed = GroupAdmin(c).fetch_offsets(group)
        ends = c.list_offsets(topic, dict.fromkeys(leaders, -1))
    assert {p: committed[(topic, p)].offset for p in leaders} == {p: ends[p].offset for p in leaders}
    print(f"coordinator broker {coordinator}, leaders {leaders}")
