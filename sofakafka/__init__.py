"""sofakafka: a Kafka-compatible broker in pure Python."""

__version__ = "0.1.0"
