"""Spark pipelines: PySpark jobs (batch and Structured Streaming) that read and write topics through Spark's own
Kafka connector (spark-sql-kafka-0-10), installed with an extra so the broker's own install stays light.

A client of the cluster like router/ (pyproject.toml's contracts, docs/architecture.md): it talks to brokers over
the wire only, and never imports a broker's layers (broker/, controller/, security/, storage/).
"""
