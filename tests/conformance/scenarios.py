"""The requests the conformance suite sends, per API key: usual paths and error paths, at every version.

Each scenario takes a :class:`Session` and the versions to cover, and sends the same requests whatever the
broker: topic names are the same on both brokers (each broker is a fresh process of its own), batches are
built with fixed timestamps, so the two brokers see byte-identical requests.
"""

from __future__ import annotations

from collections.abc import Callable

from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from sofakafka.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from sofakafka.protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from sofakafka.protocol.messages.alter_configs import AlterConfigsRequest
from sofakafka.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from sofakafka.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest
from sofakafka.protocol.messages.create_acls import CreateAclsRequest
from sofakafka.protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from sofakafka.protocol.messages.create_partitions import CreatePartitionsRequest
from sofakafka.protocol.messages.create_topics import CreateTopicsRequest
from sofakafka.protocol.messages.delete_acls import DeleteAclsRequest
from sofakafka.protocol.messages.delete_groups import DeleteGroupsRequest
from sofakafka.protocol.messages.delete_records import DeleteRecordsRequest
from sofakafka.protocol.messages.delete_topics import DeleteTopicsRequest
from sofakafka.protocol.messages.describe_acls import DescribeAclsRequest
from sofakafka.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from sofakafka.protocol.messages.describe_configs import DescribeConfigsRequest
from sofakafka.protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest
from sofakafka.protocol.messages.describe_groups import DescribeGroupsRequest
from sofakafka.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from sofakafka.protocol.messages.elect_leaders import ElectLeadersRequest
from sofakafka.protocol.messages.end_txn import EndTxnRequest
from sofakafka.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest
from sofakafka.protocol.messages.heartbeat import HeartbeatRequest
from sofakafka.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from sofakafka.protocol.messages.init_producer_id import InitProducerIdRequest
from sofakafka.protocol.messages.join_group import JoinGroupRequest
from sofakafka.protocol.messages.leave_group import LeaveGroupRequest
from sofakafka.protocol.messages.list_groups import ListGroupsRequest
from sofakafka.protocol.messages.list_offset import ListOffsetRequest
from sofakafka.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from sofakafka.protocol.messages.metadata import MetadataRequest
from sofakafka.protocol.messages.offset_commit import OffsetCommitRequest
from sofakafka.protocol.messages.offset_delete import OffsetDeleteRequest
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest
from sofakafka.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from sofakafka.protocol.messages.produce import ProduceRequest
from sofakafka.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest
from sofakafka.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from sofakafka.protocol.messages.sasl_handshake import SaslHandshakeRequest
from sofakafka.protocol.messages.sync_group import SyncGroupRequest
from sofakafka.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from sofakafka.protocol.records import Record, build_batch, build_message_set
from tests.conformance.compare import Session

BASE_TS = 1_600_000_000_000
Scenario = Callable[[Session, range], None]
SCENARIOS: dict[int, Scenario] = {}


def scenario(key: ApiKey) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[key] = fn
        return fn
    return register


# ---- shared steps (not recorded unless they are the API under test) --------------------------------------

def create_topic(s: Session, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    T = CreateTopicsRequest.CreatableTopic
    C = T.CreateableTopicConfig
    s.ask(CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions, replication_factor=1,
                                        configs=[C(name=k, value=v) for k, v in (configs or {}).items()])],
                              timeout_ms=30000), 2)
    wait_for_leaders(s, name, partitions)


def wait_for_leaders(s: Session, name: str, partitions: int) -> None:
    def ready() -> bool:
        r = s.ask(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                  allow_auto_topic_creation=False), 4)
        (t,) = r.topics
        return t.error_code == 0 and len(t.partitions) == partitions and all(p.leader_id >= 0 for p in t.partitions)
    s.wait(f"leaders of {name}", ready)


def wait_for_coordinator(s: Session, group: str) -> None:
    """The group's coordinator is ready (the offsets topic exists and its partition is loaded): a client
    retries until then; the comparison starts after it."""
    s.wait(f"the coordinator of {group}", lambda: s.ask(FindCoordinatorRequest(key=group, key_type=0), 1).error_code == 0)
    s.wait(f"the coordinator of {group} to have loaded its groups",
           lambda: s.ask(OffsetFetchRequest(group_id=group, topics=None), 2).error_code == 0)


def wait_for_txn_coordinator(s: Session, transactional_id: str) -> None:
    """The id's transaction coordinator is ready: ``__transaction_state`` exists (the first FindCoordinator
    creates it) and the id's partition is loaded. An EndTxn for a producer id the coordinator does not have for
    the id changes nothing and answers INVALID_PRODUCER_ID_MAPPING only once the partition is loaded."""
    s.wait(f"the transaction coordinator of {transactional_id}",
           lambda: s.ask(FindCoordinatorRequest(key=transactional_id, key_type=1), 1).error_code == 0)
    s.wait(f"the transaction coordinator of {transactional_id} to have loaded its ids",
           lambda: s.ask(EndTxnRequest(transactional_id=transactional_id, producer_id=-1, producer_epoch=0,
                                       committed=False), 0).error_code == INVALID_PRODUCER_ID_MAPPING)


def v2_batch(n: int = 3, first: int = 0, base: int = 0, **settings: object) -> bytes:
    return build_batch([Record(offset=base + i, timestamp=BASE_TS + first + i, key=f"k{first + i}".encode(),
                               value=f"v{first + i}".encode()) for i in range(n)], **settings)


def message_set(magic: int, n: int = 3, first: int = 0) -> bytes:
    return build_message_set([Record(offset=i, timestamp=BASE_TS + first + i if magic else -1,
                                     key=f"k{first + i}".encode(), value=f"v{first + i}".encode()) for i in range(n)],
                             magic=magic)


def records_for(version: int, n: int = 3, first: int = 0) -> bytes:
    """What a producer of that Produce version sends: v0-1 message sets magic 0, v2 magic 1, v3+ batches."""
    if version <= 1:
        return message_set(0, n, first)
    if version == 2:
        return message_set(1, n, first)
    return v2_batch(n, first)


def produce(s: Session, topic: str, records: bytes, version: int, *, partition: int = 0, acks: int = -1,
            label: str | None = None) -> None:
    P = ProduceRequest.TopicProduceData
    req = ProduceRequest(acks=acks, timeout_ms=30000, topics=[
        P(name=topic, partitions=[P.PartitionProduceData(partition_index=partition, records=records)])])
    if label is None:
        s.ask(req, version)
    else:
        s.call(label, req, version)


# ---- one scenario per API key ------------------------------------------------------------------------------

@scenario(ApiKey.API_VERSIONS)
def api_versions(s: Session, versions: range) -> None:
    for v in versions:
        s.call("versions", ApiVersionsRequest(client_software_name="conformance", client_software_version="1.0"), v)
    s.call("v3 without client software name", ApiVersionsRequest(), 3)


@scenario(ApiKey.METADATA)
def metadata(s: Session, versions: range) -> None:
    create_topic(s, "md", 2)
    T = MetadataRequest.MetadataRequestTopic
    for v in versions:
        auto = v < 4  # before v4 a topic is always auto-created (and the field does not exist)
        s.call("one topic", MetadataRequest(topics=[T(name="md")], allow_auto_topic_creation=auto), v)
        if v >= 4:
            s.call("unknown topic", MetadataRequest(topics=[T(name="no-such-topic")], allow_auto_topic_creation=False), v)
        s.call("invalid topic name", MetadataRequest(topics=[T(name="bad/name")], allow_auto_topic_creation=auto), v)
        if v >= 1:
            s.call("no topics", MetadataRequest(topics=[], allow_auto_topic_creation=auto), v)
        if v >= 8:
            s.call("authorized operations", MetadataRequest(topics=[T(name="md")], allow_auto_topic_creation=False,
                                                            include_cluster_authorized_operations=True,
                                                            include_topic_authorized_operations=True), v)
    if versions.stop > 4:
        s.call("auto-create", MetadataRequest(topics=[T(name="md-auto")], allow_auto_topic_creation=True), 4)


