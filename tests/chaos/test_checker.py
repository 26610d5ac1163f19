"""The checker finds each kind of anomaly in a history made to have it, and nothing in a clean one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
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

    def txn(self, producer: str, n: int, sends: list[tuple[int, int, int | None]], commit: str | None = "ok",
            abort: str | None = None) -> list[str]:
        """Transaction ``<producer>/<n>`` as the workload records it: ``begin``, its sends ``(seq, partition,
        offset)`` (offset None: the send never reported), then ``commit`` ending as given (None: never asked,
        "invoke": never answered) and ``abort`` likewise. Returns its values."""
        txn = f"{producer}/{n}"
        self.add(producer, "ok", "begin", txn=txn)
        values = []
        for seq, partition, offset in sends:
            value = f"{producer}:{seq}"
            values.append(value)
            self.add(producer, "invoke", "send", value=value, partition=partition, txn=txn)
            if offset is not None:
                self.add(producer, "ok", "send", value=value, partition=partition, offset=offset, txn=txn)
        for f, outcome in (("commit", commit), ("abort", abort)):
            if outcome is not None:
                self.add(producer, "invoke", f, txn=txn)
                if outcome != "invoke":
                    self.add(producer, outcome, f, txn=txn)
        return values

    def final_committed(self, partition: int, records: list[tuple[int, str]], stable: int | None = None,
                        high: int | None = None) -> None:
        self.add("final", "ok", "read", partition=partition, values=[[o, v] for o, v in records],
                 isolation="read_committed", last_stable_offset=stable, high_watermark=high)

    def poll_committed(self, process: str, records: list[tuple[int, int, str]]) -> None:
        self.add(process, "ok", "poll", isolation="read_committed", values=[[p, o, v] for p, o, v in records])


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


# -- transactions ----------------------------------------------------------------------------------------------
# Two partitions: p0 holds t0's records at 0 and 2 around an idempotent producer's at 1, p1 t0's at 0 and 1
# (offsets leave out the control records, as a read does, for brevity: the checker only compares reads).

def with_transactions(outcome: dict[str, str | None] | None = None) -> tuple[Builder, list[str], list[str]]:
    """t0.1/1 writes t0.1:0 (p0@0), t0.1:1 (p1@0), t0.1:2 (p0@2), t0.1:3 (p1@1) and ends as ``outcome`` says;
    p0:0 (p0@1) is an acknowledged plain send. The log (read_uncommitted) holds all of them; returns the builder,
    t0.1/1's values and the plain ones."""
    b = Builder()
    ends = outcome if outcome is not None else {"commit": "ok"}
    values = b.txn("t0.1", 1, [(0, 0, 0), (1, 1, 0), (2, 0, 2), (3, 1, 1)], ends.get("commit"), ends.get("abort"))
    plain = [b.send("p0", 0, 0, 1)]
    b.final(0, [values[0], plain[0], values[2]])
    b.final(1, [values[1], values[3]])
    return b, values, plain


def test_a_committed_transaction_read_whole_is_valid() -> None:
    b, t, plain = with_transactions()
    b.poll_committed("consumer-rc-0", [(0, 0, t[0]), (0, 1, plain[0]), (0, 2, t[2]), (1, 0, t[1])])
    b.final_committed(0, [(0, t[0]), (1, plain[0]), (2, t[2])], stable=4, high=4)
    b.final_committed(1, [(0, t[1]), (1, t[3])], stable=3, high=3)
    report = check(b.events, expect_partitions=2)
    assert report.valid, report.summary()
    assert report.transactions == {"committed": 1} and report.committed_read == 5
    assert "transactions: committed 1" in report.summary()


