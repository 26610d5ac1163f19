"""Server-side filters for stock consumers: kafka-python and librdkafka consumers with no LDC code get only
the records their group's filter passes, commit past the rest, resume right after a restart and show no lag.

Each test creates its group first (committed offsets at the start, as ``sofakafka groups reset-offsets``
does), sets the filter at the group's coordinator, and only then starts consumers, which is how an operator
sets up a zone subscription; one test sets a filter while a member is already consuming.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer

from sofakafka.client.client import ConfigResourceType, KafkaClient, NewTopic
from sofakafka.client.groups import GroupAdmin
from sofakafka.ldc import (
    UNIT_TARGET_R,
    LdcModel,
    RecordFilter,
    SubscriptionMode,
)
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.router.store import list_group_filters, read_group_filter, write_group_filter
from tests.integration.conftest import BrokerProcess, _start
from tests.ldc_data import BROKER_SETTINGS, MIXED, bill_model

MODEL = LdcModel.from_toml(bill_model("ANT"))

EXPECTED = {
    ("R1", SubscriptionMode.LOCAL): {b"ori-R1", b"c-CZ"},
    ("R1", SubscriptionMode.RZONE): {b"r-R1", b"r-R1-dup"},
    ("GZ00", SubscriptionMode.GZONE): {b"ori-GZ", b"g-GZ"},
    ("CZ01", SubscriptionMode.CZONE): {b"c-CZ"},
}
_ids = itertools.count()


@pytest.fixture(scope="module")
def fbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = _start(tmp_path_factory.mktemp("filters-broker"), BROKER_SETTINGS)
    try:
        yield b
    finally:
        b.kill()


def produce(bootstrap: str, topic: str, round_: int, compression: str = "none") -> None:
    p = CKProducer({"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 20})
    for i, (key, headers) in enumerate(MIXED):
        p.produce(topic, b"%d-%d" % (round_, i), key, partition=i % 2, headers=headers)
    assert p.flush(30) == 0


def create_group(bootstrap: str, group: str, topic: str) -> None:
    with KafkaClient(bootstrap) as client:
        results = GroupAdmin(client).commit_offsets(group, {(topic, 0): 0, (topic, 1): 0})
    assert set(results.values()) == {ErrorCode.NONE}, results


def consume(client: str, bootstrap: str, group: str, topic: str, expected: int,
            client_id: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of everything a stock consumer of ``group`` receives, until ``expected`` came and a
    second's more polling brought nothing; commits what it consumed and closes. Records are kept by
    (partition, offset): a consumer that rebalances and is given its partitions again reads from its
    committed offsets once more, which is Kafka's at-least-once, not the filter's doing."""
    got: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    deadline = time.monotonic() + 30
    if client == "confluent":
        c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        try:
            quiet_until = None
            while time.monotonic() < deadline:
                msg = c.poll(0.2)
                if msg is not None and msg.error() is None:
                    got[(msg.partition(), msg.offset())] = (msg.key(), msg.value())
                    quiet_until = None
                elif len(got) >= expected:
                    quiet_until = quiet_until or time.monotonic() + 1.0
                    if time.monotonic() > quiet_until:
                        break
            c.commit(asynchronous=False)
        finally:
            c.close()
    else:
        from kafka import KafkaConsumer
        from kafka.errors import CommitFailedError, RebalanceInProgressError

        hard_deadline = deadline + 30
        kc = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                           enable_auto_commit=False, auto_offset_reset="earliest",
                           session_timeout_ms=30000, heartbeat_interval_ms=3000)
        # kafka-python may join before its metadata has the topic and then sit with no assignment until its
        # next metadata refresh ("No partition metadata for topic"): learn the topic first.
        while not kc.partitions_for_topic(topic) and time.monotonic() < deadline:
            time.sleep(0.1)
        kc.subscribe([topic])
        try:
            while True:
                quiet_until = None
                while time.monotonic() < deadline:
                    batch = kc.poll(1000)  # kafka-python 3 can stall for good when a join outlives a short poll
                    for records in batch.values():
                        got.update(((r.partition, r.offset), (r.key, r.value)) for r in records)
                    if batch:
                        quiet_until = None
                    elif len(got) >= expected:
                        quiet_until = quiet_until or time.monotonic() + 1.0
                        if time.monotonic() > quiet_until:
                            break
                try:
                    kc.commit()
                    break
                except (CommitFailedError, RebalanceInProgressError):
                    # A loaded machine can make kafka-python miss its session: poll through the rebalance
                    # and commit again, until a hard limit.
                    if time.monotonic() > hard_deadline:
                        raise
                    deadline = min(hard_deadline, time.monotonic() + 5)
        finally:
            kc.close()
    return list(got.values())