@scenario(ApiKey.PRODUCE)
def produce_scenario(s: Session, versions: range) -> None:
    create_topic(s, "pr", 1)
    create_topic(s, "pr-small", 1, {"max.message.bytes": "200"})
    for v in versions:
        produce(s, "pr", records_for(v), v, label="append")
        produce(s, "pr", records_for(v), v, label="acks=1", acks=1)
        produce(s, "pr", records_for(v), v, label="unknown partition", partition=7)
        produce(s, "pr-unknown", records_for(v), v, label="unknown topic")
        produce(s, "pr", records_for(v), v, label="invalid acks", acks=2)
        big = records_for(v, n=1) if v < 3 else build_batch([Record(offset=0, timestamp=BASE_TS, key=None,
                                                                    value=b"x" * 400)])
        if v < 3:
            big = build_message_set([Record(offset=0, timestamp=BASE_TS if v == 2 else -1, key=None,
                                            value=b"x" * 400)], magic=0 if v < 2 else 1)
        produce(s, "pr-small", big, v, label="record larger than max.message.bytes")
        corrupt = bytearray(records_for(v))
        corrupt[-1] ^= 0xFF  # last byte of the last record: the CRC no longer matches
        produce(s, "pr", bytes(corrupt), v, label="corrupt CRC")
    if versions.stop > 3:
        bad_offsets = v2_batch(3, base=5)  # a producer must send base offset 0
        produce(s, "pr", bad_offsets, 3, label="v2 batch with non-zero base offset")
        produce(s, "pr", v2_batch(3, producer_id=99999, producer_epoch=0, base_sequence=0), 3,
                label="idempotent batch of an unknown producer id")


@scenario(ApiKey.FETCH)
def fetch(s: Session, versions: range) -> None:
    create_topic(s, "fe", 1)
    produce(s, "fe", v2_batch(3), 3)
    produce(s, "fe", v2_batch(2, first=3), 3)
    F = FetchRequest.FetchableTopic
    P = F.FetchPartition

    def req(topic: str, partition: int, offset: int, session_id: int = 0, epoch: int = -1) -> FetchRequest:
        return FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                            session_id=session_id, epoch=epoch, topics=[F(name=topic, fetch_partitions=[
                                P(partition_index=partition, fetch_offset=offset, log_start_offset=-1,
                                  max_bytes=1 << 20, current_leader_epoch=-1)])])
    for v in versions:
        s.call("from 0", req("fe", 0, 0), v)
        s.call("from the middle", req("fe", 0, 4), v)
        s.call("at the end", req("fe", 0, 5), v)
        s.call("out of range", req("fe", 0, 50), v)
        s.call("unknown partition", req("fe", 9, 0), v)
        s.call("unknown topic", req("fe-unknown", 0, 0), v)
        if v >= 7:
            s.call("unknown session", req("fe", 0, 0, session_id=12345, epoch=1), v)
        if v >= 9:
            fenced = req("fe", 0, 0)
            fenced.topics[0].fetch_partitions[0].current_leader_epoch = 5
            s.call("future leader epoch", fenced, v)


@scenario(ApiKey.LIST_OFFSETS)
def list_offsets(s: Session, versions: range) -> None:
    create_topic(s, "lo", 1)
    produce(s, "lo", v2_batch(3), 3)
    produce(s, "lo", v2_batch(3, first=10), 3)
    T = ListOffsetRequest.ListOffsetTopic
    P = T.ListOffsetPartition
    for v in versions:
        for label, ts in (("latest", -1), ("earliest", -2), ("by time, exact", BASE_TS + 1),
                          ("by time, between", BASE_TS + 5), ("by time, after all", BASE_TS + 100)):
            if v == 0 and ts >= 0:
                continue
            s.call(label, ListOffsetRequest(replica_id=-1, topics=[T(name="lo", partitions=[
                P(partition_index=0, timestamp=ts, max_num_offsets=1 if v == 0 else 0)])]), v)
        s.call("unknown partition", ListOffsetRequest(replica_id=-1, topics=[T(name="lo", partitions=[
            P(partition_index=4, timestamp=-1, max_num_offsets=1 if v == 0 else 0)])]), v)
        if v >= 4:
            s.call("fenced leader epoch", ListOffsetRequest(replica_id=-1, topics=[T(name="lo", partitions=[
                P(partition_index=0, timestamp=-1, current_leader_epoch=7)])]), v)


def _join(s: Session, v: int, group: str, label: str, member_id: str = "", instance: str | None = None):  # type: ignore[no-untyped-def]
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return s.call(label, JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                          member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                                          protocols=[P(name="range", metadata=b"\x00\x01meta")]), v)


@scenario(ApiKey.JOIN_GROUP)
def groups(s: Session, versions: range) -> None:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit/Fetch, DescribeGroups as one member's life."""
    for v in versions:
        group = f"grp-v{v}"
        wait_for_coordinator(s, group)
        wait_for_coordinator(s, group + "-static")
        r = _join(s, v, group, "first join")
        member = r.member_id
        if r.error_code == 79:  # MEMBER_ID_REQUIRED (v4+)
            r = _join(s, v, group, "join with the member id", member)
        generation = r.generation_id
        sv = min(v, 5) if v >= 3 else min(v, 2)
        A = SyncGroupRequest.SyncGroupRequestAssignment
        s.call(f"sync (JoinGroup v{v})", SyncGroupRequest(group_id=group, generation_id=generation, member_id=member,
                                                          protocol_type="consumer", protocol_name="range",
                                                          assignments=[A(member_id=member, assignment=b"\x00\x01a")]), sv)
        hv = min(v, 4)
        s.call(f"heartbeat (JoinGroup v{v})", HeartbeatRequest(group_id=group, generation_id=generation,
                                                               member_id=member), hv)
        s.call(f"heartbeat, wrong generation (JoinGroup v{v})",
               HeartbeatRequest(group_id=group, generation_id=generation + 5, member_id=member), hv)
        s.call(f"heartbeat, unknown member (JoinGroup v{v})",
               HeartbeatRequest(group_id=group, generation_id=generation, member_id="nobody"), hv)
        s.call(f"describe (JoinGroup v{v})", DescribeGroupsRequest(groups=[group, "no-such-group"]), min(v, 5))
        if v >= 5:
            _join(s, v, group + "-static", "static member join", instance="instance-1")
        lv = min(v, 4)
        if lv >= 3:
            M = LeaveGroupRequest.MemberIdentity
            s.call(f"leave (JoinGroup v{v})", LeaveGroupRequest(group_id=group, members=[
                M(member_id=member), M(member_id="nobody")]), lv)
        else:
            s.call(f"leave (JoinGroup v{v})", LeaveGroupRequest(group_id=group, member_id=member), lv)
        s.call(f"leave, unknown group (JoinGroup v{v})", LeaveGroupRequest(group_id="no-such-group", member_id="x"), 0)


