"""Spark pipelines: PySpark jobs (batch and Structured Streaming) that read and write topics through Spark's own
Kafka connector (``spark-sql-kafka-0-10``), installed with an extra so the broker's own install stays light.

A client of the cluster like router/ (pyproject.toml's contracts, docs/architecture.md): it talks to brokers over
the wire only (Spark's connector, or sofakafka.client for the generator), and never imports a broker's layers
(broker/, controller/, security/, storage/). pyspark, pyarrow and pandas come with the ``spark`` extra
(``pip install 'sofakafka[spark]'``); no module here imports them at module level, so that everything imports
without them:

- :mod:`~sofakafka.pipelines.connector` finds the connector's jars and builds a SparkSession;
- :mod:`~sofakafka.pipelines.naming` maps ``--instance/--cell/--topic`` to a cell's physical topic;
- :mod:`~sofakafka.pipelines.generator` produces access logs and orders at a chosen rate;
- :mod:`~sofakafka.pipelines.log_analytics` and :mod:`~sofakafka.pipelines.stream_analytics` are the jobs;
- :mod:`~sofakafka.pipelines.demo` runs a broker, the generator and a job in one command.

``python -m sofakafka.pipelines --help`` lists the commands; docs/pipelines.md says how to run them locally and
with ``spark-submit --master ...`` on a cluster.
"""
