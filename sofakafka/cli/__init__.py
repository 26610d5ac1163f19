"""The `sofakafka` command and its console tools, one module per Kafka script (see main.py)."""

from sofakafka.cli.main import main

__all__ = ["main"]
