"""``sofakafka serve``: run a broker, as kafka-server-start.sh does.

``sofakafka serve [server.properties] [--override key=value ...]``: Kafka's keys, an override winning over
the file. A bad key or value stops start-up naming the key (exit 2), a start-up that fails for a clear cause
(a data dir locked by another broker, a port in use) says why without a traceback (exit 1); SIGTERM and
Ctrl-C shut the broker down cleanly (exit 0); a broker whose every log directory went offline (a full disk, an
I/O error) shuts down by itself, as Kafka halts, and exits 1. The broker itself is assembled in
sofakafka/broker/broker.py.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

VERB = "serve"
SUMMARY = "run a broker (kafka-server-start.sh)"

EXIT_CONFIG_ERROR = 2
EXIT_START_FAILED = 1


def build_parser() -> argparse.ArgumentParser:
    serve = argparse.ArgumentParser(
        prog=f"sofakafka {VERB}",
        description="Run a broker. With no file: PLAINTEXT://127.0.0.1:9092, a data directory under your home "
                    "directory (or the working directory), and replication factor 1 for the internal topics, as "
                    "Kafka's sample server.properties sets for a single broker.")
    serve.add_argument("properties", nargs="?", help="a server.properties file (Kafka's keys)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config key, winning over the file (repeatable)")
    serve.add_argument("--log-level", default="INFO",
                       choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="logging to stderr")
    return serve


def main(argv: Sequence[str]) -> int:
    parsed = build_parser().parse_args(list(argv))
    return serve_command(parsed.properties, parsed.override, parsed.log_level)


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

    from sofakafka.broker import gc_pauses
    from sofakafka.controller.store import StoreError
    from sofakafka.protocol.errors import KafkaError

    gc_pauses.install()

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
        assert broker.failed is not None
        await asyncio.wait([stop, broker.failed], return_when=asyncio.FIRST_COMPLETED)
    finally:
        await broker.shutdown()
    if broker.failed is not None and broker.failed.done():
        print(f"sofakafka: broker {broker.broker_id} stopped: {broker.failed.result()}", file=sys.stderr)
        return EXIT_START_FAILED
    return 0
