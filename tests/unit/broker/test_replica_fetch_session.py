"""The follower's side of KIP-227 fetch sessions, against the leader's real session cache.

The last test runs the real fetcher loop (ReplicaFetcher, ReplicaManager, logs) with only the connection
replaced by one that hands requests to the leader's session cache.

The layer below the follower's session handler is the wire and, past it, the leader's ``FetchSessionCache``:
requests built by the handler are given to the cache as the Fetch handler would, and the cache's answers go back
to the handler. What must hold is what replication relies on: the leader's view of every session partition's
fetch offset is the follower's true log end offset (the leader's high watermark and ISR expansion are computed
from it), no news is ever withheld from the follower, and every failure falls back to a full fetch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sofakafka.broker.fetch_session import FetchContext, FetchSessionCache
from sofakafka.broker.replica_fetcher import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetcherSettings,
    FetchRequestData,
    FetchSessionHandler,
    FollowedPartition,
    PartitionFetchState,
    ReplicaFetcherManager,
)
from sofakafka.broker.replica_manager import (
    FetchPartitionRequest,
    FetchPartitionResult,
    ReplicaManager,
    TopicPartition,
)
from sofakafka.controller.metadata import ClusterMetadata
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.fetch import FetchRequest, FetchResponse
from sofakafka.protocol.records import RecordBatchBuilder
from sofakafka.protocol.schema import Request, Response
from sofakafka.storage.log_manager import LogManager

MAX_BYTES = 1 << 20
TPS: list[TopicPartition] = [("t", 0), ("t", 1), ("u", 0), ("u", 7)]


def state(offset: int, epoch: int = 3, log_start: int = 0) -> PartitionFetchState:
    return PartitionFetchState(offset, log_start, MAX_BYTES, epoch)


def send(cache: FetchSessionCache, data: FetchRequestData) -> FetchContext:
    """What the leader's Fetch handler does with the request the follower built."""
    requested = [FetchPartitionRequest(t, p, s.fetch_offset, s.max_bytes, s.current_leader_epoch, s.log_start_offset)
                 for (t, p), s in data.to_send.items()]
    return cache.new_context(data.session_id, data.epoch, requested, data.forgotten, privileged=True)


@dataclass
class Leader:
    """Log end offset and high watermark per partition; a read returns everything from the fetch offset."""

    log_end: dict[TopicPartition, int] = field(default_factory=lambda: dict.fromkeys(TPS, 0))
    high_watermark: dict[TopicPartition, int] = field(default_factory=lambda: dict.fromkeys(TPS, 0))

    def read(self, ctx: FetchContext) -> list[FetchPartitionResult]:
        return [FetchPartitionResult(ErrorCode.NONE, high_watermark=self.high_watermark[r.tp],
                                     last_stable_offset=self.high_watermark[r.tp], log_start_offset=0,
                                     records=b"x" * max(0, self.log_end[r.tp] - r.fetch_offset))
                for r in ctx.partitions]


def round_trip(handler: FetchSessionHandler, cache: FetchSessionCache, leader: Leader,
               wanted: dict[TopicPartition, PartitionFetchState]
               ) -> tuple[FetchRequestData, FetchContext, list[tuple[FetchPartitionRequest, FetchPartitionResult]]]:
    data = handler.build(wanted)
    ctx = send(cache, data)
    pairs = [] if ctx.error != ErrorCode.NONE else ctx.response_partitions(leader.read(ctx))
    assert handler.handle_response(data, ctx.error, ctx.session_id, [r.tp for r, _ in pairs]) == (
        ctx.error == ErrorCode.NONE)
    return data, ctx, pairs


