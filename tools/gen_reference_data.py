#!/usr/bin/env python3
"""Writes tests/data/kafka-2.6/*.json, the Kafka facts our tests check the code against, from a Kafka 2.6 reference.

The facts are Kafka's (API keys and the version range of each per release, the versions a 2.6 broker accepts, the
error table); the files are ours, in our own format, so the repository stands on its own: no test reads the
reference, only this tool does, once, and tests/unit/protocol/test_reference_data.py checks (when given the
reference) that the committed files are still what it makes of it.

The reference directory holds Kafka 2.6's API-VERSIONS.md (Table 1: every API key in 2.6 and the versions a 2.6
broker accepts, from ApiKeys.java; Table 2: the maximum version advertised per release; the error-code appendix,
from Errors.java) and message/*Request.json (Kafka's message declarations, whose ``validVersions`` are a third
source for 2.6's ranges).

Usage: tools/gen_reference_data.py [REFERENCE_DIR] [--check]
REFERENCE_DIR defaults to $SOFAKAFKA_KAFKA_REFERENCE. ``--check`` exits non-zero when the committed files differ
from what would be written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kafka_reference import ReferenceError, generator_main

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "tests" / "data" / "kafka-2.6"

# Table 2's prose states the one exception to "all minimum versions are 0"; the tool refuses a reference that no
# longer says so, rather than writing minimums it cannot vouch for.
_MIN_RULE = re.compile(r"ControlledShutdown \(key 7\) which was 1-1 in 0\.10\.0 through 0\.11\.0")
_CONTROLLED_SHUTDOWN_MIN_1 = {"0.10.0", "0.10.1", "0.10.2", "0.11.0"}
_ERROR_ROW = re.compile(r"^\|\s*(-?\d+)\s*\|\s*([A-Z_]+)\b[^|]*\|\s*(yes|no|-)\s*\|\s*$")


def _section(text: str, title_prefix: str) -> str:
    _, _, rest = text.partition(f"\n## {title_prefix}")
    if not rest:
        raise ReferenceError(f"section {title_prefix!r} not found in API-VERSIONS.md")
    return rest.split("\n## ", 1)[0]


def _table_rows(section: str) -> list[list[str]]:
    """Body rows of the first markdown table in ``section``, cells stripped (header and rule skipped)."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("|")]
    return rows[2:]


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def _read(reference: Path) -> str:
    path = reference / "API-VERSIONS.md"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReferenceError(f"cannot read {path}: {exc.strerror or exc}") from None


def api_versions(reference: Path) -> dict[str, Any]:
    text = _read(reference)
    accepted: dict[int, tuple[str, list[int]]] = {}
    for row in _table_rows(_section(text, "Table 1")):
        low, high = row[2].split("-")
        accepted[int(row[0])] = (row[1], [int(low), int(high)])

    table2 = _section(text, "Table 2")
    if not _MIN_RULE.search(table2):
        raise ReferenceError("Table 2 no longer states ControlledShutdown's minimum version 1 in 0.10.0-0.11.0")
    header = next(line for line in table2.splitlines() if line.startswith("| Key"))
    releases = [cell.strip() for cell in header.strip().strip("|").split("|")][2:]
    per_release: dict[int, dict[str, list[int]]] = {}
    for row in _table_rows(table2):
        key = int(row[0])
        per_release[key] = {
            release: [1 if key == 7 and release in _CONTROLLED_SHUTDOWN_MIN_1 else 0, int(cell)]
            for release, cell in zip(releases, row[2:], strict=True) if cell != "-"}

    valid: dict[int, list[int]] = {}
    messages = sorted((reference / "message").glob("*Request.json"))
    if not messages:
        raise ReferenceError(f"no message/*Request.json under {reference}")
    for path in messages:
        spec = json.loads(_strip_comments(path.read_text(encoding="utf-8")))
        low, _, high = spec["validVersions"].partition("-")
        valid[spec["apiKey"]] = [int(low), int(high or low)]

    keys = sorted(set(accepted) | set(per_release) | set(valid))
    return {
        "about": "Kafka's API keys and version ranges (key: [min, max]), written by tools/gen_reference_data.py from "
                 "Kafka 2.6's API-VERSIONS.md and message JSON: accepted_by_2_6 is Table 1 (ApiKeys.java), "
                 "per_release Table 2 (what each release advertised), valid_versions_in_message_json the "
                 "message declarations' validVersions.",
        "releases": releases,
        "apis": [{"key": key,
                  "name": accepted[key][0] if key in accepted else None,
                  "accepted_by_2_6": accepted[key][1] if key in accepted else None,
                  "valid_versions_in_message_json": valid.get(key),
                  "per_release": per_release.get(key, {})}
                 for key in keys],
    }


def error_codes(reference: Path) -> dict[str, Any]:
    _, _, appendix = _read(reference).partition("## Appendix - error codes")
    if not appendix:
        raise ReferenceError("the error-code appendix of API-VERSIONS.md moved")
    errors = []
    for line in appendix.splitlines():
        m = _ERROR_ROW.match(line)
        if m:
            errors.append({"code": int(m.group(1)), "name": m.group(2), "retriable": m.group(3) == "yes"})
    return {
        "about": "Kafka 2.6's error codes (Errors.java), written by tools/gen_reference_data.py from the appendix of "
                 "API-VERSIONS.md; retriable: the client exception derives from RetriableException.",
        "errors": sorted(errors, key=lambda e: e["code"]),
    }


def _render(doc: dict[str, Any], list_key: str) -> str:
    """One entry of the list per line, so a change to the facts reads as a change of the lines it touches."""
    head = {k: v for k, v in doc.items() if k != list_key}
    lines = ["{"]
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(f"  {json.dumps(list_key)}: [")
    items = doc[list_key]
    lines += [f"    {json.dumps(item)}{',' if i < len(items) - 1 else ''}" for i, item in enumerate(items)]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def generate(reference: Path) -> dict[str, str]:
    """File name -> contents."""
    return {"api_versions.json": _render(api_versions(reference), "apis"),
            "error_codes.json": _render(error_codes(reference), "errors")}


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__.splitlines()[0], generate, OUT_DIR, argv)


if __name__ == "__main__":
    raise SystemExit(main())