@scenario(ApiKey.OFFSET_COMMIT)
def offsets(s: Session, versions: range) -> None:
    create_topic(s, "oc", 2)
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    FT = OffsetFetchRequest.OffsetFetchRequestTopic
    for v in versions:
        group = f"oc-v{v}"
        wait_for_coordinator(s, group)
        s.call("commit, no generation", OffsetCommitRequest(group_id=group, generation_id=-1, member_id="",
                                                            retention_time_ms=-1, topics=[T(name="oc", partitions=[
            P(partition_index=0, committed_offset=5, committed_metadata="m", commit_timestamp=-1),
            P(partition_index=1, committed_offset=7, committed_metadata=None, commit_timestamp=-1),
            P(partition_index=9, committed_offset=1, committed_metadata="", commit_timestamp=-1)])]), v)
        s.call("commit to an unknown topic", OffsetCommitRequest(group_id=group, generation_id=-1, member_id="",
                                                                 retention_time_ms=-1, topics=[T(name="oc-none", partitions=[
            P(partition_index=0, committed_offset=5, commit_timestamp=-1)])]), v)
        if v >= 1:
            s.call("commit with a generation of a group that has none", OffsetCommitRequest(
                group_id=group, generation_id=3, member_id="someone", retention_time_ms=-1,
                topics=[T(name="oc", partitions=[P(partition_index=0, committed_offset=1, commit_timestamp=-1)])]), v)
        s.call("commit, metadata too large", OffsetCommitRequest(group_id=group, generation_id=-1, member_id="",
                                                                 retention_time_ms=-1, topics=[T(name="oc", partitions=[
            P(partition_index=0, committed_offset=5, committed_metadata="m" * 5000, commit_timestamp=-1)])]), v)
        fv = min(v, 7)
        s.call("fetch", OffsetFetchRequest(group_id=group, topics=[FT(name="oc", partition_indexes=[0, 1, 2])]), fv)
        s.call("fetch, unknown group", OffsetFetchRequest(group_id="oc-none", topics=[FT(name="oc", partition_indexes=[0])]), fv)
        if fv >= 2:
            s.call("fetch all", OffsetFetchRequest(group_id=group, topics=None), fv)


@scenario(ApiKey.FIND_COORDINATOR)
def find_coordinator(s: Session, versions: range) -> None:
    wait_for_coordinator(s, "fc-group")
    wait_for_txn_coordinator(s, "fc-txn")
    for v in versions:
        s.call("group", FindCoordinatorRequest(key="fc-group", key_type=0), v)
        if v >= 1:
            s.call("transaction", FindCoordinatorRequest(key="fc-txn", key_type=1), v)
            s.call("unknown key type", FindCoordinatorRequest(key="fc", key_type=5), v)


@scenario(ApiKey.LIST_GROUPS)
def list_groups(s: Session, versions: range) -> None:
    wait_for_coordinator(s, "lg-group")
    _join(s, 3, "lg-group", "join")
    for v in versions:
        s.call("list", ListGroupsRequest(), v)
        if v >= 4:
            s.call("list by state", ListGroupsRequest(states_filter=["Empty", "Stable"]), v)
            s.call("list by unknown state", ListGroupsRequest(states_filter=["Nonsense"]), v)


