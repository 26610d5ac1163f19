"""A transaction coordinator on hand-driven time, with ``__transaction_state`` and the partition leaders in memory.

The log is real in the sense that matters: what the coordinator appended is what a reload replays, and a failed
append writes nothing. The marker channel plays every partition leader: it records which markers reached which
partition, answers the errors a test injects, and delivers results only when the test says so (``deliver``) or
at once (``auto``), so a test can hold markers "in flight" as long as it likes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sofakafka.broker.group.runtime import Completion, ManualTime
from sofakafka.broker.txn import TransactionCoordinator, TxnConfig, TxnMarkers
from sofakafka.broker.txn.state import TopicPartition
from sofakafka.protocol.errors import ErrorCode

NUM_PARTITIONS = 4
TIMEOUT_MS = 60_000


class MemoryTxnLog:
    """``__transaction_state`` in memory: (key, value) per partition; ``fail_next`` fails the next append."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes | None, bytes | None]]] = defaultdict(list)
        self.fail_next: ErrorCode | None = None
        self.hold = False
        self.held: list[Callable[[], None]] = []
        self.appends = 0

    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int,
               done: Callable[[ErrorCode], None]) -> None:
        self.appends += 1
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            done(error)
            return

        def write() -> None:
            self.partitions[partition].extend(records)
            done(ErrorCode.NONE)

        if self.hold:
            self.held.append(write)
        else:
            write()

    def release(self) -> None:
        held, self.held = self.held, []
        for write in held:
            write()


@dataclass
class Marker:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool


@dataclass
class MemoryMarkers:
    """Every partition leader at once. ``errors`` per partition are answered (once each) instead of writing."""

    auto: bool = True
    written: dict[TopicPartition, list[Marker]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[TopicPartition, list[ErrorCode]] = field(default_factory=lambda: defaultdict(list))
    in_flight: list[tuple[TxnMarkers, Callable[[Mapping[TopicPartition, ErrorCode]], None]]] = field(
        default_factory=list)
    sends: int = 0

    def send(self, markers: TxnMarkers, done: Callable[[Mapping[TopicPartition, ErrorCode]], None]) -> None:
        self.sends += 1
        self.in_flight.append((markers, done))
        if self.auto:
            self.deliver()

    def deliver(self) -> None:
        while self.in_flight:
            markers, done = self.in_flight.pop(0)
            results: dict[TopicPartition, ErrorCode] = {}
            for tp in markers.partitions:
                queued = self.errors.get(tp)
                if queued:
                    results[tp] = queued.pop(0)
                    continue
                self.written[tp].append(Marker(markers.producer_id, markers.producer_epoch,
                                               markers.coordinator_epoch, markers.commit))
                results[tp] = ErrorCode.NONE
            done(results)

    def drop_in_flight(self) -> None:
        """The coordinator's broker died with these requests unanswered."""
        self.in_flight.clear()


class Harness:
    def __init__(self, **config: Any) -> None:
        # Kafka 2.6's immediate CONCURRENT_TRANSACTIONS unless a test asks for sofakafka's wait.
        defaults: dict[str, Any] = {"transaction_state_log_num_partitions": NUM_PARTITIONS,
                                    "add_partitions_wait_ms": 0}
        defaults.update(config)
        self.config = TxnConfig(**defaults)
        self.time = ManualTime()
        self.log = MemoryTxnLog()
        self.markers = MemoryMarkers()
        self.next_producer_id = 1000
        self.coordinator_epoch = 0
        self.coordinator = self._new_coordinator()
        for p in range(NUM_PARTITIONS):
            self.coordinator.begin_loading(p, self.coordinator_epoch)
            self.coordinator.load_partition(p, self.coordinator_epoch, [])

    def _new_coordinator(self) -> TransactionCoordinator:
        c = TransactionCoordinator(config=self.config, clock=self.time, scheduler=self.time, writer=self.log,
                                   markers=self.markers)
        c.start()
        return c

    def new_producer_id(self) -> int:
        self.next_producer_id += 1
        return self.next_producer_id

    def failover(self) -> None:
        """Another broker becomes leader of every partition: a fresh coordinator loads what the log holds. Marker
        requests of the dead one are lost with it."""
        self.coordinator.shutdown()
        self.markers.drop_in_flight()
        self.log.held.clear()
        self.coordinator_epoch += 1
        self.coordinator = self._new_coordinator()
        for p in range(NUM_PARTITIONS):
            self.coordinator.begin_loading(p, self.coordinator_epoch)
            self.coordinator.load_partition(p, self.coordinator_epoch, list(self.log.partitions[p]))

    # -- client requests -------------------------------------------------------------------------------------
    def init(self, txn_id: str | None, timeout_ms: int = TIMEOUT_MS, expected: tuple[int, int] | None = None
             ) -> tuple[ErrorCode, int, int]:
        r = done(self.coordinator.init_producer_id(txn_id, timeout_ms, expected, self.new_producer_id))
        return r.error, r.producer_id, r.producer_epoch

    def add(self, txn_id: str, pid: int, epoch: int, *tps: TopicPartition) -> ErrorCode:
        return done(self.coordinator.add_partitions(txn_id, pid, epoch, tps))

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool) -> ErrorCode:
        return done(self.coordinator.end_transaction(txn_id, pid, epoch, commit))


def done(completion: Completion[Any]) -> Any:
    assert completion.done(), "the coordinator did not answer"
    return completion.result()
