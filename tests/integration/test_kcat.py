"""Debian's kcat (librdkafka 2.0.2) against a real broker: produce with each codec, consume, list, query.

kcat has no admin verbs of its own; what it offers is metadata listing (-L) and offsets by time (-Q), both
tested. The topic is created the way kcat users get topics, by ``auto.create.topics.enable`` on the
producer's Metadata request. kcat cannot set a record's timestamp, so timestamps are librdkafka's and the
checks use what the consumer reports.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from tests.integration.conftest import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 5


def kcat(*args: str, stdin: str | None = None) -> str:
    exe = shutil.which("kcat")
    assert exe, "kcat is not installed: scripts/test.sh installs it with apt"
    done = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
    assert "ERROR" not in done.stderr, done.stderr
    return done.stdout


def test_kcat_produce_consume_metadata_and_offsets_by_time(broker: BrokerProcess, topic_name: str) -> None:
    b = ["-b", broker.bootstrap]
    sent: list[tuple[str, str, list[str]]] = []
    for codec in CODECS:
        lines = [(f"{codec}-key-{i % 3}", f"{codec}-value-{i}") for i in range(PER_CODEC)]
        headers = ["codec", codec, "run", str(len(sent))]
        kcat(
            "-P", *b, "-t", topic_name, "-p", "0", "-K", "\t", "-z", codec,
            "-H", f"codec={codec}", "-H", f"run={len(sent)}",
            stdin="".join(f"{k}\t{v}\n" for k, v in lines),
        )  # fmt: skip
        sent += [(k, v, headers) for k, v in lines]

    out = kcat("-C", *b, "-t", topic_name, "-p", "0", "-o", "beginning", "-c", str(len(sent)), "-e", "-J")
    got: list[dict[str, Any]] = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [m["offset"] for m in got] == list(range(len(sent)))
    assert [(m["key"], m["payload"], m["headers"]) for m in got] == sent
    assert all(m["tstype"] == "create" and m["ts"] > 0 for m in got)
    timestamps = [m["ts"] for m in got]
    assert timestamps == sorted(timestamps)  # one producer per codec, run one after the other

    listing = json.loads(kcat("-L", *b, "-t", topic_name, "-J"))
    assert [(br["id"], br["name"]) for br in listing["brokers"]] == [(0, broker.bootstrap)]
    (topic,) = listing["topics"]
    assert topic["topic"] == topic_name
    assert [(p["partition"], p["leader"]) for p in topic["partitions"]] == [(0, 0)]

    # The first offset whose timestamp is at or after the asked one (records may share a millisecond).
    target = timestamps[2 * PER_CODEC]
    expected = min(i for i, ts in enumerate(timestamps) if ts >= target)
    queried = kcat("-Q", *b, "-t", f"{topic_name}:0:{target}")
    assert f"[0] offset {expected}" in queried, queried
    # Past the last timestamp there is no such record: Kafka answers offset -1.
    queried = kcat("-Q", *b, "-t", f"{topic_name}:0:{timestamps[-1] + 60_000}")
    assert "[0] offset -1" in queried, queried
