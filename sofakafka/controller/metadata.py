"""The broker's view of the cluster, kept current from the metadata tree by watches.

Kafka brokers learn partition state from the controller's UpdateMetadata requests; ours read the same facts
straight from the tree (``/brokers/ids``, ``/brokers/topics``, partition ``state`` znodes, ``/config/topics``,
``/config/brokers``, ``/admin/delete_topics``, ``/controller``, ``/cluster/id``), so one mechanism serves the
single broker and every broker of a ZooKeeper cluster. Watches belong to a session: when the broker's store
replaces an expired session, its node calls :meth:`MetadataCache.reload`.

Public API::

    cache = MetadataCache(store)
    cache.start()                       # initial load and watches; returns once the view is complete
    snap = cache.snapshot()             # an immutable ClusterMetadata; never changes under the reader
    snap.brokers[1].endpoints, snap.topics["orders"].partitions[0].leader, snap.topic_configs["orders"],
    snap.partition("orders", 0), snap.controller_id, snap.cluster_id, snap.deleting
    snap.has_leaders("orders")          # every partition led by a registered broker
    cache.wait_until(lambda snap: ..., timeout) -> bool
    cache.add_listener(fn)              # fn(newest_snapshot) after changes, on the listener thread
    cache.reload()                      # after a new store session: re-read everything, re-arm every watch
    cache.close()

Threads. Watch callbacks arrive on the store's event thread; the cache re-reads the changed znode right there
(reads are cheap, and the store allows calls from callbacks) and updates its model under a lock. The next
``snapshot()`` call builds a new immutable :class:`ClusterMetadata` from what changed (per partition, so a burst
of changes to a big topic stays linear) and swaps one reference; when nothing changed it returns the current one
without locking. Readers on any thread (the asyncio loop included) keep a consistent view for as long as they
hold a snapshot. Listeners run on the cache's own listener thread, once per burst of changes rather than once
per znode, with the newest snapshot: an asyncio owner should hop with ``loop.call_soon_threadsafe``.

Topics marked for deletion leave ``topics`` at once and stay visible in ``deleting`` until the controller removes
them: the controller starts every deletion at once (Kafka 2.6's brokers stop serving a topic on the
UpdateMetadata its controller sends when the deletion starts, which on the DeleteTopics path is at once, even
for a topic whose partition is being reassigned; see docs/cluster.md). A partition whose state znode
does not exist yet (the controller has not elected its leader) has ``leader`` -1 and ``leader_epoch`` -1.
``offline_replicas`` are replicas whose broker is not registered, and those a registered broker lists in a failed
log dir (``/sofakafka/log_dir_failures/<id>``, for its current broker epoch: sofakafka/controller/log_dir_failures.py),
which Kafka's controller sends in UpdateMetadata.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sofakafka.controller import zk_data, zk_paths
from sofakafka.controller.store import (
    EventType,
    MetadataStore,
    NoNodeError,
    SessionExpiredError,
    StoreError,
    WatchedEvent,
    ZnodeStat,
)
from sofakafka.controller.zk_data import (
    BrokerEndpoint,
    BrokerRegistration,
    LogDirFailures,
    PartitionState,
    TopicAssignment,
    TopicPartition,
)

log = logging.getLogger(__name__)

NO_LEADER = -1
_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    controller_epoch: int = -1
    zk_version: int = -1
    """Version of the state znode: the token a leader conditions its ISR writes on (issue 6)."""


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    partitions: Mapping[int, PartitionMetadata]

    @property
    def is_internal(self) -> bool:
        return self.name in ("__consumer_offsets", "__transaction_state")

    @property
    def replication_factor(self) -> int:
        first = self.partitions.get(0)
        return len(first.replicas) if first is not None else 0


@dataclass(frozen=True)
class ClusterMetadata:
    """One consistent view; ``version`` grows with every change the cache applied."""

    version: int = 0
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: Mapping[str, TopicMetadata] = field(default_factory=dict)
    deleting: Mapping[str, TopicMetadata] = field(default_factory=dict)
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Overrides per topic (defaults are the broker's); every topic has an entry once its config is read."""
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Dynamic overrides keyed by broker id as text, or ``<default>`` for the cluster-wide defaults."""

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        found = self.topics.get(topic)
        return None if found is None else found.partitions.get(partition)

    def has_leaders(self, topic: str) -> bool:
        """Every partition of ``topic`` has a registered leader: what CreateTopics and CreatePartitions wait
        for before answering, as Kafka's waits for its metadata to carry the new leaders."""
        found = self.topics.get(topic)
        return (
            found is not None
            and bool(found.partitions)
            and all(p.leader in self.brokers for p in found.partitions.values())
        )

    def topic_config(self, topic: str) -> Mapping[str, str]:
        return self.topic_configs.get(topic, _EMPTY)

    def broker_config(self, broker_id: int | None) -> Mapping[str, str]:
        key = zk_paths.DEFAULT_ENTITY_NAME if broker_id is None else str(broker_id)
        return self.broker_configs.get(key, _EMPTY)

    def endpoint(self, broker_id: int, listener_name: str) -> BrokerEndpoint | None:
        """The broker's endpoint on the listener a client connected through (Kafka answers each client
        with the endpoints of its own listener)."""
        broker = self.brokers.get(broker_id)
        if broker is None:
            return None
        return next((e for e in broker.endpoints if e.listener_name == listener_name), None)

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)