def test_the_first_fetch_is_full_and_opens_a_session_then_only_changes_travel() -> None:
    handler, cache, leader = FetchSessionHandler(), FetchSessionCache(10), Leader()
    wanted = {tp: state(0) for tp in TPS}
    data, ctx, pairs = round_trip(handler, cache, leader, wanted)
    assert (data.session_id, data.epoch, data.full) == (INVALID_SESSION_ID, INITIAL_EPOCH, True)
    assert list(data.to_send) == TPS and [r.tp for r, _ in pairs] == TPS  # a full response lists everything
    assert handler.session_id == ctx.session_id != INVALID_SESSION_ID and handler.epoch == 1

    # Quiet: an incremental request with no partitions, answered by one with no partitions.
    data, ctx, pairs = round_trip(handler, cache, leader, wanted)
    assert (data.session_id, data.epoch, data.to_send, data.forgotten) == (handler.session_id, 1, {}, [])
    assert pairs == [] and handler.empty_incremental_responses == 1 and handler.epoch == 2
    # ...and yet the leader fetched, and so saw the follower's position of, every partition of the session.
    assert [(r.tp, r.fetch_offset) for r in ctx.partitions] == [(tp, 0) for tp in TPS]

    # Records on one partition: only that one is answered; the follower's new offset is all it sends next.
    leader.log_end[("u", 0)] = 5
    _, _, pairs = round_trip(handler, cache, leader, wanted)
    assert [(r.tp, len(res.records)) for r, res in pairs] == [(("u", 0), 5)]
    wanted[("u", 0)] = state(5)
    data, ctx, pairs = round_trip(handler, cache, leader, wanted)
    assert data.to_send == {("u", 0): state(5)} and pairs == []
    assert {r.tp: r.fetch_offset for r in ctx.partitions} == {**dict.fromkeys(TPS, 0), ("u", 0): 5}

    # A moved high watermark is news even without records; so is a new leader epoch on the follower's side.
    leader.high_watermark[("u", 0)] = 5
    _, _, pairs = round_trip(handler, cache, leader, wanted)
    assert [(r.tp, res.high_watermark) for r, res in pairs] == [(("u", 0), 5)]
    wanted[("t", 1)] = state(0, epoch=4)
    data, _, _ = round_trip(handler, cache, leader, wanted)
    assert data.to_send == {("t", 1): state(0, epoch=4)}
    assert handler.full_requests == 1 and handler.sessions_opened == 1


def test_dropped_partitions_are_forgotten_and_returning_ones_added() -> None:
    handler, cache, leader = FetchSessionHandler(), FetchSessionCache(10), Leader()
    wanted = {tp: state(0) for tp in TPS}
    round_trip(handler, cache, leader, wanted)
    del wanted[("t", 1)]  # resting after an error, or no longer followed from this leader
    data, ctx, _ = round_trip(handler, cache, leader, wanted)
    assert data.forgotten == [("t", 1)] and data.to_send == {}
    assert ("t", 1) not in {r.tp for r in ctx.partitions}
    wanted[("t", 1)] = state(0)
    data, ctx, _ = round_trip(handler, cache, leader, wanted)
    assert data.to_send == {("t", 1): state(0)} and data.forgotten == []
    assert {r.tp for r in ctx.partitions} == set(TPS)


