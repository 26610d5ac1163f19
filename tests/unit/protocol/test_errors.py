"""ErrorCode and KafkaError, checked against Kafka 2.6's error table as the repository keeps it
(tests/data/kafka-2.6/error_codes.json, written from Kafka's Errors.java by tools/gen_reference_data.py; not a copy
of our enum)."""

from __future__ import annotations

import pytest

from sofakafka.protocol.errors import ErrorCode, KafkaError, ProtocolError
from tests.reference_data import error_table

REFERENCE_TABLE = error_table()


def test_reference_table_was_parsed_whole() -> None:
    # -1 .. 88 without gaps: a generator that silently skipped rows would make the other tests vacuous.
    assert sorted(code for code, _ in REFERENCE_TABLE.values()) == list(range(-1, 89))


@pytest.mark.parametrize("name", sorted(REFERENCE_TABLE))
def test_every_reference_code_has_its_kafka_name_and_value(name: str) -> None:
    code, _ = REFERENCE_TABLE[name]
    assert ErrorCode[name] == code
    assert ErrorCode(code).name == name


@pytest.mark.parametrize("name", sorted(REFERENCE_TABLE))
def test_retriable_matches_kafkas_retriable_exceptions(name: str) -> None:
    _, retriable = REFERENCE_TABLE[name]
    assert ErrorCode[name].retriable is retriable


def test_enum_has_no_code_the_reference_lacks() -> None:
    assert {member.name for member in ErrorCode} == set(REFERENCE_TABLE)


def test_pre_2_6_name_of_code_6_is_an_alias_not_a_new_code() -> None:
    assert ErrorCode.NOT_LEADER_FOR_PARTITION is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ErrorCode(6).name == "NOT_LEADER_OR_FOLLOWER"


def test_unknown_wire_code_reads_as_unknown_server_error() -> None:
    assert ErrorCode.for_code(89) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.for_code(-2) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.for_code(3) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_error_codes_fit_the_int16_wire_field() -> None:
    assert all(-(2**15) <= member <= 2**15 - 1 for member in ErrorCode)


def test_kafka_error_carries_its_code() -> None:
    with pytest.raises(KafkaError) as info:
        raise KafkaError(ErrorCode.NOT_COORDINATOR, "group moved")
    assert info.value.code is ErrorCode.NOT_COORDINATOR
    assert info.value.retriable
    assert "group moved" in str(info.value)
    assert str(KafkaError(ErrorCode.INVALID_REQUEST)) == "INVALID_REQUEST"
    assert not KafkaError(ErrorCode.INVALID_REQUEST).retriable


def test_kafka_error_is_not_a_protocol_error() -> None:
    # The connection boundary closes the socket on ProtocolError but answers KafkaError in the response;
    # mixing the two hierarchies would turn a client-visible error into a dropped connection.
    assert not issubclass(KafkaError, ProtocolError)
    assert not issubclass(ProtocolError, KafkaError)
