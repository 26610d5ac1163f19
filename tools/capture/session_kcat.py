"""One kcat session (librdkafka underneath, but driven the way people use kcat): metadata listing,
keyed produce with headers per codec, a simple consume from the beginning, a balanced group consume
(join/sync/heartbeat/commit/leave) and an offset query.

`--fallback` turns off ApiVersions and makes librdkafka assume an old broker, which is how kcat talks
to 0.9/0.10 brokers: that is the only way to capture Produce v1 / Fetch v1 (message set v0) from a real
client, because a client that negotiates never goes that low. kcat cannot create topics, so the
caller creates the topic out of band before this runs."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

failures: list[str] = []


def kcat(name: str, args: list[str], stdin: str | None = None) -> None:
    command = ["kcat", *args]
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        failures.append(name)
        print(f"FAIL {name}: timed out", flush=True)
        return
    status = "ok  " if done.returncode == 0 else "FAIL"
    if done.returncode != 0:
        failures.append(name)
    print(f"{status} {name}: {done.stdout[-300:]!r} {done.stderr[-300:]!r}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--fallback", help="librdkafka broker.version.fallback, with api.version.request=false")
    args = parser.parse_args()
    if shutil.which("kcat") is None:
        raise SystemExit("kcat is not installed (apt-get install -y kcat)")
    base = ["-b", args.bootstrap, "-X", f"client.id=capture-kcat-{args.fallback or 'negotiated'}"]
    legacy = args.fallback is not None
    if legacy:
        base += ["-X", "api.version.request=false", "-X", f"broker.version.fallback={args.fallback}"]
    topic, group = args.topic, f"{args.topic}-group"

    kcat("metadata", [*base, "-L"])
    kcat("metadata json", [*base, "-L", "-J", "-t", topic])
    # zstd needs Produce v7; magic 0/1 message sets predate record headers.
    codecs = ["none", "gzip", "snappy", "lz4"] + ([] if legacy else ["zstd"])
    for codec in codecs:
        lines = "".join(f"key-{i % 2}:value {codec} {i}\n" for i in range(3))
        headers = [] if legacy else ["-H", "trace-id=t1", "-H", f"codec={codec}"]
        kcat(f"produce {codec}", [*base, "-P", "-t", topic, "-z", codec, "-K:", *headers], stdin=lines)
    kcat("consume", [*base, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%p %o %k=%s %h\\n"])
    kcat(
        "group consume",
        [*base, "-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true",
         "-X", "auto.commit.interval.ms=200", "-G", group, topic, "-e"],
    )
    if not legacy:
        kcat("offsets for times", [*base, "-Q", "-t", f"{topic}:0:0", "-t", f"{topic}:1:0"])
    print(f"failed steps: {failures}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
