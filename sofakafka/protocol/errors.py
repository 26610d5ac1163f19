"""Protocol exceptions and Kafka's error-code table.

Every failure to decode bytes raises a subclass of :class:`ProtocolError`; nothing else may escape a
decoder (a fuzz test holds us to it). The broker's connection boundary maps them to a closed connection or
to the Kafka error code they carry.
"""

from __future__ import annotations


class ProtocolError(ValueError):
    """Bytes that are not a valid Kafka frame, header, message or record set."""


class DecodeError(ProtocolError):
    """Malformed or truncated bytes while decoding."""


class EncodeError(ProtocolError):
    """A value that cannot be encoded at the requested version (e.g. a field the version lacks)."""


class UnsupportedVersionError(ProtocolError):
    """An (api_key, api_version) this codec does not know."""

    def __init__(self, api_key: int, api_version: int, message: str | None = None) -> None:
        super().__init__(message or f"unsupported version {api_version} of API key {api_key}")
        self.api_key = api_key
        self.api_version = api_version


class CorruptRecordError(ProtocolError):
    """A record batch / message set entry that fails validation (bad CRC, bad length, bad magic...).

    ``position`` is the byte offset of the offending batch in the buffer that was being read.
    """

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"corrupt record batch at byte {position}: {reason}")
        self.position = position
        self.reason = reason
