"""`sofakafka transactions`: see and end transactions, like the kafka-transactions.sh of later Kafkas (3.0+).

    sofakafka transactions --bootstrap-server HOST:PORT list
    sofakafka transactions --bootstrap-server HOST:PORT describe --transactional-id ID
    sofakafka transactions --bootstrap-server HOST:PORT abort --transactional-id ID
    sofakafka transactions --bootstrap-server HOST:PORT abort --topic T --partition P
                           [--producer-id PID --producer-epoch E] [--coordinator-epoch C]

The action is positional, as in Kafka's tool (or ``--list``, ``--describe``, ``--abort`` like the other tools);
``--command-config`` and ``--json`` are common.py's.

Kafka 2.6 has no ListTransactions, DescribeTransactions or DescribeProducers API (KIP-664 came in 3.0), so the
tool gets its data the way a 2.6 cluster allows, from the protocol alone, and therefore works against Kafka 2.6
brokers as well as ours:

* ``list`` and ``describe`` read ``__transaction_state`` like a consumer (Fetch from each partition's leader,
  up to its high watermark) and decode Kafka's key/value v0 records, keeping the last one per transactional id
  (a tombstone removes it). The coordinator shown is the partition's leader. What they show is what the
  coordinators have written: a transition still being written is not there yet.
* ``abort --transactional-id`` aborts the id's open transaction through its coordinator: an InitProducerId for
  the id (with its own transaction timeout) fences the producer at a new epoch and has the coordinator abort
  what is open, writing ABORT markers to every partition of it; the tool repeats it while the coordinator answers
  CONCURRENT_TRANSACTIONS (the abort being completed). The producer that held the id is fenced: its next request
  fails with INVALID_PRODUCER_EPOCH, as after a new instance's initTransactions.
* ``abort --topic --partition`` ends a *hanging* transaction at one partition, one that no coordinator will
  end (data written to a partition its coordinator never heard of, which brokers before KIP-890 accepted): it
  sends WriteTxnMarkers (ABORT) to the partition's leader, as Kafka 3's tool does. Without ``--producer-id`` the
  producer is the one whose batch sits at the partition's last stable offset (the first open transaction). The
  marker's coordinator epoch must not be older than the last one that producer saw at the partition: without
  ``--coordinator-epoch`` it is the leader epoch of the ``__transaction_state`` partition of the transactional
  id that owns the producer id, if ``__transaction_state`` names one, else 0; a broker that answers
  TRANSACTION_COORDINATOR_FENCED wants a higher ``--coordinator-epoch``.

Exit status 0 on success, 1 when the brokers refused (or the id is unknown), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sofakafka.broker.txn.records import TRANSACTION_STATE_TOPIC, decode_key, decode_value
from sofakafka.broker.txn.state import TransactionState, TxnLogValue
from sofakafka.cli import common
from sofakafka.cli.common import UsageError, err
from sofakafka.client import READ_COMMITTED, KafkaClient
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import DecodeError, ErrorCode, KafkaError
from sofakafka.protocol.messages.fetch import FetchRequest, FetchResponse
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from sofakafka.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from sofakafka.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from sofakafka.protocol.records import iter_batches

VERB = "transactions"
SUMMARY = "list, describe and abort transactions (kafka-transactions.sh of Kafka 3.0+)"

ACTIONS = ("list", "describe", "abort")
ABORT_RETRY_S = 60.0
KEY_TYPE_TRANSACTION = 1


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    coordinator: int
    coordinator_epoch: int
    value: TxnLogValue


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "List, describe and abort transactions (kafka-transactions.sh of Kafka 3.0+).")
    common.add_actions(p, ACTIONS)
    common.add_connection_options(p)
    common.add_output_options(p)
    p.add_argument("--transactional-id", help="describe: the id; abort: abort the id's open transaction through "
                                              "its coordinator")
    p.add_argument("--topic", help="abort: the hanging transaction at this partition")
    p.add_argument("--partition", type=int)
    p.add_argument("--producer-id", type=int, help="abort --topic: the producer (default: the one at the LSO)")
    p.add_argument("--producer-epoch", type=int)
    p.add_argument("--coordinator-epoch", type=int)
    return p


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run)


def run(args: argparse.Namespace) -> int:
    action = common.chosen_action(args, ACTIONS)
    if action == "describe" and args.transactional_id is None:
        raise UsageError("describe needs --transactional-id")
    with common.client(args, VERB) as client:
        if action == "list":
            return _list(client, args)
        if action == "describe":
            return _describe(client, args)
        return _abort(client, args)


# -- reading __transaction_state --------------------------------------------------------------------------------

def read_transactions(client: KafkaClient) -> dict[str, TransactionListing]:
    """The last record of every transactional id in ``__transaction_state`` (up to each high watermark)."""
    meta = client.metadata([TRANSACTION_STATE_TOPIC])
    topic = meta.topics.get(TRANSACTION_STATE_TOPIC)
    if topic is None or topic.error != ErrorCode.NONE:
        return {}
    out: dict[str, TransactionListing] = {}
    for p, info in sorted(topic.partitions.items()):
        offset = client.list_offsets(TRANSACTION_STATE_TOPIC, {p: -2})[p].offset
        end = client.list_offsets(TRANSACTION_STATE_TOPIC, {p: -1})[p].offset
        while offset < end:
            result = client.fetch(TRANSACTION_STATE_TOPIC, p, offset, max_wait_ms=0, min_bytes=0)
            for record in result.records:
                if record.key is None:
                    continue
                try:
                    txn_id = decode_key(record.key)
                    value = decode_value(record.value)
                except DecodeError:
                    continue
                if value is None:
                    out.pop(txn_id, None)
                else:
                    out[txn_id] = TransactionListing(txn_id, info.leader, info.leader_epoch, value)
            if result.next_offset <= offset:
                break
            offset = result.next_offset
    return out


def _list(client: KafkaClient, args: argparse.Namespace) -> int:
    rows = [["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]]
    rows += [[t.transactional_id, str(t.coordinator), str(t.value.producer_id), t.value.state.display_name]
             for t in sorted(read_transactions(client).values(), key=lambda t: t.transactional_id)]
    common.print_table(rows, as_json=args.json)
    return 0


def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    t = read_transactions(client).get(args.transactional_id)
    if t is None:
        err(f"Error: transactional id {args.transactional_id} not found")
        return 1
    v = t.value
    open_ = v.state in (TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
    row = {
        "CoordinatorId": t.coordinator, "TransactionalId": t.transactional_id, "ProducerId": v.producer_id,
        "ProducerEpoch": v.producer_epoch, "TransactionState": v.state.display_name,
        "TransactionTimeoutMs": v.transaction_timeout_ms,
        "CurrentTransactionStartTimeMs": v.start_timestamp if open_ else -1,
        "TransactionDurationMs": int(time.time() * 1000) - v.start_timestamp if open_ and v.start_timestamp >= 0
        else -1,
        "TopicPartitions": ",".join(f"{topic}-{p}" for topic, p in sorted(v.partitions)),
    }
    common.print_table([list(row), [str(value) for value in row.values()]], as_json=args.json)
    return 0


# -- abort ------------------------------------------------------------------------------------------------------

def _abort(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.transactional_id is not None:
        if args.topic is not None:
            raise UsageError("--transactional-id and --topic are two different aborts: give one")
        return _abort_through_coordinator(client, args.transactional_id)
    if args.topic is None or args.partition is None:
        raise UsageError("abort needs --transactional-id, or --topic and --partition")
    if (args.producer_id is None) != (args.producer_epoch is None):
        raise UsageError("--producer-id and --producer-epoch go together")
    return _abort_at_partition(client, args)


def _coordinator_node(client: KafkaClient, transactional_id: str) -> int:
    deadline = time.monotonic() + client.request_timeout_s
    while True:
        r = client.send(FindCoordinatorRequest(key=transactional_id, key_type=KEY_TYPE_TRANSACTION))
        assert isinstance(r, FindCoordinatorResponse)
        code = ErrorCode.for_code(r.error_code)
        if code is ErrorCode.NONE:
            return int(r.node_id)
        if code is not ErrorCode.COORDINATOR_NOT_AVAILABLE or time.monotonic() > deadline:
            raise KafkaError(code, f"FindCoordinator for {transactional_id}: {code.name}")
        time.sleep(client.retry_backoff_s)


def _abort_through_coordinator(client: KafkaClient, transactional_id: str) -> int:
    known = read_transactions(client).get(transactional_id)
    if known is None:
        err(f"Error: transactional id {transactional_id} not found")
        return 1
    state = known.value.state
    deadline = time.monotonic() + ABORT_RETRY_S
    fenced_open = False
    while True:
        node = _coordinator_node(client, transactional_id)
        r = client.send(InitProducerIdRequest(transactional_id=transactional_id,
                                              transaction_timeout_ms=known.value.transaction_timeout_ms),
                        node_id=node, version=client.version(client.connection(node), ApiKey.INIT_PRODUCER_ID))
        assert isinstance(r, InitProducerIdResponse)
        code = ErrorCode.for_code(r.error_code)
        if code is ErrorCode.NONE:
            break
        if code not in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            raise KafkaError(code, f"InitProducerId for {transactional_id}: {code.name}")
        fenced_open = fenced_open or code is ErrorCode.CONCURRENT_TRANSACTIONS
        if time.monotonic() > deadline:
            raise KafkaError(code, f"the coordinator of {transactional_id} kept answering {code.name}")
        time.sleep(client.retry_backoff_s)
    if state is TransactionState.ONGOING or fenced_open:
        print(f"Aborted the open transaction of {transactional_id}; producer id {r.producer_id} is now at epoch "
              f"{r.producer_epoch} (the producer that held it is fenced).")
    else:
        print(f"{transactional_id} had no open transaction ({state.display_name}); producer id {r.producer_id} "
              f"is now at epoch {r.producer_epoch} (the producer that held it is fenced).")
    return 0


def _first_open_batch(client: KafkaClient, topic: str, partition: int, leader: int) -> tuple[int, int] | None:
    """(producer id, epoch) of the batch at the partition's last stable offset, if it is transactional."""
    lso = client.list_offsets(topic, {partition: -1}, isolation_level=READ_COMMITTED)[partition].offset
    t = FetchRequest.FetchableTopic
    request = FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, topics=[
        t(name=topic, fetch_partitions=[t.FetchPartition(partition_index=partition, fetch_offset=lso,
                                                         max_bytes=1 << 20)])])
    response = client.send(request, node_id=leader, version=min(11, client.version(client.connection(leader),
                                                                                    ApiKey.FETCH)))
    assert isinstance(response, FetchResponse)
    data = bytes(response.topics[0].partitions[0].records or b"")
    for h in iter_batches(data):
        if h.last_offset >= lso:
            return (h.producer_id, h.producer_epoch) if h.is_transactional and not h.is_control else None
    return None