def test_an_unknown_session_falls_back_to_a_full_fetch_that_opens_a_new_one() -> None:
    handler, cache, leader = FetchSessionHandler(), FetchSessionCache(10), Leader()
    wanted = {tp: state(0) for tp in TPS}
    round_trip(handler, cache, leader, wanted)
    old = handler.session_id
    cache.remove(old)  # evicted, or the leader restarted
    data, ctx, pairs = round_trip(handler, cache, leader, wanted)
    assert ctx.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and pairs == []
    assert (handler.session_id, handler.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    data, ctx, pairs = round_trip(handler, cache, leader, wanted)
    assert data.full and list(data.to_send) == TPS and len(pairs) == len(TPS)
    assert handler.session_id == ctx.session_id not in (INVALID_SESSION_ID, old)


def test_an_epoch_mismatch_closes_the_session_in_the_full_fetch_that_follows() -> None:
    handler, cache, leader = FetchSessionHandler(), FetchSessionCache(10), Leader()
    wanted = {tp: state(0) for tp in TPS}
    round_trip(handler, cache, leader, wanted)
    old = handler.session_id
    handler.epoch = 7  # out of step with the leader
    _, ctx, _ = round_trip(handler, cache, leader, wanted)
    assert ctx.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    data, ctx, _ = round_trip(handler, cache, leader, wanted)
    # The full fetch names the old session with epoch 0: the leader closes it and opens another.
    assert (data.session_id, data.epoch) == (old, INITIAL_EPOCH)
    assert cache.get(old) is None and cache.get(ctx.session_id) is not None and len(cache) == 1


def test_a_lost_response_means_a_full_fetch_since_the_leader_may_have_moved_on() -> None:
    handler, cache, leader = FetchSessionHandler(), FetchSessionCache(10), Leader()
    wanted = {tp: state(0) for tp in TPS}
    round_trip(handler, cache, leader, wanted)
    old = handler.session_id
    leader.high_watermark[("t", 0)] = 3
    leader.log_end[("t", 0)] = 3
    data = handler.build(wanted)
    ctx = send(cache, data)
    ctx.response_partitions(leader.read(ctx))  # the leader answered (and noted what it said)...
    handler.handle_error()  # ...but the connection broke before the follower read it
    data, ctx, pairs = round_trip(handler, cache, leader, wanted)
    assert data.full and data.session_id == old and cache.get(old) is None
    assert {r.tp: (len(res.records), res.high_watermark) for r, res in pairs}[("t", 0)] == (3, 3)


def test_a_full_session_cache_leaves_the_follower_fetching_in_full_until_a_slot_frees() -> None:
    handler, leader = FetchSessionHandler(), Leader()
    cache = FetchSessionCache(1)
    taken = cache.new_context(0, INITIAL_EPOCH, [], [], privileged=True).session_id  # another follower's
    wanted = {tp: state(0) for tp in TPS}
    for _ in range(3):
        data, ctx, pairs = round_trip(handler, cache, leader, wanted)
        assert data.full and data.epoch == INITIAL_EPOCH and ctx.session_id == INVALID_SESSION_ID
        assert [r.tp for r, _ in pairs] == TPS  # still replicating: every partition, every time
    cache.remove(taken)
    data, ctx, _ = round_trip(handler, cache, leader, wanted)
    assert data.full and ctx.session_id != INVALID_SESSION_ID and handler.session_id == ctx.session_id
    data, _, _ = round_trip(handler, cache, leader, wanted)
    assert not data.full and data.to_send == {}


def test_a_response_that_does_not_match_the_session_is_not_used() -> None:
    handler = FetchSessionHandler()
    wanted = {("t", 0): state(0)}
    data = handler.build(wanted)
    # A full response must answer exactly what was asked.
    assert not handler.handle_response(data, ErrorCode.NONE, 42, [("t", 0), ("zz", 9)])
    assert handler.epoch == INITIAL_EPOCH
    data = handler.build(wanted)
    assert not handler.handle_response(data, ErrorCode.NONE, 42, [])
    data = handler.build(wanted)
    assert handler.handle_response(data, ErrorCode.NONE, 42, [("t", 0)])
    # An incremental one may omit partitions but not invent them.
    data = handler.build(wanted)
    assert handler.handle_response(data, ErrorCode.NONE, 42, [])
    data = handler.build(wanted)
    assert not handler.handle_response(data, ErrorCode.NONE, 42, [("zz", 9)])
    assert (handler.session_id, handler.epoch) == (42, INITIAL_EPOCH)


def test_a_leader_that_closes_the_session_in_an_incremental_response_gets_a_full_fetch_next() -> None:
    handler = FetchSessionHandler()
    wanted = {("t", 0): state(0)}
    assert handler.handle_response(handler.build(wanted), ErrorCode.NONE, 42, [("t", 0)])
    assert handler.handle_response(handler.build(wanted), ErrorCode.NONE, INVALID_SESSION_ID, [])
    data = handler.build(wanted)
    assert (data.session_id, data.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH) and data.epoch != FINAL_EPOCH


OPS = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(TPS), st.integers(1, 5)),
    st.tuples(st.just("commit"), st.sampled_from(TPS)),
    st.tuples(st.just("rest"), st.sampled_from(TPS)),
    st.tuples(st.just("resume"), st.sampled_from(TPS)),
    st.tuples(st.just("new_epoch"), st.sampled_from(TPS)),
    st.tuples(st.just("evict")),
    st.tuples(st.just("lose_response")),
    st.tuples(st.just("fetch")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=60), st.integers(0, 2))
