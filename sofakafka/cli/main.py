"""The `sofakafka` command: the first argument names a verb, and the rest goes to that verb's module untouched.

Each verb is one module of this package, named after the Kafka script it stands for (kafka-topics.sh is
topics.py, kafka-console-producer.sh console_producer.py, ...), exposing ``VERB``, a one-line ``SUMMARY`` and
``main(argv) -> int``; what the tools share (connection options, the client, output, exit codes) is in
common.py. Adding a verb is adding its module and one entry to :data:`TOOLS`. Nothing here parses a verb's
options, so no verb's options can collide with another's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Protocol

from sofakafka import __version__
from sofakafka.cli import (
    acls,
    cluster,
    configs,
    console,
    console_consumer,
    console_producer,
    consumer_groups,
    delegation_tokens,
    dump_log,
    filters,
    ldc,
    leader_election,
    log_dirs,
    query,
    quotas,
    reassign_partitions,
    router,
    serve,
    topics,
    transactions,
    users,
)


class Tool(Protocol):
    """What a verb's module provides (a module satisfies this Protocol by its module-level names)."""

    VERB: str
    SUMMARY: str

    def main(self, argv: Sequence[str]) -> int: ...


# In the order `sofakafka --help` lists them.
TOOLS: tuple[Tool, ...] = (
    serve,
    topics,
    configs,
    console_producer,
    console_consumer,
    consumer_groups,
    reassign_partitions,
    leader_election,
    log_dirs,
    dump_log,
    query,
    console,
    transactions,
    users,
    quotas,
    acls,
    delegation_tokens,
    cluster,
    ldc,
    filters,
    router,
)
VERBS: dict[str, Tool] = {tool.VERB: tool for tool in TOOLS}


class _VerbListFormatter(argparse.HelpFormatter):
    """argparse measures the verbs at their parent's indentation, not their own, so a verb longer than the rest
    (``transactions``) had its summary wrapped onto the next line; this measures each where it is printed."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if action.help is not argparse.SUPPRESS:
            for sub in self._iter_indented_subactions(action):
                self._action_max_length = max(self._action_max_length,
                                              len(self._format_action_invocation(sub)) + self._current_indent)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sofakafka", description="A Kafka-compatible broker in Python, and Kafka's console tools.",
        formatter_class=_VerbListFormatter,
        epilog="Each verb takes --help. The console tools speak the Kafka protocol to --bootstrap-server.")
    parser.add_argument("--version", action="version", version=f"sofakafka {__version__}")
    verbs = parser.add_subparsers(dest="verb", title="verbs", metavar="VERB")
    for tool in TOOLS:
        verbs.add_parser(tool.VERB, help=tool.SUMMARY, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in VERBS:
        return VERBS[args[0]].main(args[1:])
    build_parser().parse_args(args)  # --help, --version, or an unknown verb (exit 2)
    build_parser().print_help()
    return 0
