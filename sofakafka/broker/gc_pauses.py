"""How long the interpreter's garbage collector holds the broker, per generation: logged when one collection is
long, and exported as ``python_gc_collection_seconds_total{generation}`` beside prometheus_client's
``python_gc_collections_total`` (counts only).

Why it matters. A collection of the oldest generation walks every container object the process holds, with
the interpreter lock held all the while: every thread stops, the ZooKeeper session's among them (no pings), the
replica fetchers and the request loop too. A broker holds some 46 such objects per partition's log alone, so a
full collection at 100,000 partitions walks millions of objects: seconds, on a machine where three brokers share
two cores. Kafka's brokers log their JVM's pauses; this is the same figure for ours, so a session lost, a
follower fallen out of the ISR or a produce that took seconds can be matched against it.

What it does about them. A full collection keeps what it found alive, and at scale nearly all of it stays alive
(logs, partition states, replicas): walking it again and again is the cost. So after a full collection that took
:data:`FREEZE_AFTER_S` or more (a heap big enough to matter) the survivors are frozen (``gc.freeze``: moved where
collections never look), and the next full collection walks only what came since, as the Python documentation
suggests for a server's long-lived heap. The price is cyclic garbage: an object frozen while alive and later
dropped as part of a cycle (a deleted partition's log, a closed connection, a request in flight at the freeze) is
only freed once thawed. Hence the threshold: a broker whose unfrozen heap stays small (steady traffic, no growth)
never freezes its requests in flight, and one that grows freezes once per few hundred thousand new long-lived
objects. And every :data:`THAW_INTERVAL_S` everything is thawed: the next full collection, a long one, walks and
frees it, then freezes again. One long pause an hour instead of one per burst of growth.

Process-wide: the collector is the process's, so one :class:`GcPauses` (``install``) serves every broker the
process runs; ``sofakafka serve`` installs it. The callback costs two clock reads per collection; freezing and
thawing happen on a thread of their own (``gc.freeze`` is not called from inside a collection).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

LONG_PAUSE_S = 1.0
"""A collection at least this long is logged at WARNING (shorter ones only counted)."""

GENERATIONS = 3

FREEZE_AFTER_S = 0.1
"""A full collection at least this long (some 250,000 objects walked) has its survivors frozen; a shorter one not."""

THAW_INTERVAL_S = 3600.0
"""How long frozen objects stay out of the collector's sight before a thaw lets it free the cyclic garbage among
them."""

SETTLE_INTERVAL_S = 1.0
"""How often the freezing thread looks whether a full collection ended (and a freeze is due) or a thaw is."""


class GcPauses:
    """Per-generation counts and total seconds of the collections seen since ``install``, and the longest."""

    def __init__(self, long_pause_s: float = LONG_PAUSE_S, clock: Any = time.perf_counter, *,
                 freeze_after_s: float = FREEZE_AFTER_S, thaw_interval_s: float = THAW_INTERVAL_S) -> None:
        self.long_pause_s = long_pause_s
        self.freeze_after_s = freeze_after_s
        self.thaw_interval_s = thaw_interval_s
        self._clock = clock
        self._started: float | None = None
        self.collections = [0] * GENERATIONS
        self.seconds = [0.0] * GENERATIONS
        self.longest_s = 0.0
        self.freeze_due = False
        self.freezes = 0
        self.thaws = 0
        self._thaw_at = clock() + thaw_interval_s

    def callback(self, phase: str, info: dict[str, Any]) -> None:
        """``gc.callbacks`` entry: called with the interpreter lock held, around each collection."""
        if phase == "start":
            self._started = self._clock()
            return
        started, self._started = self._started, None
        if started is None:
            return  # installed mid-collection
        took = self._clock() - started
        generation = min(max(int(info.get("generation", 0)), 0), GENERATIONS - 1)
        self.collections[generation] += 1
        self.seconds[generation] += took
        self.longest_s = max(self.longest_s, took)
        if generation == GENERATIONS - 1 and took >= self.freeze_after_s:
            self.freeze_due = True
        if took >= self.long_pause_s:
            log.warning("garbage collection of generation %d held the interpreter for %.2f s (%d objects collected; "
                        "%d collections of that generation so far, %.1f s in all)", generation, took,
                        int(info.get("collected", 0)), self.collections[generation], self.seconds[generation])

    def settle(self) -> None:
        """The freezing thread's step: thaw when it is time, else freeze the survivors of a long full collection
        that ended since the last step."""
        now = self._clock()
        if now >= self._thaw_at:
            self._thaw_at = now + self.thaw_interval_s
            self.freeze_due = False
            self.thaws += 1
            gc.unfreeze()
            log.info("garbage collector: the long-lived objects are thawed; the next full collection walks them all "
                     "once and frees what died among them since they were frozen")
        elif self.freeze_due:
            self.freeze_due = False
            self.freezes += 1
            gc.freeze()


_installed: GcPauses | None = None
_install_lock = threading.Lock()


def install(long_pause_s: float = LONG_PAUSE_S, *, freeze: bool = True) -> GcPauses:
    """The process's :class:`GcPauses`, put into ``gc.callbacks`` on the first call, with its freezing thread
    unless ``freeze`` is false (that call decides)."""
    global _installed
    with _install_lock:
        if _installed is None:
            pauses = GcPauses(long_pause_s, clock=time.monotonic)
            gc.callbacks.append(pauses.callback)
            if freeze:
                threading.Thread(target=_settle_forever, args=(pauses,), name="sofakafka-gc", daemon=True).start()
            _installed = pauses
        return _installed


def _settle_forever(pauses: GcPauses) -> None:
    while True:
        time.sleep(SETTLE_INTERVAL_S)
        try:
            pauses.settle()
        except Exception:  # never seen; the broker must outlive it all the same
            log.exception("garbage collector: freezing failed")


def installed() -> GcPauses | None:
    """The process's :class:`GcPauses` if ``install`` ran, for the metrics export."""
    return _installed
