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

With transactional producers (``init``, ``begin``, ``send`` with ``txn``, ``commit``, ``abort`` events) each
transaction has an outcome: *committed* (its ``commit`` returned ``ok``), *aborted* (its commit was never asked
for, its commit ``fail``ed — librdkafka's word that it did not commit — its ``abort`` returned ``ok``, or its
commit was asked for only after a newer instance of its transactional id had finished ``init``: that init fenced
the producer and aborted its open transaction, so a commit ``ok`` then is itself a problem) or *indeterminate*
(its commit could not be judged and no abort succeeded). Its records are the sends it made, less those refused
at the call (``fail``). The read_committed readers are each read_committed consumer (its polls in order) and the
final read_committed read (to the last stable offset, once every transaction ended). Against them:

- **aborted reads**: a read_committed reader saw a record of an aborted transaction.
- **dirty reads**: a read_committed consumer was given a record of a transaction before the transaction's commit
  was even asked for (its poll is in the history before the commit's ``invoke``): the last stable offset let an
  open transaction through.
- **committed lost**: a record of a committed transaction, or an acknowledged record written outside
  transactions, missing from the final read_committed read.
- **torn**: a read_committed reader saw a record of a transaction in a partition but not every record the
  transaction has in that partition below the reader's furthest offset there (the final read has no furthest:
  it must see them all), or saw them out of their send order. A transaction is visible at once or not at all.
- **committed duplicates**: a value twice in the final read_committed read.
- **half visible**: an indeterminate transaction of which the final read_committed read has some of the records
  the log holds, not all and not none.
- A last stable offset still below the high watermark after the run (a transaction left hanging) is a problem.

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
    dirty_reads: list[Any] = field(default_factory=list)
    committed_lost: list[Any] = field(default_factory=list)
    torn: list[Any] = field(default_factory=list)
    committed_duplicates: list[Any] = field(default_factory=list)
    half_visible: list[Any] = field(default_factory=list)
    transactions: dict[str, int] = field(default_factory=dict)  # outcome -> how many
    committed_read: int = 0  # records in the final read_committed read
    faults: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not (self.lost or self.moved or self.duplicates or self.reordered or self.unexpected
                    or self.divergent or self.aborted_reads or self.dirty_reads or self.committed_lost or self.torn
                    or self.committed_duplicates or self.half_visible or self.problems)

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
        if self.transactions:
            lines[1:1] = [
                "transactions: " + ", ".join(f"{k} {v}" for k, v in sorted(self.transactions.items()))
                + f"; {self.committed_read} records read_committed at the end"]
            lines[-1] += (f", dirty reads {len(self.dirty_reads)}, committed lost {len(self.committed_lost)}, "
                          f"torn {len(self.torn)}, "
                          f"committed duplicates {len(self.committed_duplicates)}, "
                          f"half visible {len(self.half_visible)}")
        for name in ("lost", "moved", "duplicates", "reordered", "unexpected", "divergent", "aborted_reads",
                     "dirty_reads", "committed_lost", "torn", "committed_duplicates", "half_visible"):
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


@dataclass
class Transaction:
    """What the history says of one transaction (see the module's docstring for the outcomes)."""

    process: str
    values: list[str] = field(default_factory=list)  # its records, in send order
    commit: str | None = None  # the last event type of its commit: None (never asked), invoke, ok, fail, info
    abort: str | None = None  # likewise of its abort
    commit_asked: int | None = None  # the index of its commit's invoke in the history
    fenced_by: str | None = None  # a newer instance whose init finished before the commit was asked

    @property
    def outcome(self) -> str:
        if self.fenced_by is not None:
            return "aborted"
        if self.commit == "ok":
            return "committed"
        if self.commit in (None, "fail") or self.abort == "ok":
            return "aborted"
        return "indeterminate"

    @property
    def why_aborted(self) -> str:
        if self.fenced_by is not None:
            return f"fenced by {self.fenced_by} before its commit"
        if self.abort == "ok":
            return "aborted"
        return "its commit failed" if self.commit == "fail" else "never committed"