def test_the_leader_always_sees_the_true_follower_position_and_no_news_is_withheld(
        ops: list[tuple[object, ...]], slots: int) -> None:
    handler, leader = FetchSessionHandler(), Leader()
    cache = FetchSessionCache(slots)
    follower_end = dict.fromkeys(TPS, 0)
    epochs = dict.fromkeys(TPS, 1)
    resting: set[TopicPartition] = set()
    seen_hw = dict.fromkeys(TPS, -1)

    def wanted() -> dict[TopicPartition, PartitionFetchState]:
        return {tp: state(follower_end[tp], epochs[tp]) for tp in TPS if tp not in resting}

    for op in ops:
        kind = op[0]
        if kind == "append":
            tp, n = op[1], op[2]
            assert isinstance(tp, tuple) and isinstance(n, int)
            leader.log_end[tp] += n
        elif kind == "commit":
            tp = op[1]
            assert isinstance(tp, tuple)
            leader.high_watermark[tp] = min(leader.log_end[tp], follower_end[tp])
        elif kind == "rest":
            assert isinstance(op[1], tuple)
            resting.add(op[1])
        elif kind == "resume":
            resting.discard(op[1])
        elif kind == "new_epoch":
            assert isinstance(op[1], tuple)
            epochs[op[1]] += 1
        elif kind == "evict":
            if handler.session_id:
                cache.remove(handler.session_id)
        elif kind == "lose_response":
            data = handler.build(wanted())
            ctx = send(cache, data)
            if ctx.error == ErrorCode.NONE:
                ctx.response_partitions(leader.read(ctx))
            handler.handle_error()
        else:
            want = wanted()
            data, ctx, pairs = round_trip(handler, cache, leader, want)
            if ctx.error != ErrorCode.NONE:
                assert not data.full
                continue
            # The leader fetched exactly the follower's partitions at exactly its log end offsets.
            assert {r.tp: (r.fetch_offset, r.current_leader_epoch) for r in ctx.partitions} == {
                tp: (s.fetch_offset, s.current_leader_epoch) for tp, s in want.items()}
            answered = {r.tp: res for r, res in pairs}
            for tp in want:
                news = leader.log_end[tp] > follower_end[tp] or leader.high_watermark[tp] != seen_hw[tp]
                assert not news or tp in answered, (tp, data)
            for tp, res in answered.items():
                follower_end[tp] += len(res.records)
                seen_hw[tp] = res.high_watermark


def test_the_leader_answers_a_partition_again_once_its_error_clears() -> None:
    # A follower that saw NOT_LEADER_OR_FOLLOWER may have stopped caring; when the partition is fine again with
    # the same high watermark as before the error, it must still be told.
    cache = FetchSessionCache(10)
    full = cache.new_context(0, INITIAL_EPOCH, [FetchPartitionRequest("t", 0, 4, MAX_BYTES)], [], privileged=True)
    healthy = FetchPartitionResult(ErrorCode.NONE, high_watermark=4, last_stable_offset=4, log_start_offset=0)
    full.response_partitions([healthy])
    inc = cache.new_context(full.session_id, 1, [], [], privileged=True)
    assert inc.response_partitions([healthy]) == []
    inc = cache.new_context(full.session_id, 2, [], [], privileged=True)
    assert len(inc.response_partitions([FetchPartitionResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)])) == 1
    inc = cache.new_context(full.session_id, 3, [], [], privileged=True)
    assert [res.high_watermark for _, res in inc.response_partitions([healthy])] == [4]


def test_an_incremental_response_carries_a_partition_redirected_to_a_preferred_read_replica() -> None:
    cache = FetchSessionCache(10)
    full = cache.new_context(0, INITIAL_EPOCH, [FetchPartitionRequest("t", 0, 4, MAX_BYTES)], [], privileged=False)
    same = FetchPartitionResult(ErrorCode.NONE, high_watermark=4, last_stable_offset=4, log_start_offset=0)
    full.response_partitions([same])
    inc = cache.new_context(full.session_id, 1, [], [], privileged=False)
    assert len(inc.response_partitions([same], must_answer={("t", 0)})) == 1


def _open(cache: FetchSessionCache, partitions: int, *, privileged: bool, name: str) -> int:
    reqs = [FetchPartitionRequest(name, p, 0, MAX_BYTES) for p in range(partitions)]
    return cache.new_context(0, INITIAL_EPOCH, reqs, [], privileged=privileged).session_id


