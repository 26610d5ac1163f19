"""``python -m sofakafka.pipelines COMMAND``: generate, logs, orders, demo (each takes --help)."""

from __future__ import annotations

import sys

COMMANDS = {
    "generate": "produce access logs or orders to a topic at a chosen rate",
    "logs": "log analytics (batch over history, or a streaming query)",
    "orders": "stream analytics: orders by region per minute, exactly once through a checkpoint",
    "demo": "a broker, the generator and the orders job in one command, with a live table",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        print("usage: python -m sofakafka.pipelines {" + ",".join(COMMANDS) + "} [options]\n", file=sys.stderr)
        for name, what in COMMANDS.items():
            print(f"  {name:9} {what}", file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    command, rest = args[0], args[1:]
    if command == "generate":
        from sofakafka.pipelines import generator

        return generator.main(rest)
    if command == "logs":
        from sofakafka.pipelines import log_analytics

        return log_analytics.main(rest)
    if command == "orders":
        from sofakafka.pipelines import stream_analytics

        return stream_analytics.main(rest)
    from sofakafka.pipelines import demo

    return demo.main(rest)


if __name__ == "__main__":
    sys.exit(main())
