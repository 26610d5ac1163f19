"""The broker's configuration: Kafka 2.6's ``server.properties`` keys, types, defaults and validation.

Each key is declared once in :data:`CONFIG_KEYS` with the facts DescribeConfigs and AlterConfigs need later:
its type, default, validator, dynamic-update mode (as Kafka 2.6 documents it: read-only, per-broker or
cluster-wide) and the topic-level config it is the broker default for (``log.segment.bytes`` is the default
of ``segment.bytes``). Values are parsed from strings the way Kafka's ``ConfigDef`` parses them (trimmed,
case-insensitive booleans, lists split on commas).

Where we differ from Kafka, on purpose:

* An unknown key stops start-up (Kafka only logs a warning). A typo in ``log.retention.hours`` silently
  keeping seven days of data is worse than a broker that refuses to start and names the key. Keys under
  ``listener.name.<listener>.`` are accepted as-is, as Kafka does, for per-listener SSL/SASL settings.
* ``listeners`` defaults to ``PLAINTEXT://127.0.0.1:9092`` (Kafka: every interface, port 9092), so a broker
  started with no file is not exposed to the network by accident.
* ``log.dir`` defaults to a directory that survives reboots (``~/.sofakafka/kafka-logs``, or
  ``./sofakafka-data/kafka-logs`` when there is no usable home) instead of ``/tmp/kafka-logs``.
* ``broker.id`` keeps Kafka's default of -1 so DescribeConfigs reports Kafka's default, but
  :meth:`KafkaConfig.effective_broker_id` resolves -1 to 0 with the embedded metadata store: a single node has
  nobody to collide with and ``0`` is what every quickstart expects. With ZooKeeper, -1 keeps Kafka's meaning
  (an id generated from ``/brokers/seqid`` above ``reserved.broker.max.id``).
* ``default.replication.factor`` must be >= 1 (Kafka accepts 0 and fails every auto-created topic later).
* ``num.network.threads``, ``num.io.threads`` and ``background.threads`` are accepted and validated so
  existing files load, but do nothing: one asyncio loop replaces Kafka's thread pools
  (:attr:`ConfigKey.applicable` is False for them).
* A ``server.properties`` file is read as UTF-8 (falling back to ISO-8859-1, Java's encoding, when it is
  not valid UTF-8).
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sofakafka.ldc import LdcError, LdcModel, RoutingRules

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A key or value that stops start-up; the message always starts with the key it is about."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class ConfigType(enum.Enum):
    """Kafka's ``ConfigDef.Type``: decides parsing and how DescribeConfigs reports the value."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class DynamicUpdateMode(enum.Enum):
    """How AlterConfigs may change a broker key at runtime, with Kafka's wording."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class ConfigSource(enum.IntEnum):
    """Where a value came from; numbers are DescribeConfigs v1+ ``config_source`` codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


ConfigValue = bool | int | float | str | list[str] | None
Validator = Callable[[ConfigValue], str | None]
"""Returns None when the value is fine, else the reason it is not (the key is added by the caller)."""


def at_least(minimum: int | float) -> Validator:
    def check(value: ConfigValue) -> str | None:
        if value is None:
            return None
        assert isinstance(value, int | float)
        return None if value >= minimum else f"must be >= {minimum}, got {value}"

    return check


def between(low: int, high: int) -> Validator:
    def check(value: ConfigValue) -> str | None:
        if value is None:
            return None
        assert isinstance(value, int | float)
        return None if low <= value <= high else f"must be between {low} and {high}, got {value}"

    return check


def one_of(*allowed: str) -> Validator:
    def check(value: ConfigValue) -> str | None:
        if value is None or value in allowed:
            return None
        return f"must be one of {', '.join(allowed)}, got {value!r}"

    return check


def list_of(*allowed: str) -> Validator:
    def check(value: ConfigValue) -> str | None:
        assert isinstance(value, list)
        for item in value:
            if item not in allowed:
                return f"every item must be one of {', '.join(allowed)}, got {item!r}"
        return None

    return check


def parse_metrics_listener(value: str) -> tuple[str, int]:
    """``http://host:port`` (an empty host or ``0.0.0.0`` binds every interface) -> (host, port)."""
    match = re.fullmatch(r"http://(\[[0-9a-fA-F:.]+\]|[^:/\[\]]*):(\d{1,5})/?", value.strip())
    if not match or int(match.group(2)) > 65535:
        raise ValueError(f"must look like http://127.0.0.1:9308, got {value!r}")
    return match.group(1).strip("[]"), int(match.group(2))


def _metrics_listener(value: ConfigValue) -> str | None:
    if value is None:
        return None
    try:
        parse_metrics_listener(str(value))
    except ValueError as exc:
        return str(exc)
    return None


_VERSION_RE = re.compile(r"^(0\.(8\.[0-2]|9\.0|10\.[0-2]|11\.0)|[12]\.[0-9]+)(\.[0-9]+)?(-IV[0-9]+)?$")


def _kafka_version(value: ConfigValue) -> str | None:
    if value is None or (isinstance(value, str) and _VERSION_RE.match(value)):
        return None
    return f"must be a Kafka version such as 2.6 or 2.6-IV0, got {value!r}"


AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer",
                          "sofakafka.security.authorizer.AclAuthorizer")
"""Names ``authorizer.class.name`` accepts for our ACL authorizer: Kafka 2.6's, its deprecated one, ours."""


def _authorizer_class(value: ConfigValue) -> str | None:
    if value is None or (isinstance(value, str) and value.strip() in ("", *AUTHORIZER_CLASS_NAMES)):
        return None
    return (f"unknown authorizer {value!r}: sofakafka has one, Kafka's ACL authorizer, named "
            f"{' or '.join(AUTHORIZER_CLASS_NAMES)} (empty turns authorization off)")


@dataclass(frozen=True)
class ConfigKey:
    """One broker key as Kafka 2.6 declares it."""

    name: str
    type: ConfigType
    default: ConfigValue
    doc: str
    validator: Validator | None = None
    dynamic: DynamicUpdateMode = DynamicUpdateMode.READ_ONLY
    topic_config: str | None = None
    """The topic-level key this broker key is the default for (DescribeConfigs synonyms)."""
    applicable: bool = True
    """False for keys accepted only so Kafka's files load; sofakafka has no use for their value."""


def _default_log_dir() -> str:
    try:
        home: Path | None = Path.home()
    except (RuntimeError, KeyError):
        # No HOME and no passwd entry (some containers): fall back to the working directory.
        home = None
    if home is not None and home.is_dir() and os.access(home, os.W_OK):
        return str(home / ".sofakafka" / "kafka-logs")
    return str(Path.cwd() / "sofakafka-data" / "kafka-logs")


def _ldc_model(value: ConfigValue) -> str | None:
    if value is None:
        return None
    try:
        LdcModel.from_json(str(value))
    except LdcError as exc:
        return f"not an LDC model: {exc}"
    return None


def _router_rules(value: ConfigValue) -> str | None:
    if value is None:
        return None
    try:
        RoutingRules.from_text(str(value), "rules.json")
    except LdcError as exc:
        return f"not a set of routing rules: {exc}"
    return None


