"""Model-based test of cluster operations that compose (issue 21): random interleavings of admin operations and
broker failures on a real three-broker cluster with a real ZooKeeper, with producers and a consumer group running,
and after every step the invariants that say the cluster converged to the end state Kafka reaches.

A **sequence** is a list of **steps**; a step is a burst of one to three operations sent back to back (so the
controller sees them interleaved: a move and the topic's deletion, a kill and a reassignment onto the killed
broker, ...), after which the cluster is given a bounded time to **settle**, and the invariants are checked.
Operations (``Op``, a JSON list, so a sequence prints as JSON and replays from it):

* ``["create", t, partitions, rf]`` CreateTopics; ``["delete", t]`` DeleteTopics (of a live topic, or again of one
  being deleted or gone: bad input); ``["delete_unknown"]``; ``["add_partitions", t, n]`` CreatePartitions;
  ``["reassign", t, p, [brokers]]`` AlterPartitionReassignments (brokers may be down or not exist: bad input);
  ``["cancel", t, p]`` (of a running move or not); ``["elect", t, p, "preferred"|"unclean"]`` ElectLeaders;
  ``["config", t, key, value]`` IncrementalAlterConfigs of a topic;
* ``["kill", b]`` kill -9 (the controller too: the generator picks it often), ``["stop", b]`` SIGTERM (a
  controlled shutdown), ``["restart", b]``, ``["freeze", b]`` SIGSTOP until ZooKeeper expires the broker's session
  (the settle waits for that), ``["thaw", b]`` SIGCONT: the broker comes back on a new session by itself.

Topics are numbered ``t`` within a sequence and named ``<prefix>-<t>``, so a sequence replays anywhere. Every
operation's answer is checked against the codes Kafka 2.6 gives in that situation (tests/cluster/
test_operation_pairs.py checks the same codes against the reference broker); where two answers are both right
(a move that may have completed a moment before a cancel), either is accepted.

**Settled**, within :data:`SETTLE_S` of the end of the burst, means (each pending item has that deadline):
registered brokers are exactly the ones up; there is a controller; a topic being deleted whose replicas' brokers
are all up is gone (znodes, marker, config, and its directories on every broker); a move whose target brokers are
all up has completed; no ``/admin/reassign_partitions``, ``/admin/preferred_replica_election`` or ISR change
notification is left; no ``/config/topics`` entry outlives its topic; every partition with an in-sync replica up
has a leader that is up and in its ISR, and every replica up is back in the ISR; and every live broker's Metadata
answer agrees with ZooKeeper (brokers, controller, topics, leaders, replicas, ISRs).

**Invariants** after settling: acks=all produce works on every partition of every live topic with at least
``min.insync.replicas`` in-sync replicas up, and the record is read back where it was acknowledged; at checkpoints
(every few steps and at the end of the sequence, with every broker up): every acknowledged record (from the
background producer and the probes) is at its offset, every record the consumer group read is still there, and
the consumer group sees the probes. An unclean election that succeeded is the one licence to lose records: the
partition's earlier acknowledgements are forgotten.

Run: ``python -m tests.cluster.chaos --minutes 60`` (the long form; docs/cluster.md), or through pytest
(tests/cluster/test_chaos.py: fixed seeds, one new seed per run, and the regression sequences). A failure prints
the sequence as JSON with the command that replays it (``--replay '<json>'``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer
from confluent_kafka import KafkaError as CKError
from kazoo.exceptions import NoNodeError

from sofakafka.cli import cluster as cl
from sofakafka.client import ClientError, KafkaClient, NewTopic
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from sofakafka.protocol.records import Record
from tests.cluster import test_failover as tf
from tests.integration.conftest import api_versions_ok

Op = list[Any]
Step = list[Op]

BROKERS = (1, 2, 3)
NO_SUCH_BROKER = 7
SETTLE_S = 90.0
"""Every pending item must be resolved within this of the end of its step: a bound on a hang, not a speed claim."""
ADMIN_TIMEOUT_MS = 20_000
CHECKPOINT_EVERY = 5
E = ErrorCode

BROKER_SETTINGS = {
    # A deleted topic must not come back because a client asked for it.
    "auto.create.topics.enable": "false",
    "replica.lag.time.max.ms": "6000",
    "log.segment.delete.delay.ms": "500",
    "log.retention.check.interval.ms": "500",
    # The automatic preferred election is one more controller operation in the interleavings.
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "7",
    "offsets.topic.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
    "controlled.shutdown.max.retries": "2",
    "controlled.shutdown.retry.backoff.ms": "500",
}


class ChaosFailure(AssertionError):
    """An invariant or an expected answer failed; the message says which, the runner adds the replay."""


def fail(message: str) -> None:
    raise ChaosFailure(message)


# ------------------------------------------------------------------------------------------------------ the model


@dataclass
class TopicModel:
    tid: int
    name: str
    rf: int
    partitions: int
    min_isr: int
    state: str = "live"  # live | deleting | deleted | absent (its creation was refused)


@dataclass
class Model:
    """What the test knows, as opposed to what it reads from ZooKeeper: brokers' process states and the topics."""

    prefix: str
    brokers: dict[int, str] = field(default_factory=lambda: dict.fromkeys(BROKERS, "up"))
    # up | down (stopped or killed, unregistered) | dying (killed, its session not yet expired) | frozen
    topics: dict[int, TopicModel] = field(default_factory=dict)
    next_tid: int = 0

    def name(self, tid: int) -> str:
        return f"{self.prefix}-{tid}"

    def up(self) -> list[int]:
        return [b for b, s in self.brokers.items() if s == "up"]

    def uncertain(self) -> list[int]:
        """Brokers that may or may not still be registered (killed or frozen, session not yet expired)."""
        return [b for b, s in self.brokers.items() if s in ("dying", "frozen")]

    def possible_live_sets(self) -> list[set[int]]:
        base = set(self.up())
        unsure = self.uncertain()
        return [base | {b for b, on in zip(unsure, mask, strict=True) if on}
                for mask in itertools.product((False, True), repeat=len(unsure))]

    def live_topics(self) -> list[TopicModel]:
        return [t for t in self.topics.values() if t.state == "live"]


# ------------------------------------------------------------------------------------------- load: producer, consumer


