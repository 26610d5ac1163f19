"""The ``select`` and the sockets the ZooKeeper store gives kazoo's connection thread: they answer as kazoo's own
do, and read ahead without changing what kazoo reads."""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from sofakafka.controller import zk_io
from sofakafka.controller.zk_io import READ_AHEAD, BufferedSocket, PollHandler
from sofakafka.controller.zookeeper import _stop_client


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_nothing_ready_returns_empty_at_the_timeout(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    assert PollHandler().select([a], [], [], 0) == ([], [], [])
    assert PollHandler().select([a], [], [], 0.01) == ([], [], [])


def test_readable_writable_and_hang_up(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    handler = PollHandler()
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
        assert PollHandler().select([high], [], [], 0) == ([high], [], [])
    finally:
        os.close(high)


def test_a_negative_timeout_is_refused(pair: tuple[socket.socket, socket.socket]) -> None:
    with pytest.raises(ValueError):
        PollHandler().select([pair[0]], [], [], -1)


# --- reading ahead


def test_reads_come_in_order_from_one_recv(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    sock = BufferedSocket(a)
    b.sendall(b"\x00\x00\x00\x03abc\x00\x00\x00\x02de")
    assert sock.pending() == 0
    assert sock.recv(4) == b"\x00\x00\x00\x03"
    assert sock.pending() == 9  # the rest was read with the length, and is kept
    assert sock.recv(3) == b"abc"
    assert sock.recv(4) == b"\x00\x00\x00\x02"
    assert sock.pending() == 2
    assert sock.recv(10) == b"de"  # no more than is buffered: the caller asks again for the rest
    assert sock.pending() == 0
    b.sendall(b"fg")
    assert sock.recv(10) == b"fg"  # all of it asked for: nothing kept
    assert sock.pending() == 0


def test_one_recv_reads_at_most_the_read_ahead(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    a.setblocking(False)
    sock = BufferedSocket(a)
    data = bytes(range(256)) * ((READ_AHEAD + 3 * 256) // 256)  # more than one read-ahead
    sender = threading.Thread(target=b.sendall, args=(data,))
    sender.start()
    got = bytearray()
    handler = PollHandler()
    while len(got) < len(data):
        assert handler.select([sock], [], [], 10) == ([sock], [], [])
        got += sock.recv(1)
        assert sock.pending() <= READ_AHEAD - 1
    sender.join()
    assert bytes(got) == data


def test_the_peer_closing_reads_as_empty(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    sock = BufferedSocket(a)
    b.sendall(b"xy")
    b.close()
    assert sock.recv(1) == b"x"
    assert sock.recv(1) == b"y"
    assert sock.recv(1) == b""


def test_select_answers_buffered_data_without_asking_the_kernel(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    other_a, other_b = socket.socketpair()
    try:
        sock = BufferedSocket(a)
        handler = PollHandler()
        b.sendall(b"12")
        assert sock.recv(1) == b"1"  # "2" is in the buffer now, nothing in the kernel
        assert handler.select([sock], [], [], 0) == ([sock], [], [])
        other_b.sendall(b"z")
        # Buffered data is answered alone; the other descriptor is polled once the buffer is empty.
        assert handler.select([sock, other_a], [], [], 0) == ([sock], [], [])
        assert sock.recv(1) == b"2"
        assert handler.select([sock, other_a], [], [], 0) == ([other_a], [], [])
    finally:
        other_a.close()
        other_b.close()


def test_the_wake_up_pipe_is_read_ahead_too() -> None:
    read_end, write_end = PollHandler().create_socket_pair()
    try:
        assert isinstance(read_end, BufferedSocket)
        write_end.send(b"\0\0\0")  # three queued requests
        assert read_end.recv(1) == b"\0"
        assert read_end.pending() == 2
        assert PollHandler().select([read_end], [], [], 0) == ([read_end], [], [])
    finally:
        read_end.close()
        write_end.close()


# --- writing


def test_a_write_goes_straight_to_send(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    sock = BufferedSocket(a)
    assert PollHandler().select([], [sock], [], 2.5) == ([], [sock], [])
    assert sock.write_timeout == 2.5  # what a send finding no room waits
    assert sock.send(b"hello") == 5
    assert b.recv(5) == b"hello"


def _fill(sock: socket.socket) -> int:
    """Send without blocking until the kernel takes no more; how much it took."""
    sock.setblocking(False)
    chunk = b"\0" * 65536
    total = 0
    with pytest.raises(BlockingIOError):
        while True:
            total += sock.send(chunk)
    return total


def test_a_send_without_room_waits_for_the_reader(pair: tuple[socket.socket, socket.socket],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = pair
    filled = _fill(a)
    sock = BufferedSocket(a)
    sock.write_timeout = 30
    received = bytearray()

    def drain() -> None:
        while len(received) < filled + 1:
            received.extend(b.recv(1 << 20))

    reader = threading.Thread(target=drain)
    wait = zk_io._wait

    def wait_after_starting_the_reader(fd: int, mask: int, timeout: float | None) -> bool:
        reader.start()  # only once the send has found no room
        return wait(fd, mask, timeout)

    monkeypatch.setattr(zk_io, "_wait", wait_after_starting_the_reader)
    assert sock.send(b"x") == 1
    reader.join(30)
    assert reader.ident is not None
    assert len(received) == filled + 1
    assert received[-1:] == b"x"


def test_a_send_without_room_times_out_as_a_socket_error(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    _fill(a)
    sock = BufferedSocket(a)
    sock.write_timeout = 0.05
    with pytest.raises(OSError, match="time-out during write"):  # kazoo drops the connection, as on its own timeout
        sock.send(b"x")


def test_other_socket_calls_reach_the_socket(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    sock = BufferedSocket(a)
    assert sock.fileno() == a.fileno()
    sock.setblocking(False)
    assert a.getblocking() is False
    sock.close()
    assert a.fileno() == -1


# --- stopping a client


def test_stopping_a_client_waits_for_room_for_its_wake_up_byte(pair: tuple[socket.socket, socket.socket]) -> None:
    """kazoo's stop queues a Close and wakes the connection thread with one byte; a connected thread ends only
    once it reads it. The byte must get through a pair that the thread is still draining (it was sent without
    waiting, dropped, and the stop joined the thread forever). kazoo's client is faked: its stop as kazoo's."""
    read_end, write_end = pair
    filled = _fill(write_end)
    woken: list[bool] = []

    class Client:
        _connection = SimpleNamespace(_write_sock=write_end)

        def stop(self) -> None:
            self._connection._write_sock.send(b"\0")
            woken.append(True)

        def close(self) -> None:
            pass

    drained = bytearray()

    def drain() -> None:
        threading.Event().wait(0.2)  # the thread comes back to the pair after the stop has begun
        while len(drained) < filled + 1 and (chunk := read_end.recv(1 << 20)):
            drained.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    _stop_client(Client())
    reader.join(30)
    assert woken == [True]
    assert len(drained) == filled + 1


# --- LightResult: kazoo's AsyncResult without a Condition per request


def _result(running: bool = False) -> tuple[zk_io.LightResult, queue.SimpleQueue[Any]]:
    """A result of a handler (what LightResult asks of one: whether its completion thread runs, and its queue)."""
    completions: queue.SimpleQueue[Any] = queue.SimpleQueue()
    handler = SimpleNamespace(running=running, completion_queue=completions)
    return zk_io.LightResult(handler, threading.Lock()), completions


def test_a_result_holds_its_value_or_its_exception() -> None:
    result, _ = _result()
    assert not result.ready() and not result.successful() and result.exception is None
    with pytest.raises(zk_io.KazooTimeoutError):
        result.get(block=False)
    with pytest.raises(zk_io.KazooTimeoutError):
        result.get_nowait()
    result.set(7)
    assert result.ready() and result.successful() and result.exception is None
    assert result.get() == 7 and result.get(block=False) == 7 and result.value == 7
    failed, _ = _result()
    boom = ValueError("boom")
    failed.set_exception(boom)
    assert failed.ready() and not failed.successful() and failed.exception is boom
    with pytest.raises(ValueError, match="boom"):
        failed.get()
    assert failed.wait(0) is True


def test_a_blocked_get_is_woken_by_set_from_another_thread() -> None:
    result, _ = _result()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(result.get(timeout=30)))
    waiter.start()
    deadline = time.monotonic() + 10
    while not result._waiters and time.monotonic() < deadline:  # the getter is blocked on its own lock
        time.sleep(0.001)
    assert result._waiters
    result.set("answer")
    waiter.join(10)
    assert got == ["answer"] and result._waiters is None


def test_get_and_wait_time_out_and_leave_no_waiter_behind() -> None:
    result, _ = _result()
    started = time.monotonic()
    with pytest.raises(zk_io.KazooTimeoutError):
        result.get(timeout=0.05)
    assert time.monotonic() - started >= 0.05
    assert result.wait(0) is False and result.wait(-1) is False and result.wait(0.01) is False
    assert not result._waiters
    result.set(1)
    assert result.wait(None) is True


def test_each_callback_runs_once_linked_before_or_after_the_result_was_set() -> None:
    result, _ = _result(running=False)
    seen: list[tuple[str, object]] = []

    def early(r: object) -> None:
        seen.append(("early", r))

    def removed(r: object) -> None:
        seen.append(("removed", r))

    result.rawlink(early)
    result.rawlink(early)  # linked twice: run once, as kazoo's
    result.rawlink(removed)
    result.unlink(removed)
    result.set(3)
    result.rawlink(lambda r: seen.append(("late", r)))
    assert seen == [("early", result), ("late", result)]
    result.unlink(early)  # after the set: nothing to do


def test_callbacks_go_through_the_completion_queue_while_the_handler_runs() -> None:
    result, completions = _result(running=True)
    seen: list[object] = []
    result.rawlink(seen.append)
    assert completions.empty()
    result.set_exception(KeyError("k"))
    assert completions.qsize() == 1 and seen == []
    completions.get_nowait()()
    assert seen == [result]
    result.rawlink(seen.append)  # already set: queued at once
    assert completions.qsize() == 1


def test_the_handler_hands_out_light_results_that_share_one_guard() -> None:
    handler = PollHandler()
    a, b = handler.async_result(), handler.async_result()
    assert isinstance(a, zk_io.LightResult) and a._guard is b._guard
