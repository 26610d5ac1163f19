"""SaslHandshake (API key 17), versions 0-1: the client names its SASL mechanism.

On a SASL listener the connection's :class:`~sofakafka.security.sasl.SaslAuthenticator` answers: NONE and the
enabled mechanisms when the mechanism is enabled, else UNSUPPORTED_SASL_MECHANISM (the connection then closes,
as Kafka's does). v0 means the tokens that follow are bare frames without Kafka headers (the connection reads
them so); v1 means they come in SaslAuthenticate requests. After a successful login a new handshake starts a
KIP-368 re-authentication (v1 only, same mechanism) when ``connections.max.reauth.ms`` is set; without it the
answer is ILLEGAL_SASL_STATE and the connection stays logged in, as Kafka's request handler answers. On a
listener without SASL the answer is ILLEGAL_SASL_STATE too.
"""

from __future__ import annotations

import logging

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from sofakafka.security.sasl import SaslAuthenticator, SaslState

log = logging.getLogger(__name__)


@handles(ApiKey.SASL_HANDSHAKE, 0, 1)
async def handle_sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    sasl = ctx.connection_state.get("sasl")
    if not isinstance(sasl, SaslAuthenticator):
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE)
    result = sasl.handshake(request.mechanism, ctx.api_version)
    if sasl.state is SaslState.FAILED:
        ctx.close_connection(f"failed authentication: SASL mechanism {request.mechanism!r} is not enabled on "
                             f"{ctx.listener_name} (enabled: {', '.join(result.mechanisms)})")
    return SaslHandshakeResponse(error_code=result.error_code, mechanisms=list(result.mechanisms))
