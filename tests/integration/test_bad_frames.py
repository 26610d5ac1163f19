"""Bad input on the wire: each bad frame gets its Kafka answer or a closed connection, never a dead broker.

Frames are built byte by byte here (not with our codec) so the test does not share a bug with the broker's
decoder. Every test also keeps a bystander connection, opened before the bad one, and checks afterwards
that it and a brand-new connection are still served: a bad client may lose its own connection, nothing more.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.conftest import BrokerProcess, api_versions_ok
from tests.integration.helpers import wait_for

API_VERSIONS = 18
METADATA = 3
UNSUPPORTED_VERSION = 35
REPLY_TIMEOUT_S = 20.0


def header(api_key: int, api_version: int, correlation_id: int, client_id: bytes = b"bad-frames") -> bytes:
    """Request header v1 (key, version, correlation id, nullable string client id)."""
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def read_frame(s: socket.socket) -> bytes | None:
    """The next response frame, or None when the broker closed the connection."""
    head = recv_exactly(s, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return recv_exactly(s, size)


def recv_exactly(s: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def assert_closed_without_reply(s: socket.socket) -> None:
    try:
        reply = read_frame(s)
    except TimeoutError:
        pytest.fail("the broker neither answered nor closed the connection")
    assert reply is None, f"expected the connection closed, got a response {reply!r}"


def api_versions_on(s: socket.socket, correlation_id: int) -> None:
    s.sendall(frame(header(API_VERSIONS, 0, correlation_id)))
    reply = read_frame(s)
    assert reply is not None, "bystander connection was closed"
    assert struct.unpack_from(">ih", reply) == (correlation_id, 0)


@pytest.fixture
def bystander(broker: BrokerProcess) -> Iterator[socket.socket]:
    s = socket.create_connection((broker.host, broker.port), timeout=REPLY_TIMEOUT_S)
    api_versions_on(s, 1)
    try:
        yield s
        # The checks every test shares: the broker still serves the connection that did nothing wrong...
        api_versions_on(s, 2)
        # ...and new ones.
        assert api_versions_ok(broker.host, broker.port)
        assert broker.proc is not None and broker.proc.poll() is None
    finally:
        s.close()


@pytest.fixture
def bad_client(broker: BrokerProcess) -> Iterator[socket.socket]:
    s = socket.create_connection((broker.host, broker.port), timeout=REPLY_TIMEOUT_S)
    try:
        yield s
    finally:
        s.close()


def parse_api_versions_v0(reply: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    correlation_id, error_code, count = struct.unpack_from(">ihi", reply)
    apis = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", reply, 10 + 6 * i)
        apis[key] = (lo, hi)
    return correlation_id, error_code, apis


def test_api_versions_of_an_unknown_version_answers_unsupported_version_with_the_api_list(
    bystander: socket.socket, bad_client: socket.socket
) -> None:
    """KIP-511: the answer is a v0 body carrying UNSUPPORTED_VERSION and our ranges, so the client can retry."""
    # ApiVersions from v3 on has the flexible header v2: client id, then an empty tagged-field section.
    bad_client.sendall(frame(header(API_VERSIONS, 99, 42) + b"\x00"))
    reply = read_frame(bad_client)
    assert reply is not None
    correlation_id, error_code, apis = parse_api_versions_v0(reply)
    assert (correlation_id, error_code) == (42, UNSUPPORTED_VERSION)
    assert apis[API_VERSIONS][0] == 0 and apis[API_VERSIONS][1] >= 3
    # The connection stays usable: a client downgrades and asks again on it.
    api_versions_on(bad_client, 43)


def test_unknown_api_key_closes_only_that_connection(
    bystander: socket.socket, bad_client: socket.socket
) -> None:
    bad_client.sendall(frame(header(9999, 0, 5)))
    assert_closed_without_reply(bad_client)


def test_unknown_version_of_a_known_api_closes_the_connection(
    bystander: socket.socket, bad_client: socket.socket
) -> None:
    """Metadata v99: there is no response layout to carry an error in, so Kafka closes; so do we."""
    bad_client.sendall(frame(header(METADATA, 99, 6) + struct.pack(">i", -1)))
    assert_closed_without_reply(bad_client)


def test_body_shorter_than_its_fields_closes_the_connection(
    bystander: socket.socket, bad_client: socket.socket
) -> None:
    """Metadata v1 whose topic array claims 1000 names and carries none."""
    bad_client.sendall(frame(header(METADATA, 1, 7) + struct.pack(">i", 1000)))
    assert_closed_without_reply(bad_client)


def test_header_cut_short_closes_the_connection(bystander: socket.socket, bad_client: socket.socket) -> None:
    bad_client.sendall(frame(b"\x00\x12\x00"))
    assert_closed_without_reply(bad_client)


def test_string_length_past_the_frame_closes_the_connection(
    bystander: socket.socket, bad_client: socket.socket
) -> None:
    """A client id whose length says 300 bytes in a frame of 20."""
    bad_client.sendall(frame(struct.pack(">hhih", API_VERSIONS, 0, 8, 300) + b"x" * 10))
    assert_closed_without_reply(bad_client)


def test_negative_frame_size_closes_the_connection(
    bystander: socket.socket, bad_client: socket.socket
) -> None:
    bad_client.sendall(struct.pack(">i", -5) + b"garbage")
    assert_closed_without_reply(bad_client)


def test_frame_over_socket_request_max_bytes_closes_before_the_body(
    bystander: socket.socket, bad_client: socket.socket
) -> None:
    """Only the size is sent: the broker must refuse on the size alone, not wait to buffer 100 MB."""
    default_socket_request_max_bytes = 104857600
    bad_client.sendall(struct.pack(">i", default_socket_request_max_bytes + 1))
    assert_closed_without_reply(bad_client)


def test_garbage_after_a_valid_frame_answers_the_frame_then_closes(
    bystander: socket.socket, bad_client: socket.socket
) -> None:
    garbage = frame(b"\xff" * 12)
    bad_client.sendall(frame(header(API_VERSIONS, 0, 77)) + garbage)
    reply = read_frame(bad_client)
    assert reply is not None, "the valid request before the garbage was not answered"
    assert struct.unpack_from(">ih", reply) == (77, 0)
    assert_closed_without_reply(bad_client)


def test_client_that_hangs_up_mid_frame_does_not_disturb_others(
    broker: BrokerProcess, bystander: socket.socket
) -> None:
    with socket.create_connection((broker.host, broker.port), timeout=REPLY_TIMEOUT_S) as s:
        s.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x01")


def test_small_socket_request_max_bytes_is_enforced(broker_factory: object) -> None:
    """A request just over a configured limit is refused, one just under it is served."""
    assert callable(broker_factory)
    small: BrokerProcess = broker_factory({"socket.request.max.bytes": "1024"})
    padding_for = 1024 - len(header(API_VERSIONS, 0, 1, b""))
    with socket.create_connection((small.host, small.port), timeout=REPLY_TIMEOUT_S) as s:
        # A client id of the right length brings the frame to exactly the limit: served.
        s.sendall(frame(header(API_VERSIONS, 0, 1, b"c" * padding_for)))
        reply = read_frame(s)
        assert reply is not None and struct.unpack_from(">ih", reply) == (1, 0)
        s.sendall(frame(header(API_VERSIONS, 0, 2, b"c" * (padding_for + 1))))
        assert_closed_without_reply(s)
    assert api_versions_ok(small.host, small.port)


def test_stock_client_round_trip_after_bad_clients(broker: BrokerProcess, topic_name: str) -> None:
    """After (in file order) every kind of bad frame above, a stock client still produces and consumes."""
    for bad in (frame(header(9999, 0, 1)), struct.pack(">i", -1), frame(b"\xff" * 3)):
        with socket.create_connection((broker.host, broker.port), timeout=REPLY_TIMEOUT_S) as s:
            s.sendall(bad)
            assert_closed_without_reply(s)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False, acks=-1)
    try:
        metadata = producer.send(topic_name, key=b"k", value=b"still here", partition=0).get(timeout=30)
        assert metadata.offset == 0
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        consumer.assign([TopicPartition(topic_name, 0)])
        got: list[bytes] = []

        def poll() -> list[bytes] | None:
            got.extend(m.value for batch in consumer.poll(timeout_ms=500).values() for m in batch)
            return got or None

        assert wait_for("the record", poll) == [b"still here"]
    finally:
        consumer.close()


def test_idle_connection_is_closed_after_connections_max_idle_ms(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """A client that connects and goes quiet is dropped, as by Kafka's idle sweep."""
    b = broker_factory({"connections.max.idle.ms": "1000"})
    with socket.create_connection((b.host, b.port), timeout=REPLY_TIMEOUT_S) as idle:
        idle.sendall(frame(header(API_VERSIONS, 0, 1)))
        assert read_frame(idle) is not None
        # Nothing more is sent: within the socket timeout (20 s, far above the 1 s limit) it must close.
        assert_closed_without_reply(idle)
    assert api_versions_ok(b.host, b.port)
