"""Exceptions raised by the storage layer; each is a KafkaError carrying the code the broker answers with."""

from __future__ import annotations

from pathlib import Path

from sofakafka.protocol.errors import ErrorCode, KafkaError


class StorageError(KafkaError):
    """Base of every storage failure; ``code`` (an ErrorCode) is what a client should see."""

    default_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(self.default_code, message)


class OffsetOutOfRangeError(StorageError):
    """A fetch, truncation or log-start move asked for an offset the log does not hold."""

    default_code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptLogError(StorageError):
    """Bytes handed to an append fail their CRC or framing (the client sees CORRUPT_MESSAGE)."""

    default_code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeError(StorageError):
    """A batch is larger than ``max.message.bytes`` or than a whole segment."""

    default_code = ErrorCode.MESSAGE_TOO_LARGE


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose offsets do not continue the log (replication must truncate first)."""


class InvalidLogConfigError(StorageError, ValueError):
    """A topic config value Kafka would refuse; the message names the key and the reason."""

    default_code = ErrorCode.INVALID_CONFIG

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"invalid value {value!r} for configuration {key}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


class CorruptIndexError(StorageError):
    """An index file that cannot be trusted; the loader rebuilds it from the segment's log."""

    default_code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"corrupt index {path}: {reason}")
        self.path = path
        self.reason = reason


class InvalidOffsetError(StorageError):
    """An index append out of order or past the relative-offset range; a programming error upstream."""


class CheckpointFormatError(StorageError):
    """A checkpoint or properties file that does not parse; names the file and the line."""

    default_code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, path: Path, line_number: int, reason: str) -> None:
        super().__init__(f"malformed checkpoint file {path}, line {line_number}: {reason}")
        self.path = path
        self.line_number = line_number
        self.reason = reason


class LogDirError(StorageError):
    """A log directory that cannot be used (inconsistent meta.properties, unreadable, ...)."""

    default_code = ErrorCode.KAFKA_STORAGE_ERROR


class KafkaStorageError(StorageError):
    """A file operation of a log failed (disk full, I/O error): its log directory goes offline, as Kafka's
    ``KafkaStorageException`` takes it, and clients see KAFKA_STORAGE_ERROR for its partitions."""

    default_code = ErrorCode.KAFKA_STORAGE_ERROR


class LogDirNotFoundError(StorageError):
    """A log directory named by a request is not one of ``log.dirs`` (AlterReplicaLogDirs)."""

    default_code = ErrorCode.LOG_DIR_NOT_FOUND


class ReplicaNotAvailableError(StorageError):
    """The broker holds no log of the partition (AlterReplicaLogDirs of a replica not created here yet)."""

    default_code = ErrorCode.REPLICA_NOT_AVAILABLE


class InvalidTopicError(StorageError):
    """A topic this storage cannot handle as asked (a future replica's directory name longer than 255 bytes)."""

    default_code = ErrorCode.INVALID_TOPIC_EXCEPTION
