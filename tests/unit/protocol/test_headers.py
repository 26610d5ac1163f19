"""Request/response headers and the header version each (api key, api version) uses, with 2.6's quirks."""

from __future__ import annotations

import pytest

from sofakafka.protocol.api import (
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    flexible_versions,
    is_flexible,
    request_type,
    response_type,
    size_prefixed,
    valid_versions,
)
from sofakafka.protocol.errors import DecodeError, UnsupportedVersionError
from sofakafka.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    request_header_version,
    response_header_version,
)
from sofakafka.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ControlledShutdownRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataRequest,
    ProduceRequest,
)

# API-VERSIONS.md Table 1: key -> (max version, first flexible version or None); min is 0 for all.
TABLE_1 = {
    0: (8, None), 1: (11, None), 2: (5, None), 3: (9, 9), 4: (4, 4), 5: (3, 2), 6: (6, 6), 7: (3, 3), 8: (8, 8),
    9: (7, 6), 10: (3, 3), 11: (7, 6), 12: (4, 4), 13: (4, 4), 14: (5, 4), 15: (5, 5), 16: (4, 3), 17: (1, None),
    18: (3, 3), 19: (5, 5), 20: (4, 4), 21: (2, 2), 22: (3, 2), 23: (3, None), 24: (1, None), 25: (1, None),
    26: (1, None), 27: (0, None), 28: (3, 3), 29: (2, 2), 30: (2, 2), 31: (2, 2), 32: (3, None), 33: (1, None),
    34: (1, None), 35: (2, 2), 36: (2, 2), 37: (2, 2), 38: (2, 2), 39: (2, 2), 40: (2, 2), 41: (2, 2), 42: (2, 2),
    43: (2, 2), 44: (1, 1), 45: (0, 0), 46: (0, 0), 47: (0, None), 48: (0, None), 49: (0, None),
}


@pytest.mark.parametrize("key", sorted(TABLE_1))
def test_versions_and_header_versions_match_table_1(key: int) -> None:
    max_version, first_flexible = TABLE_1[key]
    assert valid_versions(key) == (0, max_version)
    assert request_type(key).valid_versions() == response_type(key).valid_versions() == (0, max_version)
    assert flexible_versions(key) == (None if first_flexible is None else (first_flexible, 0x7FFF))
    for version in range(max_version + 1):
        flexible = first_flexible is not None and version >= first_flexible
        assert is_flexible(key, version) == flexible
        assert request_type(key).is_flexible(version) == response_type(key).is_flexible(version) == flexible
        expected_request = 0 if (key, version) == (7, 0) else (2 if flexible else 1)
        assert request_header_version(key, version) == expected_request
        expected_response = 0 if key == 18 else (1 if flexible else 0)
        assert response_header_version(key, version) == expected_response


def test_api_key_names_follow_kafka() -> None:
    assert len(ApiKey) == 50
    assert ApiKey.PRODUCE == 0
    assert ApiKey.LIST_OFFSETS == 2
    assert ApiKey.OFFSET_FOR_LEADER_EPOCH == 23
    assert ApiKey.ALTER_CLIENT_QUOTAS == 49
    assert [int(k) for k in ApiKey] == list(range(50))


def test_request_header_v1_has_an_int16_client_id() -> None:
    header = RequestHeader(request_api_key=0, request_api_version=8, correlation_id=7, client_id="ab")
    assert bytes(encode_request_header(header)).hex() == "0000" "0008" "00000007" "0002" "6162"


def test_request_header_v2_keeps_the_int16_client_id_and_adds_tagged_fields() -> None:
    header = RequestHeader(request_api_key=3, request_api_version=9, correlation_id=7, client_id="ab")
    data = bytes(encode_request_header(header))
    assert data.hex() == "0003" "0009" "00000007" "0002" "6162" "00"
    assert decode_request_header(data) == (header, len(data))


def test_null_client_id_is_minus_one_even_in_header_v2() -> None:
    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1, client_id=None)
    data = bytes(encode_request_header(header))
    assert data.hex() == "0012" "0003" "00000001" "ffff" "00"
    assert decode_request_header(data)[0].client_id is None


def test_controlled_shutdown_v0_uses_header_v0_without_client_id() -> None:
    header = RequestHeader(request_api_key=7, request_api_version=0, correlation_id=5)
    body = ControlledShutdownRequest(broker_id=1)
    frame = encode_request(header, body)
    assert frame.hex() == "0007" "0000" "00000005" "00000001"
    assert decode_request(frame) == (header, body)
    # A client id cannot travel in header v0; it is ignorable, so it is dropped rather than refused.
    with_client = RequestHeader(request_api_key=7, request_api_version=0, correlation_id=5, client_id="x")
    assert encode_request(with_client, body) == frame


