"""Bad input on secured listeners closes only the connection that sent it; the SASL framings and KIP-368
re-authentication, on the wire.

One broker for the module (SASL and TLS listeners, PLAIN users from JAAS, ``connections.max.reauth.ms`` of
3 s, a 3 s login timeout). Raw sockets with our codec send what stock clients never would; after each bad
connection an authenticated client on another connection still gets its answers.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from sofakafka.client import KafkaClient
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest
from sofakafka.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sofakafka.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from sofakafka.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from sofakafka.security.client_config import client_security_from_properties
from tests.integration.security_setup import (
    PLAIN_USER,
    SecureBroker,
    running_secure_broker,
    used_by_this_test,
)
from tests.integration.wire import call, recv_frame, send

REAUTH_MS = 3000
WAIT_S = 30.0


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    with running_secure_broker(tmp_path_factory.mktemp("secure-bad"), {
            "connections.max.reauth.ms": str(REAUTH_MS), "authorizer.class.name": "",
            "max.connections.per.ip.overrides": "127.0.0.3:2"}) as sb:
        yield sb


@pytest.fixture
def sb(secure: SecureBroker) -> Iterator[SecureBroker]:
    with used_by_this_test(secure):
        yield secure
    # Every bad connection closed alone: a logged-in client still works, and nothing was a traceback.
    security = client_security_from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                               "sasl.username": PLAIN_USER[0], "sasl.password": PLAIN_USER[1]})
    with KafkaClient(secure.address("SASL_PLAINTEXT"), security=security) as client:
        assert client.metadata().brokers
    assert "Traceback" not in secure.broker.log_text()


def connect(sb: SecureBroker, listener: str = "SASL_PLAINTEXT") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", sb.ports[listener]), timeout=WAIT_S)
    return s


def closed_by_peer(s: socket.socket) -> bool:
    """True once the broker closed the connection (EOF or reset), bounded by the socket timeout."""
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def wait_for_log(sb: SecureBroker, mark: int, needle: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while needle not in sb.broker.log_text()[mark:]:
        assert time.monotonic() < deadline, f"{needle!r} not logged:\n{sb.broker.log_tail()}"
        time.sleep(0.05)


def plain_login(s: socket.socket, version: int = 1) -> SaslAuthenticateResponse:
    hs = call(s, SaslHandshakeRequest(mechanism="PLAIN"), 1, 1)
    assert isinstance(hs, SaslHandshakeResponse) and hs.error_code == 0
    token = f"\x00{PLAIN_USER[0]}\x00{PLAIN_USER[1]}".encode()
    resp = call(s, SaslAuthenticateRequest(auth_bytes=token), version, 2)
    assert isinstance(resp, SaslAuthenticateResponse) and resp.error_code == 0, resp
    return resp


def test_a_request_before_the_sasl_handshake_closes_that_connection(sb: SecureBroker) -> None:
    mark = len(sb.broker.log_text())
    with connect(sb) as s:
        assert call(s, ApiVersionsRequest(), 0, 1).error_code == 0  # allowed before login
        send(s, MetadataRequest(topics=None), 1, 2)
        assert closed_by_peer(s)
    wait_for_log(sb, mark, "before authentication completed")


def test_a_sasl_token_before_the_handshake_closes_that_connection(sb: SecureBroker) -> None:
    mark = len(sb.broker.log_text())
    with connect(sb) as s:
        send(s, SaslAuthenticateRequest(auth_bytes=b"\x00plainuser\x00plain-secret"), 1, 1)
        assert closed_by_peer(s)
    wait_for_log(sb, mark, "expected SaslHandshake (SaslAuthenticate v1)")
    raw = connect(sb, "SASL_SSL")  # the same over TLS
    with ssl.create_default_context(cafile=sb.pki.ca).wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        send(tls, SaslAuthenticateRequest(auth_bytes=b"x"), 0, 1)
        assert closed_by_peer(tls)


def test_an_oversized_frame_before_login_closes_that_connection(sb: SecureBroker) -> None:
    mark = len(sb.broker.log_text())
    with connect(sb) as s:
        s.sendall(struct.pack(">i", 524288 + 1) + b"\x00" * 1024)
        assert closed_by_peer(s)
    wait_for_log(sb, mark, "sasl.server.max.receive.size is 524288")
    # At the limit the frame is read (and, not being a SASL request, refused as one).
    with connect(sb) as s:
        s.sendall(struct.pack(">i", 524288) + b"\x00" * 524288)
        assert closed_by_peer(s)


def test_garbage_in_the_tls_handshake_closes_that_connection(sb: SecureBroker) -> None:
    mark = len(sb.broker.log_text())
    for listener in ("SSL", "SASL_SSL"):
        with connect(sb, listener) as s:
            s.sendall(b"\x16\x03\x01\x00\x05hello" + b"GARBAGE" * 100)
            assert closed_by_peer(s)
    wait_for_log(sb, mark, "on SASL_SSL: TLS handshake failed")


def test_a_client_that_never_finishes_logging_in_is_closed_after_the_timeout(sb: SecureBroker) -> None:
    mark = len(sb.broker.log_text())
    with connect(sb) as s:
        hs = call(s, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1, 1)
        assert hs.error_code == 0
        # ... and then nothing: the broker gives up after sofakafka.authentication.timeout.ms (3 s here).
        assert closed_by_peer(s)
    wait_for_log(sb, mark, "SASL authentication not complete after 3000 ms")
    # A TLS client that never starts its handshake is dropped too.
    with connect(sb, "SSL") as s:
        assert closed_by_peer(s)
    wait_for_log(sb, mark, "TLS handshake failed: not complete after 3000 ms")


def test_handshake_v0_is_followed_by_bare_tokens(sb: SecureBroker) -> None:
    with connect(sb) as s:
        hs = call(s, SaslHandshakeRequest(mechanism="PLAIN"), 0, 1)
        assert hs.error_code == 0 and "PLAIN" in hs.mechanisms
        token = f"\x00{PLAIN_USER[0]}\x00{PLAIN_USER[1]}".encode()
        s.sendall(struct.pack(">i", len(token)) + token)
        assert recv_frame(s) == b""  # PLAIN's empty answer, as a bare frame
        md = call(s, MetadataRequest(topics=None), 1, 2)
        assert isinstance(md, MetadataResponse) and md.brokers
    with connect(sb) as s:  # a wrong password on v0: the connection just closes (v0 cannot say why)
        call(s, SaslHandshakeRequest(mechanism="PLAIN"), 0, 1)
        bad = f"\x00{PLAIN_USER[0]}\x00nope".encode()
        s.sendall(struct.pack(">i", len(bad)) + bad)
        assert closed_by_peer(s)


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_then_closed(sb: SecureBroker) -> None:
    with connect(sb) as s:
        hs = call(s, SaslHandshakeRequest(mechanism="GSSAPI"), 1, 1)
        assert hs.error_code == 33 and hs.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert closed_by_peer(s)


def test_sessions_last_connections_max_reauth_ms_and_can_be_renewed(sb: SecureBroker) -> None:
    with connect(sb) as s:
        resp = plain_login(s, version=1)
        assert resp.session_lifetime_ms == REAUTH_MS
        # Re-authenticate (KIP-368): a new handshake and login on the same connection renew the session.
        started = time.monotonic()
        plain_login(s, version=2)
        assert call(s, MetadataRequest(topics=None), 1, 3).brokers
        # Past the session's end, the next request closes the connection.
        time.sleep(max(0.0, REAUTH_MS / 1000 + 0.5 - (time.monotonic() - started)))
        send(s, MetadataRequest(topics=None), 1, 4)
        assert closed_by_peer(s)


def test_librdkafka_reauthenticates_and_keeps_producing(sb: SecureBroker) -> None:
    conf = {"bootstrap.servers": sb.address("SASL_SSL"), "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": PLAIN_USER[0], "sasl.password": PLAIN_USER[1], "ssl.ca.location": sb.pki.ca}
    mark = len(sb.broker.log_text())
    p = Producer(conf)
    delivered: list[object] = []
    end = time.monotonic() + 2.5 * REAUTH_MS / 1000  # across two session ends
    while time.monotonic() < end:
        p.produce("reauth-topic", b"x", on_delivery=lambda err, _m: delivered.append(err))
        p.poll(0.2)
    assert p.flush(WAIT_S) == 0
    assert delivered and all(err is None for err in delivered)
    assert "session expired" not in sb.broker.log_text()[mark:]


def test_acl_apis_without_an_authorizer_answer_security_disabled(sb: SecureBroker) -> None:
    from sofakafka.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
    from sofakafka.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse

    with connect(sb) as s:
        plain_login(s)
        described = call(s, DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                                principal_filter=None, host_filter=None, operation=1,
                                                permission_type=1), 1, 3)
        assert isinstance(described, DescribeAclsResponse) and described.error_code == 54  # SECURITY_DISABLED
        created = call(s, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:x", host="*",
            operation=3, permission_type=3)]), 1, 4)
        assert isinstance(created, CreateAclsResponse) and [r.error_code for r in created.results] == [54]


def test_unfinished_tls_handshakes_count_against_the_address_limit_and_are_given_back(sb: SecureBroker) -> None:
    """127.0.0.3 may hold 2 connections: two TLS handshakes left unfinished hold both (the second, at one below
    the limit, is accepted), a third is refused at once; when the login timeout ends the two, their slots come
    back and a real TLS client from that address is served."""
    mark = len(sb.broker.log_text())
    pending = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.3", 0))
        s.settimeout(WAIT_S)
        s.connect(("127.0.0.1", sb.ports["SSL"]))
        pending.append(s)
    try:
        wait_for_log(sb, mark, "rejected connection from 127.0.0.3 on SSL: the address already has the configured "
                               "maximum of 2 connections (max.connections.per.ip.overrides)")
        assert sb.broker.log_text()[mark:].count("rejected connection from 127.0.0.3") == 1
        for s in pending[:2]:  # closed by the 3 s login timeout, counted out
            assert closed_by_peer(s)
        wait_for_log(sb, mark, "TLS handshake failed: not complete after 3000 ms")
        raw = socket.socket()
        raw.bind(("127.0.0.3", 0))
        raw.settimeout(WAIT_S)
        raw.connect(("127.0.0.1", sb.ports["SSL"]))
        with ssl.create_default_context(cafile=sb.pki.ca).wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert call(tls, ApiVersionsRequest(), 0).error_code == 0
    finally:
        for s in pending:
            s.close()