def lag(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    with KafkaClient(bootstrap) as client:
        committed = GroupAdmin(client).fetch_offsets(group)
        ends = client.list_offsets(topic, {0: -1, 1: -1})
    return {p: ends[p].offset - committed[(topic, p)].offset for p in (0, 1)}


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
@pytest.mark.parametrize(("cell", "mode"), list(EXPECTED))
def test_zone_subscription_as_a_server_side_filter_for_stock_consumers(
        fbroker: BrokerProcess, client: str, cell: str, mode: SubscriptionMode) -> None:
    bs = fbroker.bootstrap
    n = next(_ids)
    topic = MODEL.physical_topic(cell, f"bills{n}")
    group = MODEL.physical_group(cell, f"app{n}")
    with KafkaClient(bs) as kc:
        assert kc.create_topics([NewTopic(topic, 2, 1)])[topic].error == ErrorCode.NONE
    produce(bs, topic, 0, compression="lz4" if n % 2 else "none")
    create_group(bs, group, topic)
    with KafkaClient(bs) as kc:
        write_group_filter(kc, group, MODEL.subscription_filter(cell, mode))
        assert read_group_filter(kc, group) == MODEL.subscription_filter(cell, mode)
    expected = EXPECTED[(cell, mode)]
    first = consume(client, bs, group, topic, len(expected), f"{client}-{n}")
    assert sorted(k for k, _ in first) == sorted(expected)
    assert lag(bs, group, topic) == {0: 0, 1: 0}  # committed past the records left out, to the log end

    # A restart of the group resumes after what it consumed: only the second round's matching records.
    produce(bs, topic, 1)
    second = consume(client, bs, group, topic, len(expected), f"{client}-{n}")
    assert sorted(second) == sorted((k, b"1-%d" % i) for i, (k, _) in enumerate(MIXED) if k in expected)
    assert lag(bs, group, topic) == {0: 0, 1: 0}

    # Another group reading the same topic with another client id gets everything, untouched.
    everything = consume(client, bs, f"{group}-all", topic, 2 * len(MIXED), f"{client}-all-{n}")
    assert len(everything) == 2 * len(MIXED)


def test_a_filter_set_while_a_member_consumes_applies_from_its_next_fetch(fbroker: BrokerProcess) -> None:
    bs = fbroker.bootstrap
    topic, group = "ANT.R1.live", "ANT.R1.live-app"
    with KafkaClient(bs) as kc:
        kc.create_topics([NewTopic(topic, 2, 1)])
    c = CKConsumer({"bootstrap.servers": bs, "group.id": group, "client.id": "live-app",
                    "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    c.subscribe([topic])
    try:
        produce(bs, topic, 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(MIXED) and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.key())
        assert sorted(got) == sorted(k for k, _ in MIXED)
        with KafkaClient(bs) as kc:
            write_group_filter(kc, group, RecordFilter.build(headers=[(UNIT_TARGET_R, "R1")]))
        produce(bs, topic, 1)
        got = []
        end = time.monotonic() + 5
        while time.monotonic() < end:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.key())
        assert sorted(got) == [b"r-R1", b"r-R1-dup"]
    finally:
        c.close()


def test_a_stock_admin_client_sets_and_reads_a_group_filter(fbroker: BrokerProcess) -> None:
    from kafka.admin import ConfigResource, KafkaAdminClient
    from kafka.admin import ConfigResourceType as KPType

    bs = fbroker.bootstrap
    with KafkaClient(bs) as kc:
        kc.create_topics([NewTopic("admin-topic", 2, 1)])
    create_group(bs, "stock-admin-group", "admin-topic")
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.alter_configs([ConfigResource(KPType.GROUP, "stock-admin-group",
                                            configs={"sofakafka.filter.key.prefix": "user-,acct-"})])
        described = admin.describe_configs([ConfigResource(KPType.GROUP, "stock-admin-group")])
        assert "sofakafka.filter.key.prefix" in repr(described)
        with KafkaClient(bs) as kc:
            assert read_group_filter(kc, "stock-admin-group") == RecordFilter.build(key_prefixes=["user-", "acct-"])
            assert list_group_filters(kc)["stock-admin-group"].key_prefixes == (b"acct-", b"user-")
        # A header condition's key is open-ended, so kafka-python is told not to check its name first.
        admin.alter_configs([ConfigResource(KPType.GROUP, "stock-admin-group", configs={
            "sofakafka.filter.header.__UNIT.TARGET_R": "R1", "sofakafka.filter.key.prefix": "user-"})],
            raise_on_unknown=False)
    finally:
        admin.close()
    with KafkaClient(bs) as kc:
        assert read_group_filter(kc, "stock-admin-group") == RecordFilter.build(
            key_prefixes=["user-"], headers=[(UNIT_TARGET_R, "R1")])


def test_bad_filters_are_refused_naming_what_is_wrong_and_nothing_is_stored(fbroker: BrokerProcess) -> None:
    bs = fbroker.bootstrap
    with KafkaClient(bs) as kc:
        with pytest.raises(KafkaError) as err:
            write_group_filter(kc, "no-such-group", RecordFilter.build(key_prefixes=["a"]))
        assert err.value.code == ErrorCode.GROUP_ID_NOT_FOUND
        assert "group no-such-group does not exist" in str(err.value)
        assert read_group_filter(kc, "no-such-group").is_empty

        kc.create_topics([NewTopic("bad-filter-topic", 2, 1)])
        create_group(bs, "bad-filter-group", "bad-filter-topic")
        (result,) = kc.alter_configs({(ConfigResourceType.GROUP, "bad-filter-group"): {
            "sofakafka.filter.key.prefix": "a", "sofakafka.filter.kee": "x"}})
        assert result.error == ErrorCode.INVALID_REQUEST
        assert "sofakafka.filter.kee: unknown group config" in (result.error_message or "")
        assert read_group_filter(kc, "bad-filter-group").is_empty  # the good key was not stored either
        # removing a filter needs no group: it is how a filter of a deleted group goes
        write_group_filter(kc, "no-such-group", RecordFilter())


def test_zone_subscription_for_a_stock_java_consumer(fbroker: BrokerProcess) -> None:
    """Kafka 2.6's own console consumer (kafka-clients 2.6.3) in a filtered group: only the matching records,
    and its commit on exit (the Java client commits its position, past the records left out) leaves no lag."""
    from tests.reference.java import run_main

    bs = fbroker.bootstrap
    topic, group = MODEL.physical_topic("R1", "java-bills"), MODEL.physical_group("R1", "java-app")
    with KafkaClient(bs) as kc:
        kc.create_topics([NewTopic(topic, 2, 1)])
    produce(bs, topic, 0, compression="gzip")
    create_group(bs, group, topic)
    with KafkaClient(bs) as kc:
        write_group_filter(kc, group, MODEL.subscription_filter("R1", SubscriptionMode.RZONE))
    out = run_main("kafka.tools.ConsoleConsumer", [
        "--bootstrap-server", bs, "--topic", topic, "--group", group, "--timeout-ms", "8000",
        "--property", "print.key=true", "--consumer-property", "client.id=java-app"], timeout=120)
    keys = sorted(line.split("\t")[0] for line in out.stdout.splitlines() if "\t" in line)
    assert keys == ["r-R1", "r-R1-dup"], out.stdout + out.stderr
    assert lag(bs, group, topic) == {0: 0, 1: 0}


@pytest.mark.parametrize("group", [".", ".."])
def test_a_group_named_dot_or_dot_dot_is_described_and_its_missing_group_named(fbroker: BrokerProcess,
                                                                                group: str) -> None:
    # Found by the fuzzer: '.' reached the store's path check and the connection saw an internal error.
    with KafkaClient(fbroker.bootstrap) as kc:
        (described,) = kc.describe_configs([(ConfigResourceType.GROUP, group, None)])
        assert described.error == ErrorCode.NONE and all(e.is_default for e in described.entries)
        with pytest.raises(KafkaError) as err:
            write_group_filter(kc, group, RecordFilter.build(key_prefixes=["a"]))
        assert err.value.code == ErrorCode.GROUP_ID_NOT_FOUND
        assert read_group_filter(kc, group).is_empty
