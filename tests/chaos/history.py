"""The history of a chaos run: every client operation and every fault, in the order they happened.

Each event is one JSON line (``history.jsonl`` in the run's directory), so a run that dies still leaves what it
saw, and the checker reads it back whole. Operations follow Jepsen's model: an ``invoke`` when a client starts
one, then ``ok`` (it happened, with what it returned), ``fail`` (it certainly did not happen) or ``info`` (the
client cannot tell: a send that timed out may or may not be in the log). Faults are ``nemesis`` events.

Fields: ``time`` (seconds since the history began, monotonic), ``process`` (who: a producer instance ``p0.1``, a
transactional one ``t0.1``, ``consumer-0``, ``consumer-rc-0``, ``nemesis``, ``final``), ``type``, ``f`` (``send``,
``poll``, ``read``; a transactional producer's ``init``, ``begin``, ``commit``, ``abort``, ``fenced``, ``zombie``; or
the fault's name), and what the operation is about: ``value``, ``partition``, ``offset``, ``values`` (a poll's
``[[partition, offset, value], ...]``, a final read's ``[[offset, value], ...]``), ``txn`` (the transaction a send,
commit or abort belongs to: ``<instance>/<n>``), ``transactional_id`` (of an ``init``), ``isolation``
(``read_committed`` on a read_committed consumer's polls and on the final read_committed read, with its
``last_stable_offset`` and ``high_watermark``), ``reason`` (of an abort), ``error``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Event = dict[str, Any]


class History:
    """Append-only, thread-safe; every event is written through to the file as it happens."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._events: list[Event] = []
        self._file = open(path, "a", encoding="utf-8")

    def record(self, process: str, type_: str, f: str, **fields: Any) -> Event:
        event: Event = {"time": round(time.monotonic() - self._start, 6), "process": process, "type": type_,
                        "f": f, **fields}
        line = json.dumps(event, separators=(",", ":"))
        with self._lock:
            self._events.append(event)
            self._file.write(line + "\n")
            self._file.flush()
        return event

    @property
    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_history(path: Path) -> list[Event]:
    """The events of a history file (a torn last line, from a run killed mid-write, is dropped)."""
    out: list[Event] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return out


def iter_ops(events: list[Event], f: str) -> Iterator[Event]:
    return (e for e in events if e.get("f") == f)
