"""Controlled shutdown on the controller's side: move a stopping broker's work away before it goes.

A broker that is about to stop cleanly sends ControlledShutdown(broker id, broker epoch) to the controller
(sofakafka/broker/controlled_shutdown.py). Without it, the cluster would learn of the broker's departure only
when its registration disappears, and every partition it led would be without a leader between the moment it
stopped serving and that moment; with it, leadership moves while the broker still serves, so producers meet
at most a NOT_LEADER_OR_FOLLOWER and a metadata refresh. Kafka 2.6's ``doControlledShutdown``, on our state
znodes:

* The broker is marked **shutting down**: it stays registered (it still serves and replicates until it exits)
  but no election picks it again (:meth:`ControllerContext.is_replica_online`), until it leaves or
  re-registers with a new broker epoch.
* Only partitions with more than one replica are touched: a single replica has nowhere to go, and reporting it
  would only make the broker retry in vain (Kafka leaves them out of the answer too).
* A partition it **leads** gets the first replica of its assignment that is online and in the ISR
  (Kafka's ControlledShutdownLeaderElection), with the ISR minus every shutting-down broker and the leader
  epoch bumped. None found: the broker keeps leading it.
* A partition it **follows** loses it from the ISR, never emptying the ISR (the last member stays as the
  record a later election needs), leader epoch bumped, as Kafka's OfflineReplica transition does. The leader
  then computes its high watermark without it, so acks=all does not wait for a replica about to vanish.
* The answer is the replicated partitions it still leads (``remaining_partitions``): the broker retries while
  there are some.

Each state write is conditioned on the znode version just read, because leaders change the ISR themselves; a
lost race reads again and decides again (:meth:`ControllerServices.rewrite_state`); a partition that keeps changing
is reported as remaining, and the broker's retry covers the rest.

Public API (called on the controller thread through :meth:`KafkaController.controlled_shutdown`)::

    do_controlled_shutdown(controller, broker_id, broker_epoch) -> list[TopicPartition]   # remaining
    ControlledShutdownError(code, message)                 # NOT_CONTROLLER, STALE_BROKER_EPOCH, ...
    controlled_shutdown_leader(replicas, isr, online) -> int | None
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from sofakafka.controller.context import ControllerServices
from sofakafka.controller.state_rewrite import NotRewritten, StateRewrite
from sofakafka.controller.zk_data import PartitionState, TopicPartition
from sofakafka.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

UNKNOWN_BROKER_EPOCH = -1
"""What a v0/v1 request (which has no broker epoch) or an old broker sends: not checked, as in Kafka."""


class ControlledShutdownError(Exception):
    """The request failed as a whole; ``code`` goes into the response's top-level error."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def controlled_shutdown_leader(replicas: Sequence[int], isr: Sequence[int],
                               online: Callable[[int], bool]) -> int | None:
    """Kafka's ControlledShutdownLeaderElection: the first assigned replica that is online (registered and not
    shutting down) and in the ISR; None when there is none."""
    return next((r for r in replicas if online(r) and r in isr), None)


def do_controlled_shutdown(controller: ControllerServices, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
    """Move ``broker_id``'s leaderships and ISR places away; returns the replicated partitions it still leads.
    Runs on the controller thread."""
    c = controller
    if not c.context.active:
        raise ControlledShutdownError(ErrorCode.NOT_CONTROLLER,
                                      "Controller moved to another broker. Aborting controlled shutdown")
    cached_epoch = c.context.live_brokers.get(broker_id)
    if cached_epoch is None:
        raise ControlledShutdownError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker id {broker_id} does not exist.")
    # An epoch newer than ours means the broker re-registered and we have not processed it yet: not stale.
    if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < cached_epoch:
        raise ControlledShutdownError(
            ErrorCode.STALE_BROKER_EPOCH,
            f"Received controlled shutdown request from an old broker epoch {broker_epoch} for broker "
            f"{broker_id}. Current broker epoch is {cached_epoch}.")
    log.info("controller: shutting down broker %d", broker_id)
    c.context.shutting_down.add(broker_id)
    for tp in _partitions_to_act_on(c, broker_id):
        _move_away(c, tp, broker_id)
    remaining = [tp for tp in _partitions_to_act_on(c, broker_id)
                 if (state := c.context.partitions[tp].state) is not None and state.leader == broker_id]
    log.info("controller: controlled shutdown of broker %d leaves %d partition(s) it still leads%s", broker_id,
             len(remaining), f": {[f'{tp.topic}-{tp.partition}' for tp in remaining[:10]]}" if remaining else "")
    return remaining


def _partitions_to_act_on(c: ControllerServices, broker_id: int) -> list[TopicPartition]:
    """Partitions with a state, more than one replica, one of them ``broker_id``, and not being deleted."""
    return [tp for tp, ctx in sorted(c.context.partitions.items())
            if ctx.state is not None and tp.topic not in c.context.topics_to_delete
            and broker_id in (replicas := c.context.assignments.get(tp.topic, {}).get(tp.partition, []))
            and len(replicas) > 1]


def _move_away(c: ControllerServices, tp: TopicPartition, broker_id: int) -> None:
    replicas = c.context.assignments.get(tp.topic, {}).get(tp.partition, [])

    def decide(old: PartitionState) -> PartitionState | None:
        if old.leader == broker_id:
            leader = controlled_shutdown_leader(replicas, old.isr, lambda r: c.context.is_replica_online(r, tp))
            if leader is None:
                return None  # stays with the broker: reported as remaining
            isr = tuple(r for r in old.isr if r not in c.context.shutting_down)
        elif broker_id in old.isr and len(old.isr) > 1:
            leader, isr = old.leader, tuple(r for r in old.isr if r != broker_id)
        else:
            return None
        return PartitionState(leader, old.leader_epoch + 1, c.context.epoch, isr)

    outcome = c.rewrite_state(tp, decide)
    if isinstance(outcome, StateRewrite):
        old, new = outcome.old, outcome.new
        log.info("controller: controlled shutdown of broker %d: %s leader %d -> %d, isr %s -> %s (epoch %d)",
                 broker_id, tp, old.leader, new.leader, list(old.isr), list(new.isr), new.leader_epoch)
    elif outcome is NotRewritten.KEPT_CHANGING:
        log.warning("controller: the state of %s kept changing during the controlled shutdown of broker %d", tp,
                    broker_id)
