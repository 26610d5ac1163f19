"""Kafka's default choice of partition for a keyed record: murmur2 of the key, made positive, modulo.

Matching the Java client's hash matters: records produced by the CLI with a key land in the same partition
as records with that key produced by any stock client, so per-key ordering holds across producers.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 Kafka's clients use, as a signed int like Java's."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    # Java's Utils.toPositive masks the sign bit rather than taking abs(), so MIN_VALUE maps to 0.
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
