"""The checker finds each kind of anomaly in a history made to have it, and nothing in a clean one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.chaos.checker import check
from tests.chaos.history import Event, History, read_history


class Builder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.t = 0.0

    def add(self, process: str, type_: str, f: str, **fields: Any) -> None:
        self.t += 0.001
        self.events.append({"time": self.t, "process": process, "type": type_, "f": f, **fields})

    def send(self, producer: str, seq: int, partition: int, offset: int | None, outcome: str = "ok") -> str:
        value = f"{producer}:{seq}"
        self.add(producer, "invoke", "send", value=value, partition=partition)
        if outcome == "ok":
            self.add(producer, "ok", "send", value=value, partition=partition, offset=offset)
        else:
            self.add(producer, outcome, "send", value=value, partition=partition, error="timed out")
        return value

    def final(self, partition: int, values: list[str], start: int = 0) -> None:
        self.add("final", "ok", "read", partition=partition, values=[[start + i, v] for i, v in enumerate(values)])


def clean() -> Builder:
    b = Builder()
    a = [b.send("p0", i, 0, i) for i in range(5)]
    c = [b.send("p1", i, 1, i) for i in range(3)]
    b.add("consumer-0", "ok", "poll", values=[[0, 0, a[0]], [1, 2, c[2]]])
    b.final(0, a)
    b.final(1, c)
    return b


def test_a_clean_history_is_valid() -> None:
    report = check(clean().events, expect_partitions=2)
    assert report.valid, report.summary()
    assert report.acknowledged == 8 and report.final_records == 8 and report.polled == 2


def test_an_acknowledged_value_missing_from_the_end_is_lost() -> None:
    b = Builder()
    a = [b.send("p0", i, 0, i) for i in range(3)]
    b.final(0, a[:2])
    report = check(b.events)
    assert report.lost == [("p0:2", 0, 2)] and not report.valid


def test_an_indeterminate_send_may_or_may_not_be_there() -> None:
    b = Builder()
    a = b.send("p0", 0, 0, 0)
    lost_maybe = b.send("p0", 1, 0, None, outcome="info")
    there_maybe = b.send("p0", 2, 0, None, outcome="info")
    b.final(0, [a, there_maybe])
    report = check(b.events)
    assert report.valid, report.summary()
    assert report.indeterminate == 2 and report.indeterminate_found == 1
    assert lost_maybe != there_maybe


def test_a_value_written_twice_is_a_duplicate() -> None:
    b = Builder()
    a = [b.send("p0", i, 0, i) for i in range(2)]
    b.final(0, [a[0], a[1], a[1]])
    report = check(b.events)
    assert report.duplicates == [("p0:1", [(0, 1), (0, 2)])]


def test_values_stored_against_their_send_order_are_reordered() -> None:
    b = Builder()
    a = [b.send("p0", i, 0, i) for i in range(3)]
    b.final(0, [a[0], a[2], a[1]])
    report = check(b.events)
    assert len(report.reordered) == 1 and report.reordered[0][0] == "p0"
    assert len(report.moved) == 2  # and they are not where their acknowledgements said


def test_values_of_different_producers_may_interleave() -> None:
    b = Builder()
    x = b.send("p0", 0, 0, 0)
    y = b.send("p1", 0, 0, 1)
    z = b.send("p0", 1, 0, 2)
    b.final(0, [x, y, z])
    assert check(b.events).valid


def test_a_poll_the_end_disagrees_with_is_divergent() -> None:
    b = clean()
    b.add("consumer-1", "ok", "poll", values=[[0, 4, "p0:3"]])
    report = check(b.events)
    assert report.divergent == [("consumer-1", 0, 4, "p0:3", "p0:4")]


def test_a_value_nobody_sent_is_unexpected() -> None:
    b = Builder()
    a = b.send("p0", 0, 0, 0)
    b.final(0, [a, "ghost:7"])
    assert check(b.events).unexpected == [("ghost:7", [(0, 1)])]


def test_read_committed_must_not_see_an_aborted_transaction() -> None:
    b = Builder()
    b.add("txn-0", "invoke", "send", value="t0:0", partition=0)
    b.add("txn-0", "invoke", "send", value="t0:1", partition=0)
    b.add("txn-0", "ok", "txn", txn="t0-a", outcome="abort", values=[[0, "t0:0"]])
    b.add("txn-0", "ok", "txn", txn="t0-b", outcome="commit", values=[[0, "t0:1"]])
    b.add("consumer-rc", "ok", "poll", isolation="read_committed", values=[[0, 1, "t0:1"]])
    b.final(0, ["t0:0", "t0:1"])
    assert check(b.events).valid
    b.add("consumer-rc", "ok", "poll", isolation="read_committed", values=[[0, 0, "t0:0"]])
    assert check(b.events).aborted_reads == [(0, 0, "t0:0")]


def test_a_missing_final_read_is_a_problem() -> None:
    b = clean()
    report = check(b.events, expect_partitions=3)
    assert not report.valid and "expected 3 partitions" in report.problems[0]


def test_faults_are_counted() -> None:
    b = clean()
    b.add("nemesis", "invoke", "kill-leader", broker=1)
    b.add("nemesis", "ok", "kill-leader", broker=1)
    b.add("nemesis", "invoke", "kill-leader", broker=2)
    assert check(b.events).faults == {"kill-leader": 2}


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), max_size=60), st.data())
def test_any_history_the_log_agrees_with_is_valid_and_any_dropped_ack_is_found(
        sends: list[tuple[int, int]], data: st.DataObject) -> None:
    b = Builder()
    logs: dict[int, list[str]] = {0: [], 1: [], 2: []}
    seqs = [0, 0, 0]
    for producer, partition in sends:
        value = b.send(f"p{producer}", seqs[producer], partition, len(logs[partition]))
        seqs[producer] += 1
        logs[partition].append(value)
    for p, values in logs.items():
        b.final(p, values)
    assert check(b.events, expect_partitions=3).valid
    if sends:
        victim = data.draw(st.sampled_from([p for p in logs if logs[p]]))
        dropped = logs[victim][-1]
        b.events = [e for e in b.events if not (e["f"] == "read" and e["partition"] == victim)]
        b.final(victim, logs[victim][:-1])
        assert [x[0] for x in check(b.events).lost] == [dropped]


def test_the_history_file_reads_back_what_was_recorded(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with History(path) as h:
        h.record("p0", "invoke", "send", value="p0:0", partition=1)
        h.record("p0", "ok", "send", value="p0:0", partition=1, offset=0)
    with open(path, "a") as f:
        f.write('{"torn": ')  # a run killed mid-line
    events = read_history(path)
    assert [e["type"] for e in events] == ["invoke", "ok"] and events[1]["offset"] == 0
