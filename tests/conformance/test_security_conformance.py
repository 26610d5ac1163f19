"""Security against Apache Kafka 2.6: logins, the ACL APIs, and what a user without rights is told, by both.

Both brokers run with the same security settings (tests/reference/kafka.py ``secure_settings``): a SASL_PLAINTEXT
listener offering PLAIN (admin, a super user, and alice from the JAAS config) and SCRAM-SHA-256/512 (sam, written
into Kafka's ZooKeeper by Kafka's own ConfigCommand and into ours by ``sofakafka users``), and Kafka's ACL
authorizer. The same connections send the same requests to both, and the answers are compared as
test_conformance.py compares them: field by field after compare.py's normalising, every difference either a row
of the accepted-differences table in docs/compatibility.md or a failure.

* SaslHandshake and SaslAuthenticate at every version, good and bad logins, PLAIN (v0's bare tokens too) and
  SCRAM (the server's messages compared by their meaning: attributes, iterations, that the server nonce extends
  ours and that its signature verifies), and the requests Kafka refuses before a login.
* CreateAcls, DescribeAcls, DeleteAcls at every version: literal and prefixed ACLs, every filter kind, invalid
  bindings and filters, and a user without rights on the cluster.
* Every other client-facing API as alice, who may READ topic ``sec-read`` and topics prefixed ``sec-p``, WRITE
  ``sec-write``, DESCRIBE ``sec-desc``, READ group ``sec-group``, WRITE transactional id ``sec-tx`` and nothing else: Produce, Fetch, Metadata hiding
  topics, auto-creation needing CREATE, the group APIs' GROUP_AUTHORIZATION_FAILED, the admin APIs, ... at every
  version sofakafka advertises. (A PREFIXED topic ACL must not grant the group of that name: ``sec-p1``.)
"""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
import scramp

from sofakafka.client import AlterConfigOp, ConfigResourceType, KafkaClient
from sofakafka.client.errors import AuthenticationError
from sofakafka.client.security import ClientSecurity
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from sofakafka.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from sofakafka.protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from sofakafka.protocol.messages.alter_configs import AlterConfigsRequest
from sofakafka.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from sofakafka.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from sofakafka.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from sofakafka.protocol.messages.create_acls import CreateAclsRequest
from sofakafka.protocol.messages.create_delegation_token import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)
from sofakafka.protocol.messages.create_partitions import CreatePartitionsRequest
from sofakafka.protocol.messages.create_topics import CreateTopicsRequest
from sofakafka.protocol.messages.delete_acls import DeleteAclsRequest
from sofakafka.protocol.messages.delete_groups import DeleteGroupsRequest
from sofakafka.protocol.messages.delete_records import DeleteRecordsRequest
from sofakafka.protocol.messages.delete_topics import DeleteTopicsRequest
from sofakafka.protocol.messages.describe_acls import DescribeAclsRequest
from sofakafka.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from sofakafka.protocol.messages.describe_configs import DescribeConfigsRequest
from sofakafka.protocol.messages.describe_delegation_token import (
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
)
from sofakafka.protocol.messages.describe_groups import DescribeGroupsRequest
from sofakafka.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from sofakafka.protocol.messages.elect_leaders import ElectLeadersRequest
from sofakafka.protocol.messages.end_txn import EndTxnRequest
from sofakafka.protocol.messages.expire_delegation_token import (
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
)
from sofakafka.protocol.messages.fetch import FetchRequest
from sofakafka.protocol.messages.find_coordinator import FindCoordinatorRequest
from sofakafka.protocol.messages.heartbeat import HeartbeatRequest
from sofakafka.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from sofakafka.protocol.messages.init_producer_id import InitProducerIdRequest
from sofakafka.protocol.messages.leave_group import LeaveGroupRequest
from sofakafka.protocol.messages.list_groups import ListGroupsRequest
from sofakafka.protocol.messages.list_offset import ListOffsetRequest
from sofakafka.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from sofakafka.protocol.messages.metadata import MetadataRequest
from sofakafka.protocol.messages.offset_commit import OffsetCommitRequest
from sofakafka.protocol.messages.offset_delete import OffsetDeleteRequest
from sofakafka.protocol.messages.offset_fetch import OffsetFetchRequest
from sofakafka.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from sofakafka.protocol.messages.renew_delegation_token import (
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)
from sofakafka.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from sofakafka.protocol.messages.sasl_handshake import SaslHandshakeRequest
from sofakafka.protocol.messages.stop_replica import StopReplicaRequest
from sofakafka.protocol.messages.sync_group import SyncGroupRequest
from sofakafka.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from sofakafka.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from sofakafka.security.scram import make_credential
from sofakafka.security.tokens import token_hmac
from tests.conformance.compare import Exchange, Session, accepted_differences, advertised_by, compare
from tests.conformance.scenarios import (
    BROKER,
    BROKER_LOGGER,
    TOPIC,
    _join,
    acl_creation,
    acl_filter,
    create_topic,
    produce,
    records_for,
    v2_batch,
    wait_for_coordinator,
)
from tests.reference.java import run_main
from tests.reference.kafka import SECURE_ADMIN, SECURE_MASTER_KEY, SECURE_USER, SecuredBroker

pytestmark = pytest.mark.timeout(900)

ADMIN = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", *SECURE_ADMIN)
ALICE = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", *SECURE_USER)
SAM = ("sam", "sam-secret")  # a SCRAM user
ALICE_PRINCIPAL = f"User:{SECURE_USER[0]}"
# Kafka's wire codes (sofakafka/protocol/acl.py): resource types, pattern types, operations, permissions.
T_TOPIC, T_GROUP, T_CLUSTER, T_TXN = 2, 3, 4, 5
LITERAL, PREFIXED, MATCH, ANY = 3, 4, 2, 1
READ, WRITE, CREATE, DESCRIBE, ALTER, ALL = 3, 4, 5, 8, 7, 2
ALLOW, DENY = 3, 2
ALICE_ACLS = [acl_creation(T_TOPIC, "sec-read", LITERAL, ALICE_PRINCIPAL, READ),
              acl_creation(T_TOPIC, "sec-write", LITERAL, ALICE_PRINCIPAL, WRITE),
              acl_creation(T_TOPIC, "sec-desc", LITERAL, ALICE_PRINCIPAL, DESCRIBE),
              acl_creation(T_TOPIC, "sec-p", PREFIXED, ALICE_PRINCIPAL, READ),
              acl_creation(T_GROUP, "sec-group", LITERAL, ALICE_PRINCIPAL, READ),
              acl_creation(T_TXN, "sec-tx", LITERAL, ALICE_PRINCIPAL, WRITE)]
