"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31), versions 0-2: Kafka's ACL admin API (KIP-140, KIP-290).

Without an authorizer (``authorizer.class.name`` unset) every result is SECURITY_DISABLED, as in Kafka.
CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE (else
CLUSTER_AUTHORIZATION_FAILED). v0 knows LITERAL patterns only (the codec fills that in); v1 adds PREFIXED
patterns and the MATCH/ANY filters.

A CreateAcls with a 0 (UNKNOWN) resource type, pattern type, operation or permission code closes the
connection without an answer, as Kafka 2.6's request parsing refuses it before any handler runs (another code
Kafka does not know is refused per creation, below). A filter with UNKNOWN elements matches nothing, as in Kafka.

CreateAcls refuses, per creation, with INVALID_REQUEST: filter values (ANY, MATCH), an empty resource name, a CLUSTER resource not named ``kafka-cluster``, a principal that is not ``Type:name``;
the rest are written to the metadata tree (``/kafka-acl``, ``/kafka-acl-extended``) with their change
notifications, so every broker applies them at once. DeleteAcls removes every binding each filter matches and
lists them per filter. Store writes run on a worker thread.
"""

from __future__ import annotations

import logging

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol import acl
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from sofakafka.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from sofakafka.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from sofakafka.security.acl import validate_binding
from sofakafka.security.store import SecurityStoreError

log = logging.getLogger(__name__)

UNKNOWN_CODE = 0  # every ACL enum's UNKNOWN

NO_AUTHORIZER = "No Authorizer is configured on the broker"
CreationResult = CreateAclsResponse.AclCreationResult
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
MatchingAcl = DeleteAclsResponse.DeleteAclsFilterResult.DeleteAclsMatchingAcl
DescribedResource = DescribeAclsResponse.DescribeAclsResource
DescribedAcl = DescribeAclsResponse.DescribeAclsResource.AclDescription


def _binding(c: CreateAclsRequest.AclCreation) -> acl.AclBinding | str:
    """The binding a creation asks for, or why it is invalid."""
    rtype = acl.ResourceType.from_code(c.resource_type)
    ptype = acl.PatternType.from_code(c.resource_pattern_type)
    op = acl.AclOperation.from_code(c.operation)
    perm = acl.AclPermissionType.from_code(c.permission_type)
    if rtype == acl.ResourceType.ANY or ptype in (acl.PatternType.ANY, acl.PatternType.MATCH) or op == acl.AclOperation.ANY \
            or perm == acl.AclPermissionType.ANY:
        return "ACL creations cannot contain filter values (ANY, MATCH)"
    binding = acl.AclBinding(acl.ResourcePattern(acl.ResourceType(rtype), c.resource_name, acl.PatternType(ptype)),
                         acl.AccessControlEntry(c.principal, c.host, acl.AclOperation(op), acl.AclPermissionType(perm)))
    if binding.pattern.resource_type == acl.ResourceType.CLUSTER and binding.pattern.name != acl.CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {acl.CLUSTER_NAME}"
    return validate_binding(binding) or binding


def _filter(resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
            operation: int, permission: int) -> acl.AclBindingFilter:
    return acl.AclBindingFilter(
        acl.ResourcePatternFilter(acl.ResourceType(acl.ResourceType.from_code(resource_type)), name,
                              acl.PatternType(acl.PatternType.from_code(pattern_type))),
        acl.AccessControlEntryFilter(principal, host, acl.AclOperation(acl.AclOperation.from_code(operation)),
                                 acl.AclPermissionType(acl.AclPermissionType.from_code(permission))))


def _creation_is_unknown(c: CreateAclsRequest.AclCreation) -> bool:
    """What Kafka 2.6's CreateAcls parsing refuses: a code that *is* UNKNOWN (0) in any of the four fields."""
    return UNKNOWN_CODE in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)


@handles(ApiKey.CREATE_ACLS, 0, 2)
async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse | None:
    def all_fail(code: ErrorCode, message: str) -> CreateAclsResponse:
        return CreateAclsResponse(results=[CreationResult(error_code=code, error_message=message)
                                           for _ in request.creations])

    if any(_creation_is_unknown(c) for c in request.creations):
        ctx.close_connection("CreateAcls with UNKNOWN (0) elements, which Kafka cannot parse")
        return None

    metadata = ctx.broker.security_metadata
    if ctx.broker.authorizer is None or metadata is None:
        return all_fail(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authz.authorize_cluster(ctx, acl.AclOperation.ALTER):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    results: list[CreationResult] = []
    valid: list[tuple[int, acl.AclBinding]] = []
    for i, creation in enumerate(request.creations):
        binding = _binding(creation)
        if isinstance(binding, str):
            results.append(CreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=binding))
        else:
            results.append(CreationResult(error_code=ErrorCode.NONE, error_message=""))  # Kafka's "no message"
            valid.append((i, binding))
    if valid:
        try:
            await ctx.broker.run_blocking(lambda: metadata.create_acls([b for _, b in valid]))
            for _, b in valid:
                log.info("ACL added by %s: %s %s", ctx.principal, b.pattern, b.entry)
        except SecurityStoreError as exc:
            for i, _ in valid:
                results[i] = CreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc))
    return CreateAclsResponse(results=results)


@handles(ApiKey.DESCRIBE_ACLS, 0, 2)
async def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    flt = _filter(request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
                  request.principal_filter, request.host_filter, request.operation, request.permission_type)
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
    if not authz.authorize_cluster(ctx, acl.AclOperation.DESCRIBE):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message="Cluster authorization failed.")
    grouped: dict[acl.ResourcePattern, list[acl.AccessControlEntry]] = {}
    for b in authorizer.acls(flt):
        grouped.setdefault(b.pattern, []).append(b.entry)
    resources = [
        DescribedResource(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                          acls=[DescribedAcl(principal=e.principal, host=e.host, operation=e.operation,
                                             permission_type=e.permission_type) for e in entries])
        for p, entries in grouped.items()
        if ctx.api_version >= 1 or p.pattern_type == acl.PatternType.LITERAL
    ]
    return DescribeAclsResponse(error_code=ErrorCode.NONE, error_message="", resources=resources)


@handles(ApiKey.DELETE_ACLS, 0, 2)
async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    def all_fail(code: ErrorCode, message: str) -> DeleteAclsResponse:
        return DeleteAclsResponse(filter_results=[FilterResult(error_code=code, error_message=message)
                                                  for _ in request.filters])

    filters = [_filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                       f.host_filter, f.operation, f.permission_type) for f in request.filters]
    metadata = ctx.broker.security_metadata
    if ctx.broker.authorizer is None or metadata is None:
        return all_fail(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authz.authorize_cluster(ctx, acl.AclOperation.ALTER):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    try:
        deleted = await ctx.broker.run_blocking(lambda: metadata.delete_acls(filters))
    except SecurityStoreError as exc:
        return all_fail(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
    results: list[FilterResult] = []
    for bindings in deleted:
        matching = [b for b in bindings if ctx.api_version >= 1 or b.pattern.pattern_type == acl.PatternType.LITERAL]
        for b in matching:
            log.info("ACL removed by %s: %s %s", ctx.principal, b.pattern, b.entry)
        results.append(FilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            MatchingAcl(error_code=ErrorCode.NONE, error_message=None, resource_type=b.pattern.resource_type,
                        resource_name=b.pattern.name, pattern_type=b.pattern.pattern_type,
                        principal=b.entry.principal, host=b.entry.host, operation=b.entry.operation,
                        permission_type=b.entry.permission_type)
            for b in matching]))
    return DeleteAclsResponse(filter_results=results)
