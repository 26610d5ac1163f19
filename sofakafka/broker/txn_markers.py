"""Transaction markers and partition verification between brokers.

Three parts, all on the event loop (blocking socket work goes to a small thread pool):

* :func:`write_markers` is the partition leader's side of WriteTxnMarkers: COMMIT/ABORT control batches
  appended with acks=all through the replica manager; a marker in ``__consumer_offsets`` also settles the
  transactional offset commits it decides (the group runtime's ``on_txn_marker``, handed in by the broker), as
  Kafka's ``handleWriteTxnMarkersRequest`` does. The WriteTxnMarkers handler and the coordinator's own partitions
  use it (through the runtime in transaction_topic.py).
* :class:`MarkerSender` is the coordinator's :class:`~sofakafka.broker.txn.MarkerChannel`: it groups a
  transaction's partitions by their leader in the metadata cache, writes those this broker leads directly, and
  sends the rest as WriteTxnMarkers v0 over the inter-broker listener (Kafka's TransactionMarkerChannelManager).
  A partition whose topic no longer exists needs no marker (NONE); one without a leader is answered
  NOT_LEADER_OR_FOLLOWER, so the coordinator tries again after its backoff.
* :class:`TxnVerifier` asks a transactional id's coordinator whether partitions are in the producer's ongoing
  transaction (sofakafka's VerifyTxnPartitions, sofakafka/protocol/internal.py), or the local coordinator directly.

All three see the broker as a :class:`~sofakafka.broker.context.CoordinatorContext`.

Per destination broker one request is in flight at a time over one connection; whatever queued meanwhile goes
together in the next request, so a burst of transactions costs one round trip, not one each.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from sofakafka.broker.context import CoordinatorContext
from sofakafka.broker.controlled_shutdown import inter_broker_connection
from sofakafka.broker.offsets_topic import GROUP_METADATA_TOPIC
from sofakafka.broker.replica_manager import MarkerEntry, ProducePartitionResult, TopicPartition
from sofakafka.broker.txn import TRANSACTION_STATE_TOPIC, TxnMarkers, partition_for
from sofakafka.client import BrokerConnection, ClientError
from sofakafka.protocol.errors import DecodeError, ErrorCode, KafkaError
from sofakafka.protocol.internal import VerifyTxnPartitionsRequest, VerifyTxnPartitionsResponse
from sofakafka.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from sofakafka.protocol.schema import Request, Response

log = logging.getLogger(__name__)

E = ErrorCode

OffsetsMarkerListener = Callable[[int, int, bool, int], None]
"""(producer id, ``__consumer_offsets`` partition, commit, the marker's offset): the group side of a marker."""
MarkerCodes = Callable[[list[ErrorCode]], None]
LocalMarkerWriter = Callable[[Sequence[MarkerEntry], MarkerCodes], None]
LocalVerifier = Callable[[str, int, int, Sequence[TopicPartition]], dict[TopicPartition, ErrorCode]]

Item = TypeVar("Item")
R = TypeVar("R")


def write_markers(ctx: CoordinatorContext, markers: Sequence[MarkerEntry], on_offsets_marker: OffsetsMarkerListener,
                  done: MarkerCodes) -> None:
    """Append the markers as leader (acks=all, ``request.timeout.ms``), queued on the append thread within the
    call; ``done`` gets one error code per entry, in order."""
    if not markers:
        done([])
        return

    def written(results: list[ProducePartitionResult]) -> None:
        codes = [ErrorCode.for_code(r.error_code) for r in results]
        for (tp, producer_id, _, _, commit), code, result in zip(markers, codes, results, strict=True):
            if tp[0] == GROUP_METADATA_TOPIC and code is E.NONE:
                on_offsets_marker(producer_id, tp[1], commit, result.base_offset)
        done(codes)

    ctx.replica_manager.append_txn_markers_then(markers, ctx.config.get_int("request.timeout.ms"), written)


class _Destination(Generic[Item, R]):
    def __init__(self) -> None:
        self.queue: list[tuple[Item, asyncio.Future[R]]] = []
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.connection: BrokerConnection | None = None


class BatchingSender(Generic[Item, R]):
    """Requests to other brokers, one in flight per destination, batching what queues meanwhile.

    ``build`` makes one request of queued items, ``parse`` splits its response back into one result per item,
    ``failed`` is an item's result when the request could not be sent or answered.
    """

    def __init__(self, ctx: CoordinatorContext, name: str, *, build: Callable[[list[Item]], Request],
                 parse: Callable[[Response, list[Item]], list[R]], failed: Callable[[Item, ErrorCode], R],
                 executor: ThreadPoolExecutor) -> None:
        self._ctx = ctx
        self._name = name
        self._build = build
        self._parse = parse
        self._failed = failed
        self._executor = executor
        self._destinations: dict[int, _Destination[Item, R]] = {}
        self._closed = False

    async def send(self, broker_id: int, item: Item) -> R:
        if self._closed:
            return self._failed(item, E.BROKER_NOT_AVAILABLE)
        dest = self._destinations.get(broker_id)
        if dest is None:
            dest = self._destinations[broker_id] = _Destination()
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        dest.queue.append((item, future))
        dest.wake.set()
        if dest.task is None or dest.task.done():
            dest.task = asyncio.get_running_loop().create_task(self._run(broker_id, dest),
                                                               name=f"{self._name} to broker {broker_id}")
        return await future

    async def _run(self, broker_id: int, dest: _Destination[Item, R]) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            if not dest.queue:
                dest.wake.clear()
                try:
                    await asyncio.wait_for(dest.wake.wait(), 60.0)
                except TimeoutError:
                    if not dest.queue:
                        break  # idle: the connection goes, the task ends, the next send starts both again
                continue
            batch, dest.queue = dest.queue, []
            items = [item for item, _ in batch]
            try:
                request = self._build(items)
                response = await loop.run_in_executor(self._executor, self._round_trip, broker_id, dest, request)
                results = self._parse(response, items)
            except (ClientError, KafkaError, DecodeError, OSError) as exc:
                log.info("%s to broker %d failed: %s", self._name, broker_id, exc)
                results = [self._failed(item, E.NETWORK_EXCEPTION) for item in items]
            except Exception:
                log.exception("%s to broker %d failed", self._name, broker_id)
                results = [self._failed(item, E.UNKNOWN_SERVER_ERROR) for item in items]
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)
        connection, dest.connection = dest.connection, None
        if connection is not None:
            await loop.run_in_executor(self._executor, connection.close)
        for item, future in dest.queue:
            if not future.done():
                future.set_result(self._failed(item, E.BROKER_NOT_AVAILABLE))
        dest.queue = []

    def _round_trip(self, broker_id: int, dest: _Destination[Item, R], request: Request) -> Response:
        """Blocking, on the executor: one request over the destination's connection (opened as needed)."""
        ctx = self._ctx
        timeout_s = ctx.config.get_int("request.timeout.ms") / 1000.0
        if dest.connection is None:
            dest.connection = inter_broker_connection(ctx.metadata(), broker_id,
                                                      ctx.config.inter_broker_listener_name,
                                                      client_id=f"broker-{ctx.broker_id}-txn", timeout_s=timeout_s,
                                                      security=ctx.inter_broker_security)
            if dest.connection is None:
                raise KafkaError(E.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not registered")
        try:
            return dest.connection.send(request, 0, timeout_s=timeout_s)
        except BaseException:
            connection, dest.connection = dest.connection, None
            if connection is not None:
                connection.close()
            raise

    async def close(self) -> None:
        self._closed = True
        tasks = [d.task for d in self._destinations.values() if d.task is not None]
        for d in self._destinations.values():
            d.wake.set()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


# -- markers ----------------------------------------------------------------------------------------------------------

def _markers_request(items: list[TxnMarkers]) -> Request:
    M = WriteTxnMarkersRequest.WritableTxnMarker
    out = []
    for m in items:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(m.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(M(producer_id=m.producer_id, producer_epoch=m.producer_epoch, transaction_result=m.commit,
                     coordinator_epoch=m.coordinator_epoch,
                     topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]))
    return WriteTxnMarkersRequest(markers=out)


def _markers_results(response: Response, items: list[TxnMarkers]) -> list[dict[TopicPartition, ErrorCode]]:
    assert isinstance(response, WriteTxnMarkersResponse)
    by_producer: dict[int, dict[TopicPartition, ErrorCode]] = {}
    for marker in response.markers:
        errors = by_producer.setdefault(marker.producer_id, {})
        for topic in marker.topics:
            for p in topic.partitions:
                errors[(topic.name, p.partition_index)] = ErrorCode.for_code(p.error_code)
    out = []
    for m in items:
        errors = by_producer.get(m.producer_id, {})
        out.append({tp: errors.get(tp, E.UNKNOWN_SERVER_ERROR) for tp in m.partitions})
    return out


class MarkerSender:
    """The transaction coordinator's MarkerChannel on a broker."""

    def __init__(self, ctx: CoordinatorContext, write_local: LocalMarkerWriter, executor: ThreadPoolExecutor) -> None:
        self._ctx = ctx
        self._write_local = write_local
        self._remote: BatchingSender[TxnMarkers, dict[TopicPartition, ErrorCode]] = BatchingSender(
            ctx, "WriteTxnMarkers", build=_markers_request, parse=_markers_results,
            failed=lambda m, error: dict.fromkeys(m.partitions, error), executor=executor)
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight: set[asyncio.Future[None]] = set()

    def send(self, markers: TxnMarkers, done: Callable[[Mapping[TopicPartition, ErrorCode]], None]) -> None:
        """The partitions this broker leads are written within the call (one append-thread job for all of them);
        each other leader gets one WriteTxnMarkers; ``done`` once every part has answered."""
        snap = self._ctx.metadata()
        results: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, set[TopicPartition]] = {}
        for tp in markers.partitions:
            p = snap.partition(*tp)
            if p is None:
                log.info("%s-%d no longer exists: no marker for %s needed", tp[0], tp[1], markers.transactional_id)
                results[tp] = E.NONE
            elif p.leader < 0:
                results[tp] = E.NOT_LEADER_OR_FOLLOWER
            else:
                by_leader.setdefault(p.leader, set()).add(tp)
        waiting = len(by_leader)
        if not waiting:
            done(results)
            return
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._in_flight.add(finished)

        def part_done(outcome: Mapping[TopicPartition, ErrorCode]) -> None:
            nonlocal waiting
            results.update(outcome)
            waiting -= 1
            if waiting == 0:
                self._in_flight.discard(finished)
                finished.set_result(None)
                done(results)

        for leader, tps in by_leader.items():
            if leader == self._ctx.broker_id:
                entries = [(tp, markers.producer_id, markers.producer_epoch, markers.coordinator_epoch,
                            markers.commit) for tp in sorted(tps)]
                def local_done(codes: list[ErrorCode], entries: list[MarkerEntry] = entries) -> None:
                    part_done({entry[0]: code for entry, code in zip(entries, codes, strict=True)})

                try:
                    self._write_local(entries, local_done)
                except Exception:
                    log.exception("writing the markers of %s failed", markers.transactional_id)
                    part_done(dict.fromkeys(tps, E.UNKNOWN_SERVER_ERROR))
            else:
                part = TxnMarkers(markers.transactional_id, markers.producer_id, markers.producer_epoch,
                                  markers.coordinator_epoch, markers.commit, frozenset(tps))
                task = asyncio.get_running_loop().create_task(self._remote_part(leader, part, part_done))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _remote_part(self, leader: int, part: TxnMarkers,
                           part_done: Callable[[Mapping[TopicPartition, ErrorCode]], None]) -> None:
        try:
            outcome: Mapping[TopicPartition, ErrorCode] = await self._remote.send(leader, part)
        except Exception:
            log.exception("writing the markers of %s to broker %d failed", part.transactional_id, leader)
            outcome = dict.fromkeys(part.partitions, E.UNKNOWN_SERVER_ERROR)
        part_done(outcome)

    async def close(self) -> None:
        await self._remote.close()
        if self._tasks or self._in_flight:
            await asyncio.gather(*self._tasks, *self._in_flight, return_exceptions=True)