@pytest.mark.parametrize(("ends", "why"), [
    ({"commit": None, "abort": "ok"}, "aborted"),  # aborted on purpose
    ({"commit": "fail", "abort": "ok"}, "aborted"),  # an abortable error: aborted after it
    ({"commit": "fail", "abort": "info"}, "its commit failed"),  # librdkafka said it did not commit
    ({"commit": "info", "abort": "ok"}, "aborted"),  # a commit that timed out, then aborted
    ({"commit": None, "abort": None}, "never committed"),  # fenced before its commit: the next instance aborts it
    ({"commit": None, "abort": "info"}, "never committed"),
])
def test_read_committed_never_sees_an_aborted_transaction(ends: dict[str, str | None], why: str) -> None:
    b, t, plain = with_transactions(ends)
    b.add("consumer-0", "ok", "poll", values=[[0, 0, t[0]]])  # read_uncommitted may
    b.poll_committed("consumer-rc-0", [(0, 1, plain[0])])
    b.final_committed(0, [(1, plain[0])])
    b.final_committed(1, [])
    report = check(b.events)
    assert report.valid, report.summary()
    assert report.transactions == {"aborted": 1}
    b.poll_committed("consumer-rc-0", [(1, 1, t[3])])
    report = check(b.events)
    assert report.aborted_reads == [("consumer-rc-0", 1, 1, t[3], "t0.1/1", why)]
    assert not report.valid


def test_the_final_read_committed_never_sees_an_aborted_transaction_either() -> None:
    b, t, plain = with_transactions({"commit": None, "abort": "ok"})
    b.final_committed(0, [(0, t[0]), (1, plain[0])])
    report = check(b.events)
    assert report.aborted_reads == [("final", 0, 0, t[0], "t0.1/1", "aborted")]


def test_a_record_of_a_committed_transaction_missing_from_the_final_read_committed_is_lost() -> None:
    b, t, plain = with_transactions()
    b.final_committed(0, [(0, t[0]), (1, plain[0]), (2, t[2])])
    b.final_committed(1, [(0, t[1])])
    report = check(b.events)
    assert report.committed_lost == [(t[3], "t0.1/1")]
    assert report.lost == []  # it is in the log: only read_committed misses it


def test_a_send_refused_at_the_call_is_no_record_of_its_committed_transaction() -> None:
    b = Builder()
    b.add("t0.1", "ok", "begin", txn="t0.1/1")
    b.add("t0.1", "invoke", "send", value="t0.1:0", partition=0, txn="t0.1/1")
    b.add("t0.1", "ok", "send", value="t0.1:0", partition=0, offset=0, txn="t0.1/1")
    b.add("t0.1", "invoke", "send", value="t0.1:1", partition=0, txn="t0.1/1")
    b.add("t0.1", "fail", "send", value="t0.1:1", partition=0, txn="t0.1/1", error="queue full")
    b.add("t0.1", "invoke", "commit", txn="t0.1/1")
    b.add("t0.1", "ok", "commit", txn="t0.1/1")
    b.final(0, ["t0.1:0"])
    b.final_committed(0, [(0, "t0.1:0")])
    assert check(b.events).valid


def test_an_acknowledged_plain_record_missing_from_the_final_read_committed_is_lost() -> None:
    b, t, plain = with_transactions()
    b.final_committed(0, [(0, t[0]), (2, t[2])])
    b.final_committed(1, [(0, t[1]), (1, t[3])])
    report = check(b.events)
    assert report.committed_lost == [(plain[0], None)]


def test_a_reader_that_skips_a_record_of_a_transaction_it_saw_tears_it() -> None:
    b, t, plain = with_transactions()
    # Saw the first record at 0 and went on past the second at 2 without it.
    b.poll_committed("consumer-rc-0", [(0, 0, t[0]), (0, 1, plain[0])])
    assert check(b.events).valid  # not yet past offset 2: the rest may come in the next poll
    b.poll_committed("consumer-rc-0", [(0, 3, "p0:1")])
    report = check(b.events)
    assert report.torn == [("consumer-rc-0", 0, "t0.1/1", "saw 1 of its 2 records, not those at offsets [2]")]