@scenario(ApiKey.DELETE_GROUPS)
def delete_groups(s: Session, versions: range) -> None:
    create_topic(s, "dg", 1)
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    for v in versions:
        wait_for_coordinator(s, f"dg-{v}")
        wait_for_coordinator(s, f"dg-live-{v}")
        s.ask(OffsetCommitRequest(group_id=f"dg-{v}", generation_id=-1, topics=[T(name="dg", partitions=[
            T.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 2)
        _join(s, 3, f"dg-live-{v}", "join a live group")
        s.call("delete", DeleteGroupsRequest(groups_names=[f"dg-{v}", "dg-none", f"dg-live-{v}"]), v)


@scenario(ApiKey.OFFSET_DELETE)
def offset_delete(s: Session, versions: range) -> None:
    create_topic(s, "od", 2)
    wait_for_coordinator(s, "od")
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    s.ask(OffsetCommitRequest(group_id="od", generation_id=-1, topics=[T(name="od", partitions=[
        T.OffsetCommitRequestPartition(partition_index=p, committed_offset=1) for p in (0, 1)])]), 2)
    D = OffsetDeleteRequest.OffsetDeleteRequestTopic
    for v in versions:
        s.call("delete one partition", OffsetDeleteRequest(group_id="od", topics=[D(name="od", partitions=[
            D.OffsetDeleteRequestPartition(partition_index=0)])]), v)
        s.call("unknown group", OffsetDeleteRequest(group_id="od-none", topics=[D(name="od", partitions=[
            D.OffsetDeleteRequestPartition(partition_index=0)])]), v)
        s.call("unknown topic", OffsetDeleteRequest(group_id="od", topics=[D(name="od-none", partitions=[
            D.OffsetDeleteRequestPartition(partition_index=0)])]), v)


@scenario(ApiKey.CREATE_TOPICS)
def create_topics(s: Session, versions: range) -> None:
    T = CreateTopicsRequest.CreatableTopic
    C = T.CreateableTopicConfig
    A = T.CreatableReplicaAssignment
    for v in versions:
        def req(*topics: T, validate_only: bool = False) -> CreateTopicsRequest:
            return CreateTopicsRequest(topics=list(topics), timeout_ms=30000, validate_only=validate_only)
        s.call("create", req(T(name=f"ct-{v}", num_partitions=2, replication_factor=1,
                               configs=[C(name="cleanup.policy", value="compact")])), v)
        s.call("already exists", req(T(name=f"ct-{v}", num_partitions=1, replication_factor=1)), v)
        s.call("replication factor above the brokers", req(T(name=f"ct-rf-{v}", num_partitions=1,
                                                             replication_factor=3)), v)
        s.call("zero partitions", req(T(name=f"ct-zero-{v}", num_partitions=0, replication_factor=1)), v)
        s.call("invalid config value", req(T(name=f"ct-cfg-{v}", num_partitions=1, replication_factor=1,
                                             configs=[C(name="cleanup.policy", value="bogus")])), v)
        s.call("unknown config", req(T(name=f"ct-unk-{v}", num_partitions=1, replication_factor=1,
                                       configs=[C(name="no.such.config", value="1")])), v)
        s.call("invalid name", req(T(name="bad/name", num_partitions=1, replication_factor=1)), v)
        s.call("manual assignment to an unknown broker", CreateTopicsRequest(topics=[T(
            name=f"ct-assign-{v}", num_partitions=-1, replication_factor=-1,
            assignments=[A(partition_index=0, broker_ids=[7])])], timeout_ms=500), v)
        s.call("duplicate topic in one request", req(T(name=f"ct-dup-{v}", num_partitions=1, replication_factor=1),
                                                     T(name=f"ct-dup-{v}", num_partitions=1, replication_factor=1)), v)
        if v >= 1:
            s.call("validate only", req(T(name=f"ct-validate-{v}", num_partitions=3, replication_factor=1),
                                        validate_only=True), v)
        if v >= 4:
            s.call("defaults (-1)", req(T(name=f"ct-default-{v}", num_partitions=-1, replication_factor=-1)), v)


@scenario(ApiKey.DELETE_TOPICS)
def delete_topics(s: Session, versions: range) -> None:
    for v in versions:
        create_topic(s, f"dt-{v}", 1)
        s.call("delete", DeleteTopicsRequest(topic_names=[f"dt-{v}", "dt-none"], timeout_ms=30000), v)
        # (Deleting __consumer_offsets is allowed by Kafka 2.6 and by us alike, and would break every later
        # group scenario of the module: not sent.)


@scenario(ApiKey.CREATE_PARTITIONS)
def create_partitions(s: Session, versions: range) -> None:
    T = CreatePartitionsRequest.CreatePartitionsTopic
    for v in versions:
        create_topic(s, f"cp-{v}", 1)
        s.call("grow", CreatePartitionsRequest(topics=[T(name=f"cp-{v}", count=3, assignments=None)], timeout_ms=30000), v)
        s.call("shrink", CreatePartitionsRequest(topics=[T(name=f"cp-{v}", count=1, assignments=None)], timeout_ms=30000), v)
        s.call("same count", CreatePartitionsRequest(topics=[T(name=f"cp-{v}", count=3, assignments=None)], timeout_ms=30000), v)
        s.call("unknown topic", CreatePartitionsRequest(topics=[T(name="cp-none", count=3, assignments=None)], timeout_ms=30000), v)
        s.call("validate only", CreatePartitionsRequest(topics=[T(name=f"cp-{v}", count=5, assignments=None)],
                                                        timeout_ms=30000, validate_only=True), v)
        s.call("assignment to an unknown broker", CreatePartitionsRequest(topics=[T(
            name=f"cp-{v}", count=4, assignments=[T.CreatePartitionsAssignment(broker_ids=[9])])], timeout_ms=30000), v)


@scenario(ApiKey.DELETE_RECORDS)
def delete_records(s: Session, versions: range) -> None:
    T = DeleteRecordsRequest.DeleteRecordsTopic
    P = T.DeleteRecordsPartition
    for v in versions:
        topic = f"dr-{v}"
        create_topic(s, topic, 1)
        produce(s, topic, v2_batch(5), 3)
        for label, offset in (("before 2", 2), ("to the end (-1)", -1), ("beyond the end", 50), ("backwards", 1)):
            s.call(label, DeleteRecordsRequest(topics=[T(name=topic, partitions=[P(partition_index=0, offset=offset)])],
                                               timeout_ms=30000), v)
        s.call("unknown partition", DeleteRecordsRequest(topics=[T(name=topic, partitions=[P(partition_index=3, offset=1)])],
                                                         timeout_ms=30000), v)


@scenario(ApiKey.INIT_PRODUCER_ID)
def init_producer_id(s: Session, versions: range) -> None:
    create_topic(s, "ipi", 1)
    def init(label: str, v: int, txn_id: str | None, timeout_ms: int = TXN_TIMEOUT_MS, producer_id: int = -1,
             producer_epoch: int = -1) -> None:
        s.call(label, InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                            producer_id=producer_id, producer_epoch=producer_epoch), v)
    for v in versions:
        txn_id = f"tx-{v}"
        wait_for_txn_coordinator(s, txn_id)
        init("idempotent", v, None)
        init("transactional", v, txn_id)
        init("transactional again: the epoch is bumped", v, txn_id)
        init("empty transactional id", v, "")
        # transaction.max.timeout.ms is 900000 on both: the edge, one above, zero.
        init("transaction timeout at the maximum", v, f"tx-max-{v}", timeout_ms=MAX_TXN_TIMEOUT_MS)
        init("transaction timeout too large", v, f"tx-big-{v}", timeout_ms=MAX_TXN_TIMEOUT_MS + 1)
        init("transaction timeout zero", v, f"tx-zero-{v}", timeout_ms=0)
        if v >= 3:
            pid, epoch = _init(s, txn_id)
            init("v3: the current producer id and epoch (KIP-360)", v, txn_id, producer_id=pid, producer_epoch=epoch)
            init("v3: an older epoch", v, txn_id, producer_id=pid, producer_epoch=epoch)
            init("v3: another producer id", v, txn_id, producer_id=pid + 1000, producer_epoch=0)
            init("v3: producer id without an epoch", v, txn_id, producer_id=pid, producer_epoch=-1)
        # An open transaction is aborted first, at a new epoch, and the client is told to retry.
        pid, epoch = _init(s, txn_id)
        _add(s, txn_id, pid, epoch, ("ipi", 0))
        init("with a transaction open", v, txn_id)
        _wait_until_complete(s, txn_id, pid, epoch + 1, commit=False)
        init("after the open transaction was aborted", v, txn_id)


# ---- transactions ------------------------------------------------------------------------------------------
# Both brokers run with transaction.max.timeout.ms 900000 (Kafka's default) and the ids' coordinator on the one
# broker. Each case uses its own transactional id so no case depends on the timing of another's markers.

TXN_TIMEOUT_MS = 60000
MAX_TXN_TIMEOUT_MS = 900000
INVALID_PRODUCER_ID_MAPPING = 49
GROUP_FOR_OFFSETS = "txn-offsets"


def _init(s: Session, txn_id: str, times: int = 1) -> tuple[int, int]:
    """InitProducerId for the id ``times`` times (not recorded): its producer id and last epoch (``times`` - 1 for a
    new id, so an older epoch than the current one exists)."""
    wait_for_txn_coordinator(s, txn_id)
    for _ in range(times):
        r = s.ask(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=TXN_TIMEOUT_MS,
                                        producer_id=-1, producer_epoch=-1), 1)
        assert r.error_code == 0, f"InitProducerId {txn_id}: {r.error_code}"
    return r.producer_id, r.producer_epoch


def _add_request(txn_id: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> AddPartitionsToTxnRequest:
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    return AddPartitionsToTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                     topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])


def _add(s: Session, txn_id: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> None:
    r = s.ask(_add_request(txn_id, pid, epoch, *partitions), 1)
    assert all(p.error_code == 0 for t in r.results for p in t.results), f"AddPartitionsToTxn {txn_id}: {r}"


def _end(txn_id: str, pid: int, epoch: int, commit: bool) -> EndTxnRequest:
    return EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)


def _wait_until_complete(s: Session, txn_id: str, pid: int, epoch: int, commit: bool) -> None:
    """Until the transaction's markers are written (CompleteCommit/CompleteAbort): a retried EndTxn of the same
    outcome changes nothing and answers CONCURRENT_TRANSACTIONS until then, NONE after."""
    s.wait(f"the markers of {txn_id}", lambda: s.ask(_end(txn_id, pid, epoch, commit), 1).error_code == 0)


def _txn_produce(s: Session, label: str | None, txn_id: str, topic: str, partition: int, records: bytes) -> None:
    P = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=30000, topics=[
        P(name=topic, partitions=[P.PartitionProduceData(partition_index=partition, records=records)])])
    if label is None:
        r = s.ask(req, 3)
        assert r.responses[0].partitions[0].error_code == 0, f"transactional produce {txn_id}: {r}"
    else:
        s.call(label, req, 3)


def _txn_batch(pid: int, epoch: int, n: int, first: int, sequence: int = 0) -> bytes:
    return v2_batch(n, first, producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True)


def _read(s: Session, label: str, topic: str, isolation: int) -> None:
    F = FetchRequest.FetchableTopic
    s.call(label, FetchRequest(replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
                               topics=[F(name=topic, fetch_partitions=[F.FetchPartition(
                                   partition_index=0, fetch_offset=0, log_start_offset=-1, max_bytes=1 << 20,
                                   current_leader_epoch=-1)])]), 11)
    T = ListOffsetRequest.ListOffsetTopic
    s.call(label + ", latest offset", ListOffsetRequest(replica_id=-1, isolation_level=isolation, topics=[
        T(name=topic, partitions=[T.ListOffsetPartition(partition_index=0, timestamp=-1)])]), 5)


