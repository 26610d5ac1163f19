"""``sofakafka console``'s options, without a cluster: bad options and files are one line on stderr and exit code
2 before anything is served, and hash-password prints a users-file line the console reads back."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from sofakafka.cli.console import main as console_main
from sofakafka.console.auth import load_users, verify_password


@pytest.mark.parametrize(("args", "message"), [
    (["--bootstrap-server", "host:notaport"], "--bootstrap-server: bad bootstrap server"),
    ([], "--bootstrap-server is required"),
    (["--bootstrap-server", "127.0.0.1:9092", "--users-file", "{bad_users}"], "users:1: expected name:scrypt$"),
    (["--bootstrap-server", "127.0.0.1:9092", "--users-file", "{missing}"], "cannot read users file"),
    (["--bootstrap-server", "127.0.0.1:9092", "--port", "70000"], "--port: 70000 is not a port number"),
    (["--bootstrap-server", "127.0.0.1:9092", "--request-timeout-ms", "0"], "--request-timeout-ms: must be positive"),
    (["--bootstrap-server", "127.0.0.1:9092", "--alarm-interval", "0"], "--alarm-interval: must be positive"),
    (["--bootstrap-server", "127.0.0.1:9092", "--command-config", "{sasl}"], "sasl.mechanism: must be one of PLAIN"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             args: list[str], message: str) -> None:
    (tmp_path / "users").write_text("alice:plaintext\n")
    (tmp_path / "client.properties").write_text("security.protocol=SASL_SSL\n")
    paths = {"bad_users": tmp_path / "users", "missing": tmp_path / "missing", "sasl": tmp_path / "client.properties"}
    assert console_main([a.format(**paths) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sofakafka console: error: ") and message in err and "Traceback" not in err, err


def test_hash_password_prints_a_line_the_users_file_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    assert console_main(["hash-password", "alice"]) == 0
    line = capsys.readouterr().out.strip()
    users_file = tmp_path / "users"
    users_file.write_text(line + "\n")
    users = load_users(users_file)
    assert verify_password("s3cret", users["alice"]) and not verify_password("s3creT", users["alice"])


@pytest.mark.parametrize(("argv", "message"), [
    (["hash-password", "al:ice"], "cannot contain ':'"),
    (["hash-password"], "usage: sofakafka console hash-password NAME"),
])
def test_hash_password_refuses_bad_names(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                         argv: list[str], message: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("pw\n"))
    assert console_main(argv) == 2
    assert message in capsys.readouterr().err
