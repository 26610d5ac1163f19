"""``sofakafka tokens`` without a broker: kafka-delegation-tokens.sh's required and refused options per action
(usage errors, exit code 2, before any request), and how tokens print."""

from __future__ import annotations

import json

import pytest

from sofakafka import cli
from sofakafka.cli import delegation_tokens
from sofakafka.client import DelegationToken
from sofakafka.security.client_config import client_security_from_properties

HMAC = "c2VjcmV0"  # base64 of b"secret"


@pytest.mark.parametrize(("argv", "message"), [
    (["--create"], "create needs --max-life-time-period"),
    (["--renew", "--hmac", HMAC], "renew needs --renew-time-period"),
    (["--renew", "--renew-time-period", "1"], "renew needs --hmac"),
    (["--expire", "--hmac", HMAC], "expire needs --expiry-time-period"),
    (["--create", "--max-life-time-period", "-1", "--hmac", HMAC], "--hmac cannot be used with create"),
    (["--describe", "--renewer-principal", "User:bob"], "--renewer-principal cannot be used with describe"),
    (["--renew", "--hmac", HMAC, "--renew-time-period", "1", "--owner-principal", "User:a"],
     "--owner-principal cannot be used with renew"),
    (["--create", "--max-life-time-period", "1", "--renewer-principal", "bob"], "must be principalType:name"),
    (["--renew", "--hmac", "not base64!", "--renew-time-period", "1"], "--hmac must be the token's HMAC in base64"),
    (["--create", "--describe"], "exactly one of"),
    ([], "exactly one of"),
])
def test_bad_command_lines_are_usage_errors_before_any_request(argv: list[str], message: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # Port 1: nothing listens there, so reaching the network would fail differently.
    assert cli.main(["tokens", *argv, "--bootstrap-server", "127.0.0.1:1", "--request-timeout-ms", "500"]) == 2
    assert message in capsys.readouterr().err


def test_tokens_print_as_kafkas_tool_prints_them(capsys: pytest.CaptureFixture[str]) -> None:
    token = DelegationToken("tok-1", b"secret", "User:alice", ("User:bob",), 0, 86_400_000, 604_800_000)
    delegation_tokens.print_tokens([token])
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["TOKENID", "HMAC", "OWNER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"]
    assert row.split()[:4] == ["tok-1", HMAC, "User:alice", "[User:bob]"]
    assert json.loads(json.dumps(delegation_tokens._token_json(token)))["hmac"] == HMAC


def test_a_command_config_logs_in_with_a_token_as_kafkas_clients_do() -> None:
    security = client_security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="tok-1" '
                            f'password="{HMAC}" tokenauth="true";'})
    assert (security.username, security.password, security.token_auth) == ("tok-1", HMAC, True)
    plain = client_security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
                            'password="p";'})
    assert not plain.token_auth
