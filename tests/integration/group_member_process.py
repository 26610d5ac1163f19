"""A group member in its own process, so a test can kill -9 it: no LeaveGroup, no goodbye, only silence.

Usage: python group_member_process.py BOOTSTRAP GROUP TOPIC [GROUP_INSTANCE_ID]

Consumes one record per poll, commits after each, and prints one JSON line per event to stdout (flushed):
``{"assigned": [partitions]}`` whenever its assignment changes and ``{"p": partition, "o": offset, "v": value}``
for each record it processed, so the test knows what it consumed and committed before dying.
"""

from __future__ import annotations

import json
import sys
import time

from kafka import KafkaConsumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    instance_id = sys.argv[4] if len(sys.argv) > 4 else None
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, group_instance_id=instance_id,
        auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=1,
        # A static member's restart must fit in its session even on a loaded machine: starting Python and
        # kafka-python can take seconds there. Dynamic members keep a short one, so their death is noticed.
        session_timeout_ms=30000 if instance_id else 6000,
        heartbeat_interval_ms=500, client_id=f"member-process-{instance_id or 'dynamic'}")
    assigned: list[int] | None = None
    while True:
        batches = consumer.poll(timeout_ms=100)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != assigned:
            assigned = now
            print(json.dumps({"assigned": now}), flush=True)
        for tp, records in batches.items():
            for r in records:
                # Processed (printed) before committed: a record is never committed without the test knowing.
                print(json.dumps({"p": tp.partition, "o": r.offset, "v": r.value.decode()}), flush=True)
                consumer.commit()
        if batches:
            time.sleep(0.05)  # slow on purpose: work must be left for the survivors


if __name__ == "__main__":
    main()
