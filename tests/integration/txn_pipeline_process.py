"""A consume-transform-produce application in its own process, so a test can kill -9 it mid-transaction.

Usage: python txn_pipeline_process.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID

librdkafka (confluent-kafka) as exactly-once applications use it: a read_committed consumer in a group and a
transactional producer; each batch of input records becomes upper-cased output records plus the consumer's
positions, committed together with ``send_offsets_to_transaction``. It exits 0 once its assignment is consumed to
the end and nothing new came for a few seconds; a transaction the broker makes it abort (fenced, timed out) is
aborted and the consumer rewound to the committed offsets, as the librdkafka examples do. Progress lines
(``committed N``) go to stdout, flushed, so the test knows when to kill it.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

IDLE_EXIT_S = 4.0


def main() -> None:
    bootstrap, input_topic, output_topic, group, txn_id = sys.argv[1:6]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 20000, "linger.ms": 5})
    producer.init_transactions(60)
    consumer.subscribe([input_topic])
    committed = 0
    idle_since = time.monotonic()
    while True:
        msgs = [m for m in consumer.consume(num_messages=50, timeout=0.5) if m.error() is None]
        if not msgs:
            if time.monotonic() - idle_since > IDLE_EXIT_S and _at_end(consumer):
                break
            continue
        idle_since = time.monotonic()
        producer.begin_transaction()
        try:
            for m in msgs:
                producer.produce(output_topic, key=m.key(), value=m.value().upper())
            time.sleep(0.05)  # a transaction stays open for a while: a kill lands inside one
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            committed += len(msgs)
            print(f"committed {committed}", flush=True)
        except KafkaException as exc:
            error = exc.args[0]
            if not error.txn_requires_abort():
                raise
            print(f"aborting: {error}", flush=True)
            producer.abort_transaction(30)
            _rewind(consumer)
    producer.flush(30)
    consumer.close()


def _at_end(consumer: Consumer) -> bool:
    assignment = consumer.assignment()
    if not assignment:
        return False
    for tp in consumer.position(assignment):
        _, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
        if tp.offset < high:
            return False
    return True


def _rewind(consumer: Consumer) -> None:
    for tp in consumer.committed(consumer.assignment(), timeout=30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


if __name__ == "__main__":
    main()
