"""What a broker writes to the metadata tree when it starts: top-level paths, cluster id, its registration.

Public API (each takes the broker's :class:`~sofakafka.controller.store.MetadataStore` session)::

    create_top_level_paths(store)               # Kafka's PersistentZkPaths, idempotent
    get_or_create_cluster_id(store) -> str      # /cluster/id, created by the first broker
    register_broker(store, registration) -> int # ephemeral /brokers/ids/<id>; returns the broker epoch
    register_broker(store, registration, stale_session_ids={old}, stale_wait_s=t)  # after a session renewal
    live_brokers(store) -> dict[int, BrokerRegistration]

The broker epoch is the czxid of the registration znode, as in Kafka: it changes with every (re)registration,
so requests a controller sent to an older incarnation of a broker can be told apart, and a controller that
sees the czxid change knows the broker went away and came back (a restart, or a renewed session).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Collection

from sofakafka.controller import zk_data, zk_paths
from sofakafka.controller.store import MetadataStore, NodeExistsError, NoNodeError, WatchCallback
from sofakafka.controller.zk_data import BrokerEndpoint, BrokerRegistration

log = logging.getLogger(__name__)

_STALE_POLL_S = 0.5


class BrokerIdInUseError(NodeExistsError):
    """Another live session holds ``/brokers/ids/<id>``: two brokers were given the same ``broker.id``.
    Start-up must stop, as Kafka's does."""

    def __init__(self, broker_id: int) -> None:
        super().__init__(
            f"broker id {broker_id} is already registered by another live broker (is broker.id unique?)",
            zk_paths.broker_id_path(broker_id),
        )
        self.broker_id = broker_id


def create_top_level_paths(store: MetadataStore) -> None:
    for path in zk_paths.PERSISTENT_ZK_PATHS:
        store.ensure_path(path)


def get_or_create_cluster_id(store: MetadataStore, proposed: str | None = None) -> str:
    """The cluster id every broker of this tree shares; the first caller's ``proposed`` (or a fresh
    Kafka-style id) wins a creation race, later callers read it."""
    try:
        data, _ = store.get(zk_paths.CLUSTER_ID_PATH)
        return zk_data.decode_cluster_id(data)
    except NoNodeError:
        pass
    cluster_id = proposed or zk_data.generate_cluster_id()
    try:
        store.create(zk_paths.CLUSTER_ID_PATH, zk_data.encode_cluster_id(cluster_id), makepath=True)
        return cluster_id
    except NodeExistsError:
        data, _ = store.get(zk_paths.CLUSTER_ID_PATH)
        return zk_data.decode_cluster_id(data)


def make_registration(
    broker_id: int,
    endpoints: list[BrokerEndpoint],
    rack: str | None = None,
    timestamp_ms: int | None = None,
) -> BrokerRegistration:
    """A version 4 registration; ``jmx_port`` stays -1 because we expose no JMX."""
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return BrokerRegistration(broker_id, tuple(endpoints), now, rack, -1)


def register_broker(
    store: MetadataStore,
    registration: BrokerRegistration,
    *,
    stale_session_ids: Collection[int] = (),
    stale_wait_s: float = 0.0,
) -> int:
    """Create the ephemeral ``/brokers/ids/<id>`` and return the broker epoch (its czxid).

    A znode left by this same session (a retry after a lost answer) is accepted, as Kafka's
    ``checkedEphemeralCreate`` accepts it; one owned by another session means a duplicate broker id, unless
    that session is one of ``stale_session_ids``: this broker's own earlier sessions, which it declared lost
    itself (after a whole session timeout without a connection) and which the server may keep a little
    longer, until its own clock expires them. Such a registration is waited out for up to ``stale_wait_s``.
    """
    path = zk_paths.broker_id_path(registration.broker_id)
    store.ensure_path(zk_paths.BROKER_IDS_PATH)
    deadline = time.monotonic() + stale_wait_s
    while True:
        try:
            store.create(path, registration.encode(), ephemeral=True)
            break
        except NodeExistsError:
            gone = threading.Event()
            stat = store.exists(path, _waker(gone))
            if stat is None:
                continue  # removed since: create again
            if stat.ephemeral_owner == store.session_id:
                break
            remaining = deadline - time.monotonic()
            if stat.ephemeral_owner not in stale_session_ids or remaining <= 0:
                raise BrokerIdInUseError(registration.broker_id) from None
            log.info("broker %d: waiting for ZooKeeper to remove the registration of our expired session %#x",
                     registration.broker_id, stat.ephemeral_owner)
            # In slices, so a store closed meanwhile ends the wait through the next call.
            gone.wait(min(remaining, _STALE_POLL_S))
    stat = store.exists(path)
    if stat is None:
        raise BrokerIdInUseError(registration.broker_id)
    log.info("registered broker %d at %s (epoch %d)", registration.broker_id, path, stat.czxid)
    return stat.czxid


def _waker(event: threading.Event) -> WatchCallback:
    return lambda _watched: event.set()


def read_broker(store: MetadataStore, broker_id: int) -> BrokerRegistration | None:
    try:
        data, _ = store.get(zk_paths.broker_id_path(broker_id))
    except NoNodeError:
        return None
    return BrokerRegistration.decode(broker_id, data)


def live_brokers(store: MetadataStore) -> dict[int, BrokerRegistration]:
    """Registered brokers by id; a registration that vanishes while being read is simply not live."""
    result: dict[int, BrokerRegistration] = {}
    with contextlib.suppress(NoNodeError):
        for child in store.get_children(zk_paths.BROKER_IDS_PATH):
            if not child.lstrip("-").isdigit():
                continue
            registration = read_broker(store, int(child))
            if registration is not None:
                result[registration.broker_id] = registration
    return result
