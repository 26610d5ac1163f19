"""Every API version the broker advertises is decoded and answered, on a real broker process.

The broker computes ApiVersions from its handler registry; this asks it for the list and then sends, for
each advertised (key, version), a request with every field at its default. Such a request is often
meaningless (no topics, no resources) but it is well-formed, so the broker must answer it with a response
that decodes at that version and carries the request's correlation id; never close the connection, never
let it hang. It also checks the list is Kafka 2.6's ranges or a subset of them.
"""

from __future__ import annotations

import socket

from sofakafka.protocol.api import ApiKey, request_type, valid_versions
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sofakafka.protocol.messages.produce import ProduceRequest
from sofakafka.protocol.schema import Request
from tests.integration import wire
from tests.integration.conftest import BrokerProcess

INVALID_REQUEST = 42


def advertised(broker: BrokerProcess) -> dict[int, tuple[int, int]]:
    with socket.create_connection((broker.host, broker.port), timeout=30) as s:
        response = wire.call(s, API_VERSIONS_V3, 3)
    assert isinstance(response, ApiVersionsResponse)
    assert response.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


# v3 requires a client software name and version matching [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
# (KIP-511); empty ones are INVALID_REQUEST, in Kafka and here.
API_VERSIONS_V3 = ApiVersionsRequest(client_software_name="sofakafka-tests", client_software_version="1.0")


def default_request(api_key: int) -> Request:
    if api_key == ApiKey.API_VERSIONS:
        return API_VERSIONS_V3
    if api_key == ApiKey.PRODUCE:
        return ProduceRequest(acks=1, timeout_ms=1000)  # acks=0 (the default) would have no response
    return request_type(api_key)()


def test_advertised_ranges_are_within_kafka_2_6(broker: BrokerProcess) -> None:
    apis = advertised(broker)
    for key in (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS):
        assert key in apis, f"{key.name} not advertised"
    for key, (lo, hi) in apis.items():
        kafka_lo, kafka_hi = valid_versions(key)
        assert kafka_lo <= lo <= hi <= kafka_hi, (ApiKey(key).name, (lo, hi), (kafka_lo, kafka_hi))
    # The versions the issue requires in full.
    assert apis[ApiKey.API_VERSIONS] == (0, 3)
    assert apis[ApiKey.METADATA] == (0, 9)
    assert apis[ApiKey.PRODUCE] == (0, 8)
    assert apis[ApiKey.FETCH] == (0, 11)
    assert apis[ApiKey.LIST_OFFSETS] == (0, 5)


def test_every_advertised_version_is_answered(broker: BrokerProcess) -> None:
    apis = advertised(broker)
    answered: list[str] = []
    with socket.create_connection((broker.host, broker.port), timeout=60) as s:
        correlation_id = 100
        for key, (lo, hi) in sorted(apis.items()):
            for version in range(lo, hi + 1):
                correlation_id += 1
                try:
                    wire.call(s, default_request(key), version, correlation_id)
                except AssertionError as exc:
                    raise AssertionError(f"{ApiKey(key).name} v{version}: {exc}") from exc
                answered.append(f"{ApiKey(key).name} v{version}")
    assert len(answered) == sum(hi - lo + 1 for lo, hi in apis.values())


def test_api_versions_v3_without_client_software_is_invalid_request(broker: BrokerProcess) -> None:
    with socket.create_connection((broker.host, broker.port), timeout=30) as s:
        response = wire.call(s, ApiVersionsRequest(), 3)
        assert isinstance(response, ApiVersionsResponse)
        assert response.error_code == INVALID_REQUEST
        # Still answered, still connected: the same connection can ask properly.
        assert wire.call(s, API_VERSIONS_V3, 3, correlation_id=2).error_code == 0
