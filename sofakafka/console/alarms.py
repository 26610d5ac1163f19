"""Backlog alarms: a lag threshold per consumer group. A group whose total lag is above its threshold is
red in the console and raises ``sofakafka_console_group_lag_alarm{group=...}`` to 1 on the console's
``/metrics`` (Prometheus alerting rules fire on that, or on the brokers' own
``kafka_consumergroup_lag`` series).

Thresholds are the console's settings, kept in ``alarms.json`` under ``--state-dir`` (written whole to a
temporary file and renamed, so a crash leaves the old or the new file, never half of one). The console
re-reads every group's lag every ``--alarm-interval`` seconds in the background and when a page shows it.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge


class AlarmStore:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._thresholds: dict[str, int] = {}
        self._lag: dict[str, int] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        self._g_lag = Gauge("sofakafka_console_group_lag", "Total lag of a group with a backlog threshold "
                            "(records its committed offsets are behind the log end)", ["group"],
                            registry=self.registry)
        self._g_threshold = Gauge("sofakafka_console_group_lag_threshold", "The group's backlog threshold",
                                  ["group"], registry=self.registry)
        self._g_alarm = Gauge("sofakafka_console_group_lag_alarm", "1 while the group's lag is above its "
                              "threshold", ["group"], registry=self.registry)
        if path is not None and path.exists():
            try:
                raw = json.loads(path.read_text())
                self._thresholds = {str(g): int(v) for g, v in raw.get("thresholds", {}).items()}
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"cannot read backlog alarms from {path}: {exc}") from None
        for group, threshold in self._thresholds.items():
            self._g_threshold.labels(group).set(threshold)

    def thresholds(self) -> dict[str, int]:
        with self._lock:
            return dict(self._thresholds)

    def threshold(self, group: str) -> int | None:
        with self._lock:
            return self._thresholds.get(group)

    def set_threshold(self, group: str, threshold: int | None) -> None:
        """Sets (or, with None, removes) the group's threshold and saves the file."""
        if threshold is not None and threshold < 0:
            raise ValueError("a lag threshold must not be negative")
        with self._lock:
            if threshold is None:
                self._thresholds.pop(group, None)
                self._lag.pop(group, None)
                for g in (self._g_lag, self._g_threshold, self._g_alarm):
                    try:
                        g.remove(group)
                    except KeyError:
                        pass
            else:
                self._thresholds[group] = threshold
                self._g_threshold.labels(group).set(threshold)
                if group in self._lag:
                    self._g_alarm.labels(group).set(1 if self._lag[group] > threshold else 0)
            self._save()

    def observe(self, group: str, lag: int | None) -> None:
        """Records a group's current total lag (None: the group is gone) and updates the alarm."""
        with self._lock:
            threshold = self._thresholds.get(group)
            if threshold is None:
                return
            if lag is None:
                self._lag.pop(group, None)
                self._g_alarm.labels(group).set(0)
                return
            self._lag[group] = lag
            self._g_lag.labels(group).set(lag)
            self._g_alarm.labels(group).set(1 if lag > threshold else 0)

    def alarming(self, group: str, lag: int | None) -> bool:
        threshold = self.threshold(group)
        return threshold is not None and lag is not None and lag > threshold

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"thresholds": self._thresholds}, indent=2, sort_keys=True))
        os.replace(tmp, self.path)