def test_a_reader_that_sees_a_later_record_of_a_transaction_without_the_earlier_tears_it() -> None:
    b, t, plain = with_transactions()
    b.poll_committed("consumer-rc-0", [(0, 1, plain[0]), (0, 2, t[2])])
    report = check(b.events)
    assert report.torn == [("consumer-rc-0", 0, "t0.1/1", "saw 1 of its 2 records, not those at offsets [0]")]


def test_the_final_read_committed_must_see_every_record_of_a_transaction_it_sees() -> None:
    b, t, plain = with_transactions({"commit": "info"})  # indeterminate: visible or not, but whole
    b.final_committed(0, [(0, t[0]), (1, plain[0]), (2, t[2])])
    b.final_committed(1, [(0, t[1]), (1, t[3])])
    assert check(b.events).valid
    b.events = [e for e in b.events if not (e["f"] == "read" and e.get("isolation") and e["partition"] == 1)]
    b.final_committed(1, [(0, t[1])])  # its last record, at the end of p1, is missing
    report = check(b.events)
    assert report.torn == [("final", 1, "t0.1/1", "saw 1 of its 2 records, not those at offsets [1]")]
    assert report.half_visible == [("t0.1/1", "3 of the 4 records in the log visible")]


def test_a_reader_that_sees_a_transaction_out_of_its_send_order_tears_it() -> None:
    b, t, _ = with_transactions()
    b.poll_committed("consumer-rc-0", [(1, 1, t[3])])
    b.poll_committed("consumer-rc-0", [(1, 0, t[1])])
    report = check(b.events)
    assert [x[3] for x in report.torn] == ["saw its records in the order [3, 1]"]


def test_a_value_twice_in_the_final_read_committed_is_a_committed_duplicate() -> None:
    b, t, plain = with_transactions()
    b.final_committed(0, [(0, t[0]), (1, plain[0]), (2, t[2])])
    b.final_committed(1, [(0, t[1]), (1, t[3])])
    assert check(b.events).valid
    b.events = [e for e in b.events if not (e["f"] == "read" and e.get("isolation") and e["partition"] == 1)]
    b.final_committed(1, [(0, t[1]), (1, t[3]), (2, t[3])])
    report = check(b.events)
    assert report.committed_duplicates == [(t[3], [(1, 1), (1, 2)])]


@pytest.mark.parametrize("visible", [0, 4])
def test_an_indeterminate_commit_may_be_wholly_visible_or_wholly_absent(visible: int) -> None:
    b, t, plain = with_transactions({"commit": "info", "abort": "info"})
    shown = set(t[:visible])
    b.final_committed(0, [(o, v) for o, v in [(0, t[0]), (1, plain[0]), (2, t[2])] if v in shown or v == plain[0]])
    b.final_committed(1, [(o, v) for o, v in [(0, t[1]), (1, t[3])] if v in shown])
    report = check(b.events)
    assert report.valid, report.summary()
    assert report.transactions == {"indeterminate": 1}


def test_an_indeterminate_commit_partly_visible_is_half_visible() -> None:
    b, t, plain = with_transactions({"commit": "invoke"})  # never answered
    b.final_committed(0, [(0, t[0]), (1, plain[0]), (2, t[2])])
    b.final_committed(1, [])
    report = check(b.events)
    assert report.half_visible == [("t0.1/1", "2 of the 4 records in the log visible")]
    assert report.torn == []  # each partition is whole; the transaction is not


def test_an_indeterminate_record_never_written_does_not_count_against_it() -> None:
    b = Builder()
    t = b.txn("t0.1", 1, [(0, 0, 0), (1, 0, None)], commit="info")  # the second send never reported, not in the log
    b.final(0, [t[0]])
    b.final_committed(0, [(0, t[0])])
    assert check(b.events).valid


def test_a_last_stable_offset_left_below_the_high_watermark_is_a_problem() -> None:
    b, t, plain = with_transactions()
    b.final_committed(0, [(0, t[0]), (1, plain[0]), (2, t[2])], stable=4, high=4)
    b.final_committed(1, [(0, t[1]), (1, t[3])], stable=2, high=3)
    report = check(b.events)
    assert report.problems == ["partition 1: the last stable offset 2 is below the high watermark 3 after the run "
                               "(a transaction left hanging)"]


