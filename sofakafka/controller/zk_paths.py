"""Znode paths of Kafka 2.6's ZooKeeper layout (reference: ZOOKEEPER-LAYOUT.md).

Paths are relative to the chroot of ``zookeeper.connect``: the ZooKeeper backend applies the chroot, so code
above the :class:`~sofakafka.controller.store.MetadataStore` never sees it.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
LATEST_PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONSUMERS_PATH = "/consumers"

CONFIG_TYPE_TOPICS = "topics"
CONFIG_TYPE_CLIENTS = "clients"
CONFIG_TYPE_USERS = "users"
CONFIG_TYPE_BROKERS = "brokers"
CONFIG_TYPES = (CONFIG_TYPE_TOPICS, CONFIG_TYPE_CLIENTS, CONFIG_TYPE_USERS, CONFIG_TYPE_BROKERS)
DEFAULT_ENTITY_NAME = "<default>"
"""The entity name of cluster-wide defaults (``/config/brokers/<default>``), never URL-encoded."""

PERSISTENT_ZK_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LATEST_PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"{CONFIG_PATH}/{t}" for t in CONFIG_TYPES),
)
"""What a 2.6 broker creates at start-up when missing (intermediate parents get no data)."""

SEQUENCE_DIGITS = 10

MAX_TOPIC_NAME_LENGTH = 249
_TOPIC_NAME_RE = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(topic: str) -> None:
    """Kafka's topic name rules; a name that passes is also a safe znode name."""
    if topic in ("", ".", ".."):
        raise ValueError(f"topic name {topic!r} is illegal")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise ValueError(f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _TOPIC_NAME_RE.match(topic):
        raise ValueError(f"topic name {topic!r} may only contain ASCII letters, digits, '.', '_' and '-'")


def topics_collide(a: str, b: str) -> bool:
    """Two names collide when they differ only by '.' versus '_' (their metric names would be equal)."""
    return a.replace(".", "_") == b.replace(".", "_")


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def topic_partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: a user principal or client id as a znode name (Java URL encoding, then ``*`` as
    ``%2A`` and space as ``%20``)."""
    if name in (".", ".."):
        # ZooKeeper refuses '.' and '..' as a path component; Kafka's Sanitizer keeps the dots and its write
        # fails. Percent-encoding them keeps every name storable, and desanitize reads them back unchanged.
        return name.replace(".", "%2E")
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


def config_entity_type_path(entity_type: str) -> str:
    if entity_type not in CONFIG_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r}")
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, sanitized_name: str) -> str:
    """``/config/<type>/<name>``; the name must already be sanitized (topics and broker ids need not be),
    and may be a nested path such as ``alice/clients/app1`` for user+client quotas."""
    return f"{config_entity_type_path(entity_type)}/{sanitized_name}"


def config_topic_path(topic: str) -> str:
    return config_entity_path(CONFIG_TYPE_TOPICS, topic)


def config_broker_path(broker_id: int | None) -> str:
    """``/config/brokers/<id>``, or the cluster-wide default entity for None."""
    return config_entity_path(CONFIG_TYPE_BROKERS, DEFAULT_ENTITY_NAME if broker_id is None else str(broker_id))


def config_change_prefix_path() -> str:
    """The path to create sequentially: ZooKeeper appends the 10-digit sequence number."""
    return f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"


def isr_change_prefix_path() -> str:
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}"


def log_dir_event_prefix_path() -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}"


LOG_DIR_FAILURES_PATH = "/sofakafka/log_dir_failures"
"""Ours, not Kafka's: ``<broker id>`` children (ephemeral) list a broker's replicas in failed log dirs
(zk_data.LogDirFailures)."""


def log_dir_failures_path(broker_id: int) -> str:
    return f"{LOG_DIR_FAILURES_PATH}/{broker_id}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def sequence_number(node_name: str, prefix: str) -> int:
    """The counter of a sequential znode name such as ``config_change_0000000042`` (a name, not a path)."""
    if not node_name.startswith(prefix):
        raise ValueError(f"{node_name!r} does not start with {prefix!r}")
    digits = node_name[len(prefix) :]
    if len(digits) != SEQUENCE_DIGITS or not digits.isdigit():
        raise ValueError(f"{node_name!r} does not end in a {SEQUENCE_DIGITS}-digit sequence number")
    return int(digits)


# ------------------------------------------------------------------------------- ACLs (AclAuthorizer)

ACL_PATH = "/kafka-acl"
"""LITERAL patterns: ``/kafka-acl/<ResourceType>/<name>`` (the wildcard resource is the name ``*``)."""
ACL_EXTENDED_PATH = "/kafka-acl-extended"
ACL_PREFIXED_PATH = "/kafka-acl-extended/prefixed"
"""PREFIXED patterns: ``/kafka-acl-extended/prefixed/<ResourceType>/<prefix>``."""
ACL_CHANGES_PATH = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"


def acl_resource_path(resource_type_pascal: str, name: str, prefixed: bool) -> str:
    """A resource pattern's znode; ``resource_type_pascal`` is e.g. ``Topic``, ``TransactionalId``. Resource
    names are used as they are, as Kafka 2.6 does (topic and group names are valid znode names)."""
    root = ACL_PREFIXED_PATH if prefixed else ACL_PATH
    return f"{root}/{resource_type_pascal}/{name}"


def acl_change_prefix_path(prefixed: bool) -> str:
    return f"{ACL_EXTENDED_CHANGES_PATH if prefixed else ACL_CHANGES_PATH}/{ACL_CHANGE_PREFIX}"


def config_user_path(user_name: str) -> str:
    """``/config/users/<sanitized user>``: quotas and SCRAM credentials of one user."""
    return config_entity_path(CONFIG_TYPE_USERS, sanitize(user_name))


# --------------------------------------------------------------------------- delegation tokens (KIP-48)

DELEGATION_TOKEN_PATH = "/delegation_token"
DELEGATION_TOKENS_PATH = "/delegation_token/tokens"
"""``/delegation_token/tokens/<token id>``: one token's information (never its HMAC)."""
DELEGATION_TOKEN_CHANGES_PATH = "/delegation_token/token_changes"
"""``token_change_<seq>`` notifications whose data is the id of the token created, renewed or removed."""
DELEGATION_TOKEN_CHANGE_PREFIX = "token_change_"


def delegation_token_path(token_id: str) -> str:
    return f"{DELEGATION_TOKENS_PATH}/{token_id}"


def delegation_token_change_prefix_path() -> str:
    return f"{DELEGATION_TOKEN_CHANGES_PATH}/{DELEGATION_TOKEN_CHANGE_PREFIX}"
