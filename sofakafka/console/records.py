"""How the console shows a record: key and value as text, pretty JSON or hex, headers, timestamp.

A record's bytes are whatever the producer sent. Text is shown when the bytes are valid UTF-8 with no
control characters other than whitespace; JSON is pretty-printed when the text parses as JSON; hex is
always available. The same view serves the HTML pages, the JSON download and ``sofakafka query``.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from sofakafka.protocol.records import Record

_PRINTABLE_CONTROLS = frozenset("\n\r\t")


def as_text(data: bytes | None) -> str | None:
    """The bytes as text when they are UTF-8 without unprintable control characters, else None."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any((ord(c) < 32 and c not in _PRINTABLE_CONTROLS) or ord(c) == 127 for c in text):
        return None
    return text


def as_json(text: str | None) -> str | None:
    """The text pretty-printed when it is a JSON object or array (a bare number or string stays text)."""
    if text is None or not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=False)
    except ValueError:
        return None


def as_hex(data: bytes | None, width: int = 16) -> str | None:
    """A hex dump: offset, bytes, and the printable ASCII beside them, ``width`` bytes a line."""
    if data is None:
        return None
    lines = []
    for i in range(0, len(data), width):
        chunk = data[i:i + width]
        ascii_part = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{i:08x}  {chunk.hex(' '):<{width * 3 - 1}}  {ascii_part}")
    return "\n".join(lines)


def format_timestamp(ms: int) -> str:
    """Milliseconds since the epoch as an ISO 8601 UTC time; -1 (no timestamp) as '-'."""
    if ms < 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class FieldView:
    """One key or value in its three shapes; ``preferred`` names the one to show first."""

    size: int | None
    text: str | None
    json: str | None
    hex: str | None

    @property
    def preferred(self) -> str:
        if self.size is None:
            return "null"
        if self.json is not None:
            return "json"
        if self.text is not None:
            return "text"
        return "hex"

    @property
    def shown(self) -> str:
        """The preferred shape's content (``null`` for a null field)."""
        return {"null": "null", "json": self.json, "text": self.text, "hex": self.hex}[self.preferred] or ""

    @classmethod
    def of(cls, data: bytes | None) -> FieldView:
        text = as_text(data)
        return cls(None if data is None else len(data), text, as_json(text), as_hex(data))


@dataclass(frozen=True)
class RecordView:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: FieldView
    value: FieldView
    headers: tuple[tuple[str, FieldView], ...]
    raw_key: bytes | None
    raw_value: bytes | None
    raw_headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def time(self) -> str:
        return format_timestamp(self.timestamp)

    @classmethod
    def of(cls, topic: str, partition: int, record: Record) -> RecordView:
        return cls(topic, partition, record.offset, record.timestamp, FieldView.of(record.key),
                   FieldView.of(record.value), tuple((k, FieldView.of(v)) for k, v in record.headers),
                   record.key, record.value, tuple(record.headers))

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict: text when the bytes are text, else hex (``*_encoding`` says which)."""

        def field(data: bytes | None) -> tuple[str | None, str]:
            if data is None:
                return None, "null"
            text = as_text(data)
            return (text, "utf-8") if text is not None else (data.hex(), "hex")

        key, key_enc = field(self.raw_key)
        value, value_enc = field(self.raw_value)
        headers = []
        for name, raw in self.raw_headers:
            hvalue, henc = field(raw)
            headers.append({"key": name, "value": hvalue, "encoding": henc})
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset,
                "timestamp": self.timestamp, "time": self.time, "key": key, "key_encoding": key_enc,
                "value": value, "value_encoding": value_enc, "headers": headers}
