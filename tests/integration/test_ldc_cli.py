"""``sofakafka ldc``, ``filters`` and ``router`` against a broker process: what operators type.

Bad input is refused with a message naming what is wrong and nothing half-applied: a model file with a bad
part, a filter on a group that does not exist, a rules file with a syntax error or naming an unknown cell, a
model change that would drop a cell a rule uses. A zone subscription set with ``ldc subscribe`` gives a stock
consumer exactly its records with the lag ``groups describe`` reports at 0, and ``router run`` copies the bill
of user B while ``router status`` shows the rules' lag.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from sofakafka.client.client import KafkaClient, NewTopic
from tests.integration.conftest import REPO, BrokerProcess, _start
from tests.ldc_data import BROKER_SETTINGS, RULE_R1_TO_R2, bill_model

MODEL = bill_model("CLI", czones=())

RULES = RULE_R1_TO_R2


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = _start(tmp_path_factory.mktemp("ldc-cli"), BROKER_SETTINGS)
    try:
        yield b
    finally:
        b.kill()


def sk(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "sofakafka", *args, "--bootstrap-server", broker.bootstrap],
                          capture_output=True, text=True, timeout=120, env=env)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_model_load_show_edit_and_refusals(cli_broker: BrokerProcess, tmp_path: Path) -> None:
    bad = sk(cli_broker, "ldc", "load", write(tmp_path, "bad.toml", MODEL.replace('"GZone"', '"Global"')))
    assert bad.returncode == 2
    assert "cells.GZ00.zone: 'Global' is not a zone (RZone, GZone or CZone)" in bad.stderr
    assert "No LDC model" in sk(cli_broker, "ldc", "show").stdout  # nothing stored

    ok = sk(cli_broker, "ldc", "load", write(tmp_path, "ldc.toml", MODEL))
    assert ok.returncode == 0, ok.stderr
    assert "Stored the LDC model of instance CLI: 3 cells (GZ00, R1, R2) in 2 cities." in ok.stdout
    shown = sk(cli_broker, "ldc", "show")
    assert '[cells.R2]\nzone = "RZone"\ncity = "shanghai"\nuids = ["50-99"]' in shown.stdout

    clash = sk(cli_broker, "ldc", "add-cell", "R3", "--zone", "RZone", "--city", "shenzhen", "--uids", "90-99")
    assert clash.returncode == 2 and "cells.R3.uids: uid 90 is already owned by R2" in clash.stderr
    added = sk(cli_broker, "ldc", "add-cell", "CZ01", "--zone", "czone", "--city", "hangzhou")
    assert added.returncode == 0, added.stderr
    assert "cells CZ01, GZ00, R1, R2" in added.stdout
    names = sk(cli_broker, "ldc", "names", "--cell", "R1", "--topic", "bills", "--group", "billing")
    assert names.stdout.split() == ["CLI.R1.bills", "CLI.R1.billing"]
    wrong = sk(cli_broker, "ldc", "names", "--cell", "R1", "--topic", "bills.v2")
    assert wrong.returncode == 2 and "logical topic: 'bills.v2' contains a dot" in wrong.stderr

    # Rules: a syntax error and an unknown cell are refused before anything is stored.
    syntax = sk(cli_broker, "router", "load-rules", write(tmp_path, "syntax.toml", "[[rules]\nname = 'x'"))
    assert syntax.returncode == 2 and "TOML:" in syntax.stderr and "line 1" in syntax.stderr
    unknown = sk(cli_broker, "router", "load-rules",
                 write(tmp_path, "unknown.toml", RULES.replace('to = ["R2"]', 'to = ["R9"]')))
    assert unknown.returncode == 2
    assert "rules[0] (bills-r1-to-r2).to: 'R9' is not a cell of instance CLI" in unknown.stderr
    assert sk(cli_broker, "router", "show-rules").stdout.split() == ["RULE", "FROM", "TOPIC", "TO", "MATCH"]
    stored = sk(cli_broker, "router", "load-rules", write(tmp_path, "rules.toml", RULES))
    assert stored.returncode == 0, stored.stderr
    assert "bills-r1-to-r2 R1" in sk(cli_broker, "router", "show-rules").stdout

    # The broker keeps the rules and the model consistent whoever writes: R2 is used by a rule.
    removed = sk(cli_broker, "ldc", "remove-cell", "R2")
    assert removed.returncode == 1
    assert "sofakafka.router.rules" in removed.stderr and "'R2' is not a cell" in removed.stderr
    assert "[cells.R2]" in sk(cli_broker, "ldc", "show").stdout


def test_filters_set_list_remove_and_a_group_that_does_not_exist(cli_broker: BrokerProcess) -> None:
    missing = sk(cli_broker, "filters", "set", "--group", "nobody-here", "--key-prefix", "user-")
    assert missing.returncode == 1
    assert "GROUP_ID_NOT_FOUND" in missing.stderr and "group nobody-here does not exist" in missing.stderr
    assert "(none)" in sk(cli_broker, "filters", "list", "--group", "nobody-here").stdout
    usage = sk(cli_broker, "filters", "set", "--group", "g", "--header", "no-equals-sign")
    assert usage.returncode == 2 and "--header must be NAME=VALUE" in usage.stderr
    comma = sk(cli_broker, "filters", "set", "--group", "g", "--key", "a,b")
    assert comma.returncode == 2 and "sofakafka.filter.key.equals: 'a,b' contains a comma" in comma.stderr

    with KafkaClient(cli_broker.bootstrap) as kc:
        kc.create_topics([NewTopic("audit-log", 1, 1)])
    created = sk(cli_broker, "groups", "reset-offsets", "--group", "audit", "--topic", "audit-log",
                 "--to-earliest", "--execute")
    assert created.returncode == 0, created.stderr
    ok = sk(cli_broker, "filters", "set", "--group", "audit", "--key-prefix", "user-", "--key-prefix", "acct-",
            "--header", "region=eu")
    assert ok.returncode == 0, ok.stderr
    assert "The filter of group audit is now: key-prefix=acct-|user- header:region=eu" in ok.stdout
    listed = sk(cli_broker, "filters", "list")
    assert ["audit", "key-prefix=acct-|user-", "header:region=eu"] in [line.split() for line in
                                                                      listed.stdout.splitlines()]
    assert sk(cli_broker, "filters", "remove", "--group", "audit").returncode == 0
    assert "audit" not in sk(cli_broker, "filters", "list").stdout


def test_zone_subscription_for_a_stock_consumer_and_the_router(cli_broker: BrokerProcess, tmp_path: Path) -> None:
    bs = cli_broker.bootstrap
    model = write(tmp_path, "ldc.toml", MODEL.replace("CLI", "BILL"))
    with KafkaClient(bs) as kc:
        kc.create_topics([NewTopic("BILL.R1.bills", 2, 1), NewTopic("BILL.R2.bills", 2, 1)])
    for cell in ("R1", "R2"):
        sub = sk(cli_broker, "ldc", "subscribe", "--model", model, "--cell", cell, "--group", "billing",
                 "--topic", "bills", "--mode", "RZone")
        assert sub.returncode == 0, sub.stderr
        assert f"Created group BILL.{cell}.billing with its offsets at the start of BILL.{cell}.bills." in sub.stdout
        assert f"header:__UNIT.TARGET_R={cell}" in sub.stdout
    # R1's application sends the bills of user A (uid 10, R1) and user B (uid 57, R2), as the LDC producer does.
    p = Producer({"bootstrap.servers": bs})
    for key, target in ((b"user-A", b"R1"), (b"user-B", b"R2")):
        p.produce("BILL.R1.bills", b"bill of " + key, key,
                  headers=[("__UNIT.ORIUNIT", b"R1"), ("__UNIT.TARGET_R", target)])
    assert p.flush(30) == 0

    rules = write(tmp_path, "rules.toml", RULES)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    router = subprocess.Popen([sys.executable, "-m", "sofakafka", "router", "run", "--model", model, "--rules",
                               rules, "--at-least-once", "--group", "bill-router", "--bootstrap-server", bs],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        def app(cell: str) -> list[bytes]:
            c = Consumer({"bootstrap.servers": bs, "group.id": f"BILL.{cell}.billing", "client.id": f"app-{cell}",
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
            c.subscribe([f"BILL.{cell}.bills"])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            quiet = None
            try:
                while time.monotonic() < deadline:
                    msg = c.poll(0.2)
                    if msg is not None and msg.error() is None:
                        got.append(msg.value())
                        quiet = None
                    elif got:
                        quiet = quiet or time.monotonic() + 1.5
                        if time.monotonic() > quiet:
                            break
                c.commit(asynchronous=False)
            finally:
                c.close()
            return got

        assert app("R1") == [b"bill of user-A"]          # B's bill is filtered out in R1
        assert app("R2") == [b"bill of user-B"]          # the router copied it to R2
        for cell in ("R1", "R2"):
            described = sk(cli_broker, "groups", "describe", "--group", f"BILL.{cell}.billing")
            lags = [line.split()[5] for line in described.stdout.splitlines() if line.startswith(f"BILL.{cell}.")]
            assert lags == ["0", "0"], described.stdout
        status = sk(cli_broker, "router", "status", "--model", model, "--rules", rules, "--group", "bill-router")
        assert status.returncode == 0, status.stderr
        assert "Router group bill-router: Stable, 1 process(es)" in status.stdout
        row = next(line.split() for line in status.stdout.splitlines() if line.startswith("bills-r1-to-r2"))
        assert row == ["bills-r1-to-r2", "BILL.R1.bills", "BILL.R2.bills", "2", "0"]
    finally:
        router.send_signal(signal.SIGTERM)
        out, _ = router.communicate(timeout=60)
    assert router.returncode == 0, out
    assert "bills-r1-to-r2: copied 1, skipped 1" in out


def test_router_run_follows_the_rules_stored_in_the_cluster(cli_broker: BrokerProcess, tmp_path: Path) -> None:
    bs = cli_broker.bootstrap
    assert sk(cli_broker, "ldc", "load", write(tmp_path, "ldc.toml", MODEL)).returncode == 0
    assert sk(cli_broker, "router", "load-rules", write(tmp_path, "rules.toml", RULES)).returncode == 0
    with KafkaClient(bs) as kc:
        kc.create_topics([NewTopic(t, 1, 1) for t in ("CLI.R1.bills", "CLI.R2.bills", "CLI.R1.alerts",
                                                        "CLI.R2.alerts")])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    router = subprocess.Popen([sys.executable, "-m", "sofakafka", "router", "run", "--at-least-once", "--group",
                               "stored-rules-router", "--reload-interval-s", "1", "--bootstrap-server", bs],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

    def ends(topic: str) -> int:
        with KafkaClient(bs) as kc:
            return kc.list_offsets(topic, {0: -1})[0].offset

    def wait_for(what: str, predicate: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            assert router.poll() is None, "the router exited"
            time.sleep(0.3)

    p = Producer({"bootstrap.servers": bs})
    try:
        p.produce("CLI.R1.bills", b"bill", b"user-B", headers=[("__UNIT.TARGET_R", b"R2")])
        p.produce("CLI.R1.alerts", b"alert", b"a")
        assert p.flush(30) == 0
        wait_for("the bill copied by the stored rule", lambda: ends("CLI.R2.bills") == 1)
        # A rule for alerts, stored while the router runs, is picked up without a restart.
        alerts = RULES + '\n[[rules]]\nname = "alerts"\nfrom = "R1"\ntopic = "alerts"\nto = ["R2"]\n'
        assert sk(cli_broker, "router", "load-rules", write(tmp_path, "alerts.toml", alerts)).returncode == 0
        wait_for("the alert copied by the new rule", lambda: ends("CLI.R2.alerts") == 1)
        assert ends("CLI.R2.bills") == 1  # restarting the copying did not copy the bill again
    finally:
        router.send_signal(signal.SIGTERM)
        out, _ = router.communicate(timeout=60)
    assert router.returncode == 0, out
    assert "the stored rules or model changed: restarting the copying with them" in out
