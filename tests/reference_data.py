"""Kafka's facts the tests check our code against, as the repository keeps them (tests/data/kafka-2.6/, written by
tools/gen_reference_data.py), and the way to Kafka 2.6's own files for the few checks that need them.

Kafka's message JSON (``message/*.json``) ships inside its kafka-clients jar (``common/message/``), which
scripts/test.sh resolves from Maven Central for the interop tests: :func:`kafka_message_json` reads it from
there, so those checks run wherever the tests' jars are. The rest of the reference (API-VERSIONS.md, Kafka's
notes) is only in a reference directory given with ``--kafka-reference DIR`` or $SOFAKAFKA_KAFKA_REFERENCE
(which also overrides the jar); without it, the checks that need it skip, saying so."""

from __future__ import annotations

import json
import os
import zipfile
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


REPO = Path(__file__).resolve().parents[1]
# The kafka-clients jar of the protocol level we match (interop/java/classpaths/clients-2.6/pom.xml).
CLIENTS_JAR_DIR = REPO / "interop" / "java" / "target" / "lib" / "clients-2.6"
JAR_MESSAGE_DIR = "common/message/"


def clients_jar() -> Path | None:
    """kafka-clients 2.6.x as scripts/test.sh resolved it, or None when it was not."""
    jars = sorted(CLIENTS_JAR_DIR.glob("kafka-clients-2.6.*.jar"))
    return jars[-1] if jars else None


def kafka_message_json(config: pytest.Config, scratch: Path) -> Path:
    """A directory whose ``message/`` holds Kafka 2.6's message JSON (``<Name>.json``, as Kafka's source tree
    names them): the given reference directory when there is one, else the files of the kafka-clients 2.6 jar,
    unpacked under ``scratch``; skips the calling test when there is neither."""
    if config.getoption(REFERENCE_OPTION) or os.environ.get(REFERENCE_ENV):
        return kafka_reference(config)
    jar = clients_jar()
    if jar is None:
        pytest.skip(f"needs Kafka 2.6's message JSON: the kafka-clients 2.6 jar in {CLIENTS_JAR_DIR} (scripts/test.sh "
                    f"resolves it: mvn -q -B -f interop/java/pom.xml process-resources), or {REFERENCE_OPTION} DIR / "
                    f"{REFERENCE_ENV}")
    out = scratch / "message"
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(jar) as z:
        names = [n for n in z.namelist() if n.startswith(JAR_MESSAGE_DIR) and n.endswith(".json")]
        for name in names:
            (out / name.removeprefix(JAR_MESSAGE_DIR)).write_bytes(z.read(name))
    if not names:
        pytest.fail(f"{jar} has no {JAR_MESSAGE_DIR}*.json: is it kafka-clients 2.6?")
    return scratch
