"""The CLI's keyed partitioning must agree with the Java client's, or per-key order breaks across producers."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.client import murmur2, parse_bootstrap, partition_for_key

# kafka-python's package import reads its JSON schemas with a deprecated importlib call.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

# Values of Kafka's Utils.murmur2 as its own unit tests state them.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python_for_any_key(key: bytes) -> None:
    # kafka-python returns the same 32 bits unsigned.
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF


@given(st.binary(max_size=32), st.integers(min_value=1, max_value=1000))
def test_partition_for_key_is_in_range_and_uses_the_positive_hash(key: bytes, n: int) -> None:
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert p == (murmur2(key) & 0x7FFFFFFF) % n


def test_bootstrap_servers_parse_like_kafkas_tools() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9093", "host"]) == [("::1", 9093), ("host", 9092)]
    with pytest.raises(ValueError, match="port must be a number"):
        parse_bootstrap("a:b")
    with pytest.raises(ValueError, match="no bootstrap"):
        parse_bootstrap(" , ")
