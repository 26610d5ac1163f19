"""What the console's pages show, read from the cluster over the wire with :class:`KafkaClient`.

Every function takes a client and returns plain data; none keeps a connection or a thread of its own, so
the web app runs them in its worker threads and ``sofakafka query`` runs them in the terminal. Bad input
raises :class:`ConsoleError` with a sentence for a person; the cluster's own failures stay
``KafkaError``/``ClientError`` and the caller turns them into a message (:func:`describe_failure`).

A broker that is down is not in the Metadata answer (its registration is gone) but still named by the
partitions it hosts; :class:`BrokerMemory` also remembers every broker the console has seen, so a broker
that died shows as down instead of vanishing. Each broker's own questions (DescribeLogDirs) go to that
broker alone, and one that does not answer is shown as such while the rest of the page is served.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sofakafka.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AlterConfigOp,
    BrokerInfo,
    ClientError,
    ClusterMetadata,
    ConfigEntry,
    ConfigResourceType,
    ConfigSource,
    KafkaClient,
    NewTopic,
    PartitionInfo,
)
from sofakafka.client.groups import CommittedOffset, GroupAdmin, GroupDescription, MemberDescription
from sofakafka.protocol.errors import ErrorCode, KafkaError

TopicPartition = tuple[str, int]


class ConsoleError(Exception):
    """Bad input or a state the operator must change; the message is shown as it is."""


def describe_failure(exc: BaseException) -> str:
    """A sentence for a failure of the cluster or the network (never a traceback)."""
    if isinstance(exc, ConsoleError):
        return str(exc)
    if isinstance(exc, KafkaError):
        text = f"the cluster answered {exc.code.name}"
        return f"{text} ({exc.message})" if exc.message and exc.message != exc.code.name else text
    if isinstance(exc, ClientError):
        return f"no answer from the cluster: {exc}"
    return f"unexpected failure: {type(exc).__name__}"


# -- brokers ---------------------------------------------------------------------------------------------


class BrokerMemory:
    """Every broker the console has seen in a Metadata answer (thread-safe), so a dead one stays listed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[int, BrokerInfo] = {}

    def remember(self, brokers: Iterable[BrokerInfo]) -> None:
        with self._lock:
            for b in brokers:
                self._seen[b.node_id] = b

    def known(self) -> dict[int, BrokerInfo]:
        with self._lock:
            return dict(self._seen)


@dataclass(frozen=True)
class LogDirUse:
    path: str
    error: str | None
    size: int


@dataclass(frozen=True)
class BrokerRow:
    node_id: int
    host: str
    port: int
    rack: str | None
    status: str
    """``up``; ``down`` (not registered: dead or stopped); ``not answering`` (registered, no answer)."""
    is_controller: bool
    leaders: int
    replicas: int
    disk_bytes: int | None
    log_dirs: tuple[LogDirUse, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class ClusterOverview:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerRow, ...]
    topics: int
    partitions: int
    under_replicated: tuple[PartitionInfo, ...]
    offline: tuple[PartitionInfo, ...]
    sizes: Mapping[tuple[str, int, int], int]
    """(topic, partition, broker) -> bytes on that broker, for the brokers that answered."""


def is_under_replicated(p: PartitionInfo) -> bool:
    return len(p.isr) < len(p.replicas)


def is_offline(p: PartitionInfo) -> bool:
    return p.leader < 0