_RO = DynamicUpdateMode.READ_ONLY
_PB = DynamicUpdateMode.PER_BROKER
_CW = DynamicUpdateMode.CLUSTER_WIDE
_T = ConfigType

_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_PROTOCOLS = tuple(p.value for p in SecurityProtocol)

_KEYS: list[ConfigKey] = [
    # --- identity and ZooKeeper
    ConfigKey("broker.id", _T.INT, -1, "Id of this broker; -1 asks for one (see KafkaConfig.effective_broker_id)."),
    ConfigKey("broker.id.generation.enable", _T.BOOLEAN, True, "Generate an id from /brokers/seqid when broker.id is -1."),
    ConfigKey("reserved.broker.max.id", _T.INT, 1000, "Generated ids start above this.", at_least(0)),
    ConfigKey("broker.rack", _T.STRING, None, "Rack of this broker, for rack-aware replica placement."),
    ConfigKey("zookeeper.connect", _T.STRING, None, "host:port[,host:port...][/chroot]; unset means the embedded metadata store."),
    ConfigKey("zookeeper.session.timeout.ms", _T.INT, 18000, "ZooKeeper session timeout.", at_least(1)),
    ConfigKey("zookeeper.connection.timeout.ms", _T.INT, None, "How long to wait for a ZooKeeper connection; unset means the session timeout.", at_least(1)),
    ConfigKey("zookeeper.max.in.flight.requests", _T.INT, 10, "Pipelined ZooKeeper requests per client.", at_least(1)),
    ConfigKey("zookeeper.set.acl", _T.BOOLEAN, False, "Create znodes with ACLs."),
    # --- listeners and security
    ConfigKey("listeners", _T.STRING, "PLAINTEXT://127.0.0.1:9092", "NAME://host:port list to bind; empty host binds every interface.", dynamic=_PB),
    ConfigKey("advertised.listeners", _T.STRING, None, "Listeners given to clients in Metadata; unset means listeners.", dynamic=_PB),
    ConfigKey("listener.security.protocol.map", _T.STRING, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "NAME:PROTOCOL pairs.", dynamic=_PB),
    ConfigKey("inter.broker.listener.name", _T.STRING, None, "Listener other brokers connect to; unset means the one named after security.inter.broker.protocol."),
    ConfigKey("security.inter.broker.protocol", _T.STRING, "PLAINTEXT", "Security protocol between brokers.", one_of(*_PROTOCOLS)),
    ConfigKey("sasl.enabled.mechanisms", _T.LIST, ["GSSAPI"], "SASL mechanisms offered to clients.", dynamic=_PB),
    ConfigKey("sasl.mechanism.inter.broker.protocol", _T.STRING, "GSSAPI", "SASL mechanism between brokers."),
    ConfigKey("ssl.keystore.location", _T.STRING, None, "Key store for SSL listeners.", dynamic=_PB),
    ConfigKey("ssl.keystore.password", _T.PASSWORD, None, "Key store password.", dynamic=_PB),
    ConfigKey("ssl.keystore.type", _T.STRING, "JKS", "Key store format.", dynamic=_PB),
    ConfigKey("ssl.key.password", _T.PASSWORD, None, "Private key password.", dynamic=_PB),
    ConfigKey("ssl.truststore.location", _T.STRING, None, "Trust store for SSL listeners.", dynamic=_PB),
    ConfigKey("ssl.truststore.password", _T.PASSWORD, None, "Trust store password.", dynamic=_PB),
    ConfigKey("ssl.truststore.type", _T.STRING, "JKS", "Trust store format.", dynamic=_PB),
    ConfigKey("ssl.client.auth", _T.STRING, "none", "Whether SSL clients must present a certificate.", one_of("required", "requested", "none"), dynamic=_PB),
    ConfigKey("ssl.keystore.certificate.chain", _T.PASSWORD, None, "PEM certificate chain (with ssl.keystore.type=PEM), instead of ssl.keystore.location.", dynamic=_PB),
    ConfigKey("ssl.keystore.key", _T.PASSWORD, None, "PEM private key (with ssl.keystore.type=PEM), instead of ssl.keystore.location.", dynamic=_PB),
    ConfigKey("ssl.truststore.certificates", _T.PASSWORD, None, "PEM trusted certificates (with ssl.truststore.type=PEM), instead of ssl.truststore.location.", dynamic=_PB),
    ConfigKey("ssl.enabled.protocols", _T.LIST, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted.", list_of("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"), dynamic=_PB),
    ConfigKey("ssl.protocol", _T.STRING, "TLSv1.3", "Not applicable: ssl.enabled.protocols bounds the versions OpenSSL negotiates.", dynamic=_PB, applicable=False),
    ConfigKey("ssl.cipher.suites", _T.LIST, [], "Cipher suites (IANA or OpenSSL names); empty means OpenSSL's defaults.", dynamic=_PB),
    ConfigKey("ssl.endpoint.identification.algorithm", _T.STRING, "https", "https: inter-broker TLS checks the peer's host name; empty: it does not.", dynamic=_PB),
    ConfigKey("ssl.principal.mapping.rules", _T.STRING, "DEFAULT", "RULE:pattern/replacement/[LU] rules (and DEFAULT) mapping a client certificate's DN to a user name."),
    ConfigKey("sasl.jaas.config", _T.PASSWORD, None, "JAAS login module config for every SASL listener and mechanism without its own listener.name.<listener>.<mechanism>.sasl.jaas.config."),
    ConfigKey("sasl.server.max.receive.size", _T.INT, 524288, "Largest frame accepted before SASL authentication completes.", at_least(1)),
    ConfigKey("connections.max.reauth.ms", _T.LONG, 0, "SASL session lifetime (KIP-368); a client re-authenticates before it ends; 0 means forever.", at_least(0)),
    ConfigKey("connection.failed.authentication.delay.ms", _T.INT, 100, "Delay before answering a failed authentication and closing the connection.", at_least(0)),
    ConfigKey("sofakafka.authentication.timeout.ms", _T.INT, 30000, "A TLS handshake or SASL authentication not complete after this closes the connection.", at_least(1)),
    ConfigKey("authorizer.class.name", _T.STRING, "", "Authorizer: kafka.security.authorizer.AclAuthorizer (or kafka.security.auth.SimpleAclAuthorizer) turns ACLs on; empty means none.", _authorizer_class),
    ConfigKey("super.users", _T.STRING, None, "Semicolon-separated principals the authorizer always allows."),
    ConfigKey("allow.everyone.if.no.acl.found", _T.BOOLEAN, False, "Authorizer: allow a resource that has no ACL."),
    # --- delegation tokens (KIP-48; docs/security.md)
    ConfigKey("delegation.token.master.key", _T.PASSWORD, None, "Secret from which every broker computes delegation tokens' HMACs; the same on every broker. Unset or empty: delegation tokens are off (their requests are answered DELEGATION_TOKEN_AUTH_DISABLED)."),
    # Kafka 3.0's name for the same secret (KIP-681); 2.6 has only delegation.token.master.key. Set, it wins.
    ConfigKey("delegation.token.secret.key", _T.PASSWORD, None, "Kafka 3.0's name for delegation.token.master.key (not a Kafka 2.6 key); when set it is used instead."),
    ConfigKey("delegation.token.max.lifetime.ms", _T.LONG, 604800000, "Longest a delegation token may live, renewals included; a longer max lifetime asked for is cut to this.", at_least(1)),
    ConfigKey("delegation.token.expiry.time.ms", _T.LONG, 86400000, "How long a delegation token lives from its creation or renewal when the request does not say.", at_least(1)),
    ConfigKey("delegation.token.expiry.check.interval.ms", _T.LONG, 3600000, "How often the active controller removes delegation tokens past their expiry or max lifetime.", at_least(1)),
    ConfigKey("sofakafka.delegation.token.auth.without.extension", _T.BOOLEAN, False, "Also accept a SCRAM login whose user name is a delegation token id and whose password is its HMAC without the tokenauth=true extension, when no SCRAM user has that name (librdkafka and kafka-python cannot send the extension). Not a Kafka key; off means Kafka's behaviour."),
    # --- network
    ConfigKey("num.network.threads", _T.INT, 3, "Not applicable: one asyncio loop serves every connection.", at_least(1), _CW, applicable=False),
    ConfigKey("num.io.threads", _T.INT, 8, "Not applicable: handlers run on the asyncio loop.", at_least(1), _CW, applicable=False),
    ConfigKey("background.threads", _T.INT, 10, "Not applicable: background work is scheduled on the loop.", at_least(1), _CW, applicable=False),
    ConfigKey("num.recovery.threads.per.data.dir", _T.INT, 1, "Threads per log dir that load the logs at start-up (recovering them after an unclean shutdown) and close them at shutdown; read at start-up.", at_least(1), _CW),
    ConfigKey("num.replica.fetchers", _T.INT, 1, "Fetcher tasks per source broker.", at_least(1), _CW),
    ConfigKey("queued.max.requests", _T.INT, 500, "Requests read ahead per connection before reading pauses.", at_least(1)),
    ConfigKey("socket.send.buffer.bytes", _T.INT, 102400, "SO_SNDBUF; -1 keeps the OS default."),
    ConfigKey("socket.receive.buffer.bytes", _T.INT, 102400, "SO_RCVBUF; -1 keeps the OS default."),
    ConfigKey("socket.request.max.bytes", _T.INT, 104857600, "Largest request frame accepted.", at_least(1)),
    ConfigKey("connections.max.idle.ms", _T.LONG, 600000, "Idle connections are closed after this."),
    ConfigKey("max.connections", _T.INT, INT_MAX, "Connections at once; at the limit a listener stops accepting (new clients wait in the backlog) until one closes, except the inter-broker listener of a broker with several listeners, for which the least recently active other connection is closed. listener.name.<listener>.max.connections is one listener's own limit (this value where unset). Lowered dynamically, the least recently active connections over it are closed.", at_least(0), _CW),
    ConfigKey("max.connections.per.ip", _T.INT, INT_MAX, "Connections accepted at once from one address; a new one over it is closed at once, with the reason logged.", at_least(0), _CW),
    ConfigKey("max.connections.per.ip.overrides", _T.STRING, "", "host:count or ip:count, comma-separated: per-address exceptions to max.connections.per.ip.", None, _CW),
    ConfigKey("request.timeout.ms", _T.INT, 30000, "Timeout of requests this broker sends."),
    # --- logs
    ConfigKey("log.dir", _T.STRING, _default_log_dir(), "Log directory when log.dirs is unset."),
    ConfigKey("log.dirs", _T.STRING, None, "Comma-separated log directories; the first also holds the embedded metadata store."),
    ConfigKey("log.segment.bytes", _T.INT, 1073741824, "Segment size.", at_least(14), _CW, "segment.bytes"),
    ConfigKey("log.roll.ms", _T.LONG, None, "Roll a segment after this long; overrides log.roll.hours.", at_least(1), _CW, "segment.ms"),
    ConfigKey("log.roll.hours", _T.INT, 168, "Roll a segment after this many hours.", at_least(1), _RO, "segment.ms"),
    ConfigKey("log.roll.jitter.ms", _T.LONG, None, "Random jitter subtracted from the roll time; overrides log.roll.jitter.hours.", at_least(0), _CW, "segment.jitter.ms"),
    ConfigKey("log.roll.jitter.hours", _T.INT, 0, "Roll jitter in hours.", at_least(0), _RO, "segment.jitter.ms"),
    ConfigKey("log.retention.ms", _T.LONG, None, "Retention time; -1 keeps forever; overrides minutes and hours.", None, _CW, "retention.ms"),
    ConfigKey("log.retention.minutes", _T.INT, None, "Retention time in minutes; overrides hours.", None, _RO, "retention.ms"),
    ConfigKey("log.retention.hours", _T.INT, 168, "Retention time in hours.", None, _RO, "retention.ms"),
    ConfigKey("log.retention.bytes", _T.LONG, -1, "Retained bytes per partition; -1 means no limit.", None, _CW, "retention.bytes"),
    ConfigKey("log.retention.check.interval.ms", _T.LONG, 300000, "How often retention runs.", at_least(1)),
    ConfigKey("log.index.size.max.bytes", _T.INT, 10485760, "Largest offset index file.", at_least(4), _CW, "segment.index.bytes"),
    ConfigKey("log.index.interval.bytes", _T.INT, 4096, "Bytes between offset index entries.", at_least(0), _CW, "index.interval.bytes"),
    ConfigKey("log.flush.interval.messages", _T.LONG, LONG_MAX, "Flush after this many messages.", at_least(1), _CW, "flush.messages"),
    ConfigKey("log.flush.interval.ms", _T.LONG, None, "Flush after this long; unset means log.flush.scheduler.interval.ms.", None, _CW, "flush.ms"),
    ConfigKey("log.flush.scheduler.interval.ms", _T.LONG, LONG_MAX, "How often the flusher checks logs.", None, _RO, "flush.ms"),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", _T.INT, 60000, "How often recovery points are checkpointed.", at_least(0)),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", _T.INT, 60000, "How often log start offsets are checkpointed.", at_least(0)),
    ConfigKey("log.cleanup.policy", _T.LIST, ["delete"], "delete and/or compact.", list_of("compact", "delete"), _CW, "cleanup.policy"),
    ConfigKey("log.cleaner.enable", _T.BOOLEAN, True, "Run the log cleaner (needed by compacted topics)."),
    ConfigKey("log.cleaner.threads", _T.INT, 1, "Cleaner threads.", at_least(0), _CW),
    ConfigKey("log.cleaner.backoff.ms", _T.LONG, 15000, "Cleaner sleep when there is nothing to clean.", at_least(0), _CW),
    ConfigKey("log.cleaner.delete.retention.ms", _T.LONG, 86400000, "How long tombstones survive compaction.", None, _CW, "delete.retention.ms"),
    ConfigKey("log.cleaner.min.compaction.lag.ms", _T.LONG, 0, "Minimum age of a record before compaction.", None, _CW, "min.compaction.lag.ms"),
    ConfigKey("log.cleaner.max.compaction.lag.ms", _T.LONG, LONG_MAX, "Maximum age of an uncompacted record.", None, _CW, "max.compaction.lag.ms"),
    ConfigKey("log.cleaner.min.cleanable.ratio", _T.DOUBLE, 0.5, "Dirty ratio that makes a log cleanable.", None, _CW, "min.cleanable.dirty.ratio"),
    ConfigKey("log.segment.delete.delay.ms", _T.LONG, 60000, "Delay before a deleted segment's files go.", at_least(0), _CW, "file.delete.delay.ms"),
    ConfigKey("log.preallocate", _T.BOOLEAN, False, "Preallocate segment files.", None, _CW, "preallocate"),
    ConfigKey("log.message.format.version", _T.STRING, "2.6-IV0", "Record format written to logs.", _kafka_version, _CW, "message.format.version"),
    ConfigKey("log.message.timestamp.type", _T.STRING, "CreateTime", "CreateTime or LogAppendTime.", one_of("CreateTime", "LogAppendTime"), _CW, "message.timestamp.type"),
    ConfigKey("log.message.timestamp.difference.max.ms", _T.LONG, LONG_MAX, "Largest allowed distance of a CreateTime from now.", at_least(0), _CW, "message.timestamp.difference.max.ms"),
    ConfigKey("log.message.downconversion.enable", _T.BOOLEAN, True, "Down-convert records for old fetchers.", None, _CW, "message.downconversion.enable"),
    ConfigKey("message.max.bytes", _T.INT, 1048588, "Largest record batch accepted.", at_least(0), _CW, "max.message.bytes"),
    ConfigKey("compression.type", _T.STRING, "producer", "Codec logs are stored with; producer keeps the batch's.", one_of(*_COMPRESSION_TYPES), _CW, "compression.type"),
    # --- topics, replication and controller
    ConfigKey("num.partitions", _T.INT, 1, "Partitions of an auto-created topic.", at_least(1)),
    ConfigKey("default.replication.factor", _T.INT, 1, "Replication factor of an auto-created topic.", at_least(1)),
    ConfigKey("min.insync.replicas", _T.INT, 1, "Replicas that must acknowledge an acks=all produce.", at_least(1), _CW, "min.insync.replicas"),
    ConfigKey("unclean.leader.election.enable", _T.BOOLEAN, False, "Allow a leader from outside the ISR (may lose data).", None, _CW, "unclean.leader.election.enable"),
    ConfigKey("auto.create.topics.enable", _T.BOOLEAN, True, "Create a topic on Metadata for an unknown name."),
    ConfigKey("delete.topic.enable", _T.BOOLEAN, True, "Honour DeleteTopics."),
    ConfigKey("auto.leader.rebalance.enable", _T.BOOLEAN, True, "Move leadership back to preferred replicas."),
    ConfigKey("leader.imbalance.per.broker.percentage", _T.INT, 10, "Imbalance that triggers a rebalance."),
    ConfigKey("leader.imbalance.check.interval.seconds", _T.LONG, 300, "How often imbalance is checked."),
    ConfigKey("controlled.shutdown.enable", _T.BOOLEAN, True, "Move leadership away before shutting down."),
    ConfigKey("controlled.shutdown.max.retries", _T.INT, 3, "Attempts at a controlled shutdown."),
    ConfigKey("controlled.shutdown.retry.backoff.ms", _T.LONG, 5000, "Pause between attempts."),
    ConfigKey("controller.socket.timeout.ms", _T.INT, 30000, "Timeout of controller-to-broker requests."),
    ConfigKey("replica.lag.time.max.ms", _T.LONG, 30000, "A follower this far behind leaves the ISR."),
    ConfigKey("replica.fetch.max.bytes", _T.INT, 1048576, "Bytes a follower asks per partition.", at_least(0)),
    ConfigKey("replica.fetch.min.bytes", _T.INT, 1, "Bytes a follower waits for."),
    ConfigKey("replica.fetch.wait.max.ms", _T.INT, 500, "Longest a follower fetch waits."),
    ConfigKey("replica.fetch.backoff.ms", _T.INT, 1000, "Pause after a failed follower fetch.", at_least(0)),
    ConfigKey("replica.fetch.response.max.bytes", _T.INT, 10485760, "Bytes a follower asks per fetch.", at_least(0)),
    ConfigKey("replica.socket.timeout.ms", _T.INT, 30000, "Follower socket timeout."),
    ConfigKey("replica.socket.receive.buffer.bytes", _T.INT, 65536, "Follower SO_RCVBUF."),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", _T.LONG, 5000, "How often high watermarks are checkpointed."),
    ConfigKey("replica.selector.class", _T.CLASS, None, "Chooses the replica a consumer fetches from (KIP-392)."),
    ConfigKey("leader.replication.throttled.rate", _T.LONG, LONG_MAX, "Bytes/s this leader sends for throttled replicas (KIP-73): the per-broker dynamic value, else this file; a cluster default does not throttle (Kafka 2.6).", at_least(0), _CW),
    ConfigKey("follower.replication.throttled.rate", _T.LONG, LONG_MAX, "Bytes/s this follower fetches for throttled replicas (KIP-73): the per-broker dynamic value, else this file; a cluster default does not throttle (Kafka 2.6).", at_least(0), _CW),
    ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", _T.LONG, LONG_MAX, "Bytes/s this broker copies, over all its copier threads, to move replicas between its log dirs (AlterReplicaLogDirs): the per-broker dynamic value, else this file; a cluster default does not throttle (Kafka 2.6).", at_least(0), _CW),
    ConfigKey("num.replica.alter.log.dirs.threads", _T.INT, None, "Threads copying replicas moved between log dirs, each one partition at a time; unset: one per log dir.", at_least(1)),
    ConfigKey("replication.quota.window.num", _T.INT, 11, "Samples of the replication throttle rates.", at_least(1)),
    ConfigKey("replication.quota.window.size.seconds", _T.INT, 1, "Length of one replication throttle sample.", at_least(1)),
    ConfigKey("quota.window.num", _T.INT, 11, "Samples of the client quota rates (KIP-13).", at_least(1)),
    ConfigKey("quota.window.size.seconds", _T.INT, 1, "Length of one client quota sample.", at_least(1)),
    ConfigKey("quota.producer.default", _T.LONG, LONG_MAX, "Deprecated static producer byte rate per client id, below every dynamic quota.", at_least(1)),
    ConfigKey("quota.consumer.default", _T.LONG, LONG_MAX, "Deprecated static consumer byte rate per client id, below every dynamic quota.", at_least(1)),
    ConfigKey("fetch.max.bytes", _T.INT, 57671680, "Largest fetch response.", at_least(1024)),
    ConfigKey("max.incremental.fetch.session.cache.slots", _T.INT, 1000, "Incremental fetch sessions kept.", at_least(0)),
    ConfigKey("inter.broker.protocol.version", _T.STRING, "2.6-IV0", "Protocol spoken between brokers.", _kafka_version),
    # --- group coordinator
    ConfigKey("offsets.topic.num.partitions", _T.INT, 50, "Partitions of __consumer_offsets.", at_least(1)),
    ConfigKey("offsets.topic.replication.factor", _T.SHORT, 3, "Replication factor of __consumer_offsets.", at_least(1)),
    ConfigKey("offsets.topic.segment.bytes", _T.INT, 104857600, "Segment size of __consumer_offsets.", at_least(1)),
    ConfigKey("offsets.topic.compression.codec", _T.INT, 0, "Codec id of offset commits.", between(0, 4)),
    ConfigKey("offsets.retention.minutes", _T.INT, 10080, "How long committed offsets of an empty group live.", at_least(1)),
    ConfigKey("offsets.retention.check.interval.ms", _T.LONG, 600000, "How often stale offsets are removed.", at_least(1)),
    ConfigKey("offsets.commit.timeout.ms", _T.INT, 5000, "Longest an offset commit waits for replication.", at_least(1)),
    ConfigKey("offsets.commit.required.acks", _T.SHORT, -1, "acks of offset commit appends."),
    ConfigKey("offsets.load.buffer.size", _T.INT, 5242880, "Read size while loading offsets.", at_least(1)),
    ConfigKey("offset.metadata.max.bytes", _T.INT, 4096, "Largest metadata string of an offset commit."),
    ConfigKey("group.initial.rebalance.delay.ms", _T.INT, 3000, "Wait for more members before the first rebalance."),
    ConfigKey("group.min.session.timeout.ms", _T.INT, 6000, "Smallest session timeout a member may ask for."),
    ConfigKey("group.max.session.timeout.ms", _T.INT, 1800000, "Largest session timeout a member may ask for."),
    ConfigKey("group.max.size", _T.INT, INT_MAX, "Members per group.", at_least(1)),
    # --- transaction coordinator
    ConfigKey("transaction.state.log.num.partitions", _T.INT, 50, "Partitions of __transaction_state.", at_least(1)),
    ConfigKey("transaction.state.log.replication.factor", _T.SHORT, 3, "Replication factor of __transaction_state.", at_least(1)),
    ConfigKey("transaction.state.log.min.isr", _T.INT, 2, "min.insync.replicas of __transaction_state.", at_least(1)),
    ConfigKey("transaction.state.log.segment.bytes", _T.INT, 104857600, "Segment size of __transaction_state.", at_least(1)),
    ConfigKey("transaction.state.log.load.buffer.size", _T.INT, 5242880, "Read size while loading transactions.", at_least(1)),
    ConfigKey("transactional.id.expiration.ms", _T.INT, 604800000, "Idle transactional ids (and idle producer ids) expire after this.", at_least(1)),
    ConfigKey("transaction.max.timeout.ms", _T.INT, 900000, "Largest transaction timeout a producer may ask for.", at_least(1)),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", _T.INT, 10000, "How often timed-out transactions are aborted.", at_least(1)),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", _T.INT, 3600000, "How often expired transactional ids are removed.", at_least(1)),
    # Kafka 3.6's name (KIP-890); 2.6 has no such check. Off gives 2.6's behaviour exactly.
    ConfigKey("transaction.partition.verification.enable", _T.BOOLEAN, True, "Refuse a transactional produce to a partition the transaction coordinator has not added to the producer's ongoing transaction (KIP-890 style)."),
    # --- metrics (not a Kafka key: Kafka exposes JMX; this serves Prometheus's text format instead)
    ConfigKey("metrics.listener", _T.STRING, None, "http://host:port where /metrics (Prometheus text format), /health and /ready are served; unset: off.", _metrics_listener),
    # --- sofakafka's own
    ConfigKey("sofakafka.test.clock.offset.ms", _T.LONG, 0, "Tests only: milliseconds added to this broker's wall clock (record and append timestamps, retention, rolls by time); the chaos suite skews a broker's clock with it. Leave it at 0.", None),
    ConfigKey("sofakafka.connection.max.response.backlog.bytes", _T.LONG, 134217728, "Responses a connection may have waiting to be sent (the client not reading them) before it is closed, with the reason logged.", at_least(1)),
    ConfigKey("sofakafka.max.partitions.per.topic", _T.INT, 200000, "Most partitions a topic may be created with or grown to (CreateTopics, CreatePartitions answer INVALID_PARTITIONS above it); Kafka has no bound, and 2^31 - 1 asked for exhausts memory.", at_least(1), _CW),
    ConfigKey("log.max.open.segment.files", _T.INT, 1000, "Segment files (.log, .txnindex) kept open at once; the least recently used idle ones are closed and reopened on use, so descriptors stay bounded whatever the partitions and segments (indexes are memory-mapped and hold none, as in Kafka). Not a Kafka key.", at_least(1)),
    ConfigKey("sofakafka.produce.audit.enable", _T.BOOLEAN, False, "Record who produced each batch (client id and address, producer id) in the compacted topic __sofakafka_produce_audit, for the console's message trace."),
    ConfigKey("sofakafka.produce.audit.retention.ms", _T.LONG, 604800000, "retention.ms of __sofakafka_produce_audit (its cleanup.policy is compact,delete).", at_least(1)),
    ConfigKey("sofakafka.transaction.add.partitions.wait.ms", _T.INT, 100, "How long AddPartitionsToTxn waits for the producer's previous transaction to complete (its markers written) before answering CONCURRENT_TRANSACTIONS; 0 answers at once, as Kafka 2.6 does.", at_least(0)),
    ConfigKey("sofakafka.metadata.snapshot.interval.ops", _T.INT, 1000, "Embedded metadata store: journal records between compacted snapshots.", at_least(1)),
    ConfigKey("sofakafka.ldc.model", _T.STRING, None, "The LDC model (instance, cells, zones, cities) as JSON, kept as a cluster-wide dynamic config; written by `sofakafka ldc`, read by LDC clients and the router (docs/ldc.md).", _ldc_model, _CW),
    ConfigKey("sofakafka.router.rules", _T.STRING, None, "The message router's rules as JSON, kept as a cluster-wide dynamic config; written by `sofakafka router rules`, read by `sofakafka router run` (docs/ldc.md).", _router_rules, _CW),
]

