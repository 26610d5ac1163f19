"""The `sofakafka` command. Verbs are added as the layers below them land."""

from __future__ import annotations

import argparse
import sys

from sofakafka import __version__


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    # Console verbs are dispatched before any parsing so their options never collide with `serve`'s.
    from sofakafka import cli_admin

    if args and args[0] in cli_admin.VERBS:
        return cli_admin.main(args)
    parser = argparse.ArgumentParser(prog="sofakafka", description="A Kafka-compatible broker in Python.")
    parser.add_argument("--version", action="version", version=f"sofakafka {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0
