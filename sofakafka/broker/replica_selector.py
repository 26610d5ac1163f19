"""Which replica a consumer should fetch from (KIP-392), decided by the leader on each Fetch v11+.

Only ``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector`` changes anything, as in
Kafka 2.6 (the default, LeaderSelector, always answers the leader). Its semantics: a consumer that names its
``client.rack`` (Fetch ``rack_id``) is sent to a replica in that rack that has the fetch offset (its log end at
or past it); the leader itself when the leader is in that rack; among several followers the one with the
largest log end offset. Without a rack, or without a replica in it, the leader serves.
"""

from __future__ import annotations

from collections.abc import Mapping

from sofakafka.broker.replica_manager import Partition

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NO_PREFERRED_REPLICA = -1


def preferred_read_replica(part: Partition, fetch_offset: int, client_rack: str,
                           broker_racks: Mapping[int, str | None]) -> int:
    """A follower's broker id, or -1 when the leader (this broker) should serve the fetch itself."""
    if not client_rack or broker_racks.get(part.broker_id) == client_rack:
        return NO_PREFERRED_REPLICA
    candidates = [
        (part.follower_log_end_offsets.get(r, -1), r)
        for r in part.replicas
        if r != part.broker_id and r in broker_racks and broker_racks[r] == client_rack
        and part.follower_log_end_offsets.get(r, -1) >= fetch_offset
    ]
    if not candidates:
        return NO_PREFERRED_REPLICA
    return max(candidates)[1]