CONFIG_KEYS: Mapping[str, ConfigKey] = {k.name: k for k in _KEYS}

LISTED_ONLY_WHEN_SET: frozenset[str] = frozenset({"leader.replication.throttled.rate",
                                                  "follower.replication.throttled.rate",
                                                  "replica.alter.log.dirs.io.max.bytes.per.second",
                                                  "sofakafka.ldc.model", "sofakafka.router.rules"})
"""Kafka keeps the throttle rates outside KafkaConfig (DynamicConfig.Broker), so DescribeConfigs names them only
once set; the LDC documents are listed only once set too, so a broker's description is not padded with them."""

BROKER_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.hours": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.roll.jitter.hours": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.minutes": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.hours": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "log.dirs": ("log.dirs", "log.dir"),
    "log.dir": ("log.dirs", "log.dir"),
}
"""Broker keys that stand for one setting, in precedence order (the first one set wins)."""

TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    topic: tuple(k.name for k in _KEYS if k.topic_config == topic and k.name != "log.flush.scheduler.interval.ms")
    + (("log.flush.scheduler.interval.ms",) if topic == "flush.ms" else ())
    for topic in dict.fromkeys(k.topic_config for k in _KEYS if k.topic_config is not None)
}
"""Topic key -> the broker keys that give its default, in precedence order."""

