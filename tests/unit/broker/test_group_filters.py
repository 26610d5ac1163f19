"""The group filter registry over a real embedded store: what a fetch from each client must pass."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sofakafka.broker.group.consumer_protocol import Subscription, encode_subscription
from sofakafka.broker.group.metadata import GroupMetadata, MemberMetadata
from sofakafka.broker.group_filters import (
    AnyOf,
    GroupFilterRegistry,
    MemberBinding,
    changed_bindings,
    member_bindings,
    read_group_configs,
    write_bindings,
    write_group_filter,
)
from sofakafka.controller.embedded import EmbeddedMetadataStore
from sofakafka.ldc import RecordFilter
from sofakafka.protocol.errors import ErrorCode

R1 = RecordFilter.build(headers=[("__UNIT.TARGET_R", "R1")])
R2 = RecordFilter.build(headers=[("__UNIT.TARGET_R", "R2")])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EmbeddedMetadataStore]:
    s = EmbeddedMetadataStore.open(tmp_path / "meta", fsync=False)
    yield s
    s.close()


@pytest.fixture
def registry(store: EmbeddedMetadataStore) -> Iterator[GroupFilterRegistry]:
    r = GroupFilterRegistry(store)
    r.start()
    yield r
    r.close()


def wait_until(what: str, predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, f"the registry never showed {what}"
        time.sleep(0.01)


def member(mid: str, client_id: str, host: str, topics: list[str], protocol_type: str = "consumer") -> MemberMetadata:
    sub = encode_subscription(Subscription(topics=topics)) if protocol_type == "consumer" else b"\x01\x02"
    return MemberMetadata(member_id=mid, group_instance_id=None, client_id=client_id, client_host=host,
                          rebalance_timeout_ms=1000, session_timeout_ms=1000, protocol_type=protocol_type,
                          supported_protocols=[("range", sub)])


def test_unfiltered_clients_find_nothing(registry: GroupFilterRegistry) -> None:
    assert registry.lookup("rdkafka", "127.0.0.1") is None
    assert registry.filters() == {}


def test_a_filter_with_members_filters_their_topics_only(store: EmbeddedMetadataStore,
                                                         registry: GroupFilterRegistry) -> None:
    write_group_filter(store, "ANT.R1.billing", R1,
                       {"m1": MemberBinding("rdkafka", "10.0.0.1", frozenset({"ANT.R1.bills"}))})
    wait_until("the filter", lambda: registry.lookup("rdkafka", "10.0.0.1") is not None)
    assert read_group_configs(store, "ANT.R1.billing") == {"sofakafka.filter.header.__UNIT.TARGET_R": "R1"}
    found = registry.lookup("rdkafka", "/10.0.0.1")  # Kafka's "/host" form and the bare host are the same
    assert found is not None and found.for_topic("ANT.R1.bills") == R1
    assert found.for_topic("ANT.R1.other") is None
    assert registry.lookup("rdkafka", "10.0.0.2") is None
    assert registry.lookup("other", "10.0.0.1") is None

    write_group_filter(store, "ANT.R1.billing", RecordFilter(), {})
    wait_until("the filter gone", lambda: registry.lookup("rdkafka", "10.0.0.1") is None)
    assert registry.lookup("rdkafka", "10.0.0.1") is None
    assert read_group_configs(store, "ANT.R1.billing") == {}


def test_one_client_in_two_filtered_groups_on_one_topic_passes_either(store: EmbeddedMetadataStore,
                                                                     registry: GroupFilterRegistry) -> None:
    for group, f in (("g1", R1), ("g2", R2)):
        write_group_filter(store, group, f, {"m": MemberBinding("c", "h", frozenset({"t"}))})
        wait_until(group, lambda g=group: registry.filter_of(g) is not None)
    found = registry.lookup("c", "h")
    assert found is not None
    both = found.for_topic("t")
    assert isinstance(both, AnyOf)
    assert both.matches(None, [("__UNIT.TARGET_R", b"R2")]) and not both.matches(None, [])


def test_members_of_other_protocols_are_filtered_on_every_topic(store: EmbeddedMetadataStore,
                                                               registry: GroupFilterRegistry) -> None:
    group = GroupMetadata("connect-like", protocol_type="connect")
    group.members["m"] = member("m", "w1", "/h", [], protocol_type="connect")
    bindings = member_bindings(group)
    assert bindings == {"m": MemberBinding("w1", "h", None)}
    write_group_filter(store, "connect-like", R1, bindings)
    wait_until("the filter", lambda: registry.lookup("w1", "h") is not None)
    found = registry.lookup("w1", "h")
    assert found is not None and found.for_topic("anything") == R1


def test_changed_bindings_names_filtered_groups_whose_members_moved(store: EmbeddedMetadataStore,
                                                                   registry: GroupFilterRegistry) -> None:
    g = GroupMetadata("g", protocol_type="consumer")
    g.members["a"] = member("a", "rdkafka", "/127.0.0.1", ["t1", "t2"])
    unfiltered = GroupMetadata("u", protocol_type="consumer")
    unfiltered.members["b"] = member("b", "rdkafka", "/127.0.0.1", ["t1"])
    assert changed_bindings(registry, [g, unfiltered]) == []  # no filter: nothing to publish
    write_group_filter(store, "g", R1, {})
    wait_until("the filter", lambda: registry.filter_of("g") is not None)
    (change,) = changed_bindings(registry, [g, unfiltered])
    assert change == ("g", {"a": MemberBinding("rdkafka", "127.0.0.1", frozenset({"t1", "t2"}))})
    write_bindings(store, "g", change[1])
    wait_until("the members", lambda: dict(registry.bindings_of("g")) == change[1])
    assert changed_bindings(registry, [g]) == []
    del g.members["a"]
    assert changed_bindings(registry, [g]) == [("g", {})]


class Coordinator:
    """What the registry asks of the group coordinator: its groups, and whether it serves a group now."""

    def __init__(self, groups: dict[str, GroupMetadata], serves: set[str]) -> None:
        self._groups = groups
        self.serves = serves

    def groups(self) -> dict[str, GroupMetadata]:
        return self._groups

    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        return None if group_id in self.serves else ErrorCode.NOT_COORDINATOR


def test_sweep_drops_the_members_of_a_deleted_group_it_coordinates(store: EmbeddedMetadataStore,
                                                                  registry: GroupFilterRegistry) -> None:
    write_group_filter(store, "gone", R1, {"m": MemberBinding("c", "h", frozenset({"t"}))})
    write_group_filter(store, "elsewhere", R1, {"m": MemberBinding("d", "h", frozenset({"t"}))})
    wait_until("both filters", lambda: registry.lookup("c", "h") is not None and registry.lookup("d", "h") is not None)

    async def run_blocking(fn: Callable[[], None]) -> None:
        fn()

    # The group was deleted here (no longer among the coordinator's groups); "elsewhere" has another coordinator.
    asyncio.run(registry.sweep(Coordinator({}, serves={"gone"}), run_blocking))
    wait_until("the deleted group's members gone", lambda: registry.lookup("c", "h") is None)
    assert registry.filter_of("gone") == R1  # the filter stays until someone removes it
    assert registry.lookup("d", "h") is not None


class SyncGate:
    """Wraps a store's ``sync``: counted, held until the test lets it go, or made to fail."""

    def __init__(self, store: EmbeddedMetadataStore) -> None:
        self.syncs = 0
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Semaphore(0)
        self.failure: Exception | None = None
        real = store.sync

        def sync(timeout: float | None = None) -> None:
            self.syncs += 1
            self.entered.release()
            assert self.gate.wait(30)
            if self.failure is not None:
                raise self.failure
            real(timeout)

        store.sync = sync  # type: ignore[method-assign]


