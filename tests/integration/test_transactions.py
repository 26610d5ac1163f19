"""Transactions with stock clients against a real broker process.

* confluent-kafka (librdkafka), kafka-python and aiokafka transactional producers commit and abort across two
  topics; read_committed consumers (librdkafka and kafka-python) see exactly the committed records,
  read_uncommitted ones see the aborted ones too, and kcat ``-X isolation.level=read_committed`` agrees;
* a consume-transform-produce application (txn_pipeline_process.py) killed with kill -9 mid-way and started
  again leaves every input record exactly once in the output, and its group's committed offsets at the input's
  end;
* a producer that stops without ending its transaction is aborted after its ``transaction.timeout.ms`` and the
  last stable offset moves;
* compaction of a compacted topic drops aborted data and, past the delete horizon, the markers left without data.

One broker serves the module, with the timed-out transaction check every 500 ms instead of 10 s.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kafka_errors

from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.records import ControlRecordType, decode_control_key, decode_records, iter_batches
from tests.integration import wire
from tests.integration.conftest import _USED_BY_CURRENT_TEST, BrokerProcess
from tests.integration.helpers import consume_to_end, wait_for

REPO = Path(__file__).resolve().parents[2]
OVERRIDES = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "log.cleaner.backoff.ms": "200",
}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-broker"), OVERRIDES).start()
    try:
        yield b
    finally:
        b.kill()


@pytest.fixture
def broker(txn_broker: BrokerProcess) -> Iterator[BrokerProcess]:
    if txn_broker not in _USED_BY_CURRENT_TEST:
        _USED_BY_CURRENT_TEST.append(txn_broker)
    assert txn_broker.alive(), f"the module's broker died earlier:\n{txn_broker.log_tail()}"
    yield txn_broker
    assert txn_broker.alive(), f"the broker died during this test:\n{txn_broker.log_tail()}"


def create_topics(bootstrap: str, *names: str, partitions: int = 2, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1, config=config or {}) for n in names])
    for f in futures.values():
        f.result(30)


def consume_all(bootstrap: str, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    """Every record up to the end the isolation level allows, sorted."""
    return sorted(consume_to_end(bootstrap, topic, isolation, partitions))


def kafka_python_read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=3000)
    c.assign([KpTopicPartition(topic, p) for p in range(2)])
    c.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    time.sleep(0.5)
    for records in c.poll(timeout_ms=500).values():  # nothing more may come
        got += [r.value for r in records]
    c.close()
    return sorted(got)


def kcat_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    exe = shutil.which("kcat")
    assert exe, "kcat is not installed: scripts/test.sh installs it with apt"
    done = subprocess.run([exe, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                           "-X", f"isolation.level={isolation}", "-f", "%s\n"],
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return sorted(line for line in done.stdout.split(b"\n") if line)


# -- each client: commit, abort, commit --------------------------------------------------------------------------------

def run_confluent(bootstrap: str, txn_id: str, a: str, b: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(60)
    for values, commit in SCENARIO:
        p.begin_transaction()
        for i, v in enumerate(values):
            p.produce(a, key=b"k%d" % i, value=v + b"-a")
            if v.startswith(b"first") or v.startswith(b"gone"):
                p.produce(b, key=b"k%d" % i, value=v + b"-b")
        if commit:
            p.commit_transaction(60)
        else:
            p.flush(30)
            p.abort_transaction(60)


def run_kafka_python(bootstrap: str, txn_id: str, a: str, b: str) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    p.init_transactions()
    for values, commit in SCENARIO:
        p.begin_transaction()
        for i, v in enumerate(values):
            p.send(a, key=b"k%d" % i, value=v + b"-a")
            if v.startswith(b"first") or v.startswith(b"gone"):
                p.send(b, key=b"k%d" % i, value=v + b"-b")
        if commit:
            p.commit_transaction()
        else:
            p.flush()
            p.abort_transaction()
    p.close()


def run_aiokafka(bootstrap: str, txn_id: str, a: str, b: str) -> None:
    async def main() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        await p.start()
        try:
            for values, commit in SCENARIO:
                await p.begin_transaction()
                for i, v in enumerate(values):
                    await p.send(a, key=b"k%d" % i, value=v + b"-a")
                    if v.startswith(b"first") or v.startswith(b"gone"):
                        await p.send(b, key=b"k%d" % i, value=v + b"-b")
                if commit:
                    await p.commit_transaction()
                else:
                    await p.flush()
                    await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(main())


SCENARIO = [
    ([b"first-%d" % i for i in range(6)], True),
    ([b"gone-%d" % i for i in range(4)], False),
    ([b"last-%d" % i for i in range(3)], True),
]
CLIENTS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_commit_and_abort_across_two_topics(broker: BrokerProcess, topic_name: str, client: str) -> None:
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    create_topics(broker.bootstrap, a, b)
    CLIENTS[client](broker.bootstrap, f"txn-{topic_name}", a, b)
    committed_a = sorted([b"first-%d-a" % i for i in range(6)] + [b"last-%d-a" % i for i in range(3)])
    committed_b = sorted(b"first-%d-b" % i for i in range(6))
    aborted_a = sorted(b"gone-%d-a" % i for i in range(4))
    aborted_b = sorted(b"gone-%d-b" % i for i in range(4))
    assert consume_all(broker.bootstrap, a, "read_committed") == committed_a
    assert consume_all(broker.bootstrap, b, "read_committed") == committed_b
    assert consume_all(broker.bootstrap, a, "read_uncommitted") == sorted(committed_a + aborted_a)
    assert consume_all(broker.bootstrap, b, "read_uncommitted") == sorted(committed_b + aborted_b)
    assert kafka_python_read_committed(broker.bootstrap, a, len(committed_a)) == committed_a
    assert kcat_values(broker.bootstrap, a, "read_committed") == committed_a
    assert kcat_values(broker.bootstrap, b, "read_uncommitted") == sorted(committed_b + aborted_b)


# -- exactly once through a crash ----------------------------------------------------------------------------------------

def test_consume_transform_produce_survives_kill_9(broker: BrokerProcess, topic_name: str) -> None:
    src, dst, group = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-app"
    create_topics(broker.bootstrap, src, dst, partitions=3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    inputs = [b"record-%04d" % i for i in range(1500)]
    for i, v in enumerate(inputs):
        p.produce(src, key=b"%d" % i, value=v)
    assert p.flush(60) == 0
    cmd = [sys.executable, str(REPO / "tests/integration/txn_pipeline_process.py"), broker.bootstrap, src, dst,
           group, f"{topic_name}-txn"]

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)

    app = start()
    try:
        assert app.stdout is not None
        progress = 0
        deadline = time.monotonic() + 90
        while progress < 300:
            line = app.stdout.readline()
            assert line, f"the application exited early: {app.stderr.read() if app.stderr else ''}"
            assert time.monotonic() < deadline, "no progress"
            if line.startswith("committed "):
                progress = int(line.split()[1])
        app.kill()  # kill -9, most likely inside a transaction (each one stays open for 50 ms)
        app.wait(30)
        app.stdout.close()
        if app.stderr is not None:
            app.stderr.close()
        app = start()
        out, err = app.communicate(timeout=180)
        assert app.returncode == 0, f"restarted application failed:\n{out}\n{err}"
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(30)
    assert consume_all(broker.bootstrap, dst, "read_committed", partitions=3) == sorted(v.upper() for v in inputs)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(src, p) for p in range(3)], timeout=30)
    ends = [c.get_watermark_offsets(TopicPartition(src, p), timeout=30)[1] for p in range(3)]
    c.close()
    assert [tp.offset for tp in committed] == ends and sum(ends) == len(inputs)


# -- a producer that goes away ---------------------------------------------------------------------------------------

def test_a_producer_that_stops_mid_transaction_is_aborted_after_its_timeout(broker: BrokerProcess,
                                                                           topic_name: str) -> None:
    create_topics(broker.bootstrap, topic_name, partitions=1)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{topic_name}-txn",
                      transaction_timeout_ms=2000)
    p.init_transactions()
    p.begin_transaction()
    p.send(topic_name, b"never-committed")
    p.flush()
    # The producer is gone without EndTxn (close() does not end a transaction).
    p.close(timeout=0)
    reader = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed")
    tp = KpTopicPartition(topic_name, 0)
    assert reader.end_offsets([tp])[tp] == 0  # the LSO is held at the open transaction
    wait_for("the LSO to move past the aborted transaction",
             lambda: True if reader.end_offsets([tp])[tp] == 2 else None, timeout_s=30)
    reader.close()
    assert consume_all(broker.bootstrap, topic_name, "read_committed", partitions=1) == []
    assert consume_all(broker.bootstrap, topic_name, "read_uncommitted", partitions=1) == [b"never-committed"]


# -- compaction --------------------------------------------------------------------------------------------------------

def _raw_batches(broker: BrokerProcess, topic: str) -> list[tuple[str, list[bytes | None]]]:
    """Every batch of partition 0 as stored: ("COMMIT"/"ABORT", []) for markers, ("data", values) otherwise."""
    out: list[tuple[str, list[bytes | None]]] = []
    offset = 0
    with socket.create_connection((broker.host, broker.port), timeout=30) as s:
        while True:
            t = FetchRequest.FetchableTopic
            r = wire.call(s, FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, topics=[
                t(name=topic, fetch_partitions=[t.FetchPartition(partition_index=0, fetch_offset=offset,
                                                                 max_bytes=1 << 20)])]), 11)
            p = r.topics[0].partitions[0]
            if p.error_code == 1:  # OFFSET_OUT_OF_RANGE: the cleaner moved the log start
                offset = p.log_start_offset
                continue
            data = bytes(p.records)
            batches = list(iter_batches(data))
            if not batches:
                return out
            for h in batches:
                records = decode_records(data, h)
                if h.is_control:
                    out.append((ControlRecordType(decode_control_key(records[0].key)).name if records else "empty",
                                []))
                else:
                    out.append(("data", [rec.value for rec in records]))
            offset = batches[-1].next_offset


def test_compaction_removes_aborted_data_and_spent_markers(broker: BrokerProcess, topic_name: str) -> None:
    """As Kafka's cleaner: aborted records go at once; a marker goes, once past ``delete.retention.ms``, when
    no batch of its transaction is left; the producer's last data batch stays as an empty batch (it carries the
    producer's last sequence), and so does the ABORT marker of the transaction it belonged to."""
    create_topics(broker.bootstrap, topic_name, partitions=1, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0", "min.compaction.lag.ms": "0"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-txn"})
    p.init_transactions(60)
    for round_, commit in enumerate([True, False, True, False]):
        p.begin_transaction()
        for k in range(3):
            p.produce(topic_name, key=b"key-%d" % k, value=b"%s-%d-%d" % (b"kept" if commit else b"gone", round_, k))
        if commit:
            p.commit_transaction(60)
        else:
            p.flush(30)
            p.abort_transaction(60)
        time.sleep(0.2)  # each transaction in its own segment (segment.ms=100)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    expected = [("data", [b"kept-2-0", b"kept-2-1", b"kept-2-2"]), ("COMMIT", []), ("data", []), ("ABORT", [])]

    def cleaned() -> bool | None:
        # Each tick is new dirty data in a segment of its own, so the cleaner keeps passing over the log: a marker
        # becomes removable only in a pass after the one that removed its transaction's data.
        time.sleep(0.2)
        plain.produce(topic_name, key=b"tick", value=b"tick")
        plain.flush(30)
        batches = [b for b in _raw_batches(broker, topic_name) if b[1] != [b"tick"]]
        return True if batches == expected else None

    wait_for("the cleaner to leave only what Kafka's leaves", cleaned, timeout_s=90, interval_s=0.1)
    committed = consume_all(broker.bootstrap, topic_name, "read_committed", partitions=1)
    assert [v for v in committed if v != b"tick"] == [b"kept-2-0", b"kept-2-1", b"kept-2-2"]


