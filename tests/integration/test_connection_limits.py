"""Connection limits and slow clients, with real sockets against broker processes.

At ``max.connections`` the listener stops accepting (the next client waits in the TCP backlog, unanswered)
while the connections already open are served, and it accepts again when one closes; a connection over
``max.connections.per.ip`` (or its override) is closed at once; a listener's own
``listener.name.<listener>.max.connections`` holds that listener only; the four limits change on a running broker
through IncrementalAlterConfigs (a lowered ``max.connections`` closes the least recently active connections); ``connections.max.idle.ms`` closes idle
connections, slowloris ones included (bytes that never complete a frame are not activity);
``socket.request.max.bytes`` refuses a larger frame at its size field; a client that does not read its responses
is closed past ``sofakafka.connection.max.response.backlog.bytes``; a frame announced huge and sent slowly costs
the broker only what arrived; a broker out of descriptors pauses accepting and recovers. Each refusal is in the
broker's log with its reason. No timing assertions: waits have bounds, and "not answered" means not answered
within a short bound while an open connection is answered at once.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import BrokerProcess, free_port
from tests.integration.helpers import wait_for

API_VERSIONS = 18
METADATA = 3
WAIT_S = 30.0


def request(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    client = b"limits"
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client + body
    return struct.pack(">i", len(payload)) + payload


def api_versions(correlation_id: int = 1) -> bytes:
    return request(API_VERSIONS, 0, correlation_id)


def read_frame(s: socket.socket) -> bytes | None:
    """The next response, or None if the broker closed the connection."""
    head = recv_exactly(s, 4)
    if head is None:
        return None
    body = recv_exactly(s, struct.unpack(">i", head)[0])
    return body


def recv_exactly(s: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def answered(s: socket.socket, correlation_id: int = 1, timeout: float = WAIT_S) -> bool:
    s.settimeout(timeout)
    s.sendall(api_versions(correlation_id))
    reply = read_frame(s)
    return reply is not None and struct.unpack(">i", reply[:4])[0] == correlation_id


def connect(broker: BrokerProcess, source: str | None = None) -> socket.socket:
    s = socket.socket()
    if source is not None:
        s.bind((source, 0))
    s.settimeout(WAIT_S)
    s.connect((broker.host, broker.port))
    return s


def closed_by_broker(s: socket.socket, timeout: float = WAIT_S) -> bool:
    """True once the broker has closed ``s`` (EOF or reset) within ``timeout``."""
    s.settimeout(timeout)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for s in opened:
        s.close()


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("limited"), {
        "max.connections": "5",
        "max.connections.per.ip": "3",
        "max.connections.per.ip.overrides": "127.0.0.2:4",
        "socket.request.max.bytes": "1000",
    })
    broker.start()
    yield broker
    broker.kill()


def test_at_max_connections_the_listener_stops_accepting_serves_the_others_and_resumes(
        limited: BrokerProcess, sockets: list[socket.socket]) -> None:
    # 5 = max.connections: 3 from 127.0.0.1 (its per-ip limit) and 2 from 127.0.0.2.
    for source in ["127.0.0.1"] * 3 + ["127.0.0.2"] * 2:
        sockets.append(connect(limited, source))
        assert answered(sockets[-1])
    waiting = connect(limited, "127.0.0.2")  # the TCP handshake completes in the backlog ...
    sockets.append(waiting)
    waiting.sendall(api_versions(7))
    waiting.settimeout(1.5)
    with pytest.raises(TimeoutError):
        waiting.recv(4)  # ... but nobody accepts it
    for i, s in enumerate(sockets[:5]):
        assert answered(s, 100 + i), "an open connection stopped being served at the limit"
    wait_for("the reason in the log", lambda: "stops accepting: max.connections (5) reached" in limited.log_text()
             or None, WAIT_S)
    sockets[0].close()  # load drops: the waiting client is accepted and its request answered
    waiting.settimeout(WAIT_S)
    reply = read_frame(waiting)
    assert reply is not None and struct.unpack(">i", reply[:4])[0] == 7
    wait_for("the listener to say it accepts again", lambda: "accepts again" in limited.log_text() or None, WAIT_S)


def test_a_connection_over_its_address_limit_is_closed_with_a_logged_reason(
        limited: BrokerProcess, sockets: list[socket.socket]) -> None:
    for _ in range(3):  # max.connections.per.ip is 3
        sockets.append(connect(limited, "127.0.0.1"))
        assert answered(sockets[-1])
    over = connect(limited, "127.0.0.1")
    sockets.append(over)
    assert closed_by_broker(over)
    assert answered(sockets[0])
    wait_for("the rejection in the log", lambda: ("rejected connection from 127.0.0.1" in limited.log_text()
             and "maximum of 3 connections (max.connections.per.ip)" in limited.log_text()) or None, WAIT_S)
    # Edge of the override (127.0.0.2:4): the fourth is accepted, the fifth is not (max.connections is 5 in
    # all, and these two addresses are alone on this broker now).
    sockets[2].close()

    def a_new_one_is_answered() -> bool:
        with connect(limited, "127.0.0.1") as probe:
            return answered(probe, 9, 5)

    wait_for("the closed connection to be counted out", lambda: a_new_one_is_answered() or None, WAIT_S)
    for s in sockets:
        s.close()
    del sockets[:]
    for _ in range(4):
        sockets.append(connect(limited, "127.0.0.2"))
        assert answered(sockets[-1])
    fifth = connect(limited, "127.0.0.2")
    sockets.append(fifth)
    assert closed_by_broker(fifth)
    wait_for("the override's rejection in the log",
             lambda: "maximum of 4 connections (max.connections.per.ip.overrides)" in limited.log_text() or None,
             WAIT_S)


@pytest.mark.parametrize(("size", "accepted"), [(999, True), (1000, True), (1001, False)])
def test_socket_request_max_bytes_at_its_edge(limited: BrokerProcess, sockets: list[socket.socket],
                                              size: int, accepted: bool) -> None:
    s = connect(limited)
    sockets.append(s)
    # An ApiVersions v0 frame padded to ``size`` bytes (the broker ignores what follows a v0 body).
    frame = api_versions(3)[4:]
    s.sendall(struct.pack(">i", size) + frame + b"\0" * (size - len(frame)))
    s.settimeout(WAIT_S)
    reply = read_frame(s)
    assert (reply is not None) == accepted
    if not accepted:
        assert "request frame of 1001 bytes, socket.request.max.bytes is 1000" in limited.log_text()


@pytest.fixture(scope="module")
def idle_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("idle"), {
        "connections.max.idle.ms": "1500",
        "sofakafka.connection.max.response.backlog.bytes": "300000",
    })
    broker.start()
    yield broker
    broker.kill()


def test_idle_and_slowloris_connections_are_closed_busy_ones_are_not(
        idle_broker: BrokerProcess, sockets: list[socket.socket]) -> None:
    idle = connect(idle_broker)
    busy = connect(idle_broker)
    slow = connect(idle_broker)
    sockets += [idle, busy, slow]
    assert answered(idle) and answered(busy)
    slow.sendall(struct.pack(">i", 200))  # a frame of 200 bytes announced, then a byte at a time
    deadline = time.monotonic() + WAIT_S
    slow_closed = idle_closed = False
    n = 0
    while time.monotonic() < deadline and not (slow_closed and idle_closed):
        n += 1
        assert answered(busy, 1000 + n, 5), "a connection with a request every 0.3 s was closed"
        try:
            slow.send(b"\0")
        except OSError:
            slow_closed = True
        idle_closed = idle_closed or closed_by_broker(idle, 0.01)
        slow_closed = slow_closed or closed_by_broker(slow, 0.01)
        time.sleep(0.3)
    assert idle_closed and slow_closed
    assert n * 0.3 > 1.5  # the busy one outlived the idle timeout
    assert "(connections.max.idle.ms)" in idle_broker.log_text()


def test_a_client_that_never_reads_its_responses_is_closed_past_the_backlog(
        idle_broker: BrokerProcess, sockets: list[socket.socket]) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once: the broker has to buffer
    s.connect((idle_broker.host, idle_broker.port))
    sockets.append(s)
    bystander = connect(idle_broker)
    sockets.append(bystander)
    # Metadata v1 for all topics (null array), over and over; the responses are never read.
    metadata_all = request(METADATA, 1, 0, struct.pack(">i", -1))
    s.setblocking(False)
    sent = 0
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and "responses wait to be sent" not in idle_broker.log_text():
        try:
            sent += s.send(metadata_all * 50)
        except BlockingIOError:
            time.sleep(0.05)
        except OSError:
            break
        assert answered(bystander, 5, 5)
    wait_for("the backlog reason in the log", lambda: "sofakafka.connection.max.response.backlog.bytes is 300000"
             in idle_broker.log_text() or None, WAIT_S)
    assert sent > 0
    assert answered(bystander, 6)


def test_a_huge_frame_sent_slowly_costs_only_what_arrived(tmp_path: Path, sockets: list[socket.socket]) -> None:
    broker = BrokerProcess(tmp_path / "b", {"socket.request.max.bytes": str(100 * 1024 * 1024)})
    broker.start()
    try:
        before = rss_kb(broker.proc.pid)  # type: ignore[union-attr]
        for _ in range(50):
            s = connect(broker)
            sockets.append(s)
            s.sendall(struct.pack(">i", 100 * 1024 * 1024) + api_versions(1)[4:] + b"\0" * 20000)
        probe = connect(broker)
        sockets.append(probe)
        assert answered(probe)  # the broker read all of those before this is answered
        grown_mb = (rss_kb(broker.proc.pid) - before) / 1024  # type: ignore[union-attr]
        # 50 frames of 100 MB announced: allocating what was announced would be 5,000 MB.
        assert grown_mb < 200, f"the broker grew by {grown_mb:.0f} MB"
    finally:
        broker.kill()


def test_out_of_descriptors_the_listener_pauses_serves_the_open_ones_and_recovers(
        tmp_path: Path, sockets: list[socket.socket]) -> None:
    class Limited(BrokerProcess):
        def command(self) -> list[str]:
            return ["prlimit", "--nofile=160:160", *super().command()]

    broker = Limited(tmp_path / "b", {"log.max.open.segment.files": "10"})
    broker.start()
    try:
        opened: list[socket.socket] = []
        for _ in range(300):  # well past what 160 descriptors allow
            s = socket.socket()
            s.settimeout(WAIT_S)
            s.connect((broker.host, broker.port))
            opened.append(s)
        sockets.extend(opened)
        wait_for("the broker to say it cannot accept", lambda: "cannot accept" in broker.log_text() or None, WAIT_S)
        served = [s for s in opened[:50] if answered(s, 2, 5)]
        assert len(served) == 50, "connections open before the limit stopped being served"
        for s in opened[50:]:
            s.close()
        fresh = connect(broker)
        sockets.append(fresh)
        assert answered(fresh, 3), "the listener did not recover when connections closed"
        assert broker.alive()
        assert "open files: limit 160" in broker.log_text()
    finally:
        broker.kill()


def test_a_consumer_far_behind_costs_one_fetch_of_memory_not_its_backlog(tmp_path: Path) -> None:
    """40 MB stored, read from offset 0 by fetches of at most 1 MB: every answer is bounded by the fetch's
    max bytes (whole batches: KIP-74's first one may exceed it) and the broker does not hold the backlog."""
    from sofakafka.client import KafkaClient, NewTopic
    from sofakafka.protocol.records import Record

    broker = BrokerProcess(tmp_path / "b", {})
    broker.start()
    try:
        with KafkaClient(broker.bootstrap) as client:
            client.create_topics([NewTopic("behind", 1, 1)])
            value = b"x" * 100_000
            for _ in range(40):
                client.produce("behind", 0, [Record(0, -1, None, value) for _ in range(10)])
            before = rss_kb(broker.proc.pid)  # type: ignore[union-attr]
            offset, largest, fetched_bytes = 0, 0, 0
            while True:
                result = client.fetch("behind", 0, offset, max_wait_ms=0, max_bytes=1_000_000)
                if not result.records:
                    break
                size = sum(len(r.value or b"") for r in result.records)
                largest = max(largest, size)
                fetched_bytes += size
                offset = result.next_offset
            assert offset == 400 and fetched_bytes == 40_000_000
            assert largest <= 1_000_000  # each answer within the fetch's max bytes (batches of 1 MB here)
            grown_mb = (rss_kb(broker.proc.pid) - before) / 1024  # type: ignore[union-attr]
            assert grown_mb < 30, f"the broker grew by {grown_mb:.0f} MB reading a 40 MB backlog"
    finally:
        broker.kill()


# -- a listener's own limit and dynamic limits (two listeners: INTERNAL, the protected inter-broker one, and
# EXTERNAL) ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    base = tmp_path_factory.mktemp("listeners")
    external = free_port()
    broker = BrokerProcess(base, {"max.connections": "4", "listener.name.external.max.connections": "2"})
    broker.overrides.update({
        "listeners": f"INTERNAL://{broker.host}:{broker.port},EXTERNAL://{broker.host}:{external}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    })
    broker.start()
    yield broker, external
    broker.kill()


def connect_to(host: str, port: int, source: str | None = None) -> socket.socket:
    s = socket.socket()
    if source is not None:
        s.bind((source, 0))
    s.settimeout(WAIT_S)
    s.connect((host, port))
    return s


def not_answered_yet(s: socket.socket, correlation_id: int) -> bool:
    """Send a request on a connection the broker has not accepted: True if no answer comes within a short
    bound (the connection waits in the listen backlog; the request is answered once it is accepted)."""
    s.sendall(api_versions(correlation_id))
    s.settimeout(1.5)
    try:
        return s.recv(4) == b""
    except TimeoutError:
        return True
    finally:
        s.settimeout(WAIT_S)


def answered_late(s: socket.socket, correlation_id: int) -> bool:
    reply = read_frame(s)
    return reply is not None and struct.unpack(">i", reply[:4])[0] == correlation_id


def test_a_listener_limit_at_its_edge_holds_that_listener_only(
        two_listeners: tuple[BrokerProcess, int], sockets: list[socket.socket]) -> None:
    broker, external = two_listeners
    # One below the listener's 2, then equal: both accepted.
    for _ in range(2):
        sockets.append(connect_to(broker.host, external))
        assert answered(sockets[-1])
    # One above: it waits, unanswered, while the other listener accepts (4 = max.connections is not reached).
    waiting = connect_to(broker.host, external)
    sockets.append(waiting)
    assert not_answered_yet(waiting, 7)
    sockets.append(connect_to(broker.host, broker.port))
    assert answered(sockets[-1])
    assert answered(sockets[0], 8), "an open connection stopped being served at the listener's limit"
    wait_for("the reason in the log", lambda: "listener EXTERNAL stops accepting: "
             "listener.name.external.max.connections (2) reached" in broker.log_text() or None, WAIT_S)
    sockets[0].close()  # a slot frees on that listener: the waiting client is accepted and answered
    assert answered_late(waiting, 7)


def test_dynamic_connection_limits_apply_to_a_running_broker(
        two_listeners: tuple[BrokerProcess, int], sockets: list[socket.socket]) -> None:
    """IncrementalAlterConfigs over one admin connection on the protected listener (it counts, but is never the
    one closed): a raised listener limit lets the waiting client in; max.connections lowered under the open
    count closes the least recently active connection; raised again, it lets the next one in; a per-address
    override set dynamically closes a connection over it at once."""
    from sofakafka.client.connection import BrokerConnection
    from sofakafka.protocol.messages.incremental_alter_configs import (
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

    broker, external = two_listeners
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    admin = BrokerConnection(broker.host, broker.port, client_id="limits-admin")
    admin.connect()

    def alter(name: str, configs: dict[str, str], applied: str) -> None:
        request = IncrementalAlterConfigsRequest(resources=[resource(
            resource_type=4, resource_name=name,
            configs=[resource.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])])
        before = broker.log_text().count("connection limits now:")
        response = admin.send(request, 0)
        assert isinstance(response, IncrementalAlterConfigsResponse)
        assert [(r.error_code, r.error_message) for r in response.responses] == [(0, None)]

        def in_force() -> bool | None:
            text = broker.log_text()
            last = text[text.rfind("connection limits now:"):]
            return (text.count("connection limits now:") > before and applied in last) or None

        wait_for(f"the broker to apply {configs}", in_force, WAIT_S)

    try:
        for _ in range(2):  # EXTERNAL at its static limit of 2 (the previous test's sockets are closing)
            sockets.append(connect_to(broker.host, external))
            assert answered(sockets[-1])
        third = connect_to(broker.host, external)
        sockets.append(third)
        assert not_answered_yet(third, 30)
        alter("0", {"listener.name.external.max.connections": "3"}, "per listener {'EXTERNAL': 3}")
        assert answered_late(third, 30)
        # 3 on EXTERNAL + the admin = 4 = max.connections: the next one waits.
        fourth = connect_to(broker.host, external)
        assert not_answered_yet(fourth, 40)
        for i, s in enumerate(sockets):  # activity in order: sockets[0] is the least recently active
            assert answered(s, 50 + i)
        alter("", {"max.connections": "3"}, "connection limits now: max.connections 3,")
        assert closed_by_broker(sockets[0])
        assert answered(sockets[1], 61) and answered(sockets[2], 62)
        wait_for("the reason in the log", lambda: "max.connections lowered to 3" in broker.log_text() or None, WAIT_S)
        assert not_answered_yet(fourth, 41)  # 2 + the admin = 3: at the new limit, still waiting
        alter("", {"max.connections": "4"}, "connection limits now: max.connections 4,")
        assert answered_late(fourth, 40)
        sockets.append(fourth)
        # A per-address override set dynamically: its edge (the first accepted, the second closed at once).
        alter("", {"max.connections": "100", "max.connections.per.ip.overrides": "127.0.0.2:1"},
              "overrides '127.0.0.2:1'")
        alter("0", {"listener.name.external.max.connections": "100"}, "per listener {'EXTERNAL': 100}")
        sockets.append(connect_to(broker.host, external, "127.0.0.2"))
        assert answered(sockets[-1])
        over = connect_to(broker.host, external, "127.0.0.2")
        sockets.append(over)
        assert closed_by_broker(over)
        wait_for("the override's rejection in the log", lambda: "maximum of 1 connections "
                 "(max.connections.per.ip.overrides)" in broker.log_text() or None, WAIT_S)
    finally:
        admin.close()