_LISTENER_OVERRIDE_RE = re.compile(r"^listener\.name\.[a-z0-9_]+\..+$")


# ----------------------------------------------------------------------------------------------- parsing


def parse_value(key: ConfigKey, raw: str) -> ConfigValue:
    """Parse a string the way Kafka's ``ConfigDef.parseType`` does, then validate it."""
    value = _parse_type(key, raw)
    if key.validator is not None:
        reason = key.validator(value)
        if reason is not None:
            raise ConfigError(key.name, reason)
    return value


def _parse_type(key: ConfigKey, raw: str) -> ConfigValue:
    text = raw.strip()
    t = key.type
    if t is ConfigType.PASSWORD:
        return raw
    if t in (ConfigType.STRING, ConfigType.CLASS):
        return text
    if t is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(key.name, f"must be true or false, got {raw!r}")
    if t is ConfigType.LIST:
        return [] if text == "" else [item for item in re.split(r"\s*,\s*", text)]
    if t is ConfigType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(key.name, f"must be a number, got {raw!r}") from None
    bounds = {ConfigType.SHORT: 2**15, ConfigType.INT: 2**31, ConfigType.LONG: 2**63}[t]
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ConfigError(key.name, f"must be an integer ({t.value}), got {raw!r}")
    number = int(text)
    if not -bounds <= number < bounds:
        raise ConfigError(key.name, f"does not fit in a {t.value}: {raw!r}")
    return number