def changed_partitions(old: ClusterMetadata, new: ClusterMetadata) -> set[tuple[str, int]]:
    """The partitions whose metadata differs between two snapshots of one cache: added, changed, removed, or
    moved between ``topics`` and ``deleting``. The cache keeps the objects of whatever did not change, so this
    costs a comparison per topic plus one per partition of the topics that changed, not one per partition of the
    cluster. Snapshots of different caches (or from before a :meth:`MetadataCache.reload`) share no objects: every
    partition of either comes out as changed, which is right, only slower."""
    out: set[tuple[str, int]] = set()
    for before, after in ((old.topics, new.topics), (old.deleting, new.deleting)):
        if before is after:
            continue
        for name in before.keys() | after.keys():
            a, b = before.get(name), after.get(name)
            if a is b:
                continue
            if a is None or b is None:
                for whole in (a, b):
                    if whole is not None:
                        out.update((name, p) for p in whole.partitions)
                continue
            old_parts = a.partitions
            out.update((name, p) for p, meta in b.partitions.items() if old_parts.get(p) is not meta)
            out.update((name, p) for p in old_parts.keys() - b.partitions.keys())
    return out


Listener = Callable[[ClusterMetadata], None]


@dataclass
class _TopicModel:
    assignment: dict[int, tuple[int, ...]] = field(default_factory=dict)
    states: dict[int, tuple[PartitionState, int]] = field(default_factory=dict)
    # What the last snapshot holds, and what changed since: a burst of state changes to a big topic costs
    # one rebuild of the changed partitions per snapshot, not one rebuild of the whole topic per change.
    built_partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    dirty: set[int] = field(default_factory=set)
    all_dirty: bool = True
    built: TopicMetadata | None = None


