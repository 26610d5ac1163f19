"""What every console tool shares: its parser, the connection options, the client, option syntaxes, output, and
how a failure becomes an exit code.

A tool module builds its parser with :func:`verb_parser`, adds :func:`add_connection_options` (Kafka's
``--bootstrap-server``, ``--command-config`` and our ``--request-timeout-ms``) and, if it prints tables,
:func:`add_output_options` (``--json``), opens its client with :func:`client`, and runs its work through
:func:`run`, which turns the failures every tool shares into Kafka's exit codes and messages:

* 0 success; 1 a request failed (the broker's error is printed to stderr); 2 bad usage
  (``sofakafka <verb>: error: ...``, like argparse's own errors); 130 Ctrl-C.

``--command-config FILE`` is the client properties file of Kafka's tools (``--producer.config`` and
``--consumer.config`` for the console producer and consumer). The keys that change what the client does
here are :data:`CLIENT_KEYS` and the TLS/SASL settings of
:data:`~sofakafka.security.client_config.CLIENT_PROPERTIES` (``security.protocol`` PLAINTEXT, SSL,
SASL_PLAINTEXT or SASL_SSL; ``sasl.mechanism`` and ``sasl.jaas.config``; PEM ``ssl.truststore.location`` and
``ssl.keystore.location``; librdkafka's names too); a setting that cannot be used is refused naming the file and
the key. Any other key (a Java client setting with no meaning here) is named in a warning on stderr and
otherwise ignored, as Kafka's clients warn about configs they do not know.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sofakafka.client import ClientError, KafkaClient, parse_bootstrap
from sofakafka.client.security import ClientSecurity
from sofakafka.protocol.errors import KafkaError
from sofakafka.security import SecurityConfigError
from sofakafka.security.client_config import CLIENT_PROPERTIES, client_security_from_properties

DEFAULT_REQUEST_TIMEOUT_MS = 30_000
DEFAULT_RETRY_BACKOFF_MS = 100
CLIENT_KEYS = ("client.id", "request.timeout.ms", "retry.backoff.ms")


class UsageError(Exception):
    """A bad option or combination of options: reported like argparse's own errors, exit code 2."""


def err(text: str) -> None:
    print(text, file=sys.stderr)


# -- parsers ----------------------------------------------------------------------------------------------------


def verb_parser(verb: str, description: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=f"sofakafka {verb}", description=description)


def add_connection_options(p: argparse.ArgumentParser, config_flag: str = "--command-config") -> None:
    """``--bootstrap-server``, the client properties file (``config_flag``: Kafka's name for it in that tool)
    and ``--request-timeout-ms``."""
    p.add_argument("--bootstrap-server", help="host:port[,host:port...] of the brokers to connect to")
    p.add_argument(config_flag, dest="command_config", metavar="FILE",
                   help="client properties: client.id, request.timeout.ms, retry.backoff.ms, and TLS/SASL "
                        "(security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")
    p.add_argument("--request-timeout-ms", type=int, default=None,
                   help=f"deadline of every request (default {DEFAULT_REQUEST_TIMEOUT_MS}, or the file's "
                        "request.timeout.ms)")


def add_actions(p: argparse.ArgumentParser, actions: Sequence[str]) -> None:
    """The action, positional (``topics create``) or as Kafka's flag (``--create``); :func:`chosen_action`
    reads it back."""
    p.add_argument("action", nargs="?", choices=actions)
    for a in actions:
        p.add_argument(f"--{a}", dest=_action_flag(a), action="store_true", help=argparse.SUPPRESS)


def chosen_action(args: argparse.Namespace, actions: Sequence[str]) -> str:
    chosen = [a for a in actions if getattr(args, _action_flag(a))]
    if args.action:
        chosen.append(args.action)
    chosen = list(dict.fromkeys(chosen))
    if len(chosen) != 1:
        raise UsageError(f"exactly one of {', '.join(actions)} is required")
    return chosen[0]


def _action_flag(action: str) -> str:
    return f"flag_{action.replace('-', '_')}"


def add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print tables as JSON (a list of objects) instead")


# -- the client -------------------------------------------------------------------------------------------------


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file as Kafka's tools read one: ``key=value`` or ``key: value`` lines, ``#`` and ``!``
    comments, surrounding blanks dropped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise UsageError(f"{path}:{number}: expected key=value, got {line!r}")
        props[line[:cut].strip()] = line[cut + 1 :].strip()
    return props


