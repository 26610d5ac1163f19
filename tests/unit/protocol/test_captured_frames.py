"""Frames captured from real clients (kafka-python, confluent-kafka, kcat, kafkajs) talking to a real
broker decode with our codec and encode back to the very same bytes.

The fixtures come from tools/capture/run_all.sh (see tests/fixtures/frames/README.md): a recording
proxy in front of Tansu that negotiated versions like a Kafka 2.6 (or older) broker. Requests are what
clients really send, so they matter most; responses are Tansu's and exercise the response decoders.
Record data inside Produce and Fetch stays raw bytes in the codec; it is additionally walked batch by
batch and CRC-checked with the records layer, because a real client's batches are the best evidence
that our batch reader agrees with theirs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sofakafka.protocol.api import (
    ApiKey,
    decode_request,
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    valid_versions,
)
from sofakafka.protocol.errors import DecodeError, UnsupportedVersionError
from sofakafka.protocol.messages.api_versions import ApiVersionsResponse
from sofakafka.protocol.messages.create_topics import CreateTopicsResponse
from sofakafka.protocol.messages.fetch import FetchResponse
from sofakafka.protocol.messages.metadata import MetadataRequest
from sofakafka.protocol.messages.produce import ProduceRequest
from sofakafka.protocol.records import iter_batches, validate_batch

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "frames"
CLIENTS = ("kafka-python", "confluent-kafka", "kcat", "kafkajs")


@dataclass(frozen=True)
class CapturedFrame:
    client: str
    direction: str
    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes
    line: int

    @property
    def test_id(self) -> str:
        return f"{self.client}:{ApiKey(self.api_key).name}-v{self.api_version}-{self.direction}@{self.line}"


def _load() -> list[CapturedFrame]:
    frames = []
    for client in CLIENTS:
        path = FIXTURES / f"{client}.jsonl"
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            raw = json.loads(text)
            frames.append(
                CapturedFrame(
                    client=raw["client"],
                    direction=raw["direction"],
                    api_key=raw["api_key"],
                    api_version=raw["api_version"],
                    correlation_id=raw["correlation_id"],
                    frame=bytes.fromhex(raw["hex"]),
                    line=number,
                )
            )
    return frames


FRAMES = _load()


def _in_2_6_range(frame: CapturedFrame) -> bool:
    lo, hi = valid_versions(frame.api_key)
    return lo <= frame.api_version <= hi


# An ApiVersions request newer than the broker knows is legal (clients probe with their newest one);
# the capture proxy answered those itself, as a 2.6 broker does, and did not record its answer.
PROBES = [f for f in FRAMES if f.api_key == ApiKey.API_VERSIONS and not _in_2_6_range(f)]


def _tansu_malformed(captured: CapturedFrame) -> str | None:
    """Why a Tansu 0.6.0 response is not a valid Kafka response, for the few that are not.

    Each was checked by hand against the schema, and the stock client that got it failed on it too
    (kafka-python: "Unable to decode response"; librdkafka: "Read underflow"), so our decoder must
    refuse them as well rather than invent the missing fields."""
    if captured.direction != "response":
        return None
    after_correlation_id = captured.frame[4:].hex()
    if captured.api_key == ApiKey.LIST_OFFSETS and captured.api_version == 0:
        return "each partition lacks its old_style_offsets array"
    if captured.api_key == ApiKey.OFFSET_FETCH and after_correlation_id == {
        2: "0000",  # error_code only: the topics array is missing
        3: "000000000000", 4: "000000000000", 5: "000000000000",  # throttle + error_code, no topics
        6: "0000000000000000", 7: "0000000000000000",  # topics written as null (never nullable)
    }.get(captured.api_version):
        return "answer to an all-topics fetch carries no (or a null) topics array"
    return None


# CreateTopics v5 (flexible) responses from Tansu write the tagged field TopicConfigErrorCode even
# when it holds its default 0. Legal, but Kafka (and we) write a tagged field only when it differs
# from its default, so these decode fine and re-encode 4 bytes shorter per topic.
EXPLICIT_DEFAULT_TAG = bytes.fromhex("0100020000")  # 1 tagged field: tag 0, size 2, value 0


def _explicit_default_tag(captured: CapturedFrame) -> bool:
    return (
        (captured.api_key, captured.api_version, captured.direction) == (ApiKey.CREATE_TOPICS, 5, "response")
        and EXPLICIT_DEFAULT_TAG in captured.frame
    )


# librdkafka >= 2.1 asks for all topics at Metadata v9+ by leaving the 4-byte placeholder of the
# topic array count unfinalized (src/rdkafka_request.c: "v9+: keep 0, varint encoded null"), so the
# body is 00 00 00 00 + allow_auto_topic_creation + two booleans + tags: 3 stray bytes. By the schema
# that is topics=null, three false booleans, one empty tagged field (tag 0), and one byte left over,
# which Kafka 2.6 ignores (it never checks for trailing bytes after a request body).
def _librdkafka_all_topics_metadata(captured: CapturedFrame) -> bool:
    return (
        captured.direction == "request"
        and captured.api_key == ApiKey.METADATA
        and captured.api_version >= 9
        and captured.client.startswith(("confluent-kafka", "kcat"))
        and captured.frame[-8:-4] == bytes(4)
    )


SPECIAL = [f for f in FRAMES if _tansu_malformed(f) or _explicit_default_tag(f) or _librdkafka_all_topics_metadata(f)]
REQUESTS = [f for f in FRAMES if f.direction == "request" and f not in PROBES and f not in SPECIAL]
RESPONSES = [f for f in FRAMES if f.direction == "response" and f not in SPECIAL]
MALFORMED = [f for f in FRAMES if _tansu_malformed(f)]
NON_CANONICAL = [f for f in FRAMES if _explicit_default_tag(f)]
LIBRDKAFKA_METADATA = [f for f in FRAMES if _librdkafka_all_topics_metadata(f)]


def _ids(frames: list[CapturedFrame]) -> list[str]:
    return [f.test_id for f in frames]


def test_every_client_left_fixtures_of_a_full_session() -> None:
    """Guards the fixtures themselves: a re-capture that silently lost a client or an API would
    otherwise shrink this test to nothing while it still passed."""
    seen = Counter((f.client.split()[0], f.api_key) for f in FRAMES if f.direction == "request")
    session_apis = {
        ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.FIND_COORDINATOR,
        ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
    }
    admin_apis = {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.DESCRIBE_CONFIGS}
    for client in CLIENTS:
        expected = session_apis | (admin_apis if client != "kcat" else set())
        missing = sorted(key.name for key in expected if seen[(client, key)] == 0)
        assert not missing, f"{client} fixtures lack {missing}"
    total = sum((FIXTURES / f"{client}.jsonl").stat().st_size for client in CLIENTS)
    assert total < 2 * 1024 * 1024


def test_every_captured_frame_is_within_kafka_2_6_versions_or_an_api_versions_probe() -> None:
    strays = [f.test_id for f in FRAMES if f not in PROBES and not _in_2_6_range(f)]
    assert not strays
    assert all(f.direction == "request" for f in PROBES)


def test_clients_were_offered_no_more_than_kafka_2_6_accepts() -> None:
    """The fixtures stand for clients talking to a 2.6 broker only if the capture proxy's rewritten
    ApiVersions answers offered nothing beyond 2.6's ranges."""
    answers = [f for f in RESPONSES if f.api_key == ApiKey.API_VERSIONS]
    assert answers
    for captured in answers:
        _, body = decode_response(captured.frame, captured.api_key, captured.api_version)
        assert isinstance(body, ApiVersionsResponse)
        for offered in body.api_keys:
            lo, hi = valid_versions(offered.api_key)
            assert lo <= offered.min_version <= offered.max_version <= hi, (captured.test_id, offered)


