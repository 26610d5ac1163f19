"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and DescribeDelegationToken
(41), versions 0-2 (v2 flexible): delegation tokens (KIP-48), as Kafka 2.6's KafkaApis and DelegationTokenManager
answer them. What a token is and the rules: sofakafka/security/tokens.py; where it is kept: token_manager.py.

First, each of the four refuses a connection that cannot be trusted with tokens with
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: a PLAINTEXT listener, an SSL listener whose client showed no certificate
(``User:ANONYMOUS``), and a login made with a token (a token cannot mint, renew, expire or list tokens). Then:

* Create: a renewer that is not a ``User:`` principal is INVALID_PRINCIPAL_TYPE; without
  ``delegation.token.master.key`` DELEGATION_TOKEN_AUTH_DISABLED; otherwise a token owned by the requester, its
  id, HMAC and times in the answer. No ACL is checked: in Kafka 2.6 every authenticated principal may create
  tokens for itself (the CreateTokens ACL came with Kafka 3.3). An answer with an error carries the requester as
  principal, -1 times, an empty id and HMAC.
* Renew and Expire: DELEGATION_TOKEN_AUTH_DISABLED without a master key; the token is found by its HMAC
  (DELEGATION_TOKEN_NOT_FOUND), then the owner-or-renewer check (DELEGATION_TOKEN_OWNER_MISMATCH) and a live token
  (DELEGATION_TOKEN_EXPIRED); the answer carries the new expiry (Expire with a negative period: removed now, the
  answer carries now), or -1 with an error.
* Describe: DELEGATION_TOKEN_AUTH_DISABLED without a master key; an empty owner list answers no tokens, a null one
  every owner; the requester sees the tokens it owns or renews, and the others only where it may DESCRIBE the
  ``DelegationToken`` resource named by the token id (each checked as Kafka checks it, denials logged).

