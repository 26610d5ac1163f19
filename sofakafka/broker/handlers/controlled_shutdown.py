"""ControlledShutdown (API key 7), versions 0-3.

A broker about to stop asks the controller to move its partition leaderships and ISR places to other brokers
first (sofakafka/controller/controlled_shutdown.py does the moving, on the controller's thread). Answered by the
active controller only; any other broker says NOT_CONTROLLER and the sender looks the controller up again.
The answer is the replicated partitions the broker still leads (``remaining_partitions``): empty means done,
anything else makes the sender retry after ``controlled.shutdown.retry.backoff.ms``. Top-level errors, with no
partitions: STALE_BROKER_EPOCH (v2+: the request comes from an older registration of the broker),
BROKER_NOT_AVAILABLE (the controller does not know the broker as registered), NOT_CONTROLLER,
REQUEST_TIMED_OUT when the controller thread did not get to it within ``controller.socket.timeout.ms``.

Version notes: v0 uses request header v0 (no client id; sofakafka/protocol/headers.py reads it); v1 is v0 with
the standard header; v2 adds ``broker_epoch`` (-1, "unknown", is not checked, as Kafka accepts requests from
brokers that predate KIP-380); v3 is flexible.

Authorization (with an authorizer): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.broker.handlers._controller import ask_controller
from sofakafka.controller.controlled_shutdown import UNKNOWN_BROKER_EPOCH, ControlledShutdownError
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode, KafkaError
from sofakafka.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)

RemainingPartition = ControlledShutdownResponse.RemainingPartition


def _error(code: ErrorCode) -> ControlledShutdownResponse:
    return ControlledShutdownResponse(error_code=code, remaining_partitions=[])


@handles(ApiKey.CONTROLLED_SHUTDOWN, 0, 3, error_response=lambda _request, _version, code: _error(ErrorCode(code)))
async def handle_controlled_shutdown(ctx: RequestContext, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
    authz.require_cluster_action(ctx)
    broker_epoch = request.broker_epoch if ctx.api_version >= 2 else UNKNOWN_BROKER_EPOCH
    timeout_s = ctx.broker.config.get_int("controller.socket.timeout.ms") / 1000
    try:
        remaining = await ask_controller(
            ctx, lambda c: c.controlled_shutdown(request.broker_id, broker_epoch, timeout_s),
            "The controller did not handle the controlled shutdown in time.")
    except (ControlledShutdownError, KafkaError) as exc:
        return _error(exc.code)
    return ControlledShutdownResponse(error_code=ErrorCode.NONE, remaining_partitions=[
        RemainingPartition(topic_name=tp.topic, partition_index=tp.partition) for tp in remaining])