def check(events: list[Event], *, expect_partitions: int | None = None) -> Report:
    report = Report()
    sent: dict[str, Event] = {}  # value -> invoke
    acked: dict[str, Event] = {}  # value -> ok
    indeterminate: set[str] = set()
    final: dict[int, list[tuple[int, str]]] = {}
    final_committed: dict[int, list[tuple[int, str]]] = {}
    polls: list[tuple[str, int, int, str]] = []  # (process, partition, offset, value)
    # read_committed reader -> partition -> [(offset, value)] in the order it saw them
    committed_readers: dict[str, dict[int, list[tuple[int, str]]]] = defaultdict(lambda: defaultdict(list))
    committed_polls: list[tuple[int, str, int, int, str]] = []  # (history index, process, partition, offset, value)
    txns: dict[str, Transaction] = {}
    txn_of: dict[str, str] = {}  # value -> transaction
    refused: set[str] = set()  # transactional sends refused at the call: never part of their transaction
    inits: dict[str, tuple[str, int]] = {}  # instance -> (its transactional id, index of its init's ok)
    for index, e in enumerate(events):
        f, t = e.get("f"), e.get("type")
        if f == "send":
            txn = e.get("txn")
            if t == "invoke":
                sent[e["value"]] = e
                if txn is not None:
                    txns.setdefault(txn, Transaction(e["process"])).values.append(e["value"])
                    txn_of[e["value"]] = txn
            elif t == "ok":
                acked[e["value"]] = e
            elif t == "info":
                indeterminate.add(e["value"])
            elif t == "fail":
                report.failed += 1
                if txn is not None:
                    refused.add(e["value"])
        elif f == "begin" and t == "ok":
            txns.setdefault(e["txn"], Transaction(e["process"]))
        elif f == "init" and t == "ok":
            inits[e["process"]] = (e["transactional_id"], index)
        elif f == "commit" and t in ("invoke", "ok", "fail", "info"):
            txn = txns.setdefault(e["txn"], Transaction(e["process"]))
            txn.commit = t
            if t == "invoke":
                txn.commit_asked = index
        elif f == "abort" and t in ("invoke", "ok", "info"):
            txns.setdefault(e["txn"], Transaction(e["process"])).abort = t
        elif f == "poll" and t == "ok":
            for p, o, v in e.get("values", []):
                polls.append((e["process"], p, o, v))
                if e.get("isolation") == "read_committed":
                    committed_readers[e["process"]][p].append((o, v))
                    committed_polls.append((index, e["process"], p, o, v))
        elif f == "crash":
            report.problems.append(f"{e['process']} crashed: {e.get('error')}")
        elif f == "poll" and t == "info":
            at = f" ({e['offset']})" if e.get("offset") is not None else ""
            report.problems.append(f"{e['process']} was told its position{at} in partition {e.get('partition')} is "
                                   f"out of range: {e.get('error')}")
        elif f == "read" and t == "ok":
            reads = final_committed if e.get("isolation") == "read_committed" else final
            if e["partition"] in reads:
                report.problems.append(f"two final reads of partition {e['partition']}")
            reads[e["partition"]] = [(o, v) for o, v in e["values"]]
            stable, high = e.get("last_stable_offset"), e.get("high_watermark")
            if stable is not None and high is not None and stable < high:
                report.problems.append(f"partition {e['partition']}: the last stable offset {stable} is below the "
                                       f"high watermark {high} after the run (a transaction left hanging)")
        elif e.get("process") == "nemesis" and t == "invoke":
            report.faults[str(f)] = report.faults.get(str(f), 0) + 1
    for name, txn in txns.items():
        txn.values = [v for v in txn.values if v not in refused]
        txn.fenced_by = _fenced_by(txn, inits)
        if txn.fenced_by is not None and txn.commit == "ok":
            report.problems.append(f"{name} committed after {txn.fenced_by} fenced its producer")
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
        found = where.get(v)
        if not found:
            report.lost.append((v, ok.get("partition"), ok.get("offset")))
        elif ok.get("offset") is not None and (ok["partition"], ok["offset"]) not in found:
            report.moved.append((v, (ok["partition"], ok["offset"]), found))

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
    if final_committed:
        committed_readers["final"] = defaultdict(list, final_committed)
        for p, records in final_committed.items():
            report.committed_read += len(records)
            for o, v in records:
                if p in final and at.get((p, o)) != v:
                    report.divergent.append(("final read_committed", p, o, v, at.get((p, o))))
    _check_transactions(report, txns, txn_of, acked, where, final_committed, committed_readers)
    for index, process, p, o, v in committed_polls:
        owner = txn_of.get(v)
        asked = txns[owner].commit_asked if owner is not None else None
        if asked is not None and index < asked:
            report.dirty_reads.append((process, p, o, v, owner))
    return report