async def in_executor(fn: Callable[[], None]) -> None:
    """``run_blocking`` as the broker's: on a thread, so a gated sync does not hold up the event loop."""
    await asyncio.get_running_loop().run_in_executor(None, fn)


@pytest.fixture
def gated(store: EmbeddedMetadataStore, registry: GroupFilterRegistry) -> Iterator[SyncGate]:
    gate = SyncGate(store)
    yield gate
    gate.gate.set()  # before the registry's close: nothing may stay held


def test_catch_up_shares_a_sync_among_callers_until_it_begins_and_not_after(
        store: EmbeddedMetadataStore, registry: GroupFilterRegistry, gated: SyncGate) -> None:
    async def main() -> None:
        gated.gate.clear()
        base = gated.syncs
        first = [asyncio.ensure_future(registry.catch_up(in_executor)) for _ in range(3)]
        await in_executor(gated.entered.acquire)  # the shared sync has begun
        # Committed after that sync began: a caller now needs a sync of its own, which waits for the first.
        write_group_filter(store, "late", R1, {"m": MemberBinding("late-client", "h", frozenset({"t"}))})
        later = [asyncio.ensure_future(registry.catch_up(in_executor)) for _ in range(2)]
        await asyncio.sleep(0.05)
        assert gated.syncs == base + 1 and not any(f.done() for f in first + later)
        gated.gate.set()
        await asyncio.gather(*first, *later)
        assert gated.syncs == base + 2
        assert registry.lookup("late-client", "h") is not None

    asyncio.run(main())


def test_catch_up_hands_a_failed_sync_to_every_caller_and_the_next_call_tries_again(
        store: EmbeddedMetadataStore, registry: GroupFilterRegistry, gated: SyncGate) -> None:
    async def main() -> None:
        gated.failure = TimeoutError("watch events were not delivered in time")
        callers = [asyncio.ensure_future(registry.catch_up(in_executor)) for _ in range(2)]
        results = await asyncio.gather(*callers, return_exceptions=True)
        assert [type(r) for r in results] == [TimeoutError, TimeoutError]
        gated.failure = None
        write_group_filter(store, "g", R1, {"m": MemberBinding("c", "h", frozenset({"t"}))})
        await registry.catch_up(in_executor)
        assert registry.lookup("c", "h") is not None

    asyncio.run(main())