def cluster_overview(client: KafkaClient, memory: BrokerMemory) -> ClusterOverview:
    """Brokers (with disk use from DescribeLogDirs), partition health, and replica sizes."""
    md = client.metadata()
    memory.remember(md.brokers.values())
    partitions = [p for t in md.topics.values() for p in t.partitions.values()]
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    named: set[int] = set()
    for p in partitions:
        if p.leader >= 0:
            leaders[p.leader] = leaders.get(p.leader, 0) + 1
        for r in p.replicas:
            replicas[r] = replicas.get(r, 0) + 1
            named.add(r)
    known = memory.known()
    rows: list[BrokerRow] = []
    sizes: dict[tuple[str, int, int], int] = {}
    for node_id in sorted(set(known) | named | set(md.brokers)):
        info = md.brokers.get(node_id) or known.get(node_id)
        host, port, rack = (info.host, info.port, info.rack) if info is not None else ("?", 0, None)
        base = BrokerRow(node_id, host, port, rack, "down", node_id == md.controller_id,
                         leaders.get(node_id, 0), replicas.get(node_id, 0), None)
        if node_id not in md.brokers:
            rows.append(base)
            continue
        try:
            dirs = client.describe_log_dirs(node_id)
        except (KafkaError, ClientError) as exc:
            rows.append(dataclasses.replace(base, status="not answering", error=describe_failure(exc)))
            continue
        uses = []
        for d in dirs:
            total = 0
            for lp in d.partitions:
                if not lp.is_future:
                    sizes[(lp.topic, lp.partition, node_id)] = lp.size
                    total += lp.size
            uses.append(LogDirUse(d.log_dir, None if d.error == ErrorCode.NONE else d.error.name, total))
        rows.append(dataclasses.replace(base, status="up", disk_bytes=sum(u.size for u in uses),
                                        log_dirs=tuple(uses)))
    return ClusterOverview(
        md.cluster_id, md.controller_id, tuple(rows), len(md.topics), len(partitions),
        tuple(sorted((p for p in partitions if is_under_replicated(p)), key=lambda p: (p.topic, p.partition))),
        tuple(sorted((p for p in partitions if is_offline(p)), key=lambda p: (p.topic, p.partition))),
        sizes)


# -- topics ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    size: int | None
    """Bytes of the leader replicas that answered (None when no leader's broker answered)."""


def topic_rows(overview: ClusterOverview, md: ClusterMetadata) -> list[TopicRow]:
    rows = []
    for name in sorted(md.topics):
        t = md.topics[name]
        ps = list(t.partitions.values())
        leader_sizes = [overview.sizes.get((name, p.partition, p.leader)) for p in ps]
        known_sizes = [s for s in leader_sizes if s is not None]
        rows.append(TopicRow(name, t.is_internal, len(ps), max((len(p.replicas) for p in ps), default=0),
                             sum(1 for p in ps if is_under_replicated(p)), sum(1 for p in ps if is_offline(p)),
                             sum(known_sizes) if known_sizes else None))
    return rows


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    log_start: int | None
    log_end: int | None
    size: int | None
    under_replicated: bool
    error: str | None = None


@dataclass(frozen=True)
class TopicDetail:
    name: str
    internal: bool
    partitions: tuple[PartitionRow, ...]
    configs: tuple[ConfigEntry, ...]
    configs_error: str | None = None


def require_topic(client: KafkaClient, name: str) -> None:
    """Raises ConsoleError for a topic the cluster does not know."""
    if not name:
        raise ConsoleError("no topic given")
    try:
        client.topic(name)
    except KafkaError as exc:
        if exc.code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION):
            raise ConsoleError(f"topic {name!r} does not exist") from None
        raise


def topic_detail(client: KafkaClient, name: str, overview: ClusterOverview) -> TopicDetail:
    require_topic(client, name)
    info = client.cluster().topics[name]
    starts, ends, errors = _offset_bounds(client, name, sorted(info.partitions))
    rows = []
    for p in sorted(info.partitions.values(), key=lambda p: p.partition):
        rows.append(PartitionRow(p.partition, p.leader, p.replicas, p.isr, p.offline_replicas,
                                 starts.get(p.partition), ends.get(p.partition),
                                 overview.sizes.get((name, p.partition, p.leader)), is_under_replicated(p),
                                 errors.get(p.partition)))
    configs: tuple[ConfigEntry, ...] = ()
    configs_error = None
    try:
        result = client.describe_configs([(ConfigResourceType.TOPIC, name, None)])[0]
        result.raise_for_error()
        configs = tuple(sorted(result.entries, key=lambda e: e.name))
    except (KafkaError, ClientError) as exc:
        configs_error = describe_failure(exc)
    return TopicDetail(name, info.is_internal, tuple(rows), configs, configs_error)


