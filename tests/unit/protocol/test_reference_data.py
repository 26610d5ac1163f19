"""The Kafka facts the tests check against (tests/data/kafka-2.6/) are what tools/gen_reference_data.py makes of
Kafka 2.6's reference: not hand-edited, not stale. Needs the reference (``--kafka-reference DIR`` or
$SOFAKAFKA_KAFKA_REFERENCE); without it this check skips and the data stands as committed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_committed_reference_data_equals_what_the_tool_makes_of_the_reference(kafka_reference: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "tools" / "gen_reference_data.py"), str(kafka_reference),
                           "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
