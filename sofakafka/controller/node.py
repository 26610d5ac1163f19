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
    node.on_new_session()  # called by a renewing store (controller.session) after it replaced a lost session
    node.report_log_dir_failures(dirs, partitions)   # a failed log dir among several (log_dir_failures.py)

Start-up order follows a 2.6 broker: top-level paths, cluster id, registration under ``/brokers/ids``,
then the controller election (so a single broker finds itself alive when it takes over), and the cache is
complete before ``start`` returns; partition leaders of existing topics may arrive a moment later, through the
cache, once the controller has run.

A new session (ZooKeeper expired the old one; see sofakafka/controller/session.py) repeats the session-bound
part of that order on the same objects, with the cache first: cache (re-reading the tree re-arms its watches),
registration, then the controller election. Nothing else is rebuilt: every component kept the same store object.
The cache goes first because the new registration is what tells the cluster and its clients that the broker is
back: until the reload, its cache still holds the view from before the session was lost (itself leading what
the controller has since moved away), and a client asking it for metadata then would be sent to it as the
leader and read its stale high watermark as if it were the partition's.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sofakafka.controller import log_dir_failures
from sofakafka.controller.kafka_controller import KafkaController, StopReplicaSender
from sofakafka.controller.metadata import MetadataCache
from sofakafka.controller.registration import (
    create_top_level_paths,
    get_or_create_cluster_id,
    make_registration,
    register_broker,
)
from sofakafka.controller.store import MetadataStore
from sofakafka.controller.topics import DEFAULT_MAX_PARTITIONS_PER_TOPIC, TopicAdmin
from sofakafka.controller.zk_data import BrokerEndpoint, BrokerRegistration, TopicPartition

log = logging.getLogger(__name__)


@dataclass
class ControllerNode:
    store: MetadataStore
    broker_id: int
    cluster_id: str
    broker_epoch: int
    cache: MetadataCache
    admin: TopicAdmin
    controller: KafkaController
    registration: BrokerRegistration | None = None
    stale_registration_wait_s: float = 0.0
    own_session_ids: set[int] = field(default_factory=set)
    """Sessions this node registered the broker with: a registration of one of them found after a renewal
    is our own leftover, to be waited out, not a duplicate broker id."""
    _renewal_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    log_dir_failures: tuple[tuple[str, ...], frozenset[TopicPartition]] | None = None
    """The failed log dirs and their replicas this broker reported (published again with each new session)."""

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
        stale_registration_wait_s: float = 0.0,
        max_partitions_per_topic: int = DEFAULT_MAX_PARTITIONS_PER_TOPIC,
    ) -> ControllerNode:
        """``proposed_cluster_id`` is the id in the log dirs' ``meta.properties``, if any: a fresh tree
        adopts it; otherwise the tree's id wins and the caller compares the two.
        ``stale_registration_wait_s``: after a session renewal, how long the registration of a lost session
        of ours may still be in the way (the session timeout: the server expires it by then)."""
        create_top_level_paths(store)
        cluster_id = get_or_create_cluster_id(store, proposed_cluster_id)
        registration = make_registration(broker_id, list(endpoints), rack)
        broker_epoch = register_broker(store, registration)
        session_id = store.session_id
        cache = MetadataCache(store)
        cache.start()
        admin = TopicAdmin(
            store,
            default_num_partitions=default_num_partitions,
            default_replication_factor=default_replication_factor,
            rng=rng,
            max_partitions_per_topic=max_partitions_per_topic,
        )
        controller = KafkaController(
            store,
            broker_id,
            delete_topic_enable=delete_topic_enable,
            stop_replica_sender=stop_replica_sender,
            unclean_leader_election_enable=unclean_leader_election_enable,
        )
        controller.startup()
        node = cls(store, broker_id, cluster_id, broker_epoch, cache, admin, controller, registration,
                   stale_registration_wait_s, {session_id})
        store.add_new_session_listener(node.on_new_session)
        return node

    def on_new_session(self) -> None:
        """The store replaced a lost session (its renewal thread calls this; idempotent, as it may run again
        after a failure). The cache reload re-arms the watches and makes the broker re-apply the metadata
        (stop leading what moved, follow, rejoin ISRs) from what the tree says now; it comes before the
        registration, so that a broker seen registered again never answers Metadata from the lost session's
        view (see the module docstring). Then Kafka's order: register the broker (a new broker epoch) before
        the controller election, so a broker that wins finds itself alive."""
        assert self.registration is not None
        with self._renewal_lock:
            self.cache.reload()
            stale = set(self.own_session_ids)
            session_id = self.store.session_id
            registration = make_registration(self.broker_id, list(self.registration.endpoints),
                                             self.registration.rack)
            self.own_session_ids.add(session_id)
            self.broker_epoch = register_broker(self.store, registration, stale_session_ids=stale - {session_id},
                                                stale_wait_s=self.stale_registration_wait_s)
            self.registration = registration
            log.info("broker %d re-registered after a new ZooKeeper session (broker epoch %d)",
                     self.broker_id, self.broker_epoch)
            if self.log_dir_failures is not None:
                # The list of the lost session went with it; the controller forgot it when we re-registered.
                log_dir_failures.publish(self.store, self.broker_id, self.broker_epoch, *self.log_dir_failures)
            self.controller.on_new_session()

    def report_log_dir_failures(self, log_dirs: Sequence[str], partitions: Iterable[TopicPartition]) -> None:
        """Tell the controller (and every broker's metadata) which of our replicas are in failed log dirs
        (sofakafka/controller/log_dir_failures.py). Blocking; raises StoreError when the store cannot be written
        (the caller retries; a new session publishes it anyway)."""
        with self._renewal_lock:
            self.log_dir_failures = (tuple(log_dirs), frozenset(partitions))
            log_dir_failures.publish(self.store, self.broker_id, self.broker_epoch, *self.log_dir_failures)

    def shutdown(self) -> None:
        self.store.remove_new_session_listener(self.on_new_session)
        self.controller.shutdown()
        self.cache.close()
