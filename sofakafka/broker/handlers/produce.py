"""Produce (API key 0), versions 0-8.

Appends each partition's record data through the replica manager: validation on batch headers
(CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE against the topic's ``max.message.bytes``,
RECORD_LIST_TOO_LARGE above ``segment.bytes``, UNSUPPORTED_COMPRESSION_TYPE for zstd below v7), v0/v1
message sets converted to one v2 batch for storage, offsets assigned in place. acks=1 answers after the
leader's append, acks=-1 after the high watermark passes the appended offsets (through the produce
purgatory), acks=0 sends no response at all, as Kafka does, and closes the connection when a partition failed (the only
signal such a client gets); any other acks value is INVALID_REQUIRED_ACKS. Clients may
not write to the internal topics (INVALID_TOPIC_EXCEPTION), except Kafka's ``__admin_client``; the produce audit's
topic only the brokers' audit writer writes (with an authorizer, only as a principal with CLUSTER_ACTION). With ``sofakafka.produce.audit.enable`` the partitions appended are
handed to the audit writer (sofakafka/broker/audit_writer.py) right after the append.

Transactions, beyond 2.6 (KIP-890's verification, ``transaction.partition.verification.enable``, on by default): a
transactional batch that would open a transaction on a partition (its producer has none open there at that epoch)
is accepted only once the transactional id's coordinator confirms the partition is in the producer's ongoing
transaction. A partition that was never added (or whose transaction already ended) is refused with
INVALID_TXN_STATE, so no late or stray write can open a transaction nobody will ever end and hold the last stable
offset back; when the coordinator cannot answer (moving, loading, the transaction completing) the answer is the
retriable NOT_ENOUGH_REPLICAS, as in Kafka 3.6.

Authorization (Kafka 2.6's checks, with an authorizer): transactional batches need WRITE on the transactional
id (else the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), idempotent ones IDEMPOTENT_WRITE on the
cluster (else CLUSTER_AUTHORIZATION_FAILED), and each topic WRITE (else TOPIC_AUTHORIZATION_FAILED for its
partitions, checked before whether the topic exists).

Version notes: v2+ carries ``log_append_time_ms`` (-1 unless the topic uses LogAppendTime), v3+ the
transactional id and exactly one v2 batch per partition, v5+ ``log_start_offset``, v8 per-record errors
(``record_errors``) and an error message.

Quotas: the request's size counts against the client's ``producer_byte_rate`` and its handling time against
``request_percentage`` (not for acks=0); the records are appended either way, and the response carries the
throttle time, the connection muting itself for it (KIP-219; before v6 the response itself waits).
"""

from __future__ import annotations

from collections.abc import Sequence

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.replica_manager import AppendedCallback, ProducePartitionResult, TopicPartition
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import CorruptRecordError, ErrorCode
from sofakafka.protocol.messages.produce import ProduceRequest, ProduceResponse
from sofakafka.protocol.produce_audit import AUDIT_TOPIC, AUDIT_WRITER_CLIENT_ID
from sofakafka.protocol.records import Buffer, read_batch_header
from sofakafka.protocol.records.header import MAGIC_V2, peek_batch_header
from sofakafka.security.quotas import PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse
RecordError = PartitionResponse.BatchIndexAndErrorMessage

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# Kafka lets only its admin tooling write to internal topics directly; coordinators append without a request.
ADMIN_CLIENT_ID = "__admin_client"


def produce_error_response(request: ProduceRequest, version: int, code: int) -> ProduceResponse | None:
    if request.acks == 0:
        return None
    return ProduceResponse(responses=[
        TopicResponse(name=t.name, partitions=[PartitionResponse(partition_index=p.partition_index, error_code=code,
                                                                 base_offset=-1) for p in t.partitions])
        for t in request.topics])


def _producer_kind(request: ProduceRequest) -> tuple[bool, bool]:
    """(has transactional batches, has idempotent batches), from the first batch of each partition."""
    transactional = idempotent = False
    for topic in request.topics:
        for p in topic.partitions:
            if not p.records:
                continue
            try:
                header = peek_batch_header(p.records)
            except CorruptRecordError:
                continue  # the append reports it
            if header is None or header.magic != MAGIC_V2:
                continue
            transactional |= header.is_transactional
            idempotent |= header.producer_id >= 0
    return transactional, idempotent