# -- sofakafka transactions ------------------------------------------------------------------------------------------

def transactions_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sofakafka", "transactions", "--bootstrap-server", bootstrap,
                           *args], capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


def test_transactions_list_describe_and_abort_an_open_transaction(broker: BrokerProcess, topic_name: str) -> None:
    create_topics(broker.bootstrap, topic_name, partitions=1)
    txn_id = f"{topic_name}-stuck"
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=txn_id, transaction_timeout_ms=600_000)
    p.init_transactions()
    p.begin_transaction()
    p.send(topic_name, b"open")
    p.flush()

    listed = transactions_cli(broker.bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split() == ["TransactionalId", "Coordinator", "ProducerId",
                                                     "TransactionState"]
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith(txn_id))
    assert row[1] == "0" and row[3] == "Ongoing"
    described = transactions_cli(broker.bootstrap, "--json", "describe", "--transactional-id", txn_id)
    assert described.returncode == 0, described.stderr
    (info,) = __import__("json").loads(described.stdout)
    assert (info["TransactionState"], info["ProducerEpoch"], info["TransactionTimeoutMs"]) == ("Ongoing", "0", "600000")
    assert info["TopicPartitions"] == f"{topic_name}-0" and int(info["CurrentTransactionStartTimeMs"]) > 0
    assert transactions_cli(broker.bootstrap, "describe", "--transactional-id", "no-such-id").returncode == 1

    aborted = transactions_cli(broker.bootstrap, "abort", "--transactional-id", txn_id)
    assert aborted.returncode == 0, aborted.stderr
    assert "fenced" in aborted.stdout
    assert consume_all(broker.bootstrap, topic_name, "read_committed", partitions=1) == []
    assert consume_all(broker.bootstrap, topic_name, "read_uncommitted", partitions=1) == [b"open"]
    with pytest.raises(kafka_errors.ProducerFencedError):  # the producer that held the id is fenced
        p.commit_transaction()
    p.close(timeout=0)
    state = transactions_cli(broker.bootstrap, "describe", "--transactional-id", txn_id)
    assert "CompleteAbort" in state.stdout or "Empty" in state.stdout


