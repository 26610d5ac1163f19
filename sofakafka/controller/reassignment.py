"""Partition reassignment (KIP-455 and the legacy ``/admin/reassign_partitions`` znode), run by the controller.

A reassignment moves a partition from its original replicas (ORS) to target replicas (TRS) without a moment
where fewer than the original replicas hold its data, in Kafka 2.6's steps:

1. **Start.** The topic znode gets ``replicas`` = TRS followed by the ORS members not in TRS, with
   ``adding_replicas`` = TRS - ORS and ``removing_replicas`` = ORS - TRS (version 2 of the topic JSON), and the
   state znode a new leader epoch. Brokers watch both (docs/cluster.md), so the adding brokers see themselves in
   the assignment and start following, which is what Kafka's LeaderAndIsr to the new replicas achieves.
2. **Wait.** The controller watches the partition's state znode: leaders add caught-up followers to the ISR.
3. **Complete**, once every TRS member is in the ISR: the leader stays if it is in TRS and alive, otherwise the
   first live TRS member of the ISR leads; the ISR loses the removed replicas; the leader epoch grows; the
   assignment becomes TRS with no adding/removing fields. State and assignment are written in one fenced
   multi-op. A removed broker, seeing that it is no longer a replica nor in the ISR, deletes its log (the watch
   design's StopReplica(delete=true); ``Broker._delete_removed_replicas``).

A new reassignment of a partition already moving is computed from the *original* replicas of the running one,
as Kafka's ``ReplicaAssignment.reassignTo``; replicas that were being added and are no longer wanted leave the
ISR and the assignment at once. Cancelling (target None) is a reassignment back to ORS. Reassignments in flight
are nothing but the adding/removing fields of the topic znodes, so a new controller resumes them from there.

The legacy znode (what ``kafka-reassign-partitions.sh --zookeeper`` writes) starts the reassignments it lists;
each entry is removed when its partition completes and the znode deleted when none is left, as Kafka 2.6 does.
A reassignment requested through the API for a partition also listed there takes precedence and removes the
entry. Entries that cannot start (unknown partition, invalid replicas) are removed at once with a warning.

Everything here runs on the controller thread (the :class:`KafkaController` owns this object and hands it
itself as :class:`~sofakafka.controller.context.ControllerServices`); the public methods
:meth:`alter_partition_reassignments` and :meth:`list_partition_reassignments` queue their work there and wait
for it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from sofakafka.controller import zk_data, zk_paths
from sofakafka.controller.context import NO_LEADER, ControllerServices
from sofakafka.controller.state_rewrite import NotRewritten, StateRewrite
from sofakafka.controller.store import (
    BadVersionError,
    DeleteOp,
    NoNodeError,
    Op,
    SetDataOp,
    WatchedEvent,
)
from sofakafka.controller.zk_data import PartitionState, TopicAssignment, TopicPartition, ZkDataError
from sofakafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

_WRITE_ATTEMPTS = 5
T = TypeVar("T")

ReassignmentResult = tuple[ErrorCode, str | None]


@dataclass(frozen=True)
class OngoingReassignment:
    """One partition's full assignment while it moves (ListPartitionReassignments' answer)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    @property
    def origin_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding_replicas]

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing_replicas]

    def reassign_to(self, target: Sequence[int]) -> OngoingReassignment:
        """Kafka's ``reassignTo``: always measured from the original replicas, so replacing a running
        reassignment never makes a replica that is still catching up count as an original one."""
        origin = self.origin_replicas
        replicas = list(dict.fromkeys([*target, *origin]))
        return OngoingReassignment(tuple(replicas), tuple(r for r in replicas if r not in origin),
                                   tuple(r for r in replicas if r not in target))

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


def _entry_is(tp: TopicPartition, replicas: list[int]) -> Callable[[TopicPartition, list[int]], bool]:
    """Matches the legacy znode's entry for a completed partition only if it asked for what was done; an entry
    rewritten meanwhile with other replicas stays, as in Kafka."""
    return lambda p, r: p == tp and r == replicas