def test_a_consumer_told_its_position_is_out_of_range_is_a_problem() -> None:
    b = clean()
    b.add("consumer-0", "info", "poll", partition=1, error="Broker: Offset out of range")
    report = check(b.events)
    assert not report.valid and "consumer-0 was told its position in partition 1" in report.problems[0]
    # With the offset the broker refused, when the history has it.
    b = clean()
    b.add("consumer-0", "info", "poll", partition=1, offset=3809, error="Broker: Offset out of range")
    assert "consumer-0 was told its position (3809) in partition 1" in check(b.events).problems[0]


@given(st.lists(st.tuples(st.sampled_from(["ok", "abort", "fail", "info-shown", "info-hidden"]),
                          st.lists(st.integers(0, 2), min_size=1, max_size=4),
                          st.integers(0, 3)), max_size=12), st.data())
def test_any_transactional_history_the_reads_agree_with_is_valid_and_a_mutation_is_found(
        txns: list[tuple[str, list[int], int]], data: st.DataObject) -> None:
    """Transactions of random outcomes and shapes, with plain sends between them; the log holds every record,
    read_committed what committed (and what an indeterminate commit made visible, wholly). Valid; then one
    aborted record shown, or one committed record hidden, is reported."""
    b = Builder()
    logs: dict[int, list[str]] = {0: [], 1: [], 2: []}
    visible: set[str] = set()
    undecided: set[str] = set()  # an indeterminate transaction's: either way is right
    seq = {"t0.1": 0, "p0": 0}
    for n, (outcome, partitions, plain) in enumerate(txns, start=1):
        sends: list[tuple[int, int, int | None]] = []
        for partition in partitions:
            sends.append((seq["t0.1"], partition, len(logs[partition])))
            logs[partition].append(f"t0.1:{seq['t0.1']}")
            seq["t0.1"] += 1
        commit, abort = {"ok": ("ok", None), "abort": (None, "ok"), "fail": ("fail", "ok"),
                         "info-shown": ("info", "info"), "info-hidden": ("info", "info")}[outcome]
        values = b.txn("t0.1", n, sends, commit, abort)
        if outcome in ("ok", "info-shown"):
            visible.update(values)
        if outcome.startswith("info"):
            undecided.update(values)
        for _ in range(plain):
            p = seq["p0"] % 3
            visible.add(b.send("p0", seq["p0"], p, len(logs[p])))
            logs[p].append(f"p0:{seq['p0']}")
            seq["p0"] += 1
    for p, values in logs.items():
        b.final(p, values)
        b.final_committed(p, [(o, v) for o, v in enumerate(values) if v in visible])
    report = check(b.events, expect_partitions=3)
    assert report.valid, report.summary()
    decided = [v for v in logs[0] + logs[1] + logs[2] if v not in undecided]
    hidden = [v for v in decided if v not in visible]
    shown = [v for v in decided if v in visible]
    if not decided:
        return
    mutate_hidden = data.draw(st.booleans()) if hidden and shown else bool(hidden)
    victim = data.draw(st.sampled_from(hidden if mutate_hidden else shown))
    p = next(q for q, values in logs.items() if victim in values)
    b.events = [e for e in b.events if not (e["f"] == "read" and e.get("isolation") and e["partition"] == p)]
    flipped = visible ^ {victim}
    b.final_committed(p, [(o, v) for o, v in enumerate(logs[p]) if v in flipped])
    report = check(b.events, expect_partitions=3)
    assert not report.valid
    if mutate_hidden:
        assert [x[3] for x in report.aborted_reads] == [victim], report.summary()
    else:
        assert [x[0] for x in report.committed_lost] == [victim], report.summary()


