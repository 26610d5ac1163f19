"""The controller's in-memory context, and what the controller's duties are given.

:class:`~sofakafka.controller.kafka_controller.KafkaController` runs every event on one thread; the duties it
delegates to (reassignment.py, controlled_shutdown.py, admin_notifications.py) run on that thread too. They see
the controller only through :class:`ControllerServices`, the one interface the controller gives them, so none of
them imports kafka_controller.py (an import-linter contract keeps it so) and none reaches into its private
state:

* :class:`ControllerContext` (Kafka's ``ControllerContext``): what the controller knows of the cluster (live
  brokers, assignments, partition states, topics being deleted, ...). The controller and its duties read and
  update it on the controller thread only; everything in it is rebuilt from the tree when a controller takes
  over.
* the writes: :meth:`ControllerServices.fenced` (a multi-op applied only while our epoch is current) and
  :meth:`ControllerServices.rewrite_state` (read, decide, write a partition's state znode, again on a lost race);
* the thread: :meth:`ControllerServices.post` and :meth:`ControllerServices.call_on_thread`, and the
  controller's own store watch (:meth:`ControllerServices.watch`);
* the other duties a duty may set off: an election, resuming topic deletions.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from sofakafka.controller.state_rewrite import STATE_WRITE_ATTEMPTS, NotRewritten, StateRewrite
from sofakafka.controller.store import MetadataStore, Op, WatchCallback, WatchedEvent
from sofakafka.controller.zk_data import PartitionState, TopicPartition
from sofakafka.protocol.errors import ErrorCode

T = TypeVar("T")
R = TypeVar("R")

INITIAL_CONTROLLER_EPOCH = 0
NO_LEADER = -1


class ElectionType(enum.IntEnum):
    """ElectLeaders' ``election_type`` (v1+; v0 means PREFERRED)."""

    PREFERRED = 0
    UNCLEAN = 1


ElectionResult = tuple[ErrorCode, str | None]


@dataclass
class PartitionContext:
    state: PartitionState | None
    zk_version: int  # of the state znode, -1 when there is none yet


@dataclass
class ControllerContext:
    """What the controller knows of the cluster; touched only on the controller thread."""

    active: bool = False
    epoch: int = INITIAL_CONTROLLER_EPOCH
    epoch_zk_version: int = -1
    live_brokers: dict[int, int] = field(default_factory=dict)  # broker id -> broker epoch (czxid)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionContext] = field(default_factory=dict)
    offline: set[TopicPartition] = field(default_factory=set)  # elections that found no eligible leader
    shutting_down: set[int] = field(default_factory=set)  # in controlled shutdown: registered, but elected nowhere
    # Kafka's replicasOnOfflineDirs: replicas a live broker cannot serve because their log dir failed
    # (/log_dir_event_notification; the broker lists them under /sofakafka/log_dir_failures/<id>).
    offline_dir_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    deletion_pending: dict[str, set[tuple[int, int]]] = field(default_factory=dict)  # topic -> {(broker, partition)}
    deletion_done: dict[str, set[tuple[int, int]]] = field(default_factory=dict)

    def replicas(self, tp: TopicPartition) -> list[int]:
        """``tp``'s assigned replicas, preferred first; empty for a partition we do not know."""
        return self.assignments.get(tp.topic, {}).get(tp.partition, [])

    def preferred(self, tp: TopicPartition) -> int:
        replicas = self.replicas(tp)
        return replicas[0] if replicas else NO_LEADER

    def is_replica_online(self, broker: int, tp: TopicPartition | None = None) -> bool:
        """Kafka's ``isReplicaOnline``: registered, not in controlled shutdown and, for ``tp``, not in a failed
        log dir of the broker. A shutting-down broker still serves until it exits, but electing it (leader or
        ISR) would hand it work it is about to drop."""
        return (broker in self.live_brokers and broker not in self.shutting_down
                and (tp is None or tp not in self.offline_dir_replicas.get(broker, ())))

    def leader_serves(self, tp: TopicPartition, leader: int) -> bool:
        """``leader`` is registered and ``tp``'s log on it is not in a failed dir (a leader in controlled
        shutdown still serves until it hands the partition over)."""
        return leader in self.live_brokers and tp not in self.offline_dir_replicas.get(leader, ())

    def forget(self) -> None:
        """No longer the controller: a successor rebuilds all of this from the tree."""
        self.active = False
        self.live_brokers.clear()
        self.assignments.clear()
        self.partitions.clear()
        self.offline.clear()
        self.shutting_down.clear()
        self.offline_dir_replicas.clear()
        self.topics_to_delete.clear()
        self.deletion_pending.clear()
        self.deletion_done.clear()


class ControllerServices(Protocol):
    """What the controller gives its duties; every member is for the controller thread unless it says otherwise."""

    @property
    def context(self) -> ControllerContext: ...

    @property
    def store(self) -> MetadataStore: ...

    # -- the thread ---------------------------------------------------------------------------------------------
    def post(self, task: Callable[[], None]) -> None:
        """Queue ``task`` for the controller thread (any thread; dropped once the controller stopped)."""
        ...

    def call_on_thread(self, work: Callable[[], T], timeout: float, what: str,
                       answers: tuple[type[BaseException], ...] = ()) -> T:
        """Run ``work`` on the controller thread and wait for its result (request threads)."""
        ...

    def watch(self, event: WatchedEvent) -> None:
        """The controller's own store watch: a znode armed with it brings the controller's handling back."""
        ...

    # -- writes -------------------------------------------------------------------------------------------------
    def fenced(self, ops: Sequence[Op]) -> None:
        """Apply ``ops`` in one multi-op only while our controller epoch is the current one (else
        ControllerMovedError, and the controller resigns)."""
        ...

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
        """Read ``tp``'s state znode, ``decide`` on it, write the decision conditioned on the version read, and
        decide again on a lost race (KafkaController.rewrite_state says it all)."""
        ...

    def refresh_state(self, tp: TopicPartition, partition: PartitionContext) -> None:
        """Read ``tp``'s state znode into ``partition`` (leaders change the ISR without telling us)."""
        ...

    def refresh_states(self, partitions: Sequence[tuple[TopicPartition, PartitionContext]]) -> None:
        """``refresh_state`` for many partitions, their znodes read at once."""
        ...

    # -- other duties -------------------------------------------------------------------------------------------
    def run_election(self, partitions: list[TopicPartition] | None,
                     election_type: ElectionType) -> dict[TopicPartition, ElectionResult]:
        """An election of ``election_type`` for ``partitions`` (None: every partition that needs one)."""
        ...

    def resume_deletions(self) -> None:
        """Carry on deleting the topics marked for deletion (asking again the replicas not yet deleted)."""
        ...

    def update_offline_replicas(self, broker_id: int, partitions: set[TopicPartition]) -> None:
        """``broker_id`` (live, at the epoch it published them for) cannot serve ``partitions``: their log dir
        failed. Newly offline ones lose their leadership there and the broker's ISR places."""
        ...
