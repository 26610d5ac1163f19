"""The follower's side of replication: fetch from each leader, truncate by leader epoch, append as follower.

For every partition this broker is a replica of but does not lead, the :class:`ReplicaFetcherManager` keeps its
log open (``ReplicaManager.follower_logs``) and hands it to the :class:`ReplicaFetcher` of the partition's
leader: one asyncio task and one connection per source broker, as Kafka's ``num.replica.fetchers=1``, fetching
all of that leader's partitions in one Fetch request (v11, ``replica_id`` = our broker id) within an incremental
fetch session (KIP-227, :class:`FetchSessionHandler`): after the first, full, request a quiet partition costs
nothing on the wire either way, which is what lets one fetcher carry thousands of partitions.

A partition that starts following (new replica, or a new leader or leader epoch) first truncates (KIP-101/279):
it asks the leader, with OffsetForLeaderEpoch, where the follower's latest epoch ends in the leader's log and
cuts its own log there, repeating with an older epoch when the leader answers one the follower does not have,
until both agree; a log without any epoch falls back to its high watermark. Only then does it fetch from its
log end offset. Records beyond the leader's high watermark are kept (not truncated to the high watermark as
before KIP-101), so an acknowledged record survives every sequence of leader changes. The follower's high
watermark is the leader's (from each response) capped by its own log end.

A fetch answered NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH and the like means our metadata is behind or ahead
of the leader's: the partition rests for ``replica.fetch.backoff.ms`` and the metadata cache brings the news.
OFFSET_OUT_OF_RANGE below the leader's log start (retention ran while we were away) restarts the log empty at
the leader's log start offset; above its end, it truncates again.

Threads: everything here runs on the event loop; log truncation and appends run on the replica manager's append
thread, in order with everything else that mutates logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import struct
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sofakafka.broker.replica_manager import ReplicaManager, TopicPartition
from sofakafka.broker.replication_quota import (
    FOLLOWER_THROTTLED_REPLICAS,
    UNTHROTTLED,
    ReplicationQuota,
    follower_throttled,
)
from sofakafka.client.errors import AuthenticationError
from sofakafka.client.security import ClientSecurity, SaslLogin
from sofakafka.controller.metadata import ClusterMetadata, PartitionMetadata
from sofakafka.protocol.api import decode_response, encode_request, size_prefixed
from sofakafka.protocol.errors import DecodeError, ErrorCode
from sofakafka.protocol.headers import RequestHeader
from sofakafka.protocol.messages.fetch import FetchRequest, FetchResponse
from sofakafka.protocol.messages.list_offset import ListOffsetRequest, ListOffsetResponse
from sofakafka.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from sofakafka.protocol.schema import Request, Response
from sofakafka.storage.log import Log

log = logging.getLogger(__name__)

FETCH_VERSION = 11
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
LIST_OFFSETS_VERSION = 4
EARLIEST_TIMESTAMP = -2
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
# Rounds of epoch truncation before giving up and truncating to the high watermark: each round moves to an
# older epoch, so more rounds than epochs in a cache never happen with a well-behaved leader.
MAX_TRUNCATION_ROUNDS = 64

_SIZE = struct.Struct(">i")
_BATCH_LENGTH = struct.Struct(">i")
# A v2 batch (and a v0/v1 message) starts with an int64 offset and an int32 length of what follows.
_LOG_OVERHEAD = 12

# Top-level outcomes that only mean "start the session over" (NONE: a response that does not match the
# session): retry at once with a full fetch rather than resting every partition.
_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                             ErrorCode.NONE})

# Errors that mean the leader or its epoch moved: wait for the metadata cache to tell us where.
_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
})


PartitionResponse = FetchResponse.FetchableTopicResponse.FetchablePartitionResponse
# Partitions of one fetch response appended per job of the append thread (see ReplicaFetcher._append_fetched).
APPEND_CHUNK = 64
APPEND_THREADS = 8


def whole_batches(records: bytes | bytearray | memoryview) -> memoryview:
    """The prefix of ``records`` made of whole batches: a fetch may end inside a batch (max_bytes)."""
    view = memoryview(records)
    pos = 0
    n = len(view)
    while pos + _LOG_OVERHEAD <= n:
        end = pos + _LOG_OVERHEAD + _BATCH_LENGTH.unpack_from(view, pos + 8)[0]
        if end > n:
            break
        pos = end
    return view[:pos]


# -- fetch sessions (KIP-227), the follower's side ---------------------------------------------------------------
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    """What one Fetch asks for one partition; a partition whose state equals the session's is left out."""

    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int


