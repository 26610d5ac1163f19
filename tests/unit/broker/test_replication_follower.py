"""The follower's handling of fetched bytes: a fetch may end inside a batch, and only whole batches are appended."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sofakafka.broker.replica_fetcher import whole_batches
from sofakafka.protocol.records import RecordBatchBuilder


def _batch(base_offset: int, values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset)
    for i, value in enumerate(values):
        builder.append_record(base_offset + i, 1_700_000_000_000, None, value)
    return builder.build()


@given(st.lists(st.lists(st.binary(max_size=40), min_size=1, max_size=4), min_size=0, max_size=5), st.data())
def test_a_fetch_cut_anywhere_yields_exactly_the_whole_batches_before_the_cut(
        batches: list[list[bytes]], data: st.DataObject) -> None:
    encoded: list[bytes] = []
    offset = 0
    for values in batches:
        encoded.append(_batch(offset, values))
        offset += len(values)
    stream = b"".join(encoded)
    cut = data.draw(st.integers(0, len(stream)))
    ends = [sum(len(b) for b in encoded[: i + 1]) for i in range(len(encoded))]
    expected = max([e for e in ends if e <= cut], default=0)
    assert bytes(whole_batches(stream[:cut])) == stream[:expected]