def _offset_bounds(client: KafkaClient, topic: str, partitions: Sequence[int]
                   ) -> tuple[dict[int, int], dict[int, int], dict[int, str]]:
    """Log start and end offsets per partition; a partition whose leader cannot answer gets an error."""
    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    errors: dict[int, str] = {}
    for p in partitions:
        try:
            starts[p] = client.list_offsets(topic, {p: EARLIEST_TIMESTAMP})[p].offset
            ends[p] = client.list_offsets(topic, {p: LATEST_TIMESTAMP})[p].offset
        except (KafkaError, ClientError) as exc:
            errors[p] = describe_failure(exc)
    return starts, ends, errors


def create_topic(client: KafkaClient, name: str, partitions: int, replication_factor: int,
                 configs: Mapping[str, str]) -> str:
    name = name.strip()
    if not name:
        raise ConsoleError("a topic needs a name")
    result = client.create_topics([NewTopic(name, partitions, replication_factor, configs=dict(configs))])[name]
    if result.error != ErrorCode.NONE:
        raise ConsoleError(f"topic {name!r} was not created: {result.error.name}"
                           + (f" ({result.error_message})" if result.error_message else ""))
    return f"Created topic {name}."


def delete_topic(client: KafkaClient, name: str) -> str:
    require_topic(client, name)
    result = client.delete_topics([name])[name]
    if result.error != ErrorCode.NONE:
        raise ConsoleError(f"topic {name!r} was not deleted: {result.error.name}"
                           + (f" ({result.error_message})" if result.error_message else ""))
    return f"Topic {name} is marked for deletion."


def alter_topic_config(client: KafkaClient, name: str, key: str, value: str | None) -> str:
    """Sets (``value``) or removes (None: back to the default) one dynamic topic config."""
    require_topic(client, name)
    key = key.strip()
    if not key:
        raise ConsoleError("no config name given")
    op = (key, AlterConfigOp.DELETE, None) if value is None else (key, AlterConfigOp.SET, value)
    result = client.incremental_alter_configs({(ConfigResourceType.TOPIC, name): [op]})[0]
    if result.error != ErrorCode.NONE:
        raise ConsoleError(f"config {key} of {name} was not changed: {result.error.name}"
                           + (f" ({result.error_message})" if result.error_message else ""))
    return f"Removed {key} from {name}." if value is None else f"Set {key}={value} on {name}."


def add_partitions(client: KafkaClient, name: str, total: int) -> str:
    require_topic(client, name)
    result = client.create_partitions({name: total})[name]
    if result.error != ErrorCode.NONE:
        raise ConsoleError(f"partitions of {name} were not added: {result.error.name}"
                           + (f" ({result.error_message})" if result.error_message else ""))
    return f"{name} now has {total} partitions."


def is_dynamic(entry: ConfigEntry) -> bool:
    return entry.config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG


# -- consumer groups -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LagRow:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    lag: int | None
    member_id: str | None
    client_id: str | None
    host: str | None


@dataclass(frozen=True)
class GroupDetail:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: tuple[MemberDescription, ...]
    lags: tuple[LagRow, ...]
    errors: tuple[str, ...] = ()

    @property
    def total_lag(self) -> int:
        return sum(r.lag for r in self.lags if r.lag is not None)


@dataclass(frozen=True)
class GroupRow:
    group_id: str
    state: str
    protocol_type: str
    members: int
    total_lag: int | None
    error: str | None = None


