"""The Metadata handler splices cached topic entries into an encoded response: the bytes must be exactly the
codec's encoding of the whole response, at every version."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from sofakafka.broker.handlers.metadata import splice_response
from sofakafka.protocol.messages.metadata import MetadataResponse
from tests.unit.protocol.strategies import message_strategy

VERSIONS = range(MetadataResponse.valid_versions()[0], MetadataResponse.valid_versions()[1] + 1)


Topic = MetadataResponse.MetadataResponseTopic


def responses(version: int) -> st.SearchStrategy[tuple[int, MetadataResponse]]:
    flexible = MetadataResponse.is_flexible(version)
    return st.tuples(st.just(version), message_strategy(MetadataResponse, version),
                     st.lists(message_strategy(Topic, version, flexible), min_size=1, max_size=3)).map(
        lambda t: (t[0], dataclasses.replace(t[1], topics=t[2])))


@given(st.sampled_from(list(VERSIONS)).flatmap(responses))
def test_the_spliced_response_is_the_encoded_response(case: tuple[int, MetadataResponse]) -> None:
    version, full = case
    topics = [t.encode(version, flexible=MetadataResponse.is_flexible(version)) for t in full.topics]
    empty = dataclasses.replace(full, topics=[])
    spliced = b"".join(bytes(c) for c in splice_response(empty, version, topics).chunks)
    assert spliced == full.encode(version)
