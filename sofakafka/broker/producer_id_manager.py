"""Producer ids for idempotent and transactional producers, claimed in blocks through the metadata store.

As in Kafka 2.6, ``/latest_producer_id_block`` records the last block any broker claimed
(``{"version":1,"broker":b,"block_start":"s","block_end":"e"}``, 1000 ids per block). A broker claims the
next block with a conditional write on the znode's version, so two brokers sharing a tree never hand out the
same id, and hands ids out of its block from memory until it is used up. Ids never repeat across restarts
because the claimed block is durable before any id from it is returned.

Blocking: claiming a block writes to the store (fsync), so ``generate_producer_id`` may block; callers on an
event loop run it in a worker thread. Thread-safe.
"""

from __future__ import annotations

import threading

from sofakafka.controller import zk_paths
from sofakafka.controller.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError
from sofakafka.controller.zk_data import ProducerIdBlock
from sofakafka.protocol.errors import ErrorCode, KafkaError

_CLAIM_ATTEMPTS = 10


class ProducerIdManager:
    def __init__(self, store: MetadataStore, broker_id: int) -> None:
        self._store = store
        self._broker_id = broker_id
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next = 0

    def generate_producer_id(self) -> int:
        with self._lock:
            if self._block is None or self._next > self._block.block_end:
                self._block = self._claim_block()
                self._next = self._block.block_start
            producer_id = self._next
            self._next += 1
            return producer_id

    def _claim_block(self) -> ProducerIdBlock:
        path = zk_paths.LATEST_PRODUCER_ID_BLOCK_PATH
        for _ in range(_CLAIM_ATTEMPTS):
            try:
                data, stat = self._store.get(path)
            except NoNodeError:
                block = ProducerIdBlock.next_after(None, self._broker_id)
                try:
                    self._store.create(path, block.encode(), makepath=True)
                    return block
                except NodeExistsError:
                    continue
            previous = ProducerIdBlock.decode(data) if data else None
            block = ProducerIdBlock.next_after(previous, self._broker_id)
            try:
                self._store.set(path, block.encode(), version=stat.version)
                return block
            except BadVersionError:
                continue  # another broker claimed a block meanwhile; take the one after it
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "could not claim a producer id block")