def _refuse_all(ctx: RequestContext, request: ProduceRequest, code: ErrorCode) -> ProduceResponse | None:
    response = produce_error_response(request, ctx.api_version, code)
    if response is None:  # acks=0: closing is the only answer the client gets
        ctx.close_connection(f"acks=0 produce refused: {code.name}")
    return response


def _record_quotas(ctx: RequestContext, request: ProduceRequest) -> None:
    """The request's bytes against ``producer_byte_rate`` and (unless acks=0) its time against
    ``request_percentage``; the larger throttle wins (broker/client_quotas.py)."""
    quotas = ctx.broker.client_quotas
    now = quotas.now_ms()
    bandwidth = quotas.record(PRODUCER_BYTE_RATE, ctx.principal, ctx.client_id, ctx.request_size, now)
    request_time = (0 if request.acks == 0 else
                    quotas.record_request_time(ctx.principal, ctx.client_id, ctx.handler_seconds[0], now))
    ctx.quota_done = True
    ctx.throttle_ms = max(ctx.throttle_ms, bandwidth, request_time)
    if bandwidth > request_time:
        quotas.throttle(PRODUCER_BYTE_RATE, ctx.principal, ctx.client_id, bandwidth, now)
    else:
        quotas.throttle(REQUEST_PERCENTAGE, ctx.principal, ctx.client_id, request_time, now)


@handles(ApiKey.PRODUCE, 0, 8, error_response=produce_error_response)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    version = ctx.api_version
    entries: list[tuple[TopicPartition, Buffer | None]] = []
    refused: dict[TopicPartition, ProducePartitionResult] = {}
    internal_allowed = ctx.client_id == ADMIN_CLIENT_ID
    # The brokers' audit writer, by its client id; with an authorizer only a principal with CLUSTER_ACTION (the
    # brokers' own) may claim to be it, so a client cannot forge the trace by borrowing the id.
    audit_writer = ctx.client_id == AUDIT_WRITER_CLIENT_ID and (
        not authz.enabled(ctx) or authz.authorize_cluster(ctx, authz.AclOperation.CLUSTER_ACTION))
    writable: set[str] | None = None
    if authz.enabled(ctx):
        transactional, idempotent = _producer_kind(request)
        if transactional:
            txn_id = request.transactional_id
            if txn_id is None or not authz.authorize(ctx, authz.AclOperation.WRITE,
                                                     authz.ResourceType.TRANSACTIONAL_ID, txn_id):
                return _refuse_all(ctx, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif idempotent and not authz.authorize_cluster(ctx, authz.AclOperation.IDEMPOTENT_WRITE):
            return _refuse_all(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        writable = authz.authorized_names(ctx, authz.AclOperation.WRITE, authz.ResourceType.TOPIC,
                                          (t.name for t in request.topics))
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if writable is not None and topic.name not in writable:
                refused[tp] = ProducePartitionResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif (topic.name in INTERNAL_TOPICS and not internal_allowed) or (
                    topic.name == AUDIT_TOPIC and not (audit_writer or internal_allowed)):
                refused[tp] = ProducePartitionResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                     error_message=f"Cannot append to internal topic {topic.name}")
            else:
                entries.append((tp, p.records))
    verified: dict[TopicPartition, object] = {}
    if request.transactional_id is not None and entries and ctx.broker.replica_manager.txn_verification:
        verified, unverified = await _verify_transactional(ctx, request.transactional_id, entries)
        refused.update(unverified)
        entries = [(tp, records) for tp, records in entries if tp not in unverified]
    audit = ctx.broker.produce_audit
    on_appended: AppendedCallback | None = None
    if audit is not None:
        transactional_id = request.transactional_id if version >= 3 else None

        def on_appended(appended: Sequence[tuple[TopicPartition, Buffer | None]],
                        results: dict[TopicPartition, ProducePartitionResult]) -> None:
            audit.record(client_id=ctx.client_id, client_host=ctx.client_host, api_version=version,
                         transactional_id=transactional_id, entries=appended, results=results,
                         principal=ctx.principal)

    results = await ctx.broker.replica_manager.append_records(
        acks=request.acks,
        timeout_ms=request.timeout_ms,
        entries=entries,
        produce_version=version,
        verified=verified,
        on_appended=on_appended,
    ) if entries else {}
    results.update(refused)
    _record_quotas(ctx, request)
    if request.acks == 0:
        failed = sorted(f"{t}-{p}: {ErrorCode.for_code(r.error_code).name}" for (t, p), r in results.items()
                        if r.error_code != ErrorCode.NONE)
        if failed:
            # The client expects no answer, so the only way to tell it is to close: it then refreshes its
            # metadata and finds out, as with Kafka.
            ctx.close_connection(f"acks=0 produce failed for {', '.join(failed)}")
        return None
    responses: dict[str, list[PartitionResponse]] = {}
    for (topic_name, partition), r in results.items():
        error = r.error_code
        if error == ErrorCode.KAFKA_STORAGE_ERROR and version <= 3:
            # Clients of v3 and older do not know KAFKA_STORAGE_ERROR and would give up; Kafka answers them
            # with a retriable code that makes them refresh metadata.
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        pr = PartitionResponse(
            partition_index=partition,
            error_code=error,
            base_offset=r.base_offset,
            log_append_time_ms=r.log_append_time,
            log_start_offset=r.log_start_offset,
        )
        if version >= 8:
            pr.record_errors = [RecordError(batch_index=i, batch_index_error_message=m) for i, m in r.record_errors]
            pr.error_message = r.error_message if error != ErrorCode.NONE else None
        responses.setdefault(topic_name, []).append(pr)
    return ProduceResponse(responses=[TopicResponse(name=n, partitions=ps) for n, ps in responses.items()])


# What the coordinator's verification answers become for the producer (Kafka 3.6's ReplicaManager mapping): not
# verified yet for a passing reason is NOT_ENOUGH_REPLICAS, which every client retries.
_RETRIABLE_VERIFICATION = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                     ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                     ErrorCode.NETWORK_EXCEPTION, ErrorCode.BROKER_NOT_AVAILABLE,
                                     ErrorCode.REQUEST_TIMED_OUT})


