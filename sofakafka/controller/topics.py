"""Topic and config administration over the metadata tree: what Kafka 2.6's AdminZkClient and the admin
manager do when CreateTopics, DeleteTopics, CreatePartitions and (Incremental)AlterConfigs arrive.

These functions only *write the request* into the tree, as Kafka's admin path does; the controller
(:mod:`sofakafka.controller.kafka_controller`) reacts to the writes through its watches: it elects leaders of
new partitions and writes their ``state`` znodes, and it carries out deletions. A handler that must answer only
once the change took effect (CreateTopics waits for leaders, DeleteTopics for the topic to vanish) waits on the
:class:`~sofakafka.controller.metadata.MetadataCache`, e.g.
``cache.wait_until(lambda snap: snap.has_leaders(name), timeout)``.

Public API (all methods block on the store; call them from a worker thread in asyncio code)::

    admin = TopicAdmin(store, default_num_partitions=1, default_replication_factor=1)
    admin.create_topic(NewTopic(name, num_partitions=-1, replication_factor=-1,
                                assignments=None, configs={}), validate_only=False) -> CreatedTopic
    admin.delete_topic(name)                             # marks /admin/delete_topics/<name>
    admin.create_partitions(name, total_count, assignments=None, validate_only=False)
        -> dict[new partition id, replicas]
    admin.topic_config(name) / admin.set_topic_config(name, {k: v}, validate_only=False)
    admin.broker_config(broker_id | None) / admin.set_broker_config(broker_id | None, {k: v}, validator=None)
    admin.all_topics(), admin.topic_exists(name), admin.assignment(name),
    admin.topics_marked_for_deletion()

``set_*_config`` replace the whole override set (AlterConfigs semantics); IncrementalAlterConfigs reads,
edits and writes back. Each config write also creates ``/config/changes/config_change_<seq>``, atomically with
the config itself, so Kafka brokers sharing the tree hear about it too.

Every refusal is a :class:`~sofakafka.protocol.errors.KafkaError` with the code and, as far as practical, the
message Kafka 2.6 answers with. Checks run in Kafka's order (placement before name validation, for example),
so a request with two faults gets the same error as from Kafka. One deliberate difference: an explicit
assignment naming an unregistered broker is refused with INVALID_REPLICA_ASSIGNMENT at creation too (Kafka
2.6 checks it only when adding partitions), because such a partition could never get a leader.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sofakafka.controller import zk_data, zk_paths
from sofakafka.controller.placement import BrokerMetadata, assign_replicas_to_brokers
from sofakafka.controller.registration import live_brokers
from sofakafka.controller.store import (
    BadArgumentsError,
    BadVersionError,
    CheckOp,
    CreateOp,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    Op,
    SetDataOp,
)
from sofakafka.controller.zk_data import TopicAssignment
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import InvalidLogConfigError

BrokerConfigValidator = Callable[[int | None, Mapping[str, str]], None]
"""Checks dynamic broker configs (the broker layer owns their rules); raises KafkaError(INVALID_CONFIG ...)."""

_CAS_ATTEMPTS = 5


@dataclass(frozen=True)
class NewTopic:
    """A CreateTopics entry: -1 partitions / replication factor mean the broker defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    num_partitions: int
    replication_factor: int
    assignment: dict[int, list[int]]
    configs: dict[str, str]
    """The topic's overrides as stored (CreateTopics v5 reports them with the defaults filled in)."""


def has_collision_chars(topic: str) -> bool:
    """Names with '.' or '_' can collide in metric names; Kafka's tools print a warning for them."""
    return "." in topic or "_" in topic


def validate_topic_name(topic: str) -> None:
    """Kafka's ``Topic.validate``, raising INVALID_TOPIC_EXCEPTION with Kafka's messages."""
    if topic == "":
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(topic) > zk_paths.MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {zk_paths.MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {topic}",
        )
    try:
        zk_paths.validate_topic_name(topic)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f'Topic name "{topic}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'",
        ) from None


def validate_topic_configs(configs: Mapping[str, str]) -> LogConfig:
    """The overrides parsed over Kafka's defaults; INVALID_CONFIG names the offending key."""
    try:
        config = LogConfig.from_props(configs)
    except InvalidLogConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({config.min_compaction_lag_ms}) > "
            f"max.compaction.lag.ms ({config.max_compaction_lag_ms})",
        )
    return config


