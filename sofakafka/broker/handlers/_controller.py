"""What the requests answered only by the active controller share.

CreateTopics, CreatePartitions, DeleteTopics, ElectLeaders, ControlledShutdown and both reassignment APIs are
Kafka 2.6 requests a client must send to the controller: any other broker answers NOT_CONTROLLER, which makes
the client look the controller up in Metadata and retry. The ones whose work runs on the controller's thread
(:meth:`KafkaController.call_on_thread` behind each blocking controller method) also share how that hand-off
fails: the thread did not get to it in time (REQUEST_TIMED_OUT), or the controller resigned while the request
waited (NOT_CONTROLLER).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from sofakafka.broker.handlers import RequestContext
from sofakafka.controller.kafka_controller import ControllerMovedError, KafkaController
from sofakafka.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")

NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."


def is_controller(ctx: RequestContext) -> bool:
    return bool(ctx.broker.metadata_cache.snapshot().controller_id == ctx.broker.broker_id)


def not_controller() -> KafkaError:
    return KafkaError(ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)


async def ask_controller(ctx: RequestContext, call: Callable[[KafkaController], T], timed_out_message: str) -> T:
    """Run ``call`` (a blocking controller method, which waits for the controller thread) off the event loop,
    if this broker is the active controller. Raises KafkaError NOT_CONTROLLER or REQUEST_TIMED_OUT
    (``timed_out_message``); KafkaErrors that ``call`` raises pass through."""
    controller = ctx.broker.controller
    if not is_controller(ctx) or not controller.is_active:
        raise not_controller()
    try:
        return await asyncio.to_thread(call, controller)
    except TimeoutError:
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, timed_out_message) from None
    except ControllerMovedError:
        raise not_controller() from None
