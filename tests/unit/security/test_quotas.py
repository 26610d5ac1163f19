"""Client quota entities, their stored form, validation, and Kafka 2.6's precedence order."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.controller.zk_paths import desanitize, sanitize
from sofakafka.security import quotas
from sofakafka.security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    FilterComponent,
    QuotaEntity,
    QuotaError,
)

E = QuotaEntity.of

# Kafka 2.6's order (DefaultQuotaCallback), for a user "u" and client id "c".
PRECEDENCE = [E("u", "c"), E("u", None), E(user="u"), E(None, "c"), E(None, None), E(user=None),
              E(client_id="c"), E(client_id=None)]


# ---------------------------------------------------------------------------------------------- precedence

@given(st.sets(st.sampled_from(range(len(PRECEDENCE)))), st.sets(st.sampled_from(range(len(PRECEDENCE)))))
def test_the_first_entity_in_kafkas_order_that_has_the_key_decides(with_key: set[int], other_key: set[int]) -> None:
    table = {}
    for i in with_key | other_key:
        values = {}
        if i in with_key:
            values[PRODUCER_BYTE_RATE] = float(1000 + i)
        if i in other_key:
            values[CONSUMER_BYTE_RATE] = float(5000 + i)
        table[PRECEDENCE[i]] = values
    _, limit = quotas.resolve(table, PRODUCER_BYTE_RATE, "u", "c")
    expected = float(1000 + min(with_key)) if with_key else None
    assert limit == expected


def test_unrelated_users_and_client_ids_do_not_apply() -> None:
    table = {E(user="other"): {PRODUCER_BYTE_RATE: 1.0}, E(client_id="x"): {PRODUCER_BYTE_RATE: 2.0},
             E("other", "c"): {PRODUCER_BYTE_RATE: 3.0}, E("u", "x"): {PRODUCER_BYTE_RATE: 4.0}}
    assert quotas.resolve(table, PRODUCER_BYTE_RATE, "u", "c") == (("", "c"), None)


def test_who_shares_a_sensor() -> None:
    # A user quota is shared by every client id of the user ...
    table = {E(user="u"): {PRODUCER_BYTE_RATE: 10.0}}
    assert quotas.quota_metric_tags(table, PRODUCER_BYTE_RATE, "u", "a") == ("u", "")
    assert quotas.quota_metric_tags(table, PRODUCER_BYTE_RATE, "u", "b") == ("u", "")
    # ... a client-id quota by every user of the client id ...
    table = {E(client_id="c"): {PRODUCER_BYTE_RATE: 10.0}}
    assert quotas.quota_metric_tags(table, PRODUCER_BYTE_RATE, "u1", "c") == ("", "c")
    assert quotas.quota_metric_tags(table, PRODUCER_BYTE_RATE, "u2", "c") == ("", "c")
    # ... and a user+client quota, or its defaults, by that pair only; the default user's by each user alone.
    for entity in (E("u", "c"), E("u", None), E(None, "c"), E(None, None)):
        assert quotas.quota_metric_tags({entity: {PRODUCER_BYTE_RATE: 1.0}}, PRODUCER_BYTE_RATE, "u", "c") == ("u", "c")
    assert quotas.quota_metric_tags({E(user=None): {PRODUCER_BYTE_RATE: 1.0}}, PRODUCER_BYTE_RATE, "u", "c") == ("u", "")


def test_quota_types_resolve_independently() -> None:
    table = {E(user="u"): {PRODUCER_BYTE_RATE: 10.0}, E(client_id="c"): {REQUEST_PERCENTAGE: 25.0}}
    assert quotas.resolve(table, PRODUCER_BYTE_RATE, "u", "c") == (("u", ""), 10.0)
    assert quotas.resolve(table, REQUEST_PERCENTAGE, "u", "c") == (("", "c"), 25.0)
    assert quotas.resolve(table, CONSUMER_BYTE_RATE, "u", "c") == (("", "c"), None)


def test_an_empty_client_id_gets_no_client_id_quota() -> None:
    # Kafka's quotaLimit has no branch for empty tags: the default client-id quota does not reach client id "".
    table = {E(client_id=None): {PRODUCER_BYTE_RATE: 10.0}}
    assert quotas.resolve(table, PRODUCER_BYTE_RATE, "u", "") == (("", ""), None)
    assert quotas.resolve(table, PRODUCER_BYTE_RATE, "u", "x") == (("", "x"), 10.0)


# ---------------------------------------------------------------------------------------------- validation

@pytest.mark.parametrize(("key", "value", "stored"), [
    (PRODUCER_BYTE_RATE, 0.0, "0"),                    # zero: the edge, accepted as Kafka 2.6 accepts it
    (PRODUCER_BYTE_RATE, 1.0, "1"),                    # one above
    (PRODUCER_BYTE_RATE, 1024.0, "1024"),
    (CONSUMER_BYTE_RATE, 1024.0 + 1e-7, "1024"),       # within Kafka's epsilon of a long
    (REQUEST_PERCENTAGE, 0.5, "0.5"),
    (REQUEST_PERCENTAGE, 200.0, "200.0"),
])
def test_valid_values_are_stored_as_kafka_stores_them(key: str, value: float, stored: str) -> None:
    assert quotas.validate_value(key, value) == stored


@pytest.mark.parametrize(("key", "value", "message"), [
    (PRODUCER_BYTE_RATE, -1.0, "must not be negative"),           # one below the edge
    (REQUEST_PERCENTAGE, -0.001, "must not be negative"),         # Kafka 2.6 stores it; the issue says refuse
    (PRODUCER_BYTE_RATE, 10.5, "must be a Long value"),
    (CONSUMER_BYTE_RATE, 1024.0 + 1e-3, "must be a Long value"),
    (PRODUCER_BYTE_RATE, math.nan, "finite"),
    (REQUEST_PERCENTAGE, math.inf, "finite"),
    ("controller_mutation_rate", 1.0, "Invalid configuration key controller_mutation_rate"),  # Kafka 2.7's
    ("SCRAM-SHA-256", 1.0, "Invalid configuration key"),
])
def test_bad_values_are_refused_with_kafkas_messages(key: str, value: float, message: str) -> None:
    with pytest.raises(QuotaError, match=message):
        quotas.validate_value(key, value)


@pytest.mark.parametrize(("components", "message"), [
    ([], "Invalid empty client quota entity"),
    ([("ip", "10.0.0.1")], "Unhandled client quota entity type: ip"),
    ([("users", "alice")], "Unhandled client quota entity type: users"),
    ([("user", "")], "Empty user not supported"),
    ([("client-id", "")], "Empty client-id not supported"),
    ([("user", "a"), ("user", "b")], "Duplicate user"),
])
def test_bad_entities_are_refused(components: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(QuotaError, match=message):
        quotas.entity_from_components(components)


def test_entities_from_components() -> None:
    assert quotas.entity_from_components([("client-id", "c"), ("user", None)]) == E(None, "c")
    assert quotas.entity_from_components([("user", "alice")]) == E(user="alice")
    assert E(None, "c").components() == [("user", None), ("client-id", "c")]
    assert E(None, "c").describe() == "the default user-principal, client-id 'c'"


def test_stored_values_that_are_not_quotas_or_negative_are_ignored() -> None:
    stored = {"SCRAM-SHA-256": "salt=..", PRODUCER_BYTE_RATE: "1024", CONSUMER_BYTE_RATE: "-5",
              REQUEST_PERCENTAGE: "nonsense"}
    assert quotas.parse_stored(stored) == {PRODUCER_BYTE_RATE: 1024.0}
    assert quotas.parse_stored({CONSUMER_BYTE_RATE: "0"}) == {CONSUMER_BYTE_RATE: 0.0}


# ------------------------------------------------------------------------------------------------- znodes

names = st.one_of(st.none(), st.text(min_size=1, max_size=12))
entities = st.one_of(
    st.builds(lambda u: E(user=u), names),
    st.builds(lambda c: E(client_id=c), names),
    st.builds(lambda u, c: E(u, c), names, names),
)


@given(entities)
def test_entity_paths_round_trip(entity: QuotaEntity) -> None:
    kind, path = quotas.entity_config_path(entity, sanitize)
    assert quotas.entity_from_config_path(kind, path, desanitize) == entity


def test_entity_paths_are_kafkas() -> None:
    assert quotas.entity_config_path(E("alice@x", None), sanitize) == ("users", "alice%40x/clients/<default>")
    assert quotas.entity_config_path(E(user=None), sanitize) == ("users", "<default>")
    assert quotas.entity_config_path(E(client_id="my app"), sanitize) == ("clients", "my%20app")
    # A user literally named <default> is not the default user.
    assert quotas.entity_config_path(E(user="<default>"), sanitize) == ("users", "%3Cdefault%3E")
    assert quotas.entity_from_config_path("topics", "t", desanitize) is None
    assert quotas.entity_from_config_path("users", "a/b", desanitize) is None


# ------------------------------------------------------------------------------------------ describe filters

STORED = [E(user="alice"), E(user=None), E("alice", "app"), E("alice", None), E(client_id="app"),
          E(client_id=None)]


def matching(components: list[FilterComponent], strict: bool) -> set[QuotaEntity]:
    quotas.check_filter(components)
    return {e for e in STORED if quotas.matches_filter(e, components, strict)}


def test_describe_filters_match_as_kafka_2_6() -> None:
    exact_alice = FilterComponent("user", quotas.MATCH_EXACT, "alice")
    assert matching([exact_alice], strict=True) == {E(user="alice")}
    assert matching([exact_alice], strict=False) == {E(user="alice"), E("alice", "app"), E("alice", None)}
    assert matching([FilterComponent("user", quotas.MATCH_DEFAULT, None)], strict=True) == {E(user=None)}
    # "any specified name" includes the default entity in Kafka 2.6.
    assert matching([FilterComponent("client-id", quotas.MATCH_SPECIFIED, None)], strict=True) == {
        E(client_id="app"), E(client_id=None)}
    assert matching([], strict=False) == set(STORED)
    assert matching([], strict=True) == set()


@pytest.mark.parametrize(("components", "message"), [
    ([FilterComponent("ip", 0, "1.2.3.4")], "Custom entity type 'ip' not supported"),
    ([FilterComponent("user", 0, "a"), FilterComponent("user", 2, None)], "Duplicate user"),
    ([FilterComponent("user", 3, None)], "Unexpected match type 3"),
])
def test_bad_describe_filters_are_refused(components: list[FilterComponent], message: str) -> None:
    with pytest.raises(QuotaError, match=message):
        quotas.check_filter(components)
