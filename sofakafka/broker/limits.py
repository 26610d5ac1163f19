"""The broker's open-file budget: raised to what the system allows at start-up, and said out loud.

Every connection, every open segment file and a handful of fixed things (listening sockets, the ZooKeeper
session, inter-broker connections, checkpoints being written, the embedded store's journal) each take a
descriptor from ``RLIMIT_NOFILE``. Many systems start processes with a soft limit of 1,024 and a hard limit far
above it; like Kafka's start script advice (``ulimit -n``), the broker raises its soft limit to the hard one
before it opens anything, then logs how the budget splits: at most ``log.max.open.segment.files`` segment files
(indexes are mapped and hold none), at most ``max.connections`` connections, and a reserve. A budget that cannot
hold both is logged as a warning naming the keys; when descriptors run out anyway, the listener stops accepting
for a moment (a logged reason) and the existing connections are served as before (broker/server.py).
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: Descriptors kept for everything that is neither a connection nor a segment file.
RESERVED_DESCRIPTORS = 128


@dataclass(frozen=True)
class OpenFileLimit:
    before: int
    soft: int
    hard: int

    @property
    def raised(self) -> bool:
        return self.soft > self.before


def raise_open_file_limit() -> OpenFileLimit:
    """Raise the soft RLIMIT_NOFILE to the hard limit (never lowers it); what it was and is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return OpenFileLimit(before, soft, hard)


def budget_message(limit: OpenFileLimit, max_segment_files: int, max_connections: int) -> tuple[str, bool]:
    """The start-up line describing the budget, and whether it is over-committed (then logged as a warning)."""
    raised = f" (raised from {limit.before})" if limit.raised else ""
    left = limit.soft - max_segment_files - RESERVED_DESCRIPTORS
    connections = f"up to {max_connections} connections (max.connections)"
    over = max_connections > left
    if over:
        connections = (f"about {max(left, 0)} connections before descriptors run out "
                       f"(max.connections is {max_connections}: the listener pauses accepting when they do)")
    message = (f"open files: limit {limit.soft}{raised}, hard limit {limit.hard}; budget: up to "
               f"{max_segment_files} segment files (log.max.open.segment.files), {connections}, "
               f"{RESERVED_DESCRIPTORS} reserved")
    return message, over and max_connections < (1 << 31) - 1
