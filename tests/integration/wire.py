"""Requests on a plain socket with our codec, for what stock clients cannot be made to send.

The codec is not what these tests examine (tests/unit/protocol does that); the broker's answers are.
"""

from __future__ import annotations

import socket
import struct

from sofakafka.protocol.api import decode_response, encode_request, size_prefixed
from sofakafka.protocol.headers import RequestHeader
from sofakafka.protocol.schema import Request, Response


def send(s: socket.socket, body: Request, version: int, correlation_id: int, client_id: str = "wire") -> None:
    header = RequestHeader(
        request_api_key=body.API_KEY,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    s.sendall(size_prefixed(encode_request(header, body)))


def recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return bytes(buf)


def recv_frame(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exactly(s, 4))
    return recv_exactly(s, size)


def call(s: socket.socket, body: Request, version: int, correlation_id: int = 1) -> Response:
    send(s, body, version, correlation_id)
    header, response = decode_response(recv_frame(s), body.API_KEY, version)
    assert header.correlation_id == correlation_id
    return response