def _abort_at_partition(client: KafkaClient, args: argparse.Namespace) -> int:
    topic, partition = args.topic, args.partition
    leader = client.leader_for(topic, partition)
    if args.producer_id is None:
        found = _first_open_batch(client, topic, partition, leader)
        if found is None:
            print(f"{topic}-{partition} has no open transaction at its last stable offset: nothing to abort")
            return 0
        producer_id, producer_epoch = found
    else:
        producer_id, producer_epoch = args.producer_id, args.producer_epoch
    coordinator_epoch = args.coordinator_epoch
    if coordinator_epoch is None:
        owner = next((t for t in read_transactions(client).values() if t.value.producer_id == producer_id), None)
        coordinator_epoch = owner.coordinator_epoch if owner is not None else 0
    M = WriteTxnMarkersRequest.WritableTxnMarker
    request = WriteTxnMarkersRequest(markers=[M(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        coordinator_epoch=coordinator_epoch, topics=[M.WritableTxnMarkerTopic(name=topic,
                                                                             partition_indexes=[partition])])])
    response = client.send(request, node_id=leader, version=0)
    assert isinstance(response, WriteTxnMarkersResponse)
    code = ErrorCode.for_code(response.markers[0].topics[0].partitions[0].error_code)
    if code is not ErrorCode.NONE:
        hint = " (pass a higher --coordinator-epoch)" if code is ErrorCode.TRANSACTION_COORDINATOR_FENCED else ""
        raise KafkaError(code, f"aborting producer {producer_id} at {topic}-{partition}{hint}")
    print(f"Wrote an ABORT marker for producer id {producer_id} (epoch {producer_epoch}, coordinator epoch "
          f"{coordinator_epoch}) to {topic}-{partition}.")
    return 0

