"""The same requests to Apache Kafka 2.6 and to sofakafka, the decoded answers compared field by field.

Every client-facing API key sofakafka advertises is covered at every version it advertises (scenarios.py),
usual paths and error paths. What legitimately differs is normalised (compare.py); every other difference
must be a row of the one accepted-differences table in docs/compatibility.md, which names its reason. Any
other difference fails here, naming the API, version, case and field.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from sofakafka.protocol.api import ApiKey, valid_versions
from tests.conformance.compare import (
    Session,
    accepted_differences,
    advertised_by,
    compare,
    keys_not_advertised_yet,
)
from tests.conformance.scenarios import COVERED_BY, INTER_BROKER, SCENARIOS
from tests.integration.conftest import BrokerProcess
from tests.reference.kafka import ReferenceKafka

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def advertised(sofakafka_broker: BrokerProcess) -> dict[int, tuple[int, int]]:
    return advertised_by(sofakafka_broker.host, sofakafka_broker.port)


def test_every_advertised_key_is_covered(advertised: dict[int, tuple[int, int]], reference_kafka: ReferenceKafka) -> None:
    kafka = advertised_by(reference_kafka.host, reference_kafka.port)
    for key, (lo, hi) in advertised.items():
        assert key in SCENARIOS or key in COVERED_BY or key in INTER_BROKER, f"no scenario for {ApiKey(key).name}"
        # What we advertise Kafka 2.6 answers too (its own ranges are the codec's).
        assert kafka[key][0] <= lo <= hi <= kafka[key][1], (ApiKey(key).name, (lo, hi), kafka[key])
        assert (lo, hi) == valid_versions(key) or key in INTER_BROKER, ApiKey(key).name


def test_the_keys_not_advertised_are_listed_with_their_issue(advertised: dict[int, tuple[int, int]],
                                                             reference_kafka: ReferenceKafka) -> None:
    """docs/compatibility.md lists exactly the keys Kafka 2.6 answers and sofakafka does not advertise, each with
    the issue that brings it (or why not): a key that lands, or one missing from the table, fails here."""
    kafka = advertised_by(reference_kafka.host, reference_kafka.port)
    listed = keys_not_advertised_yet()
    assert sorted(listed) == sorted(set(kafka) - set(advertised)), (
        f"listed {sorted(listed)}, Kafka 2.6 answers and sofakafka does not: {sorted(set(kafka) - set(advertised))}")
    assert all(listed.values()), "every key not advertised names the issue that brings it"


def test_the_accepted_differences_table_is_readable() -> None:
    rows = accepted_differences()
    assert rows, "docs/compatibility.md has no accepted-differences rows"
    assert len({r.row for r in rows}) == len(rows), "row numbers must be unique"
    assert all(r.reason for r in rows), "every accepted difference names its reason"


@pytest.mark.parametrize("key", sorted(SCENARIOS), ids=lambda k: ApiKey(k).name)
def test_same_answers_as_kafka_2_6(key: int, advertised: dict[int, tuple[int, int]], sofakafka_broker: BrokerProcess,
                                   reference_kafka: ReferenceKafka) -> None:
    if key not in advertised:
        pytest.fail(f"{ApiKey(key).name} has a scenario but sofakafka does not advertise it")
    lo, hi = advertised[key]
    versions = range(lo, hi + 1)
    ours = Session(sofakafka_broker.host, sofakafka_broker.port)
    theirs = Session(reference_kafka.host, reference_kafka.port)
    try:
        # Both brokers at once: each side mostly waits on its broker.
        with ThreadPoolExecutor(2) as pool:
            for done in [pool.submit(SCENARIOS[key], ours, versions), pool.submit(SCENARIOS[key], theirs, versions)]:
                done.result()
    finally:
        ours.close()
        theirs.close()
    problems, _ = compare(ours.exchanges, theirs.exchanges, accepted_differences())
    assert not problems, (f"{len(problems)} difference(s) from Apache Kafka 2.6 not in docs/compatibility.md:\n"
                          + "\n".join(problems[:150]))
