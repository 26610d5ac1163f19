"""The transaction coordinator: transactional ids, their producer epochs and their transactions, as Kafka 2.6
runs them, as pure logic (``state.py`` the per-id state machine, ``coordinator.py`` the coordinator,
``records.py`` the ``__transaction_state`` formats). The broker's runtime (sofakafka/broker/transaction_topic.py)
plugs in its event loop, the replica manager and the marker sender; tests plug in ``ManualTime`` and memory.
"""

from sofakafka.broker.txn.coordinator import (
    InitProducerIdResult,
    MarkerChannel,
    TransactionCoordinator,
    TxnConfig,
    TxnLogWriter,
    TxnMarkers,
)
from sofakafka.broker.txn.records import TRANSACTION_STATE_TOPIC, partition_for
from sofakafka.broker.txn.state import TransactionMetadata, TransactionState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "InitProducerIdResult",
    "MarkerChannel",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TransactionState",
    "TxnConfig",
    "TxnLogWriter",
    "TxnMarkers",
    "partition_for",
]
