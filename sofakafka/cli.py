"""The `sofakafka` command: `serve` runs a broker; the console verbs live in cli_admin."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from sofakafka import __version__

EXIT_CONFIG_ERROR = 2
EXIT_START_FAILED = 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    # Console verbs are dispatched before any parsing so their options never collide with `serve`'s.
    from sofakafka import cli_admin

    if args and args[0] in cli_admin.VERBS:
        return cli_admin.main(args)
    if args and args[0] == "reassign":
        from sofakafka import cli_reassign

        return cli_reassign.main(args[1:])
    if args and args[0] == "transactions":
        from sofakafka import cli_transactions

        return cli_transactions.main(args[1:])
    if args and args[0] == "cluster":
        from sofakafka import cluster_launcher

        return cluster_launcher.main(args[1:])
    parser = argparse.ArgumentParser(
        prog="sofakafka", description="A Kafka-compatible broker in Python.",
        epilog="console tools (like Kafka's bin/ scripts): " + ", ".join(f"sofakafka {v}" for v in cli_admin.VERBS)
        + ", sofakafka reassign, sofakafka transactions; each takes --help. A local cluster: sofakafka cluster up|down|status")
    parser.add_argument("--version", action="version", version=f"sofakafka {__version__}")
    verbs = parser.add_subparsers(dest="verb")
    serve = verbs.add_parser("serve", help="run a broker",
                             description="Run a broker. With no file: PLAINTEXT://127.0.0.1:9092, a data "
                                         "directory under your home directory (or the working directory), and "
                                         "replication factor 1 for the internal topics, as Kafka's sample "
                                         "server.properties sets for a single broker.")
    serve.add_argument("properties", nargs="?", help="a server.properties file (Kafka's keys)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config key, winning over the file (repeatable)")
    serve.add_argument("--log-level", default="INFO",
                       choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="logging to stderr")
    parsed = parser.parse_args(args)
    if parsed.verb == "serve":
        return serve_command(parsed.properties, parsed.override, parsed.log_level)
    parser.print_help()
    return 0


def serve_command(properties: str | None, overrides: list[str], log_level: str) -> int:
    logging.basicConfig(level=getattr(logging, log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from sofakafka.broker.config import ConfigError, KafkaConfig

    try:
        config = KafkaConfig.load(properties, overrides)
    except ConfigError as exc:
        print(f"sofakafka: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    import uvloop

    from sofakafka.controller.store import StoreError
    from sofakafka.protocol.errors import KafkaError

    try:
        return uvloop.run(_serve(config))
    except ConfigError as exc:
        print(f"sofakafka: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except (StoreError, KafkaError, OSError) as exc:
        # Start-up failures with a clear cause (data dir locked by another broker, unreadable log dir,
        # meta.properties of another cluster): the message says it all, a traceback would bury it.
        logging.getLogger("sofakafka").debug("start-up failed", exc_info=True)
        print(f"sofakafka: cannot start: {exc}", file=sys.stderr)
        return EXIT_START_FAILED
    except KeyboardInterrupt:
        return 130


async def _serve(config: object) -> int:
    from sofakafka.broker.broker import Broker
    from sofakafka.broker.config import KafkaConfig

    assert isinstance(config, KafkaConfig)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()

    def request_stop(signame: str) -> None:
        logging.getLogger("sofakafka").info("received %s, shutting down", signame)
        if not stop.done():
            stop.set_result(None)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, request_stop, sig.name)
    broker = Broker(config)
    try:
        await broker.startup()
        where = ", ".join(b.connection_string() for b in broker.listeners)
        print(f"sofakafka broker {broker.broker_id} started, listening on {where}; "
              f"data in {', '.join(config.log_dirs)}", flush=True)
        await stop
    finally:
        await broker.shutdown()
    return 0
