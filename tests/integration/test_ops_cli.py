"""``sofakafka dump-log``, ``log-dirs``, ``leader-election`` and ``query`` against a real broker process and its
real segment files: tables by default, ``--json`` parsed back, progress of a key scan on stderr, and a one-line
message (exit 2) for bad input: an unknown topic, an offset out of range, a time in the future, a huge scan."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from kafka import KafkaProducer

from tests.integration.conftest import BrokerProcess


def sofakafka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sofakafka", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def produced(module_broker: BrokerProcess) -> tuple[str, int]:
    """A one-partition topic with 200 records, keys k0..k9, one old record an hour back; returns (topic, now)."""
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap, acks="all")
    topic = "ops-cli"
    old = int(time.time() * 1000) - 3_600_000
    producer.send(topic, key=b"old", value=b'{"old": true}', timestamp_ms=old).get(30)
    now = int(time.time() * 1000)
    for i in range(200):
        producer.send(topic, key=f"k{i % 10}".encode(), value=json.dumps({"n": i}).encode(),
                      headers=[("h", b"v")])
    producer.flush(30)
    producer.close()
    return topic, now


def test_dump_log_prints_batches_records_and_index(module_broker: BrokerProcess, produced: tuple[str, int]) -> None:
    topic, _ = produced
    log = next((module_broker.data_dir / f"{topic}-0").glob("*.log"))
    shallow = sofakafka("dump-log", "--files", str(log))
    assert shallow.returncode == 0, shallow.stderr
    assert shallow.stdout.startswith(f"Dumping {log}\nStarting offset: 0\n")
    assert "baseOffset: 0 lastOffset: 0 count: 1" in shallow.stdout and "isvalid: true" in shallow.stdout
    assert "| offset:" not in shallow.stdout
    deep = sofakafka("dump-log", "--files", str(log), "--print-data-log")
    assert "| offset: 0 " in deep.stdout and "key: old payload: {\"old\": true}" in deep.stdout
    assert "headerKeys: [h]" in deep.stdout
    as_json = json.loads(sofakafka("dump-log", "--files", str(log), "--deep-iteration", "--json").stdout)
    records = [r for b in as_json[0]["batches"] for r in b["records"]]
    assert [r["offset"] for r in records] == list(range(201))
    index = log.with_suffix(".timeindex")
    dumped = sofakafka("dump-log", "--files", str(index))
    assert dumped.returncode == 0 and dumped.stdout.startswith(f"Dumping {index}")
    check = sofakafka("dump-log", "--files", str(log.with_suffix(".index")), "--verify-index-only")
    assert check.returncode == 0 and "passed sanity check" in check.stdout
    missing = sofakafka("dump-log", "--files", str(log) + ".nope")
    assert missing.returncode == 2 and "no such file" in missing.stderr and "Traceback" not in missing.stderr


def test_dump_log_prints_the_aborted_transactions_of_a_txnindex(module_broker: BrokerProcess) -> None:
    """An aborted transaction between two committed ones: the .txnindex holds it alone, with its marker's offset,
    and dump-log prints it as kafka-dump-log.sh does (text and --json)."""
    topic = "ops-cli-txn"
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap, transactional_id="ops-cli-txn")
    producer.init_transactions()
    for value, commit in ((b"kept", True), (b"gone", False), (b"kept-too", True)):
        producer.begin_transaction()
        producer.send(topic, value=value, partition=0).get(30)
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()
    part = module_broker.data_dir / f"{topic}-0"
    deadline = time.monotonic() + 30
    while not list(part.glob("*.txnindex")) and time.monotonic() < deadline:
        time.sleep(0.1)
    index = next(part.glob("*.txnindex"))
    log = json.loads(sofakafka("dump-log", "--files", str(index.with_suffix(".log")), "--json").stdout)
    pid = log[0]["batches"][0]["producerId"]
    # kept at 0, its COMMIT at 1, gone at 2, its ABORT at 3: the ABORT's LSO is the offset after it.
    dumped = sofakafka("dump-log", "--files", str(index))
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout == (f"Dumping {index}\nversion: 0 producerId: {pid} firstOffset: 2 lastOffset: 3 "
                             "lastStableOffset: 4\n")
    deep = sofakafka("dump-log", "--files", str(index.with_suffix(".log")), "--print-data-log").stdout
    markers = [line.split("headerKeys: [] ")[1] for line in deep.splitlines() if "endTxnMarker" in line]
    assert markers == ["endTxnMarker: COMMIT coordinatorEpoch: 0", "endTxnMarker: ABORT coordinatorEpoch: 0",
                       "endTxnMarker: COMMIT coordinatorEpoch: 0"]
    assert "payload: gone" in deep and "payload: kept-too" in deep
    as_json = json.loads(sofakafka("dump-log", "--files", str(index), "--json").stdout)
    assert as_json == [{"file": str(index), "abortedTransactions": [
        {"version": 0, "producerId": pid, "firstOffset": 2, "lastOffset": 3, "lastStableOffset": 4}]}]
    wrong = sofakafka("dump-log", "--files", str(part / "leader-epoch-checkpoint"))
    assert wrong.returncode == 2 and ".txnindex" in wrong.stderr and "Traceback" not in wrong.stderr


def test_log_dirs_table_and_json(module_broker: BrokerProcess, produced: tuple[str, int]) -> None:
    topic, _ = produced
    table = sofakafka("log-dirs", "--bootstrap-server", module_broker.bootstrap, "--describe", "--topic-list", topic)
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()[:2]
    assert header.split() == ["BROKER", "LOG-DIR", "PARTITION", "SIZE", "OFFSET-LAG", "FUTURE"]
    assert f"{topic}-0" in row and int(row.split()[3]) > 0
    data = json.loads(sofakafka("log-dirs", "--bootstrap-server", module_broker.bootstrap, "--describe",
                                "--topic-list", topic, "--json").stdout)
    parts = data["brokers"][0]["logDirs"][0]["partitions"]
    assert [p["partition"] for p in parts] == [f"{topic}-0"]
    bad = sofakafka("log-dirs", "--bootstrap-server", module_broker.bootstrap, "--describe", "--broker-list", "42")
    assert bad.returncode == 2 and "no live broker 42" in bad.stderr


def test_leader_election_on_a_single_broker_needs_no_election(module_broker: BrokerProcess,
                                                              produced: tuple[str, int]) -> None:
    topic, _ = produced
    result = sofakafka("leader-election", "--bootstrap-server", module_broker.bootstrap, "--election-type",
                       "preferred", "--topic", topic, "--partition", "0")
    assert result.returncode == 0, result.stderr
    assert f"Valid replica already elected for partitions {topic}-0" in result.stdout
    usage = sofakafka("leader-election", "--bootstrap-server", module_broker.bootstrap, "--election-type", "x",
                      "--all-topic-partitions")
    assert usage.returncode == 2 and "PREFERRED or UNCLEAN" in usage.stderr


def test_query_by_offset_time_and_key(module_broker: BrokerProcess, produced: tuple[str, int]) -> None:
    topic, now = produced
    bs = module_broker.bootstrap
    by_offset = sofakafka("query", "--bootstrap-server", bs, "--topic", topic, "--partition", "0", "--offset", "5",
                          "--count", "3")
    assert by_offset.returncode == 0, by_offset.stderr
    lines = by_offset.stdout.splitlines()
    assert lines[0].split()[:4] == ["PARTITION", "OFFSET", "TIMESTAMP", "KEY"]
    assert [ln.split()[1] for ln in lines[1:]] == ["5", "6", "7"]
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((now - 60_000) / 1000))
    by_time = json.loads(sofakafka("query", "--bootstrap-server", bs, "--topic", topic, "--from", since,
                                   "--count", "500", "--json").stdout)
    assert [r["offset"] for r in by_time["records"]] == list(range(1, 201))
    by_key = sofakafka("query", "--bootstrap-server", bs, "--topic", topic, "--key", "k3", "--json")
    assert by_key.returncode == 0, by_key.stderr
    found = json.loads(by_key.stdout)["records"]
    assert [r["offset"] for r in found] == [i + 1 for i in range(3, 200, 10)]
    assert "scanned 201/201 records (100%)" in by_key.stderr, "the scan's progress"


@pytest.mark.parametrize(("args", "message"), [
    (["--topic", "no-such-topic", "--partition", "0", "--offset", "0"], "topic 'no-such-topic' does not exist"),
    (["--topic", "ops-cli", "--partition", "0", "--offset", "5000"], "offset 5000 is out of range"),
    (["--topic", "ops-cli", "--from", "2999-01-01T00:00:00"], "is in the future"),
    (["--topic", "ops-cli", "--key", "k1", "--max-records", "999999999"], "a key scan reads at most"),
    (["--topic", "ops-cli", "--key", "k1", "--offset", "3"], "exactly one of --offset, --from, --key"),
])
def test_query_bad_input_is_one_clear_line(module_broker: BrokerProcess, produced: tuple[str, int],
                                           args: list[str], message: str) -> None:
    result = sofakafka("query", "--bootstrap-server", module_broker.bootstrap, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and "Traceback" not in result.stderr
