"""KIP-227 fetch sessions: creation, incremental updates, forgotten partitions, epochs, eviction."""

from __future__ import annotations

from sofakafka.broker.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, FetchSessionCache
from sofakafka.broker.replica_manager import FetchPartitionRequest, FetchPartitionResult
from sofakafka.protocol.errors import ErrorCode


def req(topic: str, partition: int, offset: int = 0) -> FetchPartitionRequest:
    return FetchPartitionRequest(topic, partition, offset, 1 << 20)


def ok(hw: int, records: bytes = b"", lso: int | None = None, start: int = 0) -> FetchPartitionResult:
    return FetchPartitionResult(ErrorCode.NONE, high_watermark=hw, last_stable_offset=hw if lso is None else lso,
                                log_start_offset=start, records=records)


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_epoch_final_without_id_is_a_sessionless_full_fetch() -> None:
    cache = FetchSessionCache(10)
    ctx = cache.new_context(0, FINAL_EPOCH, [req("a", 0), req("a", 1)], [], privileged=False)
    assert ctx.session_id == 0 and ctx.error == ErrorCode.NONE and len(cache) == 0
    pairs = ctx.response_partitions([ok(5), ok(6)])
    assert [(r.tp, res.high_watermark) for r, res in pairs] == [(("a", 0), 5), (("a", 1), 6)]


def test_incremental_fetches_fetch_the_whole_session_but_answer_only_news() -> None:
    cache = FetchSessionCache(10)
    full = cache.new_context(0, INITIAL_EPOCH, [req("a", 0), req("b", 0)], [], privileged=False)
    sid = full.session_id
    assert sid != 0
    assert len(full.response_partitions([ok(5), ok(7)])) == 2  # a full response lists everything

    inc = cache.new_context(sid, 1, [], [], privileged=False)
    assert inc.incremental and [r.tp for r in inc.partitions] == [("a", 0), ("b", 0)]
    assert inc.response_partitions([ok(5), ok(7)]) == []  # nothing changed: nothing to say

    inc = cache.new_context(sid, 2, [req("a", 0, offset=5)], [], privileged=False)
    assert [r.fetch_offset for r in inc.partitions] == [5, 0]  # the request updated a's offset in place
    pairs = inc.response_partitions([ok(5, records=b"x"), ok(8)])
    assert [(r.tp, len(res.records), res.high_watermark) for r, res in pairs] == [(("a", 0), 1, 5), (("b", 0), 0, 8)]

    inc = cache.new_context(sid, 3, [], [], privileged=False)
    errors = inc.response_partitions([FetchPartitionResult(ErrorCode.OFFSET_OUT_OF_RANGE), ok(8)])
    assert [r.tp for r, _ in errors] == [("a", 0)]


def test_new_partitions_are_added_and_forgotten_ones_dropped() -> None:
    cache = FetchSessionCache(10)
    sid = cache.new_context(0, INITIAL_EPOCH, [req("a", 0), req("a", 1)], [], privileged=False).session_id
    inc = cache.new_context(sid, 1, [req("c", 3)], [("a", 0)], privileged=False)
    assert [r.tp for r in inc.partitions] == [("a", 1), ("c", 3)]
    pairs = inc.response_partitions([ok(0), ok(0)])
    assert [r.tp for r, _ in pairs] == [("a", 1), ("c", 3)]  # hw -1 -> 0 is news for both


def test_wrong_epoch_and_unknown_session_are_top_level_errors() -> None:
    cache = FetchSessionCache(10)
    sid = cache.new_context(0, INITIAL_EPOCH, [req("a", 0)], [], privileged=False).session_id
    assert cache.new_context(sid, 2, [], [], privileged=False).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(sid + 1, 1, [], [], privileged=False).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(sid, 1, [], [], privileged=False).error == ErrorCode.NONE  # still at epoch 1


def test_final_epoch_closes_the_session() -> None:
    cache = FetchSessionCache(10)
    sid = cache.new_context(0, INITIAL_EPOCH, [req("a", 0)], [], privileged=False).session_id
    ctx = cache.new_context(sid, FINAL_EPOCH, [req("a", 0)], [], privileged=False)
    assert ctx.session_id == 0 and cache.get(sid) is None
    assert cache.new_context(sid, 1, [], [], privileged=False).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_initial_epoch_with_an_id_replaces_that_session() -> None:
    cache = FetchSessionCache(10)
    old = cache.new_context(0, INITIAL_EPOCH, [req("a", 0)], [], privileged=False).session_id
    new = cache.new_context(old, INITIAL_EPOCH, [req("b", 0)], [], privileged=False).session_id
    assert cache.get(old) is None and cache.get(new) is not None and len(cache) == 1


def test_a_full_cache_evicts_only_stale_sessions_or_for_followers() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, eviction_ms=1000, clock_ms=clock)
    first = cache.new_context(0, INITIAL_EPOCH, [req("a", 0)], [], privileged=False).session_id
    cache.new_context(0, INITIAL_EPOCH, [req("b", 0)], [], privileged=False)
    assert cache.new_context(0, INITIAL_EPOCH, [req("c", 0)], [], privileged=False).session_id == 0  # no room
    follower = cache.new_context(0, INITIAL_EPOCH, [req("d", 0)], [], privileged=True)
    assert follower.session_id != 0 and cache.get(first) is None  # a follower displaces a consumer
    clock.now = 5000
    late = cache.new_context(0, INITIAL_EPOCH, [req("e", 0)], [], privileged=False)
    assert late.session_id != 0 and len(cache) == 2  # a stale session made room


def test_zero_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(0)
    ctx = cache.new_context(0, INITIAL_EPOCH, [req("a", 0)], [], privileged=False)
    assert ctx.session_id == 0 and len(ctx.response_partitions([ok(1)])) == 1


def test_answered_partitions_move_to_the_back_of_an_incremental_session() -> None:
    cache = FetchSessionCache(10)
    first = cache.new_context(0, INITIAL_EPOCH, [req("a", 0), req("a", 1), req("a", 2)], [], privileged=False)
    first.response_partitions([ok(1), ok(1), ok(1)])
    sid = first.session_id
    full = cache.get(sid)
    assert full is not None
    inc = cache.new_context(sid, 1, [], [], privileged=False)
    assert len(inc.response_partitions([ok(2, records=b"x"), ok(1), ok(1)])) == 1  # only a-0 has news
    assert list(full.partitions) == [("a", 1), ("a", 2), ("a", 0)]
    assert [r.tp for r in cache.new_context(sid, 2, [], [], privileged=False).partitions] == [
        ("a", 1), ("a", 2), ("a", 0)]
