"""Incremental fetch sessions (KIP-227): the broker remembers what a fetcher asks for, so it need not repeat it.

A Fetch v7+ request names a session id and an epoch:

* id 0, epoch -1 (FINAL): a full fetch without a session, as before v7;
* id 0 or any id, epoch 0 (INITIAL): a full fetch that opens a new session (closing the named one); the
  response carries the new id, or 0 when the cache has no room;
* id N, epoch -1: close session N, then a full fetch without a session;
* id N, epoch E > 0: an incremental fetch. The request lists only partitions whose fetch offset or limits
  changed, and ``forgotten`` ones to drop; every partition of the session is fetched, and the response lists
  only those with news (records, an error, a moved high watermark, last stable offset or log start offset).
  An unknown id is FETCH_SESSION_ID_NOT_FOUND, an epoch other than the expected one
  INVALID_FETCH_SESSION_EPOCH; the session's epoch advances by one per incremental fetch. Partitions an
  incremental response carried move to the back of the session's order, so a response cut short by
  ``max_bytes`` does not starve the partitions behind it.

A follower's session (``replica_id`` >= 0) is read like a consumer's, but what the leader fetches matters more
than what it answers: every partition of the session goes to ``ReplicaManager.fetch_messages`` with the fetch
offset the session remembers, so the follower's log end offset and caught-up time are recorded for partitions
the request left out (their offset did not change) just as for those it named. The ISR and the high watermark
depend on it; a follower whose quiet partitions went unrecorded would be dropped from the ISR after
``replica.lag.time.max.ms``.

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions. When full, a newcomer makes
room by Kafka's rules: the least recently used session goes if it has been idle longer than ``eviction_ms``
(Kafka's two minutes); otherwise the least valuable evictable session goes if the newcomer is worth at least as
much, value being (privileged, number of partitions) — followers are privileged. A follower may evict any
consumer's session and a privileged one older than ``eviction_ms``; a consumer only sessions older than
``eviction_ms``. Kafka breaks ties by the random session id; here the least recently used goes first. With
no room the fetch proceeds without a session (session id 0), and the fetcher asks again next time. An
incremental fetch that forgets a session's last partition closes the session, as in Kafka.

Everything here runs on the event loop; no locking.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from sofakafka.broker.replica_manager import FetchPartitionRequest, FetchPartitionResult, TopicPartition
from sofakafka.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass(slots=True)
class CachedPartition:
    request: FetchPartitionRequest
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


class FetchSession:
    def __init__(self, session_id: int, privileged: bool, now_ms: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.creation_ms = now_ms
        self.partitions: OrderedDict[TopicPartition, CachedPartition] = OrderedDict()
        self.epoch = INITIAL_EPOCH + 1  # the epoch the next incremental request must carry
        self.last_used_ms = now_ms


@dataclass(slots=True)
class FetchContext:
    """What to fetch for one request and how to shape the response.

    ``error`` is a top-level error (no partitions fetched); ``session_id`` is what the response carries.
    """

    partitions: list[FetchPartitionRequest]
    session_id: int = INVALID_SESSION_ID
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    incremental: bool = False

    def response_partitions(self, results: Sequence[FetchPartitionResult],
                            must_answer: Collection[TopicPartition] = ()
                            ) -> list[tuple[FetchPartitionRequest, FetchPartitionResult]]:
        """Pair requests with results, updating the session's view; incremental fetches keep only news.

        ``must_answer``: partitions with something to say that the result does not show (a preferred read
        replica, KIP-392).
        """
        pairs = list(zip(self.partitions, results, strict=True))
        if self.session is None:
            return pairs
        out: list[tuple[FetchPartitionRequest, FetchPartitionResult]] = []
        for req, result in pairs:
            cached = self.session.partitions.get(req.tp)
            if cached is None:
                out.append((req, result))
                continue
            changed = False
            if result.error_code == ErrorCode.NONE:
                if cached.high_watermark != result.high_watermark:
                    cached.high_watermark = result.high_watermark
                    changed = True
                if cached.last_stable_offset != result.last_stable_offset:
                    cached.last_stable_offset = result.last_stable_offset
                    changed = True
                if cached.log_start_offset != result.log_start_offset:
                    cached.log_start_offset = result.log_start_offset
                    changed = True
            else:
                # Forget the high watermark sent, as Kafka does, so the partition is answered again once the
                # error clears even if nothing else moved: a follower that rested on the error learns it is over.
                cached.high_watermark = -1
            if (not self.incremental or changed or result.records or result.error_code != ErrorCode.NONE
                    or req.tp in must_answer):
                out.append((req, result))
                if self.incremental:
                    # Partitions that just got answered go to the back, so when the response's max_bytes cuts
                    # a fetch short the next one starts with the partitions that were left out (Kafka does so).
                    self.session.partitions.move_to_end(req.tp)
        return out


class FetchSessionCache:
    def __init__(self, max_slots: int, *, eviction_ms: int = 120_000,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock = clock_ms or (lambda: time.monotonic_ns() // 1_000_000)
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self._rng = random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def new_context(self, session_id: int, epoch: int, partitions: Sequence[FetchPartitionRequest],
                    forgotten: Sequence[TopicPartition], *, privileged: bool) -> FetchContext:
        now = self._clock()
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH:
                return FetchContext(list(partitions))
            session = self._create(privileged, len(partitions), now)
            if session is None:
                return FetchContext(list(partitions))
            for req in partitions:
                session.partitions[req.tp] = CachedPartition(req)
            return FetchContext(list(partitions), session.id, session=session)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext([], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            return FetchContext([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for req in partitions:
            cached = session.partitions.get(req.tp)
            if cached is None:
                session.partitions[req.tp] = CachedPartition(req)
            else:
                cached.request = req
        if not session.partitions:
            # Nothing left to remember: the slot is worth more to someone else.
            del self._sessions[session_id]
            return FetchContext([])
        session.epoch = session.epoch + 1 if session.epoch < 0x7FFFFFFF else 1
        session.last_used_ms = now
        self._sessions.move_to_end(session_id)
        fetch = [c.request for c in session.partitions.values()]
        return FetchContext(fetch, session.id, session=session, incremental=True)

    def _create(self, privileged: bool, size: int, now: int) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots and not self._evict_one(privileged, size, now):
            return None
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, now)
        self._sessions[session_id] = session
        return session

    def _evict_one(self, privileged: bool, size: int, now: int) -> bool:
        if not self._sessions:
            return False
        oldest = next(iter(self._sessions.values()))
        if now - oldest.last_used_ms > self.eviction_ms:
            del self._sessions[oldest.id]
            return True
        # Kafka decides whether a session is evictable when it is used, so its age counts up to its last use.
        evictable = [s for s in self._sessions.values()
                     if s.last_used_ms - s.creation_ms > self.eviction_ms or (privileged and not s.privileged)]
        if not evictable:
            return False
        # min() keeps the first of equals: the least recently used, since the dict is in order of use.
        victim = min(evictable, key=lambda s: (s.privileged, len(s.partitions)))
        # Kafka's key ends with the session id, the newcomer's being 0: an equal newcomer is worth less.
        if (privileged, size) <= (victim.privileged, len(victim.partitions)):
            return False
        del self._sessions[victim.id]
        return True

    def _new_id(self) -> int:
        for _ in itertools.count():
            candidate = self._rng.randint(1, 0x7FFFFFFF)
            if candidate not in self._sessions:
                return candidate
        raise AssertionError("unreachable")

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)
