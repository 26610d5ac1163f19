"""A small synchronous Kafka client over our own codec, for the CLI verbs and our tests.

``KafkaClient(bootstrap_servers)`` connects lazily to one bootstrap server, learns the cluster from
Metadata, and routes each request where Kafka routes it: produce, fetch, list offsets and delete records
to the partition's leader; create/delete topics, create partitions and reassignments to the controller; broker config
resources and log dirs to the broker they name; everything else to any broker. Retriable routing errors
(NOT_LEADER_OR_FOLLOWER, NOT_CONTROLLER, LEADER_NOT_AVAILABLE, a closed connection...) refresh metadata
and retry with a short backoff until the call's deadline.

Each API is sent at the highest version both sides speak; ``max_versions`` caps that per API key, so a
test can speak as an old client would. Broker answers are returned as small result objects; error codes
of single items stay in the results (callers decide), while a whole-request failure raises
``sofakafka.protocol.errors.KafkaError``.

It is not a replacement for a production client: one request in flight per connection, no batching
across calls, no consumer groups. Not thread-safe.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TypeVar

from sofakafka.client.connection import BrokerConnection
from sofakafka.client.errors import BrokerConnectionError, NoBrokersAvailableError, RequestTimeoutError
from sofakafka.client.security import ClientSecurity
from sofakafka.protocol import acl
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from sofakafka.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from sofakafka.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from sofakafka.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
)
from sofakafka.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from sofakafka.protocol.messages.create_delegation_token import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)
from sofakafka.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from sofakafka.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from sofakafka.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from sofakafka.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from sofakafka.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from sofakafka.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from sofakafka.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from sofakafka.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from sofakafka.protocol.messages.describe_delegation_token import (
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
)
from sofakafka.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from sofakafka.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from sofakafka.protocol.messages.expire_delegation_token import (
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
)
from sofakafka.protocol.messages.fetch import FetchRequest, FetchResponse
from sofakafka.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from sofakafka.protocol.messages.list_offset import ListOffsetRequest, ListOffsetResponse
from sofakafka.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from sofakafka.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sofakafka.protocol.messages.produce import ProduceRequest, ProduceResponse
from sofakafka.protocol.messages.renew_delegation_token import (
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)
from sofakafka.protocol.records import (
    MAGIC_V0,
    MAGIC_V1,
    BatchHeader,
    CompressionType,
    Record,
    RecordBatchBuilder,
    build_message_set,
    decode_records,
    iter_batches,
)
from sofakafka.protocol.records.buffer import Buffer
from sofakafka.protocol.schema import Request, Response

T = TypeVar("T")
QuotaEntityKey = tuple[tuple[str, str | None], ...]
"""A client quota entity: (entity type, name or None for the default), e.g. (("user", "alice"),)."""

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
CONSUMER_REPLICA_ID = -1


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type wire values."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32
    """Kafka 3.8's number (KIP-848); sofakafka keeps a group's server-side filter there. Answered by the
    group's coordinator: pass its id as ``node_id``."""
    USER = 100
    """sofakafka's own: SCRAM users through DescribeConfigs/IncrementalAlterConfigs (sofakafka.broker.handlers._scram_users)."""


class AlterConfigOp(IntEnum):
    """Kafka's AlterConfigOp.OpType wire values (IncrementalAlterConfigs)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigs config_source wire values."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


# Errors after which a fresh look at the metadata (and another try) can succeed.
_REROUTE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.BROKER_NOT_AVAILABLE,
})


# -- cluster metadata ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class TopicInfo:
    name: str
    error: ErrorCode
    is_internal: bool
    partitions: Mapping[int, PartitionInfo]


@dataclass(frozen=True)
class ClusterMetadata:
    brokers: Mapping[int, BrokerInfo]
    controller_id: int
    cluster_id: str | None
    topics: Mapping[str, TopicInfo]


# -- results ------------------------------------------------------------------------------------------


@dataclass
class NewTopic:
    """A topic to create; -1 partitions / replication factor means the broker's default (CreateTopics v4+)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicConfigEntry:
    name: str
    value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool


@dataclass(frozen=True)
class CreateTopicResult:
    name: str
    error: ErrorCode
    error_message: str | None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[TopicConfigEntry, ...] | None = None