@pytest.mark.parametrize("captured", REQUESTS, ids=_ids(REQUESTS))
def test_captured_request_decodes_and_reencodes_to_identical_bytes(captured: CapturedFrame) -> None:
    header, body = decode_request(captured.frame, strict=True)
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (
        captured.api_key,
        captured.api_version,
        captured.correlation_id,
    )
    assert encode_request(header, body) == captured.frame


@pytest.mark.parametrize("captured", RESPONSES, ids=_ids(RESPONSES))
def test_captured_response_decodes_and_reencodes_to_identical_bytes(captured: CapturedFrame) -> None:
    header, body = decode_response(captured.frame, captured.api_key, captured.api_version, strict=True)
    assert header.correlation_id == captured.correlation_id
    assert encode_response(header, body, captured.api_version) == captured.frame


@pytest.mark.parametrize("captured", PROBES, ids=_ids(PROBES))
def test_api_versions_probe_newer_than_2_6_has_a_readable_header_and_an_unsupported_body(
    captured: CapturedFrame,
) -> None:
    """What a 2.6 broker must do with it: read the header (for the correlation id), refuse the body."""
    header, offset = decode_request_header(captured.frame)
    assert (header.request_api_key, header.correlation_id) == (ApiKey.API_VERSIONS, captured.correlation_id)
    with pytest.raises(UnsupportedVersionError):
        decode_request_body(header, captured.frame, offset)