@dataclass(frozen=True)
class FetchRequestData:
    """One request's worth of a session: ``to_send`` goes in the request, ``forgotten`` in forgotten_topics_data.

    ``session`` is every partition the leader will fetch for it (``to_send`` for a full request), so a response
    may answer any of them.
    """

    session_id: int
    epoch: int
    to_send: dict[TopicPartition, PartitionFetchState]
    forgotten: list[TopicPartition]
    session: dict[TopicPartition, PartitionFetchState]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """A follower's fetch session with one leader, without I/O: what to send next, and what a response means.

    The first request is full with session id 0 and epoch 0, asking the leader to open a session; while the
    leader keeps it, each request carries only the partitions whose fetch state changed since the previous one
    and names those dropped, and the leader answers only partitions with news. Any failure (a session error, a
    response that does not match the session, a lost connection) falls back to a full request, which also
    closes the old session on the leader; a leader whose cache is full answers with session id 0, and the
    follower keeps fetching in full (asking again each time) until a slot frees. Followers rely on this being
    exact: the leader records every session partition's cached fetch offset as the follower's log end offset,
    so the session must never hold an offset the follower has moved away from (``build`` compares every field
    each time, and a failure never leaves a half-applied request behind).

    The counters say how the session went, for logs and tests.
    """

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._session: dict[TopicPartition, PartitionFetchState] = {}
        self.full_requests = 0
        self.incremental_requests = 0
        self.sessions_opened = 0
        self.empty_incremental_responses = 0

    @property
    def partitions(self) -> Mapping[TopicPartition, PartitionFetchState]:
        return self._session

    def build(self, wanted: Mapping[TopicPartition, PartitionFetchState]) -> FetchRequestData:
        """The request fetching exactly ``wanted``; the session then holds ``wanted`` as sent."""
        if self.epoch == INITIAL_EPOCH:
            self._session = dict(wanted)
            self.full_requests += 1
            return FetchRequestData(self.session_id, self.epoch, dict(wanted), [], dict(wanted))
        to_send = {tp: state for tp, state in wanted.items() if self._session.get(tp) != state}
        forgotten = [tp for tp in self._session if tp not in wanted]
        self._session = dict(wanted)
        self.incremental_requests += 1
        return FetchRequestData(self.session_id, self.epoch, to_send, forgotten, dict(wanted))

    @property
    def needs_full(self) -> bool:
        """The next request must be full (no session yet, or starting over)."""
        return self.epoch == INITIAL_EPOCH

    def build_changes(self, changes: Mapping[TopicPartition, PartitionFetchState | None]) -> FetchRequestData:
        """An incremental request after the partitions of ``changes`` changed (None: no longer fetched); the
        session's other partitions stay as they are. Costs per partition of ``changes``: the caller vouches that
        nothing else changed (``ReplicaFetcher`` notes every partition whose log end it moves). The request's
        ``session`` is the session itself, valid until the next build."""
        if self.needs_full:
            raise ValueError("a full request is built from every partition (build)")
        to_send: dict[TopicPartition, PartitionFetchState] = {}
        forgotten: list[TopicPartition] = []
        session = self._session
        for tp, state in changes.items():
            held = session.get(tp)
            if state is None:
                if held is not None:
                    del session[tp]
                    forgotten.append(tp)
            elif held != state:
                session[tp] = state
                to_send[tp] = state
        self.incremental_requests += 1
        return FetchRequestData(self.session_id, self.epoch, to_send, forgotten, session)

    def handle_response(self, sent: FetchRequestData, error: int, session_id: int,
                        answered: Collection[TopicPartition]) -> bool:
        """Moves the session on; False when the response's partitions must not be used (the next is full)."""
        if error != ErrorCode.NONE:
            log.info("fetch session %d (epoch %d) refused with %s; the next fetch is full", sent.session_id,
                     sent.epoch, ErrorCode(error).name)
            if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._reset(INVALID_SESSION_ID)
            else:
                self._reset(sent.session_id)
            return False
        extra = [tp for tp in answered if tp not in sent.session]
        if sent.full:
            answered_set = set(answered)
            missing = [tp for tp in sent.to_send if tp not in answered_set]
            if extra or missing:
                log.info("full fetch response with partitions not asked for %s or missing %s", extra, missing)
                self._reset(INVALID_SESSION_ID)
                return False
            if session_id == INVALID_SESSION_ID:
                self._reset(INVALID_SESSION_ID)  # no session (a full cache, or sessions off): full again
            else:
                self.sessions_opened += 1
                self.session_id = session_id
                self.epoch = INITIAL_EPOCH + 1
            return True
        if extra:
            log.info("incremental fetch response of session %d with partitions not in it: %s", sent.session_id,
                     extra)
            self._reset(sent.session_id)
            return False
        if session_id == INVALID_SESSION_ID:
            self._reset(INVALID_SESSION_ID)  # the leader closed the session
        else:
            self.epoch = self.epoch + 1 if self.epoch < 0x7FFFFFFF else 1
            if not answered:
                self.empty_incremental_responses += 1
        return True

    def handle_error(self) -> None:
        """The request may or may not have reached the leader: start over, closing the session there."""
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        # Epoch 0 with the old id asks the leader to close that session and open a new one in the same request.
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self._session = {}


