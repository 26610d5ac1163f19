"""The poll-based ``select`` the ZooKeeper store gives kazoo's connection thread answers as kazoo's own does."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from sofakafka.controller.zookeeper import _PollHandler


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_nothing_ready_returns_empty_at_the_timeout(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    assert _PollHandler().select([a], [], [], 0) == ([], [], [])
    assert _PollHandler().select([a], [], [], 0.01) == ([], [], [])


def test_readable_writable_and_hang_up(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    handler = _PollHandler()
    assert handler.select([], [a], [], 0) == ([], [a], [])
    b.send(b"x")
    assert handler.select([a], [], [], 0) == ([a], [], [])
    assert handler.select([a.fileno()], [], [], None) == ([a.fileno()], [], [])
    a.recv(1)
    b.close()
    assert handler.select([a], [], [], 0) == ([a], [], [])  # the peer hung up: a read says so


def test_a_descriptor_above_1024_works(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    high = os.dup2(a.fileno(), 5000)
    try:
        b.send(b"x")
        assert _PollHandler().select([high], [], [], 0) == ([high], [], [])
    finally:
        os.close(high)


def test_a_negative_timeout_is_refused(pair: tuple[socket.socket, socket.socket]) -> None:
    with pytest.raises(ValueError):
        _PollHandler().select([pair[0]], [], [], -1)
