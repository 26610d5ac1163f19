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


@pytest.mark.parametrize(("text", "named"), [
    ("security.protocol=SASL_SSL\n", "security.protocol: SASL_SSL is not supported"),
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