def format_value(key: ConfigKey, value: ConfigValue) -> str | None:
    """The string DescribeConfigs reports (passwords are never shown)."""
    if value is None:
        return None
    if key.type is ConfigType.PASSWORD:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def load_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` syntax (java.util.Properties.load), later keys winning.

    Supports ``#``/``!`` comments, ``key=value``, ``key: value`` and ``key value``, backslash line
    continuations (leading blanks of the next line dropped), and the escapes ``\\t \\n \\r \\f \\uXXXX``;
    any other escaped character stands for itself (so ``\\=`` and ``\\:`` may appear in keys).
    """
    result: dict[str, str] = {}
    # Java ends lines only at \n, \r and \r\n (str.splitlines would also split at \x0b, \x85, ...).
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        # Comment lines are never continued; a logical line continues while it ends in an odd run of
        # backslashes.
        while _ends_with_odd_backslashes(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _ends_with_odd_backslashes(line):
            line = line[:-1]
        key, value = _split_key_value(line)
        result[_unescape(key, line)] = _unescape(value, line)
    return result


def _ends_with_odd_backslashes(line: str) -> bool:
    run = len(line) - len(line.rstrip("\\"))
    return run % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    pos = 0
    n = len(line)
    while pos < n:
        c = line[pos]
        if c == "\\":
            pos += 2
            continue
        if c in "=: \t\f":
            break
        pos += 1
    key = line[:pos]
    rest = pos
    while rest < n and line[rest] in " \t\f":
        rest += 1
    if rest < n and line[rest] in "=:":
        rest += 1
        while rest < n and line[rest] in " \t\f":
            rest += 1
    return key, line[rest:]


_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, line: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                key = _split_key_value(line)[0]
                raise ConfigError(key or line, "malformed \\uxxxx escape in server.properties")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_SIMPLE_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def read_properties_file(path: str | os.PathLike[str]) -> dict[str, str]:
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("iso-8859-1")
    return load_properties(text)


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """``--override key=value`` arguments, as Kafka's start script takes them."""
    result: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(key or item, f"--override wants key=value, got {item!r}")
        result[key] = value
    return result


# --------------------------------------------------------------------------------------------- listeners


@dataclass(frozen=True)
class EndPoint:
    """One listener: ``host`` is "" to bind (or advertise) every interface, as Kafka's null host."""

    listener_name: str
    host: str
    port: int
    security_protocol: SecurityProtocol

    def connection_string(self) -> str:
        """``NAME://host:port`` with IPv6 hosts bracketed, as Kafka writes endpoints into ZooKeeper."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


_LISTENER_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_ENDPOINT_RE = re.compile(r"^(?P<name>[^:/]*)://(?:\[(?P<v6>[0-9a-fA-F:.%]+)\]|(?P<host>[0-9a-zA-Z\-%._]*)):(?P<port>-?[0-9]+)$")


def parse_security_protocol_map(key: str, text: str) -> dict[str, SecurityProtocol]:
    result: dict[str, SecurityProtocol] = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not _LISTENER_NAME_RE.match(name):
            raise ConfigError(key, f"entries must be NAME:PROTOCOL, got {item!r}")
        if protocol not in _PROTOCOLS:
            raise ConfigError(key, f"unknown security protocol {protocol!r} for listener {name} (use one of {', '.join(_PROTOCOLS)})")
        if name in result:
            raise ConfigError(key, f"listener {name} is mapped twice")
        result[name] = SecurityProtocol(protocol)
    return result


def parse_listeners(key: str, text: str, protocol_map: Mapping[str, SecurityProtocol]) -> list[EndPoint]:
    """``NAME://host:port`` list; names are case-insensitive (normalised to upper case, like Kafka)."""
    endpoints: list[EndPoint] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        m = _ENDPOINT_RE.match(item)
        if m is None:
            raise ConfigError(key, f"listener {item!r} is not NAME://host:port (IPv6 hosts in brackets)")
        name = m.group("name").upper()
        if not name or not _LISTENER_NAME_RE.match(name):
            raise ConfigError(key, f"listener {item!r} has an invalid name")
        port = int(m.group("port"))
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"listener {item!r}: port must be between 0 and 65535")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(key, f"no security protocol defined for listener {name} (see listener.security.protocol.map)")
        host = m.group("v6") if m.group("v6") is not None else m.group("host")
        endpoints.append(EndPoint(name, host, port, protocol))
    names = [e.listener_name for e in endpoints]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(key, f"each listener must have a different name, {name} appears {names.count(name)} times")
    return endpoints


def parse_connection_overrides(key: str, raw: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` or ``ip:count`` pairs, comma-separated (Kafka's
    format). Host names are kept as written; the server resolves them once when it starts."""
    out: dict[str, int] = {}
    for item in (raw or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ConfigError(key, f"expected host:count, got {item!r}")
        try:
            value = int(count.strip())
        except ValueError:
            raise ConfigError(key, f"the count of {host} must be an integer, got {count.strip()!r}") from None
        if value < 0:
            raise ConfigError(key, f"the count of {host} must be >= 0, got {value}")
        out[host] = value
    return out


LISTENER_MAX_CONNECTIONS_RE = re.compile(r"listener\.name\.([^.]+)\.max\.connections")


def listener_max_connections_key(listener_name: str) -> str:
    """Kafka's per-listener connection limit, ``listener.name.<listener, lower case>.max.connections``."""
    return f"listener.name.{listener_name.lower()}.max.connections"