def zombie(successor_before_commit: bool, commit: str = "info") -> tuple[Builder, list[str]]:
    """t0.1 writes t0.1:0 and t0.1:1 to p0 in t0.1/1; t0.2, a new instance of the same transactional id, finishes
    its init before or after t0.1 asks to commit."""
    b = Builder()
    b.add("t0.1", "ok", "init", transactional_id="chaos-txn-0")
    t = b.txn("t0.1", 1, [(0, 0, 0), (1, 0, 1)], commit=None)
    if successor_before_commit:
        b.add("t0.2", "ok", "init", transactional_id="chaos-txn-0")
    b.add("t0.1", "invoke", "commit", txn="t0.1/1")
    if not successor_before_commit:
        b.add("t0.2", "ok", "init", transactional_id="chaos-txn-0")
    b.add("t0.1", commit, "commit", txn="t0.1/1")
    b.final(0, t)
    b.final_committed(0, [(0, t[0]), (1, t[1])])
    return b, t


def test_a_commit_asked_after_a_newer_instance_fenced_the_producer_must_not_show() -> None:
    b, _ = zombie(successor_before_commit=False)
    report = check(b.events)
    assert report.valid, report.summary()  # the init may have come after the commit: indeterminate, and whole
    assert report.transactions == {"indeterminate": 1}
    b, _ = zombie(successor_before_commit=True)
    report = check(b.events)
    assert report.transactions == {"aborted": 1}
    assert [x[5] for x in report.aborted_reads] == ["fenced by t0.2 before its commit"] * 2


def test_a_zombie_whose_commit_succeeds_is_a_problem() -> None:
    b, _ = zombie(successor_before_commit=True, commit="ok")
    report = check(b.events)
    assert "t0.1/1 committed after t0.2 fenced its producer" in report.problems
    b, _ = zombie(successor_before_commit=False, commit="ok")
    assert check(b.events).valid


def test_an_instance_of_another_transactional_id_fences_nothing() -> None:
    b = Builder()
    b.add("t0.1", "ok", "init", transactional_id="chaos-txn-0")
    t = b.txn("t0.1", 1, [(0, 0, 0)], commit=None)
    b.add("t1.1", "ok", "init", transactional_id="chaos-txn-1")
    b.add("t0.1", "invoke", "commit", txn="t0.1/1")
    b.add("t0.1", "ok", "commit", txn="t0.1/1")
    b.final(0, t)
    b.final_committed(0, [(0, t[0])])
    report = check(b.events)
    assert report.valid and report.transactions == {"committed": 1}, report.summary()


def test_a_client_that_crashed_is_a_problem() -> None:
    b = clean()
    b.add("txn-producer-0", "info", "crash", error="RuntimeError('boom')")
    assert check(b.events).problems == ["txn-producer-0 crashed: RuntimeError('boom')"]


def test_read_committed_given_a_record_before_its_commit_was_asked_for_is_a_dirty_read() -> None:
    b = Builder()
    t = b.txn("t0.1", 1, [(0, 0, 0), (1, 0, 1)], commit=None)
    b.poll_committed("consumer-rc-0", [(0, 0, t[0]), (0, 1, t[1])])  # the transaction is still open
    b.add("t0.1", "invoke", "commit", txn="t0.1/1")
    b.poll_committed("consumer-rc-1", [(0, 0, t[0]), (0, 1, t[1])])  # while the commit is in flight: fine
    b.add("t0.1", "ok", "commit", txn="t0.1/1")
    b.final(0, t)
    b.final_committed(0, [(0, t[0]), (1, t[1])])
    report = check(b.events)
    assert report.dirty_reads == [("consumer-rc-0", 0, 0, t[0], "t0.1/1"), ("consumer-rc-0", 0, 1, t[1], "t0.1/1")]
    assert report.aborted_reads == [] and not report.valid
    b.add("consumer-0", "ok", "poll", values=[[0, 0, t[0]]])  # read_uncommitted sees open transactions
    assert [x[0] for x in check(b.events).dirty_reads] == ["consumer-rc-0"] * 2
