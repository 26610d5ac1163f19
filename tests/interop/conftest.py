"""What tests/interop's modules share: the brokers a module's Java scenarios run on, and the scenarios themselves,
declared on the tests (``@scenario``) and started together when a module's first test runs
(tests/reference/scenarios.py). A module compares other brokers by defining its own ``bootstraps`` (and
``scenario_common`` for parameters every scenario of it gets)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reference.fixtures import ComparedBrokers, ScenarioJVMs
from tests.reference.scenarios import Outcome, start_scenarios


@pytest.fixture(scope="module")
def bootstraps(interop_brokers: ComparedBrokers) -> dict[str, str]:
    """The brokers a module's scenarios run on, by name (``kafka`` is the reference): the session's pair."""
    return interop_brokers.bootstraps


@pytest.fixture(scope="module")
def scenario_common() -> dict[str, Any]:
    """Parameters every scenario of the module gets."""
    return {}


@pytest.fixture(scope="module")
def started(request: pytest.FixtureRequest, scenario_jvms: ScenarioJVMs, bootstraps: dict[str, str],
            scenario_common: dict[str, Any]) -> dict[str, Outcome]:
    """Every collected test's scenario, on every broker, submitted when the module's first test starts."""
    return start_scenarios(request, scenario_jvms, bootstraps, common=scenario_common)


@pytest.fixture
def outcome(request: pytest.FixtureRequest, started: dict[str, Outcome], scenario_jvms: ScenarioJVMs,
            bootstraps: dict[str, str], scenario_common: dict[str, Any]) -> Outcome:
    """This test's scenario on every broker (started with the module's others, or now if it was not)."""
    if request.node.nodeid not in started:
        started.update(start_scenarios(request, scenario_jvms, bootstraps, common=scenario_common, started=started))
    return started[request.node.nodeid]
