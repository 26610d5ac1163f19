"""The stopping broker's side of controlled shutdown: ask the controller to move our work away, with retries.

Kafka 2.6's ``KafkaServer.controlledShutdown``, run first thing in :meth:`Broker.shutdown`, while the broker
still serves clients and replicates (the controller may be this very broker, which must still answer):

* Find the controller in the metadata cache (``/controller``) and its endpoint on the inter-broker listener;
  send ControlledShutdown v3 (broker id, broker epoch) over a connection of our own client.
* Success is NONE with no remaining partitions. Anything else (an error code, partitions the controller could
  not move, no controller known, a connection failure or ``controller.socket.timeout.ms`` passing) is an
  attempt that failed: wait ``controlled.shutdown.retry.backoff.ms`` and try again, at most
  ``controlled.shutdown.max.retries`` attempts in all, then shut down anyway ("unclean" in Kafka's words: the
  cluster then learns of our departure from the registration going away).
* One departure from Kafka: the pause between attempts ends early once retrying cannot help, that is when
  every remaining partition has no other replica registered in the metadata cache (a whole cluster being
  stopped: the last broker would otherwise wait out every retry for replicas that have already left). Kafka
  waits the full backoff each time.

Only a broker of a ZooKeeper cluster does this; a single broker on the embedded store has nobody to hand its
partitions to.

Public API::

    ControlledShutdownSender(broker_id, broker_epoch, cache, listener_name, *, max_retries, retry_backoff_ms,
                             socket_timeout_ms).run() -> bool     # blocking: call from a worker thread
    inter_broker_connection(snap, broker_id, listener_name, *, client_id, timeout_s) -> BrokerConnection | None
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sofakafka.client import BrokerConnection, ClientError
from sofakafka.client.security import ClientSecurity
from sofakafka.controller.metadata import ClusterMetadata, MetadataCache
from sofakafka.protocol.errors import DecodeError, ErrorCode, KafkaError
from sofakafka.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)

log = logging.getLogger(__name__)


def inter_broker_connection(snap: ClusterMetadata, broker_id: int, listener_name: str, *, client_id: str,
                            timeout_s: float, security: ClientSecurity | None = None) -> BrokerConnection | None:
    """A connection (opened by its first send) to ``broker_id``'s endpoint on the inter-broker listener, as the
    metadata cache knows it; None when the broker is not registered. Every request one broker sends another
    outside replication goes this way: ControlledShutdown to the controller, StopReplica from it."""
    broker = snap.brokers.get(broker_id)
    if broker is None:
        return None
    endpoint = snap.endpoint(broker_id, listener_name) or broker.endpoints[0]
    return BrokerConnection(endpoint.host or "localhost", endpoint.port, timeout_s=timeout_s, client_id=client_id,
                            node_id=broker_id, security=security)


class ControlledShutdownSender:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], cache: MetadataCache, listener_name: str,
                 *, max_retries: int, retry_backoff_ms: int, socket_timeout_ms: int,
                 security: ClientSecurity | None = None) -> None:
        """``broker_epoch`` is read at each attempt: a renewed ZooKeeper session re-registers with a new one."""
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._cache = cache
        self._listener_name = listener_name
        self._max_retries = max_retries
        self._backoff_s = retry_backoff_ms / 1000.0
        self._timeout_s = socket_timeout_ms / 1000.0
        self._security = security
        self._connection: BrokerConnection | None = None
        self._connected_to: int | None = None
        self.remaining: list[tuple[str, int]] = []
        """What the controller's last answer said we still lead."""

    def run(self) -> bool:
        """True once the controller moved everything it could; False after the last failed attempt."""
        try:
            for attempt in range(1, max(self._max_retries, 1) + 1):
                if self._attempt():
                    log.info("controlled shutdown succeeded")
                    return True
                if attempt == self._max_retries:
                    break
                log.warning("retrying controlled shutdown after the previous attempt failed...")
                self._cache.wait_until(self._retry_is_futile, self._backoff_s)
                if self._retry_is_futile(self._cache.snapshot()):
                    log.info("no other replica of the partitions we still lead is registered: not retrying")
                    break
            log.warning("proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")
            return False
        finally:
            self._close()

    def _attempt(self) -> bool:
        snap = self._cache.snapshot()
        controller_id = snap.controller_id
        if controller_id < 0:
            log.info("no controller present in the metadata cache")
            return False
        if controller_id not in snap.brokers:
            log.info("broker registration for controller %d is not available in the metadata cache", controller_id)
            return False
        if self._connected_to != controller_id:
            self._close()
            self._connection = inter_broker_connection(snap, controller_id, self._listener_name,
                                                       client_id=f"broker-{self.broker_id}-controlled-shutdown",
                                                       timeout_s=self._timeout_s, security=self._security)
            self._connected_to = controller_id
        assert self._connection is not None
        request = ControlledShutdownRequest(broker_id=self.broker_id, broker_epoch=self._broker_epoch())
        try:
            # The newest version both sides know: v3 between two of our brokers.
            response = self._connection.send(request, timeout_s=self._timeout_s)
        except (ClientError, KafkaError, DecodeError, OSError) as exc:
            # A controller that is going away, or one that took longer than controller.socket.timeout.ms.
            log.warning("error during controlled shutdown with controller %d: %s", controller_id, exc)
            self._close()
            return False
        assert isinstance(response, ControlledShutdownResponse)
        self.remaining = [(p.topic_name, p.partition_index) for p in response.remaining_partitions]
        if response.error_code == ErrorCode.NONE and not self.remaining:
            return True
        if self.remaining:
            log.info("remaining partitions to move: %s", ", ".join(f"{t}-{p}" for t, p in self.remaining[:20]))
        if response.error_code != ErrorCode.NONE:
            log.info("error from controller %d: %s", controller_id, ErrorCode.for_code(response.error_code).name)
            self._close()  # NOT_CONTROLLER and the like: look the controller up afresh next time
        return False

    def _retry_is_futile(self, snap: ClusterMetadata) -> bool:
        """No remaining partition has a replica other than us that is registered: nobody to move it to, now or
        after the backoff. Errors without remaining partitions (no controller yet, NOT_CONTROLLER) are worth
        the retry."""
        if not self.remaining:
            return False
        for topic, partition in self.remaining:
            p = snap.partition(topic, partition)
            if p is None:
                continue
            if any(r != self.broker_id and r in snap.brokers for r in p.replicas):
                return False
        return True

    def _close(self) -> None:
        connection, self._connection, self._connected_to = self._connection, None, None
        if connection is not None:
            connection.close()
