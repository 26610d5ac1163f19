"""SCRAM credentials as Kafka stores them, derived with scramp (RFC 5802 / RFC 7677).

Kafka keeps a user's SCRAM credential in ``/config/users/<url-encoded user>`` under a config key named after
the mechanism (``SCRAM-SHA-256``, ``SCRAM-SHA-512``), as the string::

    salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<int>

(standard base64 with padding). The password itself is never stored. Both mechanisms require at least 4096
iterations: Kafka's tools refuse to write fewer and its server refuses to use fewer, and so do we.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import scramp

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_ITERATIONS = 4096
DEFAULT_ITERATIONS = 4096
MAX_ITERATIONS = 10_000_000
"""scramp's own ceiling, a guard against a credential that would cost the broker minutes per login."""


class ScramCredentialError(ValueError):
    pass


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka_string(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise ScramCredentialError(f"credential field {part!r} is not key=value")
            fields[key.strip()] = value.strip()
        missing = {"salt", "stored_key", "server_key", "iterations"} - fields.keys()
        if missing:
            raise ScramCredentialError(f"credential lacks {', '.join(sorted(missing))}")
        try:
            salt = base64.b64decode(fields["salt"], validate=True)
            stored_key = base64.b64decode(fields["stored_key"], validate=True)
            server_key = base64.b64decode(fields["server_key"], validate=True)
        except binascii.Error as exc:
            raise ScramCredentialError(f"credential is not valid base64: {exc}") from None
        if not fields["iterations"].isdigit():
            raise ScramCredentialError(f"iterations {fields['iterations']!r} is not a number")
        return cls(salt, stored_key, server_key, int(fields["iterations"]))


def check_mechanism(mechanism: str) -> str:
    if mechanism not in MECHANISMS:
        raise ScramCredentialError(f"unknown SCRAM mechanism {mechanism!r}, must be one of {', '.join(MECHANISMS)}")
    return mechanism


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """The stored form of ``password`` for ``mechanism`` (a random salt unless one is given)."""
    check_mechanism(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramCredentialError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")
    try:
        salt_out, stored_key, server_key, count = scramp.ScramMechanism(mechanism).make_auth_info(
            password, iteration_count=iterations, salt=salt)
    except scramp.ScramException as exc:
        raise ScramCredentialError(str(exc)) from None
    return ScramCredential(bytes(salt_out), stored_key, server_key, int(count))
