"""``sofakafka leader-election``: kafka-leader-election.sh, preferred or unclean leader elections (ElectLeaders).

``--election-type PREFERRED|UNCLEAN`` and exactly one of ``--all-topic-partitions``, ``--topic T --partition P``
or ``--path-to-json-file`` (``{"partitions": [{"topic": "t", "partition": 0}]}``). The lines printed are Kafka's:
the partitions elected, those whose valid replica is already leader, and (on stderr, exit 1) those that failed.
``--json`` prints the three lists as one document.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from sofakafka.cli import common
from sofakafka.cli.common import UsageError, err
from sofakafka.protocol.errors import ErrorCode

VERB = "leader-election"
SUMMARY = "elect preferred or unclean partition leaders (kafka-leader-election.sh)"
ELECTION_TYPES = {"preferred": 0, "unclean": 1}


def build_parser() -> argparse.ArgumentParser:
    p = common.verb_parser(VERB, "Elect the preferred replica, or any live replica (unclean), as the leader of "
                                 "partitions, as kafka-leader-election.sh does.")
    common.add_connection_options(p)
    p.add_argument("--election-type", required=True, help="PREFERRED or UNCLEAN")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of the cluster")
    p.add_argument("--topic", help="the topic of one partition (with --partition)")
    p.add_argument("--partition", type=int, help="the partition of --topic")
    p.add_argument("--path-to-json-file", help='partitions as {"partitions": [{"topic": "t", "partition": 0}]}')
    common.add_output_options(p)
    return p


def _partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    chosen = [bool(args.all_topic_partitions), bool(args.topic), bool(args.path_to_json_file)]
    if sum(chosen) != 1:
        raise UsageError("exactly one of --all-topic-partitions, --topic, --path-to-json-file is required")
    if args.all_topic_partitions:
        return None
    if args.topic:
        if args.partition is None:
            raise UsageError("--partition is required with --topic")
        return [(args.topic, args.partition)]
    try:
        raw = json.loads(Path(args.path_to_json_file).read_text())
        return [(str(p["topic"]), int(p["partition"])) for p in raw["partitions"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--path-to-json-file: expected {{\"partitions\": [{{\"topic\": ..., \"partition\": "
                         f"...}}]}}: {exc}") from None


def run_leader_election(args: argparse.Namespace) -> int:
    election = ELECTION_TYPES.get((args.election_type or "").lower())
    if election is None:
        raise UsageError("--election-type must be PREFERRED or UNCLEAN")
    partitions = _partitions(args)
    with common.client(args, VERB) as client:
        results = client.elect_leaders(partitions, election_type=election)
    done = sorted(tp for tp, r in results.items() if r.error == ErrorCode.NONE)
    not_needed = sorted(tp for tp, r in results.items() if r.error == ErrorCode.ELECTION_NOT_NEEDED)
    failed = {tp: r for tp, r in sorted(results.items())
              if r.error not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)}
    kind = "PREFERRED" if election == 0 else "UNCLEAN"
    if args.json:
        common.print_json({"electionType": kind, "elected": [f"{t}-{p}" for t, p in done],
                           "notNeeded": [f"{t}-{p}" for t, p in not_needed],
                           "failed": {f"{t}-{p}": r.error_message or r.error.name for (t, p), r in failed.items()}})
        return 1 if failed else 0
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions "
              + ", ".join(f"{t}-{p}" for t, p in done))
    if not_needed:
        print("Valid replica already elected for partitions " + ", ".join(f"{t}-{p}" for t, p in not_needed))
    if failed:
        err(f"Error completing leader election ({kind}) for partitions: "
            + ", ".join(f"{t}-{p}: {r.error_message or r.error.name}" for (t, p), r in failed.items()))
    return 1 if failed else 0


def main(argv: Sequence[str]) -> int:
    return common.main(VERB, build_parser(), argv, run_leader_election)
