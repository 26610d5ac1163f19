"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-546) as data: entities, their stored form, and which quota applies.

Pure: no store, no clock, no sockets. The store side (``/config/users/...``, ``/config/clients/...`` and their
change notifications) is :class:`~sofakafka.security.store.SecurityMetadata`; the measuring and throttling side
is ``sofakafka/broker/client_quotas.py``.

**Keys.** ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s, Kafka stores them as longs) and
``request_percentage`` (percent of one request thread's time per second, a double). ``controller_mutation_rate``
is Kafka 2.7's and is refused here as an unknown key, as 2.6 refuses it.

**Entities.** A quota belongs to a user, a client id, or a user and a client id, where either name may be the
default entity (``None`` here, ``<default>`` in the store, ``null`` on the wire):

============================================  =================================================
entity                                        znode
============================================  =================================================
user ``alice``                                ``/config/users/alice``
user ``alice``, client id ``app``             ``/config/users/alice/clients/app``
user ``alice``, default client id             ``/config/users/alice/clients/<default>``
default user                                  ``/config/users/<default>``
default user, client id ``app``               ``/config/users/<default>/clients/app``
default user, default client id               ``/config/users/<default>/clients/<default>``
client id ``app``                             ``/config/clients/app``
default client id                             ``/config/clients/<default>``
============================================  =================================================

Names are URL-encoded (Kafka's Sanitizer) in the znode names.

**Which quota applies** (Kafka 2.6's DefaultQuotaCallback, per quota type): the first of these entities that
has a value for the type decides, in this order::

    1 /config/users/<user>/clients/<client-id>      5 /config/users/<default>/clients/<default>
    2 /config/users/<user>/clients/<default>        6 /config/users/<default>
    3 /config/users/<user>                          7 /config/clients/<client-id>
    4 /config/users/<default>/clients/<client-id>   8 /config/clients/<default>

and the clients that share a quota are those with the same *metric tags* (:func:`quota_metric_tags`): a user
quota (levels 3 and 6) is shared by every client id of the user, a client-id quota (7 and 8) by every user of the
client id, and levels 1, 2, 4, 5 by connections of that user with that client id.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import EllipsisType

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
LONG_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)

# AlterClientQuotas' Long check: Kafka adds this epsilon before truncating and refuses a value further away.
_LONG_EPSILON = 1e-6
_LONG_MAX = 2**63 - 1


class QuotaError(ValueError):
    """Bad quota input; Kafka answers INVALID_REQUEST with this message."""


class UnknownEntityTypeError(QuotaError):
    """A describe filter on an entity type Kafka 2.6 does not know: it answers UNSUPPORTED_VERSION."""


@dataclass(frozen=True, order=True)
class QuotaEntity:
    """One quota entity. ``user`` / ``client_id``: absent (``has_*`` False), the default (None) or a name."""

    has_user: bool
    user: str | None
    has_client_id: bool
    client_id: str | None

    @staticmethod
    def of(user: str | EllipsisType | None = ..., client_id: str | EllipsisType | None = ...) -> QuotaEntity:
        """``QuotaEntity.of(user="alice")``, ``QuotaEntity.of(client_id=None)`` (the default client id); a name
        left out (``...``) is not part of the entity."""
        return QuotaEntity(not isinstance(user, EllipsisType), None if isinstance(user, EllipsisType) else user,
                           not isinstance(client_id, EllipsisType),
                           None if isinstance(client_id, EllipsisType) else client_id)

    def components(self) -> list[tuple[str, str | None]]:
        """(entity type, name or None for the default), user first: the wire form."""
        out: list[tuple[str, str | None]] = []
        if self.has_user:
            out.append((USER, self.user))
        if self.has_client_id:
            out.append((CLIENT_ID, self.client_id))
        return out

    def describe(self) -> str:
        """kafka-configs' words: ``user-principal 'alice', client-id 'app'``, ``the default client-id``."""
        parts = []
        for kind, name in self.components():
            word = "user-principal" if kind == USER else "client-id"
            parts.append(f"the default {word}" if name is None else f"{word} '{name}'")
        return ", ".join(parts)


def entity_from_components(components: list[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of AlterClientQuotas' ``entity`` list, with Kafka 2.6's errors for what it cannot be."""
    if not components:
        raise QuotaError("Invalid empty client quota entity")
    user: str | EllipsisType | None = ...
    client: str | EllipsisType | None = ...
    for kind, name in components:
        if kind not in ENTITY_TYPES:
            raise QuotaError(f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise QuotaError(f"Empty {kind} not supported")
        if kind == USER:
            if user is not ...:
                raise QuotaError(f"Duplicate {kind} entity type")
            user = name
        else:
            if client is not ...:
                raise QuotaError(f"Duplicate {kind} entity type")
            client = name
    return QuotaEntity.of(user, client)


def validate_value(key: str, value: float) -> str:
    """The stored string of ``key`` set to ``value`` (AlterClientQuotas), or QuotaError."""
    if key not in QUOTA_KEYS:
        raise QuotaError(f"Invalid configuration key {key}")
    if math.isnan(value) or math.isinf(value):
        raise QuotaError(f"Quota {key} must be a finite number")
    if value < 0.0:
        # Kafka 2.6 refuses a negative byte rate; it stores a negative request_percentage, which we refuse too
        # (docs/compatibility.md): a negative quota is bad input.
        raise QuotaError(f"Quota {key} must not be negative")
    if key in LONG_KEYS:
        as_long = math.floor(value + _LONG_EPSILON)
        if abs(as_long - value) > _LONG_EPSILON or as_long > _LONG_MAX:
            raise QuotaError(f"Configuration {key} must be a Long value")
        return str(as_long)
    return repr(float(value))


def parse_stored(config: Mapping[str, str]) -> dict[str, float]:
    """The quota values of a stored entity config (other keys, such as SCRAM credentials, are left out; a value
    that does not parse is ignored, as a quota Kafka could not read would not be enforced either)."""
    out: dict[str, float] = {}
    for key in QUOTA_KEYS:
        raw = config.get(key)
        if raw is None:
            continue
        try:
            value = float(raw.strip())
        except ValueError:
            continue
        if value >= 0 and not math.isnan(value):
            out[key] = value
    return out


# ----------------------------------------------------------------------------------------- znode paths

DEFAULT = "<default>"


def entity_config_path(entity: QuotaEntity, sanitize: Callable[[str], str]) -> tuple[str, str]:
    """(config entity type, sanitized name below it): ``("users", "alice/clients/app")``."""

    def name(n: str | None) -> str:
        return DEFAULT if n is None else sanitize(n)

    if entity.has_user:
        path = name(entity.user)
        if entity.has_client_id:
            path += "/clients/" + name(entity.client_id)
        return "users", path
    if entity.has_client_id:
        return "clients", name(entity.client_id)
    raise QuotaError("Invalid empty client quota entity")


def entity_from_config_path(entity_type: str, sanitized: str,
                            desanitize: Callable[[str], str]) -> QuotaEntity | None:
    """The inverse of :func:`entity_config_path` (a notification's ``entity_path`` after its type)."""

    def name(n: str) -> str | None:
        return None if n == DEFAULT else desanitize(n)

    parts = sanitized.split("/")
    if entity_type == "clients" and len(parts) == 1 and parts[0]:
        return QuotaEntity.of(client_id=name(parts[0]))
    if entity_type == "users":
        if len(parts) == 1 and parts[0]:
            return QuotaEntity.of(user=name(parts[0]))
        if len(parts) == 3 and parts[1] == "clients" and parts[0] and parts[2]:
            return QuotaEntity.of(user=name(parts[0]), client_id=name(parts[2]))
    return None


# ----------------------------------------------------------------------------------- which quota applies

QuotaTable = Mapping[QuotaEntity, Mapping[str, float]]
MetricTags = tuple[str, str]
"""(user, client id) as Kafka tags a quota sensor; "" where the quota does not depend on it."""


def _has(table: QuotaTable, entity: QuotaEntity, key: str) -> bool:
    return key in table.get(entity, {})


# Which kinds of quota entity a broker has seen (Kafka's QuotaTypes): with a single kind, Kafka tags every
# sensor the same way without looking anything up; with more, it walks the precedence order.
KIND_CLIENT_ID = 1
KIND_USER = 2
KIND_USER_CLIENT_ID = 4


def entity_kinds(table: QuotaTable) -> int:
    """The kinds of the entities in ``table`` (KIND_* bits)."""
    kinds = 0
    for entity in table:
        kinds |= (KIND_USER_CLIENT_ID if entity.has_client_id else KIND_USER) if entity.has_user else KIND_CLIENT_ID
    return kinds


def quota_metric_tags(table: QuotaTable, key: str, user: str, client_id: str, kinds: int | None = None) -> MetricTags:
    """The tags of the sensor that a connection of ``user`` with ``client_id`` records into for ``key``.

    ``kinds``: the entity kinds the broker has had quotas for since it started (Kafka's quotaTypesEnabled; None:
    those of ``table``). With one kind alone, every connection is tagged by it, whether or not it has a quota:
    client ids (or none yet) ``("", client_id)``, users ``(user, "")``, users with client ids both. The bound is
    the same either way; the tags decide which connections share a sensor, and name it in the metrics."""
    if kinds is None:
        kinds = entity_kinds(table)
    if kinds in (0, KIND_CLIENT_ID):
        return "", client_id
    if kinds == KIND_USER:
        return user, ""
    if kinds == KIND_USER_CLIENT_ID:
        return user, client_id
    u = QuotaEntity.of
    if _has(table, u(user, client_id), key) or _has(table, u(user, None), key):
        return user, client_id
    if _has(table, u(user=user), key):
        return user, ""
    if _has(table, u(None, client_id), key) or _has(table, u(None, None), key):
        return user, client_id
    if _has(table, u(user=None), key):
        return user, ""
    return "", client_id


def quota_limit(table: QuotaTable, key: str, tags: MetricTags) -> float | None:
    """The bound of the sensor with ``tags``, or None (unlimited)."""
    user, client_id = tags
    candidates: list[QuotaEntity]
    if user and client_id:
        candidates = [QuotaEntity.of(user, client_id), QuotaEntity.of(user, None),
                      QuotaEntity.of(None, client_id), QuotaEntity.of(None, None)]
    elif user:
        candidates = [QuotaEntity.of(user=user), QuotaEntity.of(user=None)]
    elif client_id:
        candidates = [QuotaEntity.of(client_id=client_id), QuotaEntity.of(client_id=None)]
    else:
        candidates = []  # an empty client id without a user quota: Kafka applies no quota
    for entity in candidates:
        value = table.get(entity, {}).get(key)
        if value is not None:
            return value
    return None


def resolve(table: QuotaTable, key: str, user: str, client_id: str,
            kinds: int | None = None) -> tuple[MetricTags, float | None]:
    tags = quota_metric_tags(table, key, user, client_id, kinds)
    return tags, quota_limit(table, key, tags)


# ------------------------------------------------------------------------------------ DescribeClientQuotas

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@dataclass(frozen=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


def check_filter(components: list[FilterComponent]) -> None:
    seen: set[str] = set()
    for comp in components:
        if comp.entity_type not in ENTITY_TYPES:
            raise UnknownEntityTypeError(f"Custom entity type '{comp.entity_type}' not supported")
        if comp.entity_type in seen:
            raise QuotaError(f"Duplicate {comp.entity_type} filter component entity type")
        seen.add(comp.entity_type)
        if comp.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaError(f"Unexpected match type {comp.match_type}")
        if comp.match_type == MATCH_EXACT and comp.match is None:
            raise QuotaError(f"Exact match of {comp.entity_type} needs a name")


def matches_filter(entity: QuotaEntity, components: list[FilterComponent], strict: bool) -> bool:
    """Kafka 2.6's describe match: each component must match the entity's name of that type (exact name, the
    default, or any name, the default included); a type without a component matches an entity that lacks it,
    and, unless ``strict``, any name too."""
    by_type = {c.entity_type: c for c in components}
    for kind, present, name in ((USER, entity.has_user, entity.user),
                                (CLIENT_ID, entity.has_client_id, entity.client_id)):
        comp = by_type.get(kind)
        if comp is None:
            if present and strict:
                return False
            continue
        if not present:
            return False
        if comp.match_type == MATCH_EXACT and name != comp.match:
            return False
        if comp.match_type == MATCH_DEFAULT and name is not None:
            return False
    return True
