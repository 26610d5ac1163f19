"""Authorization checks for handlers: Kafka's ``KafkaApis.authorize`` over the broker's ACL authorizer.

Without ``authorizer.class.name`` every check passes (Kafka's behaviour with no authorizer). With it, the
request's principal (``RequestContext.principal``) and client host are checked against the ACLs; denials
are logged by the authorizer (``sofakafka.authorizer`` logger, as Kafka's ``kafka.authorizer.logger``).
Which check each API makes, and which error it answers, follows Kafka 2.6's KafkaApis; each handler's
docstring names its checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

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


class ConfigResource(Protocol):
    """A resource of DescribeConfigs, AlterConfigs or IncrementalAlterConfigs."""

    resource_type: int
    resource_name: str


R = TypeVar("R", bound=ConfigResource)


def split_config_resources(ctx: RequestContext, resources: Iterable[R],
                           operation: AclOperation) -> tuple[list[R], list[tuple[R, ErrorCode]]]:
    """The config resources the principal may ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS), and the others
    with the error each gets, as Kafka 2.6 splits a request (and answers the refused ones after the rest):
    topics are checked on the topic (TOPIC_AUTHORIZATION_FAILED), everything else, brokers, broker loggers,
    our users and groups' filters (type 32), on the cluster (CLUSTER_AUTHORIZATION_FAILED). Kafka 3.8 checks
    group configs on the group, but Kafka 2.6's ACLs (ours) give a group no DescribeConfigs/AlterConfigs, so a
    filter, which limits what a group's members may read, is an operator's cluster-level change."""
    allowed: list[R] = []
    refused: list[tuple[R, ErrorCode]] = []
    for r in resources:
        if r.resource_type == CONFIG_RESOURCE_TOPIC:
            ok, code = authorize(ctx, operation, ResourceType.TOPIC, r.resource_name), ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            ok, code = authorize_cluster(ctx, operation), ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if ok:
            allowed.append(r)
        else:
            refused.append((r, code))
    return allowed, refused


def require_cluster_action(ctx: RequestContext) -> None:
    """Inter-broker APIs (StopReplica, ControlledShutdown) need CLUSTER_ACTION."""
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