def parse_max_connections(key: str, raw: str) -> int:
    """A ``max.connections`` value (broker-wide or a listener's): an integer >= 0."""
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(key, f"must be an integer, got {raw!r}") from None
    if value < 0:
        raise ConfigError(key, f"must be >= 0, got {value}")
    return value


def parse_zookeeper_connect(key: str, text: str) -> tuple[str, str | None]:
    """Split ``host:port,host:port/chroot`` into the connect string and the chroot (None for the root)."""
    hosts, slash, chroot = text.strip().partition("/")
    if not hosts:
        raise ConfigError(key, f"needs at least one host:port, got {text!r}")
    for hostport in hosts.split(","):
        host, sep, port = hostport.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(key, f"{hostport.strip()!r} is not host:port")
    if not slash:
        return hosts, None
    path = "/" + chroot
    if path == "/":
        return hosts, None
    if path.endswith("/") or "//" in path or any(part in (".", "..") for part in path.split("/")):
        raise ConfigError(key, f"invalid chroot {path!r}")
    return hosts, path


# ----------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class SynonymEntry:
    """One row of DescribeConfigs' ``synonyms``: a key that sets the same thing, its value and source."""

    name: str
    value: str | None
    source: ConfigSource


SINGLE_BROKER_SAMPLE: Mapping[str, str] = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
"""The keys ``sofakafka serve`` sets when given no properties file, as Kafka's sample server.properties does."""


