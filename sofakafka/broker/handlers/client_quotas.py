"""DescribeClientQuotas (48) and AlterClientQuotas (49), version 0: client quotas over the wire (KIP-546).

AlterClientQuotas: each entry names an entity (``user`` and/or ``client-id`` components, a null name for the
default entity) and ops (set a key to a value, or remove it). Each entry succeeds or fails on its own, with
Kafka 2.6's INVALID_REQUEST messages: an empty entity, an unknown entity type ("Unhandled client quota entity
type: ip"), an empty name, a repeated type, an unknown key ("Invalid configuration key ..."), a negative value
(Kafka 2.6 refuses a negative byte rate but stores a negative ``request_percentage``; we refuse both, see
docs/compatibility.md; zero is accepted, as Kafka accepts it), a byte rate that is not a whole number
("Configuration ... must be a Long value"). A failed entry stores nothing. ``validate_only`` checks without
writing. The write is the entity's znode (``/config/users/...``, ``/config/clients/...``) and a
``/config/changes`` notification in one multi-op (sofakafka/security/store.py), so every broker applies it
at its next request.

Entries naming the same entity are each applied in order and the entity gets one result, the last one's, as
Kafka answers with a map keyed by entity.

DescribeClientQuotas: the stored entities that match every filter component (exact name, the default, or any
name, which in Kafka 2.6 includes the default); a type without a component matches entities without it and,
unless ``strict``, any. An unknown entity type is UNSUPPORTED_VERSION for the whole request (Kafka 2.6's
answer to a "custom entity type"), a repeated type or an unknown match type INVALID_REQUEST.

Authorization (Kafka 2.6): AlterClientQuotas needs ALTER_CONFIGS on the cluster, else every entry is
CLUSTER_AUTHORIZATION_FAILED; DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster, else the request is.
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from sofakafka.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from sofakafka.security import quotas
from sofakafka.security.store import SecurityMetadata, SecurityStoreError

AlterEntry = AlterClientQuotasResponse.EntryData
AlterEntity = AlterEntry.EntityData
DescribeEntry = DescribeClientQuotasResponse.EntryData


def alter_error_response(request: AlterClientQuotasRequest, version: int, code: int) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(entries=[
        AlterEntry(error_code=code, error_message=None,
                   entity=[AlterEntity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in request.entries])


def describe_error_response(request: DescribeClientQuotasRequest, version: int,
                            code: int) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(error_code=code, error_message=None, entries=None)


def _prepare(entry: AlterClientQuotasRequest.EntryData) -> tuple[quotas.QuotaEntity, dict[str, str | None]]:
    entity = quotas.entity_from_components([(e.entity_type, e.entity_name) for e in entry.entity])
    changes: dict[str, str | None] = {}
    for op in entry.ops:
        if op.key in changes:
            raise quotas.QuotaError(f"Duplicate quota key {op.key}")
        if op.remove:
            if op.key not in quotas.QUOTA_KEYS:
                raise quotas.QuotaError(f"Invalid configuration key {op.key}")
            changes[op.key] = None
        else:
            changes[op.key] = quotas.validate_value(op.key, op.value)
    return entity, changes


@handles(ApiKey.ALTER_CLIENT_QUOTAS, 0, 0, error_response=alter_error_response)
async def handle_alter_client_quotas(ctx: RequestContext,
                                     request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    if not authz.authorize_cluster(ctx, authz.AclOperation.ALTER_CONFIGS):
        return alter_error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    metadata = ctx.broker.security_metadata
    # Kafka answers with a map keyed by entity: entries naming the same entity are each applied, in order, and
    # the entity gets one result, the last one's.
    out: dict[frozenset[tuple[str, str | None]], AlterEntry] = {}
    for entry in request.entries:
        echo = [AlterEntity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]
        key = frozenset((e.entity_type, e.entity_name) for e in entry.entity)
        out.pop(key, None)
        out[key] = await _alter_one(ctx, metadata, entry, request.validate_only, echo)
    return AlterClientQuotasResponse(entries=list(out.values()))


async def _alter_one(ctx: RequestContext, metadata: SecurityMetadata | None, entry: AlterClientQuotasRequest.EntryData,
                     validate_only: bool, echo: list[AlterEntity]) -> AlterEntry:
    try:
        entity, changes = _prepare(entry)
    except quotas.QuotaError as exc:
        return AlterEntry(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), entity=echo)
    if not validate_only:
        if metadata is None:
            return AlterEntry(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                              error_message="the broker has not loaded its quotas yet", entity=echo)
        try:
            await ctx.broker.run_blocking(lambda: metadata.alter_client_quota(entity, changes))
        except SecurityStoreError as exc:
            return AlterEntry(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(exc), entity=echo)
    return AlterEntry(error_code=ErrorCode.NONE, error_message=None, entity=echo)


def describe(metadata: SecurityMetadata | None, components: list[quotas.FilterComponent],
             strict: bool) -> list[DescribeEntry]:
    table = metadata.client_quotas() if metadata is not None else {}
    out: list[DescribeEntry] = []
    for entity in sorted(table, key=_sort_key):
        if not quotas.matches_filter(entity, components, strict):
            continue
        out.append(DescribeEntry(
            entity=[DescribeEntry.EntityData(entity_type=t, entity_name=n) for t, n in entity.components()],
            values=[DescribeEntry.ValueData(key=k, value=v) for k, v in sorted(table[entity].items())]))
    return out


def _sort_key(entity: quotas.QuotaEntity) -> tuple[bool, str, bool, str, bool, bool]:
    return (entity.has_user, entity.user or "", entity.has_client_id, entity.client_id or "",
            entity.user is None, entity.client_id is None)


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 0, error_response=describe_error_response)
async def handle_describe_client_quotas(ctx: RequestContext,
                                        request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not authz.authorize_cluster(ctx, authz.AclOperation.DESCRIBE_CONFIGS):
        return describe_error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    components = [quotas.FilterComponent(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        quotas.check_filter(components)
    except quotas.UnknownEntityTypeError as exc:
        return DescribeClientQuotasResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=str(exc),
                                            entries=None)
    except quotas.QuotaError as exc:
        return DescribeClientQuotasResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc),
                                            entries=None)
    return DescribeClientQuotasResponse(error_code=ErrorCode.NONE, error_message=None,
                                        entries=describe(ctx.broker.security_metadata, components, request.strict))