def _fenced_by(txn: Transaction, inits: dict[str, tuple[str, int]]) -> str | None:
    """The first newer instance of the transaction's transactional id whose init finished before the transaction's
    commit was asked for."""
    mine = inits.get(txn.process)
    if mine is None or txn.commit_asked is None:
        return None
    newer = [(at, instance) for instance, (tid, at) in inits.items()
             if tid == mine[0] and mine[1] < at < txn.commit_asked]
    return min(newer)[1] if newer else None


def _check_transactions(report: Report, txns: dict[str, Transaction], txn_of: dict[str, str],
                        acked: dict[str, Event], where: dict[str, list[tuple[int, int]]],
                        final_committed: dict[int, list[tuple[int, str]]],
                        committed_readers: dict[str, dict[int, list[tuple[int, str]]]]) -> None:
    for txn in txns.values():
        report.transactions[txn.outcome] = report.transactions.get(txn.outcome, 0) + 1

    # Nothing of an aborted transaction, ever, for any read_committed reader.
    for reader, partitions in committed_readers.items():
        for p, records in partitions.items():
            for o, v in records:
                name = txn_of.get(v)
                if name is not None and txns[name].outcome == "aborted":
                    report.aborted_reads.append((reader, p, o, v, name, txns[name].why_aborted))

    # Atomic visibility: a reader that saw one record of a transaction in a partition saw every record the
    # transaction has there below its furthest offset in the partition, in send order.
    for reader, partitions in committed_readers.items():
        for p, records in partitions.items():
            seen = {o for o, _ in records}
            furthest = None if reader == "final" else max(seen)
            in_order: dict[str, list[int]] = defaultdict(list)  # transaction -> seqs as the reader saw them
            for _, v in records:
                name = txn_of.get(v)
                ps = producer_and_seq(v)
                if name is not None and ps is not None:
                    in_order[name].append(ps[1])
            for name, seqs in in_order.items():
                if seqs != sorted(set(seqs)):
                    report.torn.append((reader, p, name, f"saw its records in the order {seqs}"))
                offsets = sorted(o for v in txns[name].values for q, o in where.get(v, []) if q == p)
                missing = [o for o in offsets if o not in seen and (furthest is None or o < furthest)]
                if missing:
                    report.torn.append((reader, p, name, f"saw {len(seqs)} of its {len(offsets)} records, not "
                                                         f"those at offsets {missing}"))

    if not final_committed:
        return
    visible: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, records in final_committed.items():
        for o, v in records:
            visible[v].append((p, o))
    for v, places in visible.items():
        if len(places) > 1:
            report.committed_duplicates.append((v, places))
    for name, txn in txns.items():
        if txn.outcome == "committed":
            report.committed_lost += [(v, name) for v in txn.values if v not in visible]
        elif txn.outcome == "indeterminate":
            written = [v for v in txn.values if v in where]
            shown = [v for v in written if v in visible]
            if 0 < len(shown) < len(written):
                report.half_visible.append((name, f"{len(shown)} of the {len(written)} records in the log visible"))
    read_partitions = set(final_committed)
    report.committed_lost += [(v, None) for v, ok in acked.items()
                              if v not in txn_of and ok.get("partition") in read_partitions and v not in visible]
