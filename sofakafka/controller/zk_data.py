"""Kafka 2.6's znode JSON, built and parsed (reference: ZOOKEEPER-LAYOUT.md).

Encoders write what a 2.6 broker writes (same field names, value types and versions, compact JSON as
Jackson emits it); decoders accept what 2.6 accepts, including the older versions it still reads, so a
sofakafka broker and a Kafka 2.6 broker can share one ZooKeeper. Malformed data raises
:class:`ZkDataError`, never a bare KeyError.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PRODUCER_ID_BLOCK_SIZE = 1000
LOG_DIR_FAILURE_EVENT = 1


class ZkDataError(ValueError):
    """Znode data that is not the JSON Kafka 2.6 writes there."""


def _dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{what}: not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ZkDataError(f"{what}: expected a JSON object, got {type(doc).__name__}")
    return doc


def _field(doc: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    if name not in doc:
        raise ZkDataError(f"{what}: missing field {name!r}")
    value = doc[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ZkDataError(f"{what}: field {name!r} has the wrong type ({value!r})")
    return value


def _int_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ZkDataError(f"{what}: expected a list of integers, got {value!r}")
    return list(value)


def _long_string(doc: Mapping[str, Any], name: str, what: str) -> int:
    """Kafka writes some longs as JSON strings; accept numbers too, as Jackson's readers do."""
    value = _field(doc, name, (str, int), what)
    try:
        return int(value)
    except ValueError:
        raise ZkDataError(f"{what}: field {name!r} is not a number ({value!r})") from None


# ------------------------------------------------------------------------------------ /brokers/ids/<id>


@dataclass(frozen=True)
class BrokerEndpoint:
    """A registered listener; ``host`` None is Kafka's null host (written ``NAME://:port``)."""

    listener_name: str
    host: str | None
    port: int
    security_protocol: str

    def connection_string(self) -> str:
        if self.host is None:
            return f"{self.listener_name}://:{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


_ENDPOINT_RE = re.compile(r"^(?P<name>[^:/]+)://(?:\[(?P<v6>[0-9a-fA-F:.%]+)\]|(?P<host>[0-9a-zA-Z\-%._]*)):(?P<port>-?[0-9]+)$")


def parse_endpoint(text: str, protocol_map: Mapping[str, str] | None) -> BrokerEndpoint:
    m = _ENDPOINT_RE.match(text)
    if m is None:
        raise ZkDataError(f"endpoint {text!r} is not NAME://host:port")
    name = m.group("name")
    if protocol_map is None:
        protocol = name
    elif name in protocol_map:
        protocol = protocol_map[name]
    else:
        raise ZkDataError(f"endpoint {text!r}: no security protocol for listener {name}")
    if protocol not in SECURITY_PROTOCOLS:
        raise ZkDataError(f"endpoint {text!r}: unknown security protocol {protocol!r}")
    host = m.group("v6") if m.group("v6") is not None else (m.group("host") or None)
    return BrokerEndpoint(name, host, int(m.group("port")), protocol)


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    timestamp_ms: int
    rack: str | None = None
    jmx_port: int = -1

    def encode(self) -> bytes:
        """Version 4, as 2.6 writes it; ``host``/``port`` repeat the first PLAINTEXT endpoint for old readers."""
        plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        doc: dict[str, Any] = {
            "version": 4,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "endpoints": [e.connection_string() for e in self.endpoints],
            "listener_security_protocol_map": {e.listener_name: e.security_protocol for e in self.endpoints},
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp_ms),
        }
        if self.rack is not None:
            doc["rack"] = self.rack
        return _dumps(doc)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        """The id comes from the znode name, as in Kafka; the JSON does not carry it."""
        what = f"/brokers/ids/{broker_id}"
        doc = _loads(data, what)
        version = _field(doc, "version", int, what)
        if version < 1:
            raise ZkDataError(f"{what}: unsupported broker registration version {version}")
        if version == 1:
            host = _field(doc, "host", str, what)
            port = _field(doc, "port", int, what)
            endpoints: tuple[BrokerEndpoint, ...] = (BrokerEndpoint("PLAINTEXT", host, port, "PLAINTEXT"),)
        else:
            raw = _field(doc, "endpoints", list, what)
            protocol_map = doc.get("listener_security_protocol_map")
            if protocol_map is not None and not (
                isinstance(protocol_map, dict) and all(isinstance(v, str) for v in protocol_map.values())
            ):
                raise ZkDataError(f"{what}: listener_security_protocol_map is not a map of strings")
            endpoints = tuple(parse_endpoint(_as_str(e, what), protocol_map) for e in raw)
        rack = doc.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise ZkDataError(f"{what}: rack is not a string")
        jmx = doc.get("jmx_port", -1)
        timestamp = _long_string(doc, "timestamp", what) if "timestamp" in doc else -1
        return cls(broker_id, endpoints, timestamp, rack, jmx if isinstance(jmx, int) else -1)


