"""A streaming read of a 3-broker ZooKeeper cluster survives a kill -9 of a partition leader: the query's
Parquet output holds every record of the topic exactly once, each acknowledged one where it was
acknowledged, with nothing lost and nothing doubled.

The cluster is tests/cluster's (cluster_launcher: one ZooKeeper, three `sofakafka serve` processes); the
topic has RF=3 and min.insync.replicas=2, and an acks=all producer keeps writing through the failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_failover import Cluster, LoadProducer, running_cluster, wait_for
from tests.spark.kafka_io import read_all
from tests.spark.streaming import data_batches, kafka_stream, wait_until

OUT_SCHEMA = "partition INT, offset LONG, value STRING"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("spark-failover"), {
        "replica.lag.time.max.ms": "6000", "auto.leader.rebalance.enable": "false"}) as c:
        yield c


def test_a_stream_survives_kill_9_of_a_partition_leader_with_no_row_lost_or_doubled(
        spark: Any, cluster: Cluster, tmp_path: Path) -> None:
    topic = cluster.create_topic()
    out, ck = tmp_path / "out", tmp_path / "ck"
    q = (kafka_stream(spark, cluster.all_bootstrap, subscribe=topic, startingOffsets="earliest",
                      **{"kafka.request.timeout.ms": "10000", "kafka.default.api.timeout.ms": "30000"})
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
         .trigger(processingTime="500 milliseconds").start())
    try:
        with LoadProducer(cluster.all_bootstrap, topic) as load:
            wait_until("rows through the query before the failure",
                       lambda: sum(b["numInputRows"] for b in data_batches(q)) >= 200, q)
            victim = cluster.partitions(topic)[0][0]
            cluster.kill(victim)
            before = load.count()
            wait_for("a live leader other than the victim for every partition",
                     lambda: all(leader not in (victim, -1) for leader, _ in cluster.partitions(topic).values()))
            wait_for("the producer continuing after the failover", lambda: load.count() >= before + 200)
        assert not load.errors, load.errors[:3]
        live = ",".join(cluster.bootstrap(b) for b in cluster.live())
        in_topic = read_all(live, topic)
        ends = {}
        for r in in_topic:
            ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)

        def caught_up() -> bool:
            p = q.lastProgress
            if p is None or not p["sources"][0]["endOffset"]:
                return False
            end = p["sources"][0]["endOffset"]
            end = end if isinstance(end, dict) else json.loads(end)
            return {int(k): v for k, v in end[topic].items()} == ends

        wait_until("the query to read up to the end of every partition", caught_up, q)
        q.processAllAvailable()
    finally:
        q.stop()
    rows = [(r[0], r[1], r[2]) for r in spark.read.schema(OUT_SCHEMA).parquet(str(out)).collect()]
    assert len(rows) == len(set(rows)), "a row was written twice"
    assert sorted(rows) == sorted((r.partition, r.offset, (r.value or b"").decode()) for r in in_topic)
    got = {(p, o): v for p, o, v in rows}
    missing = {k: v for k, v in load.acked.items() if got.get(k) != v.decode()}
    assert not missing, f"{len(missing)} acknowledged records missing, e.g. {sorted(missing.items())[:3]}"
    assert len(rows) >= len(load.acked) > 400
    cluster.restart(victim, [topic])