@scenario(ApiKey.ADD_PARTITIONS_TO_TXN)
def add_partitions_to_txn(s: Session, versions: range) -> None:
    """A transaction's life with AddPartitionsToTxn at each version, and its error paths; what read_committed
    and read_uncommitted Fetch and ListOffsets see of it (open, aborted, committed)."""
    for v in versions:
        topic = f"apt-{v}"
        create_topic(s, topic, 2)
        txn_id = f"apt-{v}"
        pid, epoch = _init(s, txn_id, times=2)
        s.call("add a partition", _add_request(txn_id, pid, epoch, (topic, 0)), v)
        s.call("add it again", _add_request(txn_id, pid, epoch, (topic, 0)), v)
        s.call("add another", _add_request(txn_id, pid, epoch, (topic, 1)), v)
        s.call("an unknown partition with a known one", _add_request(txn_id, pid, epoch, (topic, 1), (topic, 7)), v)
        s.call("an unknown topic", _add_request(txn_id, pid, epoch, (f"apt-none-{v}", 0)), v)
        s.call("an internal topic with a known partition (never authorized, whoever asks)",
               _add_request(txn_id, pid, epoch, (topic, 0), ("__consumer_offsets", 0)), v)
        s.call("unknown transactional id", _add_request(f"apt-unknown-{v}", pid, epoch, (topic, 0)), v)
        s.call("another producer id", _add_request(txn_id, pid + 1000, epoch, (topic, 0)), v)
        s.call("an older epoch", _add_request(txn_id, pid, epoch - 1, (topic, 0)), v)
        s.call("a newer epoch", _add_request(txn_id, pid, epoch + 1, (topic, 0)), v)
        s.call("empty transactional id", _add_request("", pid, epoch, (topic, 0)), v)
        _txn_produce(s, "transactional produce to an added partition", txn_id, topic, 0, _txn_batch(pid, epoch, 3, 0))
        _read(s, "read_committed, transaction open", topic, 1)
        _read(s, "read_uncommitted, transaction open", topic, 0)
        s.call("abort", _end(txn_id, pid, epoch, commit=False), 1)
        _wait_until_complete(s, txn_id, pid, epoch, commit=False)
        _add(s, txn_id, pid, epoch, (topic, 0))
        _txn_produce(s, None, txn_id, topic, 0, _txn_batch(pid, epoch, 2, 10, sequence=3))
        s.call("commit", _end(txn_id, pid, epoch, commit=True), 1)
        _wait_until_complete(s, txn_id, pid, epoch, commit=True)
        _read(s, "read_committed, one aborted and one committed", topic, 1)
        _read(s, "read_uncommitted, one aborted and one committed", topic, 0)
        # Beyond 2.6 (docs/compatibility.md): a transactional batch to a partition the transaction never added is
        # refused (partition verification), and the next transaction's first AddPartitionsToTxn waits for the last
        # one's markers instead of answering CONCURRENT_TRANSACTIONS. Last, since what follows each differs.
        create_topic(s, f"apt-stray-{v}", 1)
        _add(s, txn_id, pid, epoch, (topic, 1))
        _txn_produce(s, "transactional produce to a partition not added", txn_id, f"apt-stray-{v}", 0,
                     _txn_batch(pid, epoch, 1, 20))
        s.ask(_end(txn_id, pid, epoch, commit=True), 1)
        s.call("the next transaction's first AddPartitionsToTxn right after EndTxn",
               _add_request(txn_id, pid, epoch, (topic, 1)), v)


@scenario(ApiKey.END_TXN)
def end_txn(s: Session, versions: range) -> None:
    topic = "et"
    create_topic(s, topic, 1)
    for v in versions:
        txn_id = f"et-{v}"
        pid, epoch = _init(s, txn_id, times=2)
        s.call("without AddPartitionsToTxn", _end(txn_id, pid, epoch, commit=True), v)
        s.call("abort without AddPartitionsToTxn", _end(txn_id, pid, epoch, commit=False), v)
        s.call("unknown transactional id", _end(f"et-unknown-{v}", pid, epoch, commit=True), v)
        s.call("empty transactional id", _end("", pid, epoch, commit=True), v)
        _add(s, txn_id, pid, epoch, (topic, 0))
        s.call("another producer id", _end(txn_id, pid + 1000, epoch, commit=True), v)
        s.call("an older epoch", _end(txn_id, pid, epoch - 1, commit=True), v)
        s.call("a newer epoch", _end(txn_id, pid, epoch + 1, commit=True), v)
        s.call("commit", _end(txn_id, pid, epoch, commit=True), v)
        _wait_until_complete(s, txn_id, pid, epoch, commit=True)
        s.call("commit again once complete", _end(txn_id, pid, epoch, commit=True), v)
        s.call("abort once committed", _end(txn_id, pid, epoch, commit=False), v)
        _add(s, txn_id, pid, epoch, (topic, 0))
        s.call("abort", _end(txn_id, pid, epoch, commit=False), v)
        _wait_until_complete(s, txn_id, pid, epoch, commit=False)
        s.call("commit once aborted", _end(txn_id, pid, epoch, commit=True), v)
        fenced_pid, fenced_epoch = pid, epoch
        pid, epoch = _init(s, txn_id)
        s.call("fenced by a newer InitProducerId", _end(txn_id, fenced_pid, fenced_epoch, commit=True), v)


@scenario(ApiKey.ADD_OFFSETS_TO_TXN)
def add_offsets_to_txn(s: Session, versions: range) -> None:
    wait_for_coordinator(s, GROUP_FOR_OFFSETS)
    for v in versions:
        txn_id = f"aot-{v}"
        pid, epoch = _init(s, txn_id, times=2)

        def add(label: str, txn: str = txn_id, producer_id: int = pid, producer_epoch: int = epoch,
                group: str = GROUP_FOR_OFFSETS, v: int = v) -> None:
            s.call(label, AddOffsetsToTxnRequest(transactional_id=txn, producer_id=producer_id,
                                                 producer_epoch=producer_epoch, group_id=group), v)
        add("add the group")
        add("add it again")
        add("unknown transactional id", txn=f"aot-unknown-{v}")
        add("another producer id", producer_id=pid + 1000)
        add("an older epoch", producer_epoch=epoch - 1)
        add("empty transactional id", txn="")
        s.call("commit", _end(txn_id, pid, epoch, commit=True), 1)
        _wait_until_complete(s, txn_id, pid, epoch, commit=True)


@scenario(ApiKey.TXN_OFFSET_COMMIT)
def txn_offset_commit(s: Session, versions: range) -> None:
    topic = "toc"
    create_topic(s, topic, 2)
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    FT = OffsetFetchRequest.OffsetFetchRequestTopic
    for v in versions:
        group = f"toc-{v}"
        wait_for_coordinator(s, group)
        txn_id = f"toc-{v}"
        pid, epoch = _init(s, txn_id)
        s.ask(AddOffsetsToTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group), 1)

        def commit(label: str, group: str = group, partitions: tuple[tuple[str, int, int], ...] = ((topic, 0, 5),),
                   generation: int = -1, member: str = "", metadata: str | None = "m", v: int = v,
                   txn_id: str = txn_id, pid: int = pid, epoch: int = epoch) -> None:
            by_topic: dict[str, list[P]] = {}
            for t, p, offset in partitions:
                by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=offset,
                                                    committed_metadata=metadata))
            s.call(label, TxnOffsetCommitRequest(transactional_id=txn_id, group_id=group, producer_id=pid,
                                                 producer_epoch=epoch, generation_id=generation, member_id=member,
                                                 topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]), v)
        commit("commit", partitions=((topic, 0, 5), (topic, 1, 7)))
        commit("an unknown partition", partitions=((topic, 0, 6), (topic, 9, 1)))
        commit("an unknown topic", partitions=(("toc-none", 0, 1),))
        commit("metadata too large", metadata="m" * 5000)
        commit("empty group id", group="")
        if v >= 3:
            commit("an unknown member of the group", member="nobody")
            commit("a generation the group does not have", generation=3)
        fv = 7
        s.call("pending offsets are not committed yet", OffsetFetchRequest(
            group_id=group, topics=[FT(name=topic, partition_indexes=[0, 1])], require_stable=True), fv)
        s.call("commit the transaction", _end(txn_id, pid, epoch, commit=True), 1)
        _wait_until_complete(s, txn_id, pid, epoch, commit=True)
        s.call("committed offsets after the COMMIT marker", OffsetFetchRequest(
            group_id=group, topics=[FT(name=topic, partition_indexes=[0, 1])], require_stable=True), fv)


