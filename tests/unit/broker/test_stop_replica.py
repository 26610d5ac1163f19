"""StopReplica's checks on a real (single, embedded-store) broker: stale broker and controller epochs, the per-partition
leader epoch of v3, and that a deletion request never deletes a topic the broker's metadata still serves.

The multi-broker path (the controller sending it during topic deletion) is tests/cluster/test_topic_deletion.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sofakafka.broker.handlers.stop_replica import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    partition_errors,
    request_partitions,
    stop_replica_request,
)
from sofakafka.controller.zk_data import TopicPartition
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.describe_configs import DescribeConfigsRequest
from sofakafka.protocol.messages.metadata import MetadataRequest
from sofakafka.protocol.messages.stop_replica import StopReplicaResponse
from tests.unit.broker.broker_harness import BrokerThread, Client, running_broker

TOPIC = "stopped"
TPS = [TopicPartition(TOPIC, 0)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    with running_broker(tmp_path_factory.mktemp("stop-replica"), {"auto.create.topics.enable": "true"}) as b:
        with Client(b.port) as c:
            for _ in range(600):
                (t,) = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]), 9).topics
                if t.error_code == ErrorCode.NONE and t.partitions and t.partitions[0].leader_id >= 0:
                    break
                time.sleep(0.05)
        yield b


def epochs(broker: BrokerThread) -> tuple[int, int]:
    """(controller epoch, broker epoch) as the broker knows them."""
    assert broker.broker is not None
    node = broker.broker.node
    return node.controller.epoch, node.broker_epoch


def log_dir(broker: BrokerThread, tp: TopicPartition) -> Path:
    return Path(broker.config.log_dirs[0]) / f"{tp.topic}-{tp.partition}"


def call(broker: BrokerThread, version: int, *, controller_epoch: int, broker_epoch: int,
         partitions: list[TopicPartition] = TPS, leader_epoch: int = EPOCH_DURING_DELETE) -> StopReplicaResponse:
    request = stop_replica_request(version, controller_id=1, controller_epoch=controller_epoch,
                                   broker_epoch=broker_epoch, partitions=partitions, delete=True,
                                   leader_epoch=leader_epoch)
    with Client(broker.port) as c:
        response = c.call(request, version)
    assert isinstance(response, StopReplicaResponse)
    return response


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_carries_the_partitions_and_the_delete_flag(version: int) -> None:
    tps = [TopicPartition("a", 0), TopicPartition("b", 2), TopicPartition("a", 1)]
    request = stop_replica_request(version, controller_id=1, controller_epoch=5, broker_epoch=9, partitions=tps,
                                   delete=True)
    epoch = EPOCH_DURING_DELETE if version >= 3 else NO_EPOCH
    assert request_partitions(request, version) == dict.fromkeys(tps, (epoch, True))


def test_a_request_level_error_is_every_partitions_and_a_partition_left_out_was_not_stopped() -> None:
    error = StopReplicaResponse.StopReplicaPartitionError
    tps = [TopicPartition("a", 0), TopicPartition("a", 1)]
    assert partition_errors(StopReplicaResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), tps) == dict.fromkeys(
        tps, ErrorCode.STALE_BROKER_EPOCH)
    answered = StopReplicaResponse(partition_errors=[error(topic_name="a", partition_index=0)])
    assert partition_errors(answered, tps) == {tps[0]: ErrorCode.NONE, tps[1]: ErrorCode.UNKNOWN_SERVER_ERROR}


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_broker_epoch_is_stale_broker_epoch(broker: BrokerThread, version: int) -> None:
    controller_epoch, broker_epoch = epochs(broker)
    assert broker_epoch > 0
    response = call(broker, version, controller_epoch=controller_epoch, broker_epoch=broker_epoch - 1)
    assert (response.error_code, response.partition_errors) == (ErrorCode.STALE_BROKER_EPOCH, [])
    assert log_dir(broker, TPS[0]).is_dir()


@pytest.mark.parametrize("version", [0, 3])
def test_an_older_controller_epoch_is_stale_controller_epoch_for_every_partition(broker: BrokerThread,
                                                                               version: int) -> None:
    controller_epoch, broker_epoch = epochs(broker)
    response = call(broker, version, controller_epoch=controller_epoch - 1, broker_epoch=broker_epoch)
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert [(e.topic_name, e.partition_index, e.error_code) for e in response.partition_errors] == [
        (TOPIC, 0, ErrorCode.STALE_CONTROLLER_EPOCH)]
    assert log_dir(broker, TPS[0]).is_dir()


def test_v3_with_the_partitions_own_leader_epoch_is_stale_controller_epoch(broker: BrokerThread) -> None:
    controller_epoch, broker_epoch = epochs(broker)
    assert broker.broker is not None
    partition = broker.broker.replica_manager.get_partition((TOPIC, 0))
    assert partition is not None
    response = call(broker, 3, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                    leader_epoch=partition.leader_epoch)
    assert response.error_code == ErrorCode.NONE
    assert [(e.partition_index, e.error_code) for e in response.partition_errors] == [
        (0, ErrorCode.STALE_CONTROLLER_EPOCH)]
    assert log_dir(broker, TPS[0]).is_dir()


def test_deleting_a_topic_the_metadata_still_serves_is_refused(broker: BrokerThread) -> None:
    # Not marked for deletion: a stray or late request must not take a live topic's data (the controller retries).
    controller_epoch, broker_epoch = epochs(broker)
    response = call(broker, 2, controller_epoch=controller_epoch, broker_epoch=broker_epoch)
    assert [(e.partition_index, e.error_code) for e in response.partition_errors] == [(0, ErrorCode.REQUEST_TIMED_OUT)]
    assert log_dir(broker, TPS[0]).is_dir()


def test_stop_replica_waits_park_no_thread_so_other_admin_requests_are_answered_meanwhile(
        broker: BrokerThread) -> None:
    # Each refused deletion first waits up to 5 s for the topic to leave our metadata. That wait once held a
    # worker of asyncio's default pool (6 threads on 2 cores): eight of them made a DescribeConfigs, which reads
    # in that pool, wait behind them (the fuzzer's "slow" admin frames).
    controller_epoch, broker_epoch = epochs(broker)
    answered: list[str] = []
    lock = threading.Lock()

    def stop() -> None:
        response = call(broker, 2, controller_epoch=controller_epoch, broker_epoch=broker_epoch)
        assert [e.error_code for e in response.partition_errors] == [ErrorCode.REQUEST_TIMED_OUT]
        with lock:
            answered.append("stop")

    waiting = [threading.Thread(target=stop) for _ in range(8)]
    for t in waiting:
        t.start()
    time.sleep(1.0)  # the eight reach their wait (a setup pause, not a measured time)
    with Client(broker.port) as c:
        described = c.call(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name=TOPIC, configuration_keys=["retention.ms"])]), 1)
    with lock:
        answered.append("describe")
    for t in waiting:
        t.join()
    assert described.results[0].error_code == ErrorCode.NONE
    assert answered == ["describe"] + ["stop"] * 8
    assert log_dir(broker, TPS[0]).is_dir()


def test_a_replica_the_broker_does_not_host_counts_as_deleted(broker: BrokerThread) -> None:
    controller_epoch, broker_epoch = epochs(broker)
    gone = TopicPartition("never-here", 3)
    response = call(broker, 3, controller_epoch=controller_epoch, broker_epoch=broker_epoch, partitions=[gone])
    assert [(e.topic_name, e.partition_index, e.error_code) for e in response.partition_errors] == [
        ("never-here", 3, ErrorCode.NONE)]