TOPICS = ("sec-read", "sec-write", "sec-desc", "sec-secret", "sec-p1")


@dataclass
class Run:
    """One broker's side of a comparison: every session it opens records into one list, in order."""

    broker: SecuredBroker
    exchanges: list[Exchange] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)

    def session(self, login: ClientSecurity | None = None) -> Session:
        s = Session(self.broker.host, self.broker.sasl_port, self.exchanges, login)
        self.sessions.append(s)
        return s

    def close(self) -> None:
        for s in self.sessions:
            s.close()


Scenario = Callable[[Run, dict[int, range]], None]


def same_answers(brokers: tuple[SecuredBroker, SecuredBroker], scenario: Scenario,
                 versions: dict[int, range]) -> None:
    runs = [Run(b) for b in brokers]
    try:
        for run in runs:
            scenario(run, versions)
    finally:
        for run in runs:
            run.close()
    problems, _ = compare(runs[0].exchanges, runs[1].exchanges, accepted_differences())
    assert not problems, (f"{len(problems)} difference(s) from Apache Kafka 2.6 not in docs/compatibility.md:\n"
                          + "\n".join(problems[:150]))


# ---- set-up, the same on both brokers (unrecorded) ----------------------------------------------------------

def add_scram_user(broker: SecuredBroker) -> None:
    """sam, as each broker's own tooling writes a SCRAM user: Kafka 2.6's ConfigCommand into ZooKeeper, ours
    through the protocol (sofakafka/cli/users.py's request)."""
    if broker.zk_connect is not None:
        run_main("kafka.admin.ConfigCommand", ["--zookeeper", broker.zk_connect, "--alter", "--entity-type", "users",
                                               "--entity-name", SAM[0], "--add-config",
                                               f"SCRAM-SHA-256=[iterations=4096,password={SAM[1]}],"
                                               f"SCRAM-SHA-512=[iterations=4096,password={SAM[1]}]"])
    else:
        with KafkaClient(broker.bootstrap, security=ADMIN) as client:
            results = client.incremental_alter_configs({(ConfigResourceType.USER, SAM[0]): [
                (m, AlterConfigOp.SET, make_credential(m, SAM[1], iterations=4096).to_kafka_string())
                for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")]})
            for r in results:
                r.raise_for_error()
    # The user is in force once a login works (Kafka reads it on the change notification).
    probe = Session(broker.host, broker.sasl_port, login=ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", *SAM))

    def logs_in() -> bool:
        try:
            probe.ask(MetadataRequest(topics=[]), 1)
            return True
        except (AuthenticationError, OSError):  # refused until the user arrives
            probe.close()
            return False
    Session(broker.host, broker.sasl_port).wait(f"{SAM[0]}'s SCRAM login", logs_in, 60)
    probe.close()


def prepare(broker: SecuredBroker) -> None:
    """Topics with records, alice's ACLs, two groups with committed offsets; waits until alice's rights hold."""
    add_scram_user(broker)
    admin = Session(broker.host, broker.sasl_port, login=ADMIN)
    for topic in TOPICS:
        create_topic(admin, topic, 1)
        produce(admin, topic, v2_batch(3), 3)
    r = admin.ask(CreateAclsRequest(creations=ALICE_ACLS), 1)
    assert all(c.error_code == 0 for c in r.results), r
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    for group in ("sec-group", "other"):
        wait_for_coordinator(admin, group)
        admin.ask(OffsetCommitRequest(group_id=group, generation_id=-1, topics=[T(name="sec-read", partitions=[
            T.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 2)
    alice = Session(broker.host, broker.sasl_port, login=ALICE)

    def visible() -> set[str]:
        return {t.name for t in alice.ask(MetadataRequest(topics=None, allow_auto_topic_creation=False), 4).topics}
    alice.wait("alice's ACLs in force", lambda: visible() == {"sec-read", "sec-write", "sec-desc", "sec-p1"})
    admin.close()
    alice.close()


@pytest.fixture(scope="module")
def brokers(secured_sofakafka_broker: SecuredBroker,
            secured_reference_kafka: SecuredBroker) -> Iterator[tuple[SecuredBroker, SecuredBroker]]:
    for b in (secured_sofakafka_broker, secured_reference_kafka):
        prepare(b)
    yield secured_sofakafka_broker, secured_reference_kafka


@pytest.fixture(scope="module")
def versions(brokers: tuple[SecuredBroker, SecuredBroker]) -> dict[int, range]:
    """The versions sofakafka advertises, per key (asked before any login, as clients do)."""
    ours = brokers[0]
    return {k: range(lo, hi + 1) for k, (lo, hi) in advertised_by(ours.host, ours.sasl_port).items()}


# ---- logins --------------------------------------------------------------------------------------------------

def _handshake(s: Session, mechanism: str) -> None:
    r = s.ask(SaslHandshakeRequest(mechanism=mechanism), 1)
    assert r.error_code == 0, r


def _scram(run: Run, v: int, mechanism: str, user: str, password: str, label: str) -> None:
    """A SCRAM login whose messages are compared by meaning (nonces, salts and proofs are random)."""
    s = run.session()
    _handshake(s, mechanism)
    client = scramp.ScramClient([mechanism], user, password)
    client_first = client.get_client_first()
    first = s.ask(SaslAuthenticateRequest(auth_bytes=client_first.encode()), v)
    assert isinstance(first, SaslAuthenticateResponse)
    observed: dict[str, object] = {"error_code": first.error_code, "has_message": first.error_message is not None}
    if first.error_code == 0:
        attrs = dict(part.split("=", 1) for part in first.auth_bytes.decode().split(","))
        observed |= {"attributes": sorted(attrs), "iterations": attrs.get("i"),
                     "nonce_extends_ours": attrs.get("r", "").startswith(client_first.split("r=")[1])}
        client.set_server_first(first.auth_bytes.decode())
        final = s.ask(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()), v)
        assert isinstance(final, SaslAuthenticateResponse)
        observed |= {"final_error_code": final.error_code, "final_has_message": final.error_message is not None,
                     "session_lifetime_ms": final.session_lifetime_ms if v >= 1 else None}
        if final.error_code == 0:
            try:
                client.set_server_final(final.auth_bytes.decode())
                observed["server_signature_verifies"] = True
            except scramp.ScramException:
                observed["server_signature_verifies"] = False
            s.call(f"{label}: a request once logged in", MetadataRequest(topics=[]), 1)
    s.note(label, ApiKey.SASL_AUTHENTICATE, v, observed)
    if observed.get("final_error_code", first.error_code):
        s.raw(f"{label}: a request after the failed login", ApiKey.METADATA, 1, struct.pack(">i", 0))
    s.close()


def logins(run: Run, versions: dict[int, range]) -> None:
    plain_ok, plain_bad = b"\0alice\0alice-secret", b"\0alice\0wrong"
    for v in versions[ApiKey.SASL_HANDSHAKE]:
        s = run.session()
        s.call("PLAIN", SaslHandshakeRequest(mechanism="PLAIN"), v)
        if v == 0:  # then bare tokens, no Kafka header
            s.token("v0: a bare PLAIN token", ApiKey.SASL_HANDSHAKE, v, plain_ok)
            s.call("v0: a request once logged in", MetadataRequest(topics=[]), 1)
        s.close()
        s = run.session()
        s.call("a mechanism not enabled", SaslHandshakeRequest(mechanism="GSSAPI"), v)
        s.raw("a request after an unsupported mechanism", ApiKey.METADATA, 1, struct.pack(">i", 0))
        s.close()
        if v == 0:
            s = run.session()
            s.call("PLAIN", SaslHandshakeRequest(mechanism="PLAIN"), v)
            s.token("v0: a bare PLAIN token with a wrong password", ApiKey.SASL_HANDSHAKE, v, plain_bad)
            s.close()
    for v in versions[ApiKey.SASL_AUTHENTICATE]:
        for label, token in (("PLAIN", plain_ok), ("PLAIN, wrong password", plain_bad),
                             ("PLAIN, unknown user", b"\0nobody\0alice-secret"), ("PLAIN, malformed", b"alice")):
            s = run.session()
            _handshake(s, "PLAIN")
            r = s.call(label, SaslAuthenticateRequest(auth_bytes=token), v)
            if r.error_code == 0:
                s.call(f"{label}: a request once logged in", MetadataRequest(topics=[]), 1)
                s.call(f"{label}: SaslHandshake again (re-authentication is off)",
                       SaslHandshakeRequest(mechanism="PLAIN"), 1)
                s.call(f"{label}: SaslAuthenticate again", SaslAuthenticateRequest(auth_bytes=token), v)
                s.raw(f"{label}: still logged in", ApiKey.METADATA, 1, struct.pack(">i", 0))
            else:
                s.raw(f"{label}: a request after the failed login", ApiKey.METADATA, 1, struct.pack(">i", 0))
            s.close()
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            _scram(run, v, mechanism, *SAM, label=mechanism)
            _scram(run, v, mechanism, SAM[0], "wrong", label=f"{mechanism}, wrong password")
            _scram(run, v, mechanism, "nobody", SAM[1], label=f"{mechanism}, unknown user")
    s = run.session()
    s.raw("Metadata before any SaslHandshake", ApiKey.METADATA, 1, struct.pack(">i", 0))
    s.close()
    s = run.session()
    token = SaslAuthenticateRequest(auth_bytes=plain_ok)
    s.raw("SaslAuthenticate before any SaslHandshake", ApiKey.SASL_AUTHENTICATE, 1, token.encode(1))
    s.close()


def test_logins_as_kafka(brokers: tuple[SecuredBroker, SecuredBroker], versions: dict[int, range]) -> None:
    same_answers(brokers, logins, versions)


# ---- the ACL APIs --------------------------------------------------------------------------------------------

def acl_apis(run: Run, versions: dict[int, range]) -> None:
    admin, alice = run.session(ADMIN), run.session(ALICE)
    for v in versions[ApiKey.CREATE_ACLS]:
        creations = [acl_creation(T_TOPIC, f"acl-{v}", LITERAL, "User:bob", READ),
                     acl_creation(T_TOPIC, f"acl-{v}", LITERAL, "User:bob", WRITE, DENY, host="10.0.0.1"),
                     acl_creation(T_GROUP, f"acl-g-{v}", LITERAL, "User:bob", ALL),
                     acl_creation(T_CLUSTER, "kafka-cluster", LITERAL, "User:bob", DESCRIBE),
                     acl_creation(T_TXN, f"acl-tx-{v}", LITERAL, "User:bob", WRITE)]
        if v >= 1:
            creations.append(acl_creation(T_TOPIC, f"acl-p{v}-", PREFIXED, "User:bob", CREATE))
        admin.call("create", CreateAclsRequest(creations=creations), v)
        admin.call("create the same again", CreateAclsRequest(creations=creations[:1]), v)
        admin.call("invalid bindings", CreateAclsRequest(creations=[
            acl_creation(T_CLUSTER, "not-the-cluster", LITERAL, "User:bob", ALTER),
            acl_creation(T_TOPIC, "", LITERAL, "User:bob", READ),
            acl_creation(T_TOPIC, "acl-x", LITERAL, "User:bob", 99)]), v)
        admin.call("a principal not in Type:name form", CreateAclsRequest(creations=[
            acl_creation(T_TOPIC, "acl-x", LITERAL, "bob", READ)]), v)
        filter_values = [("resource type ANY", acl_creation(ANY, "acl-x", LITERAL, "User:bob", READ)),
                         ("operation ANY", acl_creation(T_TOPIC, "acl-x", LITERAL, "User:bob", ANY)),
                         ("permission ANY", acl_creation(T_TOPIC, "acl-x", LITERAL, "User:bob", READ, ANY))]
        if v >= 1:
            filter_values += [("pattern MATCH", acl_creation(T_TOPIC, "acl-x", MATCH, "User:bob", READ)),
                              ("pattern ANY", acl_creation(T_TOPIC, "acl-x", ANY, "User:bob", READ))]
        for label, creation in filter_values:
            admin.call(f"a filter value in a binding: {label}", CreateAclsRequest(creations=[creation]), v)
        admin.call_or_closed("an UNKNOWN (0) resource type", CreateAclsRequest(creations=[
            creations[0], acl_creation(0, "acl-x", LITERAL, "User:bob", READ)]), v)
        alice.call("a user without ALTER on the cluster", CreateAclsRequest(creations=creations[:1]), v)
    every = max(versions[ApiKey.CREATE_ACLS])
    admin.wait("the new ACLs to be described", lambda: any(
        r.resource_name == f"acl-{every}" for r in admin.ask(DescribeAclsRequest(**acl_filter(1)), 1).resources))
    for v in versions[ApiKey.DESCRIBE_ACLS]:
        def describe(label: str, session: Session = admin, v: int = v, **fields: object) -> None:
            session.call_or_closed(label, DescribeAclsRequest(**acl_filter(v, **fields)), v)
        describe("every ACL")
        describe("one literal topic", resource_type_filter=T_TOPIC, resource_name_filter="acl-1",
                 pattern_type_filter=LITERAL)
        describe("by principal and operation", principal_filter="User:bob", operation=WRITE)
        describe("by host and permission", host_filter="10.0.0.1", permission_type=DENY)
        describe("groups", resource_type_filter=T_GROUP)
        describe("transactional ids", resource_type_filter=T_TXN)
        describe("nothing matches", principal_filter="User:nobody")
        describe("UNKNOWN resource type", resource_type_filter=0)
        describe("UNKNOWN operation", operation=0)
        describe("an unknown permission code", permission_type=42)
        if v >= 1:
            describe("MATCH a topic name", resource_type_filter=T_TOPIC, resource_name_filter="acl-p1-orders",
                     pattern_type_filter=MATCH)
            describe("prefixed only", pattern_type_filter=PREFIXED)
            describe("UNKNOWN pattern type", pattern_type_filter=0)
        describe("a user without DESCRIBE on the cluster", alice)
    F = DeleteAclsRequest.DeleteAclsFilter
    for v in versions[ApiKey.DELETE_ACLS]:
        def delete(label: str, *filters: dict[str, object], session: Session = admin, v: int = v) -> None:
            session.call_or_closed(label, DeleteAclsRequest(filters=[F(**acl_filter(v, **f)) for f in filters]), v)
        delete("one binding, and one filter matching nothing",
               {"resource_type_filter": T_TOPIC, "resource_name_filter": f"acl-{v}", "pattern_type_filter": LITERAL,
                "principal_filter": "User:bob", "operation": READ, "permission_type": ALLOW},
               {"principal_filter": "User:nobody"})
        delete("an UNKNOWN filter beside a good one", {"principal_filter": "User:nobody"}, {"operation": 0})
        delete("a user without ALTER on the cluster", {"principal_filter": "User:bob"}, session=alice)
        delete("every ACL of one resource", {"resource_type_filter": T_TOPIC, "resource_name_filter": f"acl-{v}"})
    admin.call("what is left", DescribeAclsRequest(**acl_filter(1, principal_filter="User:bob")), 1)


def test_acl_apis_as_kafka(brokers: tuple[SecuredBroker, SecuredBroker], versions: dict[int, range]) -> None:
    same_answers(brokers, acl_apis, versions)


# ---- delegation tokens ---------------------------------------------------------------------------------------
# A token's id, HMAC and times are new on every broker and every run: an answer that carries them is noted by what
# it means (the HMAC is HmacSHA512 of the id under the master key, the max and expiry relative to the issue time,
# ...); every error answer is compared whole.

LONG_MAX = 2**63 - 1
SAM_LOGIN = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", *SAM)
CreateRenewer = CreateDelegationTokenRequest.CreatableRenewers
TokenOwner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner


def _hmac_is_kafkas(token_id: str, mac: bytes) -> bool:
    return mac == token_hmac(token_id, SECURE_MASTER_KEY)


def _created(r: CreateDelegationTokenResponse) -> dict[str, object]:
    return {"error_code": r.error_code, "owner": f"{r.principal_type}:{r.principal_name}",
            "token_id_chars": len(r.token_id), "hmac_is_hmac_sha512_of_the_id": _hmac_is_kafkas(r.token_id, r.hmac),
            "max_after_issue": r.max_timestamp_ms - r.issue_timestamp_ms,
            "expiry_after_issue": r.expiry_timestamp_ms - r.issue_timestamp_ms}


def _moved(r: RenewDelegationTokenResponse | ExpireDelegationTokenResponse, token: CreateDelegationTokenResponse,
           period_ms: int) -> dict[str, object]:
    """A renewal's or expiry's answer: the new expiry is now + the period (now is within 60 s of the token's
    issue), or the token's max when that comes first."""
    after_issue = r.expiry_timestamp_ms - token.issue_timestamp_ms
    return {"error_code": r.error_code, "expiry_is_the_max": r.expiry_timestamp_ms == token.max_timestamp_ms,
            "expiry_is_now_plus_the_period": period_ms <= after_issue <= period_ms + 60_000}


def _described(r: DescribeDelegationTokenResponse) -> dict[str, object]:
    return {"error_code": r.error_code, "tokens": sorted(
        (f"{t.principal_type}:{t.principal_name}", [f"{w.principal_type}:{w.principal_name}" for w in t.renewers],
         _hmac_is_kafkas(t.token_id, t.hmac), t.max_timestamp - t.issue_timestamp,
         t.expiry_timestamp <= t.max_timestamp) for t in r.tokens)}


def _token_logs_in(run: Run, token: CreateDelegationTokenResponse, label: str, v: int) -> None:
    """Whether a SCRAM-SHA-512 login with the token (``tokenauth=true``) gets through, and a request after it."""
    s = run.session(ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", token.token_id,
                                   base64.b64encode(token.hmac).decode(), token_auth=True))
    try:
        s.ask(MetadataRequest(topics=[]), 1)
        logged_in = True
    except (AuthenticationError, OSError):
        logged_in = False
    s.note(label, ApiKey.SASL_AUTHENTICATE, v, {"logged_in": logged_in})
    s.close()


def delegation_tokens(run: Run, versions: dict[int, range]) -> None:
    sam, alice, admin = run.session(SAM_LOGIN), run.session(ALICE), run.session(ADMIN)
    create, renew, expire, describe = (ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
                                       ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN)
    for v in versions[create]:
        made = sam.ask(CreateDelegationTokenRequest(renewers=[CreateRenewer(principal_type="User", principal_name="alice")],
                                                    max_lifetime_ms=3_600_000), v)
        assert isinstance(made, CreateDelegationTokenResponse) and made.error_code == 0, made
        sam.note("create: alice renews, an hour", create, v, _created(made))
        default = sam.ask(CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1), v)
        assert isinstance(default, CreateDelegationTokenResponse)
        sam.note("create: the broker's max lifetime", create, v, _created(default))
        capped = sam.ask(CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=LONG_MAX), v)
        assert isinstance(capped, CreateDelegationTokenResponse)
        sam.note("create: a longer max lifetime than the broker's", create, v, _created(capped))
        sam.call("create: a renewer that is not a user", CreateDelegationTokenRequest(
            renewers=[CreateRenewer(principal_type="Group", principal_name="g")], max_lifetime_ms=1000), v)

        for s, period, label in ((alice, 60_000, "renew by a renewer"),
                                 (sam, 10 * 365 * 86_400_000, "renew past the max")):
            r = s.ask(RenewDelegationTokenRequest(hmac=made.hmac, renew_period_ms=period), v)
            assert isinstance(r, RenewDelegationTokenResponse)
            s.note(label, renew, v, _moved(r, made, period))
        r = sam.ask(RenewDelegationTokenRequest(hmac=default.hmac, renew_period_ms=-1), v)
        assert isinstance(r, RenewDelegationTokenResponse)
        sam.note("renew by the broker's expiry time", renew, v, _moved(r, default, 86_400_000))
        admin.call("renew by a super user who neither owns nor renews it", RenewDelegationTokenRequest(
            hmac=made.hmac, renew_period_ms=1000), v)
        sam.call("renew an unknown token", RenewDelegationTokenRequest(hmac=b"\x01" * 64, renew_period_ms=1000), v)

        owners_of: list[tuple[Session, list[str] | None, str]] = [
            (sam, None, "the owner, every owner"), (alice, None, "a renewer, every owner"),
            (alice, ["sam"], "a renewer, sam's"), (alice, ["alice"], "a renewer, her own"), (alice, [], "no owner"),
            (admin, None, "a super user, every owner")]
        for s, owners, label in owners_of:
            d = s.ask(DescribeDelegationTokenRequest(owners=None if owners is None else [
                TokenOwner(principal_type="User", principal_name=o) for o in owners]), v)
            assert isinstance(d, DescribeDelegationTokenResponse)
            s.note(f"describe: {label}", describe, v, _described(d))

        _token_logs_in(run, made, "a token login", v)
        token = run.session(ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", made.token_id,
                                           base64.b64encode(made.hmac).decode(), token_auth=True))
        token.call("logged in with a token: its owner's Metadata", MetadataRequest(topics=[]), 1)
        token.call("logged in with a token: create", CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1), v)
        token.call("logged in with a token: renew", RenewDelegationTokenRequest(hmac=made.hmac, renew_period_ms=1), v)
        token.call("logged in with a token: expire", ExpireDelegationTokenRequest(hmac=made.hmac,
                                                                                  expiry_time_period_ms=-1), v)
        token.call("logged in with a token: describe", DescribeDelegationTokenRequest(owners=None), v)
        token.close()

        e = sam.ask(ExpireDelegationTokenRequest(hmac=made.hmac, expiry_time_period_ms=5_000), v)
        assert isinstance(e, ExpireDelegationTokenResponse)
        sam.note("expire in 5 s", expire, v, _moved(e, made, 5_000))
        admin.call("expire by a super user who neither owns nor renews it", ExpireDelegationTokenRequest(
            hmac=made.hmac, expiry_time_period_ms=-1), v)
        e = alice.ask(ExpireDelegationTokenRequest(hmac=made.hmac, expiry_time_period_ms=-1), v)
        assert isinstance(e, ExpireDelegationTokenResponse)
        alice.note("expire now, by a renewer", expire, v, _moved(e, made, 0))
        sam.call("renew the removed token", RenewDelegationTokenRequest(hmac=made.hmac, renew_period_ms=1000), v)
        sam.call("expire the removed token", ExpireDelegationTokenRequest(hmac=made.hmac, expiry_time_period_ms=-1), v)
        _token_logs_in(run, made, "a removed token's login", v)

        short = sam.ask(CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=1), v)
        assert isinstance(short, CreateDelegationTokenResponse)
        sam.note("create: a max lifetime of 1 ms", create, v, _created(short))
        time.sleep(0.05)
        sam.call("renew a token past its max", RenewDelegationTokenRequest(hmac=short.hmac, renew_period_ms=1000), v)
        sam.call("expire a token past its max", ExpireDelegationTokenRequest(hmac=short.hmac,
                                                                             expiry_time_period_ms=-1), v)
        _token_logs_in(run, short, "the login of a token past its max, not yet removed", v)
        for t in (default, capped):
            sam.ask(ExpireDelegationTokenRequest(hmac=t.hmac, expiry_time_period_ms=-1), v)

    # Last, as nothing after it may look at the token: Kafka's now + period overflows a Java long.
    v = versions[renew][-1]
    last = sam.ask(CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1), v)
    assert isinstance(last, CreateDelegationTokenResponse)
    r = sam.ask(RenewDelegationTokenRequest(hmac=last.hmac, renew_period_ms=LONG_MAX), v)
    assert isinstance(r, RenewDelegationTokenResponse)
    sam.note("renew by the largest period", renew, v, _moved(r, last, 0) | {
        "expiry_after_issue": r.expiry_timestamp_ms - last.issue_timestamp_ms >= 0})


