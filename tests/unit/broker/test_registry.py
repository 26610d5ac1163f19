"""The handler registry: what ApiVersions advertises is exactly what has a handler, within the codec's range."""

from __future__ import annotations

import pytest

from sofakafka.broker.handlers import (
    REGISTRY,
    HandlerResult,
    RequestContext,
    handles,
    load_handlers,
    supported_versions,
)
from sofakafka.protocol.api import ApiKey, valid_versions


async def _noop(ctx: RequestContext, request: object) -> HandlerResult:
    return None


def test_every_registered_range_lies_within_the_codec() -> None:
    load_handlers()
    assert supported_versions() == sorted(supported_versions())
    for key, lo, hi in supported_versions():
        codec_lo, codec_hi = valid_versions(key)
        assert codec_lo <= lo <= hi <= codec_hi, ApiKey(key).name


def test_the_core_apis_cover_every_version_kafka_2_6_accepts() -> None:
    load_handlers()
    for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.API_VERSIONS,
                ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.INIT_PRODUCER_ID):
        spec = REGISTRY[key]
        assert (spec.min_version, spec.max_version) == valid_versions(key), key.name


def test_a_range_outside_the_codec_is_refused() -> None:
    with pytest.raises(ValueError, match="outside the codec"):
        handles(ApiKey.PRODUCE, 0, 9)


def test_a_second_handler_for_one_api_is_refused() -> None:
    load_handlers()
    with pytest.raises(ValueError, match="already handled"):
        handles(ApiKey.PRODUCE)(_noop)
    assert REGISTRY[ApiKey.PRODUCE].handler is not _noop


def _one_partition_requests() -> dict[int, object]:
    from sofakafka.protocol.messages.fetch import FetchRequest
    from sofakafka.protocol.messages.list_offset import ListOffsetRequest
    from sofakafka.protocol.messages.metadata import MetadataRequest
    from sofakafka.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
    from sofakafka.protocol.messages.produce import ProduceRequest

    pt = ProduceRequest.TopicProduceData
    ft = FetchRequest.FetchableTopic
    lt = ListOffsetRequest.ListOffsetTopic
    ot = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    return {
        ApiKey.PRODUCE: ProduceRequest(acks=1, topics=[pt(name="t", partitions=[pt.PartitionProduceData(
            partition_index=3)])]),
        ApiKey.FETCH: FetchRequest(topics=[ft(name="t", fetch_partitions=[ft.FetchPartition(partition_index=3)])]),
        ApiKey.LIST_OFFSETS: ListOffsetRequest(topics=[lt(name="t", partitions=[lt.ListOffsetPartition(
            partition_index=3)])]),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: OffsetForLeaderEpochRequest(topics=[ot(name="t", partitions=[
            ot.OffsetForLeaderPartition(partition_index=3)])]),
        ApiKey.METADATA: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]),
    }


def test_whole_request_failures_answer_every_partition_at_every_version() -> None:
    """The connection answers a failed handler with these; they must encode at each version they serve."""
    load_handlers()
    for key, request in _one_partition_requests().items():
        spec = REGISTRY[key]
        assert spec.error_response is not None, ApiKey(key).name
        for version in range(spec.min_version, spec.max_version + 1):
            response = spec.error_response(request, version, 56)
            assert response is not None
            decoded = type(response).decode(response.encode(version), version)
            topics = getattr(decoded, "responses", None) or decoded.topics
            assert len(topics) == 1, (ApiKey(key).name, version)
            partitions = getattr(topics[0], "partitions", None)
            codes = [p.error_code for p in partitions] if partitions else [topics[0].error_code]
            assert codes == [56], (ApiKey(key).name, version)


def test_a_failed_acks_zero_produce_gets_no_error_response() -> None:
    from sofakafka.protocol.messages.produce import ProduceRequest

    load_handlers()
    builder = REGISTRY[ApiKey.PRODUCE].error_response
    assert builder is not None and builder(ProduceRequest(acks=0), 8, 56) is None
