"""``sofakafka quotas``: client quotas, as ``kafka-configs.sh --entity-type users/clients`` manages them (KIP-546).

``quotas describe [--user U | --user-default] [--client-id C | --client-default]`` prints the stored quotas of
the entities the options name (every entity without options), one kafka-configs line each
(``Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576.0``), or a table
with ``--json``. ``quotas alter --user U [--client-id C] --add-config producer_byte_rate=1048576,request_percentage=50
--delete-config consumer_byte_rate`` sets and removes keys of one entity through AlterClientQuotas; the broker
stores them as Kafka does (``/config/users/...``, ``/config/clients/...``) and every broker enforces them at once.
``--user-default`` / ``--client-default`` name the default entities (``<default>``).

``sofakafka configs --entity-type users|clients`` with quota keys lands in :func:`configs_quotas` here, as
kafka-configs 2.6 sends its quota changes through AlterClientQuotas.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from decimal import Decimal

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, err
from sofakafka.client import KafkaClient
from sofakafka.client.client import QuotaEntityKey
from sofakafka.protocol.errors import ErrorCode
from sofakafka.security.quotas import (
    CLIENT_ID,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    QUOTA_KEYS,
    USER,
    QuotaEntity,
)

VERB = "quotas"
SUMMARY = "describe or alter client quotas of users and client ids (kafka-configs.sh --entity-type users/clients)"
ACTIONS = ("describe", "alter")

# One side of an entity: absent, the default (None) or a name; "any" (describe only) means every name.
_ABSENT = ...
_ANY = "\0any"
Side = str | None


def java_double(value: float) -> str:
    """A double as Java's Double.toString prints it (kafka-configs' output): ``1024.0``, ``1.0E7``."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(text) - 1 + int(exponent)}"


def _entity_text(entity: QuotaEntityKey) -> str:
    e = QuotaEntity.of(**{("user" if t == USER else "client_id"): n for t, n in entity})
    return e.describe()


def _components(user: Side | object, client_id: Side | object) -> list[tuple[str, int, str | None]]:
    out: list[tuple[str, int, str | None]] = []
    for kind, side in ((USER, user), (CLIENT_ID, client_id)):
        if side is _ABSENT:
            continue
        if side is None:
            out.append((kind, MATCH_DEFAULT, None))
        elif side == _ANY:
            out.append((kind, MATCH_SPECIFIED, None))
        else:
            out.append((kind, MATCH_EXACT, str(side)))
    return out


def describe_lines(client: KafkaClient, user: Side | object, client_id: Side | object) -> list[str]:
    """kafka-configs' describe lines for the stored quotas of the entities ``user``/``client_id`` name."""
    components = _components(user, client_id)
    found = client.describe_client_quotas(components, strict=bool(components))
    return [f"Quota configs for {_entity_text(entity)} are "
            + ",".join(f"{k}={java_double(v)}" for k, v in sorted(values.items())) for entity, values in found]


def describe(client: KafkaClient, user: Side | object, client_id: Side | object, *, as_json: bool) -> int:
    if as_json:
        found = client.describe_client_quotas(_components(user, client_id), strict=user is not _ABSENT
                                              or client_id is not _ABSENT)
        print(json.dumps([{"entity": {t: n for t, n in entity}, "quotas": values} for entity, values in found],
                         indent=2))
        return 0
    for line in describe_lines(client, user, client_id):
        print(line)
    return 0


def parse_changes(add: Sequence[str], delete: Sequence[str]) -> list[tuple[str, float | None]]:
    """kafka-configs' ``--add-config k=v`` items and ``--delete-config`` keys as (key, value or None)."""
    changes: list[tuple[str, float | None]] = []
    for item in add:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise UsageError(f"--add-config entries must be key=value, got {item!r}")
        if key not in QUOTA_KEYS:
            raise UsageError(f"{key} is not a client quota; the keys are {', '.join(QUOTA_KEYS)}")
        try:
            changes.append((key, float(value.strip())))
        except ValueError:
            raise UsageError(f"Cannot parse quota configuration value for {key}: {value.strip()!r}") from None
    for key in delete:
        if key not in QUOTA_KEYS:
            raise UsageError(f"{key} is not a client quota; the keys are {', '.join(QUOTA_KEYS)}")
        changes.append((key, None))
    if not changes:
        raise UsageError("--alter needs --add-config or --delete-config")
    return changes


