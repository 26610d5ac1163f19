"""Java scenarios declared on the tests that check them, all started together when a module begins.

A test says which scenario it checks with ``@scenario("consumer.commit", topic="commit", group="commit")`` (its
parameters; ``{name}`` in a string is filled from the test's own parametrization, e.g. ``codec="{codec}"``) and
takes the :func:`outcome` fixture. When the module's first test runs, :func:`start_scenarios` submits the
scenario of every collected test of the module, on every broker of the comparison, to the scenario JVMs (which
run several at a time); each test then waits for its own answers only. A scenario spends most of its time
waiting on a broker (group joins, long polls, acks), so the module's wall time is about that of its longest
scenarios, not their sum, and each test still passes or fails on its own, with its own message.

The long form: ``SOFAKAFKA_INTEROP_FULL=1`` runs every scenario with every client version and every variant
(codec, assignor); CI runs the representative subset each test names with :func:`clients` and :func:`variants`
(the rest is marked ``long_form`` and deselected: tests/conftest.py; docs/compatibility.md says which).
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.reference.java import CLIENT_VERSIONS, ScenarioJVM

FULL_ENV = "SOFAKAFKA_INTEROP_FULL"
INTEROP_FULL = os.environ.get(FULL_ENV, "") not in ("", "0")

# Parameters made unique per run (a run is one scenario, one client version, one broker).
UNIQUE_PARAMS = ("topic", "group", "transactionalId", "applicationId")

# Started first, because they take longest: the module's wall time is that of its longest chain.
LONGEST_FIRST = ("consumer.rebalance_under_load", "streams.word_count", "producer.big_batches",
                 "consumer.subscribe", "producer.large_record", "consumer.static_membership", "admin.groups")


long_form = pytest.mark.long_form


def clients(*in_ci: str) -> pytest.MarkDecorator:
    """Parametrize ``client`` over every version; those not given (default: none left out) are long form only."""
    return pytest.mark.parametrize("client", variants(CLIENT_VERSIONS, in_ci or CLIENT_VERSIONS))


def variants(every: Sequence[Any], in_ci: Sequence[Any]) -> list[Any]:
    """``every`` case as a parameter, those not ``in_ci`` marked long form (deselected in CI; tests/conftest.py).
    A tuple case fills several argument names."""
    return [pytest.param(*(case if isinstance(case, tuple) else (case,)), marks=() if case in in_ci else long_form)
            for case in every]


def scenario(name: str, *, per_broker: Mapping[str, Mapping[str, Any]] | None = None, serial: str | None = None,
             **params: Any) -> pytest.MarkDecorator:
    """Declare the Java scenario a test checks, with its parameters (``per_broker`` adds some for one broker).

    Scenarios with the same ``serial`` name run one after another on a broker, never together: those that change
    and read what all share (the broker's dynamic configs, say)."""
    return pytest.mark.scenario(name, per_broker=dict(per_broker or {}), serial=serial, **params)


def _after(previous: Future[dict[str, Any]] | None, start: Callable[[], Future[dict[str, Any]]]) -> Future[dict[str, Any]]:
    """``start()`` now, or once ``previous`` is done; the returned future is the started one's."""
    if previous is None:
        return start()
    out: Future[dict[str, Any]] = Future()

    def copy(done: Future[dict[str, Any]]) -> None:
        error = done.exception()
        if error is not None:
            out.set_exception(error)
        else:
            out.set_result(done.result())

    def go(_: Future[dict[str, Any]]) -> None:
        try:
            started = start()
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the scenario
            out.set_exception(error)
            return
        started.add_done_callback(copy)

    previous.add_done_callback(go)
    return out


@dataclass
class Run:
    """One scenario submitted to one broker."""

    jvm: ScenarioJVM
    scenario: str
    bootstrap: str
    params: dict[str, Any]
    future: Future[dict[str, Any]]

    def result(self, timeout: float = 600.0) -> dict[str, Any]:
        return self.jvm.result(self.future, self.scenario, self.bootstrap, timeout)


@dataclass
class Outcome:
    """A test's scenario on each broker of the comparison."""

    runs: dict[str, Run] = field(default_factory=dict)

    def on(self, broker: str) -> dict[str, Any]:
        """The result from one broker (raises ScenarioError if the scenario failed there)."""
        return self.runs[broker].result()

    def each(self) -> dict[str, dict[str, Any]]:
        """Every broker's result, by broker name."""
        return {broker: run.result() for broker, run in self.runs.items()}

    def same(self, reference: str = "kafka") -> dict[str, Any]:
        """Every broker's result, required to equal the reference's; returns the reference's."""
        results = self.each()
        expected = results[reference]
        for broker, got in results.items():
            assert got == expected, (
                f"{broker} and {reference} answered differently:\n  {broker}: {got}\n  {reference}: {expected}")
        return expected


_names = itertools.count(1)


def _params_of(item: pytest.Item, marker: pytest.Mark) -> dict[str, Any]:
    own = getattr(item, "callspec", None)
    values = dict(own.params) if own is not None else {}
    out = {}
    for key, value in marker.kwargs.items():
        if key in ("per_broker", "serial"):
            continue
        out[key] = value.format(**values) if isinstance(value, str) else value
    return out


def start_scenarios(request: pytest.FixtureRequest, jvms: Any, bootstraps: Mapping[str, str],
                    common: Mapping[str, Any] | None = None, started: Mapping[str, Outcome] | None = None,
                    ) -> dict[str, Outcome]:
    """Submit the scenario of every collected test of the requesting module, on every broker; by node id.

    ``jvms[client]`` gives the scenario JVM of a client version; a test without a ``client`` parameter runs
    with ``clients-2.6``. ``common`` parameters go to every scenario (a replication factor, say); tests in
    ``started`` are left out."""
    items = [i for i in request.session.items if i.module is request.module and i.get_closest_marker("scenario")
             and i.nodeid not in (started or {})]

    def rank(item: pytest.Item) -> int:
        name = item.get_closest_marker("scenario").args[0]  # type: ignore[union-attr]
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    started: dict[str, Outcome] = {}
    last_of_serial: dict[tuple[str, str], Future[dict[str, Any]]] = {}
    for item in sorted(items, key=rank):
        marker = item.get_closest_marker("scenario")
        assert marker is not None
        name = marker.args[0]
        callspec = getattr(item, "callspec", None)
        client = callspec.params.get("client", "clients-2.6") if callspec is not None else "clients-2.6"
        params = {**(common or {}), **_params_of(item, marker)}
        outcome = Outcome()
        for broker, bootstrap in bootstraps.items():
            n = next(_names)
            mine = {k: f"{v}-{client}-{broker}-{n}" if k in UNIQUE_PARAMS else v for k, v in params.items()}
            mine.update(marker.kwargs.get("per_broker", {}).get(broker, {}))
            jvm = jvms[client]
            serial = marker.kwargs.get("serial")
            future = _after(last_of_serial.get((bootstrap, serial)) if serial else None,
                            functools.partial(jvm.submit, name, bootstrap, **mine))
            if serial:
                last_of_serial[bootstrap, serial] = future
            outcome.runs[broker] = Run(jvm, name, bootstrap, mine, future)
        started[item.nodeid] = outcome
    return started
