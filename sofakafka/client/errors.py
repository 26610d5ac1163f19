"""Failures the client reports that are not a broker's error code.

A broker's answer with an error code is raised as ``sofakafka.protocol.errors.KafkaError`` (its ``code``
says what the broker meant); the exceptions here cover what happens before or around an answer: no broker
reachable, a connection that closed mid-request, a deadline that passed, a response that does not belong
to the request.
"""

from __future__ import annotations


class ClientError(Exception):
    """Base of the client's own failures."""


class BrokerConnectionError(ClientError):
    """Could not connect, or the connection closed or broke while a request was outstanding."""


class RequestTimeoutError(ClientError):
    """No answer before the request's deadline; the connection is closed because its framing is unknown."""


class NoBrokersAvailableError(ClientError):
    """None of the bootstrap servers (or known brokers) could be reached."""


class UnsupportedApiError(ClientError):
    """The broker does not advertise an API (or any version of it this client can encode)."""

    def __init__(self, api_key: int, message: str | None = None) -> None:
        super().__init__(message or f"the broker does not support API key {api_key}")
        self.api_key = api_key


class AuthenticationError(ClientError):
    """The broker refused our SASL login or TLS handshake (bad credentials, unknown mechanism, certificate)."""
