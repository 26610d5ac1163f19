"""The documentation stays true: the configuration reference is what the generator makes of the code, and
the README's links and commands point at things that exist."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from sofakafka.broker.config import CONFIG_KEYS, TOPIC_CONFIG_SYNONYMS
from sofakafka.storage.config import TOPIC_CONFIG_NAMES

REPO = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_config_docs", REPO / "tools" / "gen_config_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_configuration_reference_equals_generator_output() -> None:
    committed = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == _generator().render(), (
        "docs/configuration.md is stale: run .venv/bin/python tools/gen_config_docs.py and commit it")


def test_configuration_reference_has_a_row_for_every_broker_and_topic_key() -> None:
    text = _generator().render()
    rows = {m.group(1) for m in re.finditer(r"^\| `([a-z0-9.]+)` \|", text, re.MULTILINE)}
    assert set(CONFIG_KEYS) | set(TOPIC_CONFIG_NAMES) <= rows
    for topic, synonyms in TOPIC_CONFIG_SYNONYMS.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{topic}` |") and line.count("|") == 5)
        for synonym in synonyms:
            assert f"`{synonym}`" in row


def test_generator_check_mode_accepts_the_committed_file() -> None:
    # The same entry point a person runs; --check must agree with the test above.
    result = subprocess.run([sys.executable, str(REPO / "tools" / "gen_config_docs.py"), "--check"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr


def test_generator_refuses_a_validator_it_cannot_describe() -> None:
    gen = _generator()

    def odd_rule(value: object) -> str | None:
        return None

    try:
        gen.describe_validator(odd_rule)
    except ValueError as exc:
        assert "odd_rule" in str(exc)
    else:
        raise AssertionError("an unknown validator kind was described silently")


def test_readme_links_and_named_files_exist() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme):
        assert (REPO / target).exists(), f"README links to missing {target}"
    for path in ("docs/configuration.md", "docs/cluster.md", "docs/benchmarks.md",
                 "tests/fixtures/frames/README.md", "scripts/test.sh"):
        assert path in readme, f"README does not mention {path}"
        assert (REPO / path).exists(), path


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/test.sh" in readme
    assert re.search(r"^exec bash scripts/test\.sh$", ci, re.MULTILINE)


def test_readme_first_keys_are_real_broker_keys() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"^\| `([a-z0-9.]+)` \|", section, re.MULTILINE)
    assert named, "README's configuration section lists no keys"
    for key in named:
        assert key in CONFIG_KEYS, f"README names {key}, which the broker does not know"


def test_readme_api_table_is_what_api_versions_advertises() -> None:
    from sofakafka.broker import handlers
    from sofakafka.protocol.api import ApiKey, valid_versions

    handlers.load_handlers()
    advertised = {(key, ApiKey(key).name.replace("_", "").lower(), f"{lo}-{hi}" if lo != hi else str(lo))
                  for key, lo, hi in handlers.supported_versions()}
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## What works today", 1)[1].split("\n## ", 1)[0]
    listed = {(int(key), name.lower(), versions)
              for key, name, versions in re.findall(r"\| (\d+) \| (\w+) \| ([0-9-]+) \|", section)}
    assert listed == advertised
    # "every version Kafka 2.6 accepts", as the README says.
    for key, lo, hi in handlers.supported_versions():
        assert (lo, hi) == valid_versions(key), ApiKey(key).name


def test_readme_first_keys_show_their_declared_defaults() -> None:
    from sofakafka.broker.config import format_value

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    for key, cell in re.findall(r"^\| `([a-z0-9.]+)` \| ([^|]+) \|", section, re.MULTILINE):
        declared = CONFIG_KEYS[key]
        if cell.startswith("unset"):
            assert declared.default is None or key == "log.dirs", key
            continue
        shown = re.match(r"`([^`]+)`", cell)
        assert shown is not None, f"{key}: default cell {cell!r} is neither `value` nor unset"
        assert shown.group(1) == format_value(declared, declared.default), key


def test_readme_start_command_is_a_valid_configuration() -> None:
    from sofakafka.broker.config import KafkaConfig

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("**1. Start a broker**", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    serve = re.search(r"sofakafka serve(.*)$", block, re.MULTILINE)
    assert serve is not None
    overrides = re.findall(r"--override (\S+)", serve.group(1))
    config = KafkaConfig.load(None, overrides)
    # One broker must be able to host __consumer_offsets, or no group finds a coordinator.
    assert config.get_int("offsets.topic.replication.factor") == 1
    assert [e.connection_string() for e in config.listeners] == ["PLAINTEXT://127.0.0.1:9092"]


def test_readme_security_example_is_a_valid_configuration(tmp_path: Path) -> None:
    """The server.properties of README's Security section starts a broker's security set-up as shown (with a
    real PEM file in place of the example path)."""
    import trustme

    from sofakafka.broker.config import KafkaConfig, load_properties
    from sofakafka.broker.listener_security import BrokerSecurity

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("\n## Security\n", 1)[1].split("```properties", 1)[1].split("```", 1)[0]
    pem = tmp_path / "broker.pem"
    trustme.CA().issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(pem))
    props = load_properties(block.replace("/etc/sofakafka/broker.pem", str(pem)))
    security = BrokerSecurity(KafkaConfig.from_properties({**props, "log.dirs": str(tmp_path / "data")}))
    security.configure()
    assert security.authorizer is not None and security.inter_broker is not None
    assert security.inter_broker.protocol == "SASL_SSL"
