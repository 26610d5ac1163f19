"""A consumer connection's first Fetch sees the group filters published before it, however slow the watches.

A member of a filtered group fetches only after its coordinator has published it to the metadata store, but
the broker it fetches from learns of that through a watch, which may fire later than the consumer's first
Fetch arrives. These tests take the watches away altogether (the registry's follower thread is stopped), so
only the Fetch handler's catch-up can bring the filter in.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sofakafka.broker.group_filters import GroupFilterRegistry, MemberBinding, write_group_filter
from sofakafka.client.client import ConfigResourceType
from sofakafka.ldc import RecordFilter
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.alter_configs import AlterConfigsRequest
from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.records import RecordBatchBuilder
from tests.unit.broker.broker_harness import BrokerThread, Client, running_broker
from tests.unit.broker.test_data_path import led_topic, produce, records_of
from tests.unit.broker.test_group_handlers import GROUPS, commit, coordinator_ready

CLIENT_ID = "unit-test"  # what the harness's Client sends


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    with running_broker(tmp_path_factory.mktemp("data"), GROUPS) as b:
        yield b


def deafen(registry: GroupFilterRegistry) -> None:
    """Stop the registry's follower: watches still fire, but nothing reloads on them any more."""
    registry._closed = True
    registry._wanted.set()
    assert registry._thread is not None
    registry._thread.join(10)
    assert not registry._thread.is_alive()


def fetch_keys(client: Client, topic: str) -> list[bytes | None]:
    t = FetchRequest.FetchableTopic
    resp = client.call(FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, topics=[
        t(name=topic, fetch_partitions=[t.FetchPartition(partition_index=0, fetch_offset=0, max_bytes=1 << 20)])]),
        11)
    (p,) = resp.topics[0].partitions
    assert p.error_code == ErrorCode.NONE
    return [r.key for r in records_of(bytes(p.records))]


def batch_of_keys(keys: list[bytes]) -> bytes:
    b = RecordBatchBuilder()
    for i, key in enumerate(keys):
        b.append_record(i, 1_600_000_000_000 + i, key, b"v")
    return b.build()


def test_a_connections_first_fetch_sees_a_member_the_watches_never_delivered(broker: BrokerThread) -> None:
    assert broker.broker is not None
    registry = broker.broker.group_filters
    with Client(broker.port) as before:
        topic = led_topic(before, "filtered-first-fetch")
        assert produce(before, topic, batch_of_keys([b"keep-1", b"drop-1", b"keep-2"])).error_code == 0
        # This connection fetched before the filter existed: it goes on with what the broker knew then.
        assert fetch_keys(before, topic) == [b"keep-1", b"drop-1", b"keep-2"]
        deafen(registry)
        write_group_filter(broker.broker.metadata_store, "first-fetch-app", RecordFilter.build(key_prefixes=["keep"]),
                           {"m1": MemberBinding(CLIENT_ID, "127.0.0.1", frozenset({topic}))})
        assert registry.lookup(CLIENT_ID, "127.0.0.1") is None  # the registry did not hear of it
        with Client(broker.port) as member:
            reloads = registry.reloads
            assert fetch_keys(member, topic) == [b"keep-1", b"keep-2"]
            assert registry.reloads == reloads + 1
            # Only the connection's first Fetch waits for the store: the second finds the filter in memory.
            assert fetch_keys(member, topic) == [b"keep-1", b"keep-2"]
            assert registry.reloads == reloads + 1
        assert fetch_keys(before, topic) == [b"keep-1", b"keep-2"]  # the registry it reads now has the filter


def test_the_coordinator_knows_a_filter_when_it_answers_the_alter_configs_that_set_it(broker: BrokerThread) -> None:
    """So the JoinGroup it answers next publishes the member (it publishes only for groups it knows filtered)."""
    assert broker.broker is not None
    registry = broker.broker.group_filters
    group = "altered-app"
    with Client(broker.port) as c:
        topic = led_topic(c, "filtered-altered")
        coordinator_ready(c, group)
        assert commit(c, group, {(topic, 0): 0}) == {(topic, 0): ErrorCode.NONE}
        deafen(registry)
        resource = AlterConfigsRequest.AlterConfigsResource
        resp = c.call(AlterConfigsRequest(resources=[resource(
            resource_type=ConfigResourceType.GROUP, resource_name=group,
            configs=[resource.AlterableConfig(name=k, value=v)
                     for k, v in RecordFilter.build(key_prefixes=["keep"]).to_configs().items()])]), 1)
        assert [r.error_code for r in resp.responses] == [ErrorCode.NONE]
        assert registry.filter_of(group) == RecordFilter.build(key_prefixes=["keep"])


@pytest.mark.parametrize("replica_id", [0, 1])
def test_a_follower_fetch_never_waits_for_the_group_filters(broker: BrokerThread, replica_id: int) -> None:
    """Only consumers (replica_id -1) are filtered: a follower's fetch, broker 0's included, reloads nothing."""
    assert broker.broker is not None
    registry = broker.broker.group_filters
    with Client(broker.port) as follower:
        topic = led_topic(follower, f"followed-{replica_id}")
        reloads = registry.reloads
        t = FetchRequest.FetchableTopic
        follower.call(FetchRequest(replica_id=replica_id, max_wait=0, min_bytes=0, max_bytes=1 << 20, topics=[
            t(name=topic, fetch_partitions=[t.FetchPartition(partition_index=0, fetch_offset=0, max_bytes=1024)])]),
            11)
        assert registry.reloads == reloads