def test_delegation_tokens_as_kafka(brokers: tuple[SecuredBroker, SecuredBroker], versions: dict[int, range]) -> None:
    same_answers(brokers, delegation_tokens, versions)


# ---- a user with few rights, every other API ---------------------------------------------------------------

LIMITED: dict[int, Callable[[Session, range], None]] = {}


def limited(key: ApiKey) -> Callable[[Callable[[Session, range], None]], Callable[[Session, range], None]]:
    def register(fn: Callable[[Session, range], None]) -> Callable[[Session, range], None]:
        LIMITED[key] = fn
        return fn
    return register


@limited(ApiKey.METADATA)
def metadata_as_alice(s: Session, versions: range) -> None:
    T = MetadataRequest.MetadataRequestTopic
    for v in versions:
        auto = v < 4
        s.call("every topic (only those alice may describe)", MetadataRequest(
            topics=[] if v == 0 else None, allow_auto_topic_creation=auto), v)
        s.call("a topic alice may not describe", MetadataRequest(topics=[T(name="sec-secret")],
                                                                  allow_auto_topic_creation=auto), v)
        s.call("topics alice may and may not describe", MetadataRequest(
            topics=[T(name="sec-read"), T(name="sec-desc"), T(name="sec-secret"), T(name="sec-p1")],
            allow_auto_topic_creation=auto), v)
        s.call("an unknown topic alice may not describe", MetadataRequest(topics=[T(name="nope-missing")],
                                                                           allow_auto_topic_creation=auto), v)
        if v >= 4:
            s.call("auto-creation without CREATE", MetadataRequest(topics=[T(name=f"sec-pnew-{v}")],
                                                                   allow_auto_topic_creation=True), v)
        if v >= 8:
            s.call("authorized operations", MetadataRequest(
                topics=[T(name="sec-read"), T(name="sec-write"), T(name="sec-p1")], allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True, include_topic_authorized_operations=True), v)