@dataclass(frozen=True)
class PartitionReassignment:
    """An ongoing reassignment: the full replica list and the replicas being added and removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True)
class ItemResult:
    """The outcome for one named thing (a topic, a resource) of an admin request."""

    name: str
    error: ErrorCode
    error_message: str | None = None

    def raise_for_error(self) -> None:
        if self.error != ErrorCode.NONE:
            raise KafkaError(self.error, f"{self.name}: {self.error_message or self.error.name}")


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    config_source: int
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    config_type: int = 0
    documentation: str | None = None


@dataclass(frozen=True)
class ConfigResourceResult:
    resource_type: int
    resource_name: str
    error: ErrorCode
    error_message: str | None
    entries: tuple[ConfigEntry, ...]

    def raise_for_error(self) -> None:
        if self.error != ErrorCode.NONE:
            raise KafkaError(self.error, f"{self.resource_name}: {self.error_message or self.error.name}")


@dataclass(frozen=True)
class ProduceResult:
    topic: str
    partition: int
    base_offset: int
    log_append_time: int
    log_start_offset: int


@dataclass(frozen=True)
class FetchResult:
    topic: str
    partition: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: list[Record]
    # The offset to fetch next: past the last returned record, or past skipped batches (control batches).
    next_offset: int
    # The headers of the batches the records came from (producer id and epoch, sequence, compression): the
    # console's message trace names the producer from them.
    batches: tuple[BatchHeader, ...] = ()


@dataclass(frozen=True)
class OffsetResult:
    topic: str
    partition: int
    offset: int
    timestamp: int
    leader_epoch: int = -1


@dataclass(frozen=True)
class LogDirPartition:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirResult:
    log_dir: str
    error: ErrorCode
    partitions: tuple[LogDirPartition, ...]


@dataclass(frozen=True)
class DelegationToken:
    """A delegation token as the broker describes it; ``hmac`` is its secret (the SCRAM password, base64'd)."""

    token_id: str
    hmac: bytes
    owner: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    expiry_timestamp: int
    max_timestamp: int


def _principal_parts(text: str) -> tuple[str, str]:
    kind, sep, name = text.partition(":")
    if not sep:
        raise ValueError(f"a principal is Type:name, got {text!r}")
    return kind, name


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``host:port[,host:port...]``, IPv6 hosts in brackets; a missing port means 9092 as in Kafka."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest.lstrip(":") or "9092"
        elif item.count(":") == 1:
            host, port = item.split(":")
        else:
            host, port = item, "9092"
        try:
            out.append((host, int(port)))
        except ValueError:
            raise ValueError(f"bad bootstrap server {item!r}: port must be a number") from None
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


class KafkaClient:
    """See the module docstring. ``request_timeout_ms`` bounds every call, retries included."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        client_id: str = "sofakafka-client",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        max_versions: Mapping[int, int] | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security
        self.client_id = client_id
        self.request_timeout_s = request_timeout_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.max_versions: dict[int, int] = dict(max_versions or {})
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._cluster: ClusterMetadata | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()
            self._bootstrap_conn = None

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections and routing ---------------------------------------------------------------------

    def _new_connection(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        conn = BrokerConnection(host, port, client_id=self.client_id, timeout_s=self.request_timeout_s,
                                node_id=node_id, security=self.security)
        conn.connect()
        return conn

    def any_connection(self) -> BrokerConnection:
        """An open connection to some broker: one we already have, else a bootstrap server, else any
        broker the last metadata named."""
        for conn in self._connections.values():
            if conn.connected:
                return conn
        if self._bootstrap_conn is not None and self._bootstrap_conn.connected:
            return self._bootstrap_conn
        errors: list[str] = []
        candidates = list(self.bootstrap)
        if self._cluster is not None:
            candidates += [(b.host, b.port) for b in self._cluster.brokers.values()]
        for host, port in candidates:
            try:
                self._bootstrap_conn = self._new_connection(host, port, None)
                return self._bootstrap_conn
            except (BrokerConnectionError, RequestTimeoutError) as e:
                errors.append(str(e))
        raise NoBrokersAvailableError("no broker reachable: " + "; ".join(errors))

    def connection(self, node_id: int) -> BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is not None and conn.connected:
            return conn
        broker = self.cluster().brokers.get(node_id)
        if broker is None:
            broker = self.metadata().brokers.get(node_id)
        if broker is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id} is not in the cluster metadata")
        conn = self._new_connection(broker.host, broker.port, node_id)
        self._connections[node_id] = conn
        return conn

    def version(self, conn: BrokerConnection, api_key: int) -> int:
        return conn.supported_version(api_key, self.max_versions.get(api_key))

    def send(self, request: Request, *, node_id: int | None = None, version: int | None = None) -> Response:
        """One request to ``node_id`` (or any broker), at ``version`` or the highest common one."""
        conn = self.connection(node_id) if node_id is not None else self.any_connection()
        if version is None:
            version = self.version(conn, request.API_KEY)
        return conn.send(request, version)

    def _deadline(self) -> float:
        return time.monotonic() + self.request_timeout_s

    def _retry(self, deadline: float, attempt: Callable[[], T], what: str,
               retriable: frozenset[ErrorCode] = _REROUTE) -> T:
        """Runs ``attempt`` until it stops raising a ``retriable`` error; refreshes metadata between tries."""
        while True:
            try:
                return attempt()
            except KafkaError as e:
                if e.code not in retriable or time.monotonic() + self.retry_backoff_s >= deadline:
                    raise
            except (BrokerConnectionError, RequestTimeoutError, NoBrokersAvailableError):
                if time.monotonic() + self.retry_backoff_s >= deadline:
                    raise
            time.sleep(self.retry_backoff_s)
            try:
                self.metadata()
            except (BrokerConnectionError, RequestTimeoutError, NoBrokersAvailableError):
                if time.monotonic() >= deadline:
                    raise RequestTimeoutError(f"{what}: no broker answered before the deadline") from None

    # -- metadata ------------------------------------------------------------------------------------

    def cluster(self) -> ClusterMetadata:
        """The last metadata fetched (fetching it once if there is none)."""
        return self._cluster if self._cluster is not None else self.metadata()

    def metadata(self, topics: Sequence[str] | None = None, *,
                 allow_auto_topic_creation: bool = False) -> ClusterMetadata:
        """Metadata for ``topics`` (None: all topics). Brokers and controller are always refreshed; the
        topic map replaces only the topics asked about.

        A broker that fails to answer (it died since we connected) is dropped and the next one asked, so
        one dead broker does not fail a caller that any other broker could serve."""
        tries = len(self.bootstrap) + (len(self._cluster.brokers) if self._cluster is not None else 0)
        for _ in range(tries):
            try:
                return self._metadata_once(topics, allow_auto_topic_creation)
            except (BrokerConnectionError, RequestTimeoutError):
                continue
        return self._metadata_once(topics, allow_auto_topic_creation)

    def _metadata_once(self, topics: Sequence[str] | None, allow_auto_topic_creation: bool) -> ClusterMetadata:
        conn = self.any_connection()
        version = self.version(conn, ApiKey.METADATA)
        wanted: list[MetadataRequest.MetadataRequestTopic] | None
        if topics is None:
            wanted = None if version >= 1 else []
        else:
            wanted = [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        request = MetadataRequest(topics=wanted)
        if version >= 4:
            request.allow_auto_topic_creation = allow_auto_topic_creation
        response = conn.send(request, version)
        assert isinstance(response, MetadataResponse)
        brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        new_topics: dict[str, TopicInfo] = {}
        for t in response.topics:
            parts = {
                p.partition_index: PartitionInfo(
                    t.name, p.partition_index, p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                    tuple(p.isr_nodes), tuple(p.offline_replicas), ErrorCode.for_code(p.error_code))
                for p in t.partitions
            }
            new_topics[t.name] = TopicInfo(t.name, ErrorCode.for_code(t.error_code), t.is_internal, parts)
        if topics is None or self._cluster is None:
            merged = new_topics
        else:
            merged = {**self._cluster.topics, **new_topics}
        self._cluster = ClusterMetadata(brokers, response.controller_id, response.cluster_id, merged)
        for node_id in list(self._connections):
            if node_id not in brokers:
                self._connections.pop(node_id).close()
        return self._cluster

    def topic(self, name: str, *, allow_auto_topic_creation: bool = False) -> TopicInfo:
        """Fresh metadata of one topic; raises KafkaError with the topic's error code if it has one.

        LEADER_NOT_AVAILABLE (a topic being created, e.g. by this very request's auto-creation) is waited
        out until the deadline; an unknown topic is reported at once."""

        def attempt() -> TopicInfo:
            info = self.metadata([name], allow_auto_topic_creation=allow_auto_topic_creation).topics.get(name)
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no metadata for topic {name}")
            if info.error != ErrorCode.NONE:
                raise KafkaError(info.error, f"topic {name}: {info.error.name}")
            return info

        return self._retry(self._deadline(), attempt, "Metadata", frozenset({ErrorCode.LEADER_NOT_AVAILABLE}))

    def leader_for(self, topic: str, partition: int) -> int:
        info = self.cluster().topics.get(topic)
        if info is None or partition not in info.partitions:
            info = self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {partition}")
        if p.leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
        return p.leader

    def controller(self) -> BrokerConnection:
        cluster = self.cluster()
        if cluster.controller_id < 0:
            cluster = self.metadata()
        if cluster.controller_id < 0:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "the cluster has no controller")
        return self.connection(cluster.controller_id)

    def _send_to_controller(self, request: Request) -> Response:
        conn = self.controller()
        return conn.send(request, self.version(conn, request.API_KEY))

    # -- topics --------------------------------------------------------------------------------------

    def create_topics(self, topics: Sequence[NewTopic], *, timeout_ms: int = 30_000,
                      validate_only: bool = False) -> dict[str, CreateTopicResult]:
        request = CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=t.name,
                    num_partitions=-1 if t.assignments else t.num_partitions,
                    replication_factor=-1 if t.assignments else t.replication_factor,
                    assignments=[
                        CreateTopicsRequest.CreatableTopic.CreatableReplicaAssignment(
                            partition_index=p, broker_ids=list(ids))
                        for p, ids in sorted((t.assignments or {}).items())
                    ],
                    configs=[CreateTopicsRequest.CreatableTopic.CreateableTopicConfig(name=k, value=v)
                             for k, v in t.configs.items()],
                )
                for t in topics
            ],
            timeout_ms=timeout_ms,
            validate_only=validate_only,
        )

        def attempt() -> dict[str, CreateTopicResult]:
            response = self._send_to_controller(request)
            assert isinstance(response, CreateTopicsResponse)
            results = {}
            for r in response.topics:
                code = _unless_not_controller(r.error_code, r.error_message)
                configs = None if r.configs is None else tuple(
                    TopicConfigEntry(c.name, c.value, c.read_only, c.config_source, c.is_sensitive)
                    for c in r.configs)
                results[r.name] = CreateTopicResult(r.name, code, r.error_message, r.num_partitions,
                                                    r.replication_factor, configs)
            return results

        return self._retry(self._deadline(), attempt, "CreateTopics")

    def delete_topics(self, names: Sequence[str], *, timeout_ms: int = 30_000) -> dict[str, ItemResult]:
        request = DeleteTopicsRequest(topic_names=list(names), timeout_ms=timeout_ms)

        def attempt() -> dict[str, ItemResult]:
            response = self._send_to_controller(request)
            assert isinstance(response, DeleteTopicsResponse)
            results = {}
            for r in response.responses:
                code = _unless_not_controller(r.error_code)
                results[r.name] = ItemResult(r.name, code)
            return results

        return self._retry(self._deadline(), attempt, "DeleteTopics")

    def create_partitions(self, counts: Mapping[str, int], *,
                          assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
                          timeout_ms: int = 30_000, validate_only: bool = False) -> dict[str, ItemResult]:
        """Raise each topic's partition count to ``counts[topic]``; ``assignments[topic]`` lists the
        replicas of each new partition."""
        assignments = assignments or {}
        request = CreatePartitionsRequest(
            topics=[
                CreatePartitionsRequest.CreatePartitionsTopic(
                    name=name, count=count,
                    assignments=None if name not in assignments else [
                        CreatePartitionsRequest.CreatePartitionsTopic.CreatePartitionsAssignment(
                            broker_ids=list(ids))
                        for ids in assignments[name]
                    ],
                )
                for name, count in counts.items()
            ],
            timeout_ms=timeout_ms,
            validate_only=validate_only,
        )

        def attempt() -> dict[str, ItemResult]:
            response = self._send_to_controller(request)
            assert isinstance(response, CreatePartitionsResponse)
            results = {}
            for r in response.results:
                code = _unless_not_controller(r.error_code, r.error_message)
                results[r.name] = ItemResult(r.name, code, r.error_message)
            return results

        return self._retry(self._deadline(), attempt, "CreatePartitions")

    # -- reassignments (KIP-455) ---------------------------------------------------------------------

    def alter_partition_reassignments(self, reassignments: Mapping[tuple[str, int], Sequence[int] | None], *,
                                      timeout_ms: int = 30_000) -> dict[tuple[str, int], ItemResult]:
        """Start (a replica list) or cancel (None) the reassignment of each ``(topic, partition)``; the results
        say whether each started, not whether it completed."""
        by_topic: dict[str, list[AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition]] = {}
        for (topic, partition), replicas in reassignments.items():
            by_topic.setdefault(topic, []).append(
                AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                    partition_index=partition, replicas=None if replicas is None else list(replicas)))
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=timeout_ms,
            topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()])

        def attempt() -> dict[tuple[str, int], ItemResult]:
            response = self._send_to_controller(request)
            assert isinstance(response, AlterPartitionReassignmentsResponse)
            _raise_top_level(response.error_code, response.error_message)
            return {(t.name, p.partition_index): ItemResult(f"{t.name}-{p.partition_index}",
                                                            ErrorCode.for_code(p.error_code), p.error_message)
                    for t in response.responses for p in t.partitions}

        return self._retry(self._deadline(), attempt, "AlterPartitionReassignments")

    def list_partition_reassignments(self, partitions: Sequence[tuple[str, int]] | None = None, *,
                                     timeout_ms: int = 30_000) -> dict[tuple[str, int], PartitionReassignment]:
        """The ongoing reassignments among ``partitions`` (None: all)."""
        topics = None
        if partitions is not None:
            grouped: dict[str, list[int]] = {}
            for topic, partition in partitions:
                grouped.setdefault(topic, []).append(partition)
            topics = [ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                      for t, ps in grouped.items()]
        request = ListPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=topics)

        def attempt() -> dict[tuple[str, int], PartitionReassignment]:
            response = self._send_to_controller(request)
            assert isinstance(response, ListPartitionReassignmentsResponse)
            _raise_top_level(response.error_code, response.error_message)
            return {(t.name, p.partition_index): PartitionReassignment(
                        tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                    for t in response.topics for p in t.partitions}

        return self._retry(self._deadline(), attempt, "ListPartitionReassignments")

    def elect_leaders(self, partitions: Sequence[tuple[str, int]] | None, *, election_type: int = 0,
                      timeout_ms: int = 30_000) -> dict[tuple[str, int], ItemResult]:
        """ElectLeaders at the controller (0: preferred, 1: unclean; v0 knows only preferred); ``partitions``
        None asks for every partition. Each partition's outcome is returned, ELECTION_NOT_NEEDED included."""
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions or ():
            by_topic.setdefault(t, []).append(p)

        def attempt() -> dict[tuple[str, int], ItemResult]:
            conn = self.controller()
            version = self.version(conn, ApiKey.ELECT_LEADERS)
            if election_type != 0 and version < 1:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "unclean elections need ElectLeaders v1+")
            request = ElectLeadersRequest(
                topic_partitions=None if partitions is None else [
                    ElectLeadersRequest.TopicPartitions(topic=t, partition_id=ps) for t, ps in by_topic.items()],
                timeout_ms=timeout_ms)
            if version >= 1:
                request.election_type = election_type
            response = conn.send(request, version, timeout_s=timeout_ms / 1000 + self.request_timeout_s)
            assert isinstance(response, ElectLeadersResponse)
            if version >= 1:
                _unless_not_controller(response.error_code)
                _raise_top_level(response.error_code, "ElectLeaders failed")
            out: dict[tuple[str, int], ItemResult] = {}
            for r in response.replica_election_results:
                for pr in r.partition_result:
                    code = _unless_not_controller(pr.error_code, pr.error_message)
                    out[(r.topic, pr.partition_id)] = ItemResult(f"{r.topic}-{pr.partition_id}", code,
                                                                 pr.error_message)
            return out

        return self._retry(self._deadline(), attempt, "ElectLeaders")

    # -- configs -------------------------------------------------------------------------------------

    @staticmethod
    def _config_node(resource_type: int, resource_name: str) -> int | None:
        """Broker resources are answered by the broker they name (an empty name: any broker)."""
        if resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and resource_name:
            try:
                return int(resource_name)
            except ValueError:
                return None
        return None

    def describe_configs(self, resources: Sequence[tuple[int, str, Sequence[str] | None]], *,
                         include_synonyms: bool = False,
                         include_documentation: bool = False,
                         node_id: int | None = None) -> list[ConfigResourceResult]:
        """``resources``: (resource type, name, config keys or None for all). ``node_id`` sends them all to
        that broker (a group's coordinator for GROUP resources)."""
        out: list[ConfigResourceResult] = []
        for node, group in self._group_by_config_node([(t, n) for t, n, _ in resources], node_id).items():
            wanted = [r for r in resources if (r[0], r[1]) in group]
            request = DescribeConfigsRequest(
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=t, resource_name=n, configuration_keys=None if keys is None else list(keys))
                    for t, n, keys in wanted
                ],
            )
            conn = self.connection(node) if node is not None else self.any_connection()
            version = self.version(conn, ApiKey.DESCRIBE_CONFIGS)
            if version >= 1:
                request.include_synonyms = include_synonyms
            if version >= 3:
                request.include_documentation = include_documentation
            response = conn.send(request, version)
            assert isinstance(response, DescribeConfigsResponse)
            for r in response.results:
                entries = tuple(
                    ConfigEntry(
                        c.name, c.value, c.read_only,
                        c.is_default if version == 0 else c.config_source == ConfigSource.DEFAULT_CONFIG,
                        c.config_source if version >= 1 else _v0_source(r.resource_type, c.is_default),
                        c.is_sensitive,
                        tuple(ConfigSynonym(s.name, s.value, s.source) for s in c.synonyms),
                        c.config_type, c.documentation,
                    )
                    for c in r.configs
                )
                out.append(ConfigResourceResult(r.resource_type, r.resource_name,
                                                ErrorCode.for_code(r.error_code), r.error_message, entries))
        return out

    def _group_by_config_node(self, resources: Sequence[tuple[int, str]], node_id: int | None = None
                              ) -> dict[int | None, set[tuple[int, str]]]:
        groups: dict[int | None, set[tuple[int, str]]] = {}
        for t, n in resources:
            groups.setdefault(node_id if node_id is not None else self._config_node(t, n), set()).add((t, n))
        return groups

    def alter_configs(self, resources: Mapping[tuple[int, str], Mapping[str, str | None]], *,
                      validate_only: bool = False, node_id: int | None = None) -> list[ConfigResourceResult]:
        """The legacy, non-incremental AlterConfigs: each resource's dynamic configs become exactly these."""
        out: list[ConfigResourceResult] = []
        for node, group in self._group_by_config_node(list(resources), node_id).items():
            request = AlterConfigsRequest(
                resources=[
                    AlterConfigsRequest.AlterConfigsResource(
                        resource_type=t, resource_name=n,
                        configs=[AlterConfigsRequest.AlterConfigsResource.AlterableConfig(name=k, value=v)
                                 for k, v in resources[(t, n)].items()])
                    for t, n in sorted(group)
                ],
                validate_only=validate_only,
            )
            response = self.send(request, node_id=node)
            assert isinstance(response, AlterConfigsResponse)
            out += [ConfigResourceResult(r.resource_type, r.resource_name, ErrorCode.for_code(r.error_code),
                                         r.error_message, ()) for r in response.responses]
        return out

    def incremental_alter_configs(
        self, resources: Mapping[tuple[int, str], Sequence[tuple[str, int, str | None]]], *,
        validate_only: bool = False, node_id: int | None = None,
    ) -> list[ConfigResourceResult]:
        """``resources[(type, name)]`` lists (config name, AlterConfigOp, value) operations."""
        out: list[ConfigResourceResult] = []
        res_cls = IncrementalAlterConfigsRequest.AlterConfigsResource
        for node, group in self._group_by_config_node(list(resources), node_id).items():
            request = IncrementalAlterConfigsRequest(
                resources=[
                    res_cls(resource_type=t, resource_name=n,
                            configs=[res_cls.AlterableConfig(name=k, config_operation=op, value=v)
                                     for k, op, v in resources[(t, n)]])
                    for t, n in sorted(group)
                ],
                validate_only=validate_only,
            )
            response = self.send(request, node_id=node)
            assert isinstance(response, IncrementalAlterConfigsResponse)
            out += [ConfigResourceResult(r.resource_type, r.resource_name, ErrorCode.for_code(r.error_code),
                                         r.error_message, ()) for r in response.responses]
        return out

    # -- client quotas (KIP-546) ------------------------------------------------------------------------

    def describe_client_quotas(self, components: Sequence[tuple[str, int, str | None]], *,
                               strict: bool = False) -> list[tuple[QuotaEntityKey, dict[str, float]]]:
        """(entity, {key: value}) of the stored quotas matching ``components`` ((entity type, match type
        0 exact / 1 default / 2 any, name)); an entity is a tuple of (type, name or None for the default)."""
        comp = DescribeClientQuotasRequest.ComponentData
        request = DescribeClientQuotasRequest(
            components=[comp(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict)
        response = self.send(request)
        assert isinstance(response, DescribeClientQuotasResponse)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode.for_code(response.error_code), response.error_message)
        return [(tuple((e.entity_type, e.entity_name) for e in entry.entity), {v.key: v.value for v in entry.values})
                for entry in response.entries or []]

    def alter_client_quotas(self, alterations: Sequence[tuple[QuotaEntityKey, Sequence[tuple[str, float | None]]]],
                            *, validate_only: bool = False) -> list[ItemResult]:
        """Per alteration (entity, [(key, value, or None to remove)]): its result, named ``type=name,...``."""
        entry = AlterClientQuotasRequest.EntryData
        request = AlterClientQuotasRequest(entries=[
            entry(entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                  ops=[entry.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops])
            for entity, ops in alterations], validate_only=validate_only)
        response = self.send(request)
        assert isinstance(response, AlterClientQuotasResponse)
        return [ItemResult(",".join(f"{e.entity_type}={e.entity_name}" for e in r.entity),
                           ErrorCode.for_code(r.error_code), r.error_message) for r in response.entries]

    # -- ACLs ----------------------------------------------------------------------------------------

    def create_acls(self, bindings: Sequence[acl.AclBinding]) -> list[ItemResult]:
        """One result per binding, in order (``name`` is the binding's text)."""
        creation = CreateAclsRequest.AclCreation
        request = CreateAclsRequest(creations=[
            creation(resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                     resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                     operation=b.entry.operation, permission_type=b.entry.permission_type) for b in bindings])
        response = self.send(request)
        assert isinstance(response, CreateAclsResponse)
        return [ItemResult(f"{b.pattern} {b.entry}", ErrorCode.for_code(r.error_code), r.error_message)
                for b, r in zip(bindings, response.results, strict=True)]

    def describe_acls(self, flt: acl.AclBindingFilter) -> list[acl.AclBinding]:
        p, e = flt.pattern, flt.entry
        request = DescribeAclsRequest(resource_type_filter=p.resource_type, resource_name_filter=p.name,
                                      pattern_type_filter=p.pattern_type, principal_filter=e.principal,
                                      host_filter=e.host, operation=e.operation, permission_type=e.permission_type)
        response = self.send(request)
        assert isinstance(response, DescribeAclsResponse)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode.for_code(response.error_code), response.error_message)
        return [acl.AclBinding(acl.ResourcePattern(acl.ResourceType(r.resource_type), r.resource_name, acl.PatternType(r.pattern_type)),
                           acl.AccessControlEntry(a.principal, a.host, acl.AclOperation(a.operation),
                                              acl.AclPermissionType(a.permission_type)))
                for r in response.resources for a in r.acls]

    def delete_acls(self, filters: Sequence[acl.AclBindingFilter]) -> list[list[acl.AclBinding]]:
        """The bindings each filter deleted; a filter's error raises KafkaError."""
        cls = DeleteAclsRequest.DeleteAclsFilter
        request = DeleteAclsRequest(filters=[
            cls(resource_type_filter=f.pattern.resource_type, resource_name_filter=f.pattern.name,
                pattern_type_filter=f.pattern.pattern_type, principal_filter=f.entry.principal,
                host_filter=f.entry.host, operation=f.entry.operation, permission_type=f.entry.permission_type)
            for f in filters])
        response = self.send(request)
        assert isinstance(response, DeleteAclsResponse)
        out: list[list[acl.AclBinding]] = []
        for r in response.filter_results:
            if r.error_code != ErrorCode.NONE:
                raise KafkaError(ErrorCode.for_code(r.error_code), r.error_message)
            out.append([acl.AclBinding(acl.ResourcePattern(acl.ResourceType(m.resource_type), m.resource_name,
                                                   acl.PatternType(m.pattern_type)),
                                   acl.AccessControlEntry(m.principal, m.host, acl.AclOperation(m.operation),
                                                      acl.AclPermissionType(m.permission_type)))
                        for m in r.matching_acls])
        return out

    # -- delegation tokens (KIP-48; they need a SASL login that is not itself a token) ----------------

    def create_delegation_token(self, renewers: Sequence[str] = (), max_lifetime_ms: int = -1) -> DelegationToken:
        """A token owned by this client's principal; ``renewers`` are ``User:name`` principals; a max lifetime of
        -1 (or any value <= 0) means the broker's ``delegation.token.max.lifetime.ms``."""
        cls = CreateDelegationTokenRequest.CreatableRenewers
        request = CreateDelegationTokenRequest(renewers=[
            cls(principal_type=t, principal_name=n) for t, n in map(_principal_parts, renewers)],
            max_lifetime_ms=max_lifetime_ms)
        response = self.send(request)
        assert isinstance(response, CreateDelegationTokenResponse)
        _raise_top_level(response.error_code, None)
        return DelegationToken(response.token_id, response.hmac, f"{response.principal_type}:{response.principal_name}",
                               tuple(renewers), response.issue_timestamp_ms, response.expiry_timestamp_ms,
                               response.max_timestamp_ms)

    def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1) -> int:
        """The token's new expiry timestamp; -1 renews by the broker's ``delegation.token.expiry.time.ms``."""
        response = self.send(RenewDelegationTokenRequest(hmac=hmac, renew_period_ms=renew_period_ms))
        assert isinstance(response, RenewDelegationTokenResponse)
        _raise_top_level(response.error_code, None)
        return response.expiry_timestamp_ms

    def expire_delegation_token(self, hmac: bytes, expiry_period_ms: int = -1) -> int:
        """The token's new expiry timestamp; a negative period ends the token at once."""
        response = self.send(ExpireDelegationTokenRequest(hmac=hmac, expiry_time_period_ms=expiry_period_ms))
        assert isinstance(response, ExpireDelegationTokenResponse)
        _raise_top_level(response.error_code, None)
        return response.expiry_timestamp_ms

    def describe_delegation_tokens(self, owners: Sequence[str] | None = None) -> list[DelegationToken]:
        """The tokens this principal may see; ``owners`` (``Type:name``) keeps those they own or renew."""
        cls = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
        request = DescribeDelegationTokenRequest(owners=None if owners is None else [
            cls(principal_type=t, principal_name=n) for t, n in map(_principal_parts, owners)])
        response = self.send(request)
        assert isinstance(response, DescribeDelegationTokenResponse)
        _raise_top_level(response.error_code, None)
        return [DelegationToken(t.token_id, t.hmac, f"{t.principal_type}:{t.principal_name}",
                                tuple(f"{r.principal_type}:{r.principal_name}" for r in t.renewers),
                                t.issue_timestamp, t.expiry_timestamp, t.max_timestamp) for t in response.tokens]

    # -- log dirs ------------------------------------------------------------------------------------

    def describe_log_dirs(self, node_id: int, topics: Mapping[str, Sequence[int]] | None = None) -> list[LogDirResult]:
        """Log dirs of one broker; ``topics`` None asks about every partition it hosts."""
        request = DescribeLogDirsRequest(
            topics=None if topics is None else [
                DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partition_index=list(ps))
                for t, ps in topics.items()
            ])
        response = self.send(request, node_id=node_id)
        assert isinstance(response, DescribeLogDirsResponse)
        return [
            LogDirResult(
                r.log_dir, ErrorCode.for_code(r.error_code),
                tuple(LogDirPartition(t.name, p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                      for t in r.topics for p in t.partitions))
            for r in response.results
        ]

    def alter_replica_log_dirs(self, node_id: int,
                               moves: Mapping[tuple[str, int], str]) -> dict[tuple[str, int], ErrorCode]:
        """Move replicas of broker ``node_id`` between its log dirs: partition -> absolute dir path, as that
        broker's DescribeLogDirs names it. The error per partition (NONE: moving, or there already)."""
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (topic, partition), path in moves.items():
            by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
        D = AlterReplicaLogDirsRequest.AlterReplicaLogDir
        request = AlterReplicaLogDirsRequest(dirs=[
            D(path=path, topics=[D.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()])
            for path, topics in by_dir.items()])
        response = self.send(request, node_id=node_id)
        assert isinstance(response, AlterReplicaLogDirsResponse)
        return {(r.topic_name, p.partition_index): ErrorCode.for_code(p.error_code)
                for r in response.results for p in r.partitions}

    # -- produce -------------------------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        partition: int,
        records: Sequence[Record],
        *,
        acks: int = 1,
        compression: int = CompressionType.NONE,
        timeout_ms: int = 30_000,
    ) -> ProduceResult | None:
        """Append ``records`` (offsets ignored; keys, values, headers and timestamps kept) to one partition.

        Returns None for acks=0, where the broker does not answer. The record format follows the Produce
        version: v3+ a v2 batch, v2 magic 1, v0-1 magic 0 (headers cannot be carried there)."""
        if not records:
            raise ValueError("nothing to produce")

        def attempt() -> ProduceResult | None:
            conn = self.connection(self.leader_for(topic, partition))
            version = self.version(conn, ApiKey.PRODUCE)
            request = ProduceRequest(
                acks=acks,
                timeout_ms=timeout_ms,
                topics=[ProduceRequest.TopicProduceData(
                    name=topic,
                    partitions=[ProduceRequest.TopicProduceData.PartitionProduceData(
                        partition_index=partition, records=_encode_records(records, version, compression))])],
            )
            if version >= 3:
                request.transactional_id = None
            if acks == 0:
                conn.send_no_response(request, version)
                return None
            response = conn.send(request, version, timeout_s=timeout_ms / 1000 + self.request_timeout_s)
            assert isinstance(response, ProduceResponse)
            p = response.responses[0].partitions[0]
            code = ErrorCode.for_code(p.error_code)
            if code != ErrorCode.NONE:
                detail = p.error_message or "; ".join(
                    f"record {e.batch_index}: {e.batch_index_error_message}" for e in p.record_errors)
                raise KafkaError(code, f"produce to {topic}-{partition}: {detail or code.name}")
            return ProduceResult(topic, partition, p.base_offset, p.log_append_time_ms, p.log_start_offset)

        return self._retry(self._deadline(), attempt, "Produce")

    # -- fetch ---------------------------------------------------------------------------------------

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 1 << 20,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> FetchResult:
        """One fetch from the leader; returns the records at or after ``offset`` (control records left out).

        A partition error raises KafkaError (e.g. OFFSET_OUT_OF_RANGE) once rerouting could not help."""

        def attempt() -> FetchResult:
            conn = self.connection(self.leader_for(topic, partition))
            response = self._send_fetch(conn, topic, {partition: offset}, max_wait_ms=max_wait_ms,
                                        min_bytes=min_bytes, max_bytes=max_bytes, partition_max_bytes=max_bytes,
                                        isolation_level=isolation_level)
            result = _fetch_result(topic, response.topics[0].partitions[0], offset)
            if isinstance(result, KafkaError):
                raise result
            return result

        return self._retry(self._deadline(), attempt, "Fetch")

    def fetch_many(
        self,
        topic: str,
        offsets: Mapping[int, int],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 1 << 20,
        partition_max_bytes: int = 1 << 20,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> dict[int, FetchResult | KafkaError]:
        """Fetch several partitions of ``topic`` at once: one request per leader, each waiting up to
        ``max_wait_ms`` for ``min_bytes``. Each partition gets its result or the KafkaError it got; after a
        rerouting error the client's metadata is refreshed, so calling again goes to the new leader."""
        deadline = self._deadline()
        by_leader: dict[int, list[int]] = {}
        for p in offsets:
            leader = self._retry(deadline, functools.partial(self.leader_for, topic, p), "Fetch")
            by_leader.setdefault(leader, []).append(p)
        out: dict[int, FetchResult | KafkaError] = {}
        for leader, parts in by_leader.items():
            conn = self.connection(leader)
            response = self._send_fetch(conn, topic, {p: offsets[p] for p in parts}, max_wait_ms=max_wait_ms,
                                        min_bytes=min_bytes, max_bytes=max_bytes,
                                        partition_max_bytes=partition_max_bytes, isolation_level=isolation_level)
            for t in response.topics:
                for r in t.partitions:
                    out[r.partition_index] = _fetch_result(topic, r, offsets[r.partition_index])
        if any(isinstance(r, KafkaError) and r.code in _REROUTE for r in out.values()):
            self.metadata([topic])
        return out

    def _send_fetch(self, conn: BrokerConnection, topic: str, offsets: Mapping[int, int], *, max_wait_ms: int,
                    min_bytes: int, max_bytes: int, partition_max_bytes: int,
                    isolation_level: int) -> FetchResponse:
        """One consumer Fetch of ``topic``'s partitions at ``offsets``; a request-level error raises, partition
        errors are left in the response for the caller (one partition's failure is not the others')."""
        version = self.version(conn, ApiKey.FETCH)
        request = FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            max_wait=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            topics=[FetchRequest.FetchableTopic(
                name=topic,
                fetch_partitions=[FetchRequest.FetchableTopic.FetchPartition(
                    partition_index=p, fetch_offset=offset, max_bytes=partition_max_bytes)
                    for p, offset in offsets.items()])],
        )
        if version >= 4:
            request.isolation_level = isolation_level
        response = conn.send(request, version, timeout_s=max_wait_ms / 1000 + self.request_timeout_s)
        assert isinstance(response, FetchResponse)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode.for_code(response.error_code), "fetch failed")
        return response

    # -- offsets -------------------------------------------------------------------------------------

    def list_offsets(self, topic: str, timestamps: Mapping[int, int], *,
                     isolation_level: int = READ_UNCOMMITTED) -> dict[int, OffsetResult]:
        """For each partition, the offset of the first record at or after its timestamp (-1: the end,
        -2: the log start). An offset of -1 in the result means no such record."""
        deadline = self._deadline()
        return {
            p: self._retry(deadline, functools.partial(self._list_one, topic, p, ts, isolation_level), "ListOffsets")
            for p, ts in timestamps.items()
        }

    def _list_one(self, topic: str, partition: int, timestamp: int, isolation_level: int) -> OffsetResult:
        conn = self.connection(self.leader_for(topic, partition))
        version = self.version(conn, ApiKey.LIST_OFFSETS)
        part = ListOffsetRequest.ListOffsetTopic.ListOffsetPartition(partition_index=partition, timestamp=timestamp)
        if version == 0:
            part.max_num_offsets = 1
        if version >= 4:
            part.current_leader_epoch = -1
        request = ListOffsetRequest(replica_id=CONSUMER_REPLICA_ID,
                                    topics=[ListOffsetRequest.ListOffsetTopic(name=topic, partitions=[part])])
        if version >= 2:
            request.isolation_level = isolation_level
        response = conn.send(request, version)
        assert isinstance(response, ListOffsetResponse)
        r = response.topics[0].partitions[0]
        code = ErrorCode.for_code(r.error_code)
        if code != ErrorCode.NONE:
            raise KafkaError(code, f"list offsets of {topic}-{partition}: {code.name}")
        if version == 0:
            offset = r.old_style_offsets[0] if r.old_style_offsets else -1
            return OffsetResult(topic, partition, offset, -1)
        return OffsetResult(topic, partition, r.offset, r.timestamp, r.leader_epoch if version >= 4 else -1)

    def delete_records(self, topic: str, offsets: Mapping[int, int], *,
                       timeout_ms: int = 30_000) -> dict[int, int | KafkaError]:
        """Move each partition's log start offset up to ``offsets[p]`` (-1: the high watermark); returns
        the new low watermark per partition, or the KafkaError that partition got."""
        out: dict[int, int | KafkaError] = {}
        deadline = self._deadline()
        for p, offset in offsets.items():
            def attempt(p: int = p, offset: int = offset) -> int:
                conn = self.connection(self.leader_for(topic, p))
                request = DeleteRecordsRequest(
                    topics=[DeleteRecordsRequest.DeleteRecordsTopic(
                        name=topic, partitions=[DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(
                            partition_index=p, offset=offset)])],
                    timeout_ms=timeout_ms)
                response = conn.send(request, self.version(conn, ApiKey.DELETE_RECORDS))
                assert isinstance(response, DeleteRecordsResponse)
                r = response.topics[0].partitions[0]
                code = ErrorCode.for_code(r.error_code)
                if code != ErrorCode.NONE:
                    raise KafkaError(code, f"delete records of {topic}-{p} before {offset}: {code.name}")
                return r.low_watermark

            try:
                out[p] = self._retry(deadline, attempt, "DeleteRecords")
            except KafkaError as e:
                out[p] = e
        return out


