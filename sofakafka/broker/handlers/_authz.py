"""Authorization checks for handlers: Kafka's ``KafkaApis.authorize`` over the broker's ACL authorizer.

Without ``authorizer.class.name`` every check passes (Kafka's behaviour with no authorizer). With it, the
request's principal (``RequestContext.principal``) and client host are checked against the ACLs; denials
are logged by the authorizer (``sofakafka.authorizer`` logger, as Kafka's ``kafka.authorizer.logger``).
Which check each API makes, and which error it answers, follows Kafka 2.6's KafkaApis; each handler's
docstring names its checks.
"""

from __future__ import annotations

from collections.abc import Iterable

from sofakafka.broker.handlers import RequestContext
from sofakafka.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from sofakafka.protocol.errors import ErrorCode, KafkaError

__all__ = ["AclOperation", "ResourceType", "authorize", "authorize_cluster", "authorized_names", "enabled"]


def enabled(ctx: RequestContext) -> bool:
    return ctx.broker.authorizer is not None


def authorize(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str, *,
              log_if_denied: bool = True) -> bool:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name,
                                log_if_denied=log_if_denied)


def authorize_cluster(ctx: RequestContext, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def authorized_names(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
                     names: Iterable[str], *, log_if_denied: bool = True) -> set[str]:
    """The names among ``names`` the principal may ``operation`` (each distinct name checked once)."""
    return {n for n in set(names) if authorize(ctx, operation, resource_type, n, log_if_denied=log_if_denied)}


CONFIG_RESOURCE_TOPIC = 2


def config_resource_denied(ctx: RequestContext, resource_type: int, name: str,
                           operation: AclOperation) -> ErrorCode | None:
    """DescribeConfigs/AlterConfigs: the error for a config resource the principal may not ``operation``
    (DESCRIBE_CONFIGS or ALTER_CONFIGS), or None. Topics are checked on the topic, brokers and broker
    loggers on the cluster, as Kafka 2.6 does."""
    if ctx.broker.authorizer is None:
        return None
    if resource_type == CONFIG_RESOURCE_TOPIC:
        return None if authorize(ctx, operation, ResourceType.TOPIC, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None if authorize_cluster(ctx, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def require_cluster_action(ctx: RequestContext) -> None:
    """Inter-broker APIs (StopReplica, ControlledShutdown) need CLUSTER_ACTION."""
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
