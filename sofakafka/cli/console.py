"""``sofakafka console``: serve the web console of a cluster (sofakafka/console/)."""

from __future__ import annotations

from collections.abc import Sequence

VERB = "console"
SUMMARY = "serve the web console: brokers, topics, groups, message query and trace, backlog alarms"


def main(argv: Sequence[str]) -> int:
    from sofakafka.console.command import main as console_main

    return console_main(list(argv))