@limited(ApiKey.PRODUCE)
def produce_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        for topic, label in (("sec-write", "with WRITE"), ("sec-read", "with READ only"),
                             ("sec-secret", "without rights"), ("nope-missing", "unknown topic, no rights")):
            produce(s, topic, records_for(v), v, label=label)
        if v >= 3:
            produce(s, "sec-write", v2_batch(3, producer_id=99999, producer_epoch=0, base_sequence=0), v,
                    label="idempotent, without IDEMPOTENT_WRITE")


@limited(ApiKey.FETCH)
def fetch_as_alice(s: Session, versions: range) -> None:
    F = FetchRequest.FetchableTopic
    P = F.FetchPartition

    def req(topics: tuple[str, ...], replica_id: int = -1) -> FetchRequest:
        return FetchRequest(replica_id=replica_id, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                            session_id=0, epoch=-1, topics=[F(name=t, fetch_partitions=[
                                P(partition_index=0, fetch_offset=0, log_start_offset=-1, max_bytes=1 << 20,
                                  current_leader_epoch=-1)]) for t in topics])
    for v in versions:
        s.call("READ, prefixed READ, WRITE only, no rights, unknown",
               req(("sec-read", "sec-p1", "sec-write", "sec-secret", "nope-missing")), v)
        s.call("as a follower without CLUSTER_ACTION", req(("sec-read",), replica_id=0), v)