class _Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_a_full_cache_evicts_by_kafkas_value_order() -> None:
    clock = _Clock()
    cache = FetchSessionCache(2, eviction_ms=1000, clock_ms=clock)
    small = _open(cache, 1, privileged=False, name="small")
    big = _open(cache, 5, privileged=False, name="big")
    # A follower displaces the consumer session with the fewest partitions, and the next one the other.
    f = _open(cache, 1, privileged=True, name="f")
    assert f != 0 and cache.get(small) is None and cache.get(big) is not None
    assert _open(cache, 9, privileged=False, name="c") == 0  # a consumer displaces nothing young
    g = _open(cache, 1, privileged=True, name="g")
    assert g != 0 and cache.get(big) is None
    assert _open(cache, 9, privileged=True, name="h") == 0  # nor does a follower displace a young follower

    def use(sid: int) -> None:
        session = cache.get(sid)
        assert session is not None
        assert cache.new_context(sid, session.epoch, [], [], privileged=session.privileged).error == ErrorCode.NONE

    # Used more than eviction_ms after creation, a session may go for a newcomer worth more, never an equal.
    clock.now = 1500
    use(f)
    use(g)
    assert _open(cache, 9, privileged=False, name="c") == 0  # a consumer is worth less than any follower
    assert _open(cache, 1, privileged=True, name="h") == 0  # an equal
    h = _open(cache, 2, privileged=True, name="h")
    assert h != 0 and cache.get(f) is None and cache.get(g) is not None  # the least recently used of equals
    # Any session idle longer than eviction_ms makes room for anyone.
    clock.now = 4000
    assert _open(cache, 1, privileged=False, name="late") != 0 and len(cache) == 2


def test_a_bigger_consumer_displaces_an_old_smaller_one() -> None:
    clock = _Clock()
    cache = FetchSessionCache(1, eviction_ms=1000, clock_ms=clock)
    old = _open(cache, 5, privileged=False, name="old")
    clock.now = 1500
    assert cache.new_context(old, 1, [], [], privileged=False).error == ErrorCode.NONE
    assert _open(cache, 5, privileged=False, name="same") == 0
    assert _open(cache, 6, privileged=False, name="bigger") != 0 and cache.get(old) is None


def test_forgetting_the_last_partition_closes_the_session() -> None:
    cache = FetchSessionCache(10)
    sid = cache.new_context(0, INITIAL_EPOCH, [FetchPartitionRequest("t", 0, 0, MAX_BYTES)], [],
                            privileged=True).session_id
    ctx = cache.new_context(sid, 1, [], [("t", 0)], privileged=True)
    assert ctx.session_id == INVALID_SESSION_ID and ctx.error == ErrorCode.NONE and cache.get(sid) is None
    # The follower's handler takes a session id of 0 in an incremental response as "start over".
    handler = FetchSessionHandler()
    assert handler.handle_response(handler.build({("t", 0): state(0)}), ErrorCode.NONE, sid, [("t", 0)])
    assert handler.handle_response(handler.build({("t", 0): state(0)}), ErrorCode.NONE, INVALID_SESSION_ID, [])
    assert handler.build({("t", 0): state(0)}).full


# -- the fetcher's loop over a fake wire ---------------------------------------------------------------------------
# The real ReplicaFetcher, ReplicaManager and logs on the follower's side; the connection is replaced by one that
# hands each request to the leader's real FetchSessionCache over an in-memory log of whole batches.


