"""The chaos suite's short form, for CI: two leader kills and one of every other fault under load (two idempotent
producers, a transactional one, a read_uncommitted and a read_committed consumer), then the whole history
checked. The long form (100 leader kills and several of every other fault) is ``python -m tests.chaos.run``
(tests/chaos/run.py; figures in docs/reliability.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.chaos.netns import available
from tests.chaos.run import Plan, run

pytestmark = [
    pytest.mark.skipif(available() is not None, reason=str(available())),
    pytest.mark.skipif(shutil.which("java") is None, reason="ZooKeeper needs java (apt-get install zookeeper)"),
    pytest.mark.timeout(900),
]


def test_a_short_chaos_run_loses_duplicates_and_reorders_nothing_and_read_committed_sees_no_abort(
        tmp_path: Path) -> None:
    lines: list[str] = []
    outcome = run(tmp_path / "chaos", Plan(leader_kills=2, each=1, rate=30.0, seed=7, txn_producers=1),
                  log=lines.append)
    report = outcome.report
    assert report.valid, outcome.summary() + "\n" + "\n".join(lines)
    assert report.acknowledged > 100, outcome.summary()
    assert report.faults.get("kill-leader") == 2 and len(report.faults) == 10, report.faults
    assert report.polled > 0
    # Transactions ran, committed and aborted (a quarter on purpose), and read_committed read the end.
    assert report.transactions.get("committed", 0) > 10 and report.transactions.get("aborted", 0) > 0, \
        outcome.summary()
    assert 0 < report.committed_read < report.final_records, outcome.summary()
