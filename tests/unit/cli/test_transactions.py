"""``sofakafka transactions`` without a broker: every bad combination of options is a usage error (exit 2) naming
what is wrong, before any request; an unreachable broker is exit 1. The tool against a broker is in
tests/integration/test_transactions.py."""

from __future__ import annotations

import pytest

from sofakafka.cli import transactions

UNREACHABLE = ("--bootstrap-server", "127.0.0.1:1", "--request-timeout-ms", "500")


@pytest.mark.parametrize(("argv", "named"), [
    ((), "exactly one of list, describe, abort is required"),
    (("list", "--describe"), "exactly one of list, describe, abort is required"),
    (("describe",), "describe needs --transactional-id"),
    (("abort",), "abort needs --transactional-id, or --topic and --partition"),
    (("abort", "--topic", "t"), "abort needs --transactional-id, or --topic and --partition"),
    (("abort", "--topic", "t", "--partition", "0", "--producer-id", "5"),
     "--producer-id and --producer-epoch go together"),
    (("abort", "--topic", "t", "--partition", "0", "--producer-epoch", "5"),
     "--producer-id and --producer-epoch go together"),
    (("abort", "--transactional-id", "x", "--topic", "t"),
     "--transactional-id and --topic are two different aborts: give one"),
])
def test_bad_options_are_usage_errors(argv: tuple[str, ...], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert transactions.main([*UNREACHABLE, *argv]) == 2
    assert f"sofakafka transactions: error: {named}" in capsys.readouterr().err


def test_bootstrap_server_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert transactions.main(["list"]) == 2
    assert "--bootstrap-server is required" in capsys.readouterr().err


def test_an_unreachable_broker_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert transactions.main([*UNREACHABLE, "--list"]) == 1
    assert capsys.readouterr().err.startswith("Error: ")