class FakeLeaderWire:
    """The connection to the leader: Fetch goes through a real session cache; failures can be injected."""

    def __init__(self) -> None:
        self.cache = FetchSessionCache(10)
        self.batches: dict[TopicPartition, list[tuple[int, bytes]]] = {tp: [] for tp in TPS[:2]}
        self.requests: list[FetchRequest] = []
        self.fail_next: list[BaseException | ErrorCode] = []

    def append(self, tp: TopicPartition, n: int) -> None:
        end = self.log_end(tp)
        builder = RecordBatchBuilder(base_offset=end)
        for i in range(n):
            builder.append_record(end + i, 1_700_000_000_000, None, b"v")
        self.batches[tp].append((end, bytes(builder.build())))

    def log_end(self, tp: TopicPartition) -> int:
        return sum(_batch_records(b) for _, b in self.batches[tp])

    async def connection(self) -> FakeLeaderWire:
        return self

    async def send(self, request: Request, version: int, timeout_s: float) -> Response:
        assert isinstance(request, FetchRequest) and version == 11
        self.requests.append(request)
        await asyncio.sleep(0.005)  # the leader's max wait, short
        if self.fail_next:
            failure = self.fail_next.pop(0)
            if isinstance(failure, BaseException):
                raise failure
            return FetchResponse(error_code=failure, session_id=0)
        requested = [FetchPartitionRequest(t.name, p.partition_index, p.fetch_offset, p.max_bytes,
                                           p.current_leader_epoch, p.log_start_offset)
                     for t in request.topics for p in t.fetch_partitions]
        forgotten = [(f.name, i) for f in request.forgotten for i in f.forgotten_partition_indexes]
        ctx = self.cache.new_context(request.session_id, request.epoch, requested, forgotten,
                                     privileged=request.replica_id >= 0)
        if ctx.error != ErrorCode.NONE:
            return FetchResponse(error_code=ctx.error, session_id=0)
        results = []
        for r in ctx.partitions:
            data = b"".join(b for base, b in self.batches[r.tp] if base >= r.fetch_offset)
            end = self.log_end(r.tp)
            results.append(FetchPartitionResult(ErrorCode.NONE, high_watermark=end, last_stable_offset=end,
                                                log_start_offset=0, records=data))
        by_topic: dict[str, list[FetchResponse.FetchableTopicResponse.FetchablePartitionResponse]] = {}
        for req, res in ctx.response_partitions(results):
            by_topic.setdefault(req.topic, []).append(FetchResponse.FetchableTopicResponse.FetchablePartitionResponse(
                partition_index=req.partition, error_code=res.error_code, high_watermark=res.high_watermark,
                last_stable_offset=res.last_stable_offset, log_start_offset=res.log_start_offset,
                preferred_read_replica=-1, records=res.records))
        return FetchResponse(error_code=0, session_id=ctx.session_id, topics=[
            FetchResponse.FetchableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])


def _batch_records(batch: bytes) -> int:
    # A v2 batch header: baseOffset int64, batchLength int32, ..., lastOffsetDelta int32 at byte 23.
    return int.from_bytes(batch[23:27], "big") + 1


def test_the_fetcher_replicates_through_a_session_and_starts_over_after_any_failure(tmp_path: Path) -> None:
    async def scenario() -> None:
        logs = LogManager([tmp_path / "logs"], broker_id=1)
        logs.startup()
        rm = ReplicaManager(1, logs)
        wire = FakeLeaderWire()
        manager = ReplicaFetcherManager(rm, FetcherSettings(broker_id=1, listener_name="PLAINTEXT",
                                                            fetch_backoff_ms=60_000), lambda: ClusterMetadata())
        fetcher = manager._fetcher(0)
        fetcher._connection = wire.connection  # type: ignore[method-assign,assignment]
        follower_logs = {}
        try:
            for topic, partition in TPS[:2]:
                lg = await rm.become_follower(topic, partition)
                follower_logs[(topic, partition)] = lg
                fetcher.add(FollowedPartition(topic, partition, lg, leader=0, leader_epoch=1))

            async def until(what: str, predicate: Callable[[], bool]) -> None:
                deadline = time.monotonic() + 30
                while not predicate():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    await asyncio.sleep(0.01)

            def sent(r: FetchRequest) -> dict[TopicPartition, int]:
                return {(t.name, p.partition_index): p.fetch_offset for t in r.topics for p in t.fetch_partitions}

            await until("a session", lambda: fetcher.session.session_id != 0 and len(wire.requests) >= 3)
            first, quiet = wire.requests[0], wire.requests[-1]
            assert (first.session_id, first.epoch) == (0, 0)
            assert (quiet.session_id, quiet.epoch > 0, sent(quiet), quiet.forgotten) == (
                fetcher.session.session_id, True, {}, [])

            # Records on one partition: replicated, and only that partition's new offset is sent afterwards.
            mark = len(wire.requests)
            wire.append(TPS[0], 3)
            await until("the new offset sent", lambda: any(sent(r) == {TPS[0]: 3} for r in wire.requests[mark:]))
            assert {tp for r in wire.requests[mark:] for tp in sent(r)} == {TPS[0]}
            assert follower_logs[TPS[0]].log_end_offset == 3 and follower_logs[TPS[0]].high_watermark == 3

            # A lost connection: the next fetch is full and closes the old session on the leader.
            old = fetcher.session.session_id
            wire.fail_next.append(ConnectionResetError("gone"))
            fetcher._settings = FetcherSettings(broker_id=1, listener_name="PLAINTEXT", fetch_backoff_ms=10)
            mark = len(wire.requests) - 1  # the request in flight may be the one that fails
            await until("a new session", lambda: fetcher.session.session_id not in (0, old))
            full = next(r for r in wire.requests[mark:] if r.epoch == 0)
            assert (full.session_id, full.epoch, sent(full)) == (old, 0, {TPS[0]: 3, TPS[1]: 0})
            assert wire.cache.get(old) is None

            # The leader lost the session (evicted, restarted): at once a full fetch without resting anyone.
            old = fetcher.session.session_id
            wire.cache.remove(old)
            fetcher._settings = FetcherSettings(broker_id=1, listener_name="PLAINTEXT", fetch_backoff_ms=60_000)
            mark = len(wire.requests) - 1
            await until("a new session", lambda: fetcher.session.session_id not in (0, old))
            # The full fetch that opened ``old`` may be the last one sent; the retry is the one naming no session.
            i = next(i for i, r in enumerate(wire.requests) if i >= mark and (r.session_id, r.epoch) == (0, 0))
            refused, retry = wire.requests[i - 1], wire.requests[i]
            assert (refused.session_id, refused.epoch > 0) == (old, True)  # FETCH_SESSION_ID_NOT_FOUND...
            assert (retry.session_id, retry.epoch, sent(retry)) == (0, 0, {TPS[0]: 3, TPS[1]: 0})  # ...then this
            assert all(fp.resume_at == 0 for fp in fetcher.partitions.values())
            wire.append(TPS[1], 2)
            await until("replication going on", lambda: follower_logs[TPS[1]].high_watermark == 2)
        finally:
            await manager.shutdown()
            rm.begin_shutdown()
            rm.shutdown_executors()
            logs.shutdown()

    asyncio.run(scenario())


