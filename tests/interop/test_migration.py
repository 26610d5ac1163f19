"""Migration both ways: a log dir Apache Kafka 2.6 wrote is served by sofakafka started on it, and the reverse.

A user replaces a Kafka broker by a sofakafka one (or back) on the same ZooKeeper (topic metadata lives there,
in Kafka 2.6's znodes) and the same log dir (the partitions, checkpoints, producer-state snapshots, and
``__consumer_offsets``). One broker writes what a user's data looks like (interop/java/scenarios:
``migration.write``: segments, codecs, headers, timestamps, a log start offset moved by DeleteRecords, a
compacted topic after the cleaner ran, an idempotent producer's batches, a group's committed offsets) and stops
cleanly; the other starts on the same directory and ZooKeeper chroot with the same broker id. What the Java
clients read (``migration.read``: every record's offset, timestamp, key, value and headers, each partition's
log start and end offsets, the topics' configs, the group's offsets and metadata) must be the same before and
after the move, and the data must go on (``migration.resume``: the group resumes at its offsets, an idempotent
producer appends after the old end).

Transactions: each side writes committed and aborted transactions (issue 11 gave sofakafka a transaction
coordinator), which the other serves read_committed as the writer did.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import ZooKeeperServer
from tests.integration.conftest import BrokerProcess
from tests.reference.fixtures import ScenarioJVMs
from tests.reference.kafka import SHARED_SETTINGS, ReferenceKafka, unique_chroot

pytestmark = pytest.mark.timeout(600)

# Both brokers of a move get these: one broker's replication for the internal topics, and a cleaner that looks
# for work every second instead of every 15 (the compacted topic is compacted before the move).
MOVE_SETTINGS = {**SHARED_SETTINGS, "log.cleaner.backoff.ms": "1000"}
# What the transactional topic looks like to a read_committed reader; compared on its own (issue 11).
TRANSACTIONAL = "transactional"


@dataclass
class Move:
    """What the clients read before the move (from the broker that wrote the log dir) and after it (from the
    other one, started on it), and the data going on afterwards."""

    written: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any]
    resumed: dict[str, Any]
    new_broker_log: str


def sofakafka_on(base_dir: Path, zk_connect: str, data_dir: Path) -> BrokerProcess:
    return BrokerProcess(base_dir, {**MOVE_SETTINGS, "broker.id": "0", "log.dirs": str(data_dir),
                                    "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": "6000"})


def kafka_on(base_dir: Path, zk_connect: str, data_dir: Path | None = None) -> ReferenceKafka:
    kafka = ReferenceKafka(base_dir, zk_connect, broker_id=0, overrides=dict(MOVE_SETTINGS))
    if data_dir is not None:
        kafka.data_dir = data_dir
        kafka.settings["log.dirs"] = str(data_dir)
    return kafka


def move(jvms: ScenarioJVMs, first: Any, second_for: Any, prefix: str, transactions: bool) -> Move:
    """``first`` (started) writes and is read, then stopped cleanly; ``second_for(first)`` starts on its log
    dir and is read again; both are gone when this returns."""
    jvm = jvms["clients-2.6"]
    second = None
    try:
        written = jvm.run("migration.write", first.bootstrap, prefix=prefix, transactions=transactions)
        before = jvm.run("migration.read", first.bootstrap, prefix=prefix, transactions=transactions)
        code = first.stop()
        assert code in (0, 143), f"the first broker did not stop cleanly ({code}):\n{first.log_tail()}"
        second = second_for(first)
        second.start()
        after = jvm.run("migration.read", second.bootstrap, prefix=prefix, transactions=transactions)
        resumed = jvm.run("migration.resume", second.bootstrap, prefix=prefix)
        return Move(written, before, after, resumed, second.log_path.read_text(errors="replace"))
    finally:
        first.kill()
        if second is not None:
            second.kill()


@pytest.fixture(scope="module")
def moves(tmp_path_factory: pytest.TempPathFactory, reference_zookeeper: ZooKeeperServer,
          scenario_jvms: ScenarioJVMs) -> dict[str, Move]:
    """Both moves, at once (each mostly waits on its brokers): ``from_kafka``, where Kafka 2.6 writes
    (transactions included) and sofakafka serves, and ``from_sofakafka``, where sofakafka writes (on ZooKeeper,
    as a cluster's broker does) and Kafka 2.6 serves."""
    def from_kafka() -> Move:
        zk = reference_zookeeper.hosts + unique_chroot("from-kafka")
        kafka = kafka_on(tmp_path_factory.mktemp("kafka-wrote"), zk)
        try:
            kafka.start()
        except BaseException:
            kafka.kill()
            raise
        return move(scenario_jvms, kafka,
                    lambda k: sofakafka_on(tmp_path_factory.mktemp("sofakafka-serves"), zk, k.data_dir),
                    "from-kafka", transactions=True)

    def from_sofakafka() -> Move:
        zk = reference_zookeeper.hosts + unique_chroot("from-sofakafka")
        base = tmp_path_factory.mktemp("sofakafka-wrote")
        sofakafka = sofakafka_on(base, zk, base / "data").start()
        return move(scenario_jvms, sofakafka,
                    lambda s: kafka_on(tmp_path_factory.mktemp("kafka-serves"), zk, s.data_dir),
                    "from-sofakafka", transactions=True)

    with ThreadPoolExecutor(2) as pool:
        futures = {"from_kafka": pool.submit(from_kafka), "from_sofakafka": pool.submit(from_sofakafka)}
        return {name: f.result() for name, f in futures.items()}


@pytest.fixture
def from_kafka(moves: dict[str, Move]) -> Move:
    return moves["from_kafka"]


@pytest.fixture
def from_sofakafka(moves: dict[str, Move]) -> Move:
    return moves["from_sofakafka"]


def comparable(read: dict[str, Any], *leave_out: str) -> dict[str, Any]:
    """A read as it must survive a move: a compacted topic by each key's latest record (the log start, the end
    offset and the configs too), since either broker's cleaner may compact more at any time; the rest whole."""
    out = {k: v for k, v in read.items() if k not in leave_out}
    out["compacted"] = {p: {k: v for k, v in part.items() if k not in ("records", "digest", "firstAndLast")}
                        if p != "configs" else part for p, part in read["compacted"].items()}
    return out


def check_written(move: Move) -> None:
    # The set-up did what it meant to: the cleaner compacted, DeleteRecords moved the log start, offsets are there.
    assert move.written["compactedFewerThanWritten"] is True
    assert move.before["plain"]["0"]["logStart"] == 7
    assert move.before["compacted"]["0"]["records"] < move.written["compactedWritten"]
    assert len(move.before["compacted"]["0"]["latestPerKey"]) == 10  # ten keys, one of them a tombstone now
    assert move.before["compacted"]["0"]["latestPerKey"]["key-3"] == "393:null"
    assert len(move.before["groupOffsets"]) == move.written["committed"] == 4


def check_resumed(move: Move) -> None:
    assert move.resumed["groupResumedAt"] == {"0": 50, "1": 51, "2": 52}
    assert move.resumed["appendedAt"] == move.before["idempotent"]["0"]["end"]


def test_a_kafka_2_6_log_dir_is_served_by_sofakafka_every_record_and_offset_intact(from_kafka: Move) -> None:
    check_written(from_kafka)
    assert comparable(from_kafka.after, TRANSACTIONAL) == comparable(from_kafka.before, TRANSACTIONAL)


def test_the_data_goes_on_after_the_move_to_sofakafka(from_kafka: Move) -> None:
    check_resumed(from_kafka)


def test_kafka_2_6_transactions_are_served_read_committed_by_sofakafka(from_kafka: Move) -> None:
    """Committed and aborted transactions Kafka wrote (markers, .txnindex, producer snapshots): a read_committed
    reader of sofakafka sees exactly the committed records, at the same offsets, and the same end offset."""
    assert from_kafka.before[TRANSACTIONAL]["0"]["records"] == 20  # 4 committed transactions of 5 records
    assert from_kafka.after[TRANSACTIONAL] == from_kafka.before[TRANSACTIONAL]


def test_a_sofakafka_log_dir_is_served_by_kafka_2_6_every_record_and_offset_intact(from_sofakafka: Move) -> None:
    check_written(from_sofakafka)
    assert comparable(from_sofakafka.after) == comparable(from_sofakafka.before)


def test_the_data_goes_on_after_the_move_to_kafka_2_6(from_sofakafka: Move) -> None:
    check_resumed(from_sofakafka)


def test_kafka_2_6_finds_sofakafkas_log_dir_clean(from_sofakafka: Move) -> None:
    """A clean stop leaves the log dir as Kafka's own clean shutdown does: Kafka starts on it without recovering
    a segment or rebuilding an index, and complains of nothing."""
    log = from_sofakafka.new_broker_log
    for sign in ("Recovering unflushed segment", "recovering segment", "rebuilding index", "Corrupt", "ERROR"):
        assert sign.lower() not in log.lower(), f"Kafka's log says {sign!r}:\n{log[-8000:]}"


def test_sofakafka_finds_kafkas_log_dir_clean(from_kafka: Move) -> None:
    """Kafka's clean shutdown leaves indexes and checkpoints sofakafka takes as they are: no index rebuilt, no
    byte truncated, no snapshot refused, nothing logged as an error."""
    log = from_kafka.new_broker_log
    for sign in ("rebuilding indexes", "truncated", "corrupt", "Traceback", "ERROR"):
        assert sign.lower() not in log.lower(), f"sofakafka's log says {sign!r}:\n{log[-8000:]}"