@limited(ApiKey.LIST_OFFSETS)
def list_offsets_as_alice(s: Session, versions: range) -> None:
    T = ListOffsetRequest.ListOffsetTopic
    P = T.ListOffsetPartition
    for v in versions:
        s.call("DESCRIBE via READ, DESCRIBE, none, unknown", ListOffsetRequest(replica_id=-1, topics=[
            T(name=t, partitions=[P(partition_index=0, timestamp=-1, max_num_offsets=1 if v == 0 else 0)])
            for t in ("sec-read", "sec-desc", "sec-secret", "nope-missing")]), v)


@limited(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def offset_for_leader_epoch_as_alice(s: Session, versions: range) -> None:
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    P = T.OffsetForLeaderPartition
    for v in versions:
        topics = [T(name=t, partitions=[P(partition_index=0, leader_epoch=0, current_leader_epoch=-1)])
                  for t in ("sec-read", "sec-secret", "nope-missing")]
        s.call("DESCRIBE, none, unknown", OffsetForLeaderEpochRequest(replica_id=-1, topics=topics), v)
        if v >= 3:
            s.call("as a follower without CLUSTER_ACTION", OffsetForLeaderEpochRequest(replica_id=0, topics=topics[:1]), v)


@limited(ApiKey.FIND_COORDINATOR)
def find_coordinator_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        s.call("a group alice may read", FindCoordinatorRequest(key="sec-group", key_type=0), v)
        s.call("another group", FindCoordinatorRequest(key="other", key_type=0), v)
        s.call("a group named like a prefixed topic ACL", FindCoordinatorRequest(key="sec-p1", key_type=0), v)
        if v >= 1:
            s.call("a transactional id", FindCoordinatorRequest(key="tx", key_type=1), v)


@limited(ApiKey.JOIN_GROUP)
def group_membership_as_alice(s: Session, versions: range) -> None:
    """JoinGroup at every version, and SyncGroup, Heartbeat, LeaveGroup of a group alice may not read."""
    for v in versions:
        _join(s, v, "other", "another group")
        _join(s, v, "sec-p1", "a group named like a prefixed topic ACL")
    for v in range(0, 6):
        s.call("sync, another group", SyncGroupRequest(group_id="other", generation_id=1, member_id="m",
                                                      protocol_type="consumer", protocol_name="range",
                                                      assignments=[]), v)
    for v in range(0, 5):
        s.call("heartbeat, another group", HeartbeatRequest(group_id="other", generation_id=1, member_id="m"), v)
        if v >= 3:
            s.call("leave, another group", LeaveGroupRequest(group_id="other", members=[
                LeaveGroupRequest.MemberIdentity(member_id="m")]), v)
        else:
            s.call("leave, another group", LeaveGroupRequest(group_id="other", member_id="m"), v)


@limited(ApiKey.OFFSET_COMMIT)
def offsets_as_alice(s: Session, versions: range) -> None:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    FT = OffsetFetchRequest.OffsetFetchRequestTopic

    def commit(group: str, *topics: str) -> OffsetCommitRequest:
        return OffsetCommitRequest(group_id=group, generation_id=-1, member_id="", retention_time_ms=-1, topics=[
            T(name=t, partitions=[P(partition_index=0, committed_offset=2, commit_timestamp=-1)]) for t in topics])
    for v in versions:
        s.call("another group", commit("other", "sec-read"), v)
        if v >= 1:  # (v0 commits go to ZooKeeper in Kafka 2.6: docs/compatibility.md rows 16-17)
            s.call("alice's group: READ, prefixed READ, WRITE only, none, unknown",
                   commit("sec-group", "sec-read", "sec-p1", "sec-write", "sec-secret", "nope-missing"), v)
    for v in range(0, 8):
        s.call("fetch, another group", OffsetFetchRequest(group_id="other", topics=[
            FT(name="sec-read", partition_indexes=[0])]), v)
        if v >= 1:
            s.call("fetch, alice's group", OffsetFetchRequest(group_id="sec-group", topics=[
                FT(name=t, partition_indexes=[0]) for t in ("sec-read", "sec-write", "sec-secret")]), v)
        if v >= 2:
            s.call("fetch all of alice's group", OffsetFetchRequest(group_id="sec-group", topics=None), v)


@limited(ApiKey.DESCRIBE_GROUPS)
def describe_groups_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        s.call("alice's group and another", DescribeGroupsRequest(groups=["sec-group", "other"],
                                                                  include_authorized_operations=v >= 3), v)


@limited(ApiKey.LIST_GROUPS)
def list_groups_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        s.call("only the groups alice may describe", ListGroupsRequest(), v)


@limited(ApiKey.DELETE_GROUPS)
def delete_groups_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        s.call("READ is not DELETE; another group", DeleteGroupsRequest(groups_names=["sec-group", "other"]), v)


@limited(ApiKey.OFFSET_DELETE)
def offset_delete_as_alice(s: Session, versions: range) -> None:
    D = OffsetDeleteRequest.OffsetDeleteRequestTopic
    for v in versions:
        for group in ("sec-group", "other"):
            s.call(f"group {group}", OffsetDeleteRequest(group_id=group, topics=[D(name="sec-read", partitions=[
                D.OffsetDeleteRequestPartition(partition_index=0)])]), v)


@limited(ApiKey.CREATE_TOPICS)
def create_topics_as_alice(s: Session, versions: range) -> None:
    T = CreateTopicsRequest.CreatableTopic
    for v in versions:
        s.call("without CREATE", CreateTopicsRequest(topics=[
            T(name=f"sec-new-{v}", num_partitions=1, replication_factor=1),
            T(name="sec-read", num_partitions=1, replication_factor=1)], timeout_ms=30000,
            validate_only=v >= 1), v)


@limited(ApiKey.DELETE_TOPICS)
def delete_topics_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        s.call("READ is not DELETE; none; unknown", DeleteTopicsRequest(
            topic_names=["sec-read", "sec-secret", "nope-missing"], timeout_ms=30000), v)


@limited(ApiKey.CREATE_PARTITIONS)
def create_partitions_as_alice(s: Session, versions: range) -> None:
    T = CreatePartitionsRequest.CreatePartitionsTopic
    for v in versions:
        s.call("without ALTER", CreatePartitionsRequest(topics=[T(name=t, count=3, assignments=None) for t in (
            "sec-read", "sec-secret", "nope-missing")], timeout_ms=30000, validate_only=True), v)


@limited(ApiKey.DELETE_RECORDS)
def delete_records_as_alice(s: Session, versions: range) -> None:
    T = DeleteRecordsRequest.DeleteRecordsTopic
    for v in versions:
        s.call("without DELETE", DeleteRecordsRequest(topics=[T(name=t, partitions=[
            T.DeleteRecordsPartition(partition_index=0, offset=1)]) for t in ("sec-read", "sec-secret", "nope-missing")],
            timeout_ms=30000), v)


@limited(ApiKey.INIT_PRODUCER_ID)
def init_producer_id_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        s.call("idempotent, without IDEMPOTENT_WRITE", InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1), v)
        s.call("transactional, without WRITE on the id", InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1), v)


