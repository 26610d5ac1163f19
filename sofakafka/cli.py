"""The `sofakafka` command. Verbs are added as the layers below them land."""

from __future__ import annotations

import argparse

from sofakafka import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sofakafka", description="A Kafka-compatible broker in Python.")
    parser.add_argument("--version", action="version", version=f"sofakafka {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0
