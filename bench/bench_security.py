"""Produce and consume MB/s over SASL_SSL and SASL_PLAINTEXT next to PLAINTEXT, on one broker, in one run.

One ``sofakafka serve`` process with three listeners: PLAINTEXT, SASL_PLAINTEXT and SASL_SSL (TLS from a
throwaway trustme CA; SCRAM-SHA-512 logins; the ACL authorizer on with the benchmark user allowed on its
topics, so the checks every request makes are in the figures too). The same librdkafka (confluent-kafka) load
runs against each listener, one after the other, each on its own topic:

1. produce: ``--messages`` records of ``--record-bytes``, acks=1, ``linger.ms=5``, no compression, timed from
   the first ``produce()`` to the end of ``flush()``;
2. consume: a fresh group reads them all from the start, timed from its first batch until the last record.

An untimed round over PLAINTEXT with a tenth of the records comes first, so that what the broker does once
(the offsets topic, code run for the first time) is in no listener's figures.

Per listener and phase the table prints MB/s and the broker's own CPU time per MB (user + system of the broker
process, read from /proc), and then each secured listener's ratios to PLAINTEXT. On a shared machine the MB/s
move with whatever else runs (client and broker compete for the same cores); the broker's CPU per MB does not,
and SASL_PLAINTEXT against SASL_SSL separates what the login and the ACL checks cost from what TLS costs.
Every phase has a deadline; the broker is stopped and its directory removed at the end. From the repository
root::

    PYTHONPATH=. .venv/bin/python bench/bench_security.py [--messages 200000] [--record-bytes 1024]

``--only SASL_SSL --py-spy FILE`` runs one listener's phases with the broker under py-spy (as its child, 250 Hz)
and writes the broker's collapsed stacks to FILE, as ``bench_broker.py --py-spy`` does.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trustme
from bench_broker import children, stop
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


Timing = tuple[float, float]  # (wall seconds, broker CPU seconds) of one phase's timed window


def produce(conf: dict[str, Any], topic: str, messages: int, record: bytes, max_s: float,
            cpu: Callable[[], float]) -> Timing:
    p = Producer({**conf, "acks": "1", "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages":
                  1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    deadline = time.monotonic() + max_s
    # Warm up: the topic's metadata and the connection (its TLS handshake and login) before the clock starts.
    p.produce(topic, record)
    p.flush(max_s)
    start, cpu0 = time.perf_counter(), cpu()
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
    return time.perf_counter() - start, cpu() - cpu0


def consume(conf: dict[str, Any], topic: str, messages: int, max_s: float, cpu: Callable[[], float]) -> Timing:
    """From the first batch to the last record: the group's join (and, for the first group of the run, the
    offsets topic's creation) stays outside both the clock and the broker CPU figure."""
    c = Consumer({**conf, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.subscribe([topic])
    deadline = time.monotonic() + max_s
    got = 0
    start: Timing | None = None
    try:
        while got < messages + 1:  # + the warm-up record
            if time.monotonic() > deadline:
                raise SystemExit(f"consume did not finish in time ({got} of {messages})")
            batch = c.consume(10000, 1.0)
            if batch and start is None:
                start = (time.perf_counter(), cpu())
            got += sum(1 for m in batch if m.error() is None)
    finally:
        c.close()
    assert start is not None
    return time.perf_counter() - start[0], cpu() - start[1]


def broker_cpu_s(pid: int) -> float:
    """User + system CPU seconds the broker process has used (every thread): what the broker itself spends,
    whatever else the machine is doing."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--only", choices=LISTENERS, help="run one listener's phases")
    ap.add_argument("--py-spy", type=Path, metavar="FILE", help="profile the broker, collapsed stacks into FILE")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-security-"))
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(work / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(work / "server.pem"))
    ports = {name: free_port() for name in LISTENERS}
    overrides = {
        "broker.id": "0", "log.dirs": str(work / "data"),
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN", "sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(work / "server.pem"),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0",
    }
    cmd = [sys.executable, "-m", "sofakafka", "serve"] + [a for k, v in overrides.items() for a in ("--override", f"{k}={v}")]
    if args.py_spy is not None:
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        cmd = [py_spy, "record", "--nonblocking", "--rate", "250", "--format", "raw", "-o",
               str(args.py_spy.resolve()), "--", *cmd]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open(work / "broker.log", "wb") as log:
        broker = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work)
    try:
        wait_port(ports["SASL_SSL"], time.monotonic() + 60)
        pid = next(iter(children(broker.pid)), broker.pid) if args.py_spy is not None else broker.pid

        def cpu() -> float:
            return broker_cpu_s(pid)
        admin_cmd = [sys.executable, "-m", "sofakafka"]
        common = ["--bootstrap-server", f"127.0.0.1:{ports['PLAINTEXT']}"]
        subprocess.run([*admin_cmd, "users", "add", "bench", "--password", "bench-pw", "--mechanism",
                        "SCRAM-SHA-512", *common], check=True, env=env, capture_output=True)
        subprocess.run([*admin_cmd, "acls", "add", "--allow-principal", "User:bench", "--operation", "All",
                        "--topic", "bench-", "--group", "bench-", "--resource-pattern-type", "PREFIXED", *common],
                       check=True, env=env, capture_output=True)
        login = {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": "bench-pw"}
        confs = {
            "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"},
            "SASL_PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
                               "security.protocol": "SASL_PLAINTEXT", **login},
            "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
                         **login, "ssl.ca.location": str(work / "ca.pem")},
        }
        record = os.urandom(args.record_bytes)
        mb = args.messages * args.record_bytes / 1e6
        # An untimed round first (a tenth of the records over PLAINTEXT): whatever the broker does once in its
        # life (the offsets topic, the first segment files, code paths run the first time) stays out of the
        # first listener's figures.
        warm = max(1, args.messages // 10)
        produce(confs["PLAINTEXT"], "bench-warm-up", warm, record, args.max_seconds, cpu)
        consume(confs["PLAINTEXT"], "bench-warm-up", warm, args.max_seconds, cpu)
        # listener -> (produce s, produce broker CPU s, consume s, consume broker CPU s)
        results: dict[str, tuple[float, float, float, float]] = {}
        for name, conf in confs.items():
            if args.only not in (None, name):
                continue
            topic = f"bench-{name.lower()}-{uuid.uuid4().hex[:6]}"
            p_s, p_cpu = produce(conf, topic, args.messages, record, args.max_seconds, cpu)
            c_s, c_cpu = consume(conf, topic, args.messages, args.max_seconds, cpu)
            results[name] = (p_s, p_cpu, c_s, c_cpu)
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, load "
              f"{os.getloadavg()[0]:.1f}; {args.messages} records of {args.record_bytes} B, acks=1, one partition")
        print(f"{'listener':<26}{'produce MB/s':>13}{'broker ms/MB':>13}{'consume MB/s':>14}{'broker ms/MB':>13}")
        for name, (p_s, p_cpu, c_s, c_cpu) in results.items():
            print(f"{name:<26}{mb / p_s:>13.1f}{1000 * p_cpu / mb:>13.2f}{mb / c_s:>14.1f}{1000 * c_cpu / mb:>13.2f}")
        if "PLAINTEXT" in results:
            p_s, p_cpu, c_s, c_cpu = results["PLAINTEXT"]
            for name in ("SASL_PLAINTEXT", "SASL_SSL"):
                if name in results:
                    q_s, q_cpu, d_s, d_cpu = results[name]
                    print(f"{name + '/PLAINTEXT':<26}{p_s / q_s:>13.2f}{q_cpu / p_cpu:>13.2f}"
                          f"{c_s / d_s:>14.2f}{d_cpu / c_cpu:>13.2f}")
        return 0
    finally:
        stop(broker, profiled=args.py_spy is not None)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