@limited(ApiKey.ADD_PARTITIONS_TO_TXN)
def add_partitions_to_txn_as_alice(s: Session, versions: range) -> None:
    """Refused before the coordinator is asked: the transactional id, then each topic (an internal one always)."""
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    for v in versions:
        s.call("without WRITE on the transactional id", AddPartitionsToTxnRequest(
            transactional_id="tx", producer_id=1, producer_epoch=0, topics=[T(name="sec-write", partitions=[0])]), v)
        s.call("WRITE, READ only, no rights, unknown, internal", AddPartitionsToTxnRequest(
            transactional_id="sec-tx", producer_id=1, producer_epoch=0, topics=[
                T(name=n, partitions=[0]) for n in ("sec-write", "sec-read", "sec-secret", "nope-missing",
                                                    "__consumer_offsets")]), v)


@limited(ApiKey.ADD_OFFSETS_TO_TXN)
def add_offsets_to_txn_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        s.call("without WRITE on the transactional id", AddOffsetsToTxnRequest(
            transactional_id="tx", producer_id=1, producer_epoch=0, group_id="sec-group"), v)
        s.call("without READ on the group", AddOffsetsToTxnRequest(
            transactional_id="sec-tx", producer_id=1, producer_epoch=0, group_id="other"), v)


@limited(ApiKey.END_TXN)
def end_txn_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        for committed in (True, False):
            s.call("without WRITE on the transactional id", EndTxnRequest(
                transactional_id="tx", producer_id=1, producer_epoch=0, committed=committed), v)


