"""The garbage collector's pauses: counted per generation, a long one logged, exported beside prometheus_client's
collection counts."""

from __future__ import annotations

import gc
import logging

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sofakafka.broker import gc_pauses
from sofakafka.broker.gc_pauses import GcPauses
from sofakafka.broker.metrics import BrokerGauges, BrokerMetrics
from sofakafka.broker.metrics_export import make_registry


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _collect(pauses: GcPauses, clock: _Clock, generation: int, took: float, collected: int = 0) -> None:
    pauses.callback("start", {"generation": generation, "collected": 0, "uncollectable": 0})
    clock.now += took
    pauses.callback("stop", {"generation": generation, "collected": collected, "uncollectable": 0})


@pytest.mark.parametrize(("took", "logged"), [(0.999, False), (1.0, True), (1.001, True)])
def test_a_collection_at_least_the_long_pause_is_logged(took: float, logged: bool,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    pauses = GcPauses(long_pause_s=1.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger=gc_pauses.__name__):
        _collect(pauses, clock, 2, took, collected=12)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if logged:
        assert len(warnings) == 1
        assert f"generation 2 held the interpreter for {took:.2f} s (12 objects collected" in warnings[0]
    else:
        assert warnings == []
    assert pauses.collections == [0, 0, 1]
    assert pauses.seconds[2] == pytest.approx(took) and pauses.longest_s == pytest.approx(took)


def test_counts_and_seconds_are_per_generation_and_the_longest_is_kept() -> None:
    clock = _Clock()
    pauses = GcPauses(clock=clock)
    _collect(pauses, clock, 0, 0.001)
    _collect(pauses, clock, 0, 0.002)
    _collect(pauses, clock, 1, 0.01)
    _collect(pauses, clock, 2, 0.5)
    _collect(pauses, clock, 0, 0.003)
    assert pauses.collections == [3, 1, 1]
    assert pauses.seconds == pytest.approx([0.006, 0.01, 0.5])
    assert pauses.longest_s == pytest.approx(0.5)
    # A stop without its start (installed mid-collection) is not counted.
    pauses.callback("stop", {"generation": 2, "collected": 0})
    assert pauses.collections == [3, 1, 1]


def test_the_survivors_of_a_full_collection_are_frozen_and_thawed_every_interval(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
    clock = _Clock()
    pauses = GcPauses(clock=clock, thaw_interval_s=60.0)  # thaw due at 160
    _collect(pauses, clock, 0, 0.001)
    _collect(pauses, clock, 1, 0.001)
    pauses.settle()
    assert calls == [] and not pauses.freeze_due  # young collections: nothing to freeze
    _collect(pauses, clock, 2, 0.2)
    assert pauses.freeze_due
    pauses.settle()
    pauses.settle()  # once per full collection
    assert calls == ["freeze"] and pauses.freezes == 1 and not pauses.freeze_due
    clock.now = 159.75
    _collect(pauses, clock, 2, 0.125)
    assert clock.now < 160.0
    pauses.settle()
    assert calls == ["freeze", "freeze"]
    clock.now = 159.875  # the thaw is due (at 160): it wins over a freeze due at the same step
    _collect(pauses, clock, 2, 0.125)
    assert pauses.freeze_due and clock.now == 160.0
    with caplog.at_level(logging.INFO, logger=gc_pauses.__name__):
        pauses.settle()
    assert calls == ["freeze", "freeze", "unfreeze"] and pauses.thaws == 1 and not pauses.freeze_due
    assert "thawed" in caplog.text
    clock.now = 219.999  # the next thaw is an interval after this one
    pauses.settle()
    assert calls[-1] == "unfreeze" and pauses.thaws == 1
    clock.now = 220.0
    pauses.settle()
    assert pauses.thaws == 2


@pytest.mark.parametrize(("took", "frozen"), [(1.75, False), (2.0, True), (2.25, True)])
def test_only_a_full_collection_at_least_freeze_after_freezes(took: float, frozen: bool,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # A small heap (a short full collection) is not frozen: its requests in flight would be kept till the thaw.
    calls: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    clock = _Clock()
    pauses = GcPauses(clock=clock, freeze_after_s=2.0, long_pause_s=10.0)
    _collect(pauses, clock, 2, took)
    pauses.settle()
    assert calls == (["freeze"] if frozen else []) and pauses.freezes == int(frozen)


def _gc_seconds() -> dict[str, float]:
    text = generate_latest(make_registry(BrokerMetrics(), BrokerGauges)).decode()
    return {s.labels["generation"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "python_gc_collection_seconds_total"}


def test_install_is_once_per_process_and_sees_real_collections() -> None:
    assert gc_pauses.installed() is None and _gc_seconds() == {}  # not installed: not exported
    first = gc_pauses.install(freeze=False)  # no freezing thread in the test process
    try:
        assert gc_pauses.install() is first and gc_pauses.installed() is first
        assert gc.callbacks.count(first.callback) == 1
        before = first.collections[2]
        gc.collect()
        assert first.collections[2] >= before + 1 and first.seconds[2] > 0
        seen = first.seconds[2]
        exported = _gc_seconds()
        assert set(exported) == {"0", "1", "2"} and exported["2"] >= seen > 0
    finally:
        gc.callbacks.remove(first.callback)
        gc_pauses._installed = None
