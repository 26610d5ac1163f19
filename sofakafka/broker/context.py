"""What the parts of a broker are given: the one place that says what a handler or a coordinator may use.

:class:`~sofakafka.broker.broker.Broker` assembles the parts (config, logs, replica manager, metadata, the
controller, the coordinators, the listeners) and is the only class that satisfies these Protocols; nothing
below it imports it, so handlers, coordinators and the server depend on this module instead, and a unit test
can hand them any object that has the names they use.

* :class:`CoordinatorContext`: what a coordinator whose state lives in an internal topic (the group
  coordinator's ``__consumer_offsets``, sofakafka/broker/offsets_topic.py; the transaction coordinator's
  ``__transaction_state``, sofakafka/broker/transaction_topic.py) needs to create, append to and load that topic.
* :class:`BrokerContext`: what a request handler sees as ``ctx.broker`` (sofakafka/broker/handlers/): the
  coordinator context plus the data path, the metadata and the controller, the coordinators and this broker's
  own listeners, the metrics and the produce audit.

Adding a part (a transaction coordinator, an authorizer, metrics): a property here, typed by the part's own
module (which must not import this one back), and the same property on ``Broker``, which builds it. The
Protocols hold only what some handler or coordinator uses; a part used only by ``Broker`` itself stays there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from sofakafka.broker.audit_writer import ProduceAuditWriter
from sofakafka.broker.bound_listener import BoundListener
from sofakafka.broker.client_quotas import ClientQuotaManager
from sofakafka.broker.config import KafkaConfig
from sofakafka.broker.fetch_session import FetchSessionCache
from sofakafka.broker.group import GroupCoordinator
from sofakafka.broker.group_filters import GroupFilterRegistry
from sofakafka.broker.metrics import BrokerMetrics
from sofakafka.broker.producer_id_manager import ProducerIdManager
from sofakafka.broker.replica_manager import MarkerEntry, ReplicaManager
from sofakafka.broker.replica_manager import TopicPartition as TxnPartition
from sofakafka.broker.txn import TransactionCoordinator
from sofakafka.client.security import ClientSecurity
from sofakafka.controller.kafka_controller import KafkaController
from sofakafka.controller.metadata import ClusterMetadata, MetadataCache
from sofakafka.controller.store import MetadataStore
from sofakafka.controller.topics import TopicAdmin
from sofakafka.controller.zk_data import TopicPartition
from sofakafka.protocol.errors import ErrorCode
from sofakafka.security.authorizer import AclAuthorizer
from sofakafka.security.store import SecurityMetadata
from sofakafka.security.token_manager import DelegationTokenManager
from sofakafka.storage.log_manager import LogManager

T = TypeVar("T")

StopRequestPartitions = Mapping[TopicPartition, tuple[int, bool]]
"""Partition -> (leader epoch, delete): what a StopReplica request asks of this broker."""


class CoordinatorContext(Protocol):
    """What a coordinator's runtime is given: enough to create its internal topic, append to it and load it."""

    @property
    def broker_id(self) -> int: ...

    @property
    def config(self) -> KafkaConfig: ...

    @property
    def replica_manager(self) -> ReplicaManager:
        """Appends and reads of the partitions this broker leads (available once the broker has started)."""
        ...

    @property
    def topic_admin(self) -> TopicAdmin:
        """Topic and config writes; its methods block on the store (call them through ``run_blocking``)."""
        ...

    def metadata(self) -> ClusterMetadata:
        """The current metadata snapshot (never blocks)."""
        ...

    @property
    def inter_broker_security(self) -> ClientSecurity | None:
        """How this broker logs in to the others over the inter-broker listener (TLS, SASL); None for PLAINTEXT.
        What a coordinator sends to other brokers (transaction markers, partition verification) goes through it."""
        ...

    async def run_blocking(self, fn: Callable[[], T]) -> T:
        """Blocking work that is neither an append nor a read (store writes, admin calls), off the loop."""
        ...


class InternalTopicRuntime(Protocol):
    """A coordinator's link to its internal topic, as a handler uses it."""

    async def create_topic(self, requested_by: str | None) -> ErrorCode:
        """Create the topic on first use (Kafka's createInternalTopic); the error the asking client gets
        meanwhile."""
        ...