@pytest.mark.parametrize("captured", MALFORMED, ids=_ids(MALFORMED))
def test_malformed_broker_response_is_refused_not_guessed(captured: CapturedFrame) -> None:
    with pytest.raises(DecodeError):
        decode_response(captured.frame, captured.api_key, captured.api_version)
    with pytest.raises(DecodeError):
        decode_response(captured.frame, captured.api_key, captured.api_version, strict=True)


@pytest.mark.parametrize("captured", NON_CANONICAL, ids=_ids(NON_CANONICAL))
def test_tagged_field_sent_at_its_default_decodes_and_reencodes_canonically(captured: CapturedFrame) -> None:
    header, body = decode_response(captured.frame, captured.api_key, captured.api_version)
    assert isinstance(body, CreateTopicsResponse)
    assert all(topic.topic_config_error_code == 0 for topic in body.topics)
    canonical = encode_response(header, body, captured.api_version)
    explicit = captured.frame.count(EXPLICIT_DEFAULT_TAG)
    assert len(captured.frame) - len(canonical) == explicit * (len(EXPLICIT_DEFAULT_TAG) - 1)
    assert decode_response(canonical, captured.api_key, captured.api_version) == (header, body)


@pytest.mark.parametrize("captured", LIBRDKAFKA_METADATA, ids=_ids(LIBRDKAFKA_METADATA))
def test_librdkafka_all_topics_metadata_reads_as_kafka_reads_it(captured: CapturedFrame) -> None:
    """Kafka 2.6 serves this request as "all topics" and ignores the byte left over; everything before
    it must re-encode exactly, including the empty tagged field the stray bytes spell."""
    header, body = decode_request(captured.frame)
    assert isinstance(body, MetadataRequest)
    assert body.topics is None
    assert encode_request(header, body) == captured.frame[:-1]
    with pytest.raises(DecodeError):
        decode_request(captured.frame, strict=True)


def _record_sets(captured: CapturedFrame) -> Iterator[bytes]:
    if captured.api_key == ApiKey.PRODUCE and captured.direction == "request":
        _, request = decode_request(captured.frame)
        assert isinstance(request, ProduceRequest)
        for topic in request.topics:
            for partition in topic.partitions:
                if partition.records is not None:
                    yield bytes(partition.records)
    elif captured.api_key == ApiKey.FETCH and captured.direction == "response":
        _, response = decode_response(captured.frame, captured.api_key, captured.api_version)
        assert isinstance(response, FetchResponse)
        for fetched in response.topics:
            for fetched_partition in fetched.partitions:
                if fetched_partition.records is not None:
                    yield bytes(fetched_partition.records)


WITH_RECORDS = [
    f
    for f in REQUESTS + RESPONSES
    if (f.api_key, f.direction) in {(ApiKey.PRODUCE, "request"), (ApiKey.FETCH, "response")}
]


@pytest.mark.parametrize("captured", WITH_RECORDS, ids=_ids(WITH_RECORDS))
def test_batches_in_captured_produce_requests_and_fetch_responses_pass_crc_validation(
    captured: CapturedFrame,
) -> None:
    for records in _record_sets(captured):
        end = 0
        for batch in iter_batches(records):
            validate_batch(records, batch)
            end = batch.end
        if captured.direction == "request":
            # A producer sends whole batches; only a fetch may end in a batch cut at max bytes.
            assert end == len(records)


def test_captured_batches_cover_every_compression_codec() -> None:
    codecs: Counter[int] = Counter()
    for captured in WITH_RECORDS:
        for records in _record_sets(captured):
            for batch in iter_batches(records):
                codecs[batch.compression] += 1
    assert set(codecs) == {0, 1, 2, 3, 4}, codecs