def _v0_source(resource_type: int, is_default: bool) -> int:
    """DescribeConfigs v0 carries only is_default; name the source the way Kafka's AdminClient does."""
    if is_default:
        return ConfigSource.DEFAULT_CONFIG
    if resource_type == ConfigResourceType.TOPIC:
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    return ConfigSource.UNKNOWN


def _encode_records(records: Sequence[Record], produce_version: int, compression: int) -> bytes:
    now = int(time.time() * 1000)
    if produce_version >= 3:
        builder = RecordBatchBuilder(compression=compression)
        for i, r in enumerate(records):
            builder.append_record(i, r.timestamp if r.timestamp >= 0 else now, r.key, r.value, r.headers)
        return builder.build()
    if compression == CompressionType.ZSTD:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7+")
    magic = MAGIC_V1 if produce_version >= 2 else MAGIC_V0
    if any(r.headers for r in records):
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Produce v{produce_version} cannot carry record headers")
    legacy = [Record(i, (r.timestamp if r.timestamp >= 0 else now) if magic == MAGIC_V1 else -1, r.key, r.value)
              for i, r in enumerate(records)]
    return build_message_set(legacy, magic=magic, compression=compression)


def _raise_top_level(error_code: int, message: str | None) -> None:
    code = ErrorCode.for_code(error_code)
    if code != ErrorCode.NONE:
        raise KafkaError(code, message)


