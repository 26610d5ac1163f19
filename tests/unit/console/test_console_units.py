"""The console's pure parts: how records are shown, the login's password hashes and users file, the parsing
of times and bounds, and the backlog alarm at its edge (equal, one below, one above the threshold)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest

from sofakafka.console.alarms import AlarmStore
from sofakafka.console.auth import Authenticator, UsersFileError, hash_password, load_users, verify_password
from sofakafka.console.cluster import ConsoleError
from sofakafka.console.offsets import parse_time_ms, refuse_future
from sofakafka.console.query import KEY_SCAN_LIMIT, check_scan_bound, parse_key, parse_partition
from sofakafka.console.records import FieldView, RecordView, as_hex, as_json, as_text
from sofakafka.protocol.records import Record


def test_text_json_and_hex_shapes() -> None:
    assert FieldView.of(b'{"a": [1, 2]}').preferred == "json"
    assert json.loads(FieldView.of(b'{"a": [1, 2]}').shown) == {"a": [1, 2]}
    assert FieldView.of(b"plain words").preferred == "text"
    assert FieldView.of(b"42").preferred == "text", "a bare number is text, not JSON"
    assert FieldView.of(b"\x00\x01binary").preferred == "hex"
    assert FieldView.of(b"\xff\xfe").preferred == "hex", "not UTF-8"
    assert FieldView.of(None).preferred == "null"
    assert as_text(b"tab\tand\nnewline") == "tab\tand\nnewline"
    assert as_json("{not json") is None


@given(st.binary(max_size=200))
def test_hex_dump_carries_every_byte(data: bytes) -> None:
    dump = as_hex(data)
    assert dump is not None
    recovered = bytes.fromhex("".join(line[10:10 + 47] for line in dump.splitlines()))
    assert recovered == data


def test_record_json_download_keeps_binary_as_hex() -> None:
    view = RecordView.of("t", 0, Record(7, 1_700_000_000_000, b"\x00k", b"value", [("h", b"\xff"), ("n", None)]))
    out = view.to_json()
    assert out["key"] == "006b" and out["key_encoding"] == "hex"
    assert out["value"] == "value" and out["value_encoding"] == "utf-8"
    assert out["headers"] == [{"key": "h", "value": "ff", "encoding": "hex"},
                              {"key": "n", "value": None, "encoding": "null"}]
    assert out["time"] == "2023-11-14T22:13:20.000Z"


def test_password_hashes_verify_and_differ_by_salt() -> None:
    a, b = hash_password("secret"), hash_password("secret")
    assert a != b
    assert verify_password("secret", a) and verify_password("secret", b)
    assert not verify_password("Secret", a)
    assert not verify_password("secret", "scrypt$garbage")


def test_users_file_names_the_bad_line(tmp_path: Path) -> None:
    f = tmp_path / "users"
    f.write_text(f"# ops\nalice:{hash_password('x')}\nbob:plaintext\n")
    with pytest.raises(UsersFileError, match=r"users:3: expected name:scrypt\$"):
        load_users(f)
    f.write_text("# nobody\n")
    with pytest.raises(UsersFileError, match="names no user"):
        load_users(f)


def test_sessions_open_and_close() -> None:
    auth = Authenticator({"alice": hash_password("pw")})
    assert auth.check("alice", "pw") and not auth.check("alice", "nope") and not auth.check("mallory", "pw")
    token = auth.open_session("alice")
    session = auth.session(token)
    assert session is not None and session.user == "alice" and session.csrf
    assert auth.session("forged") is None
    auth.close_session(token)
    assert auth.session(token) is None


def test_times_parse_as_utc_or_epoch_millis() -> None:
    assert parse_time_ms("2024-05-01T12:00:00") == int(dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC).timestamp() * 1000)
    assert parse_time_ms("2024-05-01T12:00:00Z") == parse_time_ms("2024-05-01T14:00:00+02:00")
    assert parse_time_ms("1714564800000") == 1714564800000
    with pytest.raises(ConsoleError, match="is not a time"):
        parse_time_ms("yesterday")
    with pytest.raises(ConsoleError, match="in the future"):
        refuse_future(int(dt.datetime(2999, 1, 1, tzinfo=dt.UTC).timestamp() * 1000))


def test_key_scan_bound_at_its_edges() -> None:
    assert check_scan_bound(KEY_SCAN_LIMIT) == KEY_SCAN_LIMIT
    assert check_scan_bound(KEY_SCAN_LIMIT - 1) == KEY_SCAN_LIMIT - 1
    with pytest.raises(ConsoleError, match="a key scan reads at most"):
        check_scan_bound(KEY_SCAN_LIMIT + 1)
    with pytest.raises(ConsoleError, match="at least one"):
        check_scan_bound(0)
    assert check_scan_bound(1) == 1


def test_keys_and_partitions_parse() -> None:
    assert parse_key("customer-1") == b"customer-1"
    assert parse_key("hex:00ff") == b"\x00\xff"
    with pytest.raises(ConsoleError, match="is not hex"):
        parse_key("hex:0")
    assert parse_partition("") is None and parse_partition("all") is None and parse_partition("3") == 3
    with pytest.raises(ConsoleError):
        parse_partition("-1")


def test_backlog_alarm_fires_only_above_the_threshold(tmp_path: Path) -> None:
    store = AlarmStore(tmp_path / "alarms.json")
    store.set_threshold("billing", 100)

    def alarm() -> str:
        return next(line for line in generate_latest(store.registry).decode().splitlines()
                    if line.startswith('sofakafka_console_group_lag_alarm{group="billing"}'))

    for lag, fires in ((99, False), (100, False), (101, True)):
        store.observe("billing", lag)
        assert store.alarming("billing", lag) is fires
        assert alarm().endswith("1.0" if fires else "0.0")
    assert AlarmStore(tmp_path / "alarms.json").threshold("billing") == 100, "thresholds survive a restart"
    store.set_threshold("billing", None)
    assert AlarmStore(tmp_path / "alarms.json").threshold("billing") is None
    assert "billing" not in generate_latest(store.registry).decode()
