"""SaslAuthenticate (API key 36), versions 0-2: one SASL token each way (KIP-152).

The token goes to the mechanism chosen by the SaslHandshake before it. A failed login is answered
SASL_AUTHENTICATION_FAILED with a message that does not tell an unknown user from a wrong password, after
``connection.failed.authentication.delay.ms``, and the connection closes once that answer is sent; the log
line says what really failed (unknown user, wrong password, malformed message). v1+ carries
``session_lifetime_ms`` (KIP-368): ``connections.max.reauth.ms`` when set, cut short by a delegation token's
expiry, and the client re-authenticates before it passes. On a listener without SASL, or after the login
completed (no handshake started a re-authentication), the answer is ILLEGAL_SASL_STATE and the connection stays
open, as in Kafka.
"""

from __future__ import annotations

import asyncio
import time

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from sofakafka.security.sasl import (
    IllegalSaslStateError,
    SaslAuthenticationError,
    SaslAuthenticator,
    SaslState,
)


@handles(ApiKey.SASL_AUTHENTICATE, 0, 2)
async def handle_sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    sasl = ctx.connection_state.get("sasl")
    if not isinstance(sasl, SaslAuthenticator):
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="SaslAuthenticate on a listener without SASL")
    if sasl.state is SaslState.COMPLETE:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="SaslAuthenticate request received after successful "
                                                      "authentication")
    try:
        token = sasl.authenticate(request.auth_bytes, int(time.monotonic() * 1000))
    except SaslAuthenticationError as exc:
        await asyncio.sleep(ctx.broker.config.get_int("connection.failed.authentication.delay.ms") / 1000.0)
        ctx.close_connection(f"failed authentication with {sasl.mechanism}: {exc.detail}")
        return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc))
    except IllegalSaslStateError as exc:
        ctx.close_connection(str(exc))
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=str(exc))
    lifetime = sasl.session_lifetime_ms if sasl.principal is not None and sasl.state.name == "COMPLETE" else 0
    # No error message is the empty string, as Kafka sends it.
    return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message="", auth_bytes=token,
                                    session_lifetime_ms=lifetime)
