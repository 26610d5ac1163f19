"""Other client families against sofakafka and Apache Kafka 2.6, each a short smoke scenario whose observations
must be the same from both brokers: kafkajs (npm, tests/js/roundtrip.js: admin, produce with headers and gzip,
a group member that consumes and commits, offsets by time, DeleteRecords) and franz-go (the Go client, from the
Go module proxy: interop/go, built here with ``go build``: kadm admin, a synchronous zstd producer, a consumer
group member that commits, the group described and listed). The Python clients (kafka-python, aiokafka,
confluent-kafka) and kcat are in tests/integration.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import REPO
from tests.integration.helpers import make_records
from tests.integration.test_kafkajs import JS_DIR, run_node
from tests.reference.fixtures import ComparedBrokers

pytestmark = pytest.mark.timeout(300)

GO_DIR = REPO / "interop" / "go"


@pytest.fixture(scope="module")
def franzgo() -> Path:
    """The franz-go scenario, built with ``go build`` (incremental: scripts/test.sh has built it already)."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no `go` on PATH: the franz-go scenario needs Go 1.26+ (interop/go/go.mod)")
    binary = GO_DIR / "bin" / "franzgo"
    done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=GO_DIR, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"go build failed in {GO_DIR}:\n{done.stderr}"
    return binary


def on_both(interop_brokers: ComparedBrokers, run: Any) -> dict[str, Any]:
    results = {name: run(name, bootstrap) for name, bootstrap in interop_brokers.bootstraps.items()}
    assert results["sofakafka"] == results["kafka"], (
        f"sofakafka and Apache Kafka 2.6 answered differently:\n  sofakafka: {results['sofakafka']}\n"
        f"  kafka:     {results['kafka']}")
    return results["kafka"]


def test_franz_go_admin_produce_group_commit(franzgo: Path, interop_brokers: ComparedBrokers) -> None:
    def run(name: str, bootstrap: str) -> dict[str, Any]:
        done = subprocess.run([str(franzgo), json.dumps({"bootstrap": bootstrap, "topic": f"franz-{name}",
                                                         "group": f"franz-group-{name}"})],
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, f"franz-go against {name} failed:\n{done.stderr}\n{done.stdout}"
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    r = on_both(interop_brokers, run)
    assert r["retentionMs"] == "86400000@DYNAMIC_TOPIC_CONFIG"
    assert "TOPIC_ALREADY_EXISTS" in r["createExisting"]
    assert r["producedOffsets"] == {str(p): list(range(10)) for p in range(3)}
    assert len(r["consumed"]) == 30
    assert r["committed"] == {"0": 10, "1": 10, "2": 10}
    assert r["groupWhileMember"]["state"] == "Stable" and r["groupWhileMember"]["members"] == 1
    assert r["groupAfterLeave"] == {"state": "Empty", "members": 0}
    assert r["groupListed"] is True and r["deleteTopic"] == "none"


def test_kafkajs_admin_produce_group_commit(interop_brokers: ComparedBrokers) -> None:
    records = make_records(12, tag="kafkajs-interop", with_headers=True)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    def run(name: str, bootstrap: str) -> dict[str, Any]:
        return run_node(JS_DIR / "roundtrip.js", {
            "bootstrap": bootstrap, "topic": f"kafkajs-{name}",
            "records": [{"key": b64(r.key), "value": b64(r.value), "headers": [[k, b64(v)] for k, v in r.headers],
                         "timestamp": r.timestamp_ms} for r in records]})

    r = on_both(interop_brokers, run)
    assert r["created"] is True and r["listedAfterDelete"] is False
    assert r["groupOffsets"] == [{"partition": 0, "offset": 12}, {"partition": 1, "offset": -1}]
    assert len(r["consumed"]) == 12
