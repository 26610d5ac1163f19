"""Long console work (key scans) as jobs: started by one request, run in a worker thread, watched by the
page polling ``/api/jobs/<id>``, cancellable, forgotten some minutes after they end.

At most ``MAX_RUNNING`` jobs run at once, so a few operators' scans cannot take every worker thread
(the pages keep answering) nor put more than that many fetch streams on the brokers.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sofakafka.console.cluster import ConsoleError
from sofakafka.console.query import ScanState

MAX_RUNNING = 2
KEEP_FINISHED_S = 15 * 60


@dataclass
class Job:
    id: str
    owner: str
    description: str
    state: ScanState
    cancel: threading.Event = field(default_factory=threading.Event)
    finished_at: float | None = None
    failure: str | None = None


class JobRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}

    def start(self, owner: str, description: str, state: ScanState,
              run: Callable[[Job], None]) -> Job:
        with self._lock:
            self._forget_old()
            running = sum(1 for j in self._jobs.values() if j.finished_at is None)
            if running >= MAX_RUNNING:
                raise ConsoleError(f"{running} scans are already running; wait for one to end or cancel it")
            job = Job(secrets.token_urlsafe(9), owner, description, state)
            self._jobs[job.id] = job

        def body() -> None:
            try:
                run(job)
            except Exception as exc:  # noqa: BLE001 - the job reports it; the thread must not die silently
                job.failure = f"{type(exc).__name__}: {exc}"
                job.state.done = True
            finally:
                job.finished_at = time.monotonic()

        threading.Thread(target=body, name=f"console-job-{job.id}", daemon=True).start()
        return job

    def get(self, job_id: str, owner: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.owner != owner:
            raise ConsoleError("no such scan (it ended more than 15 minutes ago, or the console restarted)")
        return job

    def cancel_all(self) -> None:
        with self._lock:
            for job in self._jobs.values():
                job.cancel.set()

    def _forget_old(self) -> None:
        now = time.monotonic()
        for job_id in [j.id for j in self._jobs.values()
                       if j.finished_at is not None and now - j.finished_at > KEEP_FINISHED_S]:
            del self._jobs[job_id]
