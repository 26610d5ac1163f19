"""kafka-python's record builders and readers, imported as an independent implementation to compare against."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    # kafka-python 3.0 calls a deprecated importlib API at import; tests run with warnings as errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

__all__ = ["DefaultRecordBatch", "DefaultRecordBatchBuilder", "LegacyRecordBatch", "LegacyRecordBatchBuilder"]
