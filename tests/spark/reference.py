"""Plain-Python (pandas) answers to what the pipelines compute, from the very events the tests produced.

Written independently of the Spark jobs: the same definitions (docs/pipelines.md), none of the code. Times are
epoch seconds; windows are tumbling and aligned to the epoch, as Spark's ``window()`` is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pandas as pd

LINE = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+) (\d+)$')


def access_logs(values: Iterable[bytes]) -> pd.DataFrame:
    rows = []
    for v in values:
        m = LINE.match(v.decode())
        if m is None:
            continue
        ts = int(datetime.strptime(m[2], "%d/%b/%Y:%H:%M:%S %z").timestamp())
        rows.append({"ts": ts, "client": m[1], "method": m[3], "path": m[4], "status": int(m[5]),
                     "bytes": int(m[6]), "latency_ms": int(m[7])})
    return pd.DataFrame(rows)


def _window(ts: pd.Series, size_s: int) -> pd.Series:
    return ts // size_s * size_s


def request_counts(logs: pd.DataFrame, size_s: int = 60) -> list[tuple[Any, ...]]:
    g = logs.assign(w=_window(logs.ts, size_s)).groupby(["w", "status", "path"]).size()
    return sorted((int(w), int(s), p, int(n)) for (w, s, p), n in g.items())


def latency(logs: pd.DataFrame, size_s: int = 60) -> list[tuple[Any, ...]]:
    out = []
    for w, g in logs.assign(w=_window(logs.ts, size_s)).groupby("w"):
        lat = g.latency_ms.astype(float)
        out.append((int(w), len(g), lat.quantile(0.5), lat.quantile(0.95), lat.quantile(0.99), int(lat.max())))
    return sorted(out)


def top_clients(logs: pd.DataFrame, size_s: int = 60, top: int = 5) -> list[tuple[Any, ...]]:
    out = []
    counts = logs.assign(w=_window(logs.ts, size_s)).groupby(["w", "client"]).size().rename("n").reset_index()
    for w, g in counts.groupby("w"):
        ranked = sorted(zip(g.client, g.n, strict=True), key=lambda cn: (-cn[1], cn[0]))[:top]
        out += [(int(w), c, int(n), rank) for rank, (c, n) in enumerate(ranked, 1)]
    return sorted(out)


def error_bursts(logs: pd.DataFrame, size_s: int = 10, min_errors: int = 10,
                 min_ratio: float = 0.1) -> list[tuple[Any, ...]]:
    out = []
    for w, g in logs.assign(w=_window(logs.ts, size_s)).groupby("w"):
        errors = int((g.status >= 500).sum())
        if errors >= min_errors and errors >= len(g) * min_ratio:
            out.append((int(w), len(g), errors))
    return sorted(out)


def orders_per_region(values: Iterable[bytes], size_s: int = 60) -> list[tuple[Any, ...]]:
    rows = []
    for v in values:
        o = json.loads(v)
        ts = datetime.fromisoformat(o["ts"].replace("Z", "+00:00")).timestamp()
        rows.append({"w": int(ts) // size_s * size_s, "region": o["region"], "amount": o["amount_cents"]})
    df = pd.DataFrame(rows)
    g = df.groupby(["w", "region"]).agg(orders=("amount", "size"), revenue=("amount", "sum"))
    return sorted((int(w), r, int(row.orders), int(row.revenue)) for (w, r), row in g.iterrows())
