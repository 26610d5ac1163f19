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
than what it answers: every partition of the session that is not parked (below) goes to
``ReplicaManager.fetch_messages`` with the fetch offset the session remembers, so the follower's log end offset
and caught-up time are recorded for partitions the request left out (their offset did not change) just as for
those it named. The ISR and the high watermark depend on it; a follower whose quiet partitions went unrecorded
would be dropped from the ISR after ``replica.lag.time.max.ms``.

Idle partitions of a follower's session cost nothing per fetch. Kafka fetches every session partition on every
request, which at tens of thousands of partitions per leader is most of what a Python broker does (three brokers
of 100,000 partitions at replication factor 3 fell behind on partitions nobody wrote to). Here a follower
session *parks* a partition after a fetch that found the follower in the ISR (or being added to it by an ISR
write in flight, which wakes the partition when it ends, whatever its outcome), at the leader's log end, and told
of a high watermark, last stable offset and log start offset that are still current: later fetches of the
session leave it out, and the leader counts the follower caught up as of the session's latest fetch
(``FollowerFetchSession.last_fetch_ms``, the stamp ``Partition.caught_up_ms`` and the ISR shrink consult), which is
Kafka's rule for a follower whose fetch offset is the log end. Anything that could change what a fetch of the
partition answers reaches ``ReplicaManager.add_change_listener`` (an append, a high watermark or log start move,
an epoch or ISR change, leadership lost, a failed log directory), which *unparks* it: its per-partition
caught-up time is set from the session's last fetch, it is fetched again from the next request on, and a fetch
of the session waiting in purgatory is woken and answers it at once (``take_woken``). A partition the follower
names in a request, or forgets, is unparked too. Consumers' sessions park nothing.

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

import contextlib
import itertools
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from sofakafka.broker.replica_manager import (
    FetchPartitionRequest,
    FetchPartitionResult,
    FollowerFetchSession,
    ReplicaManager,
    TopicPartition,
)
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
    def __init__(self, session_id: int, privileged: bool, now_ms: int, replica_id: int = -1) -> None:
        self.id = session_id
        self.privileged = privileged
        self.creation_ms = now_ms
        # The partitions each fetch reads; a follower's session keeps its parked ones in ``parked`` instead.
        self.partitions: OrderedDict[TopicPartition, CachedPartition] = OrderedDict()
        self.parked: dict[TopicPartition, CachedPartition] = {}
        self.epoch = INITIAL_EPOCH + 1  # the epoch the next incremental request must carry
        self.last_used_ms = now_ms
        self.replica_id = replica_id
        self.follower: FollowerFetchSession | None = FollowerFetchSession() if replica_id >= 0 else None
        # Partitions unparked by a change since the current request's context was made (answered by it).
        self.woken: list[TopicPartition] = []

    @property
    def size(self) -> int:
        return len(self.partitions) + len(self.parked)


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

    def take_woken(self) -> list[FetchPartitionRequest]:
        """Parked partitions a change unparked while this request was being served: to be read now (without
        waiting) and answered with it. They are added to the context's ``partitions``."""
        session = self.session
        if session is None or not session.woken:
            return []
        listed = {req.tp for req in self.partitions}
        out = []
        for tp in session.woken:
            cached = session.partitions.get(tp)
            if cached is not None and tp not in listed:
                listed.add(tp)
                out.append(cached.request)
        session.woken.clear()
        self.partitions.extend(out)
        return out