A refused request stores nothing. Every write is the token's znode and a ``/delegation_token/token_changes``
notification in one multi-op, so every broker knows the token at once.
"""

from __future__ import annotations

from sofakafka.broker.handlers import RequestContext, handles
from sofakafka.broker.handlers import _authz as authz
from sofakafka.protocol.api import ApiKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.messages.create_delegation_token import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)
from sofakafka.protocol.messages.describe_delegation_token import (
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
)
from sofakafka.protocol.messages.expire_delegation_token import (
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
)
from sofakafka.protocol.messages.renew_delegation_token import (
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)
from sofakafka.security.principal import ANONYMOUS, USER_TYPE
from sofakafka.security.token_manager import DelegationTokenManager
from sofakafka.security.tokens import ERROR_TIMESTAMP, TokenChange, describable, parse_principal, principal

Described = DescribeDelegationTokenResponse.DescribedDelegationToken


def token_requests_allowed(ctx: RequestContext) -> bool:
    """Kafka 2.6's ``allowTokenRequests``: not over PLAINTEXT, not over SSL without a client certificate, and not
    from a login that used a token."""
    if ctx.token_authenticated or ctx.security_protocol == "PLAINTEXT":
        return False
    return not (ctx.security_protocol == "SSL" and ctx.principal == ANONYMOUS)


def create_error_response(request: CreateDelegationTokenRequest, version: int,
                          code: int) -> CreateDelegationTokenResponse:
    # The requester's principal goes with the error; a whole-request failure here does not know it.
    return CreateDelegationTokenResponse(error_code=code, issue_timestamp_ms=ERROR_TIMESTAMP,
                                         expiry_timestamp_ms=ERROR_TIMESTAMP, max_timestamp_ms=ERROR_TIMESTAMP)


def _create_refused(ctx: RequestContext, code: ErrorCode) -> CreateDelegationTokenResponse:
    kind, name = parse_principal(ctx.principal)
    return CreateDelegationTokenResponse(error_code=code, principal_type=kind, principal_name=name,
                                         issue_timestamp_ms=ERROR_TIMESTAMP, expiry_timestamp_ms=ERROR_TIMESTAMP,
                                         max_timestamp_ms=ERROR_TIMESTAMP, token_id="", hmac=b"")


@handles(ApiKey.CREATE_DELEGATION_TOKEN, 0, 2, error_response=create_error_response)
async def handle_create_delegation_token(ctx: RequestContext,
                                         request: CreateDelegationTokenRequest) -> CreateDelegationTokenResponse:
    if not token_requests_allowed(ctx):
        return _create_refused(ctx, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    renewers = [principal(r.principal_type, r.principal_name) for r in request.renewers]
    if any(r.principal_type != USER_TYPE for r in request.renewers):
        return _create_refused(ctx, ErrorCode.INVALID_PRINCIPAL_TYPE)
    tokens = ctx.broker.delegation_tokens
    if tokens is None:
        return _create_refused(ctx, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    owner = ctx.principal
    created = await ctx.broker.run_blocking(lambda: tokens.create(owner, renewers, request.max_lifetime_ms))
    kind, name = parse_principal(created.info.owner)
    return CreateDelegationTokenResponse(
        error_code=ErrorCode.NONE, principal_type=kind, principal_name=name,
        issue_timestamp_ms=created.info.issue_timestamp, expiry_timestamp_ms=created.info.expiry_timestamp,
        max_timestamp_ms=created.info.max_timestamp, token_id=created.info.token_id, hmac=created.hmac)


async def _renew_or_expire(ctx: RequestContext, mac: bytes, period_ms: int, renewing: bool) -> TokenChange:
    if not token_requests_allowed(ctx):
        return TokenChange(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP)
    tokens: DelegationTokenManager | None = ctx.broker.delegation_tokens
    if tokens is None:
        return TokenChange(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP)
    who = ctx.principal
    if renewing:
        return await ctx.broker.run_blocking(lambda: tokens.renew(who, mac, period_ms))
    return await ctx.broker.run_blocking(lambda: tokens.expire(who, mac, period_ms))


def renew_error_response(request: RenewDelegationTokenRequest, version: int, code: int) -> RenewDelegationTokenResponse:
    return RenewDelegationTokenResponse(error_code=code, expiry_timestamp_ms=ERROR_TIMESTAMP)


@handles(ApiKey.RENEW_DELEGATION_TOKEN, 0, 2, error_response=renew_error_response)
async def handle_renew_delegation_token(ctx: RequestContext,
                                        request: RenewDelegationTokenRequest) -> RenewDelegationTokenResponse:
    change = await _renew_or_expire(ctx, request.hmac, request.renew_period_ms, renewing=True)
    return RenewDelegationTokenResponse(error_code=change.error, expiry_timestamp_ms=change.timestamp)


def expire_error_response(request: ExpireDelegationTokenRequest, version: int,
                          code: int) -> ExpireDelegationTokenResponse:
    return ExpireDelegationTokenResponse(error_code=code, expiry_timestamp_ms=ERROR_TIMESTAMP)


@handles(ApiKey.EXPIRE_DELEGATION_TOKEN, 0, 2, error_response=expire_error_response)
async def handle_expire_delegation_token(ctx: RequestContext,
                                         request: ExpireDelegationTokenRequest) -> ExpireDelegationTokenResponse:
    change = await _renew_or_expire(ctx, request.hmac, request.expiry_time_period_ms, renewing=False)
    return ExpireDelegationTokenResponse(error_code=change.error, expiry_timestamp_ms=change.timestamp)


def describe_error_response(request: DescribeDelegationTokenRequest, version: int,
                            code: int) -> DescribeDelegationTokenResponse:
    return DescribeDelegationTokenResponse(error_code=code, tokens=[])


@handles(ApiKey.DESCRIBE_DELEGATION_TOKEN, 0, 2, error_response=describe_error_response)
async def handle_describe_delegation_token(ctx: RequestContext,
                                           request: DescribeDelegationTokenRequest) -> DescribeDelegationTokenResponse:
    if not token_requests_allowed(ctx):
        return DescribeDelegationTokenResponse(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, tokens=[])
    tokens = ctx.broker.delegation_tokens
    if tokens is None:
        return DescribeDelegationTokenResponse(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, tokens=[])
    if request.owners is not None and not request.owners:
        return DescribeDelegationTokenResponse(error_code=ErrorCode.NONE, tokens=[])
    owners = None if request.owners is None else [principal(o.principal_type, o.principal_name)
                                                  for o in request.owners]

    def may_describe(token_id: str) -> bool:
        return authz.authorize(ctx, authz.AclOperation.DESCRIBE, authz.ResourceType.DELEGATION_TOKEN, token_id)

    out: list[Described] = []
    for cached in tokens.tokens():
        info = cached.info
        if not describable(info, ctx.principal, owners, may_describe):
            continue
        kind, name = parse_principal(info.owner)
        renewers = [Described.DescribedDelegationTokenRenewer(principal_type=t, principal_name=n)
                    for t, n in map(parse_principal, info.renewers)]
        out.append(Described(principal_type=kind, principal_name=name, issue_timestamp=info.issue_timestamp,
                             expiry_timestamp=info.expiry_timestamp, max_timestamp=info.max_timestamp,
                             token_id=info.token_id, hmac=cached.hmac, renewers=renewers))
    return DescribeDelegationTokenResponse(error_code=ErrorCode.NONE, tokens=out)
