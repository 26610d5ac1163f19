"""`sofakafka cluster up` writes a zoo.cfg whose ZooKeeper grants the session the brokers ask for."""

from __future__ import annotations

from pathlib import Path

from sofakafka.cli import cluster as cl


def test_a_session_longer_than_twenty_ticks_is_granted_explicitly() -> None:
    def max_session(session_ms: int | None) -> str | None:
        lines = cl.zookeeper_config(Path("/d"), 2181, 500, session_ms).splitlines()
        found = [line for line in lines if line.startswith("maxSessionTimeout=")]
        return found[0] if found else None

    # ZooKeeper's own cap is 20 ticks: up to it nothing is needed, one above it is granted by name.
    assert max_session(10_000) is None
    assert max_session(9_999) is None
    assert max_session(10_001) == "maxSessionTimeout=10001"
    assert max_session(18_000) == "maxSessionTimeout=18000"
    assert max_session(None) is None
    assert "tickTime=500" in cl.zookeeper_config(Path("/d"), 2181, 500, 18_000)


def test_the_session_asked_for_is_the_override_else_kafkas_default() -> None:
    def spec(**overrides: str) -> cl.ClusterSpec:
        return cl.ClusterSpec(3, Path("/d"), overrides=overrides)

    assert cl._session_timeout_ms(spec()) == 18_000
    assert cl._session_timeout_ms(spec(**{"zookeeper.session.timeout.ms": "30000"})) == 30_000
    # Not a number: the broker refuses it by name; the launcher does not guess.
    assert cl._session_timeout_ms(spec(**{"zookeeper.session.timeout.ms": "soon"})) is None
