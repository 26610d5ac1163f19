import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import reference_data

# Apache Kafka as the reference (issue 20): the reference broker, sofakafka with the same settings, the Java
# scenario JVMs and Kafka's tools, for any test that asks for them by name.
from tests.reference.fixtures import (  # noqa: F401
    compared_brokers,
    interop_brokers,
    kafka_tool,
    reference_kafka,
    reference_zookeeper,
    scenario_jvms,
    secured_reference_kafka,
    secured_sofakafka_broker,
    secured_zookeeper_sofakafka,
    sofakafka_broker,
)
from tests.reference.scenarios import FULL_ENV, INTEROP_FULL

# CI gets more examples than a developer's quick loop; both stay bounded.
settings.register_profile("ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "scenario(name, **params): the Java scenario a test checks "
                            "(tests/reference/scenarios.py starts a module's scenarios together)")
    config.addinivalue_line("markers", f"long_form: runs only in the long form of the interop tests ({FULL_ENV}=1; "
                            "docs/compatibility.md); deselected otherwise")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if INTEROP_FULL:
        return
    long_form = [item for item in items if item.get_closest_marker("long_form")]
    if long_form:
        config.hook.pytest_deselected(items=long_form)
        items[:] = [item for item in items if not item.get_closest_marker("long_form")]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(reference_data.REFERENCE_OPTION, metavar="DIR", default=None,
                     help="the Kafka 2.6 reference (API-VERSIONS.md, message/*.json) for the checks that read "
                          f"Kafka's own files; default ${reference_data.REFERENCE_ENV}; without it they skip")


@pytest.fixture(scope="session")
def kafka_reference(pytestconfig: pytest.Config) -> Path:
    """The Kafka 2.6 reference directory; the test skips, saying why, when the run was not given one."""
    return reference_data.kafka_reference(pytestconfig)


@pytest.fixture(scope="session")
def kafka_message_json(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with Kafka 2.6's ``message/*.json``: from the reference directory when one is given, else out
    of the kafka-clients 2.6 jar scripts/test.sh resolves (so these checks run in CI); skips without either."""
    return reference_data.kafka_message_json(pytestconfig, tmp_path_factory.mktemp("kafka-message-json"))
