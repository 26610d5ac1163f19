"""The .txnindex file: Kafka's 34-byte entry layout, collection over fetch ranges, truncation, sanity checks."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.storage.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    CorruptTransactionIndexError,
    TransactionIndex,
)


def test_entry_layout_matches_kafka_byte_for_byte(tmp_path: Path) -> None:
    index = TransactionIndex(0, tmp_path / "00000000000000000000.txnindex")
    index.append(AbortedTxn(producer_id=0x0102030405060708, first_offset=5, last_offset=9, last_stable_offset=10))
    index.close()
    data = (tmp_path / "00000000000000000000.txnindex").read_bytes()
    assert ENTRY_SIZE == 34
    assert data == (
        b"\x00\x00"  # version 0
        + bytes.fromhex("0102030405060708")
        + (5).to_bytes(8, "big") + (9).to_bytes(8, "big") + (10).to_bytes(8, "big")
    )
    assert struct.unpack(">hqqqq", data) == (0, 0x0102030405060708, 5, 9, 10)


def test_file_is_not_created_until_the_first_aborted_transaction(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(100, path)
    assert not path.exists()
    assert index.collect_aborted(0, 1000).aborted == []
    assert not index.delete()
    index.append(AbortedTxn(1, 100, 101, 102))
    assert path.exists()
    assert index.delete()
    assert not path.exists()


def test_reopened_index_reads_entries_and_keeps_enforcing_order(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(0, path)
    txns = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 10, 11)]
    for t in txns:
        index.append(t)
    index.close()
    reopened = TransactionIndex(0, path)
    assert reopened.all_aborted_txns() == txns
    with pytest.raises(ValueError):
        reopened.append(AbortedTxn(3, 7, 10, 12))
    reopened.append(AbortedTxn(3, 7, 11, 12))
    assert reopened.last_offset == 11
    reopened.close()


def test_collect_stops_at_an_entry_whose_lso_reaches_the_upper_bound(tmp_path: Path) -> None:
    index = TransactionIndex(0, tmp_path / "a.txnindex")
    index.append(AbortedTxn(1, 0, 10, 5))    # another producer's transaction was open from 5
    index.append(AbortedTxn(2, 5, 20, 21))   # nothing open afterwards
    index.append(AbortedTxn(3, 25, 30, 31))
    result = index.collect_aborted(0, 8)
    assert result.aborted == [AbortedTxn(1, 0, 10, 5), AbortedTxn(2, 5, 20, 21)]
    assert result.is_complete
    result = index.collect_aborted(22, 100)
    assert result.aborted == [AbortedTxn(3, 25, 30, 31)]
    assert not result.is_complete
    index.close()


def test_truncate_drops_entries_whose_marker_is_at_or_after_the_offset(tmp_path: Path) -> None:
    index = TransactionIndex(0, tmp_path / "a.txnindex")
    for t in [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 10, 11), AbortedTxn(3, 11, 15, 16)]:
        index.append(t)
    index.truncate_to(10)
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6)]
    assert index.size_in_bytes == ENTRY_SIZE
    index.append(AbortedTxn(4, 7, 9, 10))  # offsets may be reused after truncation
    assert index.last_offset == 9
    index.close()


def test_torn_trailing_entry_is_ignored_then_cut_by_truncation(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(0, path)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.close()
    with path.open("ab") as f:
        f.write(AbortedTxn(2, 6, 9, 10).encode()[:20])
    reopened = TransactionIndex(0, path)
    assert reopened.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6)]
    with pytest.raises(CorruptTransactionIndexError):
        reopened.sanity_check()
    reopened.truncate_to(100)
    reopened.sanity_check()
    reopened.append(AbortedTxn(2, 6, 9, 10))
    assert reopened.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 6, 9, 10)]
    reopened.close()


def test_sanity_check_refuses_markers_below_the_segment_base(tmp_path: Path) -> None:
    index = TransactionIndex(100, tmp_path / "00000000000000000100.txnindex")
    index.append(AbortedTxn(1, 90, 99, 100))
    with pytest.raises(CorruptTransactionIndexError):
        index.sanity_check()
    index.reset()
    index.sanity_check()
    assert index.all_aborted_txns() == []
    index.close()


def test_rename_keeps_entries_and_follows_the_new_name(tmp_path: Path) -> None:
    cleaned = tmp_path / "00000000000000000000.txnindex.cleaned"
    index = TransactionIndex(0, cleaned)
    index.append(AbortedTxn(1, 0, 5, 6))
    swap = tmp_path / "00000000000000000000.txnindex.swap"
    index.rename_to(swap)
    assert swap.exists() and not cleaned.exists()
    index.append(AbortedTxn(1, 6, 8, 9))
    live = tmp_path / "00000000000000000000.txnindex"
    index.rename_to(live)
    index.close()
    assert TransactionIndex(0, live).all_aborted_txns() == [AbortedTxn(1, 0, 5, 6), AbortedTxn(1, 6, 8, 9)]


txn_lists = st.lists(
    st.tuples(st.integers(0, 50), st.integers(0, 30), st.integers(1, 30), st.integers(0, 40)),
    max_size=25,
)


@given(raw=txn_lists, fetch=st.integers(0, 1500), span=st.integers(1, 500))
def test_collect_returns_exactly_the_overlapping_transactions_up_to_the_stop(
    tmp_path_factory: pytest.TempPathFactory, raw: list[tuple[int, int, int, int]], fetch: int, span: int
) -> None:
    path = tmp_path_factory.mktemp("txn") / "00000000000000000000.txnindex"
    txns = []
    last = -1
    for pid, back, step, lso_gap in raw:
        last_offset = last + step
        first_offset = max(0, last_offset - back)
        txns.append(AbortedTxn(pid, first_offset, last_offset, last_offset + 1 - min(lso_gap, last_offset)))
        last = last_offset
    index = TransactionIndex(0, path)
    for t in txns:
        index.append(t)
    upper = fetch + span
    expected: list[AbortedTxn] = []
    complete = False
    for t in txns:
        if t.last_offset >= fetch and t.first_offset < upper:
            expected.append(t)
        if t.last_stable_offset >= upper:
            complete = True
            break
    result = index.collect_aborted(fetch, upper)
    assert result.aborted == expected
    assert result.is_complete == complete
    index.close()
