"""The transaction APIs on a real broker, request by request over a socket: Kafka 2.6's answers, what reaches the
logs (markers, the last stable offset, the ``.txnindex``, pending offsets) and what bad input leaves untouched.

One broker serves the module (an in-process Broker on its own loop, embedded metadata store); each test uses
its own transactional ids and topics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from sofakafka.broker.txn import TRANSACTION_STATE_TOPIC
from sofakafka.protocol.errors import ErrorCode as E
from sofakafka.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from sofakafka.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest
from sofakafka.protocol.messages.end_txn import EndTxnRequest
from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest
from sofakafka.protocol.messages.init_producer_id import InitProducerIdRequest
from sofakafka.protocol.messages.list_offset import ListOffsetRequest
from sofakafka.protocol.messages.metadata import MetadataRequest
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest
from sofakafka.protocol.messages.produce import ProduceRequest
from sofakafka.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from sofakafka.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from sofakafka.protocol.records import (
    ControlRecordType,
    RecordBatchBuilder,
    decode_control_key,
    decode_records,
    iter_batches,
)
from tests.integration.helpers import wait_for
from tests.unit.broker.broker_harness import BrokerThread, Client, running_broker

T = TypeVar("T")
TXN_PARTITIONS = 3
OFFSETS_PARTITIONS = 3


def overrides(**extra: str) -> dict[str, str]:
    base = {
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
        "group.initial.rebalance.delay.ms": "0",
    }
    base.update(extra)
    return base


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    with running_broker(tmp_path_factory.mktemp("txn"), overrides()) as b:
        with Client(b.port) as c:
            wait("the transaction coordinator", lambda: find_coordinator(c, "warm-up") == E.NONE or None)
            wait("the group coordinator", lambda: find_coordinator(c, "warm-up", key_type=0) == E.NONE or None)
        yield b


@pytest.fixture
def client(broker: BrokerThread) -> Iterator[Client]:
    with Client(broker.port) as c:
        yield c


_names = iter(range(1_000_000))


@pytest.fixture
def topic(client: Client) -> str:
    return new_topic(client)


def new_topic(client: Client) -> str:
    name = f"txn-data-{next(_names)}"
    wait(f"a leader for {name}", lambda: _has_leader(client, name))
    return name


def _has_leader(client: Client, name: str) -> bool | None:
    (t,) = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 9).topics
    return True if t.error_code == E.NONE and t.partitions and t.partitions[0].leader_id >= 0 else None


def wait(what: str, poll: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    return wait_for(what, poll, timeout_s, interval_s=0.02)


# -- requests -----------------------------------------------------------------------------------------------------

def find_coordinator(c: Client, key: str, key_type: int = 1) -> E:
    return E(c.call(FindCoordinatorRequest(key=key, key_type=key_type), 3).error_code)


def init(c: Client, txn_id: str | None, timeout_ms: int = 60_000, *, producer: tuple[int, int] = (-1, -1),
         version: int = 3) -> tuple[E, int, int]:
    r = c.call(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                     producer_id=producer[0] if version >= 3 else -1,
                                     producer_epoch=producer[1] if version >= 3 else -1), version)
    return E(r.error_code), r.producer_id, r.producer_epoch


def add(c: Client, txn_id: str, pid: int, epoch: int, *tps: tuple[str, int]) -> dict[tuple[str, int], E]:
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    r = c.call(AddPartitionsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
        topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()]),
        1)
    return {(t.name, p.partition_index): E(p.error_code) for t in r.results for p in t.results}


def end(c: Client, txn_id: str, pid: int, epoch: int, commit: bool) -> E:
    return E(c.call(EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                  committed=commit), 1).error_code)


def txn_batch(pid: int, epoch: int, seq: int, n: int, value: bytes = b"v") -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    for i in range(n):
        b.append_record(i, 1_600_000_000_000 + i, b"k", value)
    return b.build()


def plain_batch(n: int) -> bytes:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append_record(i, 1_600_000_000_000 + i, b"k", b"plain")
    return b.build()


def produce(c: Client, topic: str, records: bytes, txn_id: str | None = None) -> Any:
    t = ProduceRequest.TopicProduceData
    r = c.call(ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=10_000, topics=[
        t(name=topic, partitions=[t.PartitionProduceData(partition_index=0, records=records)])]), 8)
    return r.responses[0].partitions[0]


def fetch(c: Client, topic: str, isolation_level: int, offset: int = 0) -> Any:
    t = FetchRequest.FetchableTopic
    r = c.call(FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation_level,
                            topics=[t(name=topic, fetch_partitions=[
                                t.FetchPartition(partition_index=0, fetch_offset=offset, max_bytes=1 << 20)])]), 11)
    return r.topics[0].partitions[0]


def read_all(c: Client, topic: str, isolation_level: int) -> tuple[bytes, list[tuple[int, int]]]:
    """Every batch up to the bound of the isolation level (a fetch returns one segment at most), and the aborted
    transactions the read_committed answers listed."""
    data, aborted, offset = b"", [], 0
    while True:
        p = fetch(c, topic, isolation_level, offset)
        chunk = bytes(p.records)
        aborted += [(a.producer_id, a.first_offset) for a in p.aborted or []]
        batches = list(iter_batches(chunk))
        if not batches:
            return data, sorted(set(aborted))
        data += chunk
        offset = batches[-1].next_offset


def list_offset(c: Client, topic: str, isolation_level: int) -> int:
    t = ListOffsetRequest.ListOffsetTopic
    r = c.call(ListOffsetRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        t(name=topic, partitions=[t.ListOffsetPartition(partition_index=0, timestamp=-1, current_leader_epoch=-1)])]),
        5)
    return int(r.topics[0].partitions[0].offset)


def values(data: bytes) -> list[bytes | None]:
    """Data record values, control batches left out."""
    return [r.value for h in iter_batches(data) if not h.is_control for r in decode_records(data, h)]


def markers(data: bytes) -> list[tuple[int, ControlRecordType]]:
    out = []
    for h in iter_batches(data):
        if h.is_control:
            (r,) = decode_records(data, h)
            out.append((h.producer_id, ControlRecordType(decode_control_key(r.key))))
    return out


def txn_log_end(broker: BrokerThread) -> int:
    """Everything written to __transaction_state, summed over its partitions."""
    assert broker.broker is not None
    lm = broker.broker.log_manager
    return sum(lg.log_end_offset for lg in lm.all_logs if lg.topic == TRANSACTION_STATE_TOPIC)


def offsets_log_end(broker: BrokerThread) -> int:
    assert broker.broker is not None
    return sum(lg.log_end_offset for lg in broker.broker.log_manager.all_logs if lg.topic == "__consumer_offsets")


def begin(c: Client, txn_id: str, *tps: tuple[str, int], timeout_ms: int = 60_000) -> tuple[int, int]:
    error, pid, epoch = init(c, txn_id, timeout_ms)
    assert error is E.NONE
    assert set(add(c, txn_id, pid, epoch, *tps).values()) == {E.NONE}
    return pid, epoch


def lso_reaches(c: Client, topic: str, offset: int) -> None:
    wait(f"the LSO of {topic} to reach {offset}", lambda: fetch(c, topic, 1).last_stable_offset >= offset or None)


# -- FindCoordinator / InitProducerId -------------------------------------------------------------------------------

def test_find_coordinator_names_the_leader_of_the_transactional_ids_partition(client: Client,
                                                                              broker: BrokerThread) -> None:
    r = client.call(FindCoordinatorRequest(key="some-txn", key_type=1), 3)
    assert (r.error_code, r.node_id, r.port) == (E.NONE, 0, broker.port)
    assert client.call(FindCoordinatorRequest(key="some-txn", key_type=2), 3).error_code == E.INVALID_REQUEST


@pytest.mark.parametrize(("timeout", "error"), [(0, E.INVALID_TRANSACTION_TIMEOUT), (1, E.NONE),
                                                (900_000, E.NONE), (900_001, E.INVALID_TRANSACTION_TIMEOUT)])
def test_transaction_timeout_edges(client: Client, broker: BrokerThread, timeout: int, error: E) -> None:
    before = txn_log_end(broker)
    got, pid, epoch = init(client, f"timeout-{timeout}", timeout)
    assert got is error
    if error is E.NONE:
        assert (pid >= 0, epoch) == (True, 0)
    else:
        assert (pid, epoch) == (-1, -1) and txn_log_end(broker) == before


def test_init_producer_id_bumps_the_epoch_and_fences(client: Client) -> None:
    error, pid, epoch = init(client, "fence-me")
    assert (error, epoch) == (E.NONE, 0)
    assert init(client, "fence-me") == (E.NONE, pid, 1)
    # KIP-360: the producer that holds epoch 1 may bump on its own; a stale one (epoch 0) is fenced.
    assert init(client, "fence-me", producer=(pid, 1)) == (E.NONE, pid, 2)
    assert init(client, "fence-me", producer=(pid, 0))[0] is E.INVALID_PRODUCER_EPOCH
    # Only one of id and epoch set is malformed.
    assert init(client, "fence-me", producer=(pid, -1))[0] is E.INVALID_REQUEST
    assert init(client, "")[0] is E.INVALID_REQUEST
    for version in (0, 1, 2):
        assert init(client, "fence-me", version=version)[0] is E.NONE


def test_idempotent_init_still_gets_fresh_ids(client: Client) -> None:
    first, second = init(client, None), init(client, None)
    assert first[0] is second[0] is E.NONE and first[1] != second[1] and first[2] == second[2] == 0


# -- commit and abort through the data path --------------------------------------------------------------------------

def test_commit_markers_lso_and_read_committed(client: Client, topic: str, broker: BrokerThread) -> None:
    other = new_topic(client)
    pid, epoch = begin(client, "commit-1", (topic, 0), (other, 0))
    assert produce(client, topic, plain_batch(2)).error_code == E.NONE
    assert produce(client, topic, txn_batch(pid, epoch, 0, 3), "commit-1").error_code == E.NONE
    assert produce(client, other, txn_batch(pid, epoch, 0, 1), "commit-1").error_code == E.NONE
    assert produce(client, topic, plain_batch(1)).error_code == E.NONE
    # The open transaction holds the last stable offset at its first offset.
    committed = fetch(client, topic, 1)
    assert (committed.high_watermark, committed.last_stable_offset) == (6, 2)
    assert values(bytes(committed.records)) == [b"plain", b"plain"]
    assert list_offset(client, topic, 1) == 2 and list_offset(client, topic, 0) == 6
    assert end(client, "commit-1", pid, epoch, True) is E.NONE
    lso_reaches(client, topic, 7)
    lso_reaches(client, other, 2)
    data, aborted = read_all(client, topic, 1)
    assert values(data) == [b"plain"] * 2 + [b"v"] * 3 + [b"plain"]
    assert markers(data) == [(pid, ControlRecordType.COMMIT)]
    assert aborted == []
    assert list_offset(client, topic, 1) == 7
    assert markers(read_all(client, other, 0)[0]) == [(pid, ControlRecordType.COMMIT)]
    # Once the markers are in, the id is CompleteCommit: a retried commit is fine, an abort of it is not.
    wait("CompleteCommit", lambda: end(client, "commit-1", pid, epoch, True) is E.NONE or None)
    assert end(client, "commit-1", pid, epoch, False) is E.INVALID_TXN_STATE


def test_abort_lists_the_aborted_transaction_and_indexes_it(client: Client, topic: str,
                                                            broker: BrokerThread) -> None:
    pid, epoch = begin(client, "abort-1", (topic, 0))
    assert produce(client, topic, txn_batch(pid, epoch, 0, 2, b"gone"), "abort-1").error_code == E.NONE
    assert end(client, "abort-1", pid, epoch, False) is E.NONE
    lso_reaches(client, topic, 3)
    data, aborted = read_all(client, topic, 1)
    assert aborted == [(pid, 0)]
    assert markers(data) == [(pid, ControlRecordType.ABORT)] and values(data) == [b"gone", b"gone"]
    assert fetch(client, topic, 0).aborted is None  # read_uncommitted gets the data and no list
    assert broker.broker is not None
    lg = broker.broker.log_manager.get_log(topic, 0)
    assert lg is not None
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in lg.collect_aborted_transactions(0, 10)] == [
        (pid, 0, 2)]


def test_a_transaction_left_open_is_aborted_after_its_timeout(client: Client, topic: str) -> None:
    pid, epoch = begin(client, "forgotten", (topic, 0), timeout_ms=500)
    assert produce(client, topic, txn_batch(pid, epoch, 0, 1), "forgotten").error_code == E.NONE
    assert fetch(client, topic, 1).last_stable_offset == 0
    lso_reaches(client, topic, 2)
    assert markers(read_all(client, topic, 0)[0]) == [(pid, ControlRecordType.ABORT)]
    # The abort fenced the producer: its epoch was bumped.
    assert end(client, "forgotten", pid, epoch, True) is E.INVALID_PRODUCER_EPOCH
    assert produce(client, topic, txn_batch(pid, epoch, 1, 1), "forgotten").error_code == E.INVALID_PRODUCER_EPOCH


def test_init_during_an_open_transaction_aborts_it_and_asks_to_retry(client: Client, topic: str) -> None:
    pid, epoch = begin(client, "restarted", (topic, 0))
    assert produce(client, topic, txn_batch(pid, epoch, 0, 1), "restarted").error_code == E.NONE
    assert init(client, "restarted")[0] is E.CONCURRENT_TRANSACTIONS
    lso_reaches(client, topic, 2)
    assert markers(read_all(client, topic, 0)[0]) == [(pid, ControlRecordType.ABORT)]
    # The retry gets the epoch after the fencing one.
    assert wait("the retry", lambda: ((r := init(client, "restarted"))[0] is E.NONE and r) or None)[2] == epoch + 2


# -- bad input: Kafka's codes, nothing written, still serving -----------------------------------------------------------

def test_end_txn_errors_write_nothing(client: Client, topic: str, broker: BrokerThread) -> None:
    error, pid, epoch = init(client, "bad-end")
    assert error is E.NONE
    before = txn_log_end(broker)
    assert end(client, "bad-end", pid, epoch, True) is E.INVALID_TXN_STATE  # nothing was added
    assert end(client, "bad-end", pid, epoch + 1, True) is E.INVALID_PRODUCER_EPOCH
    assert end(client, "bad-end", pid + 1, epoch, True) is E.INVALID_PRODUCER_ID_MAPPING
    assert end(client, "never-initialised", pid, epoch, False) is E.INVALID_PRODUCER_ID_MAPPING
    assert end(client, "", pid, epoch, False) is E.INVALID_REQUEST
    assert txn_log_end(broker) == before
    assert client.call(ApiVersionsRequest(), 0).error_code == E.NONE


def test_add_partitions_errors_write_nothing(client: Client, topic: str, broker: BrokerThread) -> None:
    _error, pid, epoch = init(client, "bad-add")
    before = txn_log_end(broker)
    assert add(client, "bad-add", pid, epoch, (topic, 0), ("no-such-topic", 0), (topic, 7)) == {
        (topic, 0): E.OPERATION_NOT_ATTEMPTED, ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        (topic, 7): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert add(client, "bad-add", pid, epoch + 1, (topic, 0)) == {(topic, 0): E.INVALID_PRODUCER_EPOCH}
    assert add(client, "bad-add", pid + 1, epoch, (topic, 0)) == {(topic, 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert add(client, "unknown-id", 5, 0, (topic, 0)) == {(topic, 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert txn_log_end(broker) == before


def test_a_transactional_write_to_a_partition_not_added_is_refused(client: Client, topic: str) -> None:
    other = new_topic(client)
    pid, epoch = begin(client, "stray", (topic, 0))
    refused = produce(client, other, txn_batch(pid, epoch, 0, 1), "stray")
    assert refused.error_code == E.INVALID_TXN_STATE
    assert "not added to the transaction" in (refused.error_message or "")
    # Without a transactional id the broker cannot ask anyone: refused too, never left hanging.
    assert produce(client, other, txn_batch(pid, epoch, 0, 1)).error_code == E.INVALID_TXN_STATE
    # A fenced epoch and an unknown id are refused with the coordinator's answer.
    assert produce(client, topic, txn_batch(pid, epoch + 1, 0, 1), "stray").error_code == E.INVALID_PRODUCER_EPOCH
    assert produce(client, topic, txn_batch(9999, 0, 0, 1), "nobody").error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert fetch(client, other, 0).high_watermark == 0 and fetch(client, other, 1).last_stable_offset == 0
    # The partition that was added takes it, and later batches of the open transaction need no new check.
    assert produce(client, topic, txn_batch(pid, epoch, 0, 1), "stray").error_code == E.NONE
    assert produce(client, topic, txn_batch(pid, epoch, 1, 1), "stray").error_code == E.NONE
    assert end(client, "stray", pid, epoch, True) is E.NONE
    lso_reaches(client, topic, 3)
    # After the transaction ended, a late write of it may not open a new one that nobody would end.
    late = produce(client, topic, txn_batch(pid, epoch, 2, 1), "stray")
    assert late.error_code == E.INVALID_TXN_STATE
    assert fetch(client, topic, 1).last_stable_offset == fetch(client, topic, 0).high_watermark == 3


def test_write_txn_markers_partition_errors(client: Client, topic: str) -> None:
    assert init(client, "markers-direct")[0] is E.NONE
    pid, epoch = begin(client, "markers-direct", (topic, 0))
    assert epoch == 1
    assert produce(client, topic, txn_batch(pid, epoch, 0, 1), "markers-direct").error_code == E.NONE
    M = WriteTxnMarkersRequest.WritableTxnMarker

    def write(producer_epoch: int, coordinator_epoch: int, name: str = topic) -> E:
        r = client.call(WriteTxnMarkersRequest(markers=[M(
            producer_id=pid, producer_epoch=producer_epoch, transaction_result=False,
            coordinator_epoch=coordinator_epoch, topics=[M.WritableTxnMarkerTopic(name=name, partition_indexes=[0])])]),
            0)
        return E(r.markers[0].topics[0].partitions[0].error_code)

    assert write(epoch, 0, "no-such-topic") is E.UNKNOWN_TOPIC_OR_PARTITION
    assert write(epoch - 1, 0) is E.INVALID_PRODUCER_EPOCH
    assert write(epoch, 5) is E.NONE  # an operator's abort (sofakafka transactions abort) looks like this
    assert write(epoch, 4) is E.TRANSACTION_COORDINATOR_FENCED
    assert fetch(client, topic, 1).last_stable_offset == 2
    assert end(client, "markers-direct", pid, epoch, False) is E.NONE


# -- offsets in transactions -----------------------------------------------------------------------------------------

def _txn_commit(c: Client, txn_id: str, group: str, pid: int, epoch: int, topic: str, offset: int, *,
                member_id: str = "", generation: int = -1, version: int = 3) -> E:
    t = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    r = c.call(TxnOffsetCommitRequest(transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
                                      member_id=member_id if version >= 3 else "",
                                      generation_id=generation if version >= 3 else -1,
                                      topics=[t(name=topic, partitions=[t.TxnOffsetCommitRequestPartition(
                                          partition_index=0, committed_offset=offset)])]), version)
    return E(r.topics[0].partitions[0].error_code)


def _fetch_offset(c: Client, group: str, topic: str, *, require_stable: bool) -> tuple[int, E]:
    t = OffsetFetchRequest.OffsetFetchRequestTopic
    r = c.call(OffsetFetchRequest(group_id=group, topics=[t(name=topic, partition_indexes=[0])],
                                  require_stable=require_stable), 7)
    p = r.topics[0].partitions[0]
    return int(p.committed_offset), E(p.error_code)


@pytest.mark.parametrize("commit", [True, False])
def test_transactional_offsets_appear_only_at_commit(client: Client, topic: str, commit: bool) -> None:
    group, txn_id = f"txn-group-{commit}", f"offsets-{commit}"
    pid, epoch = begin(client, txn_id, (topic, 0))
    assert E(client.call(AddOffsetsToTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                                group_id=group), 1).error_code) is E.NONE
    assert _txn_commit(client, txn_id, group, pid, epoch, topic, 42) is E.NONE
    assert _fetch_offset(client, group, topic, require_stable=False) == (-1, E.NONE)
    assert _fetch_offset(client, group, topic, require_stable=True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    assert end(client, txn_id, pid, epoch, commit) is E.NONE
    expected = 42 if commit else -1
    wait("the marker", lambda: _fetch_offset(client, group, topic, require_stable=True) == (expected, E.NONE) or None)
    assert _fetch_offset(client, group, topic, require_stable=False) == (expected, E.NONE)


def test_txn_offset_commit_for_a_group_that_does_not_match(client: Client, topic: str, broker: BrokerThread) -> None:
    pid, epoch = begin(client, "offsets-bad", (topic, 0))
    before = offsets_log_end(broker)
    assert _txn_commit(client, "offsets-bad", "plain-group", pid, epoch, topic, 1, member_id="ghost") \
        is E.UNKNOWN_MEMBER_ID
    assert _txn_commit(client, "offsets-bad", "plain-group", pid, epoch, topic, 1, generation=3) \
        is E.ILLEGAL_GENERATION
    assert _txn_commit(client, "offsets-bad", "plain-group", pid, epoch, "no-such-topic", 1) \
        is E.UNKNOWN_TOPIC_OR_PARTITION
    assert offsets_log_end(broker) == before
    assert _fetch_offset(client, "plain-group", topic, require_stable=True) == (-1, E.NONE)


# -- restart ------------------------------------------------------------------------------------------------------------

def test_an_open_transaction_survives_a_restart_and_commits_after_it(tmp_path: Path) -> None:
    """The producer-state snapshot keeps the open transaction (the LSO stays held), and the coordinator reloads
    the id from __transaction_state, so the producer commits with the epoch it had."""
    with running_broker(tmp_path, overrides()) as b, Client(b.port) as c:
        wait("the transaction coordinator", lambda: find_coordinator(c, "survivor") == E.NONE or None)
        topic = new_topic(c)
        pid, epoch = begin(c, "survivor", (topic, 0))
        assert produce(c, topic, txn_batch(pid, epoch, 0, 2), "survivor").error_code == E.NONE
        assert produce(c, topic, plain_batch(1)).error_code == E.NONE
    with running_broker(tmp_path, overrides()) as b, Client(b.port) as c:
        wait("the reloaded coordinator", lambda: find_coordinator(c, "survivor") == E.NONE or None)
        wait(f"a leader for {topic}", lambda: _has_leader(c, topic))
        p = fetch(c, topic, 1)
        assert (p.high_watermark, p.last_stable_offset) == (3, 0)
        wait("the id to load", lambda: end(c, "survivor", pid, epoch, True) is E.NONE or None)
        lso_reaches(c, topic, 4)
        data, aborted = read_all(c, topic, 1)
        assert values(data) == [b"v", b"v", b"plain"] and aborted == []