def test_transactions_abort_ends_a_hanging_transaction_at_a_partition(
        broker_factory: object, topic_name: str) -> None:
    """With verification off (Kafka 2.6's behaviour) a transactional batch no coordinator knows hangs, holding the
    last stable offset back; the tool's partition abort writes the ABORT marker that frees it."""
    assert callable(broker_factory)
    b = broker_factory({"transaction.partition.verification.enable": "false"})
    create_topics(b.bootstrap, topic_name, partitions=1)
    from sofakafka.protocol.messages.produce import ProduceRequest
    from sofakafka.protocol.records import RecordBatchBuilder

    batch = RecordBatchBuilder(producer_id=777, producer_epoch=3, base_sequence=0, is_transactional=True)
    batch.append_record(0, int(time.time() * 1000), b"k", b"hanging")
    t = ProduceRequest.TopicProduceData
    with socket.create_connection((b.host, b.port), timeout=30) as s:
        r = wire.call(s, ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topics=[
            t(name=topic_name, partitions=[t.PartitionProduceData(partition_index=0, records=batch.build())])]), 8)
    assert r.responses[0].partitions[0].error_code == 0
    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce(topic_name, b"after")
    plain.flush(30)
    assert consume_all(b.bootstrap, topic_name, "read_committed", partitions=1) == []  # held at offset 0

    done = transactions_cli(b.bootstrap, "abort", "--topic", topic_name, "--partition", "0")
    assert done.returncode == 0, done.stderr
    assert "producer id 777 (epoch 3" in done.stdout
    assert consume_all(b.bootstrap, topic_name, "read_committed", partitions=1) == [b"after"]
    again = transactions_cli(b.bootstrap, "abort", "--topic", topic_name, "--partition", "0")
    assert again.returncode == 0 and "nothing to abort" in again.stdout
    assert transactions_cli(b.bootstrap, "abort", "--topic", topic_name).returncode == 2
