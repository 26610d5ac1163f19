"""Requests on a plain socket with our codec, for what stock clients cannot be made to send.

The codec is not what these tests examine (tests/unit/protocol does that); the broker's answers are.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from sofakafka.protocol.api import decode_response, encode_request, size_prefixed
from sofakafka.protocol.headers import RequestHeader
from sofakafka.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sofakafka.protocol.schema import Request, Response
from tests.integration.helpers import wait_for


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


def topic_metadata(host: str, port: int, topic: str, version: int, allow_auto_creation: bool = True) -> Any:
    """One topic's entry of a Metadata response (v4+ sends the auto-creation flag)."""
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
    if version >= 4:
        request.allow_auto_topic_creation = allow_auto_creation
    with socket.create_connection((host, port), timeout=30) as s:
        response = call(s, request, version)
    assert isinstance(response, MetadataResponse)
    (t,) = response.topics
    assert t.name == topic
    return t


def wait_for_leaders(host: str, port: int, topic: str) -> Any:
    """The topic's metadata once every partition has a leader (creation propagates after it is answered)."""

    def poll() -> Any:
        t = topic_metadata(host, port, topic, 1)
        return (
            t if t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions) else None
        )

    return wait_for(f"{topic} to have leaders", poll)
