"""What the tools that read Kafka 2.6's reference share: where it is, and writing or checking what they make of it.

The reference (API-VERSIONS.md, message/*.json: Kafka's facts and schemas) is not in the repository. A tool is
given its directory as an argument or in $SOFAKAFKA_KAFKA_REFERENCE, writes our own files from it, and with
``--check`` only says whether the committed ones are stale.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

REFERENCE_ENV = "SOFAKAFKA_KAFKA_REFERENCE"


class ReferenceError(Exception):
    """The reference is missing, or no longer reads as the tool expects."""


def generator_main(description: str, generate: Callable[[Path], dict[str, str]], out_dir: Path,
                   argv: list[str] | None = None) -> int:
    """A generator's command line: ``[REFERENCE_DIR] [--out DIR] [--check]``; ``generate`` maps the reference
    directory to file name -> contents under ``out_dir``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("reference", nargs="?", type=Path, default=os.environ.get(REFERENCE_ENV) or None,
                        help=f"the Kafka 2.6 reference directory (default: ${REFERENCE_ENV})")
    parser.add_argument("--out", type=Path, default=out_dir)
    parser.add_argument("--check", action="store_true", help="fail if the committed files are stale")
    args = parser.parse_args(argv)
    if args.reference is None:
        parser.error(f"give the reference directory, or set {REFERENCE_ENV}")
    try:
        files = generate(Path(args.reference))
    except (ReferenceError, OSError) as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    stale = []
    for name, text in sorted(files.items()):
        path = args.out / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            stale.append(name)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print("stale generated files: " + ", ".join(stale), file=sys.stderr)
        return 1
    print(f"{len(files)} files, {len(stale)} {'stale' if args.check else 'written'}")
    return 0
