"""``sofakafka router``: the LDC message router (docs/ldc.md).

Actions:

* ``run`` runs one router process until SIGTERM or Ctrl-C: rules from ``--rules FILE`` (TOML or JSON) or,
  without it, from the cluster (``sofakafka.router.rules``, read again every ``--reload-interval-s``: a
  change restarts the copying with the new rules); the model from ``--model FILE`` or the cluster. Several
  processes with the same ``--group`` share the rules. Exactly once by default (transactions);
  ``--at-least-once`` flushes the copies before committing instead.
* ``status`` prints each rule's lag and the router processes (members of ``--group``).
* ``load-rules FILE`` stores rules in the cluster after checking them against the stored model (the broker
  checks again); ``show-rules`` prints the stored rules.

On a secured cluster ``--command-config FILE`` (Kafka's client properties: ``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config``, PEM ``ssl.truststore.location``/``ssl.keystore.location``, or
librdkafka's names) serves both the requests the command makes itself and, translated to librdkafka's names
(:func:`librdkafka_security`), ``run``'s consumer and producer; ``--client-config`` settings come after it.

A rules file with a syntax error, or a rule naming a cell the model does not have, is refused before anything
runs or is stored, naming the place in the file.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from types import FrameType

from sofakafka.cli import common
from sofakafka.cli.common import UsageError
from sofakafka.ldc import LdcError, LdcModel, RoutingRules
from sofakafka.router.status import router_status
from sofakafka.router.store import read_rules, require_model, write_rules
from sofakafka.router.worker import DEFAULT_GROUP, Router, RouterConfig, stats_line
from sofakafka.security import SecurityConfigError
from sofakafka.security.client_config import client_security_from_properties

VERB = "router"
SUMMARY = "run the LDC message router, show its lag, store its rules"
ACTIONS = ("run", "status", "load-rules", "show-rules")
STATS_INTERVAL_S = 30.0


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "The LDC message router: copies records between cells' physical topics by rule.")
    common.add_actions(p, ACTIONS)
    p.add_argument("file", nargs="?", help="load-rules: the rules file")
    common.add_connection_options(p)
    common.add_output_options(p)
    p.add_argument("--rules", help="run, status: the rules file (default: the rules stored in the cluster)")
    p.add_argument("--model", help="the LDC model file (default: the model stored in the cluster)")
    p.add_argument("--group", default=DEFAULT_GROUP, help=f"the routers' consumer group (default {DEFAULT_GROUP})")
    p.add_argument("--at-least-once", action="store_true", help="run: no transactions (a kill may duplicate)")
    p.add_argument("--transactional-id", default="", help="run: the producer's transactional.id (default: unique)")
    p.add_argument("--batch-size", type=int, default=500, help="run: records per transaction at most")
    p.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                   help="run: a librdkafka setting for the router's consumer and producer (repeatable), e.g. "
                        "session.timeout.ms=10000 or transaction.timeout.ms=10000")
    p.add_argument("--reload-interval-s", type=float, default=10.0,
                   help="run with stored rules: how often to look for changed rules")
    p.add_argument("--dry-run", action="store_true", help="load-rules: check, store nothing")
    return p


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run)


def _load(args: argparse.Namespace) -> tuple[LdcModel, RoutingRules]:
    with common.client(args, VERB) as client:
        model = LdcModel.from_text(common.read_text_file(args.model), args.model) if args.model else require_model(client)
        rules = RoutingRules.from_text(common.read_text_file(args.rules), args.rules) if args.rules else read_rules(client)
    rules.check(model)
    return model, rules


def run(args: argparse.Namespace) -> int:
    action = common.chosen_action(args, ACTIONS)
    try:
        if action == "run":
            return _run_router(args)
        if action == "status":
            return _status(args)
        if action == "load-rules":
            return _load_rules(args)
        return _show_rules(args)
    except LdcError as exc:
        raise UsageError(str(exc)) from None


def _load_rules(args: argparse.Namespace) -> int:
    if not args.file:
        raise UsageError("load-rules needs the rules file: sofakafka router load-rules FILE --bootstrap-server ...")
    rules = RoutingRules.from_text(common.read_text_file(args.file), args.file)
    with common.client(args, VERB) as client:
        rules.check(require_model(client))
        write_rules(client, rules, validate_only=args.dry_run)
    print(f"{'Checked' if args.dry_run else 'Stored'} {len(rules.rules)} routing rule(s): "
          f"{', '.join(r.name for r in rules.rules) or 'none'}.")
    return 0


def _show_rules(args: argparse.Namespace) -> int:
    with common.client(args, VERB) as client:
        rules = read_rules(client)
    if args.json:
        print(json.dumps(rules.to_dict()["rules"]))
        return 0
    rows = [["RULE", "FROM", "TOPIC", "TO", "MATCH"]]
    rows += [[r.name, r.source_cell, r.topic + (f" -> {r.target_topic}" if r.target_topic else ""),
              ",".join(r.target_cells), r.match.describe()] for r in rules.rules]
    common.print_table(rows)
    return 0


def _status(args: argparse.Namespace) -> int:
    model, rules = _load(args)
    with common.client(args, VERB) as client:
        status = router_status(client, model, rules, args.group)
    rows = [["RULE", "SOURCE", "TARGETS", "PARTITIONS", "LAG"]]
    rows += [[r.name, r.source, ",".join(r.targets), str(r.partitions), "-" if r.lag is None else str(r.lag)]
             for r in status.rules]
    if args.json:
        common.print_table(rows, as_json=True)
        return 0
    print(f"Router group {status.group}: {status.state}, {len(status.members)} process(es)")
    for member_id, client_id, host in status.members:
        print(f"  {member_id} {client_id} {host}")
    common.print_table(rows)
    return 0


def router_client_config(args: argparse.Namespace) -> dict[str, str]:
    """librdkafka settings of ``run``'s consumer and producer: ``--command-config``'s TLS and SASL, then
    ``--client-config``."""
    out: dict[str, str] = {}
    if args.command_config:
        out.update(librdkafka_security(common.read_properties(args.command_config), args.command_config))
    out.update(common.key_values(args.client_config, "--client-config"))
    return out


# Java client name -> librdkafka name, for the TLS settings that are file paths or PEM text in both.
_SSL_NAMES = {
    "ssl.truststore.location": "ssl.ca.location", "ssl.ca.location": "ssl.ca.location",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.certificate.location": "ssl.certificate.location", "ssl.key.location": "ssl.key.location",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem", "ssl.keystore.key": "ssl.key.pem",
    "ssl.key.password": "ssl.key.password", "ssl.cipher.suites": "ssl.cipher.suites",
}


def librdkafka_security(props: Mapping[str, str], path: str) -> dict[str, str]:
    """The TLS and SASL settings of a client properties file in librdkafka's names. The file is first checked
    as the other tools check it (a setting that cannot be used names the file and the key); a PEM
    ``ssl.keystore.location`` (key and chain in one file, as our tools take it) is librdkafka's certificate
    and key location both, and an empty ``ssl.endpoint.identification.algorithm`` is librdkafka's ``none``."""
    try:
        security = client_security_from_properties(props)
    except SecurityConfigError as exc:
        raise UsageError(f"{path}: {exc}") from None
    out = {"security.protocol": security.protocol}
    if security.uses_sasl:
        assert security.sasl_mechanism and security.username is not None and security.password is not None
        out |= {"sasl.mechanisms": security.sasl_mechanism, "sasl.username": security.username,
                "sasl.password": security.password}
    if security.uses_ssl:
        out |= {_SSL_NAMES[k]: v for k, v in props.items() if k in _SSL_NAMES}
        keystore = props.get("ssl.keystore.location")
        if keystore:
            out.setdefault("ssl.certificate.location", keystore)
            out.setdefault("ssl.key.location", keystore)
        algorithm = props.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None:
            out["ssl.endpoint.identification.algorithm"] = algorithm.strip().lower() or "none"
    return out


