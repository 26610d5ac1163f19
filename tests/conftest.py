import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import reference_data

# Apache Kafka as the reference (issue 20): the reference broker, sofakafka with the same settings, the Java
# scenario JVMs and Kafka's tools, for any test that asks for them by name.
from tests.reference.fixtures import (  # noqa: F401
    kafka_tool,
    reference_kafka,
    reference_zookeeper,
    scenario_jvms,
    secured_reference_kafka,
    secured_sofakafka_broker,
    secured_zookeeper_sofakafka,
    sofakafka_broker,
)

# CI gets more examples than a developer's quick loop; both stay bounded.
settings.register_profile("ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(reference_data.REFERENCE_OPTION, metavar="DIR", default=None,
                     help="the Kafka 2.6 reference (API-VERSIONS.md, message/*.json) for the checks that read "
                          f"Kafka's own files; default ${reference_data.REFERENCE_ENV}; without it they skip")


@pytest.fixture(scope="session")
def kafka_reference(pytestconfig: pytest.Config) -> Path:
    """The Kafka 2.6 reference directory; the test skips, saying why, when the run was not given one."""
    return reference_data.kafka_reference(pytestconfig)
