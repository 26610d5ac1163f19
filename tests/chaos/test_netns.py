"""The chaos network does what the nemesis relies on, with real namespaces, veth pairs and sockets."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from tests.chaos.netns import ChaosNetwork, Node, available

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


def serve(node: Node, port: int) -> subprocess.Popen[bytes]:
    """An echo-once server inside ``node``'s namespace, bound to its address."""
    code = textwrap.dedent(f"""
        import socket
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(({node.address!r}, {port}))
        s.listen(16)
        print("ready", flush=True)
        while True:
            c, _ = s.accept()
            c.sendall(b"hello from {node.name}")
            c.close()
    """)
    proc = subprocess.Popen([*node.exec_prefix(), sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    with proc.stdout:
        assert proc.stdout.readline().strip() == b"ready"
    return proc


def reach_from(node: Node | None, target: Node, port: int, timeout: float = 1.5) -> bool:
    code = textwrap.dedent(f"""
        import socket, sys
        try:
            with socket.create_connection(({target.address!r}, {port}), timeout={timeout}) as s:
                sys.exit(0 if s.recv(64).startswith(b"hello") else 2)
        except OSError:
            sys.exit(1)
    """)
    prefix = node.exec_prefix() if node is not None else []
    return subprocess.run([*prefix, sys.executable, "-c", code], timeout=30).returncode == 0


@pytest.fixture
def net() -> Iterator[ChaosNetwork]:
    with ChaosNetwork.create(["a", "b", "c"]) as network:
        yield network


def test_nodes_reach_each_other_from_their_own_addresses(net: ChaosNetwork) -> None:
    a, b = net.nodes["a"], net.nodes["b"]
    assert a.address.startswith("127.") and a.address != b.address
    server = serve(a, 40001)
    try:
        assert reach_from(b, a, 40001)
        assert reach_from(None, a, 40001)  # the test process, on the bridge
        with socket.create_connection((a.address, 40001), timeout=5) as s:
            assert s.getsockname()[0] == f"{net.subnet}.254"
    finally:
        server.kill()
        server.wait()


def test_a_partition_cuts_one_pair_and_heals(net: ChaosNetwork) -> None:
    a, b, c = net.nodes["a"], net.nodes["b"], net.nodes["c"]
    server = serve(a, 40002)
    try:
        net.partition("a", "b")
        assert not reach_from(b, a, 40002)
        assert reach_from(c, a, 40002)  # only that pair
        assert reach_from(None, a, 40002)
        net.heal()
        assert reach_from(b, a, 40002)
    finally:
        server.kill()
        server.wait()


def test_an_isolated_node_hears_nobody_until_healed(net: ChaosNetwork) -> None:
    a, c = net.nodes["a"], net.nodes["c"]
    server = serve(a, 40003)
    try:
        net.isolate("a")
        start = time.monotonic()
        assert not reach_from(None, a, 40003, timeout=1.0)
        assert time.monotonic() - start >= 1.0  # silence, not a refusal
        assert not reach_from(c, a, 40003, timeout=1.0)
        net.heal()
        assert reach_from(None, a, 40003, timeout=5.0)
        assert reach_from(c, a, 40003, timeout=5.0)
    finally:
        server.kill()
        server.wait()


def test_closing_leaves_nothing_behind() -> None:
    net = ChaosNetwork.create(["x"])
    names = [net.bridge, net.nodes["x"].namespace, net.nodes["x"].host_link]
    net.partition  # noqa: B018 - exists
    net.close()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    routes = subprocess.run(["ip", "route", "show", "table", "local"], capture_output=True, text=True).stdout
    assert not any(n in links or n in spaces for n in names)
    assert f"{net.subnet}.0/24" not in routes