def log_end_offsets(client: KafkaClient, partitions: Iterable[TopicPartition]
                    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    return list_offsets_at(client, partitions, LATEST_TIMESTAMP)


def list_offsets_at(client: KafkaClient, partitions: Iterable[TopicPartition], timestamp: int
                    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    out: dict[TopicPartition, int] = {}
    errors: dict[TopicPartition, str] = {}
    for topic, ps in sorted(by_topic.items()):
        for p in sorted(ps):
            try:
                out[(topic, p)] = client.list_offsets(topic, {p: timestamp})[p].offset
            except (KafkaError, ClientError) as exc:
                errors[(topic, p)] = describe_failure(exc)
    return out, errors


def group_detail(client: KafkaClient, group_id: str) -> GroupDetail:
    admin = GroupAdmin(client)
    desc = admin.describe_group(group_id)
    if desc.error != ErrorCode.NONE:
        raise ConsoleError(f"group {group_id!r} cannot be described: {desc.error.name}")
    if desc.state == "Dead":
        raise ConsoleError(f"group {group_id!r} does not exist")
    committed = admin.fetch_offsets(group_id)
    return _detail(client, desc, committed)


def _detail(client: KafkaClient, desc: GroupDescription, committed: Mapping[TopicPartition, CommittedOffset]
            ) -> GroupDetail:
    owner: dict[TopicPartition, MemberDescription] = {}
    for m in desc.members:
        for tp in m.assignment:
            owner[tp] = m
    partitions = sorted(set(committed) | set(owner))
    ends, errors = log_end_offsets(client, partitions)
    rows = []
    for tp in partitions:
        c = committed.get(tp)
        end = ends.get(tp)
        member = owner.get(tp)
        lag = max(0, end - c.offset) if c is not None and end is not None and end >= 0 else None
        rows.append(LagRow(tp[0], tp[1], c.offset if c is not None else None, end, lag,
                           member.member_id if member else None, member.client_id if member else None,
                           member.client_host if member else None))
    return GroupDetail(desc.group_id, desc.state, desc.protocol_type, desc.protocol, desc.coordinator,
                       desc.members, tuple(rows),
                       tuple(f"{t}-{p}: {e}" for (t, p), e in sorted(errors.items())))


def group_rows(client: KafkaClient) -> list[GroupRow]:
    admin = GroupAdmin(client)
    rows = []
    for listing in admin.list_groups():
        try:
            detail = group_detail(client, listing.group_id)
        except (ConsoleError, KafkaError, ClientError) as exc:
            rows.append(GroupRow(listing.group_id, listing.state or "?", listing.protocol_type, 0, None,
                                 describe_failure(exc)))
            continue
        rows.append(GroupRow(detail.group_id, detail.state, detail.protocol_type, len(detail.members),
                             detail.total_lag if detail.lags else 0))
    return rows


def group_lag(client: KafkaClient, group_id: str) -> int | None:
    """The group's total lag, or None when the group is gone."""
    try:
        return group_detail(client, group_id).total_lag
    except ConsoleError:
        return None


# -- trace: which groups committed past a record ---------------------------------------------------------


@dataclass(frozen=True)
class GroupPosition:
    group_id: str
    state: str
    committed: int | None
    consumed: bool
    """True when the group's committed offset is past the record (it has consumed it)."""


@dataclass(frozen=True)
class GroupsPast:
    positions: tuple[GroupPosition, ...]
    scanned_groups: int
    total_groups: int
    errors: tuple[str, ...] = field(default_factory=tuple)


def groups_past(client: KafkaClient, topic: str, partition: int, offset: int, *, max_groups: int = 500
                ) -> GroupsPast:
    """Every group with a committed offset on ``topic-partition``: has it committed past ``offset``?"""
    admin = GroupAdmin(client)
    listed = admin.list_groups()
    positions = []
    errors = []
    for g in listed[:max_groups]:
        try:
            committed = admin.fetch_offsets(g.group_id, [(topic, partition)]).get((topic, partition))
        except (KafkaError, ClientError) as exc:
            errors.append(f"{g.group_id}: {describe_failure(exc)}")
            continue
        if committed is None:
            continue
        positions.append(GroupPosition(g.group_id, g.state, committed.offset, committed.offset > offset))
    return GroupsPast(tuple(positions), min(len(listed), max_groups), len(listed), tuple(errors))


def now_ms() -> int:
    return int(time.time() * 1000)