def _unless_not_controller(error_code: int, message: str | None = None) -> ErrorCode:
    """A controller request's per-item code; NOT_CONTROLLER raises so the retry loop finds the new
    controller and sends the whole request again."""
    code = ErrorCode.for_code(error_code)
    if code == ErrorCode.NOT_CONTROLLER:
        raise KafkaError(code, message)
    return code


def _fetch_result(topic: str, p: FetchResponse.FetchableTopicResponse.FetchablePartitionResponse,
                  fetch_offset: int) -> FetchResult | KafkaError:
    code = ErrorCode.for_code(p.error_code)
    if code != ErrorCode.NONE:
        return KafkaError(code, f"fetch from {topic}-{p.partition_index} at offset {fetch_offset}: {code.name}")
    records, next_offset, batches = _decode_fetched(p.records or b"", fetch_offset)
    return FetchResult(topic, p.partition_index, p.high_watermark, p.last_stable_offset, p.log_start_offset,
                       records, next_offset, batches)


def _decode_fetched(data: Buffer, fetch_offset: int) -> tuple[list[Record], int, tuple[BatchHeader, ...]]:
    """Records at or after ``fetch_offset`` from a fetched record set, and the headers of the batches that
    held them; a partial trailing batch (the broker may cut the set at max_bytes) is left for the next fetch."""
    out: list[Record] = []
    batches: list[BatchHeader] = []
    next_offset = fetch_offset
    for header in iter_batches(data):
        next_offset = max(next_offset, header.next_offset)
        if header.is_control or header.last_offset < fetch_offset:
            continue
        batches.append(header)
        out += [r for r in decode_records(data, header) if r.offset >= fetch_offset]
    return out, next_offset, tuple(batches)
