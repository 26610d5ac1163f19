"""Re-capture every client's frames and rewrite tests/fixtures/frames/<client>.jsonl.

Each session gets a fresh in-memory Tansu broker behind tools/capture_frames.py; raw captures go to
--work-dir, then `trim` keeps a modest, varied subset per (client session, api_key, api_version,
direction) for the fixtures. Run it through tools/capture/run_all.sh, which installs the clients."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.capture.harness import REPO, broker_behind_proxy, create_topic_out_of_band
from tools.capture_frames import RELEASES

FIXTURES = REPO / "tests" / "fixtures" / "frames"
MAX_PER_KEY = 4


@dataclass(frozen=True)
class Session:
    client: str  # fixture file name
    label: str  # the `client` field of its frames
    cap_release: str
    command: list[str]
    kcat_topic: str | None = None  # kcat has no admin API: the topic is made out of band first


def sessions(python: str) -> list[Session]:
    here = REPO / "tools" / "capture"
    found: list[Session] = []
    kafka_python_versions = [
        ("0.10.0", "0.10.0"), ("0.10.1", "0.10.1"), ("0.10.2", "0.10.2"), ("0.11.0", "0.11.0"),
        ("1.0.0", "1.0"), ("1.1.0", "1.1"), ("2.0.0", "2.0"), ("2.1.0", "2.1"), ("2.4.0", "2.4"),
        ("2.6.0", "2.6"), ("auto", "2.6"),
    ]
    for api_version, release in kafka_python_versions:
        found.append(Session(
            "kafka-python", f"kafka-python api_version={api_version}", release,
            [python, str(here / "session_kafka_python.py"), "--api-version", api_version],
        ))
    for release in ("0.10.0", "0.11.0", "1.0", "2.0", "2.4", "2.6"):
        zstd = RELEASES.index(release) >= RELEASES.index("2.1")  # Produce v7 brought zstd
        codecs = "none,gzip,snappy,lz4" + (",zstd" if zstd else "")
        found.append(Session(
            "confluent-kafka", f"confluent-kafka broker={release}", release,
            [python, str(here / "session_confluent.py"), "--tag", release.replace(".", ""), "--codecs", codecs],
        ))
    for fallback, release in ((None, "2.6"), (None, "0.11.0"), ("0.9.0", "2.6"), ("0.10.0", "2.6")):
        extra = ["--fallback", fallback] if fallback else []
        label = f"kcat fallback={fallback}" if fallback else f"kcat broker={release}"
        topic = "capture-kcat-" + (fallback or release).replace(".", "")
        found.append(Session(
            "kcat", label, release,
            [python, str(here / "session_kcat.py"), "--topic", topic, *extra], kcat_topic=topic,
        ))
    for release in ("2.6", "1.0"):
        found.append(Session(
            "kafkajs", f"kafkajs broker={release}", release, ["node", str(here / "session_kafkajs.js")],
        ))
    return found


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label)


def raw_path(session: Session, work_dir: Path) -> Path:
    return work_dir / f"raw-{_safe(session.label)}.jsonl"


def run_session(session: Session, work_dir: Path) -> Path:
    safe = _safe(session.label)
    raw = raw_path(session, work_dir)
    raw.unlink(missing_ok=True)
    env = {**os.environ, "NODE_PATH": str(REPO / "tools" / "capture-js" / "node_modules")}
    print(f"== {session.label} (as a {session.cap_release} broker)", flush=True)
    with broker_behind_proxy(raw, session.label, session.cap_release, work_dir / "logs") as endpoints:
        if session.kcat_topic:
            create_topic_out_of_band(endpoints, session.kcat_topic)
        command = [*session.command]
        # node takes the bootstrap address positionally, the Python sessions as an option.
        command += [endpoints.bootstrap] if command[0] == "node" else ["--bootstrap", endpoints.bootstrap]
        with (work_dir / "logs" / f"session-{safe}.log").open("w") as log:
            subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=600, check=False)
    return raw


def _masked(frame: dict[str, object]) -> str:
    """The frame with its correlation id blanked, so repeats of one request count as duplicates."""
    text = str(frame["hex"])
    start = 8 if frame["direction"] == "request" else 0
    return text[:start] + "********" + text[start + 8:]


def trim(frames: Iterable[dict[str, object]], per_key: int = MAX_PER_KEY) -> list[dict[str, object]]:
    """Drop repeats, then keep at most `per_key` frames per (label, api_key, api_version, direction),
    spread over the size range so the smallest and the largest (e.g. a fetch with every codec) stay."""
    groups: dict[tuple[object, ...], list[tuple[int, dict[str, object]]]] = defaultdict(list)
    seen: set[tuple[object, ...]] = set()
    for index, frame in enumerate(frames):
        key = (frame["client"], frame["api_key"], frame["api_version"], frame["direction"])
        # Bodies alone can collide across APIs (an empty Heartbeat and OffsetFetch answer look alike).
        identity = (*key, _masked(frame))
        if identity in seen:
            continue
        seen.add(identity)
        groups[key].append((index, frame))
    kept: list[tuple[int, dict[str, object]]] = []
    for members in groups.values():
        if len(members) > per_key:
            by_size = sorted(members, key=lambda m: len(str(m[1]["hex"])))
            step = (len(by_size) - 1) / (per_key - 1)
            members = [by_size[round(i * step)] for i in range(per_key)]
        kept.extend(members)
    return [frame for _, frame in sorted(kept, key=lambda m: m[0])]


def write_fixtures(raw_files: dict[str, list[Path]]) -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for client, paths in raw_files.items():
        frames: list[dict[str, object]] = []
        for path in paths:
            if path.exists():
                frames.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
        kept = trim(frames)
        out = FIXTURES / f"{client}.jsonl"
        fields = ("client", "direction", "api_key", "api_version", "correlation_id", "hex")
        with out.open("w") as fh:
            for frame in kept:
                fh.write(json.dumps({name: frame[name] for name in fields}) + "\n")
        print(f"{out.relative_to(REPO)}: {len(kept)} of {len(frames)} frames, {out.stat().st_size} bytes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", default="/tmp/sofakafka-capture", help="raw captures and logs")
    parser.add_argument("--only", action="append", help="client(s) to re-capture, e.g. kcat")
    parser.add_argument(
        "--retrim", action="store_true", help="rebuild the fixtures from the raw captures in --work-dir only"
    )
    args = parser.parse_args()

    def interrupted(signum: int, _frame: object) -> None:
        # Unwind through the context managers so no broker or proxy outlives the run.
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    work_dir = Path(args.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    raw_files: dict[str, list[Path]] = defaultdict(list)
    for session in sessions(sys.executable):
        if args.only and session.client not in args.only:
            continue
        if args.retrim:
            raw_files[session.client].append(raw_path(session, work_dir))
        else:
            raw_files[session.client].append(run_session(session, work_dir))
    write_fixtures(raw_files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
