"""``sofakafka tokens``: kafka-delegation-tokens.sh over the wire protocol (Create/Renew/Expire/DescribeDelegationToken).

``tokens create|renew|expire|describe`` (or Kafka's ``--create``, ``--renew``, ``--expire``, ``--describe``) with
the Kafka tool's options, required where it requires them:

* ``create --max-life-time-period MS [--renewer-principal User:bob ...]`` (-1: the broker's
  ``delegation.token.max.lifetime.ms``); prints the token, its id and its HMAC, the secret a client logs in
  with (SCRAM: user name the id, password the HMAC, ``tokenauth=true``);
* ``renew --hmac HMAC --renew-time-period MS`` (-1: the broker's ``delegation.token.expiry.time.ms``);
* ``expire --hmac HMAC --expiry-time-period MS`` (-1: at once);
* ``describe [--owner-principal User:alice ...]``: the tokens the login owns or renews, and those it may
  DESCRIBE; with owners, only the tokens they own or renew.

Token requests need a SASL login that is not itself a token, so ``--command-config`` names the login
(``security.protocol=SASL_PLAINTEXT`` or ``SASL_SSL``, ``sasl.mechanism``, ``sasl.jaas.config``); over anything
else the broker answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED and this tool says why. Dates print as Kafka's tool
prints them (local time, ``yyyy-MM-ddTHH:mm``); ``--json`` prints the tokens with their times in epoch ms.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime
from collections.abc import Sequence

from sofakafka.cli import common
from sofakafka.cli.common import UsageError
from sofakafka.client import DelegationToken, KafkaClient
from sofakafka.protocol.errors import ErrorCode, KafkaError

VERB = "tokens"
SUMMARY = "create, renew, expire or describe delegation tokens (kafka-delegation-tokens.sh)"
ACTIONS = ("create", "renew", "expire", "describe")

# The options each action must have and may not have, as kafka-delegation-tokens.sh checks them.
_REQUIRED = {"create": ("max_life_time_period",), "renew": ("hmac", "renew_time_period"),
             "expire": ("hmac", "expiry_time_period"), "describe": ()}
_REFUSED = {"create": ("hmac", "renew_time_period", "expiry_time_period", "owner_principal"),
            "renew": ("renewer_principal", "max_life_time_period", "expiry_time_period", "owner_principal"),
            "expire": ("renewer_principal", "max_life_time_period", "renew_time_period", "owner_principal"),
            "describe": ("renewer_principal", "max_life_time_period", "hmac", "renew_time_period",
                         "expiry_time_period")}
_NOT_ALLOWED_HINT = ("token requests need a SASL login that is not itself a delegation token: give --command-config "
                     "with security.protocol=SASL_PLAINTEXT or SASL_SSL, sasl.mechanism and sasl.jaas.config")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_options(args: argparse.Namespace, action: str) -> None:
    for dest in _REQUIRED[action]:
        if getattr(args, dest) is None:
            raise UsageError(f"{action} needs {_flag(dest)}")
    for dest in _REFUSED[action]:
        if getattr(args, dest) is not None:
            raise UsageError(f"{_flag(dest)} cannot be used with {action}")
    if args.hmac is not None:
        _hmac(args.hmac)
    for dest in ("renewer_principal", "owner_principal"):
        for p in getattr(args, dest) or []:
            kind, sep, _ = p.partition(":")
            if not sep or not kind.strip():
                raise UsageError(f"{_flag(dest)} must be principalType:name, e.g. User:alice, got {p!r}")


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise UsageError(f"--hmac must be the token's HMAC in base64, got {text!r}") from None


def _date(ms: int) -> str:
    try:
        return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%dT%H:%M")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _token_json(t: DelegationToken) -> dict[str, object]:
    return {"token_id": t.token_id, "hmac": base64.b64encode(t.hmac).decode(), "owner": t.owner,
            "renewers": list(t.renewers), "issue_timestamp": t.issue_timestamp,
            "expiry_timestamp": t.expiry_timestamp, "max_timestamp": t.max_timestamp}


def print_tokens(tokens: Sequence[DelegationToken]) -> None:
    rows = [["TOKENID", "HMAC", "OWNER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"]]
    rows += [[t.token_id, base64.b64encode(t.hmac).decode(), t.owner, "[" + ", ".join(t.renewers) + "]",
              _date(t.issue_timestamp), _date(t.expiry_timestamp), _date(t.max_timestamp)] for t in tokens]
    common.print_table(rows)


def _act(client: KafkaClient, args: argparse.Namespace, action: str) -> int:
    if action == "create":
        token = client.create_delegation_token(args.renewer_principal or [], args.max_life_time_period)
        if args.json:
            common.print_json(_token_json(token))
        else:
            print(f"Created delegation token with tokenId : {token.token_id}")
            print_tokens([token])
        return 0
    if action in ("renew", "expire"):
        mac = _hmac(args.hmac)
        expiry = (client.renew_delegation_token(mac, args.renew_time_period) if action == "renew"
                  else client.expire_delegation_token(mac, args.expiry_time_period))
        if args.json:
            common.print_json({"expiry_timestamp": expiry})
        else:
            print(f"Completed {action} operation. New expiry date : {_date(expiry)}")
        return 0
    tokens = client.describe_delegation_tokens(args.owner_principal)
    if args.json:
        common.print_json([_token_json(t) for t in tokens])
    else:
        print(f"Total number of tokens : {len(tokens)}")
        if tokens:
            print_tokens(tokens)
    return 0


def run_tokens(args: argparse.Namespace) -> int:
    action = common.chosen_action(args, ACTIONS)
    check_options(args, action)
    with common.client(args, VERB) as client:
        try:
            return _act(client, args, action)
        except KafkaError as exc:
            if exc.code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED and not exc.message:
                raise KafkaError(exc.code, _NOT_ALLOWED_HINT) from None
            raise


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Create, renew, expire or describe delegation tokens "
                                 "(kafka-delegation-tokens.sh).")
    common.add_actions(p, ACTIONS)
    common.add_connection_options(p)
    common.add_output_options(p)
    p.add_argument("--max-life-time-period", type=int, metavar="MS",
                   help="create: the token's max lifetime in ms; -1: the broker's delegation.token.max.lifetime.ms")
    p.add_argument("--renewer-principal", action="append", metavar="TYPE:NAME",
                   help="create: a principal that may renew or expire the token too (repeatable)")
    p.add_argument("--hmac", help="renew, expire: the token's HMAC (base64)")
    p.add_argument("--renew-time-period", type=int, metavar="MS",
                   help="renew: how long from now the token lives; -1: the broker's delegation.token.expiry.time.ms")
    p.add_argument("--expiry-time-period", type=int, metavar="MS",
                   help="expire: how long from now the token lives; -1: it ends at once")
    p.add_argument("--owner-principal", action="append", metavar="TYPE:NAME",
                   help="describe: only tokens this principal owns or renews (repeatable)")
    return p


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_tokens)
