"""The controller: election, partition leadership and topic deletion, driven by the metadata tree.

Kafka 2.6's controller model, kept so that issue 6 (several brokers, ZooKeeper) extends rather than rewrites it:

* **Election.** Every broker runs a :class:`KafkaController`. The one that creates the ephemeral ``/controller``
  znode, in the same multi-op that bumps ``/controller_epoch`` on its expected znode version, is active. Every
  later controller write is a multi-op whose first operation checks that version (:meth:`fenced`), so a
  deposed controller cannot write; a failed check makes it resign. Everybody watches ``/controller`` and runs
  the election again when it disappears. A single broker simply wins.
* **One thread.** Watch callbacks (which arrive on the store's event thread) and the public methods only put
  events on a queue; a dedicated thread applies them in order to the controller's in-memory context and writes
  the results, like Kafka's ControllerEventManager. No locks are needed inside.
* **Partition leadership.** A new partition gets the first live replica of its assignment as leader and all
  live replicas as ISR, leader epoch 0, in ``/brokers/topics/<t>/partitions/<p>/state``. When the controller
  sees a broker go away, partitions it led elect another live ISR member, and it leaves every ISR; a partition
  with no live ISR member keeps its last ISR with leader -1 and is elected again when a member returns. A
  controller that takes over elects partitions whose leader is not alive and takes replicas of dead brokers
  out of the ISRs, as Kafka's replica state machine does at start-up (a broker that died with the previous
  controller was never seen leaving). Every change of leader or ISR bumps the leader epoch;
  an unchanged partition is never rewritten, so a single broker that restarts and is again the leader of its
  partitions keeps their epochs.
* **Topic deletion.** A marker ``/admin/delete_topics/<t>`` starts it. The controller asks every replica's
  broker to stop and delete its replica through the :class:`StopReplicaSender` hook (the StopReplica request of
  a multi-broker cluster; a single broker deletes its local logs). Brokers report back with
  :meth:`KafkaController.replica_deletion_done`; when every replica is gone the controller removes
  ``/brokers/topics/<t>`` (recursively), ``/config/topics/<t>`` and the marker in one fenced multi-op.
  Replicas on dead brokers wait until their broker returns. Without a sender, deletion completes at once.
  With ``delete_topic_enable=False`` markers are removed and nothing is deleted, as in Kafka.

Public API::

    controller = KafkaController(store, broker_id, delete_topic_enable=True, stop_replica_sender=None)
    controller.set_stop_replica_sender(sender)
    controller.startup()                    # begins the election; returns at once
    controller.is_active / controller.epoch / controller.epoch_zk_version
    controller.wait_idle(timeout) -> bool   # every event queued so far has been applied (tests, shutdown)
    controller.replica_deletion_done(broker_id, {TopicPartition: ErrorCode})   # any thread
    controller.live_broker_epoch(broker_id) -> int     # for the StopReplicaSender's requests
    controller.elect_leaders(partitions or None, ElectionType.PREFERRED, timeout) -> {tp: (code, message)}
    controller.configure_leader_rebalance(enable, interval_s, imbalance_percentage)
    controller.shutdown()                   # stops the thread; the session's close removes /controller
    controller.on_new_session()             # after the store replaced a lost session: run for election again
    controller.reassignments.alter_partition_reassignments({tp: replicas or None}, timeout) -> {tp: (code, message)}
    controller.reassignments.list_partition_reassignments(partitions or None, timeout) -> {tp: OngoingReassignment}

* **Requested elections** (the ElectLeaders API, :meth:`KafkaController.elect_leaders`). Preferred: the
  first replica of the assignment becomes leader when it is alive and in the ISR (ELECTION_NOT_NEEDED when
  it already leads, PREFERRED_LEADER_NOT_AVAILABLE otherwise). Unclean: only for a partition without a live
  leader, from the live ISR first, else any live replica. The state znode is read afresh first, because
  leaders change the ISR themselves and the context may hold an older one.
* **Automatic preferred election** (``auto.leader.rebalance.enable``): every
  ``leader.imbalance.check.interval.seconds`` the controller counts, per broker, the partitions it is the
  preferred replica of but does not lead; above ``leader.imbalance.per.broker.percentage`` it runs a
  preferred election for them, as Kafka's ``checkAndTriggerAutoLeaderRebalance``.

* **Reassignments** (AlterPartitionReassignments, ``/admin/reassign_partitions``): :attr:`reassignments`, a
  :class:`~sofakafka.controller.reassignment.ReassignmentManager` running on this thread.

* **Controlled shutdown** (:meth:`KafkaController.controlled_shutdown`, sofakafka/controller/controlled_shutdown.py):
  a stopping broker's leaderships and ISR places move to others; it is then elected nowhere
  (:meth:`ControllerContext.is_replica_online`) until it leaves or registers again.
* **/admin/preferred_replica_election** and **/isr_change_notification** are watched, processed and deleted
  (sofakafka/controller/admin_notifications.py).

The duties above (reassignment.py, controlled_shutdown.py, admin_notifications.py) are given this controller as
:class:`~sofakafka.controller.context.ControllerServices`: its context (:class:`ControllerContext`, what it knows
of the cluster), its fenced writes, its thread; none of them imports this module.

Not here (by design): LeaderAndIsr/UpdateMetadata requests to other brokers (brokers learn partition state from
the tree through their :class:`~sofakafka.controller.metadata.MetadataCache`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from sofakafka.controller import admin_notifications, log_dir_failures, zk_data, zk_paths
from sofakafka.controller.context import (
    INITIAL_CONTROLLER_EPOCH,
    NO_LEADER,
    ControllerContext,
    ElectionResult,
    ElectionType,
    PartitionContext,
)
from sofakafka.controller.controlled_shutdown import ControlledShutdownError, do_controlled_shutdown
from sofakafka.controller.reassignment import ReassignmentManager
from sofakafka.controller.state_rewrite import STATE_WRITE_ATTEMPTS, NotRewritten, StateRewrite
from sofakafka.controller.store import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    EventType,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    OpResult,
    SessionState,
    SetDataOp,
    StoreError,
    WatchCallback,
    WatchedEvent,
    ZnodeStat,
)
from sofakafka.controller.zk_data import (
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    TopicPartition,
)
from sofakafka.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
T = TypeVar("T")
STATES_PER_MULTI = 100
"""Partition states one fenced multi-op rewrites (about 15 KB)."""
STATE_OPS_PER_MULTI = 1500
"""Operations in one multi-op creating new partition states: about 200 KB, well under ZooKeeper's 1 MB request
limit (``jute.maxbuffer``) whatever the topic's size."""
R = TypeVar("R")


