"""Transactions through broker failures: three broker processes on ZooKeeper, kill -9 under transactional load.

A librdkafka transactional producer commits transactions of 30 records over two topics (RF=3,
min.insync.replicas=2, ``__transaction_state`` with three replicas too) in a loop, and keeps the outcome of
each: committed (``commit_transaction`` returned), aborted (``abort_transaction`` returned after an abortable
error), or unknown (a fatal error: a new producer instance took over with the same transactional id). Mid-load
one broker is killed with SIGKILL: the transaction coordinator's, or the leader of a data partition that is not
the coordinator. Then, once every partition has a live leader and the producer has committed more:

* nothing committed is lost: every record of every committed transaction is read exactly once by read_committed;
* nothing aborted becomes visible, and a transaction of unknown outcome is all or nothing;
* the last stable offset advances again: at the end it equals the high watermark of every partition (no
  transaction is left hanging).

The killed broker is restarted and rejoins every ISR before the next test.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer

from sofakafka.client import READ_COMMITTED, NewTopic
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from tests.cluster.test_failover import Cluster, running_cluster, wait_for
from tests.integration.helpers import consume_to_end

PARTITIONS = 3
TXN_SIZE = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("txn-failover"), {
        "replica.lag.time.max.ms": "6000",
        "auto.leader.rebalance.enable": "false",
        "transaction.state.log.num.partitions": "3",
        "offsets.topic.num.partitions": "3",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        "group.initial.rebalance.delay.ms": "0",
    }) as c:
        yield c


class TransactionalLoad:
    """Transactions in a loop from a thread; ``outcomes[k]`` is "committed", "aborted" or "unknown"."""

    def __init__(self, bootstrap: str, topics: tuple[str, str], txn_id: str) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.txn_id = txn_id
        self.outcomes: dict[int, str] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="txn-load", daemon=True)

    def _producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id, "linger.ms": 2,
                      "transaction.timeout.ms": 30_000, "socket.timeout.ms": 10_000, "retry.backoff.ms": 100,
                      "topic.metadata.refresh.interval.ms": 1000})
        self._retry(lambda: p.init_transactions(30))
        return p

    def _retry(self, action: object) -> None:
        assert callable(action)
        deadline = time.monotonic() + 120
        while True:
            try:
                action()
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                self.errors.append(f"retrying: {exc.args[0]}")

    def _run(self) -> None:
        p = self._producer()
        k = 0
        while not self._stop.is_set():
            k += 1
            outcome = "unknown"
            try:
                p.begin_transaction()
                for i in range(TXN_SIZE):
                    value = b"txn-%d-%d" % (k, i)
                    while True:
                        try:
                            p.produce(self.topics[i % 2], value, partition=i % PARTITIONS)
                            break
                        except BufferError:
                            p.poll(0.05)
                self._retry(functools.partial(p.commit_transaction, 30))
                outcome = "committed"
            except KafkaException as exc:
                error = exc.args[0]
                self.errors.append(str(error))
                if error.txn_requires_abort():
                    try:
                        self._retry(functools.partial(p.abort_transaction, 30))
                        outcome = "aborted"
                    except KafkaException as again:
                        self.errors.append(f"abort failed: {again.args[0]}")
                if outcome == "unknown":
                    # Fatal (or the abort failed): a new instance fences this one and aborts what is open.
                    p = self._producer()
            with self._lock:
                self.outcomes[k] = outcome

    def count(self, outcome: str = "committed") -> int:
        with self._lock:
            return sum(1 for o in self.outcomes.values() if o == outcome)

    def __enter__(self) -> TransactionalLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive(), "the transactional producer did not stop"


def coordinator_of(cluster: Cluster, txn_id: str) -> int:
    def ask() -> bool:
        with cluster.client() as c:
            r = c.any_connection().send(FindCoordinatorRequest(key=txn_id, key_type=1), 3)
        assert isinstance(r, FindCoordinatorResponse)
        found[0] = r.node_id if r.error_code == ErrorCode.NONE else -1
        return found[0] >= 0

    found = [-1]
    wait_for(f"the coordinator of {txn_id}", ask)
    return found[0]


def create_topics(cluster: Cluster, tag: str) -> tuple[str, str]:
    names = (f"txn-a-{tag}", f"txn-b-{tag}")
    with cluster.client() as c:
        result = c.create_topics([NewTopic(n, PARTITIONS, 3, configs={"min.insync.replicas": "2"}) for n in names])
    assert all(r.error == ErrorCode.NONE for r in result.values()), result
    cluster.wait_full_isr(list(names))
    return names


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    return consume_to_end(bootstrap, topic, "read_committed", PARTITIONS, timeout_s=120)


def check(cluster: Cluster, load: TransactionalLoad) -> None:
    bootstrap = cluster.all_bootstrap
    # The LSO catches up with the high watermark everywhere: no transaction hangs.
    def settled() -> bool:
        with cluster.client() as c:
            for t in load.topics:
                ends = range(PARTITIONS)
                hw = c.list_offsets(t, dict.fromkeys(ends, -1))
                lso = c.list_offsets(t, dict.fromkeys(ends, -1), isolation_level=READ_COMMITTED)
                if any(lso[p].offset != hw[p].offset for p in ends):
                    return False
        return True

    wait_for("the last stable offset to reach the high watermark everywhere", settled, 120)
    seen = Counter(v for t in load.topics for v in read_committed(bootstrap, t))
    assert all(n == 1 for n in seen.values()), [v for v, n in seen.items() if n > 1][:5]
    by_txn: dict[int, int] = Counter(int(v.split(b"-")[1]) for v in seen)
    for k, outcome in load.outcomes.items():
        got = by_txn.get(k, 0)
        if outcome == "committed":
            assert got == TXN_SIZE, f"committed transaction {k} has {got} of {TXN_SIZE} records"
        elif outcome == "aborted":
            assert got == 0, f"aborted transaction {k} shows {got} records"
        else:
            assert got in (0, TXN_SIZE), f"transaction {k} of unknown outcome is partly visible ({got})"
    assert set(by_txn) <= set(load.outcomes)


def fail_during_transactions(cluster: Cluster, tag: str, pick_victim: str) -> None:
    topics = create_topics(cluster, tag)
    txn_id = f"failover-{tag}"
    with TransactionalLoad(cluster.all_bootstrap, topics, txn_id) as load:
        wait_for("transactions committed before the failure", lambda: load.count() >= 5)
        coordinator = coordinator_of(cluster, txn_id)
        if pick_victim == "coordinator":
            victim = coordinator
        else:
            leaders = [leader for leader, _ in cluster.partitions(topics[0]).values()]
            victim = next((b for b in leaders if b != coordinator), leaders[0])
        cluster.kill(victim)
        before = load.count()
        wait_for("a live leader for every partition", lambda: all(
            leader not in (victim, -1) for t in topics for leader, _ in cluster.partitions(t).values()))
        wait_for("transactions committing again after the failure", lambda: load.count() >= before + 5, 120)
    try:
        assert load.count() > before
        if pick_victim == "coordinator":
            assert coordinator_of(cluster, txn_id) != victim
        check(cluster, load)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noutcomes: {Counter(load.outcomes.values())}, errors: {load.errors[-10:]}\n"
                             f"{cluster.logs()}") from None
    finally:
        cluster.restart(victim, list(topics))


def test_kill_9_of_the_transaction_coordinator(cluster: Cluster) -> None:
    fail_during_transactions(cluster, "coordinator", "coordinator")


def test_kill_9_of_a_data_partition_leader(cluster: Cluster) -> None:
    fail_during_transactions(cluster, "leader", "leader")