def test_api_versions_response_header_is_v0_even_for_flexible_bodies() -> None:
    body = ApiVersionsResponse(error_code=0, api_keys=[ApiVersionsResponse.ApiVersionsResponseKey(api_key=0, min_version=0, max_version=8)])
    frame = encode_response(ResponseHeader(correlation_id=9), body, 3)
    assert frame[:4] == b"\x00\x00\x00\x09"
    assert frame[4:] == body.encode(3)  # no tagged-field byte between header and body
    assert decode_response(frame, 18, 3) == (ResponseHeader(correlation_id=9), body)


def test_flexible_response_header_ends_with_tagged_fields() -> None:
    data = bytes(encode_response_header(ResponseHeader(correlation_id=1), 3, 9))
    assert data.hex() == "00000001" "00"
    assert decode_response_header(data, 3, 9) == (ResponseHeader(correlation_id=1), 5)


def test_header_decodes_without_the_body() -> None:
    header = RequestHeader(request_api_key=0, request_api_version=3, correlation_id=11, client_id="c")
    frame = bytes(encode_request_header(header)) + b"\xde\xad"  # not a valid produce body
    decoded, offset = decode_request_header(frame)
    assert decoded == header
    assert frame[offset:] == b"\xde\xad"
    with pytest.raises(DecodeError):
        decode_request(frame)


def test_unknown_api_key_is_unsupported() -> None:
    frame = bytes.fromhex("0063" "0000" "00000001" "ffff")
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request_header(frame)
    assert (info.value.api_key, info.value.api_version) == (99, 0)
    with pytest.raises(UnsupportedVersionError):
        request_type(50)


def test_unknown_version_of_a_known_api_is_unsupported() -> None:
    frame = bytes.fromhex("0000" "0009" "00000001" "ffff")
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request_header(frame)
    assert (info.value.api_key, info.value.api_version) == (0, 9)
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest().encode(9)


def test_api_versions_header_of_an_unknown_version_decodes_but_its_body_does_not() -> None:
    header = RequestHeader(request_api_key=18, request_api_version=7, correlation_id=42, client_id="future")
    frame = bytes(encode_request_header(header)) + b"\x00"
    decoded, offset = decode_request_header(frame)
    assert decoded == header
    assert offset == len(frame) - 1
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.api_version) == (18, 7)


def test_truncated_headers_raise_decode_error() -> None:
    data = bytes(encode_request_header(RequestHeader(request_api_key=3, request_api_version=9, correlation_id=1, client_id="ab")))
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            decode_request_header(data[:cut])


def test_request_round_trip_through_whole_frames() -> None:
    header = RequestHeader(request_api_key=3, request_api_version=9, correlation_id=3, client_id="cli")
    body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=False)
    frame = encode_request(header, body)
    assert decode_request(frame) == (header, body)
    assert decode_request(memoryview(frame)) == (header, body)
    assert size_prefixed(frame)[:4] == len(frame).to_bytes(4, "big")


def test_api_versions_request_v3_round_trips() -> None:
    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1, client_id="x")
    body = ApiVersionsRequest(client_software_name="sofakafka", client_software_version="0.1")
    assert decode_request(encode_request(header, body)) == (header, body)


def test_trailing_bytes_after_the_body_are_ignored_like_kafka_unless_strict() -> None:
    header = RequestHeader(request_api_key=12, request_api_version=0, correlation_id=1, client_id="x")
    body = HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    frame = encode_request(header, body)
    assert decode_request(frame + b"\x00") == (header, body)
    with pytest.raises(DecodeError):
        decode_request(frame + b"\x00", strict=True)
    response = encode_response(ResponseHeader(correlation_id=1), HeartbeatResponse(error_code=27), 0)
    assert decode_response(response + b"\x00\x00", 12, 0)[1] == HeartbeatResponse(error_code=27)
    with pytest.raises(DecodeError):
        decode_response(response + b"\x00", 12, 0, strict=True)


def test_librdkafka_metadata_v9_all_topics_request_with_stray_bytes_decodes() -> None:
    # librdkafka >= 2.1 reserves an int32 topic count and leaves it unfinished for v9 "all topics"
    # (captured from confluent-kafka 2.16.1); Kafka 2.6 serves it, reading the stray bytes as fields.
    frame = bytes.fromhex("00030009000000040014636170747572652d636f6e666c75656e742d3236000000000001000000")
    header, body = decode_request(frame)
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (3, 9, 4)
    assert header.client_id == "capture-confluent-26"
    assert isinstance(body, MetadataRequest)
    assert body.topics is None