@scenario(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def offset_for_leader_epoch(s: Session, versions: range) -> None:
    create_topic(s, "ole", 1)
    produce(s, "ole", v2_batch(4), 3)
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    P = T.OffsetForLeaderPartition
    for v in versions:
        for label, epoch, current in (("epoch 0", 0, -1), ("a later epoch", 3, -1), ("unknown partition", 0, -1),
                                      ("fenced current epoch", 0, 5)):
            part = 2 if label == "unknown partition" else 0
            if label == "fenced current epoch" and v < 2:
                continue
            s.call(label, OffsetForLeaderEpochRequest(replica_id=-1, topics=[T(name="ole", partitions=[
                P(partition_index=part, leader_epoch=epoch, current_leader_epoch=current)])]), v)


TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


@scenario(ApiKey.DESCRIBE_CONFIGS)
def describe_configs(s: Session, versions: range) -> None:
    create_topic(s, "dc", 1, {"retention.ms": "3600000", "max.message.bytes": "2000000"})
    R = DescribeConfigsRequest.DescribeConfigsResource
    for v in versions:
        for synonyms in ((False, True) if v >= 1 else (False,)):
            label = " with synonyms" if synonyms else ""
            s.call("topic, all keys" + label, DescribeConfigsRequest(resources=[R(resource_type=TOPIC, resource_name="dc",
                                                                                  configuration_keys=None)],
                                                                     include_synonyms=synonyms), v)
            s.call("topic, some keys" + label, DescribeConfigsRequest(resources=[R(
                resource_type=TOPIC, resource_name="dc", configuration_keys=["retention.ms", "cleanup.policy", "nope"])],
                include_synonyms=synonyms), v)
            s.call("broker, some keys" + label, DescribeConfigsRequest(resources=[R(
                resource_type=BROKER, resource_name="0",
                configuration_keys=["num.partitions", "log.retention.hours", "log.retention.ms", "message.max.bytes",
                                    "log.cleaner.threads", "broker.id", "zookeeper.connect", "listeners"])],
                include_synonyms=synonyms), v)
        s.call("unknown topic", DescribeConfigsRequest(resources=[R(resource_type=TOPIC, resource_name="dc-none",
                                                                    configuration_keys=None)]), v)
        s.call("other broker", DescribeConfigsRequest(resources=[R(resource_type=BROKER, resource_name="7",
                                                                   configuration_keys=None)]), v)
        s.call("broker id not a number", DescribeConfigsRequest(resources=[R(resource_type=BROKER, resource_name="x",
                                                                             configuration_keys=None)]), v)
        s.call("unknown resource type", DescribeConfigsRequest(resources=[R(resource_type=99, resource_name="x",
                                                                            configuration_keys=None)]), v)


# Keys Kafka 2.6 changes at run time, per broker and cluster-wide; and some it does not.
DYNAMIC_BROKER_KEYS = ("log.cleaner.threads", "message.max.bytes", "log.retention.ms", "num.io.threads",
                       "log.segment.bytes", "compression.type", "unclean.leader.election.enable",
                       "num.network.threads", "log.flush.interval.messages", "max.connections",
                       "background.threads", "log.cleaner.dedupe.buffer.size", "min.insync.replicas")
STATIC_BROKER_KEYS = ("broker.id", "log.dirs", "zookeeper.connect", "log.retention.hours", "no.such.key")


@scenario(ApiKey.ALTER_CONFIGS)
def alter_configs(s: Session, versions: range) -> None:
    R = AlterConfigsRequest.AlterConfigsResource
    C = R.AlterableConfig
    for v in versions:
        topic = f"ac-{v}"
        create_topic(s, topic, 1)

        def alter(label: str, rtype: int, name: str, configs: dict[str, str | None], validate: bool = False,
                  v: int = v) -> None:
            s.call(label, AlterConfigsRequest(resources=[R(resource_type=rtype, resource_name=name, configs=[
                C(name=k, value=val) for k, val in configs.items()])], validate_only=validate), v)
        alter("topic", TOPIC, topic, {"retention.ms": "1000", "cleanup.policy": "compact"})
        alter("topic, validate only", TOPIC, topic, {"retention.ms": "2000"}, validate=True)
        alter("topic, invalid value", TOPIC, topic, {"retention.ms": "soon"})
        alter("topic, unknown key", TOPIC, topic, {"no.such.config": "1"})
        alter("topic, null value", TOPIC, topic, {"retention.ms": None})
        alter("unknown topic", TOPIC, "ac-none", {"retention.ms": "1000"})
        for key in DYNAMIC_BROKER_KEYS + STATIC_BROKER_KEYS:
            value = _broker_value(key)
            alter(f"broker key {key}", BROKER, "0", {key: value})
            alter(f"cluster default {key}", BROKER, "", {key: value})
        alter("broker, reset", BROKER, "0", {})
        alter("cluster default, reset", BROKER, "", {})
        alter("other broker", BROKER, "7", {"log.cleaner.threads": "1"})
        alter("broker logger", BROKER_LOGGER, "0", {"kafka.server": "INFO"})


def _broker_value(key: str) -> str:
    """Each key's default (as both brokers run with it): Kafka validates thread counts and sizes against the
    current value, and the value is not what these cases are about."""
    return {"compression.type": "producer", "unclean.leader.election.enable": "false", "log.dirs": "/tmp/x",
            "zookeeper.connect": "localhost:2181", "message.max.bytes": "1048588",
            "log.segment.bytes": "1073741824", "log.cleaner.dedupe.buffer.size": "134217728",
            "max.connections": "2147483647", "min.insync.replicas": "1", "num.io.threads": "8",
            "num.network.threads": "3", "background.threads": "10", "log.cleaner.threads": "1",
            "log.flush.interval.messages": "9223372036854775807", "log.retention.ms": "604800000",
            "broker.id": "0", "log.retention.hours": "168"}.get(key, "1")


@scenario(ApiKey.INCREMENTAL_ALTER_CONFIGS)
def incremental_alter_configs(s: Session, versions: range) -> None:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    C = R.AlterableConfig
    SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
    for v in versions:
        topic = f"iac-{v}"
        create_topic(s, topic, 1)

        def alter(label: str, rtype: int, name: str, *ops: tuple[str, int, str | None], validate: bool = False,
                  v: int = v) -> None:
            s.call(label, IncrementalAlterConfigsRequest(resources=[R(resource_type=rtype, resource_name=name, configs=[
                C(name=k, config_operation=op, value=val) for k, op, val in ops])], validate_only=validate), v)
        alter("set", TOPIC, topic, ("retention.ms", SET, "1000"))
        alter("append", TOPIC, topic, ("cleanup.policy", APPEND, "compact"))
        alter("subtract", TOPIC, topic, ("cleanup.policy", SUBTRACT, "delete"))
        alter("delete", TOPIC, topic, ("retention.ms", DELETE, None))
        alter("delete a key never set", TOPIC, topic, ("segment.ms", DELETE, None))
        alter("append to a non-list", TOPIC, topic, ("retention.ms", APPEND, "1"))
        alter("invalid value", TOPIC, topic, ("retention.ms", SET, "soon"))
        alter("unknown key", TOPIC, topic, ("no.such.config", SET, "1"))
        alter("unknown operation", TOPIC, topic, ("retention.ms", 9, "1"))
        alter("same key twice", TOPIC, topic, ("retention.ms", SET, "1"), ("retention.ms", SET, "2"))
        alter("validate only", TOPIC, topic, ("retention.ms", SET, "5000"), validate=True)
        alter("unknown topic", TOPIC, "iac-none", ("retention.ms", SET, "1000"))
        for key in DYNAMIC_BROKER_KEYS + STATIC_BROKER_KEYS:
            value = _broker_value(key)
            alter(f"broker key {key}", BROKER, "0", (key, SET, value))
            alter(f"cluster default {key}", BROKER, "", (key, SET, value))
            alter(f"broker key {key}, delete", BROKER, "0", (key, DELETE, None))
            alter(f"cluster default {key}, delete", BROKER, "", (key, DELETE, None))
        alter("other broker", BROKER, "7", ("log.cleaner.threads", SET, "1"))
        alter("broker logger", BROKER_LOGGER, "0", ("kafka.server", SET, "INFO"))


@scenario(ApiKey.DESCRIBE_LOG_DIRS)
def describe_log_dirs(s: Session, versions: range) -> None:
    create_topic(s, "dld", 2)
    produce(s, "dld", v2_batch(3), 3)
    D = DescribeLogDirsRequest.DescribableLogDirTopic
    for v in versions:
        s.call("one topic", DescribeLogDirsRequest(topics=[D(topic="dld", partition_index=[0, 1, 5])]), v)
        s.call("unknown topic", DescribeLogDirsRequest(topics=[D(topic="dld-none", partition_index=[0])]), v)


@scenario(ApiKey.ALTER_REPLICA_LOG_DIRS)
def alter_replica_log_dirs(s: Session, versions: range) -> None:
    """Each broker has one log dir here, learnt from its own DescribeLogDirs (the paths differ; answers never
    carry them): the move to where the log is already, and every refusal before a copy would start, at the edges
    of Kafka's checks (the future replica's 255-byte name: a 213-character topic fits with partition 0, 214 do
    not, and the partition number's digits count)."""
    create_topic(s, "ald", 2)
    (result,) = s.ask(DescribeLogDirsRequest(topics=None), 1).results
    here = result.log_dir
    D = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    T = D.AlterReplicaLogDirTopic

    def alter(label: str, v: int, *entries: tuple[str, str, list[int]]) -> None:
        s.call(label, AlterReplicaLogDirsRequest(dirs=[D(path=path, topics=[T(name=topic, partitions=parts)])
                                                       for path, topic, parts in entries]), v)

    for v in versions:
        alter("the dir the log is in", v, (here, "ald", [0, 1]))
        alter("a dir not configured", v, ("/no/such/log/dir", "ald", [0]))
        alter("the dir's name, relative", v, (here.rsplit("/", 1)[-1], "ald", [0]))
        alter("the dir with a trailing slash", v, (here + "/", "ald", [0]))
        alter("unknown topic", v, (here, "ald-none", [0]))
        alter("partition out of range", v, (here, "ald", [2, -1]))
        alter("213-character topic, partition 0", v, (here, "x" * 213, [0]))
        alter("214-character topic, partition 0", v, (here, "x" * 214, [0]))
        alter("212-character topic, partition 10", v, (here, "y" * 212, [10]))
        alter("213-character topic, partition 10", v, (here, "y" * 213, [10]))
        alter("a partition under two dirs, the unknown one last", v, (here, "ald", [0]), ("/no/such/dir", "ald", [0]))
        alter("a partition under two dirs, the known one last", v, ("/no/such/dir", "ald", [1]), (here, "ald", [1]))
        alter("a partition named twice", v, (here, "ald", [0, 0]))
        alter("nothing", v)


@scenario(ApiKey.ALTER_CLIENT_QUOTAS)
def client_quotas(s: Session, versions: range) -> None:
    A = AlterClientQuotasRequest.EntryData
    C = DescribeClientQuotasRequest.ComponentData

    def entity(**names: str | None) -> list[AlterClientQuotasRequest.EntryData.EntityData]:
        return [A.EntityData(entity_type=t.replace("_", "-"), entity_name=n) for t, n in names.items()]

    def op(key: str, value: float = 0.0, remove: bool = False) -> AlterClientQuotasRequest.EntryData.OpData:
        return A.OpData(key=key, value=value, remove=remove)

    def describe(label: str, *components: tuple[str, int, str | None], strict: bool = False) -> None:
        s.call(f"describe {label}", DescribeClientQuotasRequest(
            components=[C(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict), 0)

    for v in versions:
        s.call("set user, client, user+client and defaults", AlterClientQuotasRequest(entries=[
            A(entity=entity(user="cq-alice"), ops=[op("producer_byte_rate", 1024.0), op("request_percentage", 50.0)]),
            A(entity=entity(client_id="cq-app"), ops=[op("consumer_byte_rate", 2048.0)]),
            A(entity=entity(user="cq-alice", client_id="cq-app"), ops=[op("producer_byte_rate", 4096.0)]),
            A(entity=entity(user=None, client_id=None), ops=[op("consumer_byte_rate", 8192.0)]),
            A(entity=entity(client_id=None), ops=[op("request_percentage", 25.5)]),
        ]), v)
        s.call("validate only", AlterClientQuotasRequest(entries=[
            A(entity=entity(user="cq-bob"), ops=[op("producer_byte_rate", 1.0)])], validate_only=True), v)
        s.call("bad entries", AlterClientQuotasRequest(entries=[
            A(entity=entity(ip="10.0.0.1"), ops=[op("producer_byte_rate", 1000.0)]),
            A(entity=[], ops=[op("producer_byte_rate", 1000.0)]),
            A(entity=entity(user="cq-carol"), ops=[op("controller_mutation_rate", 5.0)]),
            A(entity=entity(user="cq-carol"), ops=[op("consumer_byte_rate", 10.5)]),
            A(entity=entity(user=""), ops=[op("consumer_byte_rate", 10.0)]),
            A(entity=entity(user="cq-dave"), ops=[op("producer_byte_rate", -1.0)]),
            A(entity=entity(user="cq-erin"), ops=[op("producer_byte_rate", 0.0)]),
        ]), v)
        s.call("remove a key", AlterClientQuotasRequest(entries=[
            A(entity=entity(user="cq-alice"), ops=[op("request_percentage", remove=True)])]), v)
        describe("everything")
        describe("one user, strict", ("user", 0, "cq-alice"), strict=True)
        describe("one user", ("user", 0, "cq-alice"))
        describe("default client ids", ("client-id", 1, None), strict=True)
        describe("any client id", ("client-id", 2, None))
        describe("the validated user", ("user", 0, "cq-bob"))
        describe("the refused entities", ("user", 0, "cq-dave"))
        describe("a zero quota", ("user", 0, "cq-erin"))
        # Last, since Kafka 2.6 stores it and we refuse it (docs/compatibility.md).
        s.call("negative request percentage", AlterClientQuotasRequest(entries=[
            A(entity=entity(client_id="cq-dave"), ops=[op("request_percentage", -0.5)])]), v)
        describe("the client after a negative request percentage", ("client-id", 0, "cq-dave"))
        describe("an unknown entity type", ("ip", 0, "10.0.0.1"))


@scenario(ApiKey.ELECT_LEADERS)
def elect_leaders(s: Session, versions: range) -> None:
    create_topic(s, "el", 2)
    T = ElectLeadersRequest.TopicPartitions
    for v in versions:
        for etype in ((0, 1) if v >= 1 else (0,)):
            s.call(f"election type {etype}", ElectLeadersRequest(election_type=etype, timeout_ms=30000, topic_partitions=[
                T(topic="el", partition_id=[0, 1]), T(topic="el-none", partition_id=[0])]), v)


@scenario(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
def reassignments(s: Session, versions: range) -> None:
    create_topic(s, "ra", 1)
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    P = T.ReassignablePartition
    L = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    for v in versions:
        s.call("list none", ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None), v)
        s.call("to an unknown broker", AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[
            T(name="ra", partitions=[P(partition_index=0, replicas=[7])])]), v)
        s.call("cancel with none ongoing", AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[
            T(name="ra", partitions=[P(partition_index=0, replicas=None)])]), v)
        s.call("unknown topic", AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[
            T(name="ra-none", partitions=[P(partition_index=0, replicas=[0])])]), v)
        s.call("empty replica list", AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[
            T(name="ra", partitions=[P(partition_index=0, replicas=[])])]), v)
        s.call("duplicate replicas", AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[
            T(name="ra", partitions=[P(partition_index=0, replicas=[0, 0])])]), v)
        s.call("to the same replicas", AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[
            T(name="ra", partitions=[P(partition_index=0, replicas=[0])])]), v)
        s.wait("the reassignment to finish", lambda: not s.ask(
            ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None), 0).topics)
        s.call("list one", ListPartitionReassignmentsRequest(timeout_ms=30000, topics=[
            L(name="ra", partition_indexes=[0]), L(name="ra-none", partition_indexes=[0])]), v)


