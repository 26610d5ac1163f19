"""A failed log dir among several, reported to the controller (Kafka 2.6's ``/log_dir_event_notification``).

Kafka's broker, when a log dir fails, creates ``/log_dir_event_notification/log_dir_event_<seq>``
(``{"version":1,"broker":<id>,"event":1}``); its controller then sends that broker a LeaderAndIsr for all its
replicas, learns from the KAFKA_STORAGE_ERROR answers which are offline (``replicasOnOfflineDirs``), elects other
leaders for those it led and takes it out of their ISRs, and tells every broker through UpdateMetadata, whose
``offline_replicas`` clients then see in Metadata.

Our brokers follow the tree rather than LeaderAndIsr/UpdateMetadata (docs/cluster.md), so the broker puts what the
round trip would have told the controller where the controller, and every broker's metadata cache, read it:

* **Broker** (:func:`publish`): one multi-op writes ``/sofakafka/log_dir_failures/<id>`` (ephemeral, so it
  goes with the broker's session, as Kafka's controller forgets a broker's offline replicas when it dies or
  restarts; zk_data.LogDirFailures: the failed dirs, the replicas in them, the broker epoch) and Kafka's
  notification. It publishes again after a new ZooKeeper session (a new broker epoch).
* **Controller** (:func:`on_log_dir_event_notification`, on its thread): reads the notifications, deletes them
  (fenced), and for each broker named reads its list; the replicas newly offline go to the controller
  (``ControllerServices.update_offline_replicas``), which does what Kafka's ``onReplicasBecomeOffline`` does.
  A controller that takes over reads every live broker's list (:func:`on_controller_failover`), as Kafka's
  learns them from the LeaderAndIsr round trip of its failover, and clears pending notifications.
* **Every broker's metadata cache** lists those replicas in ``offline_replicas``
  (sofakafka/controller/metadata.py).

A list whose broker epoch is not the broker's current registration (left by a session that is gone, not yet
expired) is ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sofakafka.controller import admin_notifications, zk_data, zk_paths
from sofakafka.controller.context import ControllerServices
from sofakafka.controller.store import CreateOp, DeleteOp, MetadataStore, NoNodeError, Op
from sofakafka.controller.zk_data import LogDirFailures, TopicPartition, ZkDataError

log = logging.getLogger(__name__)


def publish(store: MetadataStore, broker_id: int, broker_epoch: int, log_dirs: Iterable[str],
            partitions: Iterable[TopicPartition]) -> None:
    """The broker's side: its failed dirs and their replicas, then Kafka's notification, in one multi-op."""
    store.ensure_path(zk_paths.LOG_DIR_FAILURES_PATH)
    store.ensure_path(zk_paths.LOG_DIR_EVENT_NOTIFICATION_PATH)
    failures = LogDirFailures(broker_epoch, tuple(sorted(log_dirs)), frozenset(partitions))
    path = zk_paths.log_dir_failures_path(broker_id)
    ops: list[Op] = []
    if store.exists(path) is not None:
        ops.append(DeleteOp(path))  # ours from before, or a lost session's not yet expired
    ops += [CreateOp(path, failures.encode(), ephemeral=True),
            CreateOp(zk_paths.log_dir_event_prefix_path(), zk_data.encode_log_dir_event(broker_id), sequence=True)]
    store.multi(ops)
    log.warning("broker %d: log dirs %s offline with %d replicas; told the controller", broker_id,
                ", ".join(failures.log_dirs), len(failures.partitions))


def read(store: MetadataStore, broker_id: int, broker_epoch: int) -> frozenset[TopicPartition]:
    """The replicas ``broker_id`` lists in failed dirs, if the list is of its current epoch."""
    try:
        data, _ = store.get(zk_paths.log_dir_failures_path(broker_id))
    except NoNodeError:
        return frozenset()
    try:
        failures = LogDirFailures.decode(data)
    except ZkDataError as exc:
        log.warning("controller: ignoring the unreadable log dir failures of broker %d: %s", broker_id, exc)
        return frozenset()
    return failures.partitions if failures.broker_epoch == broker_epoch else frozenset()


def on_controller_failover(c: ControllerServices) -> None:
    c.store.ensure_path(zk_paths.LOG_DIR_EVENT_NOTIFICATION_PATH)
    on_log_dir_event_notification(c)
    for broker, epoch in sorted(c.context.live_brokers.items()):
        offline = read(c.store, broker, epoch)
        if offline:
            c.update_offline_replicas(broker, set(offline))


def on_log_dir_event_notification(c: ControllerServices) -> None:
    """The child watch of ``/log_dir_event_notification`` fired (or a controller took over)."""
    if not c.context.active:
        return
    notifications = admin_notifications.read_notifications(c, zk_paths.LOG_DIR_EVENT_NOTIFICATION_PATH,
                                                            zk_paths.LOG_DIR_EVENT_PREFIX)
    if notifications is None:
        return
    brokers: set[int] = set()
    read_paths = [path for path, _ in notifications]
    for path, data in notifications:
        try:
            broker, _event = zk_data.decode_log_dir_event(data)
        except ZkDataError as exc:
            log.warning("controller: ignoring an unreadable log dir event %s: %s", path, exc)
            continue
        brokers.add(broker)
    try:
        for broker in sorted(brokers):
            epoch = c.context.live_brokers.get(broker)
            if epoch is None:
                continue  # gone since: its replicas are offline with it
            log.info("controller: broker %d reports a failed log dir", broker)
            c.update_offline_replicas(broker, set(read(c.store, broker, epoch)))
    finally:
        admin_notifications.delete_notifications(c, read_paths)