class ReassignmentManager:
    def __init__(self, controller: ControllerServices) -> None:
        self._controller = controller
        # Partitions whose topic znode carries adding/removing replicas (controller thread only).
        self._ongoing: dict[TopicPartition, OngoingReassignment] = {}

    # ------------------------------------------------------------------------------------- public API

    def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, Sequence[int] | None],
              timeout: float) -> dict[TopicPartition, ReassignmentResult]:
        """AlterPartitionReassignments: start, replace (a replica list) or cancel (None) each reassignment.
        Raises KafkaError(NOT_CONTROLLER) on an inactive controller, TimeoutError past ``timeout``."""
        copied = {tp: None if r is None else list(r) for tp, r in reassignments.items()}
        return self._call(lambda: self._on_alter(copied), timeout)

    def list_partition_reassignments(self, partitions: Sequence[TopicPartition] | None,
             timeout: float) -> dict[TopicPartition, OngoingReassignment]:
        """ListPartitionReassignments: the ongoing reassignments among ``partitions`` (None: all of them);
        partitions that are not moving, or do not exist, are left out, as Kafka does."""
        wanted = None if partitions is None else list(partitions)
        return self._call(lambda: self._on_list(wanted), timeout)

    def _call(self, work: Callable[[], T], timeout: float) -> T:
        def on_active_controller() -> T:
            if not self._controller.context.active:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            return work()

        return self._controller.call_on_thread(on_active_controller, timeout, "handle the reassignment",
                                               answers=(KafkaError,))

    # ------------------------------------------------------------------ hooks called by the controller

    def clear(self) -> None:
        """The controller resigned: a successor rebuilds everything from the topic znodes."""
        self._ongoing.clear()

    def on_assignment_loaded(self, topic: str, assignment: TopicAssignment) -> None:
        """The topic znode as just read: adding/removing fields are the reassignments in flight."""
        for tp in [tp for tp in self._ongoing if tp.topic == topic]:
            del self._ongoing[tp]
        for partition, replicas in assignment.partitions.items():
            ongoing = OngoingReassignment(tuple(replicas), tuple(assignment.adding_replicas.get(partition, ())),
                                          tuple(assignment.removing_replicas.get(partition, ())))
            if ongoing.is_being_reassigned:
                self._ongoing[TopicPartition(topic, partition)] = ongoing

    def forget_topic(self, topic: str) -> None:
        """The topic is gone (deleted): its moves went with it, and so do its entries in the legacy znode, which
        would otherwise stay there for ever (nothing else removes an entry that can no longer complete)."""
        for tp in [tp for tp in self._ongoing if tp.topic == topic]:
            del self._ongoing[tp]
        self._remove_from_zk_reassignment(lambda tp, _replicas: tp.topic == topic)

    def on_controller_failover(self) -> None:
        """Resume what the previous controller left moving, then what the legacy znode asks for (its
        entries win over the topic znodes, as in Kafka's ``initializePartitionReassignments``)."""
        for tp in sorted(self._ongoing):
            self._maybe_complete(tp)
        self._on_zk_reassignment()

    # ------------------------------------------------------------------------------------ API requests

    def _on_alter(self, requested: Mapping[TopicPartition, list[int] | None]) -> dict[TopicPartition, ReassignmentResult]:
        results: dict[TopicPartition, ReassignmentResult] = {}
        to_start: dict[TopicPartition, OngoingReassignment] = {}
        for tp, target in requested.items():
            error = None if target is None else self._validate(tp, target)
            if error is not None:
                results[tp] = error
                continue
            built = self._build(tp, target)
            if built is None:
                results[tp] = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
            else:
                to_start[tp] = built
        # The latest reassignment wins, whichever way it came: drop these partitions from the legacy znode.
        self._remove_from_zk_reassignment(lambda tp, _replicas: tp in to_start)
        for tp, reassignment in to_start.items():
            results[tp] = self._trigger(tp, reassignment)
        return results

    def _on_list(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, OngoingReassignment]:
        wanted = sorted(self._ongoing) if partitions is None else partitions
        return {tp: self._ongoing[tp] for tp in wanted if tp in self._ongoing}

    def _current(self, tp: TopicPartition) -> OngoingReassignment:
        ongoing = self._ongoing.get(tp)
        if ongoing is not None:
            return ongoing
        replicas = self._controller.context.assignments.get(tp.topic, {}).get(tp.partition, [])
        return OngoingReassignment(tuple(replicas), (), ())

    def _validate(self, tp: TopicPartition, target: Sequence[int]) -> ReassignmentResult | None:
        """Kafka's ``validateReplicas``: of the target's brokers only those being added must be alive."""
        if not target:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
        if any(r < 0 for r in target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(target)}"
        adding = self._current(tp).reassign_to(target).adding_replicas
        # Kafka's liveBrokerIds: registered and not in controlled shutdown (a stopping broker would never catch up).
        context = self._controller.context
        live = sorted(b for b in context.live_brokers if context.is_replica_online(b))
        if not set(adding) <= set(live):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                    f"live broker list: {live}")
        return None

    def _build(self, tp: TopicPartition, target: list[int] | None) -> OngoingReassignment | None:
        """The assignment to move to; None when cancelling a partition that is not moving."""
        current = self._current(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin_replicas if target is None else target)
        return None if target is None else current.reassign_to(target)

    def _trigger(self, tp: TopicPartition, reassignment: OngoingReassignment) -> ReassignmentResult:
        controller = self._controller
        if (tp.topic in controller.context.topics_to_delete or tp not in controller.context.partitions
                or not controller.context.assignments.get(tp.topic, {}).get(tp.partition)):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        try:
            self._start(tp, reassignment)
        except KafkaError as exc:
            return exc.code, exc.message
        return ErrorCode.NONE, None

    # ---------------------------------------------------------------------------------------- the steps

    def _start(self, tp: TopicPartition, reassignment: OngoingReassignment) -> None:
        controller = self._controller
        current = self._current(tp)
        if current != reassignment:
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            log.info("controller: reassigning %s: replicas %s -> %s (adding %s, removing %s)", tp,
                     list(current.replicas), list(reassignment.replicas), list(reassignment.adding_replicas),
                     list(reassignment.removing_replicas))
            # Without a state znode (not elected yet) the assignment is written alone: it is what the first
            # election will use. A lost race is a leader's ISR write or a CreatePartitions: read both again.
            outcome = controller.rewrite_state(tp, lambda s: self._started_state(tp, s, reassignment, unneeded),
                                                extra_ops=lambda: self._assignment_ops(tp, reassignment),
                                                write_without_state=True)
            if outcome is NotRewritten.KEPT_CHANGING:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "The partition kept changing during the reassignment.")
            self._applied(tp, reassignment)
        if reassignment.is_being_reassigned:
            self._ongoing[tp] = reassignment
        else:
            self._ongoing.pop(tp, None)  # moved back to where it was: nothing to wait for
        self._maybe_complete(tp)

    def _started_state(self, tp: TopicPartition, state: PartitionState, reassignment: OngoingReassignment,
                       unneeded: list[int]) -> PartitionState:
        """A new leader epoch for the new replica set (Kafka's A1); replicas no longer wanted (adding ones of a
        replaced reassignment) leave the ISR, and the leadership if they had it."""
        context = self._controller.context
        isr = tuple(r for r in state.isr if r not in unneeded) or state.isr
        leader = state.leader
        if leader in unneeded:
            leader = next((r for r in reassignment.replicas if context.is_replica_online(r, tp) and r in isr),
                          NO_LEADER)
        return PartitionState(leader, state.leader_epoch + 1, self._controller.context.epoch, isr)

    def _maybe_complete(self, tp: TopicPartition) -> None:
        """Finish ``tp``'s reassignment if every target replica is in the ISR; otherwise (re)arm the watch on
        its state znode, whose next change brings us back here."""
        controller = self._controller
        reassignment = self._ongoing.get(tp)
        if reassignment is None or not controller.context.active:
            return
        if tp.topic in controller.context.topics_to_delete:
            # The topic's deletion started (at once, moving or not): the move is abandoned with it. It stays
            # listed, as in Kafka, until the topic is gone; completing it now would rewrite a topic being deleted.
            return
        target = reassignment.target_replicas
        final = OngoingReassignment(tuple(target), (), ())

        def decide(state: PartitionState) -> PartitionState | None:
            if not set(target) <= set(state.isr):
                return None
            # A broker in controlled shutdown is registered but must not be handed a leadership.
            def online(broker: int) -> bool:
                return controller.context.is_replica_online(broker, tp)

            if state.leader in target and online(state.leader):
                leader = state.leader
            else:
                leader = next((r for r in target if online(r) and r in state.isr), NO_LEADER)
                if leader == NO_LEADER:
                    return None  # no live target replica: wait for one to come back
            return PartitionState(leader, state.leader_epoch + 1, controller.context.epoch,
                                  tuple(r for r in state.isr if r in target))

        # State and assignment in one multi-op: brokers never see the final leader with the moving assignment.
        outcome = controller.rewrite_state(tp, decide, extra_ops=lambda: self._assignment_ops(tp, final),
                                            watch=self._isr_watch)
        if outcome is NotRewritten.KEPT_CHANGING:
            log.warning("controller: the state of %s kept changing; the reassignment completes on its next change",
                        tp)
        if not isinstance(outcome, StateRewrite):
            return
        self._applied(tp, final)
        del self._ongoing[tp]
        log.info("controller: reassignment of %s complete: replicas %s, leader %d (epoch %d), removed %s",
                 tp, target, outcome.new.leader, outcome.new.leader_epoch, list(reassignment.removing_replicas))
        self._remove_from_zk_reassignment(_entry_is(tp, target))

    def _isr_watch(self, event: WatchedEvent) -> None:
        """Store event thread: only queue the check."""
        parts = event.path.split("/")  # /brokers/topics/<t>/partitions/<p>/state
        with contextlib.suppress(IndexError, ValueError):
            tp = TopicPartition(parts[3], int(parts[5]))
            self._controller.post(lambda: self._maybe_complete(tp))

    # ---------------------------------------------------------------------------------------- znodes

    def _assignment_ops(self, tp: TopicPartition, reassignment: OngoingReassignment) -> list[Op]:
        """Rewrite the topic znode with this partition's entry replaced, conditioned on the version read, so a
        concurrent CreatePartitions is never overwritten."""
        store = self._controller.store
        path = zk_paths.topic_path(tp.topic)
        raw, stat = store.get(path)
        current = TopicAssignment.decode(tp.topic, raw)

        def replaced(m: Mapping[int, Sequence[int]], value: Sequence[int]) -> dict[int, list[int]]:
            out = {p: list(r) for p, r in m.items() if p != tp.partition}
            if value:
                out[tp.partition] = list(value)
            return out

        updated = TopicAssignment(replaced(current.partitions, reassignment.replicas),
                                  replaced(current.adding_replicas, reassignment.adding_replicas),
                                  replaced(current.removing_replicas, reassignment.removing_replicas))
        return [SetDataOp(path, updated.encode(), stat.version)]

    def _applied(self, tp: TopicPartition, reassignment: OngoingReassignment) -> None:
        """The assignment just written, in the context (the state's cache follows in ``rewrite_state``)."""
        self._controller.context.assignments.setdefault(tp.topic, {})[tp.partition] = list(reassignment.replicas)

    # ------------------------------------------------------------------- /admin/reassign_partitions

    def _zk_watch(self, _event: WatchedEvent) -> None:
        self._controller.post(self._on_zk_reassignment)

    def _on_zk_reassignment(self) -> None:
        controller = self._controller
        if not controller.context.active:
            return
        store = controller.store
        if store.exists(zk_paths.REASSIGN_PARTITIONS_PATH, self._zk_watch) is None:
            return
        try:
            raw, _ = store.get(zk_paths.REASSIGN_PARTITIONS_PATH)
            requested = zk_data.decode_reassignment(raw)
        except NoNodeError:
            return
        except ZkDataError as exc:
            log.warning("controller: ignoring unreadable %s: %s", zk_paths.REASSIGN_PARTITIONS_PATH, exc)
            self._delete_zk_reassignment()
            return
        failed: set[TopicPartition] = set()
        for tp, target in sorted(requested.items()):
            if self._ongoing.get(tp) == self._current(tp).reassign_to(target):
                continue  # already moving there (our own rewrite of the znode fired the watch): nothing to check
            result = self._validate(tp, target)
            if result is None:
                built = self._build(tp, target)
                assert built is not None
                result = self._trigger(tp, built)
            if result[0] != ErrorCode.NONE:
                log.warning("controller: reassignment of %s through %s failed: %s %s", tp,
                            zk_paths.REASSIGN_PARTITIONS_PATH, result[0].name, result[1] or "")
                failed.add(tp)
        if failed:
            self._remove_from_zk_reassignment(lambda tp, _replicas: tp in failed)

    def _remove_from_zk_reassignment(self, should_remove: Callable[[TopicPartition, list[int]], bool]) -> None:
        """Kafka's ``maybeRemoveFromZkReassignment``: rewrite the znode without the matching entries, or delete
        it when none is left (so a later tool run can create it again)."""
        controller = self._controller
        store = controller.store
        for _ in range(_WRITE_ATTEMPTS):
            try:
                raw, stat = store.get(zk_paths.REASSIGN_PARTITIONS_PATH)
            except NoNodeError:
                return
            try:
                listed = zk_data.decode_reassignment(raw)
            except ZkDataError:
                self._delete_zk_reassignment()
                return
            kept = {tp: r for tp, r in listed.items() if not should_remove(tp, r)}
            if len(kept) == len(listed):
                return
            op: Op
            if kept:
                op = SetDataOp(zk_paths.REASSIGN_PARTITIONS_PATH, zk_data.encode_reassignment(kept), stat.version)
            else:
                log.info("controller: no more partitions to reassign; deleting %s", zk_paths.REASSIGN_PARTITIONS_PATH)
                op = DeleteOp(zk_paths.REASSIGN_PARTITIONS_PATH, stat.version)
            try:
                controller.fenced([op])
            except (BadVersionError, NoNodeError):
                continue
            return

    def _delete_zk_reassignment(self) -> None:
        with contextlib.suppress(NoNodeError):
            self._controller.fenced([DeleteOp(zk_paths.REASSIGN_PARTITIONS_PATH)])