class FetchSessionCache:
    def __init__(self, max_slots: int, *, eviction_ms: int = 120_000,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock = clock_ms or (lambda: time.monotonic_ns() // 1_000_000)
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self._rng = random.Random()
        # Which follower sessions parked each partition (see the module docstring); set by attach().
        self._parked_in: dict[TopicPartition, list[FetchSession]] = {}
        self._rm: ReplicaManager | None = None

    def attach(self, replica_manager: ReplicaManager) -> None:
        """Park idle partitions of follower sessions, unparked by the replica manager's change notifications."""
        self._rm = replica_manager
        replica_manager.add_change_listener(self.partition_changed)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def new_context(self, session_id: int, epoch: int, partitions: Sequence[FetchPartitionRequest],
                    forgotten: Sequence[TopicPartition], *, privileged: bool, replica_id: int = -1) -> FetchContext:
        """``replica_id`` >= 0: a follower's fetch, whose session may park idle partitions (``park_idle``)."""
        now = self._clock()
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._discard(session_id)
            if epoch == FINAL_EPOCH:
                return FetchContext(list(partitions))
            session = self._create(privileged, len(partitions), now, replica_id)
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
            if session.partitions.pop(tp, None) is None and tp in session.parked:
                self._unpark(session, tp)
                session.partitions.pop(tp, None)
        for req in partitions:
            if req.tp in session.parked:
                self._unpark(session, req.tp)
            cached = session.partitions.get(req.tp)
            if cached is None:
                session.partitions[req.tp] = CachedPartition(req)
            else:
                cached.request = req
        if not session.size:
            # Nothing left to remember: the slot is worth more to someone else.
            self._discard(session_id)
            return FetchContext([])
        session.epoch = session.epoch + 1 if session.epoch < 0x7FFFFFFF else 1
        session.last_used_ms = now
        session.woken.clear()
        if session.follower is not None:
            session.follower.news = False
        self._sessions.move_to_end(session_id)
        fetch = [c.request for c in session.partitions.values()]
        return FetchContext(fetch, session.id, session=session, incremental=True)

    # -- parked partitions of follower sessions ------------------------------------------------------------------
    def park_idle(self, ctx: FetchContext, results: Sequence[FetchPartitionResult]) -> int:
        """After a follower's fetch has been answered: park the partitions it need not read again until they change
        (the module docstring says when). Returns how many were parked."""
        session, rm = ctx.session, self._rm
        if session is None or rm is None or session.follower is None or self._sessions.get(session.id) is not session:
            return 0
        replica_id = session.replica_id
        parked = 0
        for req, result in zip(ctx.partitions, results, strict=True):
            if result.error_code != ErrorCode.NONE or result.records:
                continue
            tp = req.tp
            cached = session.partitions.get(tp)
            if cached is None or cached.request is not req:
                continue
            part = rm.get_partition(tp)
            # In the ISR, or being added to it by a write in flight (which then owes it a wake-up, success or
            # not: the ISR manager notifies every partition of its writes): the restart of a broker following
            # tens of thousands of partitions must not have its leaders read each at every fetch while their
            # expansions queue up in ZooKeeper.
            if part is None or replica_id not in part.maximal_isr:
                continue
            lg = part.log
            if (req.fetch_offset != lg.log_end_offset or part.follower_log_end_offsets.get(replica_id) != req.fetch_offset
                    or cached.high_watermark != lg.high_watermark or cached.log_start_offset != lg.log_start_offset
                    or cached.last_stable_offset != lg.last_stable_offset
                    or (req.current_leader_epoch >= 0 and req.current_leader_epoch != part.leader_epoch)):
                continue
            del session.partitions[tp]
            session.parked[tp] = cached
            self._parked_in.setdefault(tp, []).append(session)
            part.park_follower(replica_id, session.follower)
            parked += 1
        return parked

    def partition_changed(self, tp: TopicPartition) -> None:
        """The replica manager's change listener: every session that parked ``tp`` reads it again, and a fetch
        of such a session waiting in purgatory answers now."""
        sessions = self._parked_in.pop(tp, None)
        if not sessions:
            return
        rm = self._rm
        for session in sessions:
            cached = session.parked.pop(tp, None)
            if cached is None:
                continue
            session.partitions[tp] = cached
            session.woken.append(tp)
            follower = session.follower
            assert follower is not None
            part = rm.get_partition(tp) if rm is not None else None
            if part is not None:
                part.unpark_follower(session.replica_id, follower)
            follower.news = True
            if rm is not None:
                rm.fetch_purgatory.check_and_complete(follower)

    def _unpark(self, session: FetchSession, tp: TopicPartition) -> None:
        """``tp`` leaves the parked set of ``session`` (named in a request, forgotten, or the session goes)."""
        cached = session.parked.pop(tp, None)
        if cached is None:
            return
        session.partitions[tp] = cached
        holders = self._parked_in.get(tp)
        if holders is not None:
            with contextlib.suppress(ValueError):
                holders.remove(session)
            if not holders:
                del self._parked_in[tp]
        part = self._rm.get_partition(tp) if self._rm is not None else None
        if part is not None and session.follower is not None:
            part.unpark_follower(session.replica_id, session.follower)

    def _discard(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            for tp in list(session.parked):
                self._unpark(session, tp)

    def parked_partitions(self, session_id: int) -> frozenset[TopicPartition]:
        session = self._sessions.get(session_id)
        return frozenset(session.parked) if session is not None else frozenset()

    def _create(self, privileged: bool, size: int, now: int, replica_id: int = -1) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots and not self._evict_one(privileged, size, now):
            return None
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, now, replica_id)
        self._sessions[session_id] = session
        return session

    def _evict_one(self, privileged: bool, size: int, now: int) -> bool:
        if not self._sessions:
            return False
        oldest = next(iter(self._sessions.values()))
        if now - oldest.last_used_ms > self.eviction_ms:
            self._discard(oldest.id)
            return True
        # Kafka decides whether a session is evictable when it is used, so its age counts up to its last use.
        evictable = [s for s in self._sessions.values()
                     if s.last_used_ms - s.creation_ms > self.eviction_ms or (privileged and not s.privileged)]
        if not evictable:
            return False
        # min() keeps the first of equals: the least recently used, since the dict is in order of use.
        victim = min(evictable, key=lambda s: (s.privileged, s.size))
        # Kafka's key ends with the session id, the newcomer's being 0: an equal newcomer is worth less.
        if (privileged, size) <= (victim.privileged, victim.size):
            return False
        self._discard(victim.id)
        return True

    def _new_id(self) -> int:
        for _ in itertools.count():
            candidate = self._rng.randint(1, 0x7FFFFFFF)
            if candidate not in self._sessions:
                return candidate
        raise AssertionError("unreachable")

    def remove(self, session_id: int) -> None:
        self._discard(session_id)