class _Connection:
    """One request at a time over an asyncio stream; every call has a deadline."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._correlation_id = 0

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout_s: float,
                   security: ClientSecurity | None = None) -> _Connection:
        """Connect (TLS when the inter-broker listener wants it) and log in (SASL when it wants that)."""
        tls = security.ssl_context if security is not None and security.uses_ssl else None
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls is not None else None),
            timeout_s)
        conn = cls(reader, writer, client_id)
        if security is not None and security.uses_sasl:
            try:
                await conn.authenticate(security, timeout_s)
            except BaseException:
                await conn.close()
                raise
        return conn

    async def authenticate(self, security: ClientSecurity, timeout_s: float) -> None:
        """The SASL login of the inter-broker listener (SaslHandshake and SaslAuthenticate v1)."""
        login = SaslLogin(security, "the leader")
        request: Request | None = login.first_request()
        while request is not None:
            request = login.next_request(await self.send(request, 1, timeout_s))

    async def send(self, request: Request, version: int, timeout_s: float) -> Response:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        header = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                               correlation_id=self._correlation_id, client_id=self._client_id)
        self._writer.write(size_prefixed(encode_request(header, request)))

        async def round_trip() -> Response:
            await self._writer.drain()
            size = _SIZE.unpack(await self._reader.readexactly(4))[0]
            frame = await self._reader.readexactly(size)
            resp_header, body = decode_response(frame, request.API_KEY, version)
            if resp_header.correlation_id != self._correlation_id:
                raise DecodeError(f"correlation id {resp_header.correlation_id}, expected {self._correlation_id}")
            return body

        return await asyncio.wait_for(round_trip(), timeout_s)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()


@dataclass
class FollowedPartition:
    topic: str
    partition: int
    log: Log
    leader: int
    leader_epoch: int
    needs_truncation: bool = True
    resume_at: float = 0.0  # monotonic time before which the partition rests after an error

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class FetcherSettings:
    broker_id: int
    listener_name: str
    fetch_max_bytes: int = 1048576
    fetch_min_bytes: int = 1
    fetch_wait_max_ms: int = 500
    fetch_backoff_ms: int = 1000
    fetch_response_max_bytes: int = 10485760
    socket_timeout_ms: int = 30000
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    follower_throttled_rate: int = UNTHROTTLED  # server.properties; /config/brokers/<id> overrides it
    security: ClientSecurity | None = None  # TLS/SASL of the inter-broker listener


class ReplicaFetcher:
    """Fetches every partition we follow from one leader."""

    def __init__(self, source_broker: int, manager: ReplicaFetcherManager) -> None:
        self.source_broker = source_broker
        self._manager = manager
        self._settings = manager.settings
        self._rm = manager.replica_manager
        self.partitions: dict[TopicPartition, FollowedPartition] = {}
        # What a round looks at, so that a quiet partition costs nothing per fetch here either: the partitions
        # whose fetch state may differ from the session's (added, removed, answered, truncated, rested or back
        # from a rest, held by the throttle or released). Every change of a followed log's end goes through this
        # fetcher (appends, truncations), and each marks its partition here.
        self._pending: set[TopicPartition] = set()
        self._resting: set[TopicPartition] = set()
        self._held: set[TopicPartition] = set()
        # The followed partition each session partition was last sent for (its response is applied to that one).
        self._in_session: dict[TopicPartition, FollowedPartition] = {}
        self._wake = asyncio.Event()
        self._stopping = False
        self._conn: _Connection | None = None
        self.session = FetchSessionHandler()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replica fetcher {source_broker}")

    def add(self, fp: FollowedPartition) -> None:
        self.partitions[fp.tp] = fp
        self._pending.add(fp.tp)
        self._resting.discard(fp.tp)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        if self.partitions.pop(tp, None) is not None:
            self._pending.add(tp)
            self._resting.discard(tp)

    async def stop(self) -> None:
        # The flag as well as the cancel: Python 3.11's asyncio.wait_for returns the result instead of raising
        # when it is cancelled just as what it waits for completes (a fetch answered at that moment, as a
        # stopping leader answers its followers), and _run would then go on, and this await never return.
        self._stopping = True
        self._wake.set()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._disconnect()

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _connection(self) -> _Connection:
        if self._conn is None:
            snap = self._manager.metadata()
            broker = snap.brokers.get(self.source_broker)
            if broker is None:
                raise ConnectionError(f"broker {self.source_broker} is not registered")
            endpoint = snap.endpoint(self.source_broker, self._settings.listener_name) or broker.endpoints[0]
            self._conn = await _Connection.open(endpoint.host or "localhost", endpoint.port,
                                                f"broker-{self._settings.broker_id}-fetcher-{self.source_broker}",
                                                self._settings.socket_timeout_ms / 1000.0, self._settings.security)
        return self._conn

    def _current(self, fp: FollowedPartition) -> bool:
        """Still followed from this leader at this epoch (not replaced while a request was out)."""
        return self.partitions.get(fp.tp) is fp

    def _rest(self, fp: FollowedPartition) -> None:
        fp.resume_at = time.monotonic() + self._settings.fetch_backoff_ms / 1000.0
        self._resting.add(fp.tp)
        self._pending.add(fp.tp)

    def _resume_rested(self) -> float | None:
        """Partitions whose rest is over are fetched again; returns the seconds until the next one's is."""
        if not self._resting:
            return None
        now = time.monotonic()
        soonest: float | None = None
        for tp in list(self._resting):
            fp = self.partitions.get(tp)
            if fp is None or fp.resume_at <= now:
                self._resting.discard(tp)
                self._pending.add(tp)
            elif soonest is None or fp.resume_at - now < soonest:
                soonest = fp.resume_at - now
        return soonest

    def _fetchable(self, fp: FollowedPartition) -> bool:
        return not fp.needs_truncation and fp.tp not in self._resting and fp.tp not in self._held

    async def _run(self) -> None:
        while not self._stopping:
            until_rested = self._resume_rested()
            if not self._pending and not self.session.partitions:
                # Nothing to send and nothing the leader holds for us: wait for a partition (or a rest's end).
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), until_rested)
                continue
            try:
                truncating = [fp for tp in self._pending if (fp := self.partitions.get(tp)) is not None
                              and fp.needs_truncation and tp not in self._resting]
                if truncating:
                    await self._truncate(truncating)
                await self._fetch()
            except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError, DecodeError,
                    AuthenticationError) as exc:
                log.info("replica fetcher from broker %d: %s; retrying in %d ms", self.source_broker,
                         str(exc) or type(exc).__name__, self._settings.fetch_backoff_ms)
                await self._disconnect()
                await asyncio.sleep(self._settings.fetch_backoff_ms / 1000.0)
            except Exception:
                # A log closed under us (topic deletion) or a bug: the fetcher must outlive it, or every
                # partition it carries would silently stop replicating.
                log.exception("replica fetcher from broker %d failed; retrying in %d ms", self.source_broker,
                              self._settings.fetch_backoff_ms)
                await self._disconnect()
                await asyncio.sleep(self._settings.fetch_backoff_ms / 1000.0)

    # -- truncation ------------------------------------------------------------------------------------------------
    async def _truncate(self, partitions: list[FollowedPartition]) -> None:
        asking: dict[TopicPartition, tuple[FollowedPartition, int]] = {}
        for fp in partitions:
            latest = fp.log.leader_epoch_cache.latest_epoch
            if latest is None:
                await self._truncate_to(fp, fp.log.high_watermark)
                fp.needs_truncation = False
            else:
                asking[fp.tp] = (fp, latest)
        rounds = 0
        while asking:
            rounds += 1
            by_topic: dict[str, list[OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition]] = {}
            for (topic, partition), (fp, epoch) in asking.items():
                by_topic.setdefault(topic, []).append(
                    OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                        partition_index=partition, current_leader_epoch=fp.leader_epoch, leader_epoch=epoch))
            request = OffsetForLeaderEpochRequest(
                replica_id=self._settings.broker_id,
                topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])
            conn = await self._connection()
            response = await conn.send(request, OFFSET_FOR_LEADER_EPOCH_VERSION, self._settings.socket_timeout_ms / 1000)
            assert isinstance(response, OffsetForLeaderEpochResponse)
            again: dict[TopicPartition, tuple[FollowedPartition, int]] = {}
            for t in response.topics:
                for p in t.partitions:
                    found = asking.get((t.name, p.partition_index))
                    if found is None or not self._current(found[0]):
                        continue
                    fp = found[0]
                    if p.error_code != ErrorCode.NONE:
                        log.info("%s-%d: OffsetForLeaderEpoch from broker %d failed with %s", fp.topic,
                                 fp.partition, self.source_broker, ErrorCode(p.error_code).name)
                        self._rest(fp)
                        continue
                    next_epoch = await self._apply_epoch_end(fp, p.leader_epoch, p.end_offset)
                    if next_epoch is None or rounds >= MAX_TRUNCATION_ROUNDS:
                        if next_epoch is not None:
                            await self._truncate_to(fp, fp.log.high_watermark)
                        fp.needs_truncation = False
                        log.info("%s-%d: truncated to %d to follow broker %d at epoch %d", fp.topic, fp.partition,
                                 fp.log.log_end_offset, self.source_broker, fp.leader_epoch)
                    else:
                        again[fp.tp] = (fp, next_epoch)
            asking = again

    async def _apply_epoch_end(self, fp: FollowedPartition, leader_epoch: int, leader_end: int) -> int | None:
        """Kafka's truncation rule for one answer; returns the epoch to ask about next, None when done."""
        lg = fp.log
        if leader_end == UNDEFINED_OFFSET:
            await self._truncate_to(fp, lg.high_watermark)
            return None
        if leader_epoch == UNDEFINED_EPOCH:
            await self._truncate_to(fp, leader_end)
            return None
        follower_epoch, follower_end = lg.end_offset_for_epoch(leader_epoch)
        if follower_end == UNDEFINED_OFFSET:
            await self._truncate_to(fp, lg.high_watermark)
            return None
        if follower_epoch != leader_epoch:
            # We do not have the leader's epoch: everything from our next epoch on diverges. Cut there and ask
            # again about the epoch we now end with.
            await self._truncate_to(fp, follower_end)
            latest = lg.leader_epoch_cache.latest_epoch
            if latest is None:
                await self._truncate_to(fp, lg.high_watermark)
                return None
            return latest
        await self._truncate_to(fp, min(leader_end, follower_end))
        return None

    async def _truncate_to(self, fp: FollowedPartition, offset: int) -> None:
        lg = fp.log
        if offset >= lg.log_end_offset and lg.high_watermark <= lg.log_end_offset:
            # Nothing to cut: no hop to the append thread. A new topic's partitions all start here, thousands at
            # once, and a hop each (on a thread busy creating their logs) kept the fetcher from fetching for over
            # a lag window at 100,000 partitions. Only this fetcher moves a followed log's end, so the reads hold.
            return

        def truncate() -> None:
            if offset < lg.log_end_offset:
                lg.truncate_to(max(0, offset))
            if lg.high_watermark > lg.log_end_offset:
                lg.update_high_watermark(lg.log_end_offset)

        await self._rm.run_append(truncate)

    # -- fetch -------------------------------------------------------------------------------------------------------
    def _fetch_state(self, fp: FollowedPartition) -> PartitionFetchState:
        lg = fp.log
        return PartitionFetchState(lg.log_end_offset, lg.log_start_offset, self._settings.fetch_max_bytes,
                                   fp.leader_epoch)

    def _throttled(self) -> set[TopicPartition]:
        """The partitions the follower quota throttles, and the throttle's held set brought up to date (a partition
        held or released is pending). Costs a look at the topic configs unless some topic is throttled."""
        s = self._settings
        snapshot = self._manager.metadata()
        if not any(cfg.get(FOLLOWER_THROTTLED_REPLICAS) for cfg in snapshot.topic_configs.values()):
            throttled: set[TopicPartition] = set()
            held: set[TopicPartition] = set()
        else:
            candidates = [tp for tp, fp in self.partitions.items() if fp.tp not in self._resting]
            throttled, held = follower_throttled(snapshot, s.broker_id, self._manager.follower_quota,
                                                 s.follower_throttled_rate, candidates)
        if held != self._held:
            self._pending.update(held ^ self._held)
            self._held = held
        return throttled

    async def _fetch(self) -> None:
        s = self._settings
        quota = self._manager.follower_quota
        throttled = self._throttled()
        # Partitions still to truncate (added while this round truncated others) are looked at next round again.
        truncating = {tp for tp in self._pending if (fp := self.partitions.get(tp)) is not None
                      and fp.needs_truncation and tp not in self._resting}
        if self.session.needs_full:
            wanted = {tp: self._fetch_state(fp) for tp, fp in self.partitions.items() if self._fetchable(fp)}
            self._in_session = {tp: self.partitions[tp] for tp in wanted}
            if not wanted:
                self._pending = truncating
                if self._held:
                    # Nothing to fetch but held partitions: back off as Kafka's fetcher does, until the rate allows.
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), s.fetch_backoff_ms / 1000.0)
                    self._wake.clear()
                    self._pending.update(self._held)
                return
            data = self.session.build(wanted)
        else:
            changes: dict[TopicPartition, PartitionFetchState | None] = {}
            for tp in self._pending:
                fp = self.partitions.get(tp)
                if fp is not None and self._fetchable(fp):
                    changes[tp] = self._fetch_state(fp)
                    self._in_session[tp] = fp
                else:
                    changes[tp] = None
                    self._in_session.pop(tp, None)
            in_session = self.session.partitions
            if (not truncating and all(tp in self._resting for tp in changes)
                    and sum(1 for tp in changes if tp in in_session) == len(in_session)):
                # Every partition rests: send nothing, as when nothing is ready, rather than empty the session
                # (the leader would close it). They are looked at again once a rest is over.
                now = time.monotonic()
                resumes = [fp.resume_at for tp in self._resting if (fp := self.partitions.get(tp)) is not None]
                delay = min(resumes) - now if resumes else 0.0
                if delay > 0:
                    self._wake.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), delay)
                return
            # A session left empty is closed by the leader (it answers with session id 0), and the full request
            # that follows, with nothing to fetch, is where a fetcher whose partitions are all held backs off.
            data = self.session.build_changes(changes)
        self._pending = truncating
        by_topic: dict[str, list[FetchRequest.FetchableTopic.FetchPartition]] = {}
        for (topic, partition), state in data.to_send.items():
            by_topic.setdefault(topic, []).append(FetchRequest.FetchableTopic.FetchPartition(
                partition_index=partition, current_leader_epoch=state.current_leader_epoch,
                fetch_offset=state.fetch_offset, log_start_offset=state.log_start_offset, max_bytes=state.max_bytes))
        forgotten: dict[str, list[int]] = {}
        for topic, partition in data.forgotten:
            forgotten.setdefault(topic, []).append(partition)
        request = FetchRequest(
            replica_id=s.broker_id, max_wait=s.fetch_wait_max_ms, min_bytes=s.fetch_min_bytes,
            max_bytes=s.fetch_response_max_bytes, isolation_level=0, session_id=data.session_id, epoch=data.epoch,
            topics=[FetchRequest.FetchableTopic(name=t, fetch_partitions=ps) for t, ps in by_topic.items()],
            forgotten=[FetchRequest.ForgottenTopic(name=t, forgotten_partition_indexes=ps)
                       for t, ps in forgotten.items()])
        session_size = len(data.session)
        try:
            conn = await self._connection()
            response = await conn.send(request, FETCH_VERSION, (s.socket_timeout_ms + s.fetch_wait_max_ms) / 1000)
        except BaseException:
            self.session.handle_error()
            self._pending.update(self.partitions)
            raise
        assert isinstance(response, FetchResponse)
        answered = [(t.name, p.partition_index) for t in response.topics for p in t.partitions]
        opened = self.session.sessions_opened
        accepted = self.session.handle_response(data, response.error_code, response.session_id, answered)
        if self.session.sessions_opened != opened:
            log.info("fetch session %d opened with broker %d for %d partitions", self.session.session_id,
                     self.source_broker, session_size)
        if self.session.needs_full:
            self._pending.update(self.partitions)  # the next request is full: every partition is looked at
        if not accepted:
            if response.error_code not in _SESSION_ERRORS:
                # Anything else at the top level is the leader's trouble, not the session's: do not hammer it.
                log.info("fetch from broker %d failed with %s", self.source_broker,
                         ErrorCode(response.error_code).name)
                for fp in list(self._in_session.values()):
                    if self._current(fp):
                        self._rest(fp)
            return
        session = data.session  # what the leader fetched for this request (a reset replaces, never clears, it)
        fetched: list[tuple[FollowedPartition, int, PartitionResponse]] = []
        for t in response.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp in throttled and p.records:
                    quota.record(len(p.records))
                fp = self._in_session.get(tp)
                sent = session.get(tp)
                if fp is None or sent is None or not self._current(fp):
                    continue
                self._pending.add(tp)  # its log end (or its rest) may change now
                offset = sent.fetch_offset
                if p.error_code == ErrorCode.NONE:
                    fetched.append((fp, offset, p))
                    continue
                try:
                    await self._process_error(fp, offset, p)
                except Exception:  # one partition's failure must not stop its neighbours
                    log.exception("%s-%d: processing fetched data from broker %d failed", fp.topic, fp.partition,
                                  self.source_broker)
                    self._rest(fp)
        if fetched:
            await self._append_fetched(fetched)

    async def _append_fetched(self, fetched: list[tuple[FollowedPartition, int, PartitionResponse]]) -> None:
        """The answered partitions' records, high watermarks and log starts in jobs of ``APPEND_CHUNK`` partitions
        on the append thread: a response answering thousands of partitions (a record into each) was a thread hop
        each, and at 30,000 partitions on three brokers the follower took 20 s to get through one response and
        send its next fetch, by which time the leader had dropped it from the ISR of the partitions at the front.
        Not one job for the whole response: the broker's own produce appends queue on the same thread, and a
        first record into thousands of partitions (each opening its segment) held them back for seconds."""
        work = []
        for fp, offset, p in fetched:
            if not self._current(fp):
                continue  # replaced (a new epoch to truncate for) while errors of this response were handled
            try:
                records = whole_batches(p.records) if p.records is not None else memoryview(b"")
            except Exception:  # one partition's failure must not stop its neighbours
                log.exception("%s-%d: data fetched from broker %d is unreadable", fp.topic, fp.partition,
                              self.source_broker)
                self._rest(fp)
                continue
            if records:
                self._rm.metrics.replication_bytes_in += len(records)
            work.append((fp, offset, records, p.high_watermark, p.log_start_offset))
        source = self.source_broker

        def append_one(item: tuple[FollowedPartition, int, memoryview, int, int]) -> bool | None:
            """True: the high watermark moved; None: failed."""
            fp, offset, records, leader_hw, leader_log_start = item
            lg = fp.log
            try:
                if lg.closed or lg.log_end_offset != offset:
                    return False  # truncated, deleted or already appended since this fetch was sent
                hw = lg.high_watermark
                if records:
                    lg.append_as_follower(records)
                if leader_hw >= 0:
                    lg.update_high_watermark(min(leader_hw, lg.log_end_offset))
                if leader_log_start > lg.log_start_offset:
                    lg.maybe_increment_log_start_offset(min(leader_log_start, lg.high_watermark))
                return lg.high_watermark != hw
            except Exception:  # one partition's failure must not stop its neighbours
                log.exception("%s-%d: appending data fetched from broker %d failed", fp.topic, fp.partition, source)
                return None

        pool = self._manager.append_pool

        def append_all(chunk: list[tuple[FollowedPartition, int, memoryview, int, int]]
                       ) -> tuple[list[TopicPartition], list[FollowedPartition]]:
            # The partitions of a chunk are independent logs: appended side by side (a first record into a
            # partition writes its leader-epoch checkpoint with an fsync, and those commit together), while the
            # append thread waits, so nothing else touches these logs meanwhile.
            outcomes = list(pool.map(append_one, chunk)) if len(chunk) > 1 else [append_one(w) for w in chunk]
            moved = [w[0].tp for w, outcome in zip(chunk, outcomes, strict=True) if outcome]
            failed = [w[0] for w, outcome in zip(chunk, outcomes, strict=True) if outcome is None]
            return moved, failed

        moved, failed = [], []
        for start in range(0, len(work), APPEND_CHUNK):
            chunk = work[start:start + APPEND_CHUNK]
            chunk_moved, chunk_failed = await self._rm.run_append(functools.partial(append_all, chunk))
            moved += chunk_moved
            failed += chunk_failed
        for fp in failed:
            if self._current(fp):
                self._rest(fp)
        if moved:
            # Consumers reading from this follower (KIP-392) wait in the fetch purgatory for its high watermark.
            self._rm.partitions_changed(moved)

    async def _process_error(self, fp: FollowedPartition, offset: int, p: PartitionResponse) -> None:
        error = p.error_code
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._handle_out_of_range(fp, offset)
            return
        if error != ErrorCode.NONE:
            if error not in _METADATA_ERRORS:
                log.warning("%s-%d: fetch from broker %d failed with %s", fp.topic, fp.partition,
                            self.source_broker, ErrorCode(error).name)
            self._rest(fp)

    async def _handle_out_of_range(self, fp: FollowedPartition, offset: int) -> None:
        """Our log end is outside the leader's log: below its start (retention ran), or above its end."""
        request = ListOffsetRequest(replica_id=self._settings.broker_id, topics=[
            ListOffsetRequest.ListOffsetTopic(name=fp.topic, partitions=[
                ListOffsetRequest.ListOffsetTopic.ListOffsetPartition(
                    partition_index=fp.partition, current_leader_epoch=fp.leader_epoch,
                    timestamp=EARLIEST_TIMESTAMP)])])
        conn = await self._connection()
        response = await conn.send(request, LIST_OFFSETS_VERSION, self._settings.socket_timeout_ms / 1000)
        assert isinstance(response, ListOffsetResponse)
        earliest = next((p for t in response.topics for p in t.partitions), None)
        if earliest is None or earliest.error_code != ErrorCode.NONE or not self._current(fp):
            self._rest(fp)
            return
        if earliest.offset > offset:
            lg = fp.log
            log.info("%s-%d: log end %d is below the leader's log start %d: starting over there", fp.topic,
                     fp.partition, offset, earliest.offset)
            await self._rm.run_append(lambda: lg.truncate_fully_and_start_at(earliest.offset))
        else:
            fp.needs_truncation = True


