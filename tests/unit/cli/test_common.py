"""What every console tool shares (sofakafka/cli/common.py and the dispatcher), without a broker: the verb
list, the client properties file, and the table output."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from sofakafka import cli
from sofakafka.cli import common
from sofakafka.cli.main import TOOLS, VERBS


def test_help_lists_every_verb_with_its_summary(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # argparse wraps at hyphens, inside the Kafka script names
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for tool in TOOLS:
        assert re.search(rf"^ +{tool.VERB} +{re.escape(tool.SUMMARY)}$", out, re.MULTILINE), tool.VERB


def test_every_verb_is_named_once_and_an_unknown_one_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(VERBS) == len(TOOLS)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["no-such-verb"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'no-such-verb'" in capsys.readouterr().err


def _args(tmp_path: Path, text: str | None, timeout: int | None = None) -> argparse.Namespace:
    path = None
    if text is not None:
        path = tmp_path / "client.properties"
        path.write_text(text)
    return argparse.Namespace(bootstrap_server="127.0.0.1:1", command_config=None if path is None else str(path),
                              request_timeout_ms=timeout)


def test_the_command_config_file_sets_the_client(tmp_path: Path) -> None:
    args = _args(tmp_path, "# a comment\n! another\nclient.id = reporting\nrequest.timeout.ms: 1500\n"
                           "retry.backoff.ms=20\nsecurity.protocol=plaintext\n")
    with common.client(args, "topics") as client:
        assert (client.client_id, client.request_timeout_s, client.retry_backoff_s) == ("reporting", 1.5, 0.02)


def test_the_command_line_timeout_wins_over_the_file_and_defaults_apply_without_one(tmp_path: Path) -> None:
    with common.client(_args(tmp_path, "request.timeout.ms=1500\n", timeout=2500), "topics") as client:
        assert client.request_timeout_s == 2.5
    with common.client(_args(tmp_path, None), "groups") as client:
        assert client.client_id == "sofakafka-groups"
        assert client.request_timeout_s == common.DEFAULT_REQUEST_TIMEOUT_MS / 1000


def test_keys_without_effect_here_are_named_in_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with common.client(_args(tmp_path, "retries=3\nlinger.ms=5\nclient.id=x\n"), "topics"):
        pass
    err = capsys.readouterr().err
    assert "warning: ignoring linger.ms, retries from" in err and "client.id" not in err


def test_the_command_config_file_sets_tls_and_sasl(tmp_path: Path) -> None:
    """The security helper's and the house's --command-config are one: Kafka's client keys become our client's
    TLS context and SASL login (the login itself is proven against brokers in tests/integration/test_security.py)."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    args = _args(tmp_path, "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                           'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                           'username="alice" password="alice-secret";\n'
                           f"ssl.truststore.location={ca_file}\nssl.endpoint.identification.algorithm=\n")
    with common.client(args, "acls") as client:
        security = client.security
        assert security is not None and security.uses_ssl and security.uses_sasl
        assert (security.sasl_mechanism, security.username, security.password) == ("SCRAM-SHA-512", "alice",
                                                                                    "alice-secret")
        assert security.ssl_context is not None and not security.ssl_context.check_hostname
    with common.client(_args(tmp_path, "security.protocol=PLAINTEXT\n"), "topics") as client:
        assert client.security is None


@pytest.mark.parametrize(("text", "named"), [
    ("security.protocol=SASL_SSL\n", "sasl.mechanism: must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    ("security.protocol=KERBEROS\n", "security.protocol: must be one of PLAINTEXT, SSL"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", "sasl.jaas.config: PLAIN needs a username"),
    ("security.protocol=SSL\nssl.truststore.location=/no/such/ca.pem\n", "ssl.truststore.location: no such file"),
    ("security.protocol=SSL\nssl.keystore.type=JKS\nssl.keystore.location=/etc/hostname\n",
     "ssl.keystore.type: JKS stores are not supported"),
    ("request.timeout.ms=soon\n", "request.timeout.ms: not an integer"),
    ("request.timeout.ms=-1\n", "request.timeout.ms: must not be negative"),
    ("just-a-word\n", "client.properties:1: expected key=value"),
])
def test_a_bad_command_config_is_a_usage_error_naming_the_key(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(common.UsageError, match=named):
        common.client(_args(tmp_path, text), "topics")


def test_a_missing_command_config_file_is_a_usage_error(tmp_path: Path) -> None:
    args = _args(tmp_path, None)
    args.command_config = str(tmp_path / "absent.properties")
    with pytest.raises(common.UsageError, match="cannot read"):
        common.client(args, "topics")


def test_tables_pad_every_column_but_the_last_or_print_json(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [["GROUP", "STATE"], ["billing", "Empty"], ["a", "Stable"]]
    common.print_table(rows)
    assert capsys.readouterr().out == "GROUP   STATE\nbilling Empty\na       Stable\n"
    common.print_table(rows, as_json=True)
    assert json.loads(capsys.readouterr().out) == [{"GROUP": "billing", "STATE": "Empty"},
                                                   {"GROUP": "a", "STATE": "Stable"}]


def test_usage_errors_exit_2_naming_the_verb(capsys: pytest.CaptureFixture[str]) -> None:
    def work() -> int:
        raise common.UsageError("--topic is required")

    assert common.run("topics", work) == 2
    assert capsys.readouterr().err == "sofakafka topics: error: --topic is required\n"
