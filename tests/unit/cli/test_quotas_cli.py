"""``sofakafka quotas`` and kafka-configs' quota syntax without a broker: what is refused before any request
(bad keys and values name the key and the reason, exit code 2) and how values are printed."""

from __future__ import annotations

import pytest

from sofakafka import cli
from sofakafka.cli.common import UsageError
from sofakafka.cli.quotas import java_double, parse_changes


@pytest.mark.parametrize(("value", "text"), [
    (1024.0, "1024.0"), (0.5, "0.5"), (9999999.0, "9999999.0"),   # one below Java's switch to E notation
    (1e7, "1.0E7"), (12345678.0, "1.2345678E7"), (1e-3, "0.001"), (1e-4, "1.0E-4"), (0.0, "0.0"),
])
def test_values_print_as_kafka_configs_prints_them(value: float, text: str) -> None:
    assert java_double(value) == text


def test_changes_parse_into_values_and_removals() -> None:
    assert parse_changes(["producer_byte_rate=1048576", "request_percentage=12.5"], ["consumer_byte_rate"]) == [
        ("producer_byte_rate", 1048576.0), ("request_percentage", 12.5), ("consumer_byte_rate", None)]


@pytest.mark.parametrize(("add", "delete", "message"), [
    (["producer_byte_rate"], [], "must be key=value"),
    (["producer_byte_rate=fast"], [], "Cannot parse quota configuration value for producer_byte_rate"),
    (["controller_mutation_rate=5"], [], "controller_mutation_rate is not a client quota"),
    ([], ["retention.ms"], "retention.ms is not a client quota"),
    ([], [], "needs --add-config or --delete-config"),
])
def test_bad_changes_name_the_key_and_the_reason(add: list[str], delete: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_changes(add, delete)


@pytest.mark.parametrize(("argv", "message"), [
    (["quotas", "alter", "--user", "a", "--user-default", "--add-config", "producer_byte_rate=1"],
     "--user and --user-default exclude each other"),
    (["quotas", "alter", "--client-id", "a", "--add-config", "producer_byte_rate=-"],
     "Cannot parse quota configuration value"),
    (["configs", "--alter", "--entity-type", "clients", "--entity-type", "topics", "--entity-name", "x",
      "--add-config", "producer_byte_rate=1"], "only users and clients combine"),
])
def test_bad_command_lines_are_usage_errors(argv: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*argv, "--bootstrap-server", "127.0.0.1:1"]) == 2
    assert message in capsys.readouterr().err