@limited(ApiKey.TXN_OFFSET_COMMIT)
def txn_offset_commit_as_alice(s: Session, versions: range) -> None:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition

    def req(txn: str, group: str, *topics: str) -> TxnOffsetCommitRequest:
        return TxnOffsetCommitRequest(transactional_id=txn, group_id=group, producer_id=1, producer_epoch=0,
                                      topics=[T(name=t, partitions=[P(partition_index=0, committed_offset=1)])
                                              for t in topics])
    for v in versions:
        s.call("without WRITE on the transactional id", req("tx", "sec-group", "sec-read"), v)
        s.call("without READ on the group", req("sec-tx", "other", "sec-read"), v)
        s.call("topics without READ (WRITE only, none, unknown)",
               req("sec-tx", "sec-group", "sec-write", "sec-secret", "nope-missing"), v)


@limited(ApiKey.WRITE_TXN_MARKERS)
def write_txn_markers_as_alice(s: Session, versions: range) -> None:
    M = WriteTxnMarkersRequest.WritableTxnMarker
    for v in versions:
        s.call("without CLUSTER_ACTION", WriteTxnMarkersRequest(markers=[M(
            producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=[M.WritableTxnMarkerTopic(name="sec-write", partition_indexes=[0])])]), v)


@limited(ApiKey.DESCRIBE_CONFIGS)
def describe_configs_as_alice(s: Session, versions: range) -> None:
    R = DescribeConfigsRequest.DescribeConfigsResource
    for v in versions:  # (one broker-side resource per request: results are keyed by name, "0" twice is not)
        s.call("topics and the broker", DescribeConfigsRequest(resources=[
            R(resource_type=TOPIC, resource_name="sec-read", configuration_keys=["retention.ms"]),
            R(resource_type=TOPIC, resource_name="nope-missing", configuration_keys=None),
            R(resource_type=BROKER, resource_name="0", configuration_keys=["num.partitions"])]), v)
        s.call("broker logger", DescribeConfigsRequest(resources=[
            R(resource_type=BROKER_LOGGER, resource_name="0", configuration_keys=["root"])]), v)