class TransactionRuntime(InternalTopicRuntime, Protocol):
    """The transaction coordinator's runtime (transaction_topic.py), as the handlers use it."""

    async def write_markers(self, markers: Sequence[MarkerEntry]) -> list[ErrorCode]:
        """WriteTxnMarkers' partition side: the markers appended as leader (acks=all), one error per entry; a
        marker in ``__consumer_offsets`` settles the transactional offsets it decides."""
        ...

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TxnPartition]) -> dict[TxnPartition, ErrorCode]:
        """Partition verification: asks the id's coordinator (here or over the inter-broker listener) whether
        the partitions are in the producer's ongoing transaction; NONE per partition that is."""
        ...


class BrokerContext(CoordinatorContext, Protocol):
    """What a request handler is given as ``ctx.broker``."""

    # -- the data path ------------------------------------------------------------------------------------------
    @property
    def log_manager(self) -> LogManager: ...

    @property
    def fetch_sessions(self) -> FetchSessionCache: ...

    async def stop_partitions(self, partitions: StopRequestPartitions) -> dict[TopicPartition, ErrorCode]:
        """StopReplica's work on this broker (handlers/stop_replica.py says which partitions reach it)."""
        ...

    # -- metadata and the controller ----------------------------------------------------------------------------
    @property
    def metadata_cache(self) -> MetadataCache:
        """The metadata view that follows the store (``snapshot()``, ``wait_until``)."""
        ...

    @property
    def metadata_store(self) -> MetadataStore:
        """The store itself, for the few reads a handler makes there (blocking: through ``run_blocking``)."""
        ...

    @property
    def controller(self) -> KafkaController:
        """This broker's controller, active or not (handlers/_controller.py checks which)."""
        ...

    @property
    def broker_epoch(self) -> int:
        """The czxid of this broker's registration: requests meant for an earlier life of it carry an older one."""
        ...

    # -- coordinators -------------------------------------------------------------------------------------------
    @property
    def group_coordinator(self) -> GroupCoordinator:
        """Consumer groups and committed offsets (sofakafka.broker.group's API); loop thread only."""
        ...

    @property
    def group_filters(self) -> GroupFilterRegistry:
        """Server-side filters of consumer groups and the members they apply to (group_filters.py): the Fetch
        handler looks clients up there, the group handlers publish members, the config handlers write."""
        ...

    @property
    def group_runtime(self) -> InternalTopicRuntime:
        """``__consumer_offsets``: created on first use."""
        ...

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        """Transactional ids and their transactions (sofakafka.broker.txn's API); loop thread only."""
        ...

    @property
    def transaction_runtime(self) -> TransactionRuntime:
        """``__transaction_state`` (created on first use), the markers' partition side and verification."""
        ...

    @property
    def producer_id_manager(self) -> ProducerIdManager:
        """Hands out producer ids; ``generate_producer_id`` may block on the store."""
        ...

    # -- security -----------------------------------------------------------------------------------------------
    @property
    def authorizer(self) -> AclAuthorizer | None:
        """Kafka's ACL authorizer when ``authorizer.class.name`` is set; None means every request is allowed
        (broker/handlers/_authz.py is how handlers ask it)."""
        ...

    @property
    def client_quotas(self) -> ClientQuotaManager:
        """Client quota sensors (KIP-13/124): handlers record bytes and request time, get throttle times."""
        ...

    @property
    def security_metadata(self) -> SecurityMetadata | None:
        """SCRAM users and ACLs in the metadata tree, followed on every broker (None until the store is open);
        its writes block on the store (``run_blocking``)."""
        ...

    @property
    def delegation_tokens(self) -> DelegationTokenManager | None:
        """Delegation tokens (KIP-48): None without ``delegation.token.master.key``; its writes block on the store
        (``run_blocking``), its cache never blocks."""
        ...

    # -- this broker --------------------------------------------------------------------------------------------
    @property
    def listeners(self) -> Sequence[BoundListener]:
        """Where this broker listens and what it advertises, per listener."""
        ...

    # -- operating it -------------------------------------------------------------------------------------------
    @property
    def metrics(self) -> BrokerMetrics:
        """The counters /metrics reads (sofakafka/broker/metrics.py); bumped on the loop, per request or batch set."""
        ...

    @property
    def produce_audit(self) -> ProduceAuditWriter | None:
        """Who produced each batch, for the console's trace; None unless ``sofakafka.produce.audit.enable``."""
        ...
