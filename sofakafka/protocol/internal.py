"""sofakafka's own inter-broker APIs: not Kafka's, never advertised in ApiVersions, spoken only between our brokers.

Kafka 2.6 has one key per API (0-49, ``messages/``); a feature we add beyond 2.6 that needs brokers to talk goes
here, under a key far above any Kafka assigns (Kafka's own reach the 70s), declared in the same DSL. Clients
never see these keys: the broker leaves them out of ApiVersions, so no client picks one.

``VerifyTxnPartitions`` (key 10024, v0): a partition leader asks the transaction coordinator whether partitions
belong to producers' ongoing transactions before it accepts the first transactional batch of a transaction
(KIP-890's verification, which Kafka 3.6 does with AddPartitionsToTxn v4 ``verify_only``; 2.6's AddPartitionsToTxn
versions cannot carry that flag, and answering it under key 24 would advertise a version 2.6 never had). The
layout follows AddPartitionsToTxn v4's batch: per transaction its id, producer id and epoch, and topics with
partitions; the answer gives an error code per partition (NONE: in the ongoing transaction; INVALID_TXN_STATE:
not; INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS as the coordinator's checks say).
"""

from __future__ import annotations

from sofakafka.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES
from sofakafka.protocol.schema import INT16, INT32, INT64, STRING, Request, Response, Struct, array, field

VERIFY_TXN_PARTITIONS = 10024


class VerifyTxnPartitionsRequest(Request):
    API_KEY = VERIFY_TXN_PARTITIONS
    VALID_VERSIONS = "0"
    FLEXIBLE_VERSIONS = "none"

    class Transaction(Struct):
        class Topic(Struct):
            name: str = field(STRING, "0+", default="")
            partitions: list[int] = field(array(INT32), "0+", default_factory=list)

        transactional_id: str = field(STRING, "0+", default="")
        producer_id: int = field(INT64, "0+", default=0)
        producer_epoch: int = field(INT16, "0+", default=0)
        topics: list[Topic] = field(array(Topic), "0+", default_factory=list)

    transactions: list[Transaction] = field(array(Transaction), "0+", default_factory=list)


class VerifyTxnPartitionsResponse(Response):
    API_KEY = VERIFY_TXN_PARTITIONS
    VALID_VERSIONS = "0"
    FLEXIBLE_VERSIONS = "none"

    class Result(Struct):
        class Topic(Struct):
            class Partition(Struct):
                partition_index: int = field(INT32, "0+", default=0)
                error_code: int = field(INT16, "0+", default=0)

            name: str = field(STRING, "0+", default="")
            partitions: list[Partition] = field(array(Partition), "0+", default_factory=list)

        transactional_id: str = field(STRING, "0+", default="")
        topics: list[Topic] = field(array(Topic), "0+", default_factory=list)

    error_code: int = field(INT16, "0+", default=0)
    results: list[Result] = field(array(Result), "0+", default_factory=list)


INTERNAL_API_KEYS = frozenset({VERIFY_TXN_PARTITIONS})

#: Kafka's 50 keys and ours, for the codec's lookups.
ALL_REQUEST_TYPES: dict[int, type[Request]] = {**REQUEST_TYPES, VERIFY_TXN_PARTITIONS: VerifyTxnPartitionsRequest}
ALL_RESPONSE_TYPES: dict[int, type[Response]] = {**RESPONSE_TYPES,
                                                 VERIFY_TXN_PARTITIONS: VerifyTxnPartitionsResponse}