class CountingSessionHandler(FetchSessionHandler):
    """The real handler, noting how many partitions each incremental request was built from."""

    def __init__(self) -> None:
        super().__init__()
        self.looked_at: list[int] = []

    def build_changes(self, changes: Mapping[TopicPartition, PartitionFetchState | None]) -> FetchRequestData:
        self.looked_at.append(len(changes))
        return super().build_changes(changes)


def test_a_quiet_fetcher_looks_only_at_the_partitions_that_changed(tmp_path: Path) -> None:
    """Between requests the fetcher compares only what may have moved (answered, added, rested): with 60 quiet
    partitions an incremental request is built from none of them, and one with records from that one."""
    tps = [("q", p) for p in range(60)]

    async def scenario() -> None:
        logs = LogManager([tmp_path / "logs"], broker_id=1)
        logs.startup()
        rm = ReplicaManager(1, logs)
        wire = FakeLeaderWire()
        wire.batches = {tp: [] for tp in tps}
        manager = ReplicaFetcherManager(rm, FetcherSettings(broker_id=1, listener_name="PLAINTEXT",
                                                            fetch_backoff_ms=60_000), lambda: ClusterMetadata())
        fetcher = manager._fetcher(0)
        fetcher._connection = wire.connection  # type: ignore[method-assign,assignment]
        handler = fetcher.session = CountingSessionHandler()
        try:
            for topic, partition in tps:
                lg = await rm.become_follower(topic, partition)
                fetcher.add(FollowedPartition(topic, partition, lg, leader=0, leader_epoch=1))

            async def until(what: str, predicate: Callable[[], bool]) -> None:
                deadline = time.monotonic() + 30
                while not predicate():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    await asyncio.sleep(0.01)

            # Partitions added while the session runs are looked at as they come; once all are in, nothing is.
            await until("every partition in the session", lambda: len(handler.partitions) == len(tps))
            await until("quiet fetches that look at nothing", lambda: handler.looked_at[-4:] == [0, 0, 0, 0])
            assert handler.full_requests == 1

            mark = len(handler.looked_at)
            wire.append(tps[7], 3)
            await until("the records replicated", lambda: fetcher.partitions[tps[7]].log.log_end_offset == 3)
            await until("the new offset sent", lambda: any(
                p.fetch_offset == 3 for r in wire.requests for t in r.topics for p in t.fetch_partitions))
            await until("quiet again", lambda: handler.looked_at[-2:] == [0, 0])
            assert max(handler.looked_at[mark:]) == 1 and handler.full_requests == 1
        finally:
            await manager.shutdown()
            rm.begin_shutdown()
            rm.shutdown_executors()
            logs.shutdown()

    asyncio.run(scenario())