class Load:
    """acks=all producer and a consumer group over the sequence's live topics, in the background."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.prefix = prefix
        self._lock = threading.Lock()
        self.acked: dict[tuple[str, int, int], bytes] = {}
        self.seen: dict[tuple[str, int, int], bytes] = {}
        self.conflicts: list[str] = []
        self.targets: list[tuple[str, int]] = []  # (topic, partitions) the producer writes to
        self._stop = threading.Event()
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60_000,
            "retry.backoff.ms": 200, "topic.metadata.refresh.interval.ms": 2000, "socket.timeout.ms": 10_000,
            "enable.idempotence": False, "log_level": 0,
        })
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"{prefix}-group", "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 2000,
            "socket.timeout.ms": 10_000, "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000,
            "log_level": 0,
        })
        self.consumer.subscribe([f"^{prefix}-.*"])
        self._threads = [threading.Thread(target=self._produce, name="chaos-producer", daemon=True),
                         threading.Thread(target=self._consume, name="chaos-consumer", daemon=True)]
        for t in self._threads:
            t.start()

    def set_targets(self, targets: list[tuple[str, int]]) -> None:
        with self._lock:
            self.targets = list(targets)

    def _delivered(self, err: CKError | None, msg: Message) -> None:
        if err is None:
            self.record_ack(msg.topic() or "", msg.partition() or 0, msg.offset() or 0, msg.value() or b"")

    def record_ack(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.acked[(topic, partition, offset)] = value

    def _produce(self) -> None:
        n = 0
        while not self._stop.is_set():
            with self._lock:
                targets = list(self.targets)
            if targets:
                topic, partitions = targets[n % len(targets)]
                partition = (n // len(targets)) % partitions
                with contextlib.suppress(BufferError, KafkaException):
                    self.producer.produce(topic, f"{topic}|{partition}|{n}".encode(), partition=partition,
                                          on_delivery=self._delivered)
                n += 1
            self.producer.poll(0.02)

    def _consume(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self.consumer.poll(0.2)
            except KafkaException:
                continue
            if msg is None or msg.error() is not None:
                continue
            key = (msg.topic() or "", msg.partition() or 0, msg.offset() or 0)
            value = msg.value() or b""
            with self._lock:
                old = self.seen.get(key)
                if old is not None and old != value:
                    self.conflicts.append(f"{key}: the consumer read {old!r} there, then {value!r}")
                self.seen[key] = value

    def forget(self, topic: str, partition: int) -> None:
        """An unclean election: what was acknowledged or read there before may legitimately be gone."""
        with self._lock:
            for d in (self.acked, self.seen):
                for key in [k for k in d if k[0] == topic and k[1] == partition]:
                    del d[key]

    def snapshot(self) -> tuple[dict[tuple[str, int, int], bytes], dict[tuple[str, int, int], bytes], list[str]]:
        with self._lock:
            return dict(self.acked), dict(self.seen), list(self.conflicts)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        with contextlib.suppress(Exception):
            self.producer.flush(10)
        with contextlib.suppress(Exception):
            self.consumer.close()


# --------------------------------------------------------------------------------------------------- the cluster


class World:
    """A running three-broker cluster (tests/cluster's launcher) and a ZooKeeper client of the test's own."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._stack = contextlib.ExitStack()
        self.cluster = self._stack.enter_context(tf.running_cluster(directory, BROKER_SETTINGS))
        self.zk = self._stack.enter_context(tf.kazoo_client(self.cluster))

    def close(self) -> None:
        self._stack.close()

    # -- ZooKeeper reads
    def get_json(self, path: str) -> Any:
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return json.loads(data) if data else None

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def registered(self) -> set[int]:
        return {int(c) for c in self.children("/brokers/ids") if c.isdigit()}

    def controller(self) -> int:
        doc = self.get_json("/controller")
        return -1 if doc is None else int(doc["brokerid"])

    def topic(self, name: str) -> dict[str, Any] | None:
        doc: dict[str, Any] | None = self.get_json(f"/brokers/topics/{name}")
        return doc

    def state(self, name: str, partition: int) -> dict[str, Any] | None:
        doc: dict[str, Any] | None = self.get_json(f"/brokers/topics/{name}/partitions/{partition}/state")
        return doc

    # -- processes
    def pid(self, broker: int) -> int:
        return self.cluster.record(broker).pid

    def alive(self, broker: int) -> bool:
        return self.cluster.record(broker).alive()

    def client(self, brokers: Sequence[int], timeout_ms: int = ADMIN_TIMEOUT_MS) -> KafkaClient:
        return KafkaClient(",".join(self.cluster.bootstrap(b) for b in brokers), request_timeout_ms=timeout_ms)

    def topic_dirs(self, broker: int, name: str) -> list[str]:
        data = self.directory / f"broker-{broker}" / "data"
        with contextlib.suppress(FileNotFoundError):
            return sorted(d.name for d in data.iterdir()
                          if d.is_dir() and (d.name.rsplit("-", 1)[0] == name
                                             or (d.name.startswith(f"{name}-") and d.name.endswith("-delete"))))
        return []

    def logs(self) -> str:
        return self.cluster.logs()


def wait(what: str, predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            fail(f"timed out ({timeout:.0f} s) waiting for {what}")
        time.sleep(0.2)


# ------------------------------------------------------------------------------------------------ the generator


class Generator:
    """Chooses the next step from the model and what ZooKeeper says now; seeded, so a seed names a sequence
    (given the same cluster behaviour; the JSON of the steps taken is the exact replay)."""

    def __init__(self, rng: random.Random, model: Model, world: World) -> None:
        self.rng = rng
        self.model = model
        self.world = world

    def first_step(self) -> Step:
        """A few topics to work on, one of each replication factor."""
        rng, m = self.rng, self.model
        return [["create", m.next_tid + i, rng.choice((1, 2, 3)), rf] for i, rf in enumerate((3, 2, 1))]

    def step(self) -> Iterator[Op]:
        """The next step's operations, each chosen after the one before it ran (the model follows)."""
        rng = self.rng
        if rng.random() < 0.25:
            combo = self._combo()
            if combo:
                yield from combo
                return
        for _ in range(rng.choice((1, 1, 2, 2, 3))):
            yield self._one()

    def _topic(self, states: tuple[str, ...] = ("live",)) -> TopicModel | None:
        candidates = [t for t in self.model.topics.values() if t.state in states]
        return self.rng.choice(candidates) if candidates else None

    def _target(self, t: TopicModel, bad: bool = False) -> list[int]:
        rng = self.rng
        size = max(1, min(3, t.rf + rng.choice((0, 0, 0, 1, -1))))
        if bad:
            down = [b for b, s in self.model.brokers.items() if s == "down"]
            odd = rng.choice(down) if down and rng.random() < 0.7 else NO_SUCH_BROKER
            return [*rng.sample([b for b in BROKERS if b != odd], size - 1), odd]
        return rng.sample(list(BROKERS), size)

    def _can_fail_one_more(self) -> bool:
        m = self.model
        return len(m.up()) >= 2 and len([s for s in m.brokers.values() if s != "up"]) < 2

    def _one(self) -> Op:
        rng, m = self.rng, self.model
        options: list[tuple[float, Callable[[], Op | None]]] = [
            (0.25 if len(m.live_topics()) < 3 else 0.10 if len(m.live_topics()) < 6 else 0.02, self._create),
            (0.07, lambda: ["delete", t.tid] if (t := self._topic()) and len(m.live_topics()) > 1 else None),
            (0.03, lambda: ["delete", t.tid] if (t := self._topic(("deleting", "deleted"))) else None),
            (0.02, lambda: ["delete_unknown"]),
            (0.06, lambda: ["add_partitions", t.tid, 1] if (t := self._topic()) and t.partitions < 4 else None),
            (0.14, lambda: ["reassign", t.tid, rng.randrange(t.partitions), self._target(t)]
             if (t := self._topic()) else None),
            (0.04, lambda: ["reassign", t.tid, rng.randrange(t.partitions), self._target(t, bad=True)]
             if (t := self._topic(("live", "deleting", "deleted"))) else None),
            (0.07, lambda: ["cancel", t.tid, rng.randrange(t.partitions)]
             if (t := self._topic(("live", "live", "deleting"))) else None),
            (0.05, lambda: ["elect", t.tid, rng.randrange(t.partitions), "preferred"]
             if (t := self._topic(("live", "live", "deleting"))) else None),
            (0.04, self._unclean),
            (0.05, self._config),
            (0.06, lambda: ["kill", rng.choice(m.up())] if self._can_fail_one_more() else None),
            (0.05, lambda: ["kill", self._controller()] if self._can_fail_one_more() else None),
            (0.05, lambda: ["stop", rng.choice(m.up())] if self._can_fail_one_more() else None),
            (0.04, lambda: ["freeze", rng.choice(m.up())]
             if self._can_fail_one_more() and "frozen" not in m.brokers.values() else None),
            (0.30, lambda: ["thaw", b] if (b := self._in_state("frozen")) is not None else None),
            (0.25, lambda: ["restart", b] if (b := self._in_state("down", "dying")) is not None else None),
        ]
        for _ in range(50):
            total = sum(w for w, _ in options)
            pick = rng.uniform(0, total)
            for weight, make in options:
                pick -= weight
                if pick <= 0:
                    op = make()
                    if op is not None:
                        return op
                    break
        return self._create()

    def _in_state(self, *states: str) -> int | None:
        found = [b for b, s in self.model.brokers.items() if s in states]
        return self.rng.choice(found) if found else None

    def _controller(self) -> int:
        c = self.world.controller()
        return c if self.model.brokers.get(c) == "up" else self.rng.choice(self.model.up())

    def _create(self) -> Op:
        return ["create", self.model.next_tid, self.rng.choice((1, 2, 3)), self.rng.choice((1, 2, 2, 3, 3))]

    def _config(self) -> Op | None:
        t = self._topic(("live", "live", "live", "deleting", "deleted"))
        if t is None:
            return None
        key, value = self.rng.choice([
            ("min.insync.replicas", str(self.rng.randint(1, max(1, t.rf)))),
            ("segment.bytes", str(self.rng.choice((16384, 1 << 20)))),
            ("segment.ms", str(self.rng.choice((3000, 604800000)))),
            ("retention.ms", "-1"),  # longer retention never loses an acknowledged record
        ])
        return ["config", t.tid, key, value]

    def _unclean(self) -> Op | None:
        """Prefer a partition with no leader (the case an unclean election is for)."""
        offline = []
        for t in self.model.live_topics():
            for p in range(t.partitions):
                state = self.world.state(t.name, p)
                if state is not None and state["leader"] == -1:
                    offline.append((t, p))
        if offline:
            t, p = self.rng.choice(offline)
            return ["elect", t.tid, p, "unclean"]
        t2 = self._topic()
        return None if t2 is None else ["elect", t2.tid, self.rng.randrange(t2.partitions), "unclean"]

    def _combo(self) -> Step | None:
        """Pairs that used to wait on each other, sent back to back."""
        rng, m = self.rng, self.model
        t = self._topic()
        if t is None:
            return None
        p = rng.randrange(t.partitions)
        move: Op = ["reassign", t.tid, p, self._target(t)]
        victims = [b for b in m.up()]
        kinds: list[Callable[[], Step | None]] = [
            lambda: [move, ["delete", t.tid]] if len(m.live_topics()) > 1 else None,
            lambda: [move, ["kill", rng.choice(victims)]] if self._can_fail_one_more() else None,
            lambda: [move, ["cancel", t.tid, p]],
            lambda: [["add_partitions", t.tid, 1], move] if t.partitions < 4 else None,
            lambda: [["stop", self._controller()], move] if self._can_fail_one_more() else None,
            lambda: [["kill", self._controller()], ["create", m.next_tid, 2, 2]] if self._can_fail_one_more()
            else None,
            lambda: [["freeze", rng.choice(victims)], ["delete", t.tid]]
            if self._can_fail_one_more() and "frozen" not in m.brokers.values() and len(m.live_topics()) > 1
            else None,
            lambda: [["delete", t.tid], ["delete", t.tid], move] if len(m.live_topics()) > 1 else None,
            lambda: [move, ["elect", t.tid, p, "preferred"], ["config", t.tid, "min.insync.replicas", "1"]],
        ]
        rng.shuffle(kinds)
        for make in kinds:
            combo = make()
            if combo is not None:
                return combo
        return None


# --------------------------------------------------------------------------------------------------- execution


class Runner:
    """Executes steps against the world, checking each answer and, after each step, the invariants."""

    def __init__(self, world: World, prefix: str, out: Callable[[str], None] = print) -> None:
        self.world = world
        self.model = Model(prefix)
        self.out = out
        self.load = Load(world.cluster.all_bootstrap, prefix)
        self.steps: list[Step] = []
        self.probe_counter = itertools.count()
        self.probes: dict[tuple[str, int, int], bytes] = {}
        self.unclean: set[tuple[str, int]] = set()
        self.deleted_names: set[str] = set()
        self._controller_unsure = False
        self._deleted_this_step: set[int] = set()
        self._moved_this_step: set[tuple[int, int]] = set()

    def close(self) -> None:
        self.load.close()

    # -- the admin client: only brokers certainly up, so no request waits on a frozen one
    @contextlib.contextmanager
    def admin(self) -> Iterator[KafkaClient]:
        up = self.model.up()
        assert up, "the generator keeps a broker up"
        gone = set(self.model.uncertain())
        if self.world.controller() in gone:
            # A client's request to a frozen (or just killed) controller waits out its timeout and is sent again
            # to the next one, which is elected once ZooKeeper expires the old one's session: wait for that
            # here, so the answer checked is the new controller's.
            wait("a new controller", lambda: self.world.controller() not in gone | {-1}, SETTLE_S)
        client = self.world.client(up)
        try:
            yield client
        finally:
            client.close()

    def _refresh_targets(self) -> None:
        self.load.set_targets([(t.name, t.partitions) for t in self.model.live_topics()])

    # -- one step
    def run_step(self, ops: Iterable[Op], index: int) -> None:
        step: Step = []
        self.steps.append(step)
        self._controller_unsure = False
        self._deleted_this_step = set()
        self._moved_this_step = set()
        for op in ops:
            step.append(op)
            outcome = self.apply(op)
            self.out(f"  step {index}: {json.dumps(op)} -> {outcome}")
        self.settle()
        self.check_produce()

    def apply(self, op: Op) -> str:
        kind = op[0]
        handler: Callable[..., str] = getattr(self, f"op_{kind}")
        return handler(*op[1:])

    def expect(self, op: str, got: ErrorCode, allowed: set[ErrorCode]) -> str:
        if got not in allowed:
            fail(f"{op}: answered {got.name}, expected {' or '.join(sorted(c.name for c in allowed))}")
        return got.name

    def _topic_model(self, tid: int) -> TopicModel:
        t = self.model.topics.get(tid)
        if t is None:  # a replayed sequence may name a topic the generator would have created
            t = TopicModel(tid, self.model.name(tid), 1, 1, 1, "absent")
        return t

    # -- admin operations
    def op_create(self, tid: int, partitions: int, rf: int) -> str:
        name = self.model.name(tid)
        self.model.next_tid = max(self.model.next_tid, tid + 1)
        allowed = set()
        for live in self.model.possible_live_sets():
            allowed.add(E.NONE if rf <= len(live) else E.INVALID_REPLICATION_FACTOR)
        if self.model.uncertain() or self._controller_unsure:
            allowed.add(E.REQUEST_TIMED_OUT)  # leaders placed on a dying broker are elected only after it left
        min_isr = min(2, rf)
        with self.admin() as c:
            result = c.create_topics([NewTopic(name, partitions, rf, configs={"min.insync.replicas": str(min_isr)})],
                                     timeout_ms=10_000)[name]
        got = self.expect(f"create {name}", result.error, allowed)
        created = result.error in (E.NONE, E.REQUEST_TIMED_OUT)
        self.model.topics[tid] = TopicModel(tid, name, rf, partitions, min_isr, "live" if created else "absent")
        self._refresh_targets()
        return got

    def op_delete(self, tid: int) -> str:
        t = self._topic_model(tid)
        if t.state == "live":
            allowed = {E.NONE, E.REQUEST_TIMED_OUT}
            t.state = "deleting"
            self._deleted_this_step.add(tid)
            self._refresh_targets()  # stop producing to it first
        else:
            allowed = {E.UNKNOWN_TOPIC_OR_PARTITION}
        if self._controller_unsure and t.state == "deleting" and tid in self._deleted_this_step:
            allowed.add(E.UNKNOWN_TOPIC_OR_PARTITION)  # a new controller's metadata may not have the topic yet
        was_live = tid in self._deleted_this_step and t.state == "deleting"
        with self.admin() as c:
            got = c.delete_topics([t.name], timeout_ms=2000)[t.name].error
        if was_live and got == E.UNKNOWN_TOPIC_OR_PARTITION and self._controller_unsure:
            t.state = "live"  # refused by a controller that did not know it yet: nothing was deleted
            self._deleted_this_step.discard(tid)
            self._refresh_targets()
        return self.expect(f"delete {t.name}", got, allowed)

    def op_delete_unknown(self) -> str:
        name = f"{self.model.prefix}-never"
        with self.admin() as c:
            got = c.delete_topics([name], timeout_ms=2000)[name].error
        return self.expect(f"delete {name}", got, {E.UNKNOWN_TOPIC_OR_PARTITION})

    def _moving(self, name: str, partition: int | None = None) -> bool:
        doc = self.world.topic(name)
        if doc is None:
            return False
        moving = {p for key in ("adding_replicas", "removing_replicas") for p, r in doc.get(key, {}).items() if r}
        return bool(moving) if partition is None else str(partition) in moving

    def op_add_partitions(self, tid: int, count: int) -> str:
        t = self._topic_model(tid)
        total = t.partitions + count
        if t.state == "live":
            allowed: set[ErrorCode] = set()
            # New partitions get partition 0's replica count (Kafka's rule), which a reassignment may have changed.
            doc = self.world.topic(t.name)
            rfs = {t.rf}
            if doc is not None and "0" in doc["partitions"]:
                replicas0 = doc["partitions"]["0"]
                removing0 = doc.get("removing_replicas", {}).get("0", [])
                rfs = {len(replicas0), len([r for r in replicas0 if r not in removing0])}  # moving or moved
            normal = {E.NONE if rf <= len(live) else E.INVALID_REPLICATION_FACTOR
                      for live in self.model.possible_live_sets() for rf in rfs}
            if self.model.uncertain() or self._controller_unsure:
                normal.add(E.REQUEST_TIMED_OUT)
            if self._moving(t.name):
                allowed.add(E.REASSIGNMENT_IN_PROGRESS)
                allowed |= normal  # the move may complete between our look and the request
            elif any(tid == m for m, _ in self._moved_this_step):
                allowed |= {E.REASSIGNMENT_IN_PROGRESS} | normal
            else:
                allowed |= normal
        elif t.state == "deleting":
            allowed = {E.INVALID_TOPIC_EXCEPTION, E.UNKNOWN_TOPIC_OR_PARTITION}
        else:
            allowed = {E.UNKNOWN_TOPIC_OR_PARTITION}
        with self.admin() as c:
            got = c.create_partitions({t.name: total}, timeout_ms=10_000)[t.name].error
        if got in (E.NONE, E.REQUEST_TIMED_OUT) and t.state == "live":
            t.partitions = total
            self._refresh_targets()
        return self.expect(f"add_partitions {t.name} to {total}", got, allowed)

    def op_reassign(self, tid: int, partition: int, target: list[int]) -> str:
        t = self._topic_model(tid)
        doc = self.world.topic(t.name)
        origins: list[list[int]] = []
        if doc is None:
            origins.append([])
        else:
            replicas = doc["partitions"].get(str(partition), [])
            adding = doc.get("adding_replicas", {}).get(str(partition), [])
            removing = doc.get("removing_replicas", {}).get(str(partition), [])
            origins.append([r for r in replicas if r not in adding])
            if adding or removing:
                origins.append([r for r in replicas if r not in removing])  # it may complete meanwhile
        exists = doc is not None and str(partition) in doc["partitions"]
        allowed: set[ErrorCode] = set()
        for origin in origins:
            added = [r for r in target if r not in origin]
            for live in self.model.possible_live_sets():
                if not set(added) <= live:
                    allowed.add(E.INVALID_REPLICA_ASSIGNMENT)
                elif not exists or t.state in ("deleting", "deleted"):
                    allowed.add(E.UNKNOWN_TOPIC_OR_PARTITION)
                    if t.state == "deleting" and tid in self._deleted_this_step:
                        allowed.add(E.NONE)  # the controller may not have seen the marker yet
                else:
                    allowed.add(E.NONE)
        if t.state == "deleting":
            allowed.add(E.UNKNOWN_TOPIC_OR_PARTITION)  # deleted meanwhile: nothing there to move
        with self.admin() as c:
            got = c.alter_partition_reassignments({(t.name, partition): target})[(t.name, partition)].error
        if got == E.NONE:
            self._moved_this_step.add((tid, partition))
        return self.expect(f"reassign {t.name}-{partition} to {target}", got, allowed)

    def op_cancel(self, tid: int, partition: int) -> str:
        t = self._topic_model(tid)
        moving = self._moving(t.name, partition) or (tid, partition) in self._moved_this_step
        if t.state == "live":
            allowed = {E.NONE, E.NO_REASSIGNMENT_IN_PROGRESS} if moving else {E.NO_REASSIGNMENT_IN_PROGRESS}
        elif t.state == "deleting":
            allowed = {E.UNKNOWN_TOPIC_OR_PARTITION, E.NO_REASSIGNMENT_IN_PROGRESS} if moving \
                else {E.NO_REASSIGNMENT_IN_PROGRESS}
            if moving and tid in self._deleted_this_step:
                allowed.add(E.NONE)
        else:
            allowed = {E.NO_REASSIGNMENT_IN_PROGRESS}
        with self.admin() as c:
            got = c.alter_partition_reassignments({(t.name, partition): None})[(t.name, partition)].error
        return self.expect(f"cancel {t.name}-{partition}", got, allowed)

    def op_elect(self, tid: int, partition: int, kind: str) -> str:
        t = self._topic_model(tid)
        before = self.world.state(t.name, partition)
        if t.state == "live" and partition < t.partitions:
            allowed = ({E.NONE, E.ELECTION_NOT_NEEDED, E.PREFERRED_LEADER_NOT_AVAILABLE} if kind == "preferred"
                       else {E.NONE, E.ELECTION_NOT_NEEDED, E.ELIGIBLE_LEADERS_NOT_AVAILABLE})
        elif t.state == "deleting":
            allowed = {E.INVALID_TOPIC_EXCEPTION, E.UNKNOWN_TOPIC_OR_PARTITION}
            if tid in self._deleted_this_step:
                allowed |= {E.NONE, E.ELECTION_NOT_NEEDED, E.PREFERRED_LEADER_NOT_AVAILABLE,
                            E.ELIGIBLE_LEADERS_NOT_AVAILABLE}
        else:
            allowed = {E.UNKNOWN_TOPIC_OR_PARTITION}
        request = ElectLeadersRequest(election_type=0 if kind == "preferred" else 1, topic_partitions=[
            ElectLeadersRequest.TopicPartitions(topic=t.name, partition_id=[partition])], timeout_ms=10_000)
        got = E.UNKNOWN_SERVER_ERROR
        deadline = time.monotonic() + ADMIN_TIMEOUT_MS / 1000
        while True:
            with self.admin() as c:
                controller = c.metadata([]).controller_id
                response = c.send(request, node_id=controller, version=1) if controller >= 0 else None
            if isinstance(response, ElectLeadersResponse):
                if response.error_code == E.NONE:
                    (result,) = response.replica_election_results
                    got = ErrorCode.for_code(result.partition_result[0].error_code)
                    break
                got = ErrorCode.for_code(response.error_code)
            if (got != E.NOT_CONTROLLER and response is not None) or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # the controller moved: ask the new one, as an operator would
        if kind == "unclean" and got == E.NONE:
            after = self.world.state(t.name, partition)
            if before is None or after is None or after["leader"] not in before["isr"]:
                # A replica outside the ISR leads: what was acknowledged before may be gone. Kafka's licence.
                self.unclean.add((t.name, partition))
                self.load.forget(t.name, partition)
                for key in [k for k in self.probes if k[:2] == (t.name, partition)]:
                    del self.probes[key]
        return self.expect(f"{kind} election of {t.name}-{partition}", got, allowed)

    def op_config(self, tid: int, key: str, value: str) -> str:
        t = self._topic_model(tid)
        allowed = {E.NONE} if t.state == "live" else {E.NONE, E.UNKNOWN_SERVER_ERROR} if t.state == "deleting" \
            else {E.UNKNOWN_SERVER_ERROR}
        with self.admin() as c:
            (result,) = c.incremental_alter_configs({(2, t.name): [(key, 0, value)]})
        if result.error == E.NONE and key == "min.insync.replicas" and t.state == "live":
            t.min_isr = int(value)
        return self.expect(f"config {t.name} {key}={value}", result.error, allowed)

    # -- failures
    def op_kill(self, broker: int) -> str:
        if self.world.controller() == broker:
            self._controller_unsure = True
        os.kill(self.world.pid(broker), signal.SIGKILL)
        wait(f"broker {broker}'s process to die", lambda: not self.world.alive(broker), 30)
        self.model.brokers[broker] = "dying"
        return "killed"

    def op_stop(self, broker: int) -> str:
        if self.world.controller() == broker:
            self._controller_unsure = True
        cl.stop_processes([self.world.cluster.record(broker)], deadline_s=60)
        self.model.brokers[broker] = "down"
        return "stopped"

    def op_freeze(self, broker: int) -> str:
        if self.world.controller() == broker:
            self._controller_unsure = True
        os.kill(self.world.pid(broker), signal.SIGSTOP)
        self.model.brokers[broker] = "frozen"
        return "frozen"

    def op_thaw(self, broker: int) -> str:
        os.kill(self.world.pid(broker), signal.SIGCONT)
        self.model.brokers[broker] = "up"
        # Back on a new session by itself (if its session expired meanwhile, which the settle waited for).
        wait(f"broker {broker} registered again", lambda: broker in self.world.registered(), SETTLE_S)
        return "thawed"

    def op_restart(self, broker: int) -> str:
        if self.world.alive(broker):
            fail(f"restart of broker {broker}, which still runs")
        if self.model.brokers[broker] == "dying":
            # Killed a moment ago, its registration lives until ZooKeeper expires the session; a broker started
            # meanwhile refuses to (the id is registered by another session), as Kafka 2.6 does. An operator, or
            # a supervisor retrying, starts it once the registration is gone: so do we.
            wait(f"broker {broker}'s old registration to expire", lambda: broker not in self.world.registered(),
                 SETTLE_S)
        cl.restart_broker(self.world.directory, broker)
        address = self.world.cluster.state.brokers[broker]
        wait(f"broker {broker} registered and serving", lambda: broker in self.world.registered()
             and api_versions_ok(address.external_advertised, address.external_port), SETTLE_S)
        self.model.brokers[broker] = "up"
        return "restarted"

    # -- settling
    def settle(self) -> None:
        """Wait until the cluster reached the end state of everything asked so far (see the module docstring)."""
        problems: list[str] = []

        def settled() -> bool:
            problems[:] = self._unsettled()
            return not problems

        deadline = time.monotonic() + SETTLE_S
        while not settled():
            if time.monotonic() > deadline:
                fail(f"not settled within {SETTLE_S:.0f} s:\n  " + "\n  ".join(problems[:20]))
            time.sleep(0.3)
        for b, s in self.model.brokers.items():
            if s == "dying":
                self.model.brokers[b] = "down"

    def _unsettled(self) -> list[str]:
        w, m = self.world, self.model
        out: list[str] = []
        registered = w.registered()
        expected = {b for b, s in m.brokers.items() if s == "up"}
        if registered != expected:
            out.append(f"registered brokers {sorted(registered)}, expected {sorted(expected)}")
            return out  # everything below depends on it
        up = expected
        controller = w.controller()
        if controller not in up:
            out.append(f"controller {controller} is not a live broker")
        for path in ("/admin/reassign_partitions", "/admin/preferred_replica_election"):
            if w.zk.exists(path) is not None:
                out.append(f"{path} still there")
        if w.children("/isr_change_notification"):
            out.append(f"ISR change notifications left: {w.children('/isr_change_notification')[:3]}")
        zk_topics = set(w.children("/brokers/topics"))
        marked = set(w.children("/admin/delete_topics"))
        orphans = set(w.children("/config/topics")) - zk_topics
        if orphans:
            out.append(f"configs of topics that do not exist: {sorted(orphans)}")
        for name in sorted(marked - zk_topics):
            out.append(f"deletion marker of a topic that does not exist: {name}")
        for t in m.topics.values():
            if t.state in ("deleting", "deleted"):
                doc = w.topic(t.name)
                if doc is None:
                    if t.state == "deleting":
                        t.state = "deleted"
                        self.deleted_names.add(t.name)
                    if t.name in marked:
                        out.append(f"{t.name}: marker outlives the topic")
                    continue
                if t.name not in marked:
                    out.append(f"{t.name}: deleting, but no marker and still there")
                replicas = {r for rs in doc["partitions"].values() for r in rs}
                if replicas <= up:
                    out.append(f"{t.name}: deletion not complete though every replica's broker {sorted(replicas)} "
                               "is up")
        for name in sorted(self.deleted_names):
            for b in sorted(up):
                if w.topic_dirs(b, name):
                    out.append(f"{name}: deleted, but broker {b} still has {w.topic_dirs(b, name)}")
        for name in sorted(zk_topics - marked):
            doc = w.topic(name)
            if doc is None:
                continue
            out += self._partition_problems(name, doc, up)
        if not out:
            out += self._metadata_disagreements(up, controller, zk_topics - marked)
        return out

    def _partition_problems(self, name: str, doc: dict[str, Any], up: set[int]) -> list[str]:
        out: list[str] = []
        adding = doc.get("adding_replicas", {})
        removing = doc.get("removing_replicas", {})
        for p_text, replicas in sorted(doc["partitions"].items()):
            state = self.world.state(name, int(p_text))
            if state is None:
                if any(r in up for r in replicas):
                    out.append(f"{name}-{p_text}: no state, though replicas {replicas} include a live broker")
                continue
            leader, isr = state["leader"], state["isr"]
            # Electable: live ISR members that are replicas. A move cancelled after an unclean election made a
            # replica being added leader leaves that replica as the ISR's last member though it is no replica
            # any more, and no leader, as Kafka 2.6 does (test_operation_pairs.py,
            # test_a_move_cancelled_after_an_unclean_election_made_a_replica_being_added_leader).
            live_isr = [r for r in isr if r in up and r in replicas]
            if live_isr:
                if leader not in up or leader not in isr:
                    out.append(f"{name}-{p_text}: leader {leader} (live ISR {live_isr}) is not a live ISR member")
                    continue
                missing = [r for r in replicas if r in up and r not in isr]
                if missing:
                    out.append(f"{name}-{p_text}: live replicas {missing} not back in the ISR {isr}")
            elif leader != -1:
                out.append(f"{name}-{p_text}: leader {leader} while no ISR member {isr} among replicas {replicas} "
                           "is up")
            target = [r for r in replicas if r not in removing.get(p_text, [])]
            if (adding.get(p_text) or removing.get(p_text)) and set(target) <= up and live_isr:
                out.append(f"{name}-{p_text}: move to {target} not complete though its brokers are up")
        return out

    def _metadata_disagreements(self, up: set[int], controller: int, topics: set[str]) -> list[str]:
        """Every live broker's Metadata answer against ZooKeeper."""
        w = self.world
        expected: dict[str, dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]] = {}
        for name in topics:
            doc = w.topic(name)
            if doc is None:
                continue
            parts = {}
            for p_text, replicas in doc["partitions"].items():
                state = w.state(name, int(p_text)) or {"leader": -1, "isr": []}
                parts[int(p_text)] = (state["leader"], tuple(replicas), tuple(sorted(state["isr"])))
            expected[name] = parts
        out: list[str] = []
        for b in sorted(up):
            try:
                with w.client([b], timeout_ms=5000) as c:
                    md = c.metadata()
            except (ClientError, KafkaError, OSError) as exc:
                out.append(f"broker {b} did not answer Metadata: {exc}")
                continue
            if set(md.brokers) != up or md.controller_id != controller:
                out.append(f"broker {b}: brokers {sorted(md.brokers)} controller {md.controller_id}, "
                           f"ZooKeeper {sorted(up)} controller {controller}")
            seen = {name: {p: (i.leader, i.replicas, tuple(sorted(i.isr))) for p, i in info.partitions.items()}
                    for name, info in md.topics.items()}
            if seen != expected:
                diff = sorted(n for n in set(seen) | set(expected) if seen.get(n) != expected.get(n))
                out.append(f"broker {b}'s metadata differs from ZooKeeper for {diff[:3]}: "
                           f"{[(n, seen.get(n), expected.get(n)) for n in diff[:2]]}")
        return out

    # -- invariants
    def check_produce(self) -> None:
        """acks=all works on every partition of every live topic with enough in-sync replicas up."""
        up = set(self.model.up())
        with self.admin() as c:
            for t in self.model.live_topics():
                for p in range(t.partitions):
                    state = self.world.state(t.name, p)
                    if state is None or state["leader"] not in up:
                        continue
                    if len([r for r in state["isr"] if r in up]) < t.min_isr:
                        continue
                    value = f"probe|{t.name}|{p}|{next(self.probe_counter)}".encode()
                    try:
                        # Stamped now: a record stamped 1970 would roll its segment and go by retention.ms.
                        record = Record(0, int(time.time() * 1000), None, value)
                        result = c.produce(t.name, p, [record], acks=-1, timeout_ms=15_000)
                    except (KafkaError, ClientError) as exc:
                        fail(f"acks=all produce to {t.name}-{p} (ISR {state['isr']}, leader {state['leader']}, "
                             f"min.insync.replicas {t.min_isr}) failed: {exc}")
                    assert result is not None
                    self.load.record_ack(t.name, p, result.base_offset, value)
                    self.probes[(t.name, p, result.base_offset)] = value
                    fetched = c.fetch(t.name, p, result.base_offset, max_wait_ms=100)
                    if not fetched.records or fetched.records[0].value != value:
                        fail(f"{t.name}-{p}: the record acknowledged at {result.base_offset} is not read back there")

    def check_records(self, consumer_must_see_probes: bool) -> None:
        """Every acknowledged record, and every record the consumer group read, is where it was."""
        acked, seen, conflicts = self.load.snapshot()
        if conflicts:
            fail("the consumer read two values at one offset: " + "; ".join(conflicts[:3]))
        up = set(self.model.up())
        live = {t.name: t for t in self.model.live_topics()}
        wanted: dict[tuple[str, int], dict[int, bytes]] = {}
        for (topic, p, o), v in acked.items():
            if topic in live and (topic, p) not in self.unclean:
                wanted.setdefault((topic, p), {})[o] = v
        read_back: dict[tuple[str, int], dict[int, bytes]] = {}
        with self.admin() as c:
            for (topic, p), offsets in sorted(wanted.items()):
                state = self.world.state(topic, p)
                if state is None or state["leader"] not in up:
                    continue  # offline now; checked when it is back
                end = max(offsets) + 1
                found: dict[int, bytes] = {}
                offset = 0
                # A leader elected a moment ago learns the high watermark from its followers' next fetches (as in
                # Kafka): it may stand below what the old leader acknowledged for a moment, never for long.
                hw_deadline = time.monotonic() + SETTLE_S
                while offset < end:
                    try:
                        result = c.fetch(topic, p, offset, max_wait_ms=200)
                    except KafkaError as exc:
                        try:
                            bounds = c.list_offsets(topic, {p: -2})[p].offset, c.list_offsets(topic, {p: -1})[p].offset
                        except KafkaError as again:
                            bounds = (str(again), "")
                        fail(f"{topic}-{p}: reading at {offset} failed: {exc} (state {self.world.state(topic, p)}, "
                             f"client's leader {c.leader_for(topic, p)}, log start/end {bounds}, acknowledged "
                             f"offsets {sorted(offsets)[:5]}...{sorted(offsets)[-3:]})")
                    if result.high_watermark < end and time.monotonic() < hw_deadline:
                        time.sleep(0.3)
                        continue
                    if result.high_watermark < end:
                        fail(f"{topic}-{p}: high watermark {result.high_watermark} below an acknowledged offset "
                             f"{end - 1} for {SETTLE_S:.0f} s")
                    for r in result.records:
                        found[r.offset] = r.value or b""
                    if result.next_offset <= offset:
                        fail(f"{topic}-{p}: no progress reading at {offset}")
                    offset = result.next_offset
                read_back[(topic, p)] = found
                missing = {o: v for o, v in offsets.items() if found.get(o) != v}
                if missing:
                    o = min(missing)
                    fail(f"{topic}-{p}: {len(missing)} of {len(offsets)} acknowledged records lost, e.g. offset {o}: "
                         f"acknowledged {missing[o]!r}, found {found.get(o)!r}")
        for (topic, p, o), v in seen.items():
            found = read_back.get((topic, p), {})
            if o in found and found[o] != v:
                fail(f"{topic}-{p}: the consumer group read {v!r} at {o}, the log now has {found[o]!r}")
        if consumer_must_see_probes:
            pending = {k: v for k, v in self.probes.items() if k[0] in live and (k[0], k[1]) not in self.unclean}

            def all_seen() -> bool:
                _, now_seen, _ = self.load.snapshot()
                return all(now_seen.get(k) == v for k, v in pending.items())

            try:
                wait("the consumer group to read every probe record", all_seen, SETTLE_S)
            except ChaosFailure:
                _, now_seen, _ = self.load.snapshot()
                unseen = sorted(k for k, v in pending.items() if now_seen.get(k) != v)
                fail(f"the consumer group did not read {len(unseen)} probe records, e.g. {unseen[:5]}")

    # -- the end of a sequence
    def restore_and_clean_up(self) -> None:
        """Every broker back, every invariant once more with everything up, then the sequence's topics deleted
        and gone from every broker's disk."""
        step: Step = [["thaw", b] for b, s in self.model.brokers.items() if s == "frozen"]
        step += [["restart", b] for b, s in self.model.brokers.items() if s in ("down", "dying")]
        if step:
            self.run_step(step, len(self.steps))
        self.settle()
        self.check_produce()
        self.check_records(consumer_must_see_probes=True)
        live = self.model.live_topics()
        for t in live:
            t.state = "deleting"
        self._refresh_targets()
        with self.admin() as c:
            results = c.delete_topics([t.name for t in live], timeout_ms=30_000) if live else {}
        bad = {n: r.error.name for n, r in results.items() if r.error != E.NONE}
        if bad:
            fail(f"deleting the sequence's topics with every broker up: {bad}")
        self.settle()
        leftovers = [t.name for t in self.model.topics.values() if t.state not in ("deleted", "absent")]
        if leftovers:
            fail(f"topics not deleted at the end: {leftovers}")


# ------------------------------------------------------------------------------------------------------ sequences


@dataclass
class Outcome:
    seed: int | None
    steps: list[Step]
    error: str | None
    seconds: float

    def replay_json(self) -> str:
        return json.dumps(self.steps, separators=(",", ":"))

    def report(self) -> str:
        head = f"sequence seed={self.seed} ({len(self.steps)} steps, {self.seconds:.0f} s)"
        if self.error is None:
            return f"{head}: ok"
        return (f"{head}: FAILED\n{self.error}\nreplay it with:\n"
                f"  nice -n 10 .venv/bin/python -m tests.cluster.chaos --replay '{self.replay_json()}'\n")


_prefixes = itertools.count()


def run_sequence(world: World, *, seed: int | None = None, steps: int = 20, replay: Sequence[Step] | None = None,
                 out: Callable[[str], None] = print) -> Outcome:
    """One sequence on ``world``: generated from ``seed`` (``steps`` of them), or ``replay``'s steps exactly."""
    prefix = f"c{os.getpid() % 10000}x{next(_prefixes)}"
    start = time.monotonic()
    runner = Runner(world, prefix, out)
    out(f"sequence seed={seed} prefix={prefix}" + (" (replay)" if replay is not None else ""))
    error: str | None = None
    try:
        if replay is not None:
            for i, step in enumerate(replay):
                runner.run_step([list(op) for op in step], i)
                if (i + 1) % CHECKPOINT_EVERY == 0:
                    runner.check_records(consumer_must_see_probes=False)
        else:
            generator = Generator(random.Random(seed), runner.model, world)
            for i in range(steps):
                runner.run_step(generator.first_step() if i == 0 else generator.step(), i)
                if (i + 1) % CHECKPOINT_EVERY == 0:
                    runner.check_records(consumer_must_see_probes=False)
        runner.restore_and_clean_up()
    except ChaosFailure as exc:
        error = str(exc)
    except Exception:  # noqa: BLE001  (a crash of the harness is a failure to look at, with its replay, too)
        error = traceback.format_exc()
    finally:
        runner.close()
    outcome = Outcome(seed, runner.steps, error, time.monotonic() - start)
    out(outcome.report())
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int,
                        help="how many sequences (the long form: hundreds); default 1, or no limit with --minutes")
    parser.add_argument("--minutes", type=float,
                        help="start no new sequence after this many minutes (the one running finishes)")
    parser.add_argument("--steps", type=int, default=20, help="steps per generated sequence")
    parser.add_argument("--seed", type=int, help="the first sequence's seed (then seed+1, ...); default random")
    parser.add_argument("--replay", help="a failed sequence's JSON, to run exactly that")
    parser.add_argument("--dir", type=Path, help="where the cluster lives (default: a new temporary directory)")
    parser.add_argument("--fresh-cluster-every", type=int, default=25,
                        help="start a new cluster after this many sequences (and after every failure)")
    parser.add_argument("--failures", type=Path, help="append each failure's report to this file")
    args = parser.parse_args(argv)
    # SIGTERM ends the run like Ctrl-C: the cluster of the moment is stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    base = args.dir or Path(tempfile.mkdtemp(prefix="sofakafka-chaos-"))
    first = args.seed if args.seed is not None else random.randrange(1 << 30)
    runs = 1 if args.replay else args.sequences if args.sequences is not None else 1 if args.minutes is None \
        else 1 << 30
    until = None if args.minutes is None else time.monotonic() + args.minutes * 60
    failures = 0
    done = 0
    world: World | None = None
    used = 0
    try:
        for n in range(runs):
            if until is not None and time.monotonic() >= until:
                break
            if world is None:
                world = World(base / f"cluster-{n}")
                used = 0
            seed = None if args.replay else first + n
            outcome = run_sequence(world, seed=seed, steps=args.steps,
                                   replay=json.loads(args.replay) if args.replay else None)
            used += 1
            done += 1
            sys.stdout.flush()
            if outcome.error is not None:
                failures += 1
                if args.failures is not None:
                    with open(args.failures, "a") as f:
                        f.write(outcome.report() + "\n" + world.logs()[-20000:] + "\n\n")
            if outcome.error is not None or used >= args.fresh_cluster_every:
                world.close()
                world = None
    finally:
        if world is not None:
            world.close()
        # Also on Ctrl-C or SIGTERM: what ran until then.
        print(f"{done} sequences, {failures} failed", flush=True)
        if args.dir is None and not failures:
            shutil.rmtree(base, ignore_errors=True)  # a temporary directory of ours, with nothing to look at
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