class MetadataCache:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._listeners: list[Listener] = []  # replaced under _listeners_lock, read without a lock
        self._listeners_lock = threading.Lock()
        self._closed = False
        # --- the model, guarded by _lock
        self._cluster_id: str | None = None
        self._controller_id = -1
        self._brokers: dict[int, BrokerRegistration] = {}
        self._broker_epochs: dict[int, int] = {}  # registration czxid
        self._dir_failures: dict[int, LogDirFailures] = {}
        self._offline_in_dirs: dict[int, frozenset[TopicPartition]] = {}  # of the current epochs only
        self._topics: dict[str, _TopicModel] = {}
        self._deleting: set[str] = set()
        self._topic_configs: dict[str, Mapping[str, str]] = {}
        self._broker_configs: dict[str, Mapping[str, str]] = {}
        self._version = 0
        self._dirty = False
        self._snapshot = ClusterMetadata()
        self._notifier: threading.Thread | None = None
        # --- a reload in progress (guarded by _lock): the states it read before taking the lock, and the state
        # reads answered meanwhile, applied after it
        self._reloading = False
        self._prefetched: dict[str, tuple[bytes, ZnodeStat] | None] = {}
        self._late_states: list[tuple[str, int, tuple[bytes, ZnodeStat] | None, PartitionState | None]] = []
        self._left_to_reload = 0  # changes the lost session could not read; see _leave_to_reload

    # ------------------------------------------------------------------------------------- public API

    def start(self) -> None:
        with self._lock:
            self._load_all()
            self._changed_model()
            self._rebuild()
            if self._notifier is None:
                self._notifier = threading.Thread(target=self._notify_listeners, name="metadata-listeners", daemon=True)
                self._notifier.start()

    def reload(self) -> None:
        """Read the whole tree again, arming every watch anew: after the store's session was replaced, the
        watches of the lost one are gone, and whatever changed while there was no session was never seen.
        Listeners then get the result like any other change. If a read fails, the previous model is kept
        (and the caller tries again), so readers never see a half-read tree.

        The partition states, nearly all of the reads at scale (100,000 of them at 100,000 partitions), are read
        first, without the lock: readers building a snapshot (the broker's event loop) and the store's event
        thread do not wait for them. A state whose watch fires meanwhile is read again as usual, and that answer
        is applied after the reload's, newest version winning."""
        with self._lock:
            if self._closed:
                return
            self._reloading = True
            self._late_states = []
            left, self._left_to_reload = self._left_to_reload, 0
        if left:
            log.info("metadata cache reads the whole tree again after a new session, %d change%s seen in the lost "
                     "one among it", left, "" if left == 1 else "s")
        try:
            prefetched = self._prefetch_states()
            with self._lock:
                if self._closed:
                    return
                saved = (self._cluster_id, self._controller_id, self._brokers, self._topics, self._deleting,
                         self._topic_configs, self._broker_configs, self._broker_epochs, self._dir_failures,
                         self._offline_in_dirs)
                self._brokers, self._topics, self._deleting = {}, {}, set()
                self._topic_configs, self._broker_configs = {}, {}
                self._broker_epochs, self._dir_failures, self._offline_in_dirs = {}, {}, {}
                self._prefetched = prefetched
                try:
                    self._load_all()
                except BaseException:
                    (self._cluster_id, self._controller_id, self._brokers, self._topics, self._deleting,
                     self._topic_configs, self._broker_configs, self._broker_epochs, self._dir_failures,
                     self._offline_in_dirs) = saved
                    raise
                finally:
                    self._prefetched = {}
                self._changed_model()
        finally:
            with self._lock:
                self._reloading = False
                late, self._late_states = self._late_states, []
                for topic, partition, read, decoded in late:
                    self._install_state(topic, partition, read, decoded)

    def _prefetch_states(self) -> dict[str, tuple[bytes, ZnodeStat] | None]:
        """Every partition state the tree names now, read (and watched) without the model's lock."""
        try:
            names = self._store.get_children(zk_paths.TOPICS_PATH)
        except NoNodeError:
            return {}
        paths: list[str] = []
        for topic in sorted(names):
            try:
                data, _ = self._store.get(zk_paths.topic_path(topic))
                partitions = TopicAssignment.decode(topic, data).partitions
            except (NoNodeError, ValueError):
                continue  # gone, or unreadable: the load under the lock finds out and says so
            paths += [zk_paths.topic_partition_state_path(topic, p) for p in sorted(partitions)]
        return dict(zip(paths, self._store.get_many(paths, self._watch), strict=True))

    def _load_all(self) -> None:
        for path in (
            zk_paths.BROKER_IDS_PATH,
            zk_paths.TOPICS_PATH,
            zk_paths.DELETE_TOPICS_PATH,
            zk_paths.config_entity_type_path(zk_paths.CONFIG_TYPE_TOPICS),
            zk_paths.config_entity_type_path(zk_paths.CONFIG_TYPE_BROKERS),
        ):
            self._store.ensure_path(path)
        self._load_cluster_id()
        self._load_controller()
        self._load_brokers()
        self._load_dir_failures()
        self._load_topics()
        self._load_deletions()
        self._load_broker_configs()

    def close(self) -> None:
        """Stop applying changes (watches already armed fire into nothing) and stop calling listeners."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()
            notifier, self._notifier = self._notifier, None
        if notifier is not None and notifier is not threading.current_thread():
            notifier.join()

    def snapshot(self) -> ClusterMetadata:
        if not self._dirty:
            return self._snapshot  # the hot path: no lock, one attribute read
        with self._lock:
            if self._dirty:
                self._rebuild()
            return self._snapshot

    def wait_until(self, predicate: Callable[[ClusterMetadata], bool], timeout: float | None) -> bool:
        """Block until ``predicate(snapshot)`` holds (True) or ``timeout`` seconds pass (False). For worker
        threads: CreateTopics waiting for leaders, DeleteTopics waiting for the topic to go."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or predicate(self.snapshot()), timeout)
            return predicate(self.snapshot())

    def add_listener(self, listener: Listener) -> None:
        """Not under the model's lock: the event loop adds listeners (every CreateTopics waiting for its leaders)
        while the store's thread may hold that lock across the reads of a new topic's states (30,000 partitions
        on three brokers: the loop was seen waiting here for 1 s in 20). The list is replaced, never changed in
        place, so the notifier reads a whole one; a listener added after a change it missed re-checks anyway
        (``metadata_wait``)."""
        with self._listeners_lock:
            self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: Listener) -> None:
        with self._listeners_lock:
            if listener in self._listeners:
                listeners = list(self._listeners)
                listeners.remove(listener)  # by equality: a bound method is a new object at each access
                self._listeners = listeners

    # ----------------------------------------------------------------------------------------- watches

    def _watch(self, event: WatchedEvent) -> None:
        """On the store's event thread: re-read what changed and mark the snapshot stale."""
        try:
            parts = event.path.strip("/").split("/")
            if parts[:2] == ["brokers", "topics"] and len(parts) == 6 and parts[5] == "state" and parts[4].isdigit():
                self._watch_state(parts[2], int(parts[4]))
                return
            with self._lock:
                if self._closed:
                    return
                if self._dispatch(event):
                    self._changed_model()
        except SessionExpiredError as exc:
            # Nothing to repair here: whoever renews the session calls reload(), which reads everything again.
            self._leave_to_reload(f"{event.type.name} on {event.path}", exc)
        except (StoreError, ValueError) as exc:
            # ValueError covers ZkDataError: a znode another writer filled with something we cannot read.
            log.warning("metadata cache could not apply %s on %s: %s", event.type.name, event.path, exc)

    def _leave_to_reload(self, what: str, exc: StoreError) -> None:
        """A change the session ended before it could be read: the reload after the new session reads it. Once a
        session goes, every watched state that changed meanwhile lands here (tens of thousands at 100,000
        partitions), so the first is logged and ``reload`` counts the rest in one line."""
        with self._lock:
            self._left_to_reload += 1
            first = self._left_to_reload == 1
        if first:
            log.info("metadata cache leaves %s, and any change after it, to the reload after a new session: %s",
                     what, exc)
        else:
            log.debug("metadata cache leaves %s to the reload after a new session", what)

    def _watch_state(self, topic: str, partition: int) -> None:
        """A partition state changed (the commonest event by far: leaders and ISRs). It is read with ``get_async``:
        on ZooKeeper the event thread sends the read and goes on to the next event, so a failover's thousands of
        changed states are read a few round trips apart, not one after the other; and no lock is held meanwhile,
        so readers building a snapshot (the broker's event loop among them) never wait for ZooKeeper."""
        if self._closed:
            return  # a topic the model does not hold (gone, or not reloaded yet) is settled by _install_state
        self._store.get_async(zk_paths.topic_partition_state_path(topic, partition), self._watch,
                              functools.partial(self._apply_state, topic, partition))

    def _apply_state(self, topic: str, partition: int, read: tuple[bytes, ZnodeStat] | StoreError | None) -> None:
        """On the event thread, with a state read: apply it, unless it is older than what the cache holds (answers
        arrive in the order the reads were sent, but a reload may have read a newer one meanwhile)."""
        path = zk_paths.topic_partition_state_path(topic, partition)
        if isinstance(read, StoreError):
            if isinstance(read, SessionExpiredError):
                self._leave_to_reload(f"the state {path}", read)
            else:
                log.warning("metadata cache could not read the state %s: %s", path, read)
            return
        try:
            decoded = None if read is None else PartitionState.decode(read[0])
        except ValueError as exc:
            log.warning("metadata cache could not read the state %s: %s", path, exc)
            return
        with self._lock:
            if self._reloading:
                self._late_states.append((topic, partition, read, decoded))
            else:
                self._install_state(topic, partition, read, decoded)

    def _install_state(self, topic: str, partition: int, read: tuple[bytes, ZnodeStat] | None,
                       decoded: PartitionState | None) -> None:
        model = self._topics.get(topic)
        if self._closed or model is None:
            return
        if read is None or decoded is None:
            model.states.pop(partition, None)
        else:
            held = model.states.get(partition)
            if held is not None and held[1] > read[1].version:
                return
            model.states[partition] = (decoded, read[1].version)
        model.dirty.add(partition)
        self._changed_model()

    def _changed_model(self) -> None:
        self._version += 1
        self._dirty = True
        self._changed.notify_all()

    def _notify_listeners(self) -> None:
        """Listeners run here, off the store's event thread, once per burst of changes rather than once
        per znode: a 1000-partition topic creation wakes them a few times, not a thousand."""
        notified = -1

        def news() -> bool:
            return self._closed or self._version != notified

        while True:
            with self._changed:
                self._changed.wait_for(news)
                if self._closed:
                    return
                notified = self._version
                listeners = self._listeners
                snapshot = self.snapshot()
            for listener in listeners:
                try:
                    listener(snapshot)
                except Exception:  # a listener's bug must not stop the others or later updates
                    log.exception("metadata listener failed")

    def _dispatch(self, event: WatchedEvent) -> bool:
        path = event.path
        parts = path.strip("/").split("/")
        if path == zk_paths.CLUSTER_ID_PATH:
            self._load_cluster_id()
        elif path == zk_paths.CONTROLLER_PATH:
            self._load_controller()
        elif path == zk_paths.BROKER_IDS_PATH:
            self._load_brokers()
        elif parts[:2] == ["brokers", "ids"] and len(parts) == 3:
            self._load_broker(int(parts[2]))
        elif path == zk_paths.LOG_DIR_FAILURES_PATH:
            self._load_dir_failures()
        elif path.startswith(zk_paths.LOG_DIR_FAILURES_PATH + "/") and parts[-1].isdigit():
            self._load_dir_failure(int(parts[-1]))
        elif path == zk_paths.TOPICS_PATH:
            self._load_topics()
        elif parts[:2] == ["brokers", "topics"] and len(parts) == 3:
            if event.type != EventType.CHILD:
                self._load_topic(parts[2])
        elif path == zk_paths.DELETE_TOPICS_PATH:
            self._load_deletions()
        elif parts[:2] == ["config", "topics"] and len(parts) == 3:
            self._load_topic_config(parts[2])
        elif path == zk_paths.config_entity_type_path(zk_paths.CONFIG_TYPE_BROKERS):
            self._load_broker_configs()
        elif parts[:2] == ["config", "brokers"] and len(parts) == 3:
            self._load_broker_config(parts[2])
        else:
            return False
        return True

    def _get(self, path: str) -> bytes | None:
        """Data with a watch; a missing znode gets an existence watch, so its creation is seen too."""
        while True:
            try:
                data, _ = self._store.get(path, self._watch)
                return data
            except NoNodeError:
                if self._store.exists(path, self._watch) is None:
                    return None

    def _get_with_version(self, path: str) -> tuple[bytes, int] | None:
        while True:
            try:
                data, stat = self._store.get(path, self._watch)
                return data, stat.version
            except NoNodeError:
                if self._store.exists(path, self._watch) is None:
                    return None

    def _children(self, path: str) -> list[str] | None:
        while True:
            try:
                return self._store.get_children(path, self._watch)
            except NoNodeError:
                if self._store.exists(path, self._watch) is None:
                    return None

    # ------------------------------------------------------------------------------------------ loaders

    def _load_cluster_id(self) -> None:
        data = self._get(zk_paths.CLUSTER_ID_PATH)
        self._cluster_id = None if data is None else zk_data.decode_cluster_id(data)

    def _load_controller(self) -> None:
        data = self._get(zk_paths.CONTROLLER_PATH)
        self._controller_id = -1 if data is None else zk_data.ControllerRegistration.decode(data).broker_id

    def _load_brokers(self) -> None:
        ids = {int(c) for c in self._children(zk_paths.BROKER_IDS_PATH) or [] if c.isdigit()}
        for gone in set(self._brokers) - ids:
            del self._brokers[gone]
            self._broker_epochs.pop(gone, None)
        for broker_id in sorted(ids - set(self._brokers)):
            self._load_broker(broker_id)
        self._offline_in_dirs_changed()
        self._invalidate_all()

    def _load_broker(self, broker_id: int) -> None:
        try:
            data, stat = self._store.get(zk_paths.broker_id_path(broker_id), self._watch)
        except NoNodeError:
            self._brokers.pop(broker_id, None)  # the child watch on /brokers/ids tells us the rest
            self._broker_epochs.pop(broker_id, None)
        else:
            self._brokers[broker_id] = BrokerRegistration.decode(broker_id, data)
            self._broker_epochs[broker_id] = stat.czxid
        self._offline_in_dirs_changed()
        self._invalidate_all()

    def _load_dir_failures(self) -> None:
        ids = {int(c) for c in self._children(zk_paths.LOG_DIR_FAILURES_PATH) or [] if c.isdigit()}
        for gone in set(self._dir_failures) - ids:
            del self._dir_failures[gone]
        for broker_id in sorted(ids - set(self._dir_failures)):
            self._load_dir_failure(broker_id)
        self._offline_in_dirs_changed()

    def _load_dir_failure(self, broker_id: int) -> None:
        try:
            data, _ = self._store.get(zk_paths.log_dir_failures_path(broker_id), self._watch)
        except NoNodeError:
            self._dir_failures.pop(broker_id, None)
        else:
            self._dir_failures[broker_id] = LogDirFailures.decode(data)
        self._offline_in_dirs_changed()

    def _offline_in_dirs_changed(self) -> None:
        """The replicas in failed dirs of each broker whose list is of its current registration."""
        current = {b: f.partitions for b, f in self._dir_failures.items()
                   if self._broker_epochs.get(b) == f.broker_epoch and f.partitions}
        if current != self._offline_in_dirs:
            self._offline_in_dirs = current
            self._invalidate_all()

    def _load_topics(self) -> None:
        names = set(self._children(zk_paths.TOPICS_PATH) or [])
        for gone in set(self._topics) - names:
            del self._topics[gone]
            self._topic_configs.pop(gone, None)
        for topic in sorted(names - set(self._topics)):
            self._topics[topic] = _TopicModel()
            self._load_topic(topic)
            self._load_topic_config(topic)

    def _load_topic(self, topic: str) -> None:
        model = self._topics.get(topic)
        if model is None:
            return
        data = self._get(zk_paths.topic_path(topic))
        if data is None:
            return  # deleted: the /brokers/topics child watch removes it
        partitions = TopicAssignment.decode(topic, data).partitions
        model.assignment = {p: tuple(r) for p, r in partitions.items()}
        model.all_dirty = True
        self._load_partitions(topic)

    def _load_partitions(self, topic: str) -> None:
        """States of partitions not known yet; a missing state znode gets an existence watch, so the
        controller's creation of it reaches us without a watch on every ``partitions`` child list."""
        model = self._topics.get(topic)
        if model is None:
            return
        unknown = [partition for partition in sorted(model.assignment) if partition not in model.states]
        paths = [zk_paths.topic_partition_state_path(topic, p) for p in unknown]
        # A reload read most of them already (and watches them); the others all at once: on ZooKeeper the reads
        # go out together, a round trip for the lot rather than per partition.
        reads: list[tuple[bytes, ZnodeStat] | None] = [self._prefetched.pop(path, None) for path in paths]
        unread = [i for i, path in enumerate(paths) if reads[i] is None]
        for i, read in zip(unread, self._store.get_many([paths[i] for i in unread], self._watch), strict=True):
            reads[i] = read
        for partition, read in zip(unknown, reads, strict=True):
            if read is not None:
                model.states[partition] = (PartitionState.decode(read[0]), read[1].version)
            model.dirty.add(partition)

    def _load_deletions(self) -> None:
        self._deleting = set(self._children(zk_paths.DELETE_TOPICS_PATH) or [])

    def _load_topic_config(self, topic: str) -> None:
        if topic not in self._topics:
            return
        path = zk_paths.config_topic_path(topic)
        data = self._get(path)
        self._topic_configs[topic] = MappingProxyType(zk_data.decode_config(data, path) if data else {})

    def _load_broker_configs(self) -> None:
        names = set(self._children(zk_paths.config_entity_type_path(zk_paths.CONFIG_TYPE_BROKERS)) or [])
        for gone in set(self._broker_configs) - names:
            del self._broker_configs[gone]
        for name in sorted(names - set(self._broker_configs)):
            self._load_broker_config(name)

    def _load_broker_config(self, name: str) -> None:
        path = zk_paths.config_entity_path(zk_paths.CONFIG_TYPE_BROKERS, name)
        try:
            data, _ = self._store.get(path, self._watch)
        except NoNodeError:
            self._broker_configs.pop(name, None)
            return
        self._broker_configs[name] = MappingProxyType(zk_data.decode_config(data, path))

    # ---------------------------------------------------------------------------------------- snapshot

    def _invalidate_all(self) -> None:
        for model in self._topics.values():
            model.all_dirty = True

    def _build_topic(self, name: str, model: _TopicModel) -> TopicMetadata:
        """The topic's metadata, rebuilt for what changed. A partition whose metadata came out equal keeps its
        object, and a topic none of whose partitions changed keeps its ``TopicMetadata``: readers find what
        changed between two snapshots by identity (:func:`changed_partitions`), so a broker registering, which
        marks every topic, costs them only the partitions whose offline replicas actually moved."""
        if model.built is not None and not model.all_dirty and not model.dirty:
            return model.built
        live = self._brokers
        offline_in_dirs = self._offline_in_dirs
        built = model.built_partitions
        changed = False
        added = False
        candidates: Iterable[int]
        if model.all_dirty:
            for gone in [p for p in built if p not in model.assignment]:
                del built[gone]
                changed = True
            candidates = model.assignment
        else:
            candidates = model.dirty
        for partition in candidates:
            replicas = model.assignment.get(partition)
            if replicas is None:
                if built.pop(partition, None) is not None:
                    changed = True
                continue
            offline = tuple(r for r in replicas if r not in live or (
                r in offline_in_dirs and TopicPartition(name, partition) in offline_in_dirs[r]))
            found = model.states.get(partition)
            if found is None:
                fresh = PartitionMetadata(name, partition, NO_LEADER, -1, replicas, (), offline)
            else:
                state, version = found
                fresh = PartitionMetadata(
                    name, partition, state.leader, state.leader_epoch, replicas, state.isr, offline,
                    state.controller_epoch, version,
                )
            previous = built.get(partition)
            if previous is not None and previous == fresh:
                continue
            if previous is None:
                added = True
            built[partition] = fresh
            changed = True
        model.dirty.clear()
        model.all_dirty = False
        if model.built is not None and not changed:
            return model.built
        if added:
            # Partitions arrive in bursts (a topic created, partitions added): keep them in order for readers,
            # sorting only then, not on every change of a state.
            model.built_partitions = built = dict(sorted(built.items()))
        model.built = TopicMetadata(name, MappingProxyType(dict(built)))
        return model.built

    def _rebuild(self) -> None:
        topics: dict[str, TopicMetadata] = {}
        deleting: dict[str, TopicMetadata] = {}
        for name, model in sorted(self._topics.items()):
            (deleting if name in self._deleting else topics)[name] = self._build_topic(name, model)
        self._snapshot = ClusterMetadata(
            version=self._version,
            cluster_id=self._cluster_id,
            controller_id=self._controller_id,
            brokers=MappingProxyType(dict(self._brokers)),
            topics=MappingProxyType(topics),
            deleting=MappingProxyType(deleting),
            topic_configs=MappingProxyType(dict(self._topic_configs)),
            broker_configs=MappingProxyType(dict(self._broker_configs)),
        )
        self._dirty = False
