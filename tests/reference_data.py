"""Kafka's facts the tests check our code against, as the repository keeps them (tests/data/kafka-2.6/, written by
tools/gen_reference_data.py), and the way to the Kafka 2.6 reference itself for the few checks that need Kafka's
own files (``--kafka-reference DIR`` or $SOFAKAFKA_KAFKA_REFERENCE; without it they skip, saying so)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent / "data" / "kafka-2.6"
REFERENCE_ENV = "SOFAKAFKA_KAFKA_REFERENCE"
REFERENCE_OPTION = "--kafka-reference"


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return doc


VersionRange = tuple[int, int]


def _apis() -> list[dict[str, Any]]:
    apis: list[dict[str, Any]] = _load("api_versions.json")["apis"]
    return apis


def releases() -> list[str]:
    """Kafka's releases from 0.10.0 to 2.6 (the .0 of each line), in order."""
    return list(_load("api_versions.json")["releases"])


def per_release_ranges() -> dict[str, dict[int, VersionRange]]:
    """Release -> API key -> the (min, max) versions that release advertised."""
    out: dict[str, dict[int, VersionRange]] = {release: {} for release in releases()}
    for api in _apis():
        for release, (low, high) in api["per_release"].items():
            out[release][api["key"]] = (low, high)
    return out


def accepted_by_2_6() -> dict[int, VersionRange]:
    """API key -> the versions a 2.6 broker accepts (ApiKeys.java)."""
    return {api["key"]: tuple(api["accepted_by_2_6"]) for api in _apis() if api["accepted_by_2_6"] is not None}


def valid_versions_in_message_json() -> dict[int, VersionRange]:
    """API key -> ``validVersions`` of Kafka 2.6's message declaration of its request."""
    return {api["key"]: tuple(api["valid_versions_in_message_json"]) for api in _apis()
            if api["valid_versions_in_message_json"] is not None}


def error_table() -> dict[str, tuple[int, bool]]:
    """Name -> (code, retriable) of every Kafka 2.6 error code."""
    return {e["name"]: (e["code"], e["retriable"]) for e in _load("error_codes.json")["errors"]}


def kafka_reference(config: pytest.Config) -> Path:
    """The Kafka 2.6 reference directory the run was given; skips the calling test when none was."""
    given = config.getoption(REFERENCE_OPTION) or os.environ.get(REFERENCE_ENV)
    if not given:
        pytest.skip(f"needs Kafka 2.6's own files: give {REFERENCE_OPTION} DIR or set {REFERENCE_ENV} "
                    "(a directory with API-VERSIONS.md and message/*.json)")
    path = Path(given)
    if not (path / "API-VERSIONS.md").is_file() or not (path / "message").is_dir():
        pytest.fail(f"{REFERENCE_ENV} / {REFERENCE_OPTION} = {given}: no API-VERSIONS.md and message/ there")
    return path
