"""Two znodes the controller consumes: ``/admin/preferred_replica_election`` and ``/isr_change_notification``.

* **/admin/preferred_replica_election** ``{"version":1,"partitions":[{"topic":..,"partition":..}]}`` is how
  ``kafka-preferred-replica-election.sh --zookeeper`` (and tools of its age) ask for a preferred election. The
  controller watches for its existence, runs the election for the listed partitions with the same logic as the
  ElectLeaders API (unknown partitions and partitions being deleted are skipped, partitions already led by their
  preferred replica need nothing), and deletes the znode, fenced by its epoch, so the tool can write the next
  one (it refuses while the znode exists). A pending znode is processed when a controller takes over. A znode
  that is not valid JSON of that shape is deleted with a warning: Kafka 2.6 would leave it, failing every time,
  and block the tool forever.
* **/isr_change_notification/isr_change_<seq>** ``{"version":1,"partitions":[..]}`` is written by leaders after
  ISR changes (sofakafka/broker/isr.py), batched. Kafka's controller reads them to refresh its cached ISR and
  send UpdateMetadata; our brokers read the state znodes themselves, so what is left is refreshing the
  controller's cached state of those partitions and, above all, deleting the notifications so they do not
  accumulate. The controller watches the children, reads every notification there, refreshes, and deletes the
  ones it read in fenced multi-ops of at most :data:`DELETE_BATCH` znodes. A controller that takes over reads
  the whole tree anyway, then clears what is pending the same way.

Public API (controller thread only; hooks the controller calls, handing itself as
:class:`~sofakafka.controller.context.ControllerServices`)::

    on_controller_failover(controller)            # arm both watches, process what is pending
    on_preferred_replica_election(controller)     # the existence watch of /admin/preferred_replica_election fired
    on_isr_change_notification(controller)        # the child watch of /isr_change_notification fired
"""

from __future__ import annotations

import contextlib
import logging

from sofakafka.controller import zk_data, zk_paths
from sofakafka.controller.context import ControllerServices, ElectionType
from sofakafka.controller.store import DeleteOp, NoNodeError
from sofakafka.controller.zk_data import TopicPartition, ZkDataError
from sofakafka.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

DELETE_BATCH = 200
"""Notifications deleted per multi-op: one round trip for a typical burst, far below ZooKeeper's 1 MB request."""


def on_controller_failover(controller: ControllerServices) -> None:
    controller.store.ensure_path(zk_paths.ISR_CHANGE_NOTIFICATION_PATH)
    on_isr_change_notification(controller)
    on_preferred_replica_election(controller)


# ------------------------------------------------------------------------------ preferred replica election

def on_preferred_replica_election(controller: ControllerServices) -> None:
    c = controller
    if not c.context.active:
        return
    path = zk_paths.PREFERRED_REPLICA_ELECTION_PATH
    # exists() arms the watch whether or not the znode is there: creation wakes us, and so does our own delete.
    if c.store.exists(path, c.watch) is None:
        return
    try:
        data, _ = c.store.get(path)
    except NoNodeError:
        return
    try:
        partitions = zk_data.decode_preferred_replica_election(data)
    except ZkDataError as exc:
        log.warning("controller: deleting an unreadable %s: %s", path, exc)
        partitions = []
    else:
        _elect_preferred(c, partitions)
    with contextlib.suppress(NoNodeError):
        c.fenced([DeleteOp(path)])


def _elect_preferred(c: ControllerServices, partitions: list[TopicPartition]) -> None:
    wanted = sorted(set(partitions))
    known = [tp for tp in wanted if tp in c.context.partitions]
    unknown = [tp for tp in wanted if tp not in c.context.partitions]
    if unknown:
        log.info("controller: skipping the preferred election of %s: no such partitions", unknown)
    results = c.run_election(known, ElectionType.PREFERRED)
    moved = sorted(tp for tp, (code, _) in results.items() if code == ErrorCode.NONE)
    failed = {tp: code.name for tp, (code, _) in results.items()
              if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)}
    log.info("controller: preferred replica election requested in %s: moved %s%s",
             zk_paths.PREFERRED_REPLICA_ELECTION_PATH, moved, f", failed {failed}" if failed else "")


# --------------------------------------------------------------------------------- ISR change notifications

def read_notifications(c: ControllerServices, parent: str, prefix: str) -> list[tuple[str, bytes]] | None:
    """The sequential notifications under ``parent`` (arming the child watch), as (path, data); None when there
    are none to read. Those gone meanwhile are left out."""
    try:
        children = c.store.get_children(parent, c.watch)
    except NoNodeError:
        return None
    names = sorted(n for n in children if n.startswith(prefix))
    read: list[tuple[str, bytes]] = []
    for name in names:
        path = f"{parent}/{name}"
        try:
            data, _ = c.store.get(path)
        except NoNodeError:
            continue
        read.append((path, data))
    return read or None


def on_isr_change_notification(controller: ControllerServices) -> None:
    c = controller
    if not c.context.active:
        return
    notifications = read_notifications(c, zk_paths.ISR_CHANGE_NOTIFICATION_PATH, zk_paths.ISR_CHANGE_PREFIX)
    if notifications is None:
        return
    changed: set[TopicPartition] = set()
    read = [path for path, _ in notifications]
    for path, data in notifications:
        try:
            changed.update(zk_data.decode_isr_change_notification(data))
        except ZkDataError as exc:
            log.warning("controller: ignoring an unreadable ISR change notification %s: %s", path, exc)
    try:
        # Kafka's updateLeaderAndIsrCache: our elections re-read the state anyway, but the cached ISR is what
        # the controller reasons with in between.
        c.refresh_states([(tp, ctx) for tp in sorted(changed) if (ctx := c.context.partitions.get(tp)) is not None])
    finally:
        delete_notifications(c, read)


def delete_notifications(c: ControllerServices, paths: list[str]) -> None:
    """Delete the notifications read (fenced), :data:`DELETE_BATCH` at a time."""
    for start in range(0, len(paths), DELETE_BATCH):
        batch = paths[start : start + DELETE_BATCH]
        try:
            c.fenced([DeleteOp(p) for p in batch])
        except NoNodeError:
            # Someone removed one of them (an operator, or a multi-op of ours whose answer was lost): the
            # multi-op removed none, so remove them one by one.
            for p in batch:
                with contextlib.suppress(NoNodeError):
                    c.fenced([DeleteOp(p)])
