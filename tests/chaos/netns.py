"""A private network for a chaos run: one Linux network namespace per node, joined to a bridge by veth pairs.

Every node (ZooKeeper, each broker) lives in its own namespace with one address of a loopback-range /24
(127.X.Y.0/24, picked free for the run) on its end of a veth pair; the other end is enclosed in a bridge in the
test's own namespace, which has address .254, so the test process (clients, nemesis, checker) reaches every
node while the nodes' traffic to each other leaves from their own addresses and can be cut per pair.

127/8 is normally local to a namespace's ``lo`` (table ``local`` routes all of it there), so each namespace and
the test's own get a more specific route for the run's /24 in table ``local`` pointing at the veth/bridge, and
``route_localnet`` on those interfaces only (never ``all``): nothing outside the run's /24 changes, and deleting
the bridge and the namespaces takes the routes with them.

Faults: ``partition(a, b)`` adds a blackhole route for each side's address in the other's namespace (packets
between them are dropped: established connections stall and retransmit; a new connection from either side
fails, from the other side it times out); ``isolate(a)`` takes the node's bridge port down (silence in every
direction); ``heal()`` undoes both. Needs root and iproute2 (``ip``); this kernel has no tc actions or
iptables, which routes and link state do without.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field


class NetworkError(RuntimeError):
    pass


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetworkError(f"{' '.join(cmd)}: {done.stderr.strip() or done.returncode}")
    return done


def available() -> str | None:
    """None if namespaces can be made here, else why not (for a test's skip reason)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    try:
        done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        return "iproute2 (ip) is not installed"
    if done.returncode != 0:
        return f"ip netns does not work here: {done.stderr.strip()}"
    return None


@dataclass
class Node:
    name: str
    namespace: str
    address: str
    host_link: str  # the veth end on the bridge

    def exec_prefix(self) -> list[str]:
        """Put in front of a command to run it inside this node's namespace (``ip netns exec`` execs, so the
        pid it starts under is the command's own)."""
        return ["ip", "netns", "exec", self.namespace]


@dataclass
class ChaosNetwork:
    """Create with ``ChaosNetwork.create()``, always ``close()`` (or use as a context manager)."""

    prefix: str
    subnet: str  # "127.X.Y"
    bridge: str
    nodes: dict[str, Node] = field(default_factory=dict)
    _cuts: set[tuple[str, str]] = field(default_factory=set)
    _isolated: set[str] = field(default_factory=set)

    @classmethod
    def create(cls, nodes: Sequence[str]) -> ChaosNetwork:
        prefix = f"sk{random.randrange(16 ** 4):04x}"
        used = _ip("route", "show", "table", "local").stdout
        for _ in range(100):
            subnet = f"127.{random.randrange(200, 250)}.{random.randrange(1, 250)}"
            if subnet + "." not in used:
                break
        else:
            raise NetworkError("no free 127.X.Y.0/24 for the run")
        net = cls(prefix, subnet, f"{prefix}br")
        try:
            net._make_bridge()
            for i, name in enumerate(nodes, start=1):
                net._add_node(name, i)
        except BaseException:
            net.close()
            raise
        return net

    def _make_bridge(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        _ip("addr", "add", f"{self.subnet}.254/24", "dev", self.bridge)
        _sysctl(f"net.ipv4.conf.{self.bridge}.route_localnet", "1")
        _ip("route", "add", f"{self.subnet}.0/24", "dev", self.bridge, "table", "local", "src", f"{self.subnet}.254")

    def _add_node(self, name: str, index: int) -> None:
        ns = f"{self.prefix}-{name}"
        outer, inner = f"{self.prefix}{index}o", f"{self.prefix}{index}i"
        address = f"{self.subnet}.{index}"
        _ip("netns", "add", ns)
        self.nodes[name] = Node(name, ns, address, outer)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", outer, "master", self.bridge)
        _ip("link", "set", outer, "up")
        _ip("link", "set", "lo", "up", ns=ns)
        _ip("link", "set", inner, "up", ns=ns)
        _ip("addr", "add", f"{address}/24", "dev", inner, ns=ns)
        _sysctl(f"net.ipv4.conf.{inner}.route_localnet", "1", ns=ns)
        _ip("route", "add", f"{self.subnet}.0/24", "dev", inner, "table", "local", "src", address, ns=ns)

    # -- faults ---------------------------------------------------------------------------------------------
    def partition(self, a: str, b: str) -> None:
        """Drop every packet between nodes ``a`` and ``b`` (both directions), until ``heal``."""
        for x, y in ((a, b), (b, a)):
            if (x, y) not in self._cuts:
                _ip("route", "add", "blackhole", f"{self.nodes[y].address}/32", "table", "local",
                    ns=self.nodes[x].namespace)
                self._cuts.add((x, y))

    def isolate(self, name: str) -> None:
        """Cut ``name`` off from everyone, the test process included (its bridge port goes down)."""
        _ip("link", "set", self.nodes[name].host_link, "down")
        self._isolated.add(name)

    def heal(self) -> None:
        for x, y in sorted(self._cuts):
            _ip("route", "del", "blackhole", f"{self.nodes[y].address}/32", "table", "local",
                ns=self.nodes[x].namespace, check=False)
        self._cuts.clear()
        for name in sorted(self._isolated):
            _ip("link", "set", self.nodes[name].host_link, "up", check=False)
        if self._isolated:
            # Addresses that went unanswered are FAILED in the neighbour tables, and a connection to one fails
            # at once until the entry is retried: forget them, so healed means reachable now.
            _ip("neigh", "flush", "dev", self.bridge, check=False)
            for node in self.nodes.values():
                _ip("neigh", "flush", "to", f"{self.subnet}.0/24", ns=node.namespace, check=False)
        self._isolated.clear()

    @property
    def cut(self) -> set[tuple[str, str]]:
        return set(self._cuts)

    def close(self) -> None:
        """Delete the namespaces (their veth ends, routes and blackholes go with them) and the bridge."""
        for node in self.nodes.values():
            _ip("netns", "del", node.namespace, check=False)
            _ip("link", "del", node.host_link, check=False)
        _ip("link", "del", self.bridge, check=False)
        self.nodes.clear()

    def __enter__(self) -> ChaosNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sysctl(key: str, value: str, ns: str | None = None) -> None:
    path = "/proc/sys/" + key.replace(".", "/")
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["sh", "-c", f"echo {value} > {path}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise NetworkError(f"setting {key}: {done.stderr.strip()}")