# ---- the security APIs on a broker without security: a PLAINTEXT listener and no authorizer. With SASL and
# ACLs on, tests/conformance/test_security_conformance.py compares them (and every other key's authorization).

def acl_filter(version: int, **fields: object) -> dict[str, object]:
    """A filter matching everything (DescribeAcls/DeleteAcls fields at ``version``), with ``fields`` changed; v0
    has no pattern type (LITERAL is implied)."""
    base: dict[str, object] = {"resource_type_filter": 1, "resource_name_filter": None,
                               "pattern_type_filter": 1 if version >= 1 else 3, "principal_filter": None,
                               "host_filter": None, "operation": 1, "permission_type": 1}
    return base | fields


def acl_creation(resource_type: int, name: str, pattern_type: int, principal: str, operation: int,
                 permission_type: int = 3, host: str = "*") -> CreateAclsRequest.AclCreation:
    return CreateAclsRequest.AclCreation(resource_type=resource_type, resource_name=name,
                                         resource_pattern_type=pattern_type, principal=principal, host=host,
                                         operation=operation, permission_type=permission_type)


@scenario(ApiKey.SASL_HANDSHAKE)
def sasl_handshake_without_sasl(s: Session, versions: range) -> None:
    for v in versions:
        s.call("on a PLAINTEXT listener", SaslHandshakeRequest(mechanism="PLAIN"), v)


