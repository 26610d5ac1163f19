"""Transactions on a broker with SASL and Kafka's ACL authorizer: refused without the ACLs Kafka 2.6 asks for,
working with them.

One secure broker (tests/integration/security_setup.py) serves the module; ``plainuser`` (SASL PLAIN) may WRITE
topics ``stx-a`` and ``stx-b`` and READ ``stx-a``, and nothing else until a test grants it more with
``sofakafka acls add``, as an operator would.

* confluent-kafka's transactional producer: ``init_transactions`` fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  until the user may WRITE its transactional id (``--transactional-id``); with it, a committed and an aborted
  transaction across two topics, and a read_committed consumer sees exactly the committed records; a write to a
  topic without WRITE fails the transaction (TOPIC_AUTHORIZATION_FAILED), which the producer aborts;
  ``send_offsets_to_transaction`` needs READ on the group.
* Each transaction API asked directly (our client, as plainuser): which resource each checks and the code it
  answers, per partition where Kafka answers per partition; WriteTxnMarkers needs CLUSTER_ACTION.
* confluent-kafka's AdminClient describes ACLs of resource type TRANSACTIONAL_ID.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from sofakafka.client import KafkaClient
from sofakafka.client.security import ClientSecurity
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from sofakafka.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from sofakafka.protocol.messages.end_txn import EndTxnRequest
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest
from sofakafka.protocol.messages.init_producer_id import InitProducerIdRequest
from sofakafka.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from sofakafka.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from tests.integration.security_setup import (
    ADMIN,
    PLAIN_USER,
    SecureBroker,
    running_secure_broker,
    used_by_this_test,
)

WAIT_S = 60.0  # bounds on waiting, not timing assertions
USER = "User:plainuser"
E = ErrorCode


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    extra = {"transaction.state.log.num.partitions": "2"}
    with running_secure_broker(tmp_path_factory.mktemp("secure-txn"), extra) as sb:
        for topic in ("stx-a", "stx-b", "stx-other"):
            sb.sofakafka("topics", "create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
        sb.sofakafka("acls", "add", "--allow-principal", USER, "--operation", "Write", "--topic", "stx-a",
                     "--topic", "stx-b")
        sb.sofakafka("acls", "add", "--allow-principal", USER, "--operation", "Read", "--topic", "stx-a")
        yield sb


@pytest.fixture
def sb(secure: SecureBroker) -> Iterator[SecureBroker]:
    with used_by_this_test(secure):
        yield secure


def conf(sb: SecureBroker, login: tuple[str, str] = PLAIN_USER) -> dict[str, Any]:
    return {"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": login[0], "sasl.password": login[1]}


def user_client(sb: SecureBroker) -> KafkaClient:
    return KafkaClient(sb.address("SASL_PLAINTEXT"), security=ClientSecurity("SASL_PLAINTEXT", None, "PLAIN",
                                                                             *PLAIN_USER))


def wait_until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S} s"
        time.sleep(0.1)


def coordinator_error(sb: SecureBroker, txn_id: str) -> ErrorCode:
    with user_client(sb) as c:
        return ErrorCode.for_code(c.send(FindCoordinatorRequest(key=txn_id, key_type=1)).error_code)


def grant(sb: SecureBroker, *args: str) -> None:
    sb.sofakafka("acls", "add", "--allow-principal", USER, *args)


def grant_transactional_id(sb: SecureBroker, txn_id: str) -> None:
    """WRITE on the id (which implies DESCRIBE, what FindCoordinator asks), in force once FindCoordinator says so."""
    grant(sb, "--operation", "Write", "--transactional-id", txn_id)
    wait_until(f"WRITE on {txn_id} in force", lambda: coordinator_error(sb, txn_id) not in (
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.COORDINATOR_NOT_AVAILABLE))


def read_committed(sb: SecureBroker, topic: str) -> list[bytes]:
    """Every record of partition 0 a read_committed consumer (the admin) gets up to the end."""
    c = Consumer({**conf(sb, ADMIN), "group.id": f"rc-{topic}-{time.monotonic_ns()}", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return got
                raise AssertionError(m.error())
            got.append(m.value())
        raise AssertionError(f"{topic}: no end of partition within {WAIT_S} s; got {got}")
    finally:
        c.close()


def test_a_transactional_producer_needs_write_on_its_transactional_id(sb: SecureBroker) -> None:
    txn_id = "stx-app"
    refused = Producer({**conf(sb), "transactional.id": txn_id})
    with pytest.raises(KafkaException) as info:
        refused.init_transactions(30)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, info.value
    assert info.value.args[0].fatal()

    grant_transactional_id(sb, txn_id)
    p = Producer({**conf(sb), "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("stx-a", b"kept-a")
    p.produce("stx-b", b"kept-b")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("stx-a", b"dropped-a")
    p.produce("stx-b", b"dropped-b")
    p.flush(30)
    p.abort_transaction(30)
    assert read_committed(sb, "stx-a") == [b"kept-a"]
    assert read_committed(sb, "stx-b") == [b"kept-b"]
    assert "Traceback" not in sb.broker.log_text(), sb.broker.log_tail()


def test_a_topic_without_write_fails_the_transaction_which_the_producer_aborts(sb: SecureBroker) -> None:
    txn_id = "stx-app-topic"
    grant_transactional_id(sb, txn_id)
    p = Producer({**conf(sb), "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    failures: list[int] = []
    p.produce("stx-a", b"with-the-refused-one")
    p.produce("stx-other", b"refused", on_delivery=lambda err, _m: failures.append(err.code()) if err else None)
    with pytest.raises(KafkaException) as info:
        p.commit_transaction(30)
    assert info.value.args[0].txn_requires_abort(), info.value
    assert KafkaError.TOPIC_AUTHORIZATION_FAILED in failures or \
        info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (failures, info.value)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("stx-a", b"after-the-abort")
    p.commit_transaction(30)
    assert b"with-the-refused-one" not in read_committed(sb, "stx-a")
    assert b"after-the-abort" in read_committed(sb, "stx-a")


def test_send_offsets_to_transaction_needs_read_on_the_group(sb: SecureBroker) -> None:
    txn_id, group = "stx-app-offsets", "stx-group"
    grant_transactional_id(sb, txn_id)
    c = Consumer({**conf(sb), "group.id": group, "enable.auto.commit": False})
    try:
        p = Producer({**conf(sb), "transactional.id": txn_id})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("stx-b", b"out")
        offsets = [TopicPartition("stx-a", 0, 1)]
        with pytest.raises(KafkaException) as info:
            p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), 30)
        assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, info.value
        p.abort_transaction(30)
    finally:
        c.close()


def test_each_transaction_api_checks_what_kafka_checks(sb: SecureBroker) -> None:
    """As plainuser, each API's refusals, and that the same request passes once the ACL exists."""
    txn_id, group = "stx-raw", "stx-raw-group"
    grant_transactional_id(sb, txn_id)
    AT = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    OT = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    OP = OT.TxnOffsetCommitRequestPartition

    def add_partitions(txn: str, pid: int, epoch: int, *topics: str) -> dict[str, int]:
        r = c.send(AddPartitionsToTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                             topics=[AT(name=t, partitions=[0]) for t in topics]))
        assert isinstance(r, AddPartitionsToTxnResponse)
        return {t.name: p.error_code for t in r.results for p in t.results}

    def txn_offsets(txn: str, grp: str, pid: int, epoch: int, *topics: str) -> dict[str, int]:
        r = c.send(TxnOffsetCommitRequest(transactional_id=txn, group_id=grp, producer_id=pid, producer_epoch=epoch,
                                          topics=[OT(name=t, partitions=[OP(partition_index=0, committed_offset=0)])
                                                  for t in topics]))
        assert isinstance(r, TxnOffsetCommitResponse)
        return {t.name: p.error_code for t in r.topics for p in t.partitions}

    with user_client(sb) as c:
        assert c.send(InitProducerIdRequest(transactional_id="stx-nope", transaction_timeout_ms=60000)).error_code \
            == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert c.send(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)).error_code \
            == E.CLUSTER_AUTHORIZATION_FAILED  # idempotence needs IDEMPOTENT_WRITE on the cluster
        assert coordinator_error(sb, "stx-nope") == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        init = c.send(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000))
        assert init.error_code == E.NONE, init
        pid, epoch = init.producer_id, init.producer_epoch

        assert add_partitions("stx-nope", pid, epoch, "stx-a") == {"stx-a": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        assert add_partitions(txn_id, pid, epoch, "stx-a", "stx-other", "__consumer_offsets") == {
            "stx-a": E.OPERATION_NOT_ATTEMPTED, "stx-other": E.TOPIC_AUTHORIZATION_FAILED,
            "__consumer_offsets": E.TOPIC_AUTHORIZATION_FAILED}
        assert add_partitions(txn_id, pid, epoch, "stx-a") == {"stx-a": E.NONE}

        def add_offsets(txn: str) -> int:
            return c.send(AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                 group_id=group)).error_code
        assert add_offsets("stx-nope") == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert add_offsets(txn_id) == E.GROUP_AUTHORIZATION_FAILED
        grant(sb, "--operation", "Read", "--group", group)
        wait_until("READ on the group in force", lambda: add_offsets(txn_id) != E.GROUP_AUTHORIZATION_FAILED)
        assert add_offsets(txn_id) == E.NONE

        assert txn_offsets("stx-nope", group, pid, epoch, "stx-a") == {"stx-a": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        assert txn_offsets(txn_id, "stx-other-group", pid, epoch, "stx-a") == {"stx-a": E.GROUP_AUTHORIZATION_FAILED}
        # stx-b: WRITE but no READ; stx-a is committed alongside.
        assert txn_offsets(txn_id, group, pid, epoch, "stx-a", "stx-b") == {
            "stx-a": E.NONE, "stx-b": E.TOPIC_AUTHORIZATION_FAILED}

        assert c.send(EndTxnRequest(transactional_id="stx-nope", producer_id=pid, producer_epoch=epoch,
                                    committed=True)).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert c.send(EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                    committed=True)).error_code == E.NONE

        M = WriteTxnMarkersRequest.WritableTxnMarker
        markers = c.send(WriteTxnMarkersRequest(markers=[M(
            producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
            topics=[M.WritableTxnMarkerTopic(name="stx-a", partition_indexes=[0])])]))
        assert [p.error_code for m in markers.markers for t in m.topics for p in t.partitions] == [
            E.CLUSTER_AUTHORIZATION_FAILED]
    assert "Traceback" not in sb.broker.log_text(), sb.broker.log_tail()


def test_acls_on_transactional_ids_are_described_by_a_stock_admin_client(sb: SecureBroker) -> None:
    grant(sb, "--operation", "Describe", "--transactional-id", "stx-described")
    admin = AdminClient(conf(sb, ADMIN))
    flt = AclBindingFilter(ResourceType.TRANSACTIONAL_ID, "stx-described", ResourcePatternType.LITERAL, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    bindings = admin.describe_acls(flt).result(30)
    assert [(b.restype, b.name, b.principal, b.operation) for b in bindings] == [
        (ResourceType.TRANSACTIONAL_ID, "stx-described", USER, AclOperation.DESCRIBE)]
    listed = sb.sofakafka("acls", "list", "--transactional-id", "stx-described").stdout
    assert "stx-described" in listed and USER in listed, listed