# -- verification -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Verify:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]


def _verify_request(items: list[_Verify]) -> Request:
    T = VerifyTxnPartitionsRequest.Transaction
    out = []
    for v in items:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in v.partitions:
            by_topic.setdefault(topic, []).append(partition)
        out.append(T(transactional_id=v.transactional_id, producer_id=v.producer_id, producer_epoch=v.producer_epoch,
                     topics=[T.Topic(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return VerifyTxnPartitionsRequest(transactions=out)


def _verify_results(response: Response, items: list[_Verify]) -> list[dict[TopicPartition, ErrorCode]]:
    assert isinstance(response, VerifyTxnPartitionsResponse)
    if response.error_code != E.NONE:
        code = ErrorCode.for_code(response.error_code)
        return [dict.fromkeys(v.partitions, code) for v in items]
    # One entry per transaction of the request, in order (the same id may be asked twice in one batch).
    out = []
    for i, v in enumerate(items):
        errors: dict[TopicPartition, ErrorCode] = {}
        if i < len(response.results):
            for topic in response.results[i].topics:
                for p in topic.partitions:
                    errors[(topic.name, p.partition_index)] = ErrorCode.for_code(p.error_code)
        out.append({tp: errors.get(tp, E.UNKNOWN_SERVER_ERROR) for tp in v.partitions})
    return out


class TxnVerifier:
    """Asks a transactional id's coordinator whether partitions are in the producer's ongoing transaction."""

    def __init__(self, ctx: CoordinatorContext, local: LocalVerifier, executor: ThreadPoolExecutor) -> None:
        self._ctx = ctx
        self._local = local
        self._remote: BatchingSender[_Verify, dict[TopicPartition, ErrorCode]] = BatchingSender(
            ctx, "VerifyTxnPartitions", build=_verify_request, parse=_verify_results,
            failed=lambda v, error: dict.fromkeys(v.partitions, error), executor=executor)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        snap = self._ctx.metadata()
        topic = snap.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            return dict.fromkeys(partitions, E.COORDINATOR_NOT_AVAILABLE)
        p = topic.partitions.get(partition_for(transactional_id, len(topic.partitions)))
        if p is None or p.leader < 0:
            return dict.fromkeys(partitions, E.COORDINATOR_NOT_AVAILABLE)
        if p.leader == self._ctx.broker_id:
            return self._local(transactional_id, producer_id, producer_epoch, partitions)
        return await self._remote.send(p.leader, _Verify(transactional_id, producer_id, producer_epoch,
                                                         tuple(partitions)))

    async def close(self) -> None:
        await self._remote.close()