class StopReplicaSender(Protocol):
    """Where the controller sends StopReplica(delete=True) for a topic being deleted.

    ``stop_replicas`` must not block for long: it hands the work off and reports the outcome later (or right
    away, from any thread) through :meth:`KafkaController.replica_deletion_done`.
    """

    def stop_replicas(self, broker_id: int, partitions: Sequence[TopicPartition]) -> None: ...


class ControllerMovedError(StoreError):
    """A fenced write failed its epoch check: another controller was elected since."""


class KafkaController:
    """The controller of one broker (see the module docstring). Its duties (reassignment, controlled shutdown,
    the admin znodes) see it as :class:`~sofakafka.controller.context.ControllerServices`."""

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        *,
        delete_topic_enable: bool = True,
        stop_replica_sender: StopReplicaSender | None = None,
        unclean_leader_election_enable: bool = False,
    ) -> None:
        self._store = store
        self.broker_id = broker_id
        self.delete_topic_enable = delete_topic_enable
        self._sender = stop_replica_sender
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stopped = False
        # What this controller knows of the cluster: touched only by the controller thread.
        self._context = ControllerContext()
        self._rebalance_timer: threading.Timer | None = None
        self._rebalance_interval_s = 0.0
        self._imbalance_percentage = 10
        self.reassignments = ReassignmentManager(self)

    # ------------------------------------------------------------------------------------- public API

    @property
    def is_active(self) -> bool:
        return self._context.active

    @property
    def epoch(self) -> int:
        return self._context.epoch

    @property
    def epoch_zk_version(self) -> int:
        return self._context.epoch_zk_version

    @property
    def context(self) -> ControllerContext:
        """What this controller knows of the cluster (controller thread only)."""
        return self._context

    @property
    def store(self) -> MetadataStore:
        return self._store

    def set_stop_replica_sender(self, sender: StopReplicaSender | None) -> None:
        """Install the deletion hook after construction (the broker's sender needs the controller to
        report back to). Takes effect for replicas not yet asked."""
        self.post(lambda: setattr(self, "_sender", sender))

    def startup(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"controller-{self.broker_id}", daemon=True)
        self._thread.start()
        self._store.add_listener(self._on_session_state)
        self._queue.put(self._elect)

    def shutdown(self) -> None:
        """Stop processing events. Ephemeral ``/controller`` stays until the store session closes, as a Kafka
        broker keeps it until its ZooKeeper session ends."""
        if self._thread is None or self._stopped:
            return
        self._stopped = True
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
        self._store.remove_listener(self._on_session_state)
        self._queue.put(None)
        self._thread.join()
        self._context.active = False

    def wait_idle(self, timeout: float | None = None) -> bool:
        """True once every event queued before the call has been applied (and its watch events, already
        committed by then, delivered and applied)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for _ in range(2):
            # Deliver pending watch events, then drain our queue; twice, since applying events may write
            # znodes whose watches queue more work for us.
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._store.sync(remaining)
            done = threading.Event()
            self._queue.put(done.set)
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not done.wait(remaining):
                return False
        return True

    def elect_leaders(self, partitions: Sequence[TopicPartition] | None, election_type: ElectionType,
                      timeout: float) -> dict[TopicPartition, ElectionResult]:
        """Run an election of ``election_type`` for ``partitions`` (None: every partition whose preferred
        replica does not lead, or, unclean, every partition without a leader) on the controller thread.
        Raises ``TimeoutError`` when the thread did not get to it within ``timeout``; a controller that is
        not active answers NOT_CONTROLLER for each partition."""
        wanted = None if partitions is None else list(partitions)
        return self.call_on_thread(lambda: self.run_election(wanted, election_type), timeout,
                                   "run the election")

    def controlled_shutdown(self, broker_id: int, broker_epoch: int, timeout: float) -> list[TopicPartition]:
        """ControlledShutdown on the controller thread (sofakafka/controller/controlled_shutdown.py): returns the
        replicated partitions ``broker_id`` still leads; raises ``ControlledShutdownError`` for a request that
        failed as a whole, ``ControllerMovedError`` when deposed meanwhile, ``TimeoutError`` past ``timeout``."""
        return self.call_on_thread(lambda: do_controlled_shutdown(self, broker_id, broker_epoch), timeout,
                                   "process the controlled shutdown", answers=(ControlledShutdownError,))

    def call_on_thread(self, work: Callable[[], T], timeout: float, what: str,
                       answers: tuple[type[BaseException], ...] = ()) -> T:
        """Run ``work`` on the controller thread, where the context may be touched, and wait for its result
        (requests from handler threads). Exceptions of ``answers`` are answers to the request and reach only
        the caller; any other failure also reaches the controller loop, which logs it or resigns. Raises
        ``TimeoutError`` ("the controller did not <what> in time") when the thread did not get to it."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def task() -> None:
            try:
                future.set_result(work())
            except BaseException as exc:
                future.set_exception(exc)
                if not isinstance(exc, answers):
                    raise

        self.post(task)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the controller did not {what} in time") from None

    def configure_leader_rebalance(self, enable: bool, interval_s: float, imbalance_percentage: int) -> None:
        """``auto.leader.rebalance.enable`` and its two settings; the first check runs one interval from now."""
        self._rebalance_interval_s = interval_s if enable else 0.0
        self._imbalance_percentage = imbalance_percentage
        self._schedule_rebalance_check()

    def _schedule_rebalance_check(self) -> None:
        if self._rebalance_interval_s <= 0 or self._stopped:
            return
        timer = threading.Timer(self._rebalance_interval_s, self.post, (self._check_leader_imbalance,))
        timer.daemon = True
        timer.name = f"controller-{self.broker_id}-rebalance"
        self._rebalance_timer = timer
        timer.start()

    def replica_deletion_done(self, broker_id: int, results: Mapping[TopicPartition, ErrorCode]) -> None:
        """The StopReplica outcome of ``broker_id``'s replicas; NONE means deleted."""
        copied = dict(results)
        self._queue.put(lambda: self._on_replica_deletion_done(broker_id, copied))

    def live_broker_epoch(self, broker_id: int) -> int:
        """The registration epoch (czxid) this controller knows for a live broker, -1 if it knows none: what a
        request to that broker carries as ``broker_epoch``, so a broker that restarted since refuses it. Meant for
        the StopReplicaSender, called on the controller thread (the mapping is replaced whole, never mutated)."""
        return self._context.live_brokers.get(broker_id, -1)

    # ----------------------------------------------------------------------------------------- thread

    def _run(self) -> None:
        while True:
            task = self._queue.get()
            if task is None:
                return
            try:
                task()
            except ControllerMovedError:
                log.info("controller %d lost its epoch fence; resigning", self.broker_id)
                self._resign()
            except Exception:  # one failed event must not stop the controller
                log.exception("controller %d failed to process an event", self.broker_id)

    def post(self, task: Callable[[], None]) -> None:
        if not self._stopped:
            self._queue.put(task)

    def watch(self, event: WatchedEvent) -> None:
        """Runs on the store's event thread: only classifies the event and queues the work."""
        path = event.path
        if path == zk_paths.CONTROLLER_PATH:
            self.post(self._elect)
        elif path == zk_paths.BROKER_IDS_PATH:
            self.post(self._on_broker_change)
        elif path == zk_paths.TOPICS_PATH:
            self.post(self._on_topic_change)
        elif path == zk_paths.DELETE_TOPICS_PATH:
            self.post(self._on_topic_deletion)
        elif path == zk_paths.PREFERRED_REPLICA_ELECTION_PATH:
            self.post(lambda: admin_notifications.on_preferred_replica_election(self))
        elif path == zk_paths.ISR_CHANGE_NOTIFICATION_PATH:
            self.post(lambda: admin_notifications.on_isr_change_notification(self))
        elif path == zk_paths.LOG_DIR_EVENT_NOTIFICATION_PATH:
            self.post(lambda: log_dir_failures.on_log_dir_event_notification(self))
        elif path.startswith(zk_paths.TOPICS_PATH + "/") and event.type != EventType.CHILD:
            topic = path[len(zk_paths.TOPICS_PATH) + 1 :]
            if "/" not in topic:
                self.post(lambda: self._on_partition_modification(topic))

    # --------------------------------------------------------------------------------------- election

    def _elect(self) -> None:
        store = self._store
        if self._context.active:
            # Still ours? (The /controller watch fires for our own changes too.)
            stat = store.exists(zk_paths.CONTROLLER_PATH, self.watch)
            if stat is not None and stat.ephemeral_owner == store.session_id:
                return
            self._resign()
        try:
            data, stat = store.get(zk_paths.CONTROLLER_EPOCH_PATH)
            epoch, epoch_version = zk_data.decode_controller_epoch(data), stat.version
        except NoNodeError:
            try:
                store.create(
                    zk_paths.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(INITIAL_CONTROLLER_EPOCH)
                )
            except NodeExistsError:
                pass
            self.post(self._elect)
            return
        registration = ControllerRegistration(self.broker_id, int(time.time() * 1000))
        try:
            results = store.multi(
                [
                    CreateOp(zk_paths.CONTROLLER_PATH, registration.encode(), ephemeral=True),
                    SetDataOp(zk_paths.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(epoch + 1), epoch_version),
                ]
            )
        except (NodeExistsError, BadVersionError):
            # Somebody else is (or just became) controller; follow it and run again when it goes.
            if store.exists(zk_paths.CONTROLLER_PATH, self.watch) is None:
                self.post(self._elect)
            return
        new_stat = results[1]
        assert isinstance(new_stat, ZnodeStat)
        self._context.epoch = epoch + 1
        self._context.epoch_zk_version = new_stat.version
        self._context.active = True
        store.exists(zk_paths.CONTROLLER_PATH, self.watch)
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self._context.epoch)
        self._on_controller_failover()

    def _on_session_state(self, state: SessionState) -> None:
        """A lost session took our ephemeral ``/controller`` with it: stop acting as controller at once.
        (A new session starts a new election: :meth:`on_new_session`.)"""
        if state == SessionState.LOST:
            self.post(self._forget_context)

    def on_new_session(self) -> None:
        """The store replaced a lost session (Kafka's RegisterBrokerAndReelect, the registration being the
        node's part): whatever this controller was, it is not now, and it runs for controller again; the
        election re-arms the ``/controller`` watch, the only one a controller that is not active holds."""
        self.post(self._forget_context)
        self.post(self._elect)

    def _forget_context(self) -> None:
        self._context.forget()
        self.reassignments.clear()

    def _resign(self) -> None:
        self._forget_context()
        with contextlib.suppress(StoreError):
            if self._store.exists(zk_paths.CONTROLLER_PATH, self.watch) is None:
                self.post(self._elect)

    def fenced(self, ops: Sequence[Op]) -> None:
        """A controller write: applied only while our epoch is still the current one."""
        try:
            self._store.multi([CheckOp(zk_paths.CONTROLLER_EPOCH_PATH, self._context.epoch_zk_version), *ops])
        except BadVersionError as exc:
            if exc.op_index == 0:
                raise ControllerMovedError("controller epoch changed", zk_paths.CONTROLLER_EPOCH_PATH) from exc
            raise

    # -------------------------------------------------------------------------------------- failover

    def _on_controller_failover(self) -> None:
        store = self._store
        for path in (zk_paths.BROKER_IDS_PATH, zk_paths.TOPICS_PATH, zk_paths.DELETE_TOPICS_PATH):
            store.ensure_path(path)
        self._context.live_brokers = self._read_live_brokers()
        for topic in store.get_children(zk_paths.TOPICS_PATH, self.watch):
            self._load_topic(topic)
        # Deletions first, so that no leader is elected for a topic being deleted (Kafka's TopicDeletionManager
        # starts before its partition state machine).
        self._on_topic_deletion()
        # Partitions that never got a state, or whose leader is gone, need an election.
        needs_election = [
            tp
            for tp, ctx in self._context.partitions.items()
            if tp.topic not in self._context.topics_to_delete
            and (ctx.state is None or ctx.state.leader not in self._context.live_brokers)
        ]
        self._elect_leaders(needs_election)
        # Replicas on brokers that died before we took over (the previous controller among them) were never
        # seen leaving: take them out of the ISRs now, as Kafka's replica state machine does at start-up
        # (OfflineReplica). Otherwise acks=all waits for the leader to drop them by replica.lag.time.max.ms.
        offline = {r for parts in self._context.assignments.values() for rs in parts.values() for r in rs
                   if r not in self._context.live_brokers}
        if offline:
            self._remove_dead_from_isr(offline, refresh=False)
        self.reassignments.on_controller_failover()
        admin_notifications.on_controller_failover(self)
        log_dir_failures.on_controller_failover(self)

    def _read_live_brokers(self) -> dict[int, int]:
        live: dict[int, int] = {}
        for child in self._store.get_children(zk_paths.BROKER_IDS_PATH, self.watch):
            if not child.isdigit():
                continue
            stat = self._store.exists(zk_paths.broker_id_path(int(child)))
            if stat is not None:
                live[int(child)] = stat.czxid
        return live

    def _load_topic(self, topic: str) -> list[TopicPartition]:
        """Read a topic's assignment (and arm its watch) and the states of partitions not yet known;
        returns the partitions that were new to the context. The states are read together (one listing of the
        topic's partitions, then the existing state znodes at once), not one round trip per partition."""
        try:
            data, _ = self._store.get(zk_paths.topic_path(topic), self.watch)
        except NoNodeError:
            return []
        decoded = TopicAssignment.decode(topic, data)
        self.reassignments.on_assignment_loaded(topic, decoded)
        assignment = decoded.partitions
        self._context.assignments[topic] = {p: list(r) for p, r in assignment.items()}
        added = [TopicPartition(topic, partition) for partition in sorted(assignment)
                 if TopicPartition(topic, partition) not in self._context.partitions]
        if not added:
            return added
        try:
            existing = {int(c) for c in self._store.get_children(zk_paths.topic_partitions_path(topic)) if c.isdigit()}
        except NoNodeError:
            existing = set()
        with_node = [tp for tp in added if tp.partition in existing]
        states = self._store.get_many([zk_paths.topic_partition_state_path(topic, tp.partition) for tp in with_node])
        found = {tp: state for tp, state in zip(with_node, states, strict=True) if state is not None}
        for tp in added:
            read = found.get(tp)
            self._context.partitions[tp] = (PartitionContext(None, -1) if read is None
                                            else PartitionContext(PartitionState.decode(read[0]), read[1].version))
        return added

    # ---------------------------------------------------------------------------------------- events

    def _on_broker_change(self) -> None:
        if not self._context.active:
            return
        previous = self._context.live_brokers
        current = self._read_live_brokers()
        self._context.live_brokers = current
        # A broker whose registration czxid changed restarted in between: it failed, then started.
        bounced = {b for b in previous.keys() & current.keys() if previous[b] != current[b]}
        dead = (previous.keys() - current.keys()) | bounced
        new = (current.keys() - previous.keys()) | bounced
        for broker in dead:
            # Kafka forgets a broker's offline replicas when it dies and when it starts again: a restarted broker
            # recovered its dirs, or lists what is still offline again.
            self._context.offline_dir_replicas.pop(broker, None)
        if dead:
            log.info("controller: brokers %s went away", sorted(dead))
            self._on_brokers_failure(dead)
        if new:
            log.info("controller: brokers %s started", sorted(new))
            offline = [
                tp
                for tp, ctx in self._context.partitions.items()
                if tp.topic not in self._context.topics_to_delete
                and (ctx.state is None or ctx.state.leader not in current or tp in self._context.offline)
            ]
            self._elect_leaders(offline)
            self.resume_deletions()

    def _on_topic_change(self) -> None:
        if not self._context.active:
            return
        topics = set(self._store.get_children(zk_paths.TOPICS_PATH, self.watch))
        for gone in set(self._context.assignments) - topics:
            self._forget_topic(gone)
        for topic in sorted(topics - set(self._context.assignments)):
            self._elect_leaders(self._load_topic(topic))

    def _on_partition_modification(self, topic: str) -> None:
        if not self._context.active:
            return
        if topic in self._context.topics_to_delete:
            # Kafka elects no leader for partitions added to a topic being deleted (CreatePartitions refuses such
            # a topic; this is one that slipped in before the marker). Their replicas are deleted with the rest:
            # our brokers create a partition's log as soon as they see it assigned to them.
            self._load_topic(topic)
            self.resume_deletions()
            return
        if topic not in self._context.assignments:
            return  # a new topic: the /brokers/topics child watch handles it
        self._elect_leaders(self._load_topic(topic))

    # ------------------------------------------------------------------------------- leader election

    def _elect_leaders(self, partitions: Sequence[TopicPartition]) -> None:
        """Give each partition a live leader if it can have one; partitions without a state znode are new.

        Batched, since a broker failure or a new topic brings thousands: the new states go in fenced multi-ops
        of bounded size, the states to re-elect are read together and written together (``_write_states``),
        instead of a round trip (or two) per partition one after the other."""
        new_states: list[tuple[TopicPartition, PartitionState]] = []
        to_refresh: list[tuple[TopicPartition, PartitionContext]] = []
        for tp in sorted(partitions):
            ctx = self._context.partitions.get(tp)
            if ctx is None:
                continue
            replicas = self._context.assignments.get(tp.topic, {}).get(tp.partition, [])
            live = [r for r in replicas if self._context.is_replica_online(r, tp)]
            if ctx.state is None:
                if not live:
                    log.warning("controller: no live replica for new partition %s (replicas %s)", tp, replicas)
                    continue
                new_states.append((tp, PartitionState(live[0], 0, self._context.epoch, tuple(live))))
                continue
            if self._context.leader_serves(tp, ctx.state.leader) and tp not in self._context.offline:
                continue
            to_refresh.append((tp, ctx))
        if new_states:
            self._create_states(new_states)
        # Leaders shrink and expand the ISR in the znode themselves; electing from the ISR cached here
        # could pick a replica that left the ISR since, and lose what it never had.
        self.refresh_states(to_refresh)
        updates: list[tuple[TopicPartition, PartitionContext, PartitionState]] = []
        for tp, ctx in to_refresh:
            old = ctx.state
            assert old is not None
            replicas = self._context.assignments.get(tp.topic, {}).get(tp.partition, [])
            live = [r for r in replicas if self._context.is_replica_online(r, tp)]
            candidates = [r for r in live if r in old.isr]
            if candidates:
                leader = candidates[0]
                isr = tuple(r for r in old.isr if self._context.is_replica_online(r, tp))
            elif live and self.unclean_leader_election_enable:
                leader, isr = live[0], (live[0],)
            else:
                # Nothing written: the partition stays offline until an ISR member returns (Kafka's
                # OfflinePartition), and its znode keeps the last leader and ISR as a record.
                self._context.offline.add(tp)
                continue
            self._context.offline.discard(tp)
            updates.append((tp, ctx, PartitionState(leader, old.leader_epoch + 1, self._context.epoch, isr)))
        self._write_states(updates)

    def refresh_state(self, tp: TopicPartition, ctx: PartitionContext) -> None:
        self.refresh_states([(tp, ctx)])

    def refresh_states(self, partitions: Sequence[tuple[TopicPartition, PartitionContext]]) -> None:
        """Read the state znodes of ``partitions`` (all at once) into their contexts; a missing one is left as
        it was."""
        paths = [zk_paths.topic_partition_state_path(tp.topic, tp.partition) for tp, _ in partitions]
        for (_, ctx), read in zip(partitions, self._store.get_many(paths), strict=True):
            if read is not None:
                ctx.state, ctx.zk_version = PartitionState.decode(read[0]), read[1].version

    def _create_states(self, states: Sequence[tuple[TopicPartition, PartitionState]]) -> None:
        """Create the state znodes of new partitions (and whichever parents are missing), in fenced multi-ops of
        at most ``STATE_OPS_PER_MULTI`` operations: ZooKeeper refuses a request over ``jute.maxbuffer`` (1 MB),
        which one multi-op for a topic of several thousand partitions would be. A controller that fails between
        two of them leaves the rest without a state, which its successor elects (a failover elects every
        partition without one). Multi-ops cannot "create if missing", so each topic's partitions are listed
        first (one read per topic, not an existence check per partition)."""
        existing: dict[str, set[str]] = {}
        ops: list[Op] = []
        done: list[tuple[TopicPartition, PartitionState]] = []
        for tp, state in states:
            children = existing.get(tp.topic)
            if children is None:
                try:
                    children = set(self._store.get_children(zk_paths.topic_partitions_path(tp.topic)))
                except NoNodeError:
                    children = set()
                    ops.append(CreateOp(zk_paths.topic_partitions_path(tp.topic)))
                existing[tp.topic] = children
            if str(tp.partition) not in children:
                children.add(str(tp.partition))
                ops.append(CreateOp(zk_paths.topic_partition_path(tp.topic, tp.partition)))
            ops.append(CreateOp(zk_paths.topic_partition_state_path(tp.topic, tp.partition), state.encode()))
            done.append((tp, state))
            if len(ops) >= STATE_OPS_PER_MULTI:
                self._commit_new_states(ops, done)
                ops, done = [], []
        if ops:
            self._commit_new_states(ops, done)

    def _commit_new_states(self, ops: list[Op], states: list[tuple[TopicPartition, PartitionState]]) -> None:
        self.fenced(ops)
        for tp, state in states:
            ctx = self._context.partitions.get(tp)
            if ctx is not None:
                ctx.state, ctx.zk_version = state, 0

    def _update_state(self, tp: TopicPartition, ctx: PartitionContext, state: PartitionState) -> None:
        self._write_states([(tp, ctx, state)])

    def _write_states(self, updates: Sequence[tuple[TopicPartition, PartitionContext, PartitionState]]) -> None:
        """Write each new state conditioned on the version its context holds, in fenced multi-ops of up to
        ``STATES_PER_MULTI`` partitions sent together (pipelined on ZooKeeper, one fsync embedded): a failed
        broker's ten thousand partitions are a few dozen requests, not ten thousand. A multi-op that failed (one of
        its partitions lost its race) is sent again one partition per multi-op, so each partition's outcome is its
        own. A write that lost its race to the leader's own ISR change (issue 6) is not retried: the context takes
        what the leader wrote, and the next event that needs it decides again. A lost epoch fence raises
        ``ControllerMovedError``, after the successful writes were recorded in the context."""
        if not updates:
            return
        fence = CheckOp(zk_paths.CONTROLLER_EPOCH_PATH, self._context.epoch_zk_version)

        def set_op(update: tuple[TopicPartition, PartitionContext, PartitionState]) -> SetDataOp:
            tp, ctx, state = update
            return SetDataOp(zk_paths.topic_partition_state_path(tp.topic, tp.partition), state.encode(), ctx.zk_version)

        groups = [list(updates[i:i + STATES_PER_MULTI]) for i in range(0, len(updates), STATES_PER_MULTI)]
        outcomes = self._store.multi_many([[fence, *map(set_op, group)] for group in groups])
        Update = tuple[TopicPartition, PartitionContext, PartitionState]
        done: list[Update] = []
        alone: list[Update] = []
        judged: list[tuple[Update, list[OpResult] | StoreError]] = []
        failure: StoreError | None = None
        for group, outcome in zip(groups, outcomes, strict=True):
            if not isinstance(outcome, StoreError):
                done += group
            elif isinstance(outcome, BadVersionError) and outcome.op_index == 0:
                failure = failure or outcome
            elif len(group) == 1:
                judged.append((group[0], outcome))
            else:
                alone += group
        if alone and failure is None:
            judged += zip(alone, self._store.multi_many([[fence, set_op(u)] for u in alone]), strict=True)
        lost: list[tuple[TopicPartition, PartitionContext]] = []
        for update, outcome in judged:
            if not isinstance(outcome, StoreError):
                done.append(update)
            elif isinstance(outcome, BadVersionError) and outcome.op_index == 1:
                lost.append((update[0], update[1]))
            elif failure is None:
                failure = outcome
        for _, ctx, state in done:
            ctx.state, ctx.zk_version = state, ctx.zk_version + 1
        # The leader changed the ISR itself since we read it: start from its version.
        self.refresh_states(lost)
        if failure is not None:
            if isinstance(failure, BadVersionError) and failure.op_index == 0:
                raise ControllerMovedError("controller epoch changed", zk_paths.CONTROLLER_EPOCH_PATH) from failure
            raise failure

    def rewrite_state(
        self,
        tp: TopicPartition,
        decide: Callable[[PartitionState], PartitionState | R],
        *,
        extra_ops: Callable[[], Sequence[Op]] | None = None,
        watch: WatchCallback | None = None,
        write_without_state: bool = False,
        attempts: int = STATE_WRITE_ATTEMPTS,
    ) -> StateRewrite | R | NotRewritten:
        """Read ``tp``'s state znode, ``decide`` on it, write the decision conditioned on the version read; a lost
        race (a leader changed the ISR meanwhile) reads and decides again, up to ``attempts`` times.

        The one loop behind every duty that rewrites a state another writer may be changing: requested
        elections, controlled shutdown, reassignment start and completion differ only in ``decide``, which
        returns the new state or anything else to give up with (returned as is; never a StateRewrite or a
        NotRewritten). ``extra_ops`` (built again each attempt, since they too are conditioned on versions read)
        go in the same fenced multi-op, so the state and e.g. the topic's assignment change together or not at
        all. ``watch`` is armed by the read, and on the znode's absence too, so its next change (or creation)
        brings the caller back. Without a state znode nothing is decided (``NO_STATE``); with
        ``write_without_state`` the ``extra_ops`` are still written, alone. The cached context follows every
        read and the successful write. A written partition leaves ``context.offline``: a duty just chose its leader,
        and should that one not be alive, the next broker change elects the partition anyway.

        :meth:`_update_state` and :meth:`refresh_state` stay apart: they serve the passes over many partitions
        (a broker failure, a failover), which decide on the cached or just refreshed state, write once and, on a
        lost race, keep what the leader wrote instead of deciding again."""
        path = zk_paths.topic_partition_state_path(tp.topic, tp.partition)
        for _ in range(attempts):
            try:
                raw, stat = self._store.get(path, watch)
            except NoNodeError:
                if watch is not None:
                    self._store.exists(path, watch)
                if write_without_state and extra_ops is not None:
                    try:
                        self.fenced(extra_ops())
                    except BadVersionError:
                        continue
                return NotRewritten.NO_STATE
            old = PartitionState.decode(raw)
            ctx = self._context.partitions.get(tp)
            if ctx is not None:
                ctx.state, ctx.zk_version = old, stat.version
            decision = decide(old)
            if not isinstance(decision, PartitionState):
                return decision
            try:
                self.fenced([SetDataOp(path, decision.encode(), stat.version),
                              *(extra_ops() if extra_ops is not None else ())])
            except BadVersionError:
                continue
            if ctx is not None:
                ctx.state, ctx.zk_version = decision, stat.version + 1
            self._context.offline.discard(tp)
            return StateRewrite(old, decision)
        return NotRewritten.KEPT_CHANGING

    def _on_brokers_failure(self, dead: set[int]) -> None:
        self._context.shutting_down -= dead  # gone, or back with a new epoch: a new incarnation may be elected again
        led_by_dead = [
            tp
            for tp, ctx in self._context.partitions.items()
            if ctx.state is not None and ctx.state.leader in dead and tp.topic not in self._context.topics_to_delete
        ]
        self._elect_leaders(led_by_dead)
        # Those the election just read (and wrote, or found without an eligible leader) need no second read.
        self._remove_dead_from_isr(dead, refresh=True, just_read=set(led_by_dead))
        for topic in list(self._context.topics_to_delete):
            pending = self._context.deletion_pending.get(topic, set())
            # Requests sent to a dead broker will never be answered: resend when it comes back.
            pending -= {(b, p) for b, p in pending if b in dead}

    def update_offline_replicas(self, broker_id: int, partitions: set[TopicPartition]) -> None:
        """Kafka's handling of a LeaderAndIsr answer with KAFKA_STORAGE_ERRORs (``replicasOnOfflineDirs``) and
        ``onReplicasBecomeOffline``: the partitions ``broker_id`` led among the newly offline ones elect another
        online ISR member (none: they keep their last ISR with no leader, as after a broker failure), then the
        broker leaves the ISR of each (never emptying it). Controller thread."""
        previous = self._context.offline_dir_replicas.get(broker_id, set())
        if partitions:
            self._context.offline_dir_replicas[broker_id] = set(partitions)
        else:
            self._context.offline_dir_replicas.pop(broker_id, None)
        new = sorted(tp for tp in partitions - previous
                     if tp in self._context.partitions and tp.topic not in self._context.topics_to_delete)
        if not new:
            return
        log.info("controller: replicas of broker %d offline in a failed log dir: %s", broker_id, new)
        led = [tp for tp in new if (ctx := self._context.partitions[tp]).state is not None
               and ctx.state.leader == broker_id]
        self._elect_leaders(led)
        for tp in new:
            ctx = self._context.partitions[tp]
            self.refresh_state(tp, ctx)
            state = ctx.state
            if state is None:
                continue
            isr = tuple(r for r in state.isr if r != broker_id) or state.isr
            leader = NO_LEADER if state.leader == broker_id else state.leader
            if (leader, isr) != (state.leader, state.isr):
                self._update_state(tp, ctx, PartitionState(leader, state.leader_epoch + 1, self._context.epoch, isr))

    def _remove_dead_from_isr(self, dead: set[int], *, refresh: bool,
                              just_read: set[TopicPartition] | None = None) -> None:
        """Dead followers leave the ISR (never emptying it: the last member stays as a record of who was in
        sync, which a later election needs). ``refresh`` reads the state znodes first (all at once), since leaders
        change ISRs without telling us; only partitions a dead broker could be in the ISR of are read: those it is
        assigned to, or which the cached state names it in. Without ``refresh``, only partitions whose cached state
        names a dead broker are touched (right after a failover loaded every state). ``just_read``: partitions whose
        context was read (or written) moments ago, not read again. The writes go in one batch."""
        concerned: list[tuple[TopicPartition, PartitionContext]] = []
        for tp, ctx in sorted(self._context.partitions.items()):
            if ctx.state is None or tp.topic in self._context.topics_to_delete:
                continue
            named = ctx.state.leader in dead or not dead.isdisjoint(ctx.state.isr)
            if named or (refresh and not dead.isdisjoint(self._context.replicas(tp))):
                concerned.append((tp, ctx))
        if refresh:
            self.refresh_states([(tp, ctx) for tp, ctx in concerned if just_read is None or tp not in just_read])
        updates: list[tuple[TopicPartition, PartitionContext, PartitionState]] = []
        for tp, ctx in concerned:
            state = ctx.state
            assert state is not None
            isr = tuple(r for r in state.isr if r not in dead) or state.isr
            leader = NO_LEADER if state.leader in dead else state.leader
            if (leader, isr) == (state.leader, state.isr):
                continue
            updates.append((tp, ctx, PartitionState(leader, state.leader_epoch + 1, self._context.epoch, isr)))
        self._write_states(updates)

    # ------------------------------------------------------------------------------ requested elections

    def run_election(self, partitions: list[TopicPartition] | None,
                          election_type: ElectionType) -> dict[TopicPartition, ElectionResult]:
        if not self._context.active:
            return {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in partitions or []}
        if partitions is None:
            partitions = [tp for tp, ctx in sorted(self._context.partitions.items())
                          if ctx.state is not None and tp.topic not in self._context.topics_to_delete
                          and (ctx.state.leader != self._context.preferred(tp) if election_type == ElectionType.PREFERRED
                               else not self._context.leader_serves(tp, ctx.state.leader))]
        return {tp: self._elect_one(tp, election_type) for tp in partitions}

    def _elect_one(self, tp: TopicPartition, election_type: ElectionType) -> ElectionResult:
        if tp not in self._context.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        if tp.topic in self._context.topics_to_delete:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted"  # Kafka 2.6's answer and words

        def decide(old: PartitionState) -> PartitionState | ElectionResult:
            replicas = self._context.assignments.get(tp.topic, {}).get(tp.partition, [])
            live = [r for r in replicas if self._context.is_replica_online(r, tp)]
            if election_type == ElectionType.PREFERRED:
                preferred = self._context.preferred(tp)
                if old.leader == preferred:
                    return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
                if preferred not in live or preferred not in old.isr:
                    return (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                            f"Failed to elect leader for partition {tp.topic}-{tp.partition} under strategy "
                            "PreferredReplicaPartitionLeaderElectionStrategy")
                leader, isr = preferred, old.isr
            else:
                if self._context.leader_serves(tp, old.leader):
                    return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
                in_sync = [r for r in live if r in old.isr]
                if in_sync:
                    leader, isr = in_sync[0], tuple(r for r in old.isr if self._context.is_replica_online(r, tp))
                elif live:
                    leader, isr = live[0], (live[0],)
                else:
                    return (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                            f"Failed to elect leader for partition {tp.topic}-{tp.partition} under strategy "
                            "UncleanPartitionLeaderElectionStrategy")
            return PartitionState(leader, old.leader_epoch + 1, self._context.epoch, isr)

        outcome = self.rewrite_state(tp, decide)
        if outcome is NotRewritten.NO_STATE:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "The partition has no state yet."
        if outcome is NotRewritten.KEPT_CHANGING:
            return ErrorCode.REQUEST_TIMED_OUT, "The partition state kept changing during the election."
        if not isinstance(outcome, StateRewrite):
            return outcome
        log.info("controller: %s election for %s: leader %d -> %d (epoch %d)",
                 election_type.name.lower(), tp, outcome.old.leader, outcome.new.leader, outcome.new.leader_epoch)
        return ErrorCode.NONE, None

    def _check_leader_imbalance(self) -> None:
        try:
            if not self._context.active:
                return
            by_preferred: dict[int, list[TopicPartition]] = {}
            for tp, ctx in self._context.partitions.items():
                if ctx.state is not None and tp.topic not in self._context.topics_to_delete:
                    by_preferred.setdefault(self._context.preferred(tp), []).append(tp)
            for broker, partitions in sorted(by_preferred.items()):
                if broker not in self._context.live_brokers:
                    continue
                # Leaders change the ISR, not the leader: the cached leader is current, the ISR may not be.
                not_led = [tp for tp in partitions
                           if (state := self._context.partitions[tp].state) is not None and state.leader != broker]
                if not not_led or 100 * len(not_led) <= self._imbalance_percentage * len(partitions):
                    continue
                results = self.run_election(sorted(not_led), ElectionType.PREFERRED)
                moved = sum(1 for code, _ in results.values() if code == ErrorCode.NONE)
                log.info("controller: leader imbalance of broker %d was %d/%d; moved %d back",
                         broker, len(not_led), len(partitions), moved)
        finally:
            self._schedule_rebalance_check()

    # ---------------------------------------------------------------------------------- topic deletion

    def _on_topic_deletion(self) -> None:
        if not self._context.active:
            return
        marked = set(self._store.get_children(zk_paths.DELETE_TOPICS_PATH, self.watch))
        unknown = {t for t in marked if t not in self._context.assignments}
        if unknown:
            log.info("controller: removing deletion markers of unknown topics %s", sorted(unknown))
            self._delete_markers(unknown)
        marked -= unknown
        if not marked:
            return
        if not self.delete_topic_enable:
            log.info("controller: delete.topic.enable is false; removing deletion markers %s", sorted(marked))
            self._delete_markers(marked)
            return
        for topic in sorted(marked - self._context.topics_to_delete):
            self._context.topics_to_delete.add(topic)
            self._context.deletion_pending[topic] = set()
            self._context.deletion_done[topic] = set()
        self.resume_deletions()

    def _delete_markers(self, topics: set[str]) -> None:
        for topic in sorted(topics):
            with contextlib.suppress(NoNodeError):
                self.fenced([DeleteOp(zk_paths.delete_topic_path(topic))])

    def resume_deletions(self) -> None:
        for topic in sorted(self._context.topics_to_delete):
            # No waiting for a move of one of its partitions: the deletion starts at once and the move goes with the
            # topic (every replica of the moving assignment, those being added included, is deleted), which is what
            # Kafka 2.6 does on the DeleteTopics path (docs/cluster.md, "Topic deletion" says why). Waiting would
            # need the topic replicated until the move completes, and a move can wait for a broker that never returns.
            replicas = {
                (broker, partition)
                for partition, brokers in self._context.assignments.get(topic, {}).items()
                for broker in brokers
            }
            done = self._context.deletion_done[topic]
            pending = self._context.deletion_pending[topic]
            to_send: dict[int, list[TopicPartition]] = {}
            for broker, partition in sorted(replicas - done - pending):
                if broker in self._context.live_brokers:
                    to_send.setdefault(broker, []).append(TopicPartition(topic, partition))
            if self._sender is None:
                done |= {(b, tp.partition) for b, tps in to_send.items() for tp in tps}
            else:
                for broker, tps in to_send.items():
                    pending |= {(broker, tp.partition) for tp in tps}
                    self._sender.stop_replicas(broker, tps)
            if replicas <= done:
                self._complete_delete_topic(topic)

    def _on_replica_deletion_done(self, broker_id: int, results: Mapping[TopicPartition, ErrorCode]) -> None:
        if not self._context.active:
            return
        retry = False
        for tp, error in results.items():
            if tp.topic not in self._context.topics_to_delete:
                continue
            self._context.deletion_pending[tp.topic].discard((broker_id, tp.partition))
            if error == ErrorCode.NONE:
                self._context.deletion_done[tp.topic].add((broker_id, tp.partition))
            else:
                log.warning("controller: broker %d failed to delete %s: %s", broker_id, tp, error.name)
                retry = True
        if retry:
            # Kafka marks such replicas ineligible and retries later; a short pause keeps us from spinning.
            timer = threading.Timer(1.0, lambda: self.post(self.resume_deletions))
            timer.daemon = True
            timer.start()
        else:
            self.resume_deletions()

    def _complete_delete_topic(self, topic: str) -> None:
        store = self._store
        try:
            raw, topic_stat = store.get(zk_paths.topic_path(topic))
        except NoNodeError:
            self._delete_markers({topic})
            self._forget_topic(topic)
            return
        known = {p: sorted(r) for p, r in self._context.assignments.get(topic, {}).items()}
        if {p: sorted(r) for p, r in TopicAssignment.decode(topic, raw).partitions.items()} != known:
            # Partitions were added after the marker (a CreatePartitions racing it): their replicas go too.
            self._load_topic(topic)
            self.resume_deletions()
            return
        ops: list[Op] = []
        with contextlib.suppress(NoNodeError):
            for partition in store.get_children(zk_paths.topic_partitions_path(topic)):
                partition_path = f"{zk_paths.topic_partitions_path(topic)}/{partition}"
                for child in store.get_children(partition_path):
                    ops.append(DeleteOp(f"{partition_path}/{child}"))
                ops.append(DeleteOp(partition_path))
            ops.append(DeleteOp(zk_paths.topic_partitions_path(topic)))
        # Conditioned on the assignment just compared: one changed since is read and deleted first.
        ops.append(DeleteOp(zk_paths.topic_path(topic), topic_stat.version))
        if store.exists(zk_paths.config_topic_path(topic)) is not None:
            ops.append(DeleteOp(zk_paths.config_topic_path(topic)))
        if store.exists(zk_paths.delete_topic_path(topic)) is not None:
            ops.append(DeleteOp(zk_paths.delete_topic_path(topic)))
        try:
            self.fenced(ops)
        except (BadVersionError, NoNodeError, NodeExistsError, NotEmptyError) as exc:
            # Changed between our reads and the write (partitions added, a config written): read and try again.
            log.info("controller: deleting topic %s raced another write (%s); trying again", topic, exc)
            self.post(self.resume_deletions)
            return
        # A topic config written between our look and the multi-op (AlterConfigs checks that the topic exists,
        # as Kafka's does) would outlive the topic; none can be written after it, since the topic is gone.
        with contextlib.suppress(NoNodeError):
            if store.exists(zk_paths.config_topic_path(topic)) is not None:
                self.fenced([DeleteOp(zk_paths.config_topic_path(topic))])
        log.info("controller: deleted topic %s", topic)
        self._forget_topic(topic)

    def _forget_topic(self, topic: str) -> None:
        self._context.assignments.pop(topic, None)
        for tp in [tp for tp in self._context.partitions if tp.topic == topic]:
            del self._context.partitions[tp]
            self._context.offline.discard(tp)
        self._context.topics_to_delete.discard(topic)
        self._context.deletion_pending.pop(topic, None)
        self._context.deletion_done.pop(topic, None)
        self.reassignments.forget_topic(topic)
