"""Spark's own Kafka connector (spark-sql-kafka-0-10) against real sofakafka broker processes.

One SparkSession (local[2], UI off, WARN logs, no progress bars) serves every module here: a JVM start costs
~15 s of the CI budget, and Spark allows one SparkContext per process anyway. Its jars come from the cache
folder scripts/test.sh fills from interop/spark/pom.xml; a missing folder fails the session with the command
that fills it (never a download during the tests). Brokers are tests/integration's real broker processes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from sofakafka.pipelines import connector

# Fixtures and the failure-report hook of tests/integration: real `sofakafka serve` processes, their logs
# attached to a failing test, all of them killed at the end of the session.
from tests.integration.conftest import (  # noqa: F401
    _kill_every_broker_at_exit,
    broker,
    broker_factory,
    module_broker,
    pytest_runtest_makereport,
    topic_name,
)

# SOFAKAFKA_SPARK_LONG=1 runs the long forms: more records and more restarts in the checkpoint test, and the
# one-command demo end to end (a broker, the generator and the job in their own processes, about two minutes).
LONG = os.environ.get("SOFAKAFKA_SPARK_LONG") == "1"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    try:
        import pyspark
    except ImportError:
        pytest.fail("pyspark is missing: pip install -e '.[spark]' (scripts/test.sh does)", pytrace=False)
    assert pyspark.__version__ == connector.SPARK_VERSION, (
        f"pyspark {pyspark.__version__} installed, the connector jars are {connector.SPARK_VERSION}")
    if not connector.connector_jars():
        pytest.fail(f"Spark's Kafka connector is not in {connector.jars_dir()}: run "
                    f"`{connector.resolve_command()}` (scripts/test.sh does)", pytrace=False)
    session = connector.spark_session("sofakafka-tests", jars="cache", shuffle_partitions=2,
                                      conf={"spark.sql.streaming.noDataProgressEventInterval": "200ms"},
                                      log_level="ERROR")
    try:
        yield session
    finally:
        session.stop()