async def _verify_transactional(ctx: RequestContext, transactional_id: str,
                                entries: list[tuple[TopicPartition, Buffer | None]]
                                ) -> tuple[dict[TopicPartition, object], dict[TopicPartition, ProducePartitionResult]]:
    """Ask the coordinator about the partitions where a transactional batch would open a transaction; the tokens
    of those it confirmed, and the refusals of the rest."""
    rm = ctx.broker.replica_manager
    asks: dict[tuple[int, int], list[tuple[TopicPartition, object]]] = {}
    for tp, records in entries:
        if records is None:
            continue
        try:
            header = read_batch_header(records, 0)
        except CorruptRecordError:
            continue  # the append's validation answers it
        if header is None or not header.is_transactional or header.producer_id < 0:
            continue
        if not rm.needs_txn_verification(tp, header.producer_id, header.producer_epoch):
            continue
        # The guard is taken before asking: a marker that lands meanwhile removes it and the append is refused.
        token = rm.txn_verification_token(tp, header.producer_id)
        if token is not None:
            asks.setdefault((header.producer_id, header.producer_epoch), []).append((tp, token))
    verified: dict[TopicPartition, object] = {}
    refused: dict[TopicPartition, ProducePartitionResult] = {}
    for (producer_id, producer_epoch), wanted in asks.items():
        answers = await ctx.broker.transaction_runtime.verify(transactional_id, producer_id, producer_epoch,
                                                               [tp for tp, _ in wanted])
        for tp, token in wanted:
            code = answers.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            if code is ErrorCode.NONE:
                verified[tp] = token
                continue
            rm.drop_txn_verification(tp, producer_id, token)
            if code is ErrorCode.INVALID_TXN_STATE:
                refused[tp] = ProducePartitionResult(code, error_message="Partition was not added to the transaction")
            elif code in _RETRIABLE_VERIFICATION:
                refused[tp] = ProducePartitionResult(
                    ErrorCode.NOT_ENOUGH_REPLICAS, error_message="Unable to verify the partition has been added to "
                    f"the transaction. Underlying error: {code.name}")
            else:
                refused[tp] = ProducePartitionResult(code, error_message=f"transaction verification: {code.name}")
    return verified, refused