def validate_assignment(assignment: Mapping[int, Sequence[int]], broker_ids: set[int] | None) -> None:
    """Kafka's checks of an explicit assignment: equal sizes, no duplicates, partitions 0..n-1; plus known
    brokers when ``broker_ids`` is given."""
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")
    if sizes == {0}:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Cannot have replication factor of 0.")
    for replicas in assignment.values():
        if len(set(replicas)) != len(replicas):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica assignment found: {_format_assignment(assignment)}",
            )
    if sorted(assignment) != list(range(len(assignment))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
        )
    if broker_ids is not None:
        _check_known_brokers(assignment.values(), broker_ids)


def _check_known_brokers(assignments: Iterable[Sequence[int]], broker_ids: set[int]) -> None:
    unknown = sorted({b for replicas in assignments for b in replicas} - broker_ids)
    if unknown:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
        )


def _assignment_too_large(topic: str, count: int, exc: BadArgumentsError) -> KafkaError:
    """The store refused the topic's assignment znode: ``count`` partitions, under
    ``sofakafka.max.partitions.per.topic``, can still make its JSON larger than a znode may be (1 MiB: some
    80,000 partitions of one replica, fewer of more). Any other refusal is not about the count and goes up as it is."""
    if exc.path != zk_paths.topic_path(topic):
        raise exc
    return KafkaError(ErrorCode.INVALID_PARTITIONS,
                      f"The assignment of {count} partitions is too large for the metadata store: {exc}")


def _format_assignment(assignment: Mapping[int, Sequence[int]]) -> str:
    return ", ".join(f"{p} -> {list(r)}" for p, r in sorted(assignment.items()))


#: Partitions a topic may have at most (``sofakafka.max.partitions.per.topic``).
DEFAULT_MAX_PARTITIONS_PER_TOPIC = 200_000