class ReplicaFetcherManager:
    """Which partitions we follow and from whom; driven by the metadata cache (loop thread)."""

    def __init__(self, replica_manager: ReplicaManager, settings: FetcherSettings,
                 metadata: Callable[[], ClusterMetadata]) -> None:
        self.replica_manager = replica_manager
        self.settings = settings
        self.metadata = metadata
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._followed: dict[TopicPartition, FollowedPartition] = {}
        self.follower_quota = ReplicationQuota(settings.quota_window_num, settings.quota_window_size_seconds)
        # Threads the fetchers' appends of one response's partitions run on, side by side (see _append_fetched).
        self.append_pool = ThreadPoolExecutor(max_workers=APPEND_THREADS, thread_name_prefix="follower-append")

    @property
    def followed(self) -> Mapping[TopicPartition, FollowedPartition]:
        return self._followed

    async def apply(self, wanted: Mapping[TopicPartition, PartitionMetadata]) -> None:
        """Follow exactly ``wanted`` (partitions we are a replica of and do not lead)."""
        changes: dict[TopicPartition, PartitionMetadata | None] = {tp: None for tp in self._followed if tp not in wanted}
        changes.update(wanted)
        await self.update(changes)

    async def update(self, changes: Mapping[TopicPartition, PartitionMetadata | None]) -> None:
        """Follow each partition of ``changes`` mapped to its metadata (one we are a replica of and do not lead),
        stop following those mapped to None; partitions not in ``changes`` stay as they are. Costs per partition
        of ``changes``, not per partition followed."""
        rm = self.replica_manager
        for tp, p in changes.items():
            if p is None and tp in self._followed:
                await self.stop_following(tp)
        # Logs of partitions followed for the first time are created together (a new topic brings many).
        await rm.open_follower_logs([tp for tp, p in changes.items() if p is not None and tp not in self._followed])
        for tp, p in changes.items():
            if p is None:
                continue
            current = self._followed.get(tp)
            if current is not None and current.leader == p.leader and current.leader_epoch == p.leader_epoch:
                continue
            if current is not None:
                self._detach(current)
            lg = await rm.become_follower(p.topic, p.partition)
            fp = FollowedPartition(p.topic, p.partition, lg, p.leader, p.leader_epoch)
            self._followed[tp] = fp
            rm.follower_epochs[tp] = p.leader_epoch
            if p.leader >= 0:
                log.info("%s-%d: following broker %d at leader epoch %d", p.topic, p.partition, p.leader,
                         p.leader_epoch)
                self._fetcher(p.leader).add(fp)
        for source, fetcher in list(self._fetchers.items()):
            if not fetcher.partitions:
                del self._fetchers[source]
                await fetcher.stop()

    async def stop_following(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` (we lead it now, or it is no longer ours); the log stays with the caller."""
        fp = self._followed.pop(tp, None)
        if fp is not None:
            self._detach(fp)
        self.replica_manager.follower_logs.pop(tp, None)
        self.replica_manager.follower_epochs.pop(tp, None)

    def _detach(self, fp: FollowedPartition) -> None:
        fetcher = self._fetchers.get(fp.leader)
        if fetcher is not None:
            fetcher.remove(fp.tp)

    def _fetcher(self, source: int) -> ReplicaFetcher:
        fetcher = self._fetchers.get(source)
        if fetcher is None:
            fetcher = self._fetchers[source] = ReplicaFetcher(source, self)
        return fetcher

    async def shutdown(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        for fetcher in fetchers:
            await fetcher.stop()
        self.append_pool.shutdown(wait=False)
