"""The users and ACLs pages' form checks (sofakafka/console/access.py), before anything reaches the cluster:
an ACL from the form as kafka-acls.sh would accept it, and each refusal a sentence naming what is wrong; a user's
mechanism, password and iteration count refused at their edges."""

from __future__ import annotations

from typing import Any, cast

import pytest

from sofakafka.client import AlterConfigOp, ConfigResourceType, ItemResult, KafkaClient
from sofakafka.console.access import add_user, binding_from_form
from sofakafka.console.cluster import ConsoleError
from sofakafka.protocol import acl
from sofakafka.protocol.errors import ErrorCode
from sofakafka.security.scram import MAX_ITERATIONS, MIN_ITERATIONS

FORM = {"principal": "User:alice", "host": "", "operation": "READ", "permission": "ALLOW",
        "resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "PREFIXED"}


def test_a_form_becomes_the_acl_it_names() -> None:
    b = binding_from_form(FORM)
    assert b == acl.AclBinding(acl.ResourcePattern(acl.ResourceType.TOPIC, "orders", acl.PatternType.PREFIXED),
                               acl.AccessControlEntry("User:alice", "*", acl.AclOperation.READ,
                                                      acl.AclPermissionType.ALLOW))


def test_a_cluster_acl_is_on_kafka_cluster_whatever_name_is_typed() -> None:
    b = binding_from_form(FORM | {"resource_type": "CLUSTER", "operation": "ALTER", "resource_name": "",
                                  "pattern_type": "LITERAL"})
    assert b.pattern == acl.ResourcePattern(acl.ResourceType.CLUSTER, acl.CLUSTER_NAME, acl.PatternType.LITERAL)


@pytest.mark.parametrize(("change", "message"), [
    ({"principal": "alice"}, "a principal is TYPE:NAME"),
    ({"principal": "User:"}, "a principal is TYPE:NAME"),
    ({"operation": "FLY"}, "the operation must be one of"),
    ({"operation": "ANY"}, "the operation must be one of"),
    ({"permission": "MAYBE"}, "the permission must be one of"),
    ({"resource_type": "ANY"}, "the resource type must be one of"),
    ({"pattern_type": "MATCH"}, "the pattern type must be one of"),
    ({"resource_name": "  "}, "a TOPIC ACL needs a resource name"),
    ({"resource_type": "GROUP", "operation": "WRITE"}, "WRITE is not an operation on a GROUP"),
])
def test_bad_forms_are_sentences(change: dict[str, str], message: str) -> None:
    with pytest.raises(ConsoleError, match=message):
        binding_from_form(FORM | change)


class NoCluster:
    """add_user's checks come before any request: a client that must not be used."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the cluster was asked ({name}) for a refused user")


@pytest.mark.parametrize(("name", "mechanism", "password", "iterations", "message"), [
    ("", "SCRAM-SHA-256", "pw", None, "a user needs a name"),
    ("bob", "PLAIN", "pw", None, "mechanism must be one of"),
    ("bob", "SCRAM-SHA-256", "", None, "a user needs a password"),
    ("bob", "SCRAM-SHA-256", "pw", MIN_ITERATIONS - 1, "iterations"),
    ("bob", "SCRAM-SHA-512", "pw", MAX_ITERATIONS + 1, "iterations"),
])
def test_refused_users_never_reach_the_cluster(name: str, mechanism: str, password: str, iterations: int | None,
                                               message: str) -> None:
    with pytest.raises(ConsoleError, match=message):
        add_user(cast(KafkaClient, NoCluster()), name, mechanism, password, iterations)


class RecordingClient:
    """The layer below: records the IncrementalAlterConfigs the console would send, and answers NONE."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def incremental_alter_configs(self, resources: Any) -> list[ItemResult]:
        self.sent.append(resources)
        return [ItemResult("bob", ErrorCode.NONE)]


def test_the_least_iterations_kafka_takes_is_accepted_and_only_a_credential_is_sent() -> None:
    client = RecordingClient()
    message = add_user(cast(KafkaClient, client), " bob ", "SCRAM-SHA-256", "bob-secret", MIN_ITERATIONS)
    assert message == "Set the SCRAM-SHA-256 credential of user bob."
    [resources] = client.sent
    [((rtype, name), [(key, op, value)])] = resources.items()
    assert (rtype, name, key, op) == (ConfigResourceType.USER, "bob", "SCRAM-SHA-256", AlterConfigOp.SET)
    assert f"iterations={MIN_ITERATIONS}" in value and "bob-secret" not in value
