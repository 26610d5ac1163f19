"""The broker's replication wiring: metadata in, leader and follower roles out (docs/cluster.md).

The broker calls :meth:`Replication.apply` with every new metadata snapshot (after it has made itself the leader
of what it leads); this makes it a follower of every other partition it is a replica of, and the
:class:`~sofakafka.broker.isr.IsrManager` keeps the ISR of the partitions it leads. Loop thread only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from sofakafka.broker.config import KafkaConfig
from sofakafka.broker.isr import IsrManager
from sofakafka.broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from sofakafka.broker.replica_manager import ReplicaManager, TopicPartition
from sofakafka.client.security import ClientSecurity
from sofakafka.controller.metadata import ClusterMetadata, PartitionMetadata
from sofakafka.controller.store import MetadataStore


class Replication:
    def __init__(self, config: KafkaConfig, broker_id: int, replica_manager: ReplicaManager, store: MetadataStore,
                 metadata: Callable[[], ClusterMetadata],
                 run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
                 security: ClientSecurity | None = None) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.fetchers = ReplicaFetcherManager(
            replica_manager,
            FetcherSettings(
                broker_id=broker_id,
                listener_name=config.inter_broker_listener_name,
                fetch_max_bytes=config.get_int("replica.fetch.max.bytes"),
                fetch_min_bytes=config.get_int("replica.fetch.min.bytes"),
                fetch_wait_max_ms=config.get_int("replica.fetch.wait.max.ms"),
                fetch_backoff_ms=config.get_int("replica.fetch.backoff.ms"),
                fetch_response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
                socket_timeout_ms=config.get_int("replica.socket.timeout.ms"),
                quota_window_num=config.get_int("replication.quota.window.num"),
                quota_window_size_seconds=config.get_int("replication.quota.window.size.seconds"),
                follower_throttled_rate=config.get_int("follower.replication.throttled.rate"),
                security=security,
            ),
            metadata,
        )
        self.isr = IsrManager(replica_manager, store, broker_id,
                              replica_lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
                              run_blocking=run_blocking)

    def start(self) -> None:
        self.isr.start()

    async def before_leading(self, tp: TopicPartition) -> None:
        """Stop fetching a partition we are about to lead: no follower append may land after the first leader
        append."""
        await self.fetchers.stop_following(tp)

    async def apply(self, snapshot: ClusterMetadata, scope: Iterable[TopicPartition] | None = None) -> None:
        """Follow every partition of ``snapshot`` we are a replica of and do not lead, and no other: all of them,
        or, with ``scope``, just those of ``scope`` (the partitions whose metadata changed), the rest staying as
        they are. A replica in a failed log dir is not followed (Kafka removes its fetcher): there is no log to
        append to."""
        offline = self.replica_manager.log_manager.is_offline
        if scope is None:
            wanted: dict[TopicPartition, PartitionMetadata] = {}
            for topic in snapshot.topics.values():
                for p in topic.partitions.values():
                    if p.leader != self.broker_id and self.broker_id in p.replicas and \
                            not offline(p.topic, p.partition):
                        wanted[(p.topic, p.partition)] = p
            await self.fetchers.apply(wanted)
            return
        changes: dict[TopicPartition, PartitionMetadata | None] = {}
        for tp in sorted(scope):
            found = snapshot.partition(*tp)
            followed = found is not None and found.leader != self.broker_id and self.broker_id in found.replicas \
                and not offline(*tp)
            changes[tp] = found if followed else None
        await self.fetchers.update(changes)

    async def shutdown(self) -> None:
        await self.isr.stop()
        await self.fetchers.shutdown()
