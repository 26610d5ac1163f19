"""Protocol fuzzing against a live broker, the short form CI runs (the long form: ``python -m tests.fuzz.run``).

For every API and version the broker advertises, hypothesis draws well-formed-but-wrong requests and each is
followed by damaged copies of itself and random frames (tests/fuzz/frames.py). The broker must never die or
hang (a fresh connection is answered after every example), every frame must be answered, handled or end its
own connection, each closed connection must have its reason in the log, and nothing may reach the broker's
internal-error path (a traceback in its log).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.driver import Counts, Driver
from tests.fuzz.frames import mutations, wellformed
from tests.fuzz.run import CLOSE_LOGGED, FUZZ_BROKER_SETTINGS, advertised, prepare, scan_log
from tests.integration.conftest import BrokerProcess

TOTAL = Counts()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("fuzz"), dict(FUZZ_BROKER_SETTINGS))
    b.start()
    prepare(b)
    yield b
    b.kill()


@pytest.fixture(scope="module")
def apis(broker: BrokerProcess) -> list[tuple[int, int]]:
    found = advertised(broker.host, broker.port)
    assert len(found) > 100  # every version of every API: the list is long
    return found


@pytest.fixture(scope="module")
def driver(broker: BrokerProcess) -> Iterator[Driver]:
    d = Driver(broker.host, broker.port)
    yield d
    d.close()


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_bad_frames_never_crash_or_hang_the_broker(broker: BrokerProcess, apis: list[tuple[int, int]],
                                                   driver: Driver, data: st.DataObject, seed: int) -> None:
    api_key, version = data.draw(st.sampled_from(apis), label="api")
    good = data.draw(wellformed(api_key, version), label="frame")
    counts = driver.send(list(mutations(good, random.Random(seed), 30)))
    TOTAL.add(counts)
    assert counts.hung == 0, counts.examples
    assert counts.connect_failures == 0
    assert broker.alive(), broker.log_tail()
    assert driver.alive()


def _registered() -> list[tuple[int, int]]:
    from sofakafka.broker.handlers import load_handlers, supported_versions

    load_handlers()
    return [(key, v) for key, lo, hi in supported_versions() for v in range(lo, hi + 1)]


REGISTERED = _registered()


def test_the_broker_advertises_what_the_registry_holds(apis: list[tuple[int, int]]) -> None:
    assert sorted(apis) == sorted(REGISTERED)


@pytest.mark.parametrize(("api_key", "version"), REGISTERED, ids=[f"{k}v{v}" for k, v in REGISTERED])
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_every_advertised_api_and_version(broker: BrokerProcess, driver: Driver, api_key: int, version: int,
                                          data: st.DataObject, seed: int) -> None:
    good = data.draw(wellformed(api_key, version), label="frame")
    counts = driver.send(list(mutations(good, random.Random(seed), 6)))
    TOTAL.add(counts)
    assert counts.hung == 0, counts.examples
    assert broker.alive(), broker.log_tail()


def test_every_close_was_logged_and_nothing_reached_the_internal_error_path(broker: BrokerProcess) -> None:
    scan = scan_log(broker.log_text().splitlines())
    assert TOTAL.sent > 0
    print(f"\nfuzz short form: {TOTAL.line()}")
    assert TOTAL.answered > 0 and TOTAL.closed > 0
    assert scan.closes >= TOTAL.closed, f"{TOTAL.closed} closed, {scan.closes} logged with {CLOSE_LOGGED!r}"
    assert not scan.errors, "\n".join(scan.errors[:20])
    assert broker.alive()