class TopicAdmin:
    """Admin writes for one broker's store session. Thread-safe: a lock orders this object's
    read-modify-write cycles, and conditional writes guard against other writers of the same tree."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        rng: random.Random | None = None,
        max_partitions_per_topic: int = DEFAULT_MAX_PARTITIONS_PER_TOPIC,
    ) -> None:
        self._store = store
        #: ``sofakafka.max.partitions.per.topic``: Kafka has no such bound, and a CreateTopics asking for 2^31 - 1
        #: partitions makes its controller build that many assignments until memory runs out (ours too,
        #: before this limit: the protocol fuzzer found it).
        self.max_partitions_per_topic = max_partitions_per_topic
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self._rng = rng
        self._lock = threading.Lock()

    # --- reads

    def all_topics(self) -> list[str]:
        try:
            return self._store.get_children(zk_paths.TOPICS_PATH)
        except NoNodeError:
            return []

    def topic_exists(self, topic: str) -> bool:
        return self._store.exists(zk_paths.topic_path(topic)) is not None

    def assignment(self, topic: str) -> dict[int, list[int]]:
        """UNKNOWN_TOPIC_OR_PARTITION if the topic does not exist."""
        assignment, _ = self._read_assignment(topic)
        return {p: list(r) for p, r in assignment.partitions.items()}

    def topics_marked_for_deletion(self) -> list[str]:
        try:
            return self._store.get_children(zk_paths.DELETE_TOPICS_PATH)
        except NoNodeError:
            return []

    def brokers(self) -> list[BrokerMetadata]:
        return [BrokerMetadata(b.broker_id, b.rack) for b in live_brokers(self._store).values()]

    def _read_assignment(self, topic: str) -> tuple[TopicAssignment, int]:
        try:
            data, stat = self._store.get(zk_paths.topic_path(topic))
        except (NoNodeError, ValueError):
            # ValueError: a name that is not even a valid path cannot name an existing topic.
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.") from None
        return TopicAssignment.decode(topic, data), stat.version

    def _check_partition_count(self, count: int) -> None:
        if count > self.max_partitions_per_topic:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions {count} is above sofakafka.max.partitions.per.topic "
                             f"({self.max_partitions_per_topic}).")

    # --- CreateTopics

    def create_topic(self, new: NewTopic, validate_only: bool = False) -> CreatedTopic:
        with self._lock:
            return self._create_topic(new, validate_only)

    def _create_topic(self, new: NewTopic, validate_only: bool) -> CreatedTopic:
        topic = new.name
        if self._safe_exists(topic):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
        null_configs = [k for k, v in new.configs.items() if v is None]
        if null_configs:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for topic configs : {','.join(null_configs)}"
            )
        configs = {k: v for k, v in new.configs.items() if v is not None}
        explicit = dict(new.assignments or {})
        if explicit and (new.num_partitions != -1 or new.replication_factor != -1):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        brokers = self.brokers()
        if explicit:
            assignment = {p: list(r) for p, r in explicit.items()}
        else:
            partitions = self.default_num_partitions if new.num_partitions == -1 else new.num_partitions
            self._check_partition_count(partitions)
            rf = self.default_replication_factor if new.replication_factor == -1 else new.replication_factor
            assignment = assign_replicas_to_brokers(brokers, partitions, rf, rng=self._rng)
        self._validate_topic_create(topic, assignment, configs)
        if explicit:
            _check_known_brokers(list(assignment.values()), {b.id for b in brokers})
        created = CreatedTopic(topic, len(assignment), len(assignment[0]), assignment, configs)
        if validate_only:
            return created
        ops: list[Op] = [self._set_or_create_op(zk_paths.config_topic_path(topic), zk_data.encode_config(configs))]
        ops.append(CreateOp(zk_paths.topic_path(topic), TopicAssignment(assignment).encode()))
        try:
            self._store.multi(ops)
        except NodeExistsError as exc:
            if exc.path == zk_paths.topic_path(topic):
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.") from None
            raise
        except BadArgumentsError as exc:
            raise _assignment_too_large(topic, len(assignment), exc) from None
        return created

    def _safe_exists(self, topic: str) -> bool:
        try:
            return self.topic_exists(topic)
        except ValueError:
            return False

    def _validate_topic_create(self, topic: str, assignment: Mapping[int, Sequence[int]], configs: Mapping[str, str]) -> None:
        validate_topic_name(topic)
        if self.topic_exists(topic):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
        if has_collision_chars(topic):
            all_topics = self.all_topics()
            if topic in all_topics:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
            colliding = [t for t in all_topics if zk_paths.topics_collide(topic, t)]
            if colliding:
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}",
                )
        validate_assignment(assignment, None)
        validate_topic_configs(configs)

    def _set_or_create_op(self, path: str, data: bytes) -> Op:
        stat = self._store.exists(path)
        if stat is None:
            return CreateOp(path, data)
        return SetDataOp(path, data, stat.version)

    # --- DeleteTopics

    def delete_topic(self, topic: str) -> None:
        """Ask the controller to delete ``topic``; a topic already marked is not an error (the caller waits
        for the same deletion)."""
        if not self._safe_exists(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{topic}` to delete does not exist")
        try:
            self._store.create(zk_paths.delete_topic_path(topic), zk_data.DELETE_TOPIC_MARKER_DATA, makepath=True)
        except NodeExistsError:
            pass

    # --- CreatePartitions

    def create_partitions(
        self,
        topic: str,
        total_count: int,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> dict[int, list[int]]:
        """Grow ``topic`` to ``total_count`` partitions; ``assignments`` gives the replicas of each new one.
        Returns the new partitions' assignment."""
        with self._lock:
            for _ in range(_CAS_ATTEMPTS):
                try:
                    return self._create_partitions(topic, total_count, assignments, validate_only)
                except BadVersionError:
                    continue  # the assignment changed under us (a reassignment): recompute on the new one
            raise KafkaError(ErrorCode.REASSIGNMENT_IN_PROGRESS, f"Topic '{topic}' assignment keeps changing.")

    def _create_partitions(
        self, topic: str, total_count: int, assignments: Sequence[Sequence[int]] | None, validate_only: bool
    ) -> dict[int, list[int]]:
        try:
            marked = self._store.exists(zk_paths.delete_topic_path(topic)) is not None
        except ValueError:
            marked = False  # not even a valid path: no such topic, which the read below says
        if marked:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")
        existing, version = self._read_assignment(topic)
        if any(existing.adding_replicas.values()) or any(existing.removing_replicas.values()):
            # Kafka 2.6 refuses too: the new partitions' placement would race the controller's completion of the move.
            raise KafkaError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                             f"A partition reassignment is in progress for the topic '{topic}'.")
        current = existing.partitions
        if 0 not in current:
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing.",
            )
        old_count = len(current)
        self._check_partition_count(total_count)
        if total_count < old_count:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {old_count} partitions, which is higher than the requested {total_count}.",
            )
        if total_count == old_count:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old_count} partitions.")
        increment = total_count - old_count
        brokers = sorted(self.brokers())
        broker_ids = {b.id for b in brokers}
        rf = len(current[0])
        if assignments is not None:
            _check_known_brokers(list(assignments), broker_ids)
            if len(assignments) != increment:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Increasing the number of partitions by {increment} but {len(assignments)} assignments provided.",
                )
            new = {old_count + i: list(r) for i, r in enumerate(assignments)}
            for partition, replicas in new.items():
                if not replicas:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Cannot have replication factor of 0 for partition id {partition}.",
                    )
                if len(set(replicas)) != len(replicas):
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Duplicate brokers not allowed in replica assignment: "
                        f"{', '.join(map(str, replicas))} for partition id {partition}.",
                    )
                if len(replicas) != rf:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
                        f"partition {partition} has {len(replicas)} replicas.",
                    )
        else:
            # New partitions continue the walk where partition 0's leader sits, as Kafka does.
            leader0 = current[0][0]
            start = next((i for i, b in enumerate(brokers) if b.id >= leader0), 0)
            new = assign_replicas_to_brokers(brokers, increment, rf, fixed_start_index=start, start_partition_id=old_count)
        if validate_only:
            return new
        combined = {**{p: list(r) for p, r in current.items()}, **new}
        updated = TopicAssignment(combined, existing.adding_replicas, existing.removing_replicas)
        try:
            self._store.set(zk_paths.topic_path(topic), updated.encode(), version)
        except BadArgumentsError as exc:
            raise _assignment_too_large(topic, total_count, exc) from None
        return new

    # --- configs

    def topic_config(self, topic: str) -> dict[str, str]:
        """The topic's overrides (not the defaults); UNKNOWN_TOPIC_OR_PARTITION if the topic is unknown."""
        if not self._safe_exists(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.")
        return self._read_config(zk_paths.config_topic_path(topic))

    def set_topic_config(self, topic: str, configs: Mapping[str, str], validate_only: bool = False) -> None:
        """Replace the topic's overrides after Kafka's validation."""
        if not self._safe_exists(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.")
        validate_topic_configs(configs)
        if not validate_only:
            # Only while the topic exists: a config written just after the controller deleted the topic would
            # outlive it (and be inherited by a topic created again under the name).
            self._write_config(zk_paths.CONFIG_TYPE_TOPICS, topic, configs, only_while=zk_paths.topic_path(topic))

    def broker_config(self, broker_id: int | None) -> dict[str, str]:
        """Dynamic overrides of one broker, or the cluster-wide defaults for ``None``."""
        return self._read_config(zk_paths.config_broker_path(broker_id))

    def set_broker_config(
        self,
        broker_id: int | None,
        configs: Mapping[str, str],
        validator: BrokerConfigValidator | None = None,
        validate_only: bool = False,
    ) -> None:
        if validator is not None:
            validator(broker_id, configs)
        if not validate_only:
            name = zk_paths.DEFAULT_ENTITY_NAME if broker_id is None else str(broker_id)
            self._write_config(zk_paths.CONFIG_TYPE_BROKERS, name, configs)

    def _read_config(self, path: str) -> dict[str, str]:
        try:
            data, _ = self._store.get(path)
        except NoNodeError:
            return {}
        return zk_data.decode_config(data, path)

    def _write_config(self, entity_type: str, name: str, configs: Mapping[str, str],
                      only_while: str | None = None) -> None:
        """Config and notification in one multi-op, so a reader never sees a notification for an old value
        or a new value nobody is told about; with ``only_while``, only if that znode (the topic's) exists."""
        path = zk_paths.config_entity_path(entity_type, name)
        with self._lock:
            self._store.ensure_path(zk_paths.config_entity_type_path(entity_type))
            self._store.ensure_path(zk_paths.CONFIG_CHANGES_PATH)
            for _ in range(_CAS_ATTEMPTS):
                if only_while is not None and self._store.exists(only_while) is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
                ops = [
                    *([CheckOp(only_while, -1)] if only_while is not None else []),
                    self._set_or_create_op(path, zk_data.encode_config(configs)),
                    CreateOp(
                        zk_paths.config_change_prefix_path(),
                        zk_data.encode_config_change_notification(f"{entity_type}/{name}"),
                        sequence=True,
                    ),
                ]
                try:
                    self._store.multi(ops)
                    return
                except (NodeExistsError, BadVersionError, NoNodeError):
                    continue  # created, changed or deleted by someone else between our read and write
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"could not write {path}: concurrent changes")
