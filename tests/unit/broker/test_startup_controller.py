"""A broker on the embedded store serves only once it is the controller.

CI once saw a CreateTopics sent straight after start-up answered NOT_CONTROLLER: the election runs on the
controller thread and reaches the metadata cache through a watch, which could come after the listener
opened. Each start here is a fresh data dir, so each one runs the first election of its tree."""

from __future__ import annotations

from pathlib import Path

from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.create_topics import CreateTopicsRequest
from sofakafka.protocol.messages.elect_leaders import ElectLeadersRequest
from sofakafka.protocol.messages.metadata import MetadataRequest
from tests.unit.broker.broker_harness import Client, running_broker


def test_the_first_requests_after_start_up_find_the_broker_controller(tmp_path: Path) -> None:
    for i in range(8):
        with running_broker(tmp_path / str(i)) as b, Client(b.port) as client:
            assert b.broker is not None
            # Answered on the controller thread, which must be active by now, not only named in the metadata.
            elect = client.call(ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=30_000), 1)
            assert elect.error_code == ErrorCode.NONE
            meta = client.call(MetadataRequest(topics=[]), 1)
            assert meta.controller_id == b.broker.broker_id
            t = CreateTopicsRequest.CreatableTopic
            resp = client.call(CreateTopicsRequest(
                topics=[t(name="first", num_partitions=1, replication_factor=1)], timeout_ms=30_000), 2)
            assert resp.topics[0].error_code == ErrorCode.NONE
