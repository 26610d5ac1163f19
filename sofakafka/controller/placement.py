"""Replica placement: which brokers hold each partition of a new topic or of added partitions.

The arithmetic is Kafka 2.6's (``AdminUtils.assignReplicasToBrokers``), so a topic created here lands on the
same brokers a Kafka controller would pick given the same random draws, and tools' expectations about spread
hold. Two goals drive it: spread replicas evenly over brokers, and give each partition's followers a different
"shift" from its leader so that when one broker fails, its followers' load lands on many brokers, not one.

Public API::

    BrokerMetadata(id, rack)                     # the input: live brokers, rack None when unset
    assign_replicas_to_brokers(brokers, num_partitions, replication_factor,
                               fixed_start_index=-1, start_partition_id=-1, rng=None)
        -> dict[partition id, list[broker id]]   # first replica is the preferred leader
    rack_alternated_broker_list({broker: rack})  # the broker order used by rack-aware placement

* Rack-unaware (no broker has a rack): partition ``p``'s leader is broker ``(p + start) mod n`` of the
  sorted broker list; its ``j``-th follower sits ``1 + (shift + j) mod (n - 1)`` places after the leader,
  and ``shift`` grows by one each time ``p`` wraps around the broker list.
* Rack-aware (every broker has a rack): the same walk over a broker list that alternates racks, skipping a
  broker whose rack already holds a replica (while some rack holds none) or that already holds one.
* A mix of brokers with and without racks is refused, as Kafka refuses it.
* Local-first (racks are machine rooms, docs/ldc.md): Kafka's walk already gives each rack leaderships in
  proportion to its brokers when there are at least as many partitions as brokers. With fewer, a rack could
  lead none of the topic, and its local-first producers would have no local partition; so when a rack leads
  nothing while another leads several, a partition of the busiest rack that has a replica in the idle rack is
  given that replica as its preferred leader (:func:`give_every_rack_a_leader`). Brokers then still lead 0
  or 1 partitions each, and assignments Kafka would make with every rack leading stay exactly Kafka's.

``start`` and ``shift`` are random unless ``fixed_start_index`` is given (Kafka uses that when adding
partitions, so new partitions continue where partition 0 began). Pass ``rng=random.Random(seed)`` for
reproducible placements in tests. Errors are :class:`~sofakafka.protocol.errors.KafkaError` carrying
INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR, the codes CreateTopics answers with.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from sofakafka.protocol.errors import ErrorCode, KafkaError

_default_rng = random.Random()


@dataclass(frozen=True, order=True)
class BrokerMetadata:
    id: int
    rack: str | None = None


def assign_replicas_to_brokers(
    brokers: Iterable[BrokerMetadata],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Partition id -> replica list (preferred leader first) for ``num_partitions`` partitions numbered
    from ``max(0, start_partition_id)``."""
    metadata = sorted(brokers, key=lambda b: b.id)
    if num_partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(metadata):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {len(metadata)}.",
        )
    rng = rng or _default_rng
    if all(b.rack is None for b in metadata):
        return _rack_unaware(
            [b.id for b in metadata], num_partitions, replication_factor, fixed_start_index, start_partition_id, rng
        )
    if any(b.rack is None for b in metadata):
        # Kafka raises AdminOperationException here, which CreateTopics answers as an unknown server error.
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR, "Not all brokers have rack information for replica rack aware assignment."
        )
    racks = {b.id: b.rack for b in metadata if b.rack is not None}
    assignment = _rack_aware(racks, num_partitions, replication_factor, fixed_start_index, start_partition_id, rng)
    return give_every_rack_a_leader(assignment, racks)


def give_every_rack_a_leader(assignment: Mapping[int, Sequence[int]],
                             broker_racks: Mapping[int, str]) -> dict[int, list[int]]:
    """The assignment with preferred leaders moved so that every rack leads a partition, where a partition
    led by a rack leading several has a replica in the rack leading none (see the module docstring)."""
    result = {p: list(replicas) for p, replicas in assignment.items()}
    leads: dict[str, list[int]] = {rack: [] for rack in sorted(set(broker_racks.values()))}
    for p in sorted(result):
        leads[broker_racks[result[p][0]]].append(p)
    for idle in [rack for rack, led in leads.items() if not led]:
        donors = sorted((rack for rack, led in leads.items() if len(led) > 1), key=lambda r: (-len(leads[r]), r))
        for donor in donors:
            movable = [p for p in leads[donor] if any(broker_racks[b] == idle for b in result[p][1:])]
            if movable:
                p = movable[-1]
                replicas = result[p]
                chosen = next(b for b in replicas[1:] if broker_racks[b] == idle)
                replicas.remove(chosen)
                replicas.insert(0, chosen)
                leads[donor].remove(p)
                leads[idle].append(p)
                break
    return result


def _follower_index(first_replica_index: int, shift: int, replica_index: int, num_brokers: int) -> int:
    # Never 0 places from the leader: the offset is 1 .. n-1, so a follower is never the leader itself.
    offset = 1 + (shift + replica_index) % (num_brokers - 1)
    return (first_replica_index + offset) % num_brokers


def _rack_unaware(
    broker_ids: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    n = len(broker_ids)
    result: dict[int, list[int]] = {}
    for partition, first, shift in _leader_walk(n, num_partitions, fixed_start_index, start_partition_id, rng):
        replicas = [broker_ids[first]]
        replicas += [broker_ids[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        result[partition] = replicas
    return result


def _leader_walk(
    n: int, num_partitions: int, fixed_start_index: int, start_partition_id: int, rng: random.Random
) -> Iterator[tuple[int, int, int]]:
    """(partition, index of its leader in the broker list, follower shift) for each partition to place,
    the walk both placements share (the start and the first shift drawn in that order, as Kafka does)."""
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition = max(0, start_partition_id)
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        yield partition, (partition + start_index) % n, shift
        partition += 1


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn (racks sorted, brokers sorted within a rack), e.g. racks
    a: 0 1, b: 2, c: 3 4 give 0 2 3 1 4, so consecutive entries sit in different racks while they can."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(broker_racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    queues = [iter(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    index = 0
    while len(result) < len(broker_racks):
        found = next(queues[index], None)
        if found is not None:
            result.append(found)
        index = (index + 1) % len(queues)
    return result


def _rack_aware(
    broker_racks: Mapping[int, str],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    num_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    result: dict[int, list[int]] = {}
    for partition, first, shift in _leader_walk(n, num_partitions, fixed_start_index, start_partition_id, rng):
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_follower_index(first, shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # A second replica in a rack only once every rack has one; a broker twice never (RF <= n).
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        result[partition] = replicas
    return result
