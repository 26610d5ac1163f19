"""A cell's physical topic name from its logical parts: ``$NS.$CELL.$TOPIC``.

The LDC router (issue 13) will own this mapping in its naming module; until it lands the jobs use this
stand-in, which follows the same rule, so that replacing it is a one-line import change. The validation is
Kafka's for topic names (legal characters, at most 249), applied to the result.
"""

from __future__ import annotations

import re

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_LENGTH = 249


def physical_topic(topic: str, *, instance: str | None = None, cell: str | None = None) -> str:
    """``instance.cell.topic`` when both ``instance`` (the namespace) and ``cell`` are given, else ``topic``.

    Giving one of the two without the other is a mistake (a cell only exists inside an instance), so it
    raises ValueError naming the missing option rather than guessing."""
    if (instance is None) != (cell is None):
        missing = "--cell" if cell is None else "--instance"
        raise ValueError(f"{missing} is required when {'--instance' if cell is None else '--cell'} is given")
    for name, part in (("--instance", instance), ("--cell", cell), ("--topic", topic)):
        if part is None:
            continue
        if not part or not _LEGAL.fullmatch(part) or part in (".", ".."):
            raise ValueError(f"{name} {part!r}: a topic name part may only contain letters, digits, '.', '_', '-'")
        if name != "--topic" and "." in part:
            raise ValueError(f"{name} {part!r} may not contain '.': it separates the parts of the physical name")
    name = topic if instance is None else f"{instance}.{cell}.{topic}"
    if len(name) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic name {name!r} is longer than {MAX_TOPIC_LENGTH} characters")
    return name
