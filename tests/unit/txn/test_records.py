"""``__transaction_state`` keys and values in Kafka 2.6's byte layout, and the partition a transactional id maps to."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.broker.txn.records import decode_key, decode_value, encode_key, encode_value, partition_for
from sofakafka.broker.txn.state import TransactionState, TxnLogValue
from sofakafka.protocol.errors import DecodeError


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def test_key_is_version_0_then_the_transactional_id() -> None:
    assert encode_key("my-txn") == b"\x00\x00" + _string("my-txn")
    assert decode_key(encode_key("my-txn")) == "my-txn"


def test_value_layout_matches_kafka_2_6_value_v0() -> None:
    value = TxnLogValue(producer_id=4000, producer_epoch=3, transaction_timeout_ms=60000,
                        state=TransactionState.ONGOING, partitions=frozenset({("b", 1), ("a", 2), ("a", 0)}),
                        last_update_timestamp=1_600_000_000_123, start_timestamp=1_600_000_000_100)
    expected = (struct.pack(">hqhib", 0, 4000, 3, 60000, 1)
                + struct.pack(">i", 2)                                   # two topics
                + _string("a") + struct.pack(">iii", 2, 0, 2)            # a: [0, 2]
                + _string("b") + struct.pack(">ii", 1, 1)                # b: [1]
                + struct.pack(">qq", 1_600_000_000_123, 1_600_000_000_100))
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_an_empty_transaction_has_a_null_partition_array() -> None:
    value = TxnLogValue(7, 0, 1000, TransactionState.EMPTY, frozenset(), 5, -1)
    encoded = encode_value(value)
    assert encoded[2 + 8 + 2 + 4 + 1:][:4] == struct.pack(">i", -1)
    assert decode_value(encoded) == value


def test_complete_states_write_an_empty_array_not_null() -> None:
    value = TxnLogValue(7, 0, 1000, TransactionState.COMPLETE_COMMIT, frozenset(), 5, 4)
    assert encode_value(value)[2 + 8 + 2 + 4 + 1:][:4] == struct.pack(">i", 0)


def test_empty_with_partitions_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="Empty"):
        encode_value(TxnLogValue(7, 0, 1000, TransactionState.EMPTY, frozenset({("t", 0)}), 5, -1))


def test_tombstone_decodes_to_none() -> None:
    assert decode_value(None) is None


@pytest.mark.parametrize("bad", [struct.pack(">h", 1) + _string("x"), struct.pack(">h", -1)])
def test_unknown_key_versions_are_refused(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_key(bad)


def test_unknown_value_version_and_state_byte_are_refused() -> None:
    good = encode_value(TxnLogValue(1, 0, 10, TransactionState.PREPARE_EPOCH_FENCE, frozenset(), 1, 1))
    with pytest.raises(DecodeError, match="version"):
        decode_value(struct.pack(">h", 1) + good[2:])
    with pytest.raises(DecodeError, match="state byte 8"):
        decode_value(good[:16] + b"\x08" + good[17:])
    assert decode_value(good) is not None  # state 7, the highest Kafka knows, is fine


def test_partition_is_the_java_string_hash_modulo_the_partition_count() -> None:
    # "my-txn".hashCode() == -1061187895 in Java; abs % 50 == 45.
    assert partition_for("my-txn", 50) == 45
    # "hello".hashCode() == 99162322.
    assert partition_for("hello", 50) == 99162322 % 50
    # Integer.MIN_VALUE (this string's hash) maps to 0 under Kafka's Utils.abs, not to a negative number.
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("polygenelubricants", 7) == 0


_tp = st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 1000))
_states = st.sampled_from(list(TransactionState))


@given(st.integers(-1, 2**63 - 1), st.integers(-1, 2**15 - 1), st.integers(0, 2**31 - 1), _states,
       st.frozensets(_tp, max_size=6), st.integers(-1, 2**62), st.integers(-1, 2**62))
def test_values_round_trip(pid: int, epoch: int, timeout: int, state: TransactionState,
                           partitions: frozenset[tuple[str, int]], updated: int, started: int) -> None:
    if state is TransactionState.EMPTY:
        partitions = frozenset()
    value = TxnLogValue(pid, epoch, timeout, state, partitions, updated, started)
    assert decode_value(encode_value(value)) == value


@given(st.text(max_size=40), st.integers(1, 200))
def test_partition_is_in_range(txn_id: str, count: int) -> None:
    assert 0 <= partition_for(txn_id, count) < count
    assert decode_key(encode_key(txn_id)) == txn_id
