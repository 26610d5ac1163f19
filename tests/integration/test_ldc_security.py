"""LDC on a secured broker (TLS, SASL SCRAM and the ACL authorizer, one broker for the module).

* A group's filter is a config of the group, which Kafka 2.6's ACLs (ours) check on the cluster: ``sofakafka
  filters set`` by a user with only READ on the group is refused (CLUSTER_AUTHORIZATION_FAILED) with nothing
  stored; with ALTER_CONFIGS on the cluster it is stored, and a stock librdkafka consumer logged in over SASL_SSL
  as a member of the group gets only the matching records.
* ``sofakafka router run --command-config FILE`` reaches the cluster over SASL_SSL with the file's SCRAM login
  and CA (Kafka's client property names, translated for librdkafka), copies bills by rule exactly once (in
  transactions) as a user with only the ACLs docs/ldc.md lists, and ``router status`` logged in the same way
  sees the rule's lag drop to 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from sofakafka.ldc import UNIT_TARGET_R
from tests.integration.conftest import REPO
from tests.integration.security_setup import ADMIN, SecureBroker, running_secure_broker, used_by_this_test
from tests.ldc_data import RULE_R1_TO_R2, bill_model

APP = ("ldcapp", "ldcapp-pw")
ROUTER = ("ldcrouter", "ldcrouter-pw")
WAIT_S = 60.0  # bounds on waiting, not timing assertions


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    with running_secure_broker(tmp_path_factory.mktemp("ldc-secure")) as sb:
        for name, password in (APP, ROUTER):
            sb.sofakafka("users", "add", name, "--password", password, "--mechanism", "SCRAM-SHA-512")
        yield sb


@pytest.fixture
def sb(secure: SecureBroker) -> Iterator[SecureBroker]:
    with used_by_this_test(secure):
        yield secure


def scram_properties(sb: SecureBroker, path: Path, user: tuple[str, str]) -> Path:
    """Kafka's client properties (Java names) for a SCRAM-SHA-512 login over SASL_SSL."""
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user[0]}" password="{user[1]}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={sb.pki.ca}\n")
    return path


def admin_conf(sb: SecureBroker) -> dict[str, Any]:
    return {"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": ADMIN[0], "sasl.password": ADMIN[1]}


def sofakafka_as(sb: SecureBroker, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sofakafka", *args, "--bootstrap-server", sb.address("SASL_SSL"),
                           "--command-config", str(config)], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_a_filter_needs_alter_configs_on_the_cluster_and_filters_a_sasl_ssl_consumer(sb: SecureBroker,
                                                                                    tmp_path: Path) -> None:
    topic, group = "ldcsec-filtered", "ldcsec-group"
    sb.sofakafka("topics", "create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    sb.sofakafka("acls", "add", "--allow-principal", f"User:{APP[0]}", "--operation", "Read", "--topic", topic,
                 "--group", group)
    app_config = scram_properties(sb, tmp_path / "app.properties", APP)

    consumer = Consumer({"bootstrap.servers": sb.address("SASL_SSL"), "security.protocol": "SASL_SSL",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": APP[0], "sasl.password": APP[1],
                         "ssl.ca.location": sb.pki.ca, "group.id": group, "client.id": "ldcsec-app",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    assigned: list[object] = []
    consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(parts))
    try:
        deadline = time.monotonic() + WAIT_S
        while not assigned and time.monotonic() < deadline:
            assert consumer.poll(0.5) is None  # the topic is empty: the poll only joins the group
        assert assigned, "the consumer never joined its group"

        # READ on the group does not allow changing what the group may read: refused, nothing stored.
        refused = sofakafka_as(sb, app_config, "filters", "set", "--group", group, "--header", "tag=a")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr
        assert group not in sb.sofakafka("filters", "list").stdout

        sb.sofakafka("acls", "add", "--allow-principal", f"User:{APP[0]}", "--operation", "AlterConfigs",
                     "--cluster")
        stored = sofakafka_as(sb, app_config, "filters", "set", "--group", group, "--header", "tag=a")
        assert stored.returncode == 0, stored.stdout + stored.stderr
        assert group in sb.sofakafka("filters", "list").stdout

        producer = Producer(admin_conf(sb))
        for i in range(6):
            producer.produce(topic, f"r{i}".encode(), headers=[("tag", b"a" if i % 2 == 0 else b"b")])
        assert producer.flush(WAIT_S) == 0
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # a record the filter should have left out would show up here
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [b"r0", b"r2", b"r4"]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_router_runs_over_sasl_ssl_with_the_command_config_login(sb: SecureBroker, tmp_path: Path) -> None:
    source, target, group = "SEC.R1.bills", "SEC.R2.bills", "ldcsec-router"
    for t in (source, target):
        sb.sofakafka("topics", "create", "--topic", t, "--partitions", "2", "--replication-factor", "1")
    principal = f"User:{ROUTER[0]}"
    sb.sofakafka("acls", "add", "--allow-principal", principal, "--operation", "Read", "--topic", source,
                 "--group", group)
    sb.sofakafka("acls", "add", "--allow-principal", principal, "--operation", "Write", "--topic", target)
    sb.sofakafka("acls", "add", "--allow-principal", principal, "--operation", "IdempotentWrite", "--cluster")
    sb.sofakafka("acls", "add", "--allow-principal", principal, "--operation", "Write", "--transactional-id",
                 "ldcsec-router-tx")
    model = tmp_path / "model.toml"
    model.write_text(bill_model("SEC", gzone=False, czones=()))
    rules = tmp_path / "rules.toml"
    rules.write_text(RULE_R1_TO_R2)
    config = scram_properties(sb, tmp_path / "router.properties", ROUTER)

    producer = Producer(admin_conf(sb))
    for uid, region in ((10, "R1"), (57, "R2"), (61, "R2")):
        producer.produce(source, f"bill of {uid}".encode(), key=f"user-{uid}".encode(),
                         headers=[(UNIT_TARGET_R, region.encode())])
    assert producer.flush(WAIT_S) == 0

    log = (tmp_path / "router.log").open("w")
    router = subprocess.Popen(
        [sys.executable, "-m", "sofakafka", "router", "run", "--rules", str(rules), "--model", str(model),
         "--group", group, "--transactional-id", "ldcsec-router-tx", "--bootstrap-server", sb.address("SASL_SSL"),
         "--command-config", str(config), "--client-config", "session.timeout.ms=10000"],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        check = Consumer({**admin_conf(sb), "group.id": "ldcsec-check", "auto.offset.reset": "earliest",
                          "enable.auto.commit": False, "isolation.level": "read_committed"})
        check.subscribe([target])
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + WAIT_S
            while len(got) < 2 and time.monotonic() < deadline and router.poll() is None:
                msg = check.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
        finally:
            check.close()
        assert sorted(got) == [b"bill of 57", b"bill of 61"], (tmp_path / "router.log").read_text()

        deadline = time.monotonic() + WAIT_S
        while True:  # the router commits after its copies: its lag drops to 0
            status = sofakafka_as(sb, config, "router", "status", "--rules", str(rules), "--model", str(model),
                                  "--group", group, "--json")
            assert status.returncode == 0, status.stdout + status.stderr
            lags = [row["LAG"] for row in json.loads(status.stdout)]
            if lags == ["0"] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert lags == ["0"], status.stdout
    finally:
        router.send_signal(signal.SIGTERM)
        try:
            code = router.wait(60)
        except subprocess.TimeoutExpired:
            router.kill()
            router.wait()
            raise
        log.close()
    assert code == 0, (tmp_path / "router.log").read_text()
