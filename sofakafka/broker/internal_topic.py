"""What the group coordinator's ``__consumer_offsets`` (offsets_topic.py) and the transaction coordinator's
``__transaction_state`` (transaction_topic.py) share: creating the topic on first use, and appending to it.

* :func:`create_internal_topic` is Kafka 2.6's ``createInternalTopic``: the first FindCoordinator that needs the
  topic creates it; with fewer live brokers than its replication factor creation is refused and logged with
  Kafka's words. Either way the asking client is answered COORDINATOR_NOT_AVAILABLE and asks again once the
  partitions have leaders.
* :class:`InternalTopicAppender` appends a coordinator's batches through the replica manager as an internal
  client, in the order the coordinator issued them, and answers each on the event loop with its error code.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sofakafka.broker.context import CoordinatorContext
from sofakafka.broker.replica_manager import ReplicaManager
from sofakafka.controller.topics import NewTopic
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.storage.producer_state import AppendOrigin

log = logging.getLogger(__name__)

# Produce v8 accepts every codec (zstd needs v7+) and is what a 2.6 broker's own appends correspond to.
INTERNAL_PRODUCE_VERSION = 8


async def create_internal_topic(ctx: CoordinatorContext, new: NewTopic, *, description: str,
                                replication_factor_key: str, requested_by: str | None) -> ErrorCode:
    """Create ``new`` unless too few brokers are alive for its replication factor (``description`` and
    ``replication_factor_key`` name the topic and its config in the log line); the answer for the asking client."""
    alive = len(ctx.metadata().alive_broker_ids())
    if alive < new.replication_factor:
        log.error("Number of alive brokers '%d' does not meet the required replication factor '%d' for the %s "
                  "(configured via '%s'). This error can be ignored if the cluster is starting up and not all "
                  "brokers are up yet.", alive, new.replication_factor, description, replication_factor_key)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    admin = ctx.topic_admin
    try:
        created = await ctx.run_blocking(lambda: admin.create_topic(new))
        log.info("created %s with %d partitions, replication factor %d (first requested by %s)",
                 new.name, created.num_partitions, created.replication_factor, requested_by)
    except KafkaError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("creating %s failed: %s", new.name, exc)
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


class InternalTopicAppender:
    """One batch per call to a partition of ``topic``, answered on the loop; ``close`` lets issued appends finish."""

    def __init__(self, replica_manager: Callable[[], ReplicaManager], topic: str) -> None:
        self._replica_manager = replica_manager
        self._topic = topic
        # Tasks are kept referenced until they finish: the loop holds only weak references to them.
        self._in_flight: set[asyncio.Task[None]] = set()
        self.closed = False

    def append(self, partition: int, batch: bytes, done: Callable[[ErrorCode], None], *, acks: int,
               timeout_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        if self.closed:
            done(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        # Tasks start in creation order and each submits its append to the single append thread on its first
        # step, so the coordinator's appends reach the log in the order it issued them.
        task = asyncio.get_running_loop().create_task(self._append(partition, batch, done, acks, timeout_ms, origin))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _append(self, partition: int, batch: bytes, done: Callable[[ErrorCode], None], acks: int,
                      timeout_ms: int, origin: AppendOrigin) -> None:
        tp = (self._topic, partition)
        try:
            results = await self._replica_manager().append_records(
                acks=acks, timeout_ms=timeout_ms, entries=[(tp, batch)], produce_version=INTERNAL_PRODUCE_VERSION,
                origin=origin)
            result = results[tp]
            code = ErrorCode.for_code(result.error_code)
            if code is not ErrorCode.NONE:
                log.warning("appending to %s-%d failed: %s %s", tp[0], partition, code.name,
                            result.error_message or "")
        except asyncio.CancelledError:
            done(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            raise
        except Exception:
            log.exception("appending to %s-%d failed", tp[0], partition)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        done(code)

    async def close(self) -> None:
        """Let appends already issued finish (whoever waits gets the answer), refuse new ones."""
        self.closed = True
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