def test_a_response_answering_many_partitions_is_appended_in_one_job(tmp_path: Path) -> None:
    """A record into each of 60 partitions comes back in one response; the follower appends all of it in one job of
    the append thread (up to APPEND_CHUNK partitions a job; not a thread hop per partition, which at 30,000
    partitions kept the next fetch 20 s away)."""
    tps = [("m", p) for p in range(60)]

    async def scenario() -> None:
        logs = LogManager([tmp_path / "logs"], broker_id=1)
        logs.startup()
        rm = ReplicaManager(1, logs)
        jobs: list[int] = []
        run_append = rm.run_append

        async def counted(fn: Callable[[], object]) -> object:
            jobs.append(1)
            return await run_append(fn)

        rm.run_append = counted  # type: ignore[assignment,method-assign]
        wire = FakeLeaderWire()
        wire.batches = {tp: [] for tp in tps}
        manager = ReplicaFetcherManager(rm, FetcherSettings(broker_id=1, listener_name="PLAINTEXT",
                                                            fetch_backoff_ms=60_000), lambda: ClusterMetadata())
        fetcher = manager._fetcher(0)
        fetcher._connection = wire.connection  # type: ignore[method-assign,assignment]
        try:
            for topic, partition in tps:
                lg = await rm.become_follower(topic, partition)
                fetcher.add(FollowedPartition(topic, partition, lg, leader=0, leader_epoch=1))

            async def until(what: str, predicate: Callable[[], bool]) -> None:
                deadline = time.monotonic() + 30
                while not predicate():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    await asyncio.sleep(0.01)

            await until("every partition in the session", lambda: len(fetcher.session.partitions) == len(tps))
            for tp in tps:
                wire.append(tp, 2)
            mark = len(jobs)
            await until("everything replicated", lambda: all(
                fetcher.partitions[tp].log.log_end_offset == 2 for tp in tps))
            # The fetch in flight when the records came may answer none of them; the next answers all 60.
            assert len(jobs) - mark <= 2
        finally:
            await manager.shutdown()
            rm.begin_shutdown()
            rm.shutdown_executors()
            logs.shutdown()

    asyncio.run(scenario())


def test_new_empty_partitions_start_fetching_without_a_truncation_job_each(tmp_path: Path) -> None:
    """A new topic's partitions have nothing to truncate: the fetcher does not queue a job on the append thread for
    each (at 100,000 partitions those jobs waited behind the log creations and the fetcher fell a lag window behind)."""
    tps = [("n", p) for p in range(60)]

    async def scenario() -> None:
        logs = LogManager([tmp_path / "logs"], broker_id=1)
        logs.startup()
        rm = ReplicaManager(1, logs)
        jobs: list[int] = []
        run_append = rm.run_append

        async def counted(fn: Callable[[], object]) -> object:
            jobs.append(1)
            return await run_append(fn)

        wire = FakeLeaderWire()
        wire.batches = {tp: [] for tp in tps}
        manager = ReplicaFetcherManager(rm, FetcherSettings(broker_id=1, listener_name="PLAINTEXT",
                                                            fetch_backoff_ms=60_000), lambda: ClusterMetadata())
        try:
            followed = [FollowedPartition(t, p, await rm.become_follower(t, p), leader=0, leader_epoch=1)
                        for t, p in tps]
            rm.run_append = counted  # type: ignore[assignment,method-assign]
            fetcher = manager._fetcher(0)
            fetcher._connection = wire.connection  # type: ignore[method-assign,assignment]
            for fp in followed:
                fetcher.add(fp)
            deadline = time.monotonic() + 30
            while len(fetcher.session.partitions) < len(tps):
                assert time.monotonic() < deadline, "timed out waiting for every partition in the session"
                await asyncio.sleep(0.01)
            assert not any(fp.needs_truncation for fp in followed)
            # No truncation job at all; the full fetch's answer (every partition, nothing in it) is applied in one.
            assert len(jobs) <= 1
        finally:
            await manager.shutdown()
            rm.begin_shutdown()
            rm.shutdown_executors()
            logs.shutdown()

    asyncio.run(scenario())
