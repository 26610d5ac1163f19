"""kafkajs (npm, pinned by tests/js/package-lock.json) against a real broker, driven through tests/js/roundtrip.js.

The script does the calls and reports what it saw as JSON; the assertions are here. kafkajs bundles only
gzip (other codecs are plug-ins), so the round trip uses no compression and gzip. Records are read back
twice: by kafkajs's consumer, which is always a group member and commits what it processed, and by its
connection-level Fetch after DeleteRecords.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration.conftest import REPO, BrokerProcess
from tests.integration.helpers import make_records

JS_DIR = REPO / "tests" / "js"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def run_node(script: Path, arg: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "node is not installed: scripts/test.sh installs it"
    assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), "kafkajs missing: scripts/test.sh runs npm ci"
    done = subprocess.run(
        [node, str(script), json.dumps(arg)], cwd=JS_DIR, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, f"kafkajs failed:\n{done.stderr}\n{done.stdout}"
    last_line = done.stdout.strip().splitlines()[-1]
    result: dict[str, Any] = json.loads(last_line)
    return result


def test_kafkajs_admin_and_round_trip(broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    # One broker cannot hold __consumer_offsets at Kafka's default replication factor of 3 (nor can Kafka):
    # the sample server.properties' setting for a single broker.
    broker = broker_factory(
        {"offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0"}
    )
    records = make_records(12, tag="kafkajs", with_headers=True)
    result = run_node(
        JS_DIR / "roundtrip.js",
        {
            "bootstrap": broker.bootstrap,
            "topic": topic_name,
            "records": [
                {
                    "key": b64(r.key),
                    "value": b64(r.value),
                    "headers": [[k, b64(v)] for k, v in r.headers],
                    "timestamp": r.timestamp_ms,
                }
                for r in records
            ],
        },
    )
    assert result["created"] is True
    assert result["listed"] is True
    assert result["configsBefore"]["retention.ms"] == "86400000"
    assert result["configsAfter"]["retention.ms"] == "172800000"
    assert result["partitions"] == [0, 1]
    assert result["produced"] == [
        {"partition": 0, "errorCode": 0, "baseOffset": 0},
        {"partition": 0, "errorCode": 0, "baseOffset": 6},
    ]
    expected = [
        {
            "offset": i,
            "key": b64(r.key),
            "value": b64(r.value),
            "headers": [[k, b64(v)] for k, v in r.headers],
            "timestamp": r.timestamp_ms,
        }
        for i, r in enumerate(records)
    ]
    assert result["groupConsumed"] == [{"partition": 0, **e} for e in expected]
    assert result["groupOffsets"] == [{"partition": 0, "offset": 12}, {"partition": 1, "offset": -1}]
    assert result["consumed"] == expected
    assert {"partition": 0, "offset": 3} in result["offsetsByTime"]
    assert {"partition": 0, "low": 0, "high": 12} in result["offsetsBefore"]
    assert {"partition": 0, "low": 4, "high": 12} in result["offsetsAfterDelete"]
    assert result["consumedAfterDelete"] == expected[4:]
    assert result["listedAfterDelete"] is False
