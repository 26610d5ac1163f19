"""Every message of every API at every version 2.6 accepts survives encode -> decode unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sofakafka.protocol.schema import Struct
from tests.unit.protocol.strategies import all_message_versions, message_strategy

CASES = all_message_versions()


@pytest.mark.parametrize(
    ("cls", "version"), CASES, ids=[f"{cls.__name__}-v{version}" for cls, version in CASES]
)
@settings(max_examples=15)
@given(data=st.data())
def test_decode_of_encode_is_identity_and_size_matches(cls: type[Struct], version: int, data: st.DataObject) -> None:
    message = data.draw(message_strategy(cls, version))
    encoded = message.encode(version)
    assert len(encoded) == message.size(version)
    decoded = cls.decode(encoded, version)
    assert decoded == message
    assert decoded.encode(version) == encoded


def test_every_api_key_has_a_request_and_response_at_every_version() -> None:
    from sofakafka.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES

    assert sorted(REQUEST_TYPES) == list(range(50))
    assert sorted(RESPONSE_TYPES) == list(range(50))
    for key in range(50):
        assert REQUEST_TYPES[key].valid_versions() == RESPONSE_TYPES[key].valid_versions()
        assert REQUEST_TYPES[key].API_KEY == key == RESPONSE_TYPES[key].API_KEY
