"""The router copies exactly once under kill -9, with rules both ways, on three brokers and a real ZooKeeper.

Bills of users of both regions are produced into R1's and R2's physical topics while two ``sofakafka router
run`` processes (one consumer group, stable transactional ids) copy each region's foreign bills to the other
region. Each router is killed -9 once in the middle of the load and started again (so the router is killed
twice). Afterwards each target holds every bill that had to be copied exactly once, read_committed, in its
source order per key, and no copy was ever copied again (rules in both directions do not loop).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition

from sofakafka.client import KafkaClient, NewTopic
from sofakafka.client.groups import GroupAdmin
from sofakafka.ldc import ROUTER_PATH_HEADER, LdcModel, RoutingRules
from sofakafka.protocol.errors import ErrorCode
from sofakafka.router.status import router_status
from tests.integration.conftest import REPO, BrokerProcess
from tests.ldc_data import BILL_RULES, bill_model

MODEL = bill_model("EOS", gzone=False, czones=())
RULES = BILL_RULES
SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "replica.lag.time.max.ms": "6000",
}
KEYS = 24
WAIT_S = 180.0


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


@pytest.fixture
def three_brokers(zk_broker_factory: Callable[..., BrokerProcess]) -> Iterator[list[BrokerProcess]]:
    def unstarted(i: int) -> BrokerProcess:
        return zk_broker_factory({**SETTINGS, "broker.id": str(i)}, name=f"broker{i}-", start=False)

    brokers = [unstarted(i) for i in range(3)]
    while len({b.port for b in brokers}) < len(brokers):
        brokers = [unstarted(i) for i in range(3)]
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(BrokerProcess.start, brokers))
    yield brokers


class Bills:
    """Bills produced from a thread until stopped: ``sent[topic][key]`` lists the values in send order
    (acks=all, idempotent, so that is their order in the partition)."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.sent: dict[str, dict[bytes, list[bytes]]] = defaultdict(lambda: defaultdict(list))
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bills")

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            for cell in ("R1", "R2"):
                topic = f"EOS.{cell}.bills"
                for k in range(KEYS):
                    key = b"user-%02d" % k
                    target = b"R2" if k % 2 == 0 else b"R1"
                    value = b"%s|%s|%06d" % (cell.encode(), key, seq)

                    def report(err: object, _msg: object, topic: str = topic, key: bytes = key,
                               value: bytes = value) -> None:
                        if err is not None:
                            self.failed.append(str(err))

                    self.sent[topic][key].append(value)
                    self.producer.produce(topic, value, key, headers=[("__UNIT.ORIUNIT", cell.encode()),
                                                                      ("__UNIT.TARGET_R", target)],
                                          on_delivery=report)
            seq += 1
            self.producer.poll(0)
            time.sleep(0.02)

    def start(self) -> Bills:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(120) == 0
        assert not self.failed, self.failed[:3]


_router_logs: list[BinaryIO] = []


def start_router(bootstrap: str, tmp: Path, name: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    log = open(tmp / f"router-{name}.log", "ab")
    _router_logs.append(log)
    return subprocess.Popen(
        [sys.executable, "-m", "sofakafka", "router", "run", "--bootstrap-server", bootstrap,
         "--model", str(tmp / "ldc.toml"), "--rules", str(tmp / "rules.toml"), "--group", "eos-router",
         "--transactional-id", f"eos-router-{name}", "--batch-size", "50",
         "--client-config", "session.timeout.ms=6000", "--client-config", "transaction.timeout.ms=10000"],
        stdout=log, stderr=subprocess.STDOUT, env=env)


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes, bytes, dict[str, bytes]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{topic}", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([CKTopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[bytes, bytes, dict[str, bytes]]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            out.append((msg.key(), msg.value(), dict(msg.headers() or [])))
    finally:
        c.close()
    assert len(at_end) == partitions, f"{topic}: did not reach the end of every partition"
    return out


def test_router_copies_exactly_once_through_two_kills(three_brokers: list[BrokerProcess], tmp_path: Path) -> None:
    bootstrap = ",".join(b.bootstrap for b in three_brokers)
    (tmp_path / "ldc.toml").write_text(MODEL)
    (tmp_path / "rules.toml").write_text(RULES)
    model, rules = LdcModel.from_toml(MODEL), RoutingRules.from_text(RULES)
    with KafkaClient(bootstrap) as kc:
        created = kc.create_topics([NewTopic(f"EOS.{c}.bills", 3, 3, configs={"min.insync.replicas": "2"})
                                    for c in ("R1", "R2")])
        assert all(r.error == ErrorCode.NONE for r in created.values()), created
    bills = Bills(bootstrap).start()
    routers = {name: start_router(bootstrap, tmp_path, name) for name in ("a", "b")}

    def routed() -> int:
        """Source records the routers have committed as copied (both source topics)."""
        with KafkaClient(bootstrap) as kc:
            committed = GroupAdmin(kc).fetch_offsets("eos-router")
        return sum(o.offset for o in committed.values() if o.offset > 0)

    try:
        for name in ("a", "b"):
            before = routed()
            wait_for("the routers copying", lambda before=before: routed() > before + 300)
            routers[name].kill()  # kill -9, in the middle of whatever transaction it has open
            routers[name].wait(30)
            routers[name] = start_router(bootstrap, tmp_path, name)
        time.sleep(3)  # more load while both run again
        bills.stop()

        def caught_up() -> bool:
            with KafkaClient(bootstrap) as kc:
                status = router_status(kc, model, rules, "eos-router")
            return all(r.lag == 0 for r in status.rules)

        wait_for("the routers to copy everything (lag 0 on every rule)", caught_up)
        with KafkaClient(bootstrap) as kc:
            status = router_status(kc, model, rules, "eos-router")
        assert len(status.members) == 2, status
    finally:
        for proc in routers.values():
            proc.terminate()
        for proc in routers.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        while _router_logs:
            _router_logs.pop().close()

    for source_cell, target_cell, wanted_target in (("R1", "R2", b"R2"), ("R2", "R1", b"R1")):
        source = bills.sent[f"EOS.{source_cell}.bills"]
        target = read_committed(bootstrap, f"EOS.{target_cell}.bills", 3)
        copied: dict[bytes, list[bytes]] = defaultdict(list)
        for key, value, headers in target:
            if ROUTER_PATH_HEADER in headers:
                # a copy is never copied again: its path names only the cell it came from
                assert headers[ROUTER_PATH_HEADER] == source_cell.encode(), (key, value, headers)
                assert headers["__UNIT.TARGET_R"] == wanted_target
                copied[key].append(value)
        expected = {key: values for key, values in source.items() if int(key[-2:]) % 2 == (0 if wanted_target == b"R2"
                                                                                             else 1)}
        assert sorted(copied) == sorted(expected)
        for key, values in expected.items():
            # every bill exactly once, in the source's order per key
            assert copied[key] == values, (key, len(copied[key]), len(values))