def read_text_file(path: str) -> str:
    """A file a tool was pointed at (a model, rules, ...), as UTF-8; a usage error naming it when unreadable."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _int_property(props: Mapping[str, str], key: str, path: str) -> int | None:
    if key not in props:
        return None
    try:
        value = int(props[key])
    except ValueError:
        raise UsageError(f"{path}: {key}: not an integer: {props[key]!r}") from None
    if value < 0:
        raise UsageError(f"{path}: {key}: must not be negative, got {value}")
    return value


@dataclass(frozen=True)
class ClientSettings:
    """What a tool's client is made of: KafkaClient's arguments, read from the options and the properties file."""

    bootstrap_servers: str
    client_id: str
    request_timeout_ms: int
    retry_backoff_ms: int
    security: ClientSecurity | None = None

    def connect(self) -> KafkaClient:
        return KafkaClient(self.bootstrap_servers, client_id=self.client_id,
                           request_timeout_ms=self.request_timeout_ms, retry_backoff_ms=self.retry_backoff_ms,
                           security=self.security)


def client_settings(args: argparse.Namespace, verb: str, *,
                    default_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS) -> ClientSettings:
    """``--bootstrap-server`` (required, checked here), then ``--command-config``'s settings, then the command
    line's own ``--request-timeout-ms`` over the file's; TLS and SASL come from the file too."""
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    try:
        parse_bootstrap(args.bootstrap_server)
    except ValueError as e:
        raise UsageError(f"--bootstrap-server: {e}") from None
    path = getattr(args, "command_config", None)
    props = read_properties(path) if path else {}
    security = _security(props, path) if path else None
    if path:
        ignored = sorted(k for k in props if k not in CLIENT_KEYS and k not in CLIENT_PROPERTIES)
        if ignored:
            err(f"sofakafka {verb}: warning: ignoring {', '.join(ignored)} from {path} (no effect here)")
    timeout_ms = args.request_timeout_ms
    if timeout_ms is None:
        timeout_ms = _int_property(props, "request.timeout.ms", path or "")
    elif timeout_ms <= 0:
        raise UsageError(f"--request-timeout-ms: must be positive, got {timeout_ms}")
    backoff_ms = _int_property(props, "retry.backoff.ms", path or "")
    return ClientSettings(args.bootstrap_server, props.get("client.id") or f"sofakafka-{verb}",
                          default_timeout_ms if timeout_ms is None else timeout_ms,
                          DEFAULT_RETRY_BACKOFF_MS if backoff_ms is None else backoff_ms, security)


def client(args: argparse.Namespace, verb: str) -> KafkaClient:
    """The tool's client (see :func:`client_settings`)."""
    return client_settings(args, verb).connect()


def _security(props: Mapping[str, str], path: str) -> ClientSecurity | None:
    """TLS and SASL from the file (None: PLAINTEXT); a setting that cannot be used names the file and key."""
    try:
        security = client_security_from_properties(props)
    except SecurityConfigError as exc:
        raise UsageError(f"{path}: {exc}") from None
    return None if security.protocol == "PLAINTEXT" else security


# -- option syntaxes --------------------------------------------------------------------------------------------


def key_values(items: Sequence[str], what: str) -> dict[str, str]:
    """Repeated ``key=value`` options (``--config``, ``--property``)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what} must be key=value, got {item!r}")
        out[key.strip()] = value
    return out


def unescape(text: str) -> str:
    """Separators given on a command line arrive with backslash escapes (``\\t``) spelled out."""
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


def comma_list(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


# -- output -----------------------------------------------------------------------------------------------------


def print_json(value: object) -> None:
    """A tool's ``--json`` output when it is not one table (a document of its own shape)."""
    print(json.dumps(value, indent=2, ensure_ascii=False))


class Progress:
    """Progress of a long scan or reset on stderr, at most every ``interval_s``: one line rewritten in place on a
    terminal, one line per report otherwise (a log keeps them all). stdout stays the result alone."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self._last = float("-inf")
        self._tty = sys.stderr.isatty()

    def report(self, text: str, *, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._last < self.interval_s:
            return
        self._last = now
        if self._tty:
            print(f"\r{text}", end="\n" if final else "", file=sys.stderr, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)


def print_table(rows: Sequence[Sequence[str]], *, as_json: bool = False) -> None:
    """``rows[0]`` is the header. Columns are padded to their widest cell, the last one not at all (Kafka's
    tools print them so); with ``as_json`` a list of objects keyed by the header instead."""
    if as_json:
        header = rows[0]
        print(json.dumps([dict(zip(header, r, strict=True)) for r in rows[1:]]))
        return
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print(" ".join(f"{c:<{w}}" for c, w in zip(r[:-1], widths, strict=False)) + " " + r[-1])


# -- running ----------------------------------------------------------------------------------------------------


def main(verb: str, parser: argparse.ArgumentParser, argv: Sequence[str],
         work: Callable[[argparse.Namespace], int]) -> int:
    """A tool's ``main``: parse ``argv`` with the tool's parser, then :func:`run` its work on the options."""
    args = parser.parse_args(list(argv))
    return run(verb, lambda: work(args))


def run(verb: str, work: Callable[[], int]) -> int:
    """Run a tool's work, turning the failures every tool shares into its exit code and message."""
    try:
        return work()
    except UsageError as e:
        err(f"sofakafka {verb}: error: {e}")
        return 2
    except KafkaError as e:
        err(f"Error: {e.code.name}" + (f": {e.message}" if e.message else ""))
        return 1
    except ClientError as e:
        err(f"Error: {e}")
        return 1
    except BrokenPipeError:
        # `sofakafka consume ... | head` closes our stdout early; that is the reader's choice, not an error.
        return 0
    except KeyboardInterrupt:
        return 130