def _as_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ZkDataError(f"{what}: expected a string, got {value!r}")
    return value


# ------------------------------------------------------------------------------- /brokers/topics/<t>


@dataclass(frozen=True)
class TopicAssignment:
    """Replica lists per partition (preferred leader first) and any reassignment in progress."""

    partitions: Mapping[int, Sequence[int]]
    adding_replicas: Mapping[int, Sequence[int]] = field(default_factory=dict)
    removing_replicas: Mapping[int, Sequence[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        def as_json(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items()) if r}

        return _dumps(
            {
                "version": 2,
                "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
                "adding_replicas": as_json(self.adding_replicas),
                "removing_replicas": as_json(self.removing_replicas),
            }
        )

    @classmethod
    def decode(cls, topic: str, data: bytes) -> TopicAssignment:
        what = f"/brokers/topics/{topic}"
        doc = _loads(data, what)
        _field(doc, "version", int, what)

        def as_map(name: str, required: bool) -> dict[int, list[int]]:
            raw = doc.get(name)
            if raw is None:
                if required:
                    raise ZkDataError(f"{what}: missing field {name!r}")
                return {}
            if not isinstance(raw, dict):
                raise ZkDataError(f"{what}: {name} is not an object")
            result: dict[int, list[int]] = {}
            for key, replicas in raw.items():
                if not key.lstrip("-").isdigit():
                    raise ZkDataError(f"{what}: partition id {key!r} is not a number")
                result[int(key)] = _int_list(replicas, what)
            return result

        return cls(as_map("partitions", True), as_map("adding_replicas", False), as_map("removing_replicas", False))


# ------------------------------------------------------------------ /brokers/topics/<t>/partitions/<p>/state


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    controller_epoch: int
    isr: tuple[int, ...]

    def encode(self) -> bytes:
        return _dumps(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, data: bytes, what: str = "partition state") -> PartitionState:
        doc = _loads(data, what)
        return cls(
            leader=_field(doc, "leader", int, what),
            leader_epoch=_field(doc, "leader_epoch", int, what),
            controller_epoch=_field(doc, "controller_epoch", int, what),
            isr=tuple(_int_list(_field(doc, "isr", list, what), what)),
        )


# ------------------------------------------------------------------------- /controller, /controller_epoch


@dataclass(frozen=True)
class ControllerRegistration:
    broker_id: int
    timestamp_ms: int

    def encode(self) -> bytes:
        return _dumps({"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp_ms)})

    @classmethod
    def decode(cls, data: bytes) -> ControllerRegistration:
        doc = _loads(data, "/controller")
        timestamp = _long_string(doc, "timestamp", "/controller") if "timestamp" in doc else -1
        return cls(_field(doc, "brokerid", int, "/controller"), timestamp)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    text = data.decode("ascii", errors="replace").strip()
    if not text.lstrip("-").isdigit():
        raise ZkDataError(f"/controller_epoch: {text!r} is not an integer")
    return int(text)


# ---------------------------------------------------------------------------------------------- /config


def encode_config(config: Mapping[str, str]) -> bytes:
    """``/config/<type>/<name>``: every value a string, even numbers."""
    return _dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})


def decode_config(data: bytes, what: str = "config") -> dict[str, str]:
    if not data:
        return {}
    doc = _loads(data, what)
    raw = doc.get("config", {})
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise ZkDataError(f"{what}: config is not a map of strings")
    return dict(raw)


def encode_config_change_notification(entity_path: str) -> bytes:
    """``entity_path`` is ``<type>/<sanitized name>``, e.g. ``topics/orders`` or ``brokers/<default>``."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change_notification(data: bytes) -> str:
    """The entity path, from a version 2 or a version 1 notification."""
    what = "config change notification"
    doc = _loads(data, what)
    version = _field(doc, "version", int, what)
    if version == 1:
        entity_type = _field(doc, "entity_type", str, what)
        if entity_type not in ("topics", "clients"):
            raise ZkDataError(f"{what}: version 1 entity_type must be topics or clients, got {entity_type!r}")
        return f"{entity_type}/{_field(doc, 'entity_name', str, what)}"
    if version == 2:
        path = _field(doc, "entity_path", str, what)
        if "/" not in path:
            raise ZkDataError(f"{what}: entity_path {path!r} is not <type>/<name>")
        return str(path)
    raise ZkDataError(f"{what}: unsupported version {version}")


# --------------------------------------------------------------------------------------- /cluster/id


def generate_cluster_id() -> str:
    """16 random bytes, URL-safe Base64 without padding: 22 characters, like Kafka's cluster ids."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    doc = _loads(data, "/cluster/id")
    return str(_field(doc, "id", str, "/cluster/id"))


# --------------------------------------------------------------------------- /latest_producer_id_block


@dataclass(frozen=True)
class ProducerIdBlock:
    """Producer ids ``block_start..block_end`` (both inclusive) claimed by ``broker``."""

    broker: int
    block_start: int
    block_end: int

    def encode(self) -> bytes:
        return _dumps(
            {"version": 1, "broker": self.broker, "block_start": str(self.block_start), "block_end": str(self.block_end)}
        )

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        what = "/latest_producer_id_block"
        doc = _loads(data, what)
        return cls(_field(doc, "broker", int, what), _long_string(doc, "block_start", what), _long_string(doc, "block_end", what))

    @classmethod
    def next_after(cls, previous: ProducerIdBlock | None, broker: int) -> ProducerIdBlock:
        """The block to claim next; the first block is 0..999."""
        start = 0 if previous is None else previous.block_end + 1
        if start + PRODUCER_ID_BLOCK_SIZE - 1 > 2**63 - 1:
            raise ZkDataError("producer ids are exhausted")
        return cls(broker, start, start + PRODUCER_ID_BLOCK_SIZE - 1)


# ------------------------------------------------------------- admin requests and broker notifications


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int


def _encode_partitions(partitions: Sequence[TopicPartition]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]})