@limited(ApiKey.ALTER_CONFIGS)
def alter_configs_as_alice(s: Session, versions: range) -> None:
    R = AlterConfigsRequest.AlterConfigsResource
    C = R.AlterableConfig
    for v in versions:
        s.call("topic and broker", AlterConfigsRequest(resources=[
            R(resource_type=TOPIC, resource_name="sec-read", configs=[C(name="retention.ms", value="1000")]),
            R(resource_type=BROKER, resource_name="0", configs=[C(name="log.cleaner.threads", value="1")])],
            validate_only=True), v)


@limited(ApiKey.INCREMENTAL_ALTER_CONFIGS)
def incremental_alter_configs_as_alice(s: Session, versions: range) -> None:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    C = R.AlterableConfig
    for v in versions:
        s.call("topic and broker", IncrementalAlterConfigsRequest(resources=[
            R(resource_type=TOPIC, resource_name="sec-read", configs=[C(name="retention.ms", config_operation=0,
                                                                         value="1000")]),
            R(resource_type=BROKER, resource_name="0", configs=[C(name="log.cleaner.threads", config_operation=0,
                                                                   value="1")])], validate_only=True), v)
        s.call("broker logger", IncrementalAlterConfigsRequest(resources=[
            R(resource_type=BROKER_LOGGER, resource_name="0", configs=[C(name="kafka.server", config_operation=0,
                                                                          value="INFO")])], validate_only=True), v)


@limited(ApiKey.DESCRIBE_LOG_DIRS)
def describe_log_dirs_as_alice(s: Session, versions: range) -> None:
    D = DescribeLogDirsRequest.DescribableLogDirTopic
    for v in versions:
        s.call("without DESCRIBE on the cluster", DescribeLogDirsRequest(topics=[
            D(topic="sec-read", partition_index=[0])]), v)


@limited(ApiKey.ALTER_REPLICA_LOG_DIRS)
def alter_replica_log_dirs_as_alice(s: Session, versions: range) -> None:
    D = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    for v in versions:
        s.call("without ALTER on the cluster", AlterReplicaLogDirsRequest(dirs=[D(path="/anywhere", topics=[
            D.AlterReplicaLogDirTopic(name="sec-read", partitions=[0, 1])])]), v)


@limited(ApiKey.ELECT_LEADERS)
def elect_leaders_as_alice(s: Session, versions: range) -> None:
    T = ElectLeadersRequest.TopicPartitions
    for v in versions:
        s.call("without ALTER on the cluster", ElectLeadersRequest(election_type=0, timeout_ms=30000, topic_partitions=[
            T(topic="sec-read", partition_id=[0])]), v)


@limited(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
def reassignments_as_alice(s: Session, versions: range) -> None:
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    for v in versions:
        s.call("without ALTER on the cluster", AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[
            T(name="sec-read", partitions=[T.ReassignablePartition(partition_index=0, replicas=[0])])]), v)
        s.call("list, without DESCRIBE on the cluster", ListPartitionReassignmentsRequest(timeout_ms=30000,
                                                                                         topics=None), 0)


@limited(ApiKey.STOP_REPLICA)
def stop_replica_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        s.call("without CLUSTER_ACTION", StopReplicaRequest(controller_id=0, controller_epoch=1), v)


@limited(ApiKey.CONTROLLED_SHUTDOWN)
def controlled_shutdown_as_alice(s: Session, versions: range) -> None:
    for v in versions:
        s.call("without CLUSTER_ACTION", ControlledShutdownRequest(broker_id=7), v)


@limited(ApiKey.ALTER_CLIENT_QUOTAS)
def client_quotas_as_alice(s: Session, versions: range) -> None:
    A = AlterClientQuotasRequest.EntryData
    C = DescribeClientQuotasRequest.ComponentData
    for v in versions:
        s.call("alter without ALTER_CONFIGS", AlterClientQuotasRequest(entries=[
            A(entity=[A.EntityData(entity_type="user", entity_name="alice")],
              ops=[A.OpData(key="producer_byte_rate", value=1024.0, remove=False)])]), v)
        s.call("describe without DESCRIBE_CONFIGS", DescribeClientQuotasRequest(
            components=[C(entity_type="user", match_type=0, match="alice")], strict=False), v)


# Keys a scenario of another key covers; and the keys whose own tests above cover them.
COVERED = {ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_FETCH,
           ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.DESCRIBE_CLIENT_QUOTAS}
OWN_TESTS = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.CREATE_ACLS,
             ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS, ApiKey.CREATE_DELEGATION_TOKEN,
             ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN}


def test_every_advertised_key_is_asked_by_a_user_without_rights(versions: dict[int, range]) -> None:
    missing = set(versions) - set(LIMITED) - COVERED - OWN_TESTS
    assert not missing, f"no limited-user scenario for {sorted(ApiKey(k).name for k in missing)}"


@pytest.mark.parametrize("key", sorted(LIMITED), ids=lambda k: ApiKey(k).name)
def test_a_user_without_rights_is_told_what_kafka_tells(key: int, brokers: tuple[SecuredBroker, SecuredBroker],
                                                        versions: dict[int, range]) -> None:
    def as_alice(run: Run, versions: dict[int, range]) -> None:
        LIMITED[key](run.session(ALICE), versions[key])
    same_answers(brokers, as_alice, versions)