class _Session:
    """One run of the copying with one set of rules; notices stored rules that changed (``changed``)."""

    def __init__(self, args: argparse.Namespace, model: LdcModel, rules: RoutingRules, log: logging.Logger) -> None:
        self.args, self.model, self.rules, self.log = args, model, rules, log
        self.router = Router(model, rules, RouterConfig(
            args.bootstrap_server, group_id=args.group, exactly_once=not args.at_least_once,
            transactional_id=args.transactional_id, batch_size=args.batch_size,
            client_config=router_client_config(args)))
        self.started = self.last_stats = self.last_reload = time.monotonic()
        self.changed: tuple[LdcModel, RoutingRules] | None = None

    def on_batch(self, router: Router) -> None:
        now = time.monotonic()
        if now - self.last_stats >= STATS_INTERVAL_S:
            self.last_stats = now
            self.log.info(stats_line(router, self.started))
        if self.args.rules or now - self.last_reload < self.args.reload_interval_s:
            return
        self.last_reload = now
        try:
            fresh = _load(self.args)
        except (LdcError, OSError) as exc:
            self.log.error("the stored rules or model cannot be used, keeping the running ones: %s", exc)
            return
        if fresh != (self.model, self.rules):
            self.log.info("the stored rules or model changed: restarting the copying with them")
            self.changed = fresh
            router.stop()

    def run(self) -> None:
        self.log.info("router started: %d rule(s) of instance %s, group %s, %s", len(self.rules.rules),
                      self.model.instance, self.args.group,
                      "at least once" if self.args.at_least_once else "exactly once")
        self.router.run(on_batch=self.on_batch)
        self.log.info(stats_line(self.router, self.started))


def _run_router(args: argparse.Namespace) -> int:
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server is required")
    try:
        import confluent_kafka  # noqa: F401 - the router's consumer and transactional producer
    except ImportError:
        raise UsageError("router run needs confluent-kafka: pip install 'sofakafka[ldc]'") from None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("sofakafka.router")
    stopping = False
    current: list[Router] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for r in current:
            r.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    model, rules = _load(args)
    while not stopping:
        session = _Session(args, model, rules, log)
        current[:] = [session.router]
        session.run()
        if session.changed is None:
            break
        model, rules = session.changed
    return 0