@scenario(ApiKey.SASL_AUTHENTICATE)
def sasl_authenticate_without_sasl(s: Session, versions: range) -> None:
    for v in versions:
        s.call("on a PLAINTEXT listener", SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), v)


@scenario(ApiKey.CREATE_ACLS)
def create_acls_without_authorizer(s: Session, versions: range) -> None:
    for v in versions:
        s.call("no authorizer", CreateAclsRequest(creations=[acl_creation(2, "t", 3, "User:alice", 3)]), v)


@scenario(ApiKey.DESCRIBE_ACLS)
def describe_acls_without_authorizer(s: Session, versions: range) -> None:
    for v in versions:
        s.call("no authorizer", DescribeAclsRequest(**acl_filter(v)), v)


@scenario(ApiKey.DELETE_ACLS)
def delete_acls_without_authorizer(s: Session, versions: range) -> None:
    for v in versions:
        s.call("no authorizer", DeleteAclsRequest(filters=[
            DeleteAclsRequest.DeleteAclsFilter(**acl_filter(v))]), v)


# Delegation tokens over PLAINTEXT: every request is refused (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) before anything
# else is looked at; tests/conformance/test_security_conformance.py compares them over SASL.
@scenario(ApiKey.CREATE_DELEGATION_TOKEN)
def create_delegation_token_without_sasl(s: Session, versions: range) -> None:
    R = CreateDelegationTokenRequest.CreatableRenewers
    for v in versions:
        s.call("on a PLAINTEXT listener", CreateDelegationTokenRequest(
            renewers=[R(principal_type="User", principal_name="bob")], max_lifetime_ms=-1), v)
        s.call("a renewer that is not a user, on a PLAINTEXT listener", CreateDelegationTokenRequest(
            renewers=[R(principal_type="Group", principal_name="g")], max_lifetime_ms=1000), v)


@scenario(ApiKey.RENEW_DELEGATION_TOKEN)
def renew_delegation_token_without_sasl(s: Session, versions: range) -> None:
    for v in versions:
        s.call("on a PLAINTEXT listener", RenewDelegationTokenRequest(hmac=b"\1" * 64, renew_period_ms=-1), v)


@scenario(ApiKey.EXPIRE_DELEGATION_TOKEN)
def expire_delegation_token_without_sasl(s: Session, versions: range) -> None:
    for v in versions:
        s.call("on a PLAINTEXT listener", ExpireDelegationTokenRequest(hmac=b"", expiry_time_period_ms=-1), v)


@scenario(ApiKey.DESCRIBE_DELEGATION_TOKEN)
def describe_delegation_token_without_sasl(s: Session, versions: range) -> None:
    O = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner  # noqa: E741 - Kafka's name, shortened
    for v in versions:
        s.call("every owner, on a PLAINTEXT listener", DescribeDelegationTokenRequest(owners=None), v)
        s.call("no owner, on a PLAINTEXT listener", DescribeDelegationTokenRequest(owners=[]), v)
        s.call("one owner, on a PLAINTEXT listener", DescribeDelegationTokenRequest(
            owners=[O(principal_type="User", principal_name="alice")]), v)


# Keys a scenario of another key covers: the groups' life cycle covers the other group APIs, the offsets
# scenario covers OffsetFetch, the reassignment one covers ListPartitionReassignments.
COVERED_BY = {
    ApiKey.SYNC_GROUP: ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT: ApiKey.JOIN_GROUP, ApiKey.LEAVE_GROUP: ApiKey.JOIN_GROUP,
    ApiKey.DESCRIBE_GROUPS: ApiKey.JOIN_GROUP, ApiKey.OFFSET_FETCH: ApiKey.OFFSET_COMMIT,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ApiKey.ALTER_CLIENT_QUOTAS,
}
# Inter-broker keys sofakafka answers (a stopping broker asks the controller; the controller asks brokers to
# drop replicas; a transaction coordinator asks partition leaders to write markers); clients never send them,
# so the suite does not compare them.
INTER_BROKER = {ApiKey.STOP_REPLICA, ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS}