def _decode_partitions(data: bytes, what: str) -> list[Mapping[str, Any]]:
    doc = _loads(data, what)
    raw = _field(doc, "partitions", list, what)
    for entry in raw:
        if not isinstance(entry, dict):
            raise ZkDataError(f"{what}: partition entries must be objects")
        _field(entry, "topic", str, what)
        _field(entry, "partition", int, what)
    return list(raw)


def encode_isr_change_notification(partitions: Sequence[TopicPartition]) -> bytes:
    return _encode_partitions(partitions)


def decode_isr_change_notification(data: bytes) -> list[TopicPartition]:
    return [TopicPartition(e["topic"], e["partition"]) for e in _decode_partitions(data, "isr change notification")]


def encode_preferred_replica_election(partitions: Sequence[TopicPartition]) -> bytes:
    return _encode_partitions(partitions)


def decode_preferred_replica_election(data: bytes) -> list[TopicPartition]:
    return [TopicPartition(e["topic"], e["partition"]) for e in _decode_partitions(data, "/admin/preferred_replica_election")]


def encode_reassignment(assignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)} for tp, r in sorted(assignment.items())
            ],
        }
    )


def decode_reassignment(data: bytes) -> dict[TopicPartition, list[int]]:
    what = "/admin/reassign_partitions"
    entries = _decode_partitions(data, what)
    return {TopicPartition(e["topic"], e["partition"]): _int_list(_field(e, "replicas", list, what), what) for e in entries}


def encode_log_dir_event(broker_id: int, event: int = LOG_DIR_FAILURE_EVENT) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "event": event})


def decode_log_dir_event(data: bytes) -> tuple[int, int]:
    what = "log dir event notification"
    doc = _loads(data, what)
    return _field(doc, "broker", int, what), _field(doc, "event", int, what)


@dataclass(frozen=True)
class LogDirFailures:
    """``/sofakafka/log_dir_failures/<broker>`` (ours, ephemeral): the log dirs of a broker that failed and the
    replicas they held, for the broker epoch (registration czxid) it wrote them in. Kafka's controller learns the
    same from the KAFKA_STORAGE_ERROR answers of a LeaderAndIsr round trip; our brokers follow the tree instead
    (docs/cluster.md), so the broker writes what it knows where the controller and every broker's cache read it.
    ``{"version":1,"broker_epoch":E,"log_dirs":[..],"partitions":{"<topic>":[p,..]}}``."""

    broker_epoch: int
    log_dirs: tuple[str, ...]
    partitions: frozenset[TopicPartition]

    def encode(self) -> bytes:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(self.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return _dumps({"version": 1, "broker_epoch": self.broker_epoch, "log_dirs": list(self.log_dirs),
                       "partitions": by_topic})

    @classmethod
    def decode(cls, data: bytes) -> LogDirFailures:
        what = "log dir failures"
        doc = _loads(data, what)
        dirs = _field(doc, "log_dirs", list, what)
        if not all(isinstance(d, str) for d in dirs):
            raise ZkDataError(f"{what}: log_dirs must be strings: {dirs!r}")
        partitions = _field(doc, "partitions", dict, what)
        return cls(_field(doc, "broker_epoch", int, what), tuple(dirs),
                   frozenset(TopicPartition(t, p) for t, ps in partitions.items() for p in _int_list(ps, what)))


DELETE_TOPIC_MARKER_DATA = b""
"""``/admin/delete_topics/<topic>`` carries no data."""
