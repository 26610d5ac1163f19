"""The broker: KafkaConfig in, a serving Kafka node out, and a clean way back down.

Start-up, in the order a 2.6 broker does it:

1. listeners bound (not yet serving), so a port 0 listener knows its real port before it is registered;
2. the metadata store (embedded under the first log dir when ``zookeeper.connect`` is unset; otherwise a
   ZooKeeper session held by a :class:`SessionRenewingStore`, which replaces it if ZooKeeper expires it),
   then the controller node: cluster id, registration in ``/brokers/ids``, controller election, metadata
   cache;
3. the log manager loads every log (recovering them after an unclean shutdown);
4. the replica manager becomes leader of every partition the metadata says this broker leads, and keeps
   following the metadata cache from then on (new topics, deleted topics, config changes);
5. the listeners start serving and "sofakafka broker <id> started, listening on ..." is printed.

A renewed ZooKeeper session needs nothing from the broker itself: the node re-registers, its metadata cache
re-reads the tree and the resulting change reaches ``_apply_metadata`` like any other, which stops leading
what the controller moved away meanwhile and follows it instead (truncating by leader epoch); every
component holds the same store object, so ISR writes, producer-id blocks and admin writes use the new
session. While there is none, those writes fail and are retried; a leader whose ISR write failed keeps the
ISR it had, so acks=all never completes over a shrunk ISR that ZooKeeper does not hold.

Periodic work (retention, ``flush.ms``, recovery-point / log-start / high-watermark checkpoints, the log
cleaner) runs on a background thread pool, scheduled from the loop; none of it blocks the loop.

Operating it: the parts count into one ``BrokerMetrics`` (``metrics``); with ``metrics.listener`` set,
``/metrics``, ``/health`` and ``/ready`` are served from the first step of start-up on this loop, the gauges
read from the broker's state only when scraped (``_gauges``); with ``sofakafka.produce.audit.enable`` a
``ProduceAuditWriter`` (``produce_audit``) records who produced each batch (docs/metrics.md, docs/console.md).

Shutdown (SIGTERM/SIGINT in ``sofakafka serve``): stop accepting, answer the delayed operations now, let the
requests in flight finish, close connections, stop the periodic work and the controller, then the log manager
flushes every log and writes its checkpoints and the clean-shutdown marker, so the next start skips recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sofakafka.broker.audit_writer import ProduceAuditWriter
from sofakafka.broker.bound_listener import BoundListener
from sofakafka.broker.client_quotas import ClientQuotaManager
from sofakafka.broker.config import LONG_MAX, ConfigError, KafkaConfig, parse_metrics_listener
from sofakafka.broker.context import StopRequestPartitions
from sofakafka.broker.controlled_shutdown import ControlledShutdownSender, inter_broker_connection
from sofakafka.broker.fetch_session import FetchSessionCache
from sofakafka.broker.group import GroupCoordinator
from sofakafka.broker.group_filters import SWEEP_INTERVAL_S, GroupFilterRegistry
from sofakafka.broker.handlers import load_handlers
from sofakafka.broker.handlers.stop_replica import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    partition_errors,
    stop_replica_request,
)
from sofakafka.broker.limits import budget_message, raise_open_file_limit
from sofakafka.broker.listener_security import BrokerSecurity
from sofakafka.broker.metadata_wait import wait_for_metadata
from sofakafka.broker.metrics import BrokerGauges, BrokerMetrics, GroupLag, PartitionGauge
from sofakafka.broker.offsets_topic import GroupCoordinatorRuntime
from sofakafka.broker.producer_id_manager import ProducerIdManager
from sofakafka.broker.replica_manager import LeaderState, ReplicaManager
from sofakafka.broker.replication import Replication
from sofakafka.broker.replication_quota import throttled_rate
from sofakafka.broker.server import SocketServer
from sofakafka.broker.transaction_topic import TransactionCoordinatorRuntime
from sofakafka.broker.txn import TransactionCoordinator
from sofakafka.client import ClientError
from sofakafka.client.security import ClientSecurity
from sofakafka.controller.embedded import EmbeddedMetadataServer
from sofakafka.controller.kafka_controller import KafkaController
from sofakafka.controller.metadata import ClusterMetadata, MetadataCache, changed_partitions
from sofakafka.controller.node import ControllerNode
from sofakafka.controller.session import SessionRenewingStore
from sofakafka.controller.store import MetadataStore, StoreError
from sofakafka.controller.topics import TopicAdmin
from sofakafka.controller.zk_data import BrokerEndpoint, TopicPartition
from sofakafka.controller.zookeeper import ZooKeeperMetadataStore, resolve_broker_id
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import DecodeError, ErrorCode, KafkaError
from sofakafka.protocol.messages.stop_replica import StopReplicaResponse
from sofakafka.security.authorizer import AclAuthorizer
from sofakafka.security.quotas import QuotaTable
from sofakafka.security.store import SecurityMetadata
from sofakafka.security.token_manager import DelegationTokenManager
from sofakafka.storage.cleaner import LogCleaner
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import InvalidLogConfigError
from sofakafka.storage.log import Log
from sofakafka.storage.log_manager import LogManager
from sofakafka.storage.segment import set_clock_offset_ms

if TYPE_CHECKING:
    from sofakafka.broker.metrics_http import MetricsServer

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long shutdown waits for requests already taken to be answered before closing their connections.
SHUTDOWN_DRAIN_SECONDS = 15.0
# How long a broker whose controlled shutdown succeeded waits to see the new leaders in its metadata cache.
CONTROLLED_SHUTDOWN_APPLY_SECONDS = 5.0
# How long a StopReplica(delete) waits for our metadata to stop serving the topic (the deletion marker's watch
# racing the controller's request) before it refuses, to be asked again.
STOP_REPLICA_METADATA_WAIT_SECONDS = 5.0
# How often the directories of deleted and moved logs are checked for removal (cheap when none is due).
DELETE_LOGS_INTERVAL_MS = 1000
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
# Writes of a failed log dir's report to the store before giving up until the next session.
LOG_DIR_FAILURE_REPORT_ATTEMPTS = 20


class Broker:
    """One broker, assembled from its parts; what it hands them is described in sofakafka/broker/context.py
    (it is the :class:`~sofakafka.broker.context.BrokerContext` of every handler)."""

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        broker_id = config.effective_broker_id()
        # None: generated from ZooKeeper's /brokers/seqid once the session is open (_start_components).
        self.broker_id = -1 if broker_id is None else broker_id
        self.security = BrokerSecurity(config)
        self.server = SocketServer(self, config, self.security)
        self.fetch_sessions = FetchSessionCache(config.get_int("max.incremental.fetch.session.cache.slots"))
        self.client_quotas = ClientQuotaManager(
            self._quota_table, samples=config.get_int("quota.window.num"),
            window_seconds=config.get_int("quota.window.size.seconds"),
            static_producer=config.get_int("quota.producer.default"),
            static_consumer=config.get_int("quota.consumer.default"))
        self._background = ThreadPoolExecutor(2, thread_name_prefix="background")
        # The controller's StopReplica requests to other brokers; one slow broker must not hold up the others.
        self._stop_replica_sends = ThreadPoolExecutor(4, thread_name_prefix="stop-replica")
        # Set once the replica manager and the rest exist: the controller can ask for deletions before that.
        self._components_started = threading.Event()
        self._metadata_server: EmbeddedMetadataServer | None = None
        self.store: MetadataStore | None = None
        self._node: ControllerNode | None = None
        self._log_manager: LogManager | None = None
        self._replica_manager: ReplicaManager | None = None
        self._replication: Replication | None = None
        self._cleaner: LogCleaner | None = None
        self._producer_ids: ProducerIdManager | None = None
        self._logs_loaded = False
        self._groups: GroupCoordinatorRuntime | None = None
        self._group_filters: GroupFilterRegistry | None = None
        self._txns: TransactionCoordinatorRuntime | None = None
        self._periodic: list[asyncio.Task[None]] = []
        self._metadata_dirty = False
        self._metadata_task: asyncio.Task[None] | None = None
        # What _apply_metadata applied last (None: nothing yet, the next pass looks at everything), the dynamic
        # broker configs it applied, and the partitions its next pass looks at whether or not they changed.
        self._applied: ClusterMetadata | None = None
        self._applied_dynamic: dict[str, str] = {}
        self._reapply: set[tuple[str, int]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._static_broker_props = {k: str(v) for k, v in config.originals.items()}
        self.default_log_config = LogConfig.from_broker_props(self._static_broker_props)
        self._stopped = False
        self._shutdown_begun = False
        self.started = False
        #: Resolved with the reason when the broker cannot go on by itself (every log directory offline, as
        #: Kafka halts then); ``sofakafka serve`` shuts down and exits non-zero.
        self.failed: asyncio.Future[str] | None = None
        self._metrics = BrokerMetrics()
        self._metrics_server: MetricsServer | None = None  # sofakafka/broker/metrics_http.py, when on
        self._audit: ProduceAuditWriter | None = None

    # -- the parts handlers use (sofakafka/broker/context.py) ---------------------------------------------------
    @property
    def replica_manager(self) -> ReplicaManager:
        assert self._replica_manager is not None, "broker not started"
        return self._replica_manager

    @property
    def log_manager(self) -> LogManager:
        assert self._log_manager is not None, "broker not started"
        return self._log_manager

    @property
    def node(self) -> ControllerNode:
        """The controller side: ``node.cache`` (metadata view), ``node.admin`` (topic/config writes)."""
        assert self._node is not None, "broker not started"
        return self._node

    @property
    def controller(self) -> KafkaController:
        return self.node.controller

    @property
    def broker_epoch(self) -> int:
        return self.node.broker_epoch

    @property
    def metadata_store(self) -> MetadataStore:
        assert self.store is not None, "broker not started"
        return self.store

    @property
    def producer_id_manager(self) -> ProducerIdManager:
        """Hands out producer ids; ``generate_producer_id`` may block on the store."""
        assert self._producer_ids is not None, "broker not started"
        return self._producer_ids

    @property
    def group_coordinator(self) -> GroupCoordinator:
        """Consumer groups and committed offsets (sofakafka.broker.group's API); loop thread only."""
        return self.group_runtime.coordinator

    @property
    def group_runtime(self) -> GroupCoordinatorRuntime:
        """The coordinator's link to ``__consumer_offsets`` (creation on first use, loading)."""
        assert self._groups is not None, "broker not started"
        return self._groups

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        """Transactional ids and their transactions (sofakafka.broker.txn's API); loop thread only."""
        return self.transaction_runtime.coordinator

    @property
    def transaction_runtime(self) -> TransactionCoordinatorRuntime:
        """The coordinator's link to ``__transaction_state``, its markers (both sides) and verification."""
        assert self._txns is not None, "broker not started"
        return self._txns

    @property
    def authorizer(self) -> AclAuthorizer | None:
        """Kafka's ACL authorizer when ``authorizer.class.name`` is set, else None (everything allowed)."""
        return self.security.authorizer

    @property
    def security_metadata(self) -> SecurityMetadata | None:
        """SCRAM users and ACLs in the metadata tree (None until the broker has opened its store)."""
        return self.security.metadata

    @property
    def delegation_tokens(self) -> DelegationTokenManager | None:
        """Delegation tokens (None without ``delegation.token.master.key`` or before the store is open)."""
        return self.security.tokens

    def _quota_table(self) -> QuotaTable:
        metadata = self.security.metadata
        return metadata.client_quotas() if metadata is not None else {}

    @property
    def inter_broker_security(self) -> ClientSecurity | None:
        """This broker's login on the inter-broker listener (None for PLAINTEXT)."""
        return self.security.inter_broker

    @property
    def metadata_cache(self) -> MetadataCache:
        return self.node.cache

    @property
    def group_filters(self) -> GroupFilterRegistry:
        """Server-side filters of consumer groups and their members (group_filters.py)."""
        assert self._group_filters is not None, "broker not started"
        return self._group_filters

    @property
    def topic_admin(self) -> TopicAdmin:
        """Topic and config writes; its methods block on the store (call through ``run_blocking``)."""
        return self.node.admin

    def metadata(self) -> ClusterMetadata:
        return self.node.cache.snapshot()

    @property
    def listeners(self) -> list[BoundListener]:
        return self.server.listeners

    @property
    def metrics(self) -> BrokerMetrics:
        return self._metrics

    @property
    def produce_audit(self) -> ProduceAuditWriter | None:
        return self._audit

    async def run_blocking(self, fn: Callable[[], T]) -> T:
        """Blocking work that is neither an append nor a read (store writes, admin calls) off the loop."""
        return await asyncio.get_running_loop().run_in_executor(self._background, fn)

    def topic_log_config(self, topic: str, snapshot: ClusterMetadata | None = None) -> LogConfig:
        """The topic's overrides on top of the broker's defaults (static and dynamic)."""
        snap = snapshot if snapshot is not None else (self._node.cache.snapshot() if self._node else None)
        base = self.default_log_config
        if snap is None:
            return base
        dynamic = {**snap.broker_config(None), **snap.broker_config(self.broker_id)}
        if dynamic:
            try:
                base = LogConfig.from_broker_props({**self._static_broker_props, **dynamic})
            except InvalidLogConfigError as exc:
                log.warning("ignoring invalid dynamic broker config: %s", exc)
        overrides = snap.topic_config(topic)
        if not overrides:
            return base
        try:
            return LogConfig.from_props(dict(overrides), base=base)
        except InvalidLogConfigError as exc:
            log.warning("topic %s: ignoring invalid config overrides: %s", topic, exc)
            return base

    # -- start-up -----------------------------------------------------------------------------------------------
    async def startup(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.failed = self._loop.create_future()
        config = self.config
        offset = config.get_int("sofakafka.test.clock.offset.ms")
        if offset:
            log.warning("wall clock skewed by %d ms (sofakafka.test.clock.offset.ms: tests only)", offset)
        set_clock_offset_ms(offset)
        limit = raise_open_file_limit()
        message, over = budget_message(limit, config.get_int("log.max.open.segment.files"),
                                       config.get_int("max.connections"))
        (log.warning if over else log.info)("%s", message)
        load_handlers()
        listeners = await self.server.start()
        try:
            await self._start_components(listeners)
        except BaseException:
            await self.shutdown()
            raise
        await self.server.start_serving()
        self.started = True
        where = ", ".join(b.connection_string() for b in listeners)
        log.info("sofakafka broker %d started, listening on %s", self.broker_id, where)

    async def _start_components(self, listeners: Sequence[BoundListener]) -> None:
        config = self.config
        await self._start_metrics_server()
        endpoints = [BrokerEndpoint(b.listener_name, b.advertised_host, b.advertised_port,
                                    b.security_protocol.value) for b in listeners]
        metadata_dir = config.metadata_dir
        log.info("data in %s (metadata in %s)", ", ".join(config.log_dirs), metadata_dir)

        session_timeout_s = config.get_int("zookeeper.session.timeout.ms") / 1000.0

        def open_store() -> ControllerNode:
            if config.uses_embedded_store:
                self._metadata_server = EmbeddedMetadataServer.open(
                    metadata_dir, snapshot_interval_ops=config.get_int("sofakafka.metadata.snapshot.interval.ops"))
                self.store = self._metadata_server.connect()
            else:
                def connect() -> ZooKeeperMetadataStore:
                    return ZooKeeperMetadataStore.connect(
                        config.zookeeper_connect or "", config.zookeeper_chroot,
                        session_timeout=session_timeout_s,
                        connection_timeout=config.zookeeper_connection_timeout_ms / 1000.0)

                # One store for the broker's life: it opens a new session when ZooKeeper expires one, and
                # the controller node re-registers, reloads and re-elects (controller/session.py).
                self.store = SessionRenewingStore(
                    connect, session_wait_s=config.zookeeper_connection_timeout_ms / 1000.0)
                if self.broker_id < 0:
                    self.broker_id = resolve_broker_id(self.store, [Path(d) for d in config.log_dirs],
                                                       config.get_int("reserved.broker.max.id"))
            return ControllerNode.start(
                self.store,
                self.broker_id,
                endpoints,
                rack=rack if isinstance(rack := config.values.get("broker.rack"), str) and rack else None,
                default_num_partitions=config.get_int("num.partitions"),
                default_replication_factor=config.get_int("default.replication.factor"),
                delete_topic_enable=config.get_bool("delete.topic.enable"),
                unclean_leader_election_enable=config.get_bool("unclean.leader.election.enable"),
                stop_replica_sender=self,
                stale_registration_wait_s=session_timeout_s,
                max_partitions_per_topic=config.get_int("sofakafka.max.partitions.per.topic"),
            )

        self._node = await self.run_blocking(open_store)
        assert self.store is not None
        store = self.store
        # Users and ACLs before serving: the first client's login and first request are checked.
        await self.run_blocking(lambda: self.security.start(store))
        await self._wait_for_a_controller(session_timeout_s)
        # auto.leader.rebalance.enable: the check runs only while this broker is the active controller.
        self._node.controller.configure_leader_rebalance(
            config.get_bool("auto.leader.rebalance.enable"),
            float(config.get_int("leader.imbalance.check.interval.seconds")),
            config.get_int("leader.imbalance.per.broker.percentage"))
        self._producer_ids = ProducerIdManager(self.store, self.broker_id)
        self._log_manager = LogManager(
            [Path(d) for d in config.log_dirs],
            default_config=self.default_log_config,
            topic_configs=self.topic_log_config,
            broker_id=self.broker_id,
            cluster_id=self._node.cluster_id,
            recovery_threads_per_data_dir=config.get_int("num.recovery.threads.per.data.dir"),
            max_open_segment_files=config.get_int("log.max.open.segment.files"),
            alter_log_dirs_threads=threads if isinstance(threads := config.values.get(
                "num.replica.alter.log.dirs.threads"), int) else None,
            alter_log_dirs_chunk_bytes=config.get_int("replica.fetch.max.bytes"),
            alter_log_dirs_rate=self._alter_log_dirs_rate(self._node.cache.snapshot()),
        )
        self._log_manager.add_dir_failure_listener(self._on_log_dir_failure)
        await self.run_blocking(self._log_manager.startup)
        self._logs_loaded = True
        cache = self._node.cache
        # A log dir offline from start-up (unreadable, a file in its place): the replicas placed here that no
        # online dir holds are offline, not created empty, until the controller leads them elsewhere.
        claimed = self._log_manager.claim_offline_at_startup(
            (p.topic, p.partition) for topic in cache.snapshot().topics.values()
            for p in topic.partitions.values() if self.broker_id in p.replicas)

        def known_partition(tp: tuple[str, int]) -> bool:
            return cache.snapshot().partition(*tp) is not None

        self._replica_manager = ReplicaManager(self.broker_id, self._log_manager, metrics=self._metrics,
                                               known_partition=known_partition)
        self._replica_manager.txn_verification = config.get_bool("transaction.partition.verification.enable")
        self.fetch_sessions.attach(self._replica_manager)
        self._replication = Replication(config, self.broker_id, self._replica_manager, self.store,
                                        self._node.cache.snapshot, self.run_blocking,
                                        security=self.security.inter_broker)
        self._replication.start()
        self._groups = GroupCoordinatorRuntime.start(self)
        self._group_filters = GroupFilterRegistry(self.store)
        await self.run_blocking(self._group_filters.start)
        self._txns = TransactionCoordinatorRuntime.start(self, self._groups.on_txn_marker)
        if config.get_bool("sofakafka.produce.audit.enable"):
            node = self._node
            self._audit = ProduceAuditWriter(config, self._metrics, metadata=node.cache.snapshot,
                                             topic_admin=lambda: node.admin, bootstrap=self._own_bootstrap,
                                             security=self.security.inter_broker)
            self._audit.start()
        if self._log_manager.offline_log_dirs:
            # Tell the controller as a failure at run time does (Kafka's LogDirFailureHandler sees the dirs
            # createAndValidateLogDirs put in its channel).
            self._periodic.append(asyncio.get_running_loop().create_task(
                self._after_log_dir_failure(claimed), name="log dirs offline at start-up"))
        self._node.cache.add_listener(self._on_metadata_changed)
        await self._apply_metadata()
        self._start_periodic_tasks()
        self._components_started.set()

    def _own_bootstrap(self) -> str:
        """host:port of this broker's inter-broker listener, as advertised (where its own clients connect)."""
        name = self.config.inter_broker_listener_name
        bound = next((b for b in self.server.listeners if b.listener_name == name), self.server.listeners[0])
        host = bound.advertised_host
        return f"[{host}]:{bound.advertised_port}" if ":" in host else f"{host}:{bound.advertised_port}"

    # -- metrics (sofakafka/broker/metrics.py, metrics_http.py) ---------------------------------------------------
    async def _start_metrics_server(self) -> None:
        """/metrics, /health and /ready on ``metrics.listener``, from the start of start-up (/ready says why it is
        not ready yet), on this loop."""
        value = self.config.values.get("metrics.listener")
        if not isinstance(value, str) or not value:
            return
        # Here, not at the top: a broker without metrics.listener never loads aiohttp or prometheus_client.
        from sofakafka.broker.metrics_export import make_registry
        from sofakafka.broker.metrics_http import MetricsServer

        host, port = parse_metrics_listener(value)
        server = MetricsServer(host, port, make_registry(self._metrics, self._gauges), self._readiness)
        try:
            await server.start()
        except OSError as exc:
            raise ConfigError("metrics.listener", f"cannot listen on {value}: {exc.strerror or exc}") from exc
        self._metrics_server = server
        self._metrics.idle.start()

    @property
    def metrics_port(self) -> int | None:
        """The port /metrics is served on (the bound one for a port 0 listener), None when it is off."""
        return self._metrics_server.bound_port if self._metrics_server is not None else None

    def _readiness(self) -> str | None:
        if self._shutdown_begun:
            return "shutting down"
        if not self.started or self._node is None:
            return "starting"
        if self._node.cache.snapshot().controller_id < 0:
            return "no controller known"
        return None

    def _gauges(self) -> BrokerGauges:
        """What the broker's state says now (loop thread, at scrape time): nothing here is read per request."""
        rm, node = self._replica_manager, self._node
        gauges = BrokerGauges(connections=len(self.server.connections), quota_sensors=self.client_quotas.gauges())
        if rm is None or node is None:
            return gauges
        for part in rm.partitions:
            lg = part.log
            gauges.partitions.append(PartitionGauge(
                part.topic, part.partition, lg.size, lg.log_start_offset, lg.log_end_offset, len(lg.log_segments()),
                is_leader=True, under_replicated=len(part.isr) < len(part.replicas)))
        for (topic, partition), lg in list(rm.follower_logs.items()):
            if rm.get_partition((topic, partition)) is None:
                gauges.partitions.append(PartitionGauge(
                    topic, partition, lg.size, lg.log_start_offset, lg.log_end_offset, len(lg.log_segments()),
                    is_leader=False, under_replicated=False))
        snapshot = node.cache.snapshot()
        gauges.active_controller = node.controller.is_active
        if gauges.active_controller:
            alive = set(snapshot.alive_broker_ids())
            every = [p for t in snapshot.topics.values() for p in t.partitions.values()]
            gauges.offline_partitions = sum(1 for p in every if p.leader < 0 or p.leader not in alive)
            gauges.global_partitions = len(every)
            gauges.global_topics = len(snapshot.topics)
        gauges.purgatory = {"Produce": rm.produce_purgatory.delayed, "Fetch": rm.fetch_purgatory.delayed}
        if self._groups is not None:
            for group_id, group in self._groups.coordinator.groups().items():
                for (topic, partition), committed in group.offsets.items():
                    hosted = rm.get_partition((topic, partition))
                    replica = hosted.log if hosted is not None else rm.follower_logs.get((topic, partition))
                    if replica is None:
                        continue
                    gauges.group_lags.append(GroupLag(group_id, topic, partition, committed.offset,
                                                      max(0, replica.high_watermark - committed.offset)))
        return gauges

    async def _wait_for_a_controller(self, timeout_s: float) -> None:
        """Serve only once the metadata names a controller, so the first admin request after start-up is
        not answered NOT_CONTROLLER while our own election is still on the controller thread (alone on the
        embedded store, this broker is the only candidate). Bounded: in a cluster the controller may be
        down for a while, and brokers serve without one, as Kafka's do."""
        node = self.node
        has_controller = await self.run_blocking(
            lambda: node.cache.wait_until(lambda snap: snap.controller_id >= 0, timeout_s))
        if not has_controller:
            log.warning("no controller elected after %.1f s; serving without one", timeout_s)
            return
        # The cache can name us a moment before our controller thread marks itself active (requests answered
        # on that thread check both): wait out that moment too, not only the watch.
        deadline = asyncio.get_running_loop().time() + timeout_s
        while (node.cache.snapshot().controller_id == self.broker_id and not node.controller.is_active
               and asyncio.get_running_loop().time() < deadline):
            await asyncio.sleep(0.01)

    def _alter_log_dirs_rate(self, snap: ClusterMetadata) -> int:
        """``replica.alter.log.dirs.io.max.bytes.per.second``: this broker's dynamic value, else server.properties
        (as the replication throttles: a cluster default throttles nothing in Kafka 2.6)."""
        return throttled_rate(snap.broker_config(self.broker_id), ALTER_LOG_DIRS_RATE,
                              self.config.get_int(ALTER_LOG_DIRS_RATE))

    # -- log directory failure ----------------------------------------------------------------------------------------
    def _on_log_dir_failure(self, log_dir: Path, partitions: list[tuple[str, int]]) -> None:
        """The log manager took ``log_dir`` offline (its failure thread calls this)."""
        loop = self._loop
        if loop is None or self._stopped:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._log_dir_failed, log_dir, partitions)

    def _log_dir_failed(self, log_dir: Path, partitions: list[tuple[str, int]]) -> None:
        # Delayed produces and fetches on those partitions answer now (with KAFKA_STORAGE_ERROR), not at their
        # timeout.
        if self._replica_manager is not None:
            self._replica_manager.partitions_changed(partitions)
        lm = self._log_manager
        if lm is not None and not lm.online_log_dirs and self.failed is not None and not self.failed.done():
            reason = f"every log directory is offline ({', '.join(str(d) for d in lm.log_dirs)})"
            log.critical("broker %d is shutting down: %s", self.broker_id, reason)
            self.failed.set_result(reason)
            return
        if self._loop is not None:
            self._periodic.append(self._loop.create_task(self._after_log_dir_failure(partitions),
                                                         name="log dir failure"))

    async def _after_log_dir_failure(self, partitions: list[tuple[str, int]]) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure past the log manager: stop leading and following the offline
        partitions (they answer KAFKA_STORAGE_ERROR until led elsewhere or the broker restarts with the dir), then
        tell the controller, which moves their leaderships to other ISR members and takes this broker out of their
        ISRs (sofakafka/controller/log_dir_failures.py)."""
        rm, lm, node = self._replica_manager, self._log_manager, self._node
        if rm is None or lm is None or node is None:
            return
        for topic, partition in partitions:
            if self._replication is not None:
                await self._replication.fetchers.stop_following((topic, partition))
            await rm.stop_replica(topic, partition, delete=False)
        dirs = [str(d) for d in lm.offline_log_dirs]
        offline = [TopicPartition(t, p) for t, p in lm.offline_partitions]
        for attempt in range(LOG_DIR_FAILURE_REPORT_ATTEMPTS):
            try:
                await self.run_blocking(lambda: node.report_log_dir_failures(dirs, offline))
                return
            except (StoreError, ValueError) as exc:
                if self._stopped:
                    return
                log.warning("telling the controller about the failed log dirs failed (%s); retrying", exc)
                await asyncio.sleep(min(5.0, 0.5 * (attempt + 1)))
        log.error("could not tell the controller about the failed log dirs %s; a new session will", dirs)

    # -- metadata -> hosted partitions ------------------------------------------------------------------------------
    def _on_metadata_changed(self, _snapshot: ClusterMetadata) -> None:
        loop = self._loop
        if loop is None or self._stopped:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed during shutdown
            loop.call_soon_threadsafe(self._schedule_metadata_apply)

    def _schedule_metadata_apply(self) -> None:
        self._metadata_dirty = True
        if self._metadata_task is None or self._metadata_task.done():
            self._metadata_task = asyncio.get_running_loop().create_task(self._apply_metadata_loop())

    async def _apply_metadata_loop(self) -> None:
        while self._metadata_dirty and not self._stopped:
            self._metadata_dirty = False
            try:
                await self._apply_metadata()
            except Exception:
                log.exception("applying a metadata change failed")

    async def _apply_metadata(self) -> None:
        """Lead what the metadata says we lead, stop serving what moved away, follow config changes.

        Runs on every metadata change, so its work is proportional to what changed, not to what the broker holds:
        the partitions looked at are those whose metadata differs from the snapshot applied last
        (``changed_partitions``: the cache keeps the objects of what did not change), plus those a previous pass
        could not settle or that were stopped outside it (``_reapply``); the first pass looks at everything,
        the logs on disk included. The partitions to lead are handed to the replica manager in one batch (their
        logs and epoch checkpoints are written together), and a topic's log config is computed once per topic.
        If a pass fails, the next one starts again from the snapshot applied last, so nothing is skipped.
        """
        snap = self.node.cache.snapshot()
        previous = self._applied
        # Dynamic connection limits (max.connections and its kin): cluster-wide default, then this broker's own.
        dynamic = {**snap.broker_config(None), **snap.broker_config(self.broker_id)}
        await self.server.reconfigure(dynamic)
        self.log_manager.mover.set_rate(self._alter_log_dirs_rate(snap))
        rm = self.replica_manager
        scope: set[tuple[str, int]]
        if previous is None:
            scope = {(p.topic, p.partition) for t in (*snap.topics.values(), *snap.deleting.values())
                     for p in t.partitions.values()}
            scope.update(part.tp for part in rm.partitions)
            scope.update(rm.follower_logs)
            scope.update((lg.topic, lg.partition) for lg in self.log_manager.all_logs)
        else:
            scope = changed_partitions(previous, snap)
        # Taken, not read: a StopReplica during this pass adds to the next pass's set.
        reapply, self._reapply = self._reapply, set()
        scope |= reapply
        try:
            retry = await self._apply_partitions(snap, previous, dynamic, scope)
        except BaseException:
            self._reapply |= reapply
            raise
        self._applied = snap
        self._applied_dynamic = dynamic
        self._reapply |= retry

    async def _apply_partitions(self, snap: ClusterMetadata, previous: ClusterMetadata | None,
                                dynamic: Mapping[str, str], scope: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """``_apply_metadata`` for the partitions of ``scope``; returns those to look at again next time."""
        rm = self.replica_manager
        retry: set[tuple[str, int]] = set()
        to_lead: list[LeaderState] = []
        for tp in sorted(scope):
            p = snap.partition(*tp)
            if p is None or p.leader != self.broker_id:
                continue
            if self.log_manager.is_offline(*tp):
                continue  # its log dir failed: it answers KAFKA_STORAGE_ERROR until the controller moves it
            current = rm.get_partition(tp)
            if current is not None and current.leader_epoch == p.leader_epoch and p.zk_version < current.zk_version:
                continue  # an older state than our own last ISR write: the newer one is on its way
            if (current is None or current.leader_epoch != p.leader_epoch or current.isr != list(p.isr)
                    or current.replicas != list(p.replicas)):
                if current is None and self._replication is not None:
                    await self._replication.before_leading(tp)
                to_lead.append(LeaderState(p.topic, p.partition, p.leader_epoch, tuple(p.replicas), tuple(p.isr),
                                           p.zk_version, p.controller_epoch))
        if to_lead:
            led = {part.tp for part in await rm.become_leaders(to_lead)}
            # A log that could not be opened is tried again on the next pass, as long as we are to lead it.
            retry.update((st.topic, st.partition) for st in to_lead if (st.topic, st.partition) not in led)
        for tp in sorted(scope):
            part = rm.get_partition(tp)
            if part is None or tp[0] in snap.deleting:
                continue
            p = snap.partition(*tp)
            if p is None or p.leader != self.broker_id:
                # Leadership moved elsewhere: stop serving it; replication below makes us its follower. (A topic
                # whose deletion started waits for the controller's StopReplica; one gone altogether was deleted
                # without us, and its log goes in _delete_removed_replicas.)
                await rm.stop_replica(part.topic, part.partition, delete=False)
        if self._replication is not None:
            await self._replication.apply(snap, scope)
            await self._delete_removed_replicas(snap, scope)
        # Log configs: of every log when the dynamic broker defaults changed, else of the partitions in scope (new
        # logs among them) and of every partition of a topic whose overrides changed.
        if previous is None or self._applied_dynamic != dynamic:
            hosted: Iterable[tuple[str, int]] = [part.tp for part in rm.partitions] + list(rm.follower_logs)
        else:
            configured: set[str] = set()
            if previous.topic_configs is not snap.topic_configs:
                for name in previous.topic_configs.keys() | snap.topic_configs.keys():
                    if previous.topic_configs.get(name) is not snap.topic_configs.get(name):
                        configured.add(name)
            hosted = set(scope)
            for name in configured:
                found = snap.topics.get(name) or snap.deleting.get(name)
                hosted.update((name, number) for number in (found.partitions if found is not None else ()))
        logs: list[tuple[str, Log]] = []
        for tp in hosted:
            part = rm.get_partition(tp)
            lg = part.log if part is not None else rm.follower_logs.get(tp)
            if lg is not None:
                logs.append((tp[0], lg))
        configs: dict[str, LogConfig] = {}
        for topic_name, lg in logs:
            cfg = configs.get(topic_name)
            if cfg is None:
                cfg = configs[topic_name] = self.topic_log_config(topic_name, snap)
            if cfg != lg.config:
                lg.update_config(cfg)
        if self._groups is not None:
            # After leadership settled: the coordinator loads the offsets partitions we now lead.
            self._groups.on_metadata_applied(snap)
        if self._txns is not None:
            self._txns.on_metadata_applied(snap)
        return retry

    # -- StopReplica --------------------------------------------------------------------------------------------------
    # StopReplicaSender: the controller (on its thread) asks for the replicas of a topic being deleted. Ours go the
    # local way; another broker's go as a StopReplica request (handlers/stop_replica.py answers it there), sent from
    # a thread of their own so neither the controller thread nor the event loop waits on the network.
    def stop_replicas(self, broker_id: int, partitions: Sequence[TopicPartition]) -> None:
        tps = list(partitions)
        if broker_id != self.broker_id:
            with contextlib.suppress(RuntimeError):  # the executor shut down: we are stopping, and so is the controller
                self._stop_replica_sends.submit(self._send_stop_replica, broker_id, tps)
            return
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(lambda: loop.create_task(self._delete_replicas(broker_id, tps)))

    def _wait_started(self) -> bool:
        """Blocking: wait for the broker's components (False if it stops first)."""
        while not self._components_started.wait(0.5):
            if self._stopped or self._shutdown_begun:
                return False
        return True

    def _send_stop_replica(self, broker_id: int, partitions: list[TopicPartition]) -> None:
        """One StopReplica(delete) round trip, reported to the controller whatever happens: an error makes it ask
        again after its pause, and a broker that died meanwhile is asked again when it registers."""
        if not self._wait_started():
            return
        controller = self.node.controller
        # Read off the controller thread: both are replaced whole, never mutated in place.
        controller_epoch, broker_epoch = controller.epoch, controller.live_broker_epoch(broker_id)
        timeout_s = self.config.get_int("controller.socket.timeout.ms") / 1000.0
        connection = inter_broker_connection(self.node.cache.snapshot(), broker_id,
                                             self.config.inter_broker_listener_name,
                                             client_id=f"broker-{self.broker_id}-controller", timeout_s=timeout_s,
                                             security=self.security.inter_broker)
        results: dict[TopicPartition, ErrorCode]
        if connection is None:
            results = dict.fromkeys(partitions, ErrorCode.BROKER_NOT_AVAILABLE)
        else:
            try:
                with connection:
                    version = connection.supported_version(ApiKey.STOP_REPLICA)
                    request = stop_replica_request(version, controller_id=self.broker_id,
                                                   controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                                                   partitions=partitions, delete=True)
                    response = connection.send(request, version, timeout_s=timeout_s)
                assert isinstance(response, StopReplicaResponse)
                results = partition_errors(response, partitions)
            except (ClientError, KafkaError, DecodeError, OSError) as exc:
                log.warning("StopReplica to broker %d failed: %s", broker_id, exc)
                results = dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        if self._node is not None:
            self._node.controller.replica_deletion_done(broker_id, results)

    async def _delete_replicas(self, broker_id: int, partitions: list[TopicPartition]) -> None:
        if not await asyncio.to_thread(self._wait_started):
            return
        results = await self.stop_partitions({tp: (EPOCH_DURING_DELETE, True) for tp in partitions})
        if self._node is not None:
            self._node.controller.replica_deletion_done(broker_id, results)

    async def stop_partitions(self, partitions: StopRequestPartitions) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ``ReplicaManager.stopReplicas`` once the request's epochs passed: stop fetching and serving each
        partition whose leader epoch allows it (handlers/stop_replica.py says which do) and delete the log of
        those marked ``delete``. Also the controller broker's own replicas' way."""
        rm = self.replica_manager
        results: dict[TopicPartition, ErrorCode] = {}
        stopping: list[TopicPartition] = []
        for tp, (leader_epoch, _) in partitions.items():
            hosted = rm.get_partition((tp.topic, tp.partition))
            current = hosted.leader_epoch if hosted is not None else rm.follower_epochs.get((tp.topic, tp.partition))
            if current is None or leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or leader_epoch > current:
                stopping.append(tp)
            elif leader_epoch < current:
                results[tp] = ErrorCode.FENCED_LEADER_EPOCH
            else:
                results[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
        live = await self._topics_still_live({tp.topic for tp in stopping if partitions[tp][1]})
        # Stopped here, not by a metadata pass: the next pass looks at them whether or not their metadata changes
        # (and follows or leads them again if the metadata says so, as it would have before passes were partial).
        self._reapply.update((tp.topic, tp.partition) for tp in stopping)
        for tp in stopping:
            delete = partitions[tp][1]
            if delete and tp.topic in live:
                results[tp] = ErrorCode.REQUEST_TIMED_OUT
                continue
            if self._replication is not None:
                await self._replication.fetchers.stop_following((tp.topic, tp.partition))
            if delete:
                results[tp] = await self._delete_local_replica(tp)
            else:
                await rm.stop_replica(tp.topic, tp.partition, delete=False)
                results[tp] = ErrorCode.NONE
        return results

    async def _topics_still_live(self, topics: set[str]) -> set[str]:
        """Those of ``topics`` our metadata still serves after a short wait, which must not be deleted: a metadata
        apply working from such a view would follow the partition again and re-create its log (or the request is
        a late one about a topic already deleted and created again). For the rest, an apply from a view without
        them has run before this returns."""
        if not topics:
            return set()
        cache = self.node.cache

        def settled(snap: ClusterMetadata) -> bool:
            return not topics & snap.topics.keys()

        if not await wait_for_metadata(cache, settled, int(STOP_REPLICA_METADATA_WAIT_SECONDS * 1000)):
            live = topics & self.metadata().topics.keys()
            log.warning("StopReplica(delete) of %s while our metadata still has them: refused", sorted(live))
            return live
        self._schedule_metadata_apply()
        task = self._metadata_task
        if task is not None:
            await asyncio.wait({task})
        return set()

    async def _delete_local_replica(self, tp: TopicPartition) -> ErrorCode:
        try:
            if self._replica_manager is not None:
                lg = self.log_manager.get_log(tp.topic, tp.partition)
                cleaner = self._cleaner
                key = lg.dir if lg is not None else None  # a move between log dirs may rename it meanwhile
                if cleaner is not None and key is not None:
                    # A cleaner pass must not be rewriting segments while their directory goes away.
                    await self.run_blocking(functools.partial(cleaner.abort_and_pause_cleaning, key))
                await self._replica_manager.stop_replica(tp.topic, tp.partition, delete=True)
                if cleaner is not None and key is not None:
                    cleaner.resume_cleaning(key)
            return ErrorCode.NONE
        except Exception:
            log.exception("deleting replica %s-%d failed", tp.topic, tp.partition)
            return ErrorCode.KAFKA_STORAGE_ERROR

    async def _delete_removed_replicas(self, snap: ClusterMetadata, scope: Iterable[tuple[str, int]]) -> None:
        """StopReplica(delete=true) of a completed reassignment, in the watch design: a replica the assignment no
        longer names, which neither leads nor is in the ISR (so the state znode agrees it is gone, whichever of the
        two znodes the cache saw first), deletes its log. Replication.apply has already stopped following it.

        The same holds for a topic whose deletion started (the controller asks only the replicas the assignment
        names), and a log of a topic the metadata does not have at all, or of a partition number beyond the
        topic's, was deleted while this broker was away (a replica reassigned away while it was down, then the
        topic deleted): nobody will ever ask for it, so it goes too. Kafka 2.6 would keep such a stray log
        forever. A log can only exist for a topic this broker saw in the tree (logs are created from the
        metadata), and the tree is the cluster's own (the cluster id in meta.properties is checked at start-up).

        Only the logs of ``scope`` are looked at: the partitions whose metadata changed (every log on the first
        pass after start-up)."""
        rm = self.replica_manager
        lm = self.log_manager
        for topic, partition in sorted(scope):
            if lm.get_log(topic, partition) is None:
                continue
            found = snap.topics.get(topic) or snap.deleting.get(topic)
            p = None if found is None else found.partitions.get(partition)
            if p is not None and (self.broker_id in p.replicas or p.leader == self.broker_id
                                  or self.broker_id in p.isr):
                continue
            if rm.get_partition((topic, partition)) is not None or (topic, partition) in rm.follower_logs:
                continue
            if p is not None:
                log.info("%s-%d: no longer a replica (reassigned away); deleting the log", topic, partition)
            else:
                log.warning("%s-%d: stray log of a %s; deleting it", topic, partition,
                            "deleted topic" if found is None else "partition the topic no longer has")
            await self._delete_local_replica(TopicPartition(topic, partition))

    # -- periodic work ------------------------------------------------------------------------------------------------
    def _start_periodic_tasks(self) -> None:
        config = self.config
        lm = self.log_manager
        def retention() -> list[tuple[str, int]]:
            moved: list[tuple[str, int]] = []
            lm.cleanup_logs(moved)
            return moved

        def retention_done(moved: list[tuple[str, int]]) -> None:
            # A leader's log start reaches its followers through their fetch sessions, which must look again.
            if moved and self._replica_manager is not None:
                self._replica_manager.partitions_changed(moved)

        self._every("log retention", config.get_int("log.retention.check.interval.ms"), retention, retention_done)
        flush_interval = config.get_int("log.flush.scheduler.interval.ms")
        if flush_interval < LONG_MAX // 2:
            self._every("log flusher", flush_interval, lm.flush_dirty_logs)
        self._every("recovery-point checkpoint", config.get_int("log.flush.offset.checkpoint.interval.ms"),
                    lm.checkpoint_recovery_points)
        self._every("log-start-offset checkpoint",
                    config.get_int("log.flush.start.offset.checkpoint.interval.ms"), lm.checkpoint_log_start_offsets)
        self._every("high-watermark checkpoint", config.get_int("replica.high.watermark.checkpoint.interval.ms"),
                    lm.checkpoint_high_watermarks)
        # Directories of deleted and moved logs go once file.delete.delay.ms has passed (Kafka's kafka-delete-logs).
        self._every("delete logs", DELETE_LOGS_INTERVAL_MS, lm.delete_due_logs)
        if config.get_bool("log.cleaner.enable"):
            # The log manager owns the cleaner: its truncations and deletions pause it around their work.
            self._cleaner = lm.cleaner
            self._every("log cleaner", config.get_int("log.cleaner.backoff.ms"), lm.clean_compacted_logs)
        self._periodic.append(asyncio.get_running_loop().create_task(self._sweep_filtered_groups(),
                                                                     name="filtered-group members"))
        tokens = self.security.tokens
        if tokens is not None:
            node = self.node

            def expire_tokens() -> None:
                # Kafka's controller runs the scan; the other brokers learn each removal from its notification.
                if node.controller.is_active:
                    tokens.expire_tokens()

            self._every("delegation token expiry", config.get_int("delegation.token.expiry.check.interval.ms"),
                        expire_tokens)

    async def _sweep_filtered_groups(self) -> None:
        """Members of filtered groups that left by session expiry are dropped from what fetches are matched
        against (group_filters.py); joins and leaves are published by their handlers at once."""
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            try:
                await self.group_filters.sweep(self.group_coordinator, self.run_blocking)
            except Exception:
                log.exception("publishing the members of filtered groups failed")

    def _every(self, name: str, interval_ms: int, work: Callable[[], T], then: Callable[[T], None] | None = None
               ) -> None:
        """``work`` on the blocking executor every ``interval_ms``; ``then`` on the loop with its result."""
        if interval_ms <= 0:
            return

        async def run() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000.0)
                try:
                    result = await self.run_blocking(work)
                    if then is not None:
                        then(result)
                except Exception:
                    log.exception("%s failed", name)

        self._periodic.append(asyncio.get_running_loop().create_task(run(), name=name))

    # -- shutdown ------------------------------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        if self._stopped or self._shutdown_begun:
            return
        self._shutdown_begun = True
        await self._controlled_shutdown()
        self._stopped = True
        log.info("sofakafka broker %d shutting down", self.broker_id)
        if self._audit is not None:
            # While the listeners still read: the writer's client may be sending to this very broker.
            await self._audit.stop(flush_timeout_s=2.0)
        await self.server.stop_accepting()
        if self._replication is not None:
            await self._replication.shutdown()
        if self._replica_manager is not None:
            self._replica_manager.begin_shutdown()
        if self._groups is not None:
            await self._groups.shutdown()
        if self._txns is not None:
            await self._txns.shutdown()
        if not await self.server.drain(SHUTDOWN_DRAIN_SECONDS):
            log.warning("closing connections with requests still in flight after %.0f s", SHUTDOWN_DRAIN_SECONDS)
        await self.server.close_connections()
        for task in self._periodic:
            task.cancel()
        for task in self._periodic:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._metadata_task is not None:
            self._metadata_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._metadata_task
        await self._stop_blocking_parts()
        if self._metrics_server is not None:
            await self._metrics.idle.stop()
            await self._metrics_server.stop()
        self.security.close()
        log.info("sofakafka broker %d stopped", self.broker_id)

    async def _controlled_shutdown(self) -> None:
        """Hand our leaderships and ISR places to other brokers while we still serve (Kafka's controlled
        shutdown; sofakafka/broker/controlled_shutdown.py), then apply the moved leadership before anything
        stops, so producers are told NOT_LEADER_OR_FOLLOWER rather than left with a closed connection."""
        config, node = self.config, self._node
        if (not self.started or node is None or config.uses_embedded_store
                or not config.get_bool("controlled.shutdown.enable")):
            return
        sender = ControlledShutdownSender(
            self.broker_id, lambda: node.broker_epoch, node.cache, config.inter_broker_listener_name,
            max_retries=config.get_int("controlled.shutdown.max.retries"),
            retry_backoff_ms=config.get_int("controlled.shutdown.retry.backoff.ms"),
            socket_timeout_ms=config.get_int("controller.socket.timeout.ms"), security=self.security.inter_broker)
        log.info("broker %d: starting controlled shutdown", self.broker_id)
        if not await asyncio.to_thread(sender.run):
            return
        me = self.broker_id

        def moved(snap: ClusterMetadata) -> bool:
            return not any(p.leader == me and len(p.replicas) > 1
                           for t in snap.topics.values() for p in t.partitions.values())

        # The controller wrote the new states before answering: the cache has them within moments.
        if await wait_for_metadata(node.cache, moved, int(CONTROLLED_SHUTDOWN_APPLY_SECONDS * 1000)):
            self._schedule_metadata_apply()
            if self._metadata_task is not None:
                with contextlib.suppress(Exception):
                    await self._metadata_task
        if self._replication is not None:
            # Kafka's controller sends StopReplica to a broker in controlled shutdown for what it follows. A
            # follower that kept fetching would catch up, be added back to an ISR by its leader, and then hold up
            # acks=all from the moment it stops fetching until its registration goes.
            await self._replication.fetchers.shutdown()

    async def _stop_blocking_parts(self) -> None:
        loop = asyncio.get_running_loop()

        def stop() -> None:
            if self._group_filters is not None:
                _quietly("group filters", self._group_filters.close)
            if self._node is not None:
                _quietly("controller", self._node.shutdown)
            if self._replica_manager is not None:
                _quietly("replica manager", self._replica_manager.shutdown_executors)
            if self._log_manager is not None and self._logs_loaded:
                # Only a log manager that loaded its logs may write checkpoints and the clean-shutdown marker:
                # after a failed start-up they would claim that logs nobody recovered are clean.
                _quietly("log manager", self._log_manager.shutdown)
            if self.store is not None:
                _quietly("metadata session", self.store.close)
            if self._metadata_server is not None:
                _quietly("metadata store", self._metadata_server.close)

        await loop.run_in_executor(None, stop)
        self._background.shutdown(wait=True)
        # A send in flight ends by its socket timeout; nobody waits for its report any more.
        self._stop_replica_sends.shutdown(wait=False, cancel_futures=True)


def _quietly(what: str, fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:
        log.exception("stopping the %s failed", what)


async def serve_until(broker: Broker, stop: Awaitable[object]) -> None:
    """Start ``broker``, serve until ``stop`` resolves, then shut down cleanly."""
    try:
        await broker.startup()
        await stop
    finally:
        await broker.shutdown()
