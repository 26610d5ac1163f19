"""``sofakafka console``: serve the web console of a cluster (sofakafka/console/); ``sofakafka console
hash-password NAME`` prints a line for its users file.

    sofakafka console --bootstrap-server HOST:PORT[,...] [--port 9000] [--host 127.0.0.1]
                      [--users-file FILE | --no-login] [--state-dir DIR] [--command-config FILE]
                      [--metrics-token TOKEN]

The connection options are every tool's (cli/common.py): ``--command-config`` takes Kafka's client properties,
TLS and SASL included, so on a secured cluster the console signs in as the SASL user that file names and shows
what that user's ACLs allow (its own sign-in, ``--users-file``, is separate: who may use the web page). Bad
options and files are one line on stderr and exit code 2, before anything is served.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, err

VERB = "console"
SUMMARY = "serve the web console: brokers, topics, groups, message query and trace, backlog alarms"
DEFAULT_REQUEST_TIMEOUT_MS = 5000
"""Shorter than the tools' default: a page waits this long before it shows a broker as not answering."""


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Serve the web console of a cluster: brokers, topics, consumer groups, message "
                                 "query and trace, backlog alarms.")
    p.epilog = "sofakafka console hash-password NAME: print a users-file line for a new user."
    common.add_connection_options(p)
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9000, help="port to serve on (default 9000)")
    login = p.add_mutually_exclusive_group()
    login.add_argument("--users-file", type=Path,
                       help="users allowed to sign in, name:hash lines (see hash-password); without it a user "
                            "'admin' with a random password printed at start")
    login.add_argument("--no-login", action="store_true",
                       help="no sign-in at all: only for a console on loopback of a single-user machine")
    p.add_argument("--state-dir", type=Path, default=None,
                   help="where backlog alarm thresholds are kept (default ~/.sofakafka/console)")
    p.add_argument("--alarm-interval", type=float, default=30.0,
                   help="seconds between background checks of the backlog alarms (default 30)")
    p.add_argument("--metrics-token", help="a bearer token with which Prometheus reads /metrics without signing in "
                                           "(Authorization: Bearer TOKEN)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


def hash_password(argv: Sequence[str]) -> int:
    from sofakafka.console.auth import hash_password as make_hash

    if len(argv) != 1 or argv[0].startswith("-"):
        err("usage: sofakafka console hash-password NAME  (reads the password from the terminal or stdin)")
        return 2
    name = argv[0]
    if ":" in name:
        raise UsageError("a user name cannot contain ':'")
    password = getpass.getpass(f"password for {name}: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    if not password:
        raise UsageError("empty password")
    print(f"{name}:{make_hash(password)}")
    return 0


def run_console(args: argparse.Namespace) -> int:
    from aiohttp import web

    from sofakafka.console.app import Console, ConsoleSettings
    from sofakafka.console.auth import UsersFileError, generated_admin, load_users

    settings = common.client_settings(args, VERB, default_timeout_ms=DEFAULT_REQUEST_TIMEOUT_MS)
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port: {args.port} is not a port number")
    if args.alarm_interval <= 0:
        raise UsageError("--alarm-interval: must be positive")
    password = None
    users: dict[str, str] | None
    if args.no_login:
        users = None
    elif args.users_file is not None:
        try:
            users = load_users(args.users_file)
        except UsersFileError as exc:
            raise UsageError(f"--users-file: {exc}") from None
    else:
        users, password = generated_admin()
    state_dir = args.state_dir if args.state_dir is not None else Path.home() / ".sofakafka" / "console"
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        console = Console(ConsoleSettings(
            settings.bootstrap_servers, args.host, args.port, settings.request_timeout_ms, users, state_dir,
            args.alarm_interval, client_id=settings.client_id,
            client_options={"retry_backoff_ms": settings.retry_backoff_ms, "security": settings.security}, metrics_token=args.metrics_token))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"sofakafka console for {settings.bootstrap_servers} on http://{host}:{args.port}/", flush=True)
    if password is not None:
        print(f"sign in as admin with password {password} (choose your own users with --users-file; "
              "`sofakafka console hash-password NAME` makes a line of it)", flush=True)
    elif users is None:
        print("WARNING: --no-login: anyone who reaches this address sees and changes the cluster", flush=True)
    try:
        web.run_app(console.make_app(), host=args.host, port=args.port, print=None, access_log=None,
                    handle_signals=True)
    except OSError as exc:
        raise UsageError(f"cannot serve on {host}:{args.port}: {exc.strerror or exc}") from None
    return 0


def main(argv: Sequence[str]) -> int:
    if argv and argv[0] == "hash-password":
        return common.run(VERB, lambda: hash_password(argv[1:]))
    return common.main(VERB, build_parser(), argv, run_console)
