"""Kafka-format partition logs: segments, sparse mmap indexes, checkpoints, recovery, retention, compaction."""
