"""kafkajs consumer groups (tests/js/groups.js) against a real broker: sharing and broadcast.

The script reports what each consumer was assigned and received; the assertions are here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.conftest import BrokerProcess
from tests.integration.groups import GROUP_OVERRIDES, create_topic, produce
from tests.integration.test_kafkajs import JS_DIR, run_node


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("groups-kafkajs"), dict(GROUP_OVERRIDES)).start()
    try:
        yield b
    finally:
        b.kill()


def test_kafkajs_three_members_share_six_partitions_and_three_groups_each_get_everything(
        broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 6)
    sent = produce(broker.bootstrap, topic_name, 5, 6)
    result = run_node(JS_DIR / "groups.js", {"bootstrap": broker.bootstrap, "topic": topic_name,
                                             "messages": len(sent)})
    members = {m["name"]: m for m in result["members"]}
    assert result["converged"], members
    sharing = [members[f"share-{i}"] for i in range(3)]
    assert [len(m["assignment"]) for m in sharing] == [2, 2, 2]
    assert sorted(p for m in sharing for p in m["assignment"]) == list(range(6))
    assert {v.encode() for m in sharing for v in m["values"]} == set(sent)
    for i in range(3):
        assert sorted(v.encode() for v in members[f"broadcast-{i}"]["values"]) == sorted(sent)
