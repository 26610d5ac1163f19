"""The message router against a real broker: the brief's bill example, loops, predicates, keys and timestamps.

These run the router at least once (``exactly_once=False``); the exactly-once runs under kill -9 are in
tests/cluster/test_router_exactly_once.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from sofakafka.client.client import KafkaClient, NewTopic
from sofakafka.ldc import (
    ROUTER_PATH_HEADER,
    UNIT_ORIUNIT,
    UNIT_TARGET_R,
    LdcModel,
    RoutingRules,
    SubscriptionMode,
)
from sofakafka.protocol.errors import ErrorCode
from sofakafka.router.ldc_client import LdcConsumer, LdcProducer
from sofakafka.router.worker import Router, RouterConfig, RouterError
from tests.integration.conftest import BrokerProcess, _start
from tests.ldc_data import BILL_RULES, BROKER_SETTINGS, bill_model

MODEL = bill_model("BANK", gzone=False, czones=())

# Bills of users whose uid belongs to the other RZone are copied there; rules both ways.
RULES = BILL_RULES


@pytest.fixture(scope="module")
def router_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = _start(tmp_path_factory.mktemp("router-broker"), BROKER_SETTINGS)
    try:
        yield b
    finally:
        b.kill()


class RunningRouter:
    def __init__(self, router: Router) -> None:
        self.router = router
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="router")

    def _run(self) -> None:
        try:
            self.router.run()
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def __enter__(self) -> Router:
        self.thread.start()
        return self.router

    def __exit__(self, *exc: object) -> None:
        self.router.stop()
        self.thread.join(60)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error


def read_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 30.0) -> list[object]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{time.monotonic()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    with KafkaClient(bootstrap) as client:
        partitions = list(client.metadata([topic]).topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    out: list[object] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = c.poll(0.3)
            if msg is not None and msg.error() is None:
                out.append(msg)
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # anything beyond what was expected shows up too
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg)
    finally:
        c.close()
    return out


def test_bill_of_user_b_reaches_r2_and_only_r2s_application_sees_it(router_broker: BrokerProcess) -> None:
    bs = router_broker.bootstrap
    model = LdcModel.from_toml(MODEL)
    rules = RoutingRules.from_text(RULES)
    with KafkaClient(bs) as client:
        client.create_topics([NewTopic("BANK.R1.bills", 2, 1), NewTopic("BANK.R2.bills", 3, 1)])
    producer = LdcProducer(model, "R1", backend="confluent", config={"bootstrap.servers": bs})
    producer.send("bills", b"bill of A", key=b"user-A", uid=10, timestamp_ms=1_700_000_000_000)
    producer.send("bills", b"bill of B", key=b"user-B", uid=57, timestamp_ms=1_700_000_000_123)
    assert producer.flush(30) == 0
    with RunningRouter(Router(model, rules, RouterConfig(bs, group_id="router-bills", exactly_once=False))) as r:
        copied = read_all(bs, "BANK.R2.bills", 1)
        deadline = time.monotonic() + 10
        while r.stats["bills-r2-to-r1"].consumed < 1 and time.monotonic() < deadline:
            time.sleep(0.1)  # the router also reads R2's topic, where the copy now is
    assert [(m.key(), m.value()) for m in copied] == [(b"user-B", b"bill of B")]  # type: ignore[attr-defined]
    copy = copied[0]
    assert copy.timestamp() == (1, 1_700_000_000_123)  # type: ignore[attr-defined]
    headers = dict(copy.headers())  # type: ignore[attr-defined]
    assert headers[UNIT_ORIUNIT] == b"R1" and headers[UNIT_TARGET_R] == b"R2"
    assert headers[ROUTER_PATH_HEADER] == b"R1"
    # the copy in R2 matches the R2 -> R1 rule's predicate only if TARGET_R were R1; and the path stops loops
    assert len(read_all(bs, "BANK.R1.bills", 2)) == 2
    assert r.stats["bills-r1-to-r2"].copied == 1 and r.stats["bills-r1-to-r2"].skipped == 1
    assert r.stats["bills-r2-to-r1"].copied == 0

    # R1's application (an RZone subscription in R1) does not see B's bill; R2's does.
    for cell, expected in (("R1", [b"bill of A"]), ("R2", [b"bill of B"])):
        app = LdcConsumer(model, cell, "billing", ["bills"], SubscriptionMode.RZONE, backend="kafka-python",
                          config={"bootstrap_servers": bs, "auto_offset_reset": "earliest"})
        try:
            got: list[bytes | None] = []
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                got += [rec.value for rec in app.poll(1.0)]
            got += [rec.value for rec in app.poll(1.0)]
        finally:
            app.close()
        assert got == expected, cell


def test_rules_both_ways_without_predicates_copy_once_and_never_loop(router_broker: BrokerProcess) -> None:
    bs = router_broker.bootstrap
    model = LdcModel.from_toml(MODEL.replace("BANK", "LOOP"))
    rules = RoutingRules.from_text(
        "[[rules]]\nname='there'\nfrom='R1'\ntopic='t'\nto='R2'\n[[rules]]\nname='back'\nfrom='R2'\ntopic='t'\nto='R1'")
    with KafkaClient(bs) as client:
        client.create_topics([NewTopic("LOOP.R1.t", 1, 1), NewTopic("LOOP.R2.t", 1, 1)])
    p1 = LdcProducer(model, "R1", backend="kafka-python", config={"bootstrap_servers": bs})
    p2 = LdcProducer(model, "R2", backend="kafka-python", config={"bootstrap_servers": bs})
    for i in range(5):
        p1.send("t", f"r1-{i}".encode(), key=f"k{i}".encode())
        p2.send("t", f"r2-{i}".encode())
    p1.close()
    p2.close()
    with RunningRouter(Router(model, rules, RouterConfig(bs, group_id="router-loop", exactly_once=False))) as r:
        deadline = time.monotonic() + 30
        while (r.stats["there"].consumed < 10 or r.stats["back"].consumed < 10) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # a loop would show as more copies in this time
    for topic in ("LOOP.R1.t", "LOOP.R2.t"):
        values = sorted(m.value() for m in read_all(bs, topic, 10))  # type: ignore[attr-defined]
        assert values == sorted([f"r1-{i}".encode() for i in range(5)] + [f"r2-{i}".encode() for i in range(5)])
    assert r.stats["there"].copied == 5 and r.stats["back"].copied == 5


def test_router_refuses_missing_source_topics_and_empty_rules(router_broker: BrokerProcess) -> None:
    model = LdcModel.from_toml(MODEL.replace("BANK", "NONE"))
    rules = RoutingRules.from_text("[[rules]]\nname='x'\nfrom='R1'\ntopic='absent'\nto='R2'")
    router = Router(model, rules, RouterConfig(router_broker.bootstrap, exactly_once=False))
    with pytest.raises(RouterError, match=r"source topic\(s\) NONE.R1.absent do not exist"):
        router.run()
    with pytest.raises(RouterError, match="no routing rules"):
        Router(model, RoutingRules(), RouterConfig(router_broker.bootstrap))
    with KafkaClient(router_broker.bootstrap) as client:
        assert client.metadata(["NONE.R2.absent"]).topics["NONE.R2.absent"].error != ErrorCode.NONE


@pytest.mark.parametrize("exactly_once", [False, True])
def test_a_source_ending_in_transaction_markers_reaches_lag_0(router_broker: BrokerProcess,
                                                              exactly_once: bool) -> None:
    # An aborted transaction's records and its marker are never returned to a read_committed consumer, so no batch
    # commits past them; the router commits the position it stepped over them to when a poll brings nothing.
    # (A committed transaction's marker fetched after its records does the same, which the three-broker
    # exactly-once test met as a lag of 1 for good.)
    from confluent_kafka import Producer

    from sofakafka.router.status import router_status

    bs = router_broker.bootstrap
    prefix = f"MARK{int(exactly_once)}"
    model = LdcModel.from_toml(MODEL.replace("BANK", prefix))
    rules = RoutingRules.from_text(RULES)
    with KafkaClient(bs) as client:
        client.create_topics([NewTopic(f"{prefix}.R1.bills", 1, 1), NewTopic(f"{prefix}.R2.bills", 1, 1)])
    producer = LdcProducer(model, "R1", backend="confluent", config={"bootstrap.servers": bs})
    producer.send("bills", b"bill of B", key=b"user-B", uid=57)
    assert producer.flush(30) == 0
    group = f"router-marks-{int(exactly_once)}"

    def lags() -> list[int | None]:
        with KafkaClient(bs) as client:
            return [r.lag for r in router_status(client, model, rules, group).rules]

    def wait_for_lag_0() -> None:
        deadline = time.monotonic() + 30
        while lags() != [0, 0]:
            assert time.monotonic() < deadline, f"lags stay at {lags()}"
            time.sleep(0.2)

    config = RouterConfig(bs, group_id=group, exactly_once=exactly_once)
    with RunningRouter(Router(model, rules, config)) as r:
        wait_for_lag_0()
        assert r.stats["bills-r1-to-r2"].copied == 1
        aborted = Producer({"bootstrap.servers": bs, "transactional.id": f"aborting-{prefix}"})
        aborted.init_transactions(30)
        aborted.begin_transaction()
        for i in range(3):
            aborted.produce(f"{prefix}.R1.bills", f"aborted {i}".encode(), key=b"user-B", partition=0)
        aborted.flush(30)
        aborted.abort_transaction(30)
        with KafkaClient(bs) as client:
            end = client.list_offsets(f"{prefix}.R1.bills", {0: -1})[0].offset
        assert end == 5  # the bill, three aborted records, the abort marker
        wait_for_lag_0()
        stepped = r.marker_commits
        assert stepped >= 1
        time.sleep(2.0)  # idle polls: nothing more to step over, so nothing more is committed
        assert r.marker_commits == stepped
    assert r.stats["bills-r1-to-r2"].copied == 1
