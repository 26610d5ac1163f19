"""Reads a chaos run's whole history and says what went wrong, if anything (see ``history`` for the events).

The reference is the final read: after the faults stop and every broker is back in every ISR, each partition
is read from its first offset to its end. Against it:

- **lost**: a send acknowledged (acks=all) whose value is not in the final read. Kafka's promise is that an
  acknowledged record survives the loss of any ``replication.factor - min.insync.replicas`` brokers; the
  nemesis never takes more, so none may be lost.
- **moved**: an acknowledged value found at another offset than the one its acknowledgement named.
- **duplicates**: a value written more than once. Idempotent producers retry with sequence numbers, so a
  retry the broker already appended must not be appended again, whatever the faults.
- **reordered**: two values of one producer to one partition stored in the opposite order to the one it
  sent them in (an idempotent producer keeps order with up to 5 requests in flight).
- **unexpected**: a value in the log that no client ever sent (corruption, or a bug in the workload).
- **divergent**: a consumer polled value V at (partition, offset) while the final read has something else
  there: a read that was later truncated away, i.e. a consumer saw data above the high watermark.
- **aborted reads**: a read_committed consumer saw a value of an aborted transaction (the hook for when
  transactions exist: ``txn`` events name the values of each transaction and its outcome).

Sends the client could not judge (``info``: timed out, broker gone) may or may not be in the log; both are
fine, they are only counted. ``check`` is pure: the same history always gives the same report.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.history import Event

EXAMPLES = 10


@dataclass
class Report:
    acknowledged: int = 0
    indeterminate: int = 0
    indeterminate_found: int = 0
    failed: int = 0
    polled: int = 0
    final_records: int = 0
    partitions: int = 0
    lost: list[Any] = field(default_factory=list)
    moved: list[Any] = field(default_factory=list)
    duplicates: list[Any] = field(default_factory=list)
    reordered: list[Any] = field(default_factory=list)
    unexpected: list[Any] = field(default_factory=list)
    divergent: list[Any] = field(default_factory=list)
    aborted_reads: list[Any] = field(default_factory=list)
    faults: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not (self.lost or self.moved or self.duplicates or self.reordered or self.unexpected
                    or self.divergent or self.aborted_reads or self.problems)

    def summary(self) -> str:
        lines = [
            f"acknowledged sends {self.acknowledged}, indeterminate {self.indeterminate} "
            f"({self.indeterminate_found} of them in the log), failed {self.failed}; "
            f"{self.final_records} records in {self.partitions} partitions at the end; {self.polled} polled",
            "faults: " + (", ".join(f"{k} x{v}" for k, v in sorted(self.faults.items())) or "none"),
            f"lost {len(self.lost)}, moved {len(self.moved)}, duplicates {len(self.duplicates)}, "
            f"reordered {len(self.reordered)}, unexpected {len(self.unexpected)}, divergent {len(self.divergent)}, "
            f"aborted reads {len(self.aborted_reads)}",
        ]
        for name in ("lost", "moved", "duplicates", "reordered", "unexpected", "divergent", "aborted_reads"):
            items = getattr(self, name)
            if items:
                lines.append(f"  {name}: {items[:EXAMPLES]}{' ...' if len(items) > EXAMPLES else ''}")
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)


def producer_and_seq(value: str) -> tuple[str, int] | None:
    """Workload values are ``<producer>:<seq>``; anything else has no order to check."""
    producer, sep, seq = value.rpartition(":")
    if not sep or not seq.isdigit():
        return None
    return producer, int(seq)


def check(events: list[Event], *, expect_partitions: int | None = None) -> Report:
    report = Report()
    sent: dict[str, Event] = {}  # value -> invoke
    acked: dict[str, Event] = {}  # value -> ok
    indeterminate: set[str] = set()
    final: dict[int, list[tuple[int, str]]] = {}
    polls: list[tuple[str, int, int, str]] = []  # (process, partition, offset, value)
    committed_reads: list[tuple[int, int, str]] = []
    txn_values: dict[str, list[str]] = defaultdict(list)
    aborted_txns: set[str] = set()
    for e in events:
        f, t = e.get("f"), e.get("type")
        if f == "send":
            if t == "invoke":
                sent[e["value"]] = e
            elif t == "ok":
                acked[e["value"]] = e
            elif t == "info":
                indeterminate.add(e["value"])
            elif t == "fail":
                report.failed += 1
        elif f == "poll" and t == "ok":
            for p, o, v in e.get("values", []):
                polls.append((e["process"], p, o, v))
                if e.get("isolation") == "read_committed":
                    committed_reads.append((p, o, v))
        elif f == "read" and t == "ok":
            if e["partition"] in final:
                report.problems.append(f"two final reads of partition {e['partition']}")
            final[e["partition"]] = [(o, v) for o, v in e["values"]]
        elif f == "txn" and t == "ok":
            txn_values[e["txn"]].extend(v for _, v in e.get("values", []))
            if e.get("outcome") == "abort":
                aborted_txns.add(e["txn"])
        elif e.get("process") == "nemesis" and t == "invoke":
            report.faults[f] = report.faults.get(f, 0) + 1
    report.acknowledged = len(acked)
    report.indeterminate = len(indeterminate - acked.keys())
    report.polled = len(polls)
    report.partitions = len(final)
    if expect_partitions is not None and len(final) != expect_partitions:
        report.problems.append(f"final reads of {sorted(final)}, expected {expect_partitions} partitions")

    where: dict[str, list[tuple[int, int]]] = defaultdict(list)  # value -> [(partition, offset)]
    at: dict[tuple[int, int], str] = {}
    for p, records in final.items():
        report.final_records += len(records)
        previous = -1
        for o, v in records:
            if o <= previous:
                report.problems.append(f"final read of partition {p} goes from offset {previous} to {o}")
            previous = o
            where[v].append((p, o))
            at[(p, o)] = v

    for v, places in where.items():
        if len(places) > 1:
            report.duplicates.append((v, places))
        if v not in sent:
            report.unexpected.append((v, places))
    report.indeterminate_found = sum(1 for v in indeterminate - acked.keys() if v in where)

    for v, ok in acked.items():
        places = where.get(v)
        if not places:
            report.lost.append((v, ok.get("partition"), ok.get("offset")))
        elif ok.get("offset") is not None and (ok["partition"], ok["offset"]) not in places:
            report.moved.append((v, (ok["partition"], ok["offset"]), places))

    # Order: one producer's values in one partition, in the log, in the order it sent them.
    by_stream: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for v, places in where.items():
        ps = producer_and_seq(v)
        if ps is not None:
            for p, o in places:
                by_stream[(ps[0], p)].append((o, ps[1], v))
    for (producer, p), items in by_stream.items():
        items.sort()
        highest: tuple[int, str] | None = None
        for o, seq, v in items:
            if highest is not None and seq < highest[0]:
                report.reordered.append((producer, p, f"{v}@{o} after {highest[1]}"))
            if highest is None or seq > highest[0]:
                highest = (seq, f"{v}@{o}")

    for process, p, o, v in polls:
        if p in final and at.get((p, o)) != v:
            report.divergent.append((process, p, o, v, at.get((p, o))))

    aborted_values = {v for txn in aborted_txns for v in txn_values[txn]}
    for p, o, v in committed_reads:
        if v in aborted_values:
            report.aborted_reads.append((p, o, v))
    return report