@dataclass
class KafkaConfig:
    """A validated broker configuration. Build it with :meth:`from_properties` or :meth:`load`.

    Immutable after construction as far as callers are concerned; dynamic configs (AlterConfigs) will be
    layered on top by the broker rather than written into this object.
    """

    originals: dict[str, str]
    values: dict[str, ConfigValue] = field(repr=False)
    listener_overrides: dict[str, str] = field(default_factory=dict, repr=False)

    # --- construction

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> KafkaConfig:
        values: dict[str, ConfigValue] = {k.name: k.default for k in _KEYS}
        listener_overrides: dict[str, str] = {}
        for name, raw in props.items():
            key = CONFIG_KEYS.get(name)
            if key is None:
                if _LISTENER_OVERRIDE_RE.match(name):
                    listener_overrides[name] = raw
                    continue
                raise ConfigError(name, _unknown_key_reason(name))
            values[name] = parse_value(key, raw)
        config = cls(dict(props), values, listener_overrides)
        config._validate()
        return config

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, overrides: Sequence[str] = ()) -> KafkaConfig:
        """``sofakafka serve [server.properties] [--override key=value ...]``: overrides win over the file."""
        # With no file, start from what Kafka's own sample config/server.properties sets for a single
        # broker: Kafka's built-in defaults of 3 replicas for the internal topics cannot be met by one
        # broker, so consumer groups and transactions would never find a coordinator.
        props: dict[str, str] = dict(SINGLE_BROKER_SAMPLE) if path is None else {}
        if path is not None:
            try:
                props.update(read_properties_file(path))
            except OSError as exc:
                raise ConfigError(str(path), f"cannot read properties file: {exc.strerror or exc}") from exc
        props.update(parse_overrides(overrides))
        return cls.from_properties(props)

    def _validate(self) -> None:
        parse_connection_overrides("max.connections.per.ip.overrides", self.get_str("max.connections.per.ip.overrides"))
        for key, value in self.originals.items():
            if LISTENER_MAX_CONNECTIONS_RE.fullmatch(key):
                parse_max_connections(key, value)
        if self.get_int("max.connections.per.ip") == 0 and not self.get_str("max.connections.per.ip.overrides"):
            raise ConfigError("max.connections.per.ip", "0 refuses every connection; it needs max.connections.per.ip.overrides")
        broker_id = self.get_int("broker.id")
        max_id = self.get_int("reserved.broker.max.id")
        if self.get_bool("broker.id.generation.enable"):
            if not -1 <= broker_id <= max_id:
                raise ConfigError("broker.id", f"must be between -1 and reserved.broker.max.id ({max_id}), got {broker_id}")
        elif broker_id < 0:
            raise ConfigError("broker.id", f"must be >= 0 when broker.id.generation.enable is false, got {broker_id}")
        if self.log_retention_ms == 0:
            decided_by = next(k for k in BROKER_SYNONYMS["log.retention.ms"] if self.values[k] is not None)
            raise ConfigError(decided_by, "must be -1 (unlimited) or >= 1, got 0")
        if not self.log_dirs:
            raise ConfigError("log.dirs", "needs at least one directory")
        if not self.uses_embedded_store:
            parse_zookeeper_connect("zookeeper.connect", self.get_str("zookeeper.connect"))
        # Listener checks, in the order Kafka reports them.
        listeners = self.listeners
        ports = [e.port for e in listeners if e.port != 0]
        for port in ports:
            if ports.count(port) > 1:
                raise ConfigError("listeners", f"each listener must have a different port, {port} appears {ports.count(port)} times")
        if not listeners:
            raise ConfigError("listeners", "needs at least one listener")
        advertised = self.advertised_listeners
        listener_names = {e.listener_name for e in listeners}
        for e in advertised:
            if e.host == "0.0.0.0":
                raise ConfigError("advertised.listeners", f"cannot use the nonroutable meta-address 0.0.0.0 ({e.listener_name})")
            if e.listener_name not in listener_names:
                raise ConfigError("advertised.listeners", f"listener {e.listener_name} is not in listeners")
            if e.port == 0 and self.values["advertised.listeners"] is not None:
                raise ConfigError("advertised.listeners", f"listener {e.listener_name} must advertise a real port, not 0")
        if self.values["inter.broker.listener.name"] is not None and "security.inter.broker.protocol" in self.originals:
            raise ConfigError("inter.broker.listener.name", "only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
        inter = self.inter_broker_listener_name
        if inter not in {e.listener_name for e in advertised}:
            source = "inter.broker.listener.name" if self.values["inter.broker.listener.name"] is not None else "security.inter.broker.protocol"
            raise ConfigError(source, f"the inter-broker listener {inter} must be one of the advertised listeners")
        if self.get_int("group.max.session.timeout.ms") < self.get_int("group.min.session.timeout.ms"):
            raise ConfigError("group.max.session.timeout.ms", "must be >= group.min.session.timeout.ms")
        if self.get_int("replica.fetch.wait.max.ms") > self.get_int("replica.socket.timeout.ms"):
            raise ConfigError("replica.fetch.wait.max.ms", "must be <= replica.socket.timeout.ms")
        if self.get_int("replica.fetch.wait.max.ms") > self.get_int("replica.lag.time.max.ms"):
            raise ConfigError("replica.fetch.wait.max.ms", "must be <= replica.lag.time.max.ms")
        acks = self.get_int("offsets.commit.required.acks")
        if not -1 <= acks <= self.get_int("offsets.topic.replication.factor"):
            raise ConfigError("offsets.commit.required.acks", "must be between -1 and offsets.topic.replication.factor")
        if self.get_int("transaction.state.log.min.isr") > self.get_int("transaction.state.log.replication.factor"):
            raise ConfigError("transaction.state.log.min.isr", "must be <= transaction.state.log.replication.factor")

    # --- typed access

    def get(self, name: str) -> ConfigValue:
        try:
            return self.values[name]
        except KeyError:
            raise ConfigError(name, "unknown configuration key") from None

    def get_int(self, name: str) -> int:
        value = self.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} is not an integer key or has no value")
        return value

    def get_bool(self, name: str) -> bool:
        value = self.get(name)
        if not isinstance(value, bool):
            raise TypeError(f"{name} is not a boolean key")
        return value

    def get_str(self, name: str) -> str:
        value = self.get(name)
        if not isinstance(value, str):
            raise TypeError(f"{name} is not a string key or has no value")
        return value

    def get_list(self, name: str) -> list[str]:
        value = self.get(name)
        if not isinstance(value, list):
            raise TypeError(f"{name} is not a list key")
        return list(value)

    def source(self, name: str) -> ConfigSource:
        if name not in CONFIG_KEYS:
            raise ConfigError(name, "unknown configuration key")
        return ConfigSource.STATIC_BROKER_CONFIG if name in self.originals else ConfigSource.DEFAULT_CONFIG

    def value_string(self, name: str) -> str | None:
        return format_value(CONFIG_KEYS[name], self.get(name))

    def synonyms(self, name: str) -> list[SynonymEntry]:
        """DescribeConfigs synonyms of a broker key: each key of the same setting that has a value."""
        entries: list[SynonymEntry] = []
        for synonym in BROKER_SYNONYMS.get(name, (name,)):
            value = self.value_string(synonym)
            source = self.source(synonym)
            if value is None and source is ConfigSource.DEFAULT_CONFIG:
                continue
            entries.append(SynonymEntry(synonym, value, source))
        return entries

    # --- derived settings (Kafka's precedence rules)

    @property
    def delegation_token_master_key(self) -> str | None:
        """The delegation token secret (``delegation.token.secret.key`` over ``delegation.token.master.key``, as
        Kafka 3.0 reads them); None when unset or empty: tokens are off."""
        value = self.values.get("delegation.token.secret.key")
        if value is None:
            value = self.values.get("delegation.token.master.key")
        return value if isinstance(value, str) and value else None

    @property
    def broker_id(self) -> int:
        return self.get_int("broker.id")

    @property
    def uses_embedded_store(self) -> bool:
        connect = self.values["zookeeper.connect"]
        return not (isinstance(connect, str) and connect.strip())

    def effective_broker_id(self) -> int | None:
        """The id to run as, or None when it must be generated through ZooKeeper's ``/brokers/seqid``."""
        if self.broker_id >= 0:
            return self.broker_id
        return 0 if self.uses_embedded_store else None

    @property
    def zookeeper_connect(self) -> str | None:
        """The ZooKeeper connect string without the chroot, or None for the embedded store."""
        if self.uses_embedded_store:
            return None
        return parse_zookeeper_connect("zookeeper.connect", self.get_str("zookeeper.connect"))[0]

    @property
    def zookeeper_chroot(self) -> str | None:
        if self.uses_embedded_store:
            return None
        return parse_zookeeper_connect("zookeeper.connect", self.get_str("zookeeper.connect"))[1]

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        value = self.values["zookeeper.connection.timeout.ms"]
        return value if isinstance(value, int) else self.get_int("zookeeper.session.timeout.ms")

    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs`` when set, else ``log.dir``; the first entry also holds the embedded metadata store."""
        raw = self.values["log.dirs"]
        if raw is None:
            raw = self.values["log.dir"]
        assert isinstance(raw, str)
        return [d.strip() for d in raw.split(",") if d.strip()]

    @property
    def metadata_dir(self) -> Path:
        """Where the embedded metadata store lives: a directory in the first log dir."""
        return Path(self.log_dirs[0]) / "__sofakafka_metadata"

    @property
    def security_protocol_map(self) -> dict[str, SecurityProtocol]:
        return parse_security_protocol_map("listener.security.protocol.map", self.get_str("listener.security.protocol.map"))

    @property
    def listeners(self) -> list[EndPoint]:
        return parse_listeners("listeners", self.get_str("listeners"), self.security_protocol_map)

    @property
    def advertised_listeners(self) -> list[EndPoint]:
        """``advertised.listeners`` when set, else ``listeners`` (a bind-all host stays "": the server
        replaces it with the machine's name when it registers, as Kafka does)."""
        raw = self.values["advertised.listeners"]
        if raw is None:
            return self.listeners
        assert isinstance(raw, str)
        return parse_listeners("advertised.listeners", raw, self.security_protocol_map)

    @property
    def inter_broker_listener_name(self) -> str:
        explicit = self.values["inter.broker.listener.name"]
        if isinstance(explicit, str):
            return explicit.upper()
        return self.get_str("security.inter.broker.protocol")

    @property
    def log_retention_ms(self) -> int:
        """``log.retention.ms``, else minutes, else hours; any negative means -1 (keep forever)."""
        ms = self.values["log.retention.ms"]
        minutes = self.values["log.retention.minutes"]
        if isinstance(ms, int):
            millis = ms
        elif isinstance(minutes, int):
            millis = minutes * 60_000
        else:
            millis = self.get_int("log.retention.hours") * 3_600_000
        return -1 if millis < 0 else millis

    @property
    def log_roll_ms(self) -> int:
        ms = self.values["log.roll.ms"]
        return ms if isinstance(ms, int) else self.get_int("log.roll.hours") * 3_600_000

    @property
    def log_roll_jitter_ms(self) -> int:
        ms = self.values["log.roll.jitter.ms"]
        return ms if isinstance(ms, int) else self.get_int("log.roll.jitter.hours") * 3_600_000

    @property
    def log_flush_interval_ms(self) -> int:
        ms = self.values["log.flush.interval.ms"]
        return ms if isinstance(ms, int) else self.get_int("log.flush.scheduler.interval.ms")

    def topic_config_defaults(self) -> dict[str, ConfigValue]:
        """Topic key -> the value a topic without an override gets from this broker."""
        derived: dict[str, ConfigValue] = {
            "retention.ms": self.log_retention_ms,
            "segment.ms": self.log_roll_ms,
            "segment.jitter.ms": self.log_roll_jitter_ms,
            "flush.ms": self.log_flush_interval_ms,
        }
        result: dict[str, ConfigValue] = {}
        for topic, brokers in TOPIC_CONFIG_SYNONYMS.items():
            result[topic] = derived[topic] if topic in derived else self.get(brokers[0])
        return result


def _unknown_key_reason(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(CONFIG_KEYS), n=1, cutoff=0.8)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown configuration key{hint}"
