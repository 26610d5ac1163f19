"""``sofakafka users``: SCRAM users, as ``kafka-configs.sh --entity-type users`` manages them, over the protocol.

``users add NAME --password P [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N]`` derives the credential
here (scramp: salt, stored key, server key; the password itself never leaves this process) and stores it through
IncrementalAlterConfigs on sofakafka's user config resource (sofakafka/broker/handlers/_scram_users.py: Kafka 2.6
has no SCRAM admin API, its kafka-configs writes ZooKeeper directly). ``users delete NAME [--mechanism M]``
removes one mechanism's credential, or every one the user has; ``users list [NAME]`` prints each user's
mechanisms and iteration counts in kafka-configs' words.

``sofakafka configs --entity-type users`` takes kafka-configs.sh's own SCRAM syntax
(``--add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'``, ``--delete-config SCRAM-SHA-256``,
``--describe``) and lands in :func:`configs_users` here.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, err
from sofakafka.client import AlterConfigOp, ConfigResourceResult, ConfigResourceType, ItemResult, KafkaClient
from sofakafka.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredentialError, make_credential

VERB = "users"
SUMMARY = "add, delete or list SCRAM users (kafka-configs.sh --entity-type users)"
ACTIONS = ("add", "delete", "list")

ConfigOps = list[tuple[str, int, str | None]]


def _credential(mechanism: str, password: str, iterations: int) -> str:
    """The credential in Kafka's stored form, derived here."""
    try:
        return make_credential(mechanism, password, iterations=iterations).to_kafka_string()
    except ScramCredentialError as exc:
        raise UsageError(f"{mechanism}: {exc}") from None


def _alter(client: KafkaClient, name: str, ops: ConfigOps) -> int:
    _raise_first(client.incremental_alter_configs({(ConfigResourceType.USER, name): ops}))
    print(f"Completed updating config for user {name}.")
    return 0


def describe_users(client: KafkaClient, name: str | None) -> list[ConfigResourceResult]:
    """Every user (name None) or one; each result's entries are ``mechanism=iterations=N``."""
    results = client.describe_configs([(ConfigResourceType.USER, name or "", None)])
    _raise_first(results)
    return results


def print_users(results: Sequence[ConfigResourceResult]) -> None:
    for r in results:
        creds = ",".join(f"{e.name}={e.value}" for e in r.entries)
        print(f"SCRAM credential configs for user-principal '{r.resource_name}' are {creds}")


def _raise_first(results: Sequence[ConfigResourceResult | ItemResult]) -> None:
    for r in results:
        r.raise_for_error()


def run_users(args: argparse.Namespace) -> int:
    action = args.action
    if action != "list" and not args.name:
        raise UsageError(f"users {action} needs a user NAME")
    with common.client(args, VERB) as client:
        if action == "add":
            if args.password is None:
                raise UsageError("users add needs --password")
            mechanism = args.mechanism or "SCRAM-SHA-256"
            return _alter(client, args.name, [(mechanism, AlterConfigOp.SET,
                                               _credential(mechanism, args.password, args.iterations))])
        if action == "delete":
            mechanisms = ([args.mechanism] if args.mechanism else
                          [e.name for r in describe_users(client, args.name) for e in r.entries])
            if not mechanisms:
                err(f"Error: user {args.name} has no SCRAM credentials")
                return 1
            return _alter(client, args.name, [(m, AlterConfigOp.DELETE, None) for m in mechanisms])
        print_users(describe_users(client, args.name))
        return 0


def configs_users(client: KafkaClient, action: str, name: str | None, add: Sequence[str],
                  delete: Sequence[str]) -> int:
    """``sofakafka configs --entity-type users``: ``add`` holds kafka-configs' split ``--add-config`` items
    (``SCRAM-SHA-256=iterations=8192,password=...``, the brackets already removed)."""
    if action == "describe":
        print_users(describe_users(client, name))
        return 0
    if not name:
        raise UsageError("--alter of users needs --entity-name")
    ops: ConfigOps = []
    for item in add:
        mechanism, sep, value = item.partition("=")
        mechanism = mechanism.strip()
        if not sep or mechanism not in MECHANISMS:
            raise UsageError(f"users take {' or '.join(MECHANISMS)}=[iterations=N,password=P], got {item!r}")
        fields = dict(part.partition("=")[::2] for part in value.split(","))
        if "password" not in fields:
            raise UsageError(f"{mechanism} needs password=...")
        try:
            iterations = int(fields.get("iterations", MIN_ITERATIONS))
        except ValueError:
            raise UsageError(f"{mechanism}: iterations must be a number, got {fields['iterations']!r}") from None
        ops.append((mechanism, AlterConfigOp.SET, _credential(mechanism, fields["password"], iterations)))
    ops += [(key, AlterConfigOp.DELETE, None) for key in delete]
    if not ops:
        raise UsageError("--alter needs --add-config or --delete-config")
    return _alter(client, name, ops)


def build_parser() -> argparse.ArgumentParser:
    u = common.verb_parser(VERB, "Add, delete or list SCRAM users (kafka-configs.sh --entity-type users).")
    u.add_argument("action", choices=ACTIONS)
    u.add_argument("name", nargs="?", help="the user name")
    common.add_connection_options(u)
    u.add_argument("--password", help="the user's password (users add)")
    u.add_argument("--mechanism", choices=MECHANISMS, help="SCRAM mechanism (add: SCRAM-SHA-256 by default; "
                                                           "delete: every mechanism the user has by default)")
    u.add_argument("--iterations", type=int, default=MIN_ITERATIONS,
                   help=f"PBKDF2 iterations (at least {MIN_ITERATIONS})")
    return u


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_users)
