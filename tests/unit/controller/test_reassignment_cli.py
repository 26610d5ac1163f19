"""`sofakafka reassign`'s file handling and usage errors (the requests themselves are exercised against a real
cluster in tests/cluster/test_reassignment.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sofakafka import cli
from sofakafka.cli import reassign_partitions


def test_the_plan_file_round_trips_in_the_tools_format(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 0, "replicas": [2, 3]}]}))
    parsed, dirs = reassign_partitions.read_plan(str(plan))
    assert parsed == {("t", 1): [3, 1], ("t", 0): [2, 3]} and dirs == {}
    assert json.loads(reassign_partitions.plan_json(dict(parsed))) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]}]}


def test_log_dirs_name_the_dir_of_each_replica_and_any_leaves_it_to_the_broker(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/data/a", "any"]},
        {"topic": "u", "partition": 3, "replicas": [2], "log_dirs": ["/data/b"]}]}))
    parsed, dirs = reassign_partitions.read_plan(str(plan))
    assert parsed == {("t", 0): [1, 2], ("u", 3): [2]}
    assert dirs == {("t", 0, 1): "/data/a", ("u", 3, 2): "/data/b"}


def test_the_log_dir_throttle_goes_with_execute_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}))
    assert cli.main(["reassign", "--bootstrap-server", "127.0.0.1:1", "--reassignment-json-file", str(plan),
                     "--verify", "--replica-alter-log-dirs-throttle", "10"]) == 2
    assert "only allowed with --execute" in capsys.readouterr().err
    assert cli.main(["reassign", "--bootstrap-server", "127.0.0.1:1", "--reassignment-json-file", str(plan),
                     "--execute", "--replica-alter-log-dirs-throttle", "-1"]) == 2


@pytest.mark.parametrize("doc", [
    {"version": 1, "partitions": []},
    {"version": 1, "partitions": [{"topic": "t", "partition": 0}]},
    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/data"]}]},
    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": "/data"}]},
    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                                  {"topic": "t", "partition": 0, "replicas": [2]}]},
])
def test_bad_plans_are_usage_errors(tmp_path: Path, doc: object, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    assert cli.main(["reassign", "--bootstrap-server", "127.0.0.1:1", "--reassignment-json-file", str(plan),
                     "--execute"]) == 2
    assert "sofakafka reassign: error:" in capsys.readouterr().err


def test_exactly_one_action(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["reassign", "--bootstrap-server", "127.0.0.1:1", "--list", "--execute"]) == 2
    assert cli.main(["reassign", "--bootstrap-server", "127.0.0.1:1", "--verify"]) == 2
    assert "--reassignment-json-file" in capsys.readouterr().err
