"""The metadata cache follows the tree: brokers, topics, partition states, configs, deletions, controller and
cluster id, whoever writes them; snapshots stay consistent and immutable while it changes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from sofakafka.controller.embedded import EmbeddedMetadataStore
from sofakafka.controller.metadata import ClusterMetadata, MetadataCache, changed_partitions
from sofakafka.controller.node import ControllerNode
from sofakafka.controller.registration import create_top_level_paths, make_registration, register_broker
from sofakafka.controller.store import ConnectionLossError, SessionExpiredError
from sofakafka.controller.topics import NewTopic
from sofakafka.controller.zk_data import (
    BrokerEndpoint,
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    encode_cluster_id,
    encode_config,
)

from .conftest import SETTLE_TIMEOUT, plaintext, settle


@pytest.fixture
def cache(store: EmbeddedMetadataStore) -> Iterator[MetadataCache]:
    """A cache alone on the tree (no controller): the tests play the other brokers' and tools' writes."""
    create_top_level_paths(store)
    c = MetadataCache(store)
    c.start()
    yield c
    c.close()


def until(cache: MetadataCache, predicate: object) -> ClusterMetadata:
    assert callable(predicate)
    assert cache.wait_until(predicate, SETTLE_TIMEOUT)
    return cache.snapshot()


def leader_of(snap: ClusterMetadata, topic: str, partition: int) -> int | None:
    found = snap.partition(topic, partition)
    return None if found is None else found.leader


def test_an_empty_tree_gives_an_empty_view(cache: MetadataCache) -> None:
    snap = cache.snapshot()
    assert (snap.cluster_id, snap.controller_id, dict(snap.brokers), dict(snap.topics)) == (None, -1, {}, {})


def test_cluster_id_and_controller_are_followed(cache: MetadataCache, store: EmbeddedMetadataStore) -> None:
    store.create("/cluster/id", encode_cluster_id("abcdefghijklmnopqrstuv"), makepath=True)
    store.create("/controller", ControllerRegistration(7, 1).encode(), ephemeral=True)
    snap = until(cache, lambda s: s.cluster_id == "abcdefghijklmnopqrstuv" and s.controller_id == 7)
    assert snap.cluster_id == "abcdefghijklmnopqrstuv"
    store.delete("/controller")
    until(cache, lambda s: s.controller_id == -1)


def test_brokers_come_change_and_go(cache: MetadataCache, store: EmbeddedMetadataStore) -> None:
    other = store.server.connect()
    register_broker(other, make_registration(2, plaintext(9093), rack="r1"))
    snap = until(cache, lambda s: 2 in s.brokers)
    assert snap.brokers[2].rack == "r1"
    assert snap.endpoint(2, "PLAINTEXT") == BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9093, "PLAINTEXT")
    assert snap.endpoint(2, "SSL") is None and snap.endpoint(9, "PLAINTEXT") is None
    # A broker re-registering with new endpoints (data change of its znode).
    other.set("/brokers/ids/2", make_registration(2, plaintext(9999), rack="r1").encode())
    until(cache, lambda s: 2 in s.brokers and s.brokers[2].endpoints[0].port == 9999)
    other.close()
    assert until(cache, lambda s: 2 not in s.brokers).alive_broker_ids() == []


def test_a_topic_written_by_someone_else_appears_with_its_states(cache: MetadataCache, store: EmbeddedMetadataStore) -> None:
    other = store.server.connect()
    register_broker(other, make_registration(1, plaintext()))
    store.create("/config/topics/foreign", encode_config({"cleanup.policy": "compact"}))
    store.create("/brokers/topics/foreign", TopicAssignment({0: [1, 2], 1: [2, 1]}).encode())
    snap = until(cache, lambda s: "foreign" in s.topics)
    p0 = snap.partition("foreign", 0)
    # No state yet: no leader, and broker 2 is not registered.
    assert p0 is not None and (p0.leader, p0.leader_epoch, p0.replicas, p0.offline_replicas) == (-1, -1, (1, 2), (2,))
    assert snap.topic_config("foreign") == {"cleanup.policy": "compact"}
    assert snap.topics["foreign"].replication_factor == 2
    store.create("/brokers/topics/foreign/partitions/0/state", PartitionState(1, 3, 5, (1,)).encode(), makepath=True)
    snap = until(cache, lambda s: leader_of(s, "foreign", 0) == 1)
    p0 = snap.partition("foreign", 0)
    assert p0 is not None
    assert (p0.leader_epoch, p0.isr, p0.controller_epoch, p0.zk_version) == (3, (1,), 5, 0)
    store.set("/brokers/topics/foreign/partitions/0/state", PartitionState(1, 4, 5, (1, 2)).encode())
    snap = until(cache, lambda s: s.partition("foreign", 0).leader_epoch == 4)  # type: ignore[union-attr]
    assert snap.partition("foreign", 0).isr == (1, 2)  # type: ignore[union-attr]
    register_broker(store, make_registration(2, plaintext(9093)))
    until(cache, lambda s: s.partition("foreign", 0).offline_replicas == ())  # type: ignore[union-attr]
    store.set("/config/topics/foreign", encode_config({}))
    until(cache, lambda s: s.topic_config("foreign") == {})


def test_deletion_hides_the_topic_then_removes_it(cache: MetadataCache, store: EmbeddedMetadataStore) -> None:
    store.create("/brokers/topics/gone", TopicAssignment({0: [1]}).encode())
    until(cache, lambda s: "gone" in s.topics)
    store.create("/admin/delete_topics/gone")
    snap = until(cache, lambda s: "gone" not in s.topics)
    assert "gone" in snap.deleting
    txn = store.transaction()
    txn.delete("/brokers/topics/gone")
    txn.delete("/admin/delete_topics/gone")
    txn.commit()
    snap = until(cache, lambda s: "gone" not in s.deleting and "gone" not in s.topics)
    assert "gone" not in snap.topic_configs


def test_a_topic_marked_while_a_partition_moves_leaves_the_view_at_once(
        cache: MetadataCache, store: EmbeddedMetadataStore) -> None:
    # The controller starts every deletion at once, moving partitions or not (Kafka 2.6 on the DeleteTopics path),
    # so brokers stop serving the topic at once; the moving assignment is what the deletion covers.
    moving = TopicAssignment({0: [2, 3, 1]}, adding_replicas={0: [3]}, removing_replicas={0: [1]})
    store.create("/brokers/topics/moving", moving.encode())
    until(cache, lambda s: "moving" in s.topics)
    store.create("/admin/delete_topics/moving")
    snap = until(cache, lambda s: "moving" in s.deleting)
    assert "moving" not in snap.topics and snap.deleting["moving"].partitions[0].replicas == (2, 3, 1)


def test_snapshots_never_change_under_their_reader(cache: MetadataCache, store: EmbeddedMetadataStore) -> None:
    before = cache.snapshot()
    store.create("/brokers/topics/new", TopicAssignment({0: [1]}).encode())
    after = until(cache, lambda s: "new" in s.topics)
    assert "new" not in before.topics and after.version > before.version
    with pytest.raises(TypeError):
        after.topics["x"] = after.topics["new"]  # type: ignore[index]


def test_listeners_hear_every_change(cache: MetadataCache, store: EmbeddedMetadataStore) -> None:
    seen: list[ClusterMetadata] = []
    lock = threading.Condition()

    def listener(snap: ClusterMetadata) -> None:
        with lock:
            seen.append(snap)
            lock.notify_all()

    cache.add_listener(listener)
    store.create("/brokers/topics/heard", TopicAssignment({0: [1]}).encode())
    until(cache, lambda s: "heard" in s.topics)
    # Listeners run on the cache's own notifier thread, after the snapshot changed: wait for them to hear it.
    with lock:
        assert lock.wait_for(lambda: any("heard" in s.topics for s in seen), SETTLE_TIMEOUT)
        assert [s.version for s in seen] == sorted(s.version for s in seen)
    cache.remove_listener(listener)


def test_wait_until_gives_up_after_its_timeout(cache: MetadataCache) -> None:
    assert cache.wait_until(lambda s: "never" in s.topics, 0.01) is False


def test_readers_on_other_threads_always_see_whole_topics(node: ControllerNode) -> None:
    """Topics appear with all their partitions at once: a snapshot never shows half an assignment."""
    stop = threading.Event()
    problems: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            snap = node.cache.snapshot()
            for name, topic in snap.topics.items():
                if sorted(topic.partitions) != list(range(5)):
                    problems.append(f"{name}: {sorted(topic.partitions)}")
            stop.wait(0.001)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(10):
            node.admin.create_topic(NewTopic(f"whole-{i}", 5, 1))
        settle(node)
        until(node.cache, lambda s: len(s.topics) == 10 and all(
            p.leader == 1 for t in s.topics.values() for p in t.partitions.values()
        ))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert problems == []


def test_broker_view_from_the_node(node: ControllerNode) -> None:
    snap = until(node.cache, lambda s: s.controller_id == 1)
    assert snap.cluster_id == node.cluster_id
    assert list(snap.brokers) == [1]
    assert snap.brokers[1].endpoints == tuple(plaintext())


def test_has_leaders_needs_every_partition_led_by_a_registered_broker(
    cache: MetadataCache, store: EmbeddedMetadataStore
) -> None:
    store.create("/brokers/topics/led", TopicAssignment({0: [1], 1: [1]}).encode())
    store.create("/brokers/topics/led/partitions/0/state", PartitionState(1, 0, 1, (1,)).encode(), makepath=True)
    snap = until(cache, lambda s: leader_of(s, "led", 0) == 1)
    assert not snap.has_leaders("led")  # partition 1 has no state, and broker 1 is not registered
    store.create("/brokers/topics/led/partitions/1/state", PartitionState(1, 0, 1, (1,)).encode(), makepath=True)
    snap = until(cache, lambda s: leader_of(s, "led", 1) == 1)
    assert not snap.has_leaders("led")
    register_broker(store, make_registration(1, plaintext()))
    assert until(cache, lambda s: s.has_leaders("led")).has_leaders("led")
    assert not snap.has_leaders("missing")


def test_reload_reads_the_states_without_the_lock_and_keeps_a_change_seen_meanwhile(
    node: ControllerNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At 100,000 partitions the states are nearly all of a reload's reads: they are read before the model's lock
    # is taken, so a reader waiting on the model is not held up by them; a state that changes after its read
    # there is read again through its watch, and that newer answer wins over the reload's.
    node.admin.create_topic(NewTopic("moving", 2, 1))
    settle(node)
    until(node.cache, lambda s: s.has_leaders("moving"))
    path = "/brokers/topics/moving/partitions/0/state"
    data, _ = node.store.get(path)
    old = PartitionState.decode(data)
    newer = PartitionState(old.leader, old.leader_epoch + 5, old.controller_epoch, old.isr)
    real_get_many = node.store.get_many
    waited: list[bool] = []
    states_read: list[str] = []

    def get_many_then_change(paths: list[str], watch: object = None) -> object:
        states_read.extend(p for p in paths if p.endswith("/state"))
        reads = real_get_many(paths, watch)  # type: ignore[arg-type]
        if path in paths and not waited:
            reader = threading.Thread(target=lambda: waited.append(node.cache.wait_until(lambda s: True, 5.0)))
            reader.start()
            reader.join(SETTLE_TIMEOUT)
            node.store.set(path, newer.encode())
            node.store.sync(SETTLE_TIMEOUT)  # the watch fired and its read was answered
        return reads

    monkeypatch.setattr(node.store, "get_many", get_many_then_change)
    node.cache.reload()
    assert waited == [True], "a reader waited on the model while the reload read the states"
    # Each state read once by the reload, and the changed one once more through its watch.
    assert sorted(states_read) == sorted([path, path, path.replace("/0/", "/1/")])
    node.store.sync(SETTLE_TIMEOUT)
    snap = until(node.cache, lambda s: s.topics["moving"].partitions[0].leader_epoch == newer.leader_epoch)
    assert snap.topics["moving"].partitions[1].leader == old.leader


def test_reload_reads_everything_again_and_keeps_the_view_when_a_read_fails(
    node: ControllerNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a renewed ZooKeeper session asks of the cache: a full re-read. A failed one (the new session lost
    # too) must leave the previous view in place rather than a half-read tree.
    node.admin.create_topic(NewTopic("kept", 2, 1))
    settle(node)
    before = until(node.cache, lambda s: s.has_leaders("kept"))
    heard: list[int] = []
    news = threading.Condition()

    def listener(snap: ClusterMetadata) -> None:
        with news:
            heard.append(snap.version)
            news.notify_all()

    node.cache.add_listener(listener)
    real_get = node.store.get

    def failing_get(path: str, watch: object = None) -> object:
        if path.startswith("/brokers/topics/kept/partitions"):
            raise ConnectionLossError("lost (simulated)", path)
        return real_get(path, watch)  # type: ignore[arg-type]

    real_get_many = node.store.get_many

    def failing_get_many(paths: list[str], watch: object = None) -> object:
        if any(path.startswith("/brokers/topics/kept/partitions") for path in paths):
            raise ConnectionLossError("lost (simulated)", paths[0])
        return real_get_many(paths, watch)  # type: ignore[arg-type]

    monkeypatch.setattr(node.store, "get", failing_get)
    monkeypatch.setattr(node.store, "get_many", failing_get_many)
    with pytest.raises(ConnectionLossError):
        node.cache.reload()
    assert node.cache.snapshot() is before
    monkeypatch.undo()

    node.cache.reload()
    after = until(node.cache, lambda s: s.version > before.version)
    assert after.topics["kept"].partitions == before.topics["kept"].partitions
    assert (dict(after.brokers), after.controller_id, after.cluster_id) == \
        (dict(before.brokers), before.controller_id, before.cluster_id)
    # The notifier thread may still be delivering an older version (news from before the reload): wait for
    # the listener to hear the reloaded one, whatever arrived first.
    with news:
        assert news.wait_for(lambda: bool(heard) and heard[-1] >= before.version + 1, SETTLE_TIMEOUT)
    # Still watching: a change after the reload arrives as usual.
    node.admin.create_topic(NewTopic("later", 1, 1))
    until(node.cache, lambda s: s.has_leaders("later"))


def test_what_did_not_change_keeps_its_object_so_readers_find_what_changed(
        cache: MetadataCache, store: EmbeddedMetadataStore) -> None:
    """Readers (the broker applying metadata, the Metadata handler's encodings) find what changed between two
    snapshots by identity, so the cost of a change is per changed partition, not per partition of the cluster."""
    register_broker(store, make_registration(1, plaintext()))
    store.create("/brokers/topics/calm", TopicAssignment({0: [1], 1: [1]}).encode())
    store.create("/brokers/topics/busy", TopicAssignment({0: [1, 2], 1: [1, 2], 2: [1, 2]}).encode())
    for partition in range(3):
        store.create(f"/brokers/topics/busy/partitions/{partition}/state", PartitionState(1, 0, 1, (1,)).encode(),
                     makepath=True)
    before = until(cache, lambda s: "calm" in s.topics and all(p.leader == 1 for p in s.topics["busy"].partitions.values()))
    store.set("/brokers/topics/busy/partitions/1/state", PartitionState(1, 1, 1, (1,)).encode())
    after = until(cache, lambda s: (p := s.partition("busy", 1)) is not None and p.leader_epoch == 1)
    assert after.topics["calm"] is before.topics["calm"]
    assert after.topics["busy"].partitions[0] is before.topics["busy"].partitions[0]
    assert changed_partitions(before, after) == {("busy", 1)}
    # A broker registering marks every topic for a rebuild; only partitions whose offline replicas moved change.
    register_broker(store, make_registration(2, plaintext(9093)))
    registered = until(cache, lambda s: 2 in s.brokers)
    assert registered.topics["calm"] is after.topics["calm"]
    assert changed_partitions(after, registered) == {("busy", 0), ("busy", 1), ("busy", 2)}
    store.create("/admin/delete_topics/calm")
    marked = until(cache, lambda s: "calm" in s.deleting)
    assert changed_partitions(registered, marked) == {("calm", 0), ("calm", 1)}
    assert changed_partitions(marked, marked) == set()



def test_a_state_is_read_without_holding_the_cache_lock(
        cache: MetadataCache, store: EmbeddedMetadataStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """On ZooKeeper the re-read of a changed partition state is a round trip; readers that need the lock to build a
    snapshot (the broker's event loop) must not wait for it."""
    store.create("/brokers/topics/t", TopicAssignment({0: [1]}).encode())
    store.create("/brokers/topics/t/partitions/0/state", PartitionState(1, 0, 1, (1,)).encode(), makepath=True)
    until(cache, lambda s: leader_of(s, "t", 0) == 1)
    reading, release = threading.Event(), threading.Event()
    real = store.get_many

    def slow_read(paths: list[str], watch: object = None) -> object:
        reading.set()
        assert release.wait(SETTLE_TIMEOUT)
        return real(paths, watch)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "get_many", slow_read)
    store.set("/brokers/topics/t/partitions/0/state", PartitionState(1, 1, 1, (1,)).encode())
    assert reading.wait(SETTLE_TIMEOUT)
    try:
        assert cache._lock.acquire(timeout=SETTLE_TIMEOUT)  # free while the read is out
        cache._lock.release()
    finally:
        release.set()
    assert until(cache, lambda s: (p := s.partition("t", 0)) is not None and p.leader_epoch == 1)


def test_a_state_read_older_than_the_one_held_is_dropped(cache: MetadataCache, store: EmbeddedMetadataStore) -> None:
    """Read without the lock, a state may arrive after a newer one (a reload read it meanwhile): the znode version
    decides, so the view never goes back."""
    path = "/brokers/topics/t/partitions/0/state"
    store.create("/brokers/topics/t", TopicAssignment({0: [1]}).encode())
    store.create(path, PartitionState(1, 0, 1, (1,)).encode(), makepath=True)
    stale = store.get(path)
    store.set(path, PartitionState(1, 1, 1, (1,)).encode())
    store.set(path, PartitionState(1, 2, 1, (1,)).encode())
    held = until(cache, lambda s: (p := s.partition("t", 0)) is not None and p.zk_version == 2)
    cache._apply_state("t", 0, stale)
    assert cache.snapshot().partition("t", 0) == held.partition("t", 0)


def test_a_reload_keeps_no_state_it_read_for_a_topic_deleted_before_its_load(
    cache: MetadataCache, store: EmbeddedMetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reload reads the states first, then loads the tree under the lock. A topic deleted in between is not
    # loaded, and the states read for it must go: a topic recreated under the same name later must be read anew,
    # not given the deleted one's states.
    state = "/brokers/topics/back/partitions/0/state"
    store.create("/brokers/topics/back", TopicAssignment({0: [1]}).encode())
    store.create(state, PartitionState(1, 1, 1, (1,)).encode(), makepath=True)
    until(cache, lambda s: (p := s.partition("back", 0)) is not None and p.leader_epoch == 1)
    real_get_many = store.get_many
    deleted: list[bool] = []

    def get_many_then_delete(paths: list[str], watch: object = None) -> object:
        reads = real_get_many(paths, watch)  # type: ignore[arg-type]
        if state in paths and not deleted:
            store.delete("/brokers/topics/back", recursive=True)
            deleted.append(True)
        return reads

    monkeypatch.setattr(store, "get_many", get_many_then_delete)
    cache.reload()
    assert deleted == [True]
    until(cache, lambda s: "back" not in s.topics)
    store.create("/brokers/topics/back", TopicAssignment({0: [1]}).encode())
    store.create(state, PartitionState(1, 7, 1, (1,)).encode(), makepath=True)
    until(cache, lambda s: s.partition("back", 0) is not None)
    store.sync(SETTLE_TIMEOUT)  # both creations reached the cache
    recreated = cache.snapshot().partition("back", 0)
    assert recreated is not None and recreated.leader_epoch == 7


def test_changes_a_lost_session_could_not_read_are_logged_once_and_counted_by_the_reload(
        cache: MetadataCache, caplog: pytest.LogCaptureFixture) -> None:
    # At 100,000 partitions a lost session leaves tens of thousands of them: one line each buried the log.
    gone = SessionExpiredError("session 0x1 expired")
    with caplog.at_level(logging.INFO, logger="sofakafka.controller.metadata"):
        for partition in range(3):
            cache._apply_state("orders", partition, gone)
        first = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
        assert first == ["metadata cache leaves the state /brokers/topics/orders/partitions/0/state, and any change "
                         "after it, to the reload after a new session: session 0x1 expired"]
        caplog.clear()
        cache.reload()
        cache.reload()  # nothing left by the lost session any more: no line
        cache._apply_state("orders", 0, gone)  # the next lost session, with a single change
        cache.reload()
        after = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert after == ["metadata cache reads the whole tree again after a new session, 3 changes seen in the lost one "
                     "among it",
                     "metadata cache leaves the state /brokers/topics/orders/partitions/0/state, and any change "
                     "after it, to the reload after a new session: session 0x1 expired",
                     "metadata cache reads the whole tree again after a new session, 1 change seen in the lost one "
                     "among it"]