def alter(client: KafkaClient, user: Side | object, client_id: Side | object,
          changes: list[tuple[str, float | None]], *, validate_only: bool = False) -> int:
    if user is _ABSENT and client_id is _ABSENT:
        raise UsageError("alter needs --user/--user-default and/or --client-id/--client-default")
    if user == _ANY or client_id == _ANY:
        raise UsageError("alter needs entity names (or the defaults)")
    entity: QuotaEntityKey = tuple((kind, side) for kind, side in ((USER, user), (CLIENT_ID, client_id))  # type: ignore[misc]
                                   if side is not _ABSENT)
    (result,) = client.alter_client_quotas([(entity, changes)], validate_only=validate_only)
    if result.error != ErrorCode.NONE:
        err(f"Error while executing config command with args: {result.error.name}: "
            f"{result.error_message or result.error.name}")
        return 1
    print(f"Completed updating config for {_entity_text(entity)}.")
    return 0


def _sides(args: argparse.Namespace) -> tuple[Side | object, Side | object]:
    user: Side | object = None if args.user_default else (args.user if args.user is not None else _ABSENT)
    client_id: Side | object = (None if args.client_default else
                                (args.client_id if args.client_id is not None else _ABSENT))
    return user, client_id


def run_quotas(args: argparse.Namespace) -> int:
    action = common.chosen_action(args, ACTIONS)
    if args.user is not None and args.user_default:
        raise UsageError("--user and --user-default exclude each other")
    if args.client_id is not None and args.client_default:
        raise UsageError("--client-id and --client-default exclude each other")
    user, client_id = _sides(args)
    if action == "alter":
        changes = parse_changes(common.comma_list(",".join(args.add_config or [])),
                                common.comma_list(",".join(args.delete_config or [])))
        with common.client(args, VERB) as client:
            return alter(client, user, client_id, changes, validate_only=args.validate_only)
    with common.client(args, VERB) as client:
        return describe(client, user, client_id, as_json=args.json)


def _config_sides(types: Sequence[str], names: Sequence[str | None]) -> dict[str, Side | object]:
    sides: dict[str, Side | object] = {USER: _ABSENT, CLIENT_ID: _ABSENT}
    for i, kind in enumerate(types):
        key = USER if kind == "users" else CLIENT_ID
        sides[key] = names[i] if i < len(names) else _ANY
    return sides


def configs_describe_lines(client: KafkaClient, types: Sequence[str], names: Sequence[str | None]) -> list[str]:
    """``sofakafka configs --describe --entity-type users [--entity-type clients]``'s quota lines: ``names`` line
    up with ``types`` (None: ``--entity-default``); a type without a name stands for every name of it."""
    sides = _config_sides(types, names)
    return describe_lines(client, sides[USER], sides[CLIENT_ID])


def configs_quotas(client: KafkaClient, action: str, types: Sequence[str], names: Sequence[str | None],
                   add: Sequence[str], delete: Sequence[str]) -> int:
    """``sofakafka configs --entity-type users|clients`` with quota keys (see :func:`configs_describe_lines`)."""
    if action == "describe":
        for line in configs_describe_lines(client, types, names):
            print(line)
        return 0
    sides = _config_sides(types, names)
    return alter(client, sides[USER], sides[CLIENT_ID], parse_changes(add, delete))


def build_parser() -> argparse.ArgumentParser:
    q = common.verb_parser(VERB, "Describe or alter client quotas (kafka-configs.sh --entity-type users/clients).")
    common.add_actions(q, ACTIONS)
    common.add_connection_options(q)
    common.add_output_options(q)
    q.add_argument("--user", help="the user principal's name (alice for User:alice)")
    q.add_argument("--user-default", action="store_true", help="the default user entity")
    q.add_argument("--client-id", help="the client id")
    q.add_argument("--client-default", action="store_true", help="the default client-id entity")
    q.add_argument("--add-config", action="append",
                   help=f"k1=v1,k2=v2 with keys {', '.join(QUOTA_KEYS)} (alter)")
    q.add_argument("--delete-config", action="append", help="k1,k2 (alter)")
    q.add_argument("--validate-only", action="store_true", help="check the change on the broker, store nothing")
    return q


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_quotas)
