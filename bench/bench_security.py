"""Produce and consume MB/s over SASL_SSL next to PLAINTEXT, on one broker, in one run.

One ``sofakafka serve`` process with two listeners: PLAINTEXT and SASL_SSL (TLS from a throwaway trustme CA,
SCRAM-SHA-512 login, the ACL authorizer on with the benchmark user allowed on its topics, so the checks
every request makes are in the figures too). The same librdkafka (confluent-kafka) load runs against each
listener, one after the other, each on its own topic:

1. produce: ``--messages`` records of ``--record-bytes``, acks=1, ``linger.ms=5``, no compression, timed from
   the first ``produce()`` to the end of ``flush()``;
2. consume: a fresh group reads them all from the start, timed until the last record arrives.

The table prints MB/s and msg/s per listener and the SASL_SSL/PLAINTEXT ratio. Every phase has a deadline;
the broker is stopped and its directory removed at the end. From the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_security.py [--messages 200000] [--record-bytes 1024]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trustme
from confluent_kafka import Consumer, Producer

REPO = Path(__file__).resolve().parent.parent
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(port: int, deadline: float) -> None:
    import socket

    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"broker did not listen on {port} in time")


def produce(conf: dict[str, Any], topic: str, messages: int, record: bytes, max_s: float) -> float:
    p = Producer({**conf, "acks": "1", "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages":
                  1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    deadline = time.monotonic() + max_s
    # Warm up: the topic's metadata and the connection (its TLS handshake and login) before the clock starts.
    p.produce(topic, record)
    p.flush(max_s)
    start = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                p.produce(topic, record)
                break
            except BufferError:
                p.poll(0.01)
                if time.monotonic() > deadline:
                    raise SystemExit("produce did not finish in time") from None
        p.poll(0)
    if p.flush(max(1.0, deadline - time.monotonic())) != 0:
        raise SystemExit("produce did not finish in time")
    return time.perf_counter() - start


def consume(conf: dict[str, Any], topic: str, messages: int, max_s: float) -> float:
    c = Consumer({**conf, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.subscribe([topic])
    deadline = time.monotonic() + max_s
    got = 0
    start = None
    try:
        while got < messages + 1:  # + the warm-up record
            if time.monotonic() > deadline:
                raise SystemExit(f"consume did not finish in time ({got} of {messages})")
            batch = c.consume(10000, 1.0)
            if batch and start is None:
                start = time.perf_counter()
            got += sum(1 for m in batch if m.error() is None)
    finally:
        c.close()
    assert start is not None
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-security-"))
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(work / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(work / "server.pem"))
    plain_port, ssl_port = free_port(), free_port()
    overrides = {
        "broker.id": "0", "log.dirs": str(work / "data"),
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{ssl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN", "sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(work / "server.pem"),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0",
    }
    cmd = [sys.executable, "-m", "sofakafka", "serve"] + [a for k, v in overrides.items() for a in ("--override", f"{k}={v}")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open(work / "broker.log", "wb") as log:
        broker = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work)
    try:
        wait_port(ssl_port, time.monotonic() + 60)
        admin_cmd = [sys.executable, "-m", "sofakafka"]
        (work / "admin.properties").write_text("security.protocol=PLAINTEXT\n")
        common = ["--bootstrap-server", f"127.0.0.1:{plain_port}"]
        subprocess.run([*admin_cmd, "users", "add", "bench", "--password", "bench-pw", "--mechanism",
                        "SCRAM-SHA-512", *common], check=True, env=env, capture_output=True)
        subprocess.run([*admin_cmd, "acls", "add", "--allow-principal", "User:bench", "--operation", "All",
                        "--topic", "bench-", "--group", "bench-", "--resource-pattern-type", "PREFIXED", *common],
                       check=True, env=env, capture_output=True)
        confs = {
            "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain_port}"},
            "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SASL_SSL",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": "bench-pw",
                         "ssl.ca.location": str(work / "ca.pem")},
        }
        record = os.urandom(args.record_bytes)
        mb = args.messages * args.record_bytes / 1e6
        results: dict[str, tuple[float, float]] = {}
        for name, conf in confs.items():
            topic = f"bench-{name.lower()}-{uuid.uuid4().hex[:6]}"
            p_s = produce(conf, topic, args.messages, record, args.max_seconds)
            c_s = consume(conf, topic, args.messages, args.max_seconds)
            results[name] = (p_s, c_s)
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
              f"{args.messages} records of {args.record_bytes} B, acks=1, one partition")
        print(f"{'listener':<12}{'produce MB/s':>14}{'produce msg/s':>15}{'consume MB/s':>14}{'consume msg/s':>15}")
        for name, (p_s, c_s) in results.items():
            print(f"{name:<12}{mb / p_s:>14.1f}{args.messages / p_s:>15.0f}{mb / c_s:>14.1f}{args.messages / c_s:>15.0f}")
        (pp, pc), (sp, sc) = results["PLAINTEXT"], results["SASL_SSL"]
        print(f"{'SASL_SSL/PLAINTEXT':<12}{pp / sp:>8.2f} (produce){pc / sc:>22.2f} (consume)")
        return 0
    finally:
        broker.terminate()
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
