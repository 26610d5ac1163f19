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
