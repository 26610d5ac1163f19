"""A broker's whole metadata side in one object, started in Kafka's order.

Public API::

    node = ControllerNode.start(store, broker_id, endpoints, rack=None,
                                default_num_partitions=1, default_replication_factor=1,
                                delete_topic_enable=True, stop_replica_sender=None)
    node.cluster_id, node.broker_epoch
    node.cache       # MetadataCache: the view handlers read (snapshot(), wait_until, add_listener)
    node.admin       # TopicAdmin: CreateTopics/DeleteTopics/CreatePartitions/AlterConfigs writes
    node.controller  # KafkaController: this broker's controller (active when it won the election)
    node.shutdown()  # stops the controller and the cache; the caller closes the store session

Start-up order follows a 2.6 broker: top-level paths, cluster id, registration under ``/brokers/ids``,
then the controller election (so a single broker finds itself alive when it takes over), and the cache is
complete before ``start`` returns; partition leaders of existing topics may arrive a moment later, through the
cache, once the controller has run.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from sofakafka.controller.kafka_controller import KafkaController, StopReplicaSender
from sofakafka.controller.metadata import MetadataCache
from sofakafka.controller.registration import (
    create_top_level_paths,
    get_or_create_cluster_id,
    make_registration,
    register_broker,
)
from sofakafka.controller.store import MetadataStore
from sofakafka.controller.topics import TopicAdmin
from sofakafka.controller.zk_data import BrokerEndpoint


@dataclass
class ControllerNode:
    store: MetadataStore
    broker_id: int
    cluster_id: str
    broker_epoch: int
    cache: MetadataCache
    admin: TopicAdmin
    controller: KafkaController

    @classmethod
    def start(
        cls,
        store: MetadataStore,
        broker_id: int,
        endpoints: Sequence[BrokerEndpoint],
        *,
        rack: str | None = None,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        delete_topic_enable: bool = True,
        unclean_leader_election_enable: bool = False,
        stop_replica_sender: StopReplicaSender | None = None,
        proposed_cluster_id: str | None = None,
        rng: random.Random | None = None,
    ) -> ControllerNode:
        """``proposed_cluster_id`` is the id in the log dirs' ``meta.properties``, if any: a fresh tree
        adopts it; otherwise the tree's id wins and the caller compares the two."""
        create_top_level_paths(store)
        cluster_id = get_or_create_cluster_id(store, proposed_cluster_id)
        broker_epoch = register_broker(store, make_registration(broker_id, list(endpoints), rack))
        cache = MetadataCache(store)
        cache.start()
        admin = TopicAdmin(
            store,
            default_num_partitions=default_num_partitions,
            default_replication_factor=default_replication_factor,
            rng=rng,
        )
        controller = KafkaController(
            store,
            broker_id,
            delete_topic_enable=delete_topic_enable,
            stop_replica_sender=stop_replica_sender,
            unclean_leader_election_enable=unclean_leader_election_enable,
        )
        controller.startup()
        return cls(store, broker_id, cluster_id, broker_epoch, cache, admin, controller)

    def shutdown(self) -> None:
        self.controller.shutdown()
        self.cache.close()
