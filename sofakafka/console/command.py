"""``sofakafka console``: serve the web console for a cluster; ``sofakafka console hash-password`` makes a
line for its users file.

    sofakafka console --bootstrap-server HOST:PORT[,...] [--port 9000] [--host 127.0.0.1]
                      [--users-file FILE | --no-login] [--state-dir DIR] [--command-config FILE]

``--command-config`` takes Kafka's client properties (as Kafka's tools do). ``security.protocol`` other than
PLAINTEXT is refused with a message until the client speaks SASL/TLS (the security work); the keys it will
read then are ``security.protocol``, ``sasl.mechanism`` and ``sasl.jaas.config`` (or ``sasl.username`` /
``sasl.password``), so a console configured today keeps its file then.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
from pathlib import Path

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sofakafka console",
                                description="Serve the web console of a cluster: brokers, topics, consumer groups, "
                                            "message query and trace, backlog alarms.",
                                epilog="sofakafka console hash-password: print a users-file line for a new user.")
    p.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the cluster")
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
    p.add_argument("--command-config", type=Path, help="Kafka client properties (security.protocol, sasl.*)")
    p.add_argument("--request-timeout-ms", type=int, default=5000,
                   help="how long to wait for a broker before showing it as not answering (default 5000)")
    p.add_argument("--alarm-interval", type=float, default=30.0,
                   help="seconds between background checks of the backlog alarms (default 30)")
    p.add_argument("--metrics-token", help="a bearer token with which Prometheus reads /metrics without signing in "
                                           "(Authorization: Bearer TOKEN)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


def read_client_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ValueError(f"{path}:{number}: expected key=value")
        props[line[:sep].strip()] = line[sep + 1:].strip()
    return props


def client_options(props: dict[str, str]) -> dict[str, object]:
    """KafkaClient keyword arguments for Kafka's client properties (none are needed for PLAINTEXT)."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol != "PLAINTEXT":
        raise ValueError(f"security.protocol={protocol}: the sofakafka client does not speak SASL or TLS yet (it "
                         "comes with the brokers' security support); the console can only use PLAINTEXT for now")
    return {}


def hash_password_command(argv: list[str]) -> int:
    from sofakafka.console.auth import hash_password

    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: sofakafka console hash-password NAME  (reads the password from the terminal or stdin)",
              file=sys.stderr)
        return EXIT_USAGE
    name = argv[0]
    if ":" in name:
        print("sofakafka console: a user name cannot contain ':'", file=sys.stderr)
        return EXIT_USAGE
    password = getpass.getpass(f"password for {name}: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    if not password:
        print("sofakafka console: empty password", file=sys.stderr)
        return EXIT_USAGE
    print(f"{name}:{hash_password(password)}")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "hash-password":
        return hash_password_command(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from aiohttp import web

    from sofakafka.client import parse_bootstrap
    from sofakafka.console.app import Console, ConsoleSettings
    from sofakafka.console.auth import UsersFileError, generated_admin, load_users

    def fail(message: str) -> int:
        print(f"sofakafka console: {message}", file=sys.stderr)
        return EXIT_USAGE

    try:
        parse_bootstrap(args.bootstrap_server)
    except ValueError as exc:
        return fail(f"--bootstrap-server: {exc}")
    if not 0 <= args.port <= 65535:
        return fail(f"--port: {args.port} is not a port number")
    if args.request_timeout_ms <= 0:
        return fail("--request-timeout-ms: must be positive")
    if args.alarm_interval <= 0:
        return fail("--alarm-interval: must be positive")
    options: dict[str, object] = {}
    if args.command_config is not None:
        try:
            options = client_options(read_client_properties(args.command_config))
        except ValueError as exc:
            return fail(f"--command-config: {exc}")
    password = None
    users: dict[str, str] | None
    if args.no_login:
        users = None
    elif args.users_file is not None:
        try:
            users = load_users(args.users_file)
        except UsersFileError as exc:
            return fail(f"--users-file: {exc}")
    else:
        users, password = generated_admin()
    state_dir = args.state_dir if args.state_dir is not None else Path.home() / ".sofakafka" / "console"
    try:
        console = Console(ConsoleSettings(args.bootstrap_server, args.host, args.port, args.request_timeout_ms, users,
                                          state_dir, args.alarm_interval, client_options=options,
                                          metrics_token=args.metrics_token))
    except ValueError as exc:
        return fail(str(exc))
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"sofakafka console for {args.bootstrap_server} on http://{host}:{args.port}/", flush=True)
    if password is not None:
        print(f"sign in as admin with password {password} (choose your own users with --users-file; "
              "`sofakafka console hash-password NAME` makes a line of it)", flush=True)
    elif users is None:
        print("WARNING: --no-login: anyone who reaches this address sees and changes the cluster", flush=True)
    try:
        web.run_app(console.make_app(), host=args.host, port=args.port, print=None, access_log=None,
                    handle_signals=True)
    except OSError as exc:
        return fail(f"cannot serve on {host}:{args.port}: {exc.strerror or exc}")
    return 0
