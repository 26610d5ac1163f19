"""All partition logs of a broker, spread over one or more ``log.dirs``.

Start-up (``startup``): each log dir gets/validates ``meta.properties``; a ``.kafka_cleanshutdown`` marker says
the last shutdown flushed everything, otherwise every log is recovered from its recovery point (read from
``recovery-point-offset-checkpoint``). Logs are loaded in parallel on a thread pool, since recovery is
disk-bound and independent per partition. The marker is removed once loading is done, so a crash from then on
is detected at the next start.

Periodic work is exposed as plain methods the broker schedules (off its event loop; they all block on disk):
``checkpoint_recovery_points``, ``checkpoint_log_start_offsets``, ``checkpoint_high_watermarks``,
``cleanup_logs`` (retention, purge of ``.deleted`` files, expiry of idle producer ids),
``clean_compacted_logs`` (one compaction pass per ``compact`` log: ``log.cleaner.backoff.ms``),
``flush_dirty_logs`` (``flush.ms``). ``shutdown`` flushes and closes every log, writes the checkpoints and the
marker.

The manager owns the ``LogCleaner`` (as Kafka's LogManager does). Whatever rewrites or removes a log under it
stops a running pass first and fixes the cleaner's checkpoint after: ``delete_log`` here, and every managed
log's truncations, which run inside ``cleaning_paused`` (the log's ``rewrite_guard``), whoever calls them.

Log directory failure (Kafka's LogDirFailureChannel and handleLogDirFailure): when a file operation of a log
fails (disk full, I/O error) the log refuses writes and reports its directory; a thread of the manager's then
takes the whole directory offline: its logs are closed without flushing, leave the map, and their partitions
are remembered as offline (a re-create refuses with KAFKA_STORAGE_ERROR rather than starting an empty log in
another directory). Listeners (the replica manager) hear which partitions went. Nothing is written to an
offline directory again until the broker restarts, when its logs are recovered like after a crash.

Moves between log directories (AlterReplicaLogDirs, KIP-113): ``alter_replica_log_dir`` creates a *future
replica* of a partition in the dir asked for (``<tp>.<id>-future``) and pauses compaction of its log; the
manager's ``LogDirMover`` (log_mover.py) fills it and calls ``complete_move``, which swaps it in under the log's
lock and renames the old dir ``-delete`` (removed after ``file.delete.delay.ms`` by ``delete_due_logs``). A
partition not here yet gets the dir remembered for its creation. Future replicas are checkpointed with their dir
(recovery point, log start; not the high watermark), flushed, loaded and resumed at start-up; one without a
current log is the end of an interrupted swap and becomes the log. ``delete_log`` deletes the future replica
first, so that cannot be confused with a deletion.

Threading: the log map is guarded by a lock; any thread may call any method. Per-log work is serialised by
each Log's own lock; a swap holds the manager's lock, then the current log's, then the future replica's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import queue
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sofakafka.storage import mapping
from sofakafka.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    OffsetCheckpointWriter,
    atomic_write_text,
    fsync_dir,
)
from sofakafka.storage.cleaner import LogCleaner
from sofakafka.storage.config import LogConfig
from sofakafka.storage.errors import (
    CheckpointFormatError,
    InvalidTopicError,
    KafkaStorageError,
    LogDirError,
    LogDirNotFoundError,
    ReplicaNotAvailableError,
    StorageError,
)
from sofakafka.storage.file_cache import DEFAULT_MAX_OPEN_FILES, DescriptorCache
from sofakafka.storage.log import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    Log,
    delete_log_dir,
    log_dir_name,
    parse_topic_partition,
)
from sofakafka.storage.log_mover import DEFAULT_CHUNK_BYTES, UNLIMITED_RATE, LogDirMover
from sofakafka.storage.segment import wall_clock_ms

log = logging.getLogger(__name__)

#: Memory mappings left to the rest of the process (the interpreter's arenas, thread stacks, libraries) when
#: the logs' index mappings are weighed against ``vm.max_map_count``.
MAP_RESERVE = 4096


def mappings_needed(logs: int) -> int:
    """The memory mappings a process holding ``logs`` written logs needs: two indexes each, and the reserve."""
    return 2 * logs + MAP_RESERVE

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"

TopicPartition = tuple[str, int]

#: Threads that create logs (and write their first checkpoints) when many partitions arrive at once.
CREATE_THREADS = 8
#: The longest directory name a filesystem takes: a future replica's must fit (Kafka 2.6's KAFKA-4893 check).
MAX_DIR_NAME_BYTES = 255


def future_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<id>-future``: Kafka 2.6's name for a future replica (a 32-digit random id)."""
    return f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def delete_dir_name(topic: str, partition: int) -> str:
    return f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


def read_meta_properties(path: Path) -> dict[str, str]:
    """Java-properties subset Kafka writes for meta.properties (``key=value`` lines, ``#`` comments)."""
    props: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise CheckpointFormatError(path, number, f"expected key=value, got {raw!r}")
        props[key.strip()] = value.strip()
    return props


def write_meta_properties(path: Path, broker_id: int, cluster_id: str | None) -> None:
    lines = ["#", "version=0", f"broker.id={broker_id}"]
    if cluster_id is not None:
        lines.append(f"cluster.id={cluster_id}")
    atomic_write_text(path, "\n".join(lines) + "\n")


class LogManager:
    """Creates, loads, checkpoints, cleans up and closes the broker's partition logs."""

    def __init__(
        self,
        log_dirs: list[Path],
        *,
        default_config: LogConfig | None = None,
        topic_configs: Callable[[str], LogConfig] | None = None,
        broker_id: int = 0,
        cluster_id: str | None = None,
        recovery_threads_per_data_dir: int = 1,
        time_ms: Callable[[], int] = wall_clock_ms,
        producer_id_expiration_ms: int = 604_800_000,
        cleaner: LogCleaner | None = None,
        max_open_segment_files: int = DEFAULT_MAX_OPEN_FILES,
        alter_log_dirs_threads: int | None = None,
        alter_log_dirs_chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        alter_log_dirs_rate: int = UNLIMITED_RATE,
    ) -> None:
        if not log_dirs:
            raise LogDirError("at least one log directory is required")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        # How a request may name a dir: as we report it (resolved), or as configured made absolute (Kafka's
        # getAbsolutePath of the log.dirs entry).
        self._dir_names: dict[str, Path] = {}
        for given, resolved in zip(log_dirs, self.log_dirs, strict=True):
            self._dir_names[str(resolved)] = resolved
            self._dir_names.setdefault(os.path.abspath(str(given)), resolved)
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise LogDirError(f"duplicate log directories in {log_dirs}")
        self.default_config = default_config or LogConfig()
        self._topic_configs = topic_configs
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._threads = max(1, recovery_threads_per_data_dir)
        self._time_ms = time_ms
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._lock = threading.RLock()
        # Held while logs are being created, outside ``_lock`` (creation fsyncs): one creator at a time, so a
        # partition is never created twice.
        self._create_lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        # (due time, directory, the log whose descriptors close then: the old copy of a moved log)
        self._pending_dir_deletes: list[tuple[int, Path, Log | None]] = []
        self._dir_locks: list[int] = []
        self._started = False
        self._map_warned = False  # the vm.max_map_count warning is logged (once per crossing)
        self.cleaner = cleaner if cleaner is not None else LogCleaner(clock=time_ms)
        #: The descriptors of every managed log's segment files, at most ``log.max.open.segment.files`` idle.
        self.descriptor_cache = DescriptorCache(max_open_segment_files)
        self._offline_dirs: dict[Path, str] = {}  # offline log dir -> why
        # The periodic offset checkpoints, one writer per file (it skips a write of what the file already says).
        self._checkpoint_writers: dict[Path, OffsetCheckpointWriter] = {}
        self._offline_partitions: set[TopicPartition] = set()
        # A dir went offline before its partitions were known (start-up): see claim_offline_at_startup.
        self._offline_since_startup = False
        self._failed_dirs: queue.SimpleQueue[tuple[Path, OSError]] = queue.SimpleQueue()
        self._failure_thread: threading.Thread | None = None
        self._dir_failure_listeners: list[Callable[[Path, list[TopicPartition]], None]] = []
        # Moves between log dirs (AlterReplicaLogDirs): the future replica of each partition being moved, the
        # cleaner key paused for it (the current log's dir when the move began), and where a partition not yet
        # created here is to be created (Kafka's preferredLogDirs).
        self._futures: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        self._paused_for_move: dict[TopicPartition, Path] = {}
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self.mover = LogDirMover(self, threads=len(self.log_dirs) if alter_log_dirs_threads is None
                                 else alter_log_dirs_threads,
                                 chunk_bytes=alter_log_dirs_chunk_bytes, rate=alter_log_dirs_rate)

    # -- start-up -------------------------------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        if self._topic_configs is not None:
            return self._topic_configs(topic)
        return self.default_config

    def _lock_dir(self, log_dir: Path) -> None:
        """Hold an exclusive lock on ``<dir>/.lock`` (as Kafka does) so two brokers never share a log dir."""
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirError(f"log directory {log_dir} is locked by another process") from None
        self._dir_locks.append(fd)

    def _unlock_dirs(self) -> None:
        for fd in self._dir_locks:
            os.close(fd)  # closing the descriptor releases the flock
        self._dir_locks = []

    def _check_meta_properties(self, log_dir: Path) -> None:
        path = log_dir / META_PROPERTIES
        if path.exists():
            props = read_meta_properties(path)
            if props.get("version", "0") != "0":
                raise LogDirError(f"{path}: unsupported meta.properties version {props.get('version')}")
            stored_broker = props.get("broker.id")
            if stored_broker is not None and int(stored_broker) != self.broker_id:
                raise LogDirError(f"{path}: broker.id {stored_broker} does not match configured {self.broker_id}")
            stored_cluster = props.get("cluster.id")
            if stored_cluster is not None:
                if self.cluster_id is not None and stored_cluster != self.cluster_id:
                    raise LogDirError(f"{path}: cluster.id {stored_cluster} does not match {self.cluster_id}")
                self.cluster_id = stored_cluster
                return
        write_meta_properties(path, self.broker_id, self.cluster_id)

    def startup(self) -> None:
        """Lock and load every log dir (blocking; recovery may read whole segments).

        A dir that cannot be created, read, locked or loaded (an OSError: a file where the dir should be, an I/O
        error) is taken offline and the broker goes on with the others, as Kafka's createAndValidateLogDirs and
        loadLogs do; with none left, LogDirError (Kafka logs "Shutdown broker because none of the specified log
        dirs ... can be created or validated" and halts). Which partitions an unreadable dir held is unknown:
        ``claim_offline_at_startup`` takes the broker's other replicas offline, as Kafka refuses to create a log
        that is not new while a dir is offline."""
        with self._lock:
            if self._started:
                return
            try:
                for log_dir in self.log_dirs:
                    try:
                        self._validate_dir(log_dir)
                    except OSError as exc:
                        self._fail_at_startup(log_dir, f"Failed to create or validate data directory {log_dir}: "
                                                       f"{exc.strerror or exc}")
                self._require_an_online_dir()
                self._load_all()
                self._require_an_online_dir()
            except BaseException:
                self._unlock_dirs()
                raise
            self._started = True
        self._check_map_budget()
        for tp, future in list(self._futures.items()):
            current = self._logs[tp]
            self.cleaner.abort_and_pause_cleaning(current.dir)
            self._paused_for_move[tp] = current.dir
            log.info("resuming the move of %s-%d from %s to %s", tp[0], tp[1], current.dir.parent, future.dir.parent)
        if self._futures:
            self.mover.wake()

    def _validate_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)  # a regular file in its place: FileExistsError
        if not log_dir.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{log_dir} is not a readable log directory")
        os.listdir(log_dir)  # readable at all
        self._lock_dir(log_dir)
        self._check_meta_properties(log_dir)

    def _fail_at_startup(self, log_dir: Path, reason: str) -> None:
        """Start-up could not use ``log_dir``: offline from the start, nothing of it loaded."""
        log.error("log directory %s is offline: %s", log_dir, reason)
        self._offline_dirs[log_dir] = reason
        self._offline_since_startup = True
        for tp in [tp for tp, d in self._log_dir_of.items() if d == log_dir]:
            lg = self._logs.pop(tp)
            del self._log_dir_of[tp]
            with contextlib.suppress(OSError):
                lg.close_handlers()

    def _require_an_online_dir(self) -> None:
        if not self.online_log_dirs:
            message = (f"Shutdown broker because none of the specified log dirs from "
                       f"{', '.join(str(d) for d in self.log_dirs)} can be created or validated")
            log.critical("%s", message)
            raise LogDirError(message)

    def claim_offline_at_startup(self, replicas: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Of ``replicas`` (the partitions the metadata places on this broker at start-up), those without a log
        here, when a dir went offline at start-up: their data may be in that dir, so they are offline, not
        created empty elsewhere (Kafka's getOrCreateLog refuses a log that is not new while any dir is offline,
        and its LeaderAndIsr answer KAFKA_STORAGE_ERROR makes the controller lead them elsewhere). Returns them."""
        with self._lock:
            if not self._offline_since_startup:
                return []
            claimed = sorted(tp for tp in set(replicas) if tp not in self._logs and tp not in self._offline_partitions)
            self._offline_partitions.update(claimed)
        if claimed:
            log.warning("%d replicas of this broker have no log in an online dir while %s %s offline: taken offline",
                        len(claimed), ", ".join(str(d) for d in self._offline_dirs),
                        "is" if len(self._offline_dirs) == 1 else "are")
        return claimed

    def _load_all(self) -> None:
        jobs: list[tuple[Path, Path, bool, dict[TopicPartition, int], dict[TopicPartition, int]]] = []
        for log_dir in self.online_log_dirs:
            try:
                clean = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
                recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
                start_offsets = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
                dir_jobs = []
                for child in sorted(log_dir.iterdir()):
                    if not child.is_dir():
                        continue
                    if child.name.endswith(DELETE_DIR_SUFFIX):
                        self._pending_dir_deletes.append((0, child, None))
                        continue
                    try:
                        parse_topic_partition(child.name)
                    except ValueError:
                        continue  # not a partition directory (e.g. the embedded metadata store)
                    dir_jobs.append((log_dir, child, clean, recovery_points, start_offsets))
            except OSError as exc:
                self._fail_at_startup(log_dir, f"Error while loading log dir {log_dir}: {exc.strerror or exc}")
                continue
            jobs += dir_jobs

        def load(job: tuple[Path, Path, bool, dict[TopicPartition, int], dict[TopicPartition, int]],
                 ) -> tuple[Path, Log | OSError]:
            try:
                return job[0], self._load_log(*job)
            except OSError as exc:
                return job[0], exc

        with ThreadPoolExecutor(max_workers=self._threads * len(self.log_dirs),
                                thread_name_prefix="log-recovery") as pool:
            results = list(pool.map(load, jobs))
        failed = {log_dir: exc for log_dir, exc in results if isinstance(exc, OSError)}
        loaded: list[tuple[Path, Log]] = []
        for log_dir, lg in results:
            if isinstance(lg, OSError):
                continue
            if log_dir in failed:
                with contextlib.suppress(OSError):
                    lg.close_handlers()  # its dir goes offline: nothing of it is served
                continue
            loaded.append((log_dir, lg))
        for log_dir, error in failed.items():
            self._fail_at_startup(log_dir, f"Error while loading log dir {log_dir}: {error.strerror or error}")
        futures: dict[TopicPartition, tuple[Path, Log]] = {}
        for log_dir, lg in loaded:
            tp = (lg.topic, lg.partition)
            if lg.is_future:
                if tp in futures:
                    raise LogDirError(f"two future replicas of {tp}: {futures[tp][1].dir} and {lg.dir}")
                futures[tp] = (log_dir, lg)
                continue
            if tp in self._logs:
                raise LogDirError(f"partition {tp} found in both {self._log_dir_of[tp]} and {log_dir}")
            self._logs[tp] = lg
            self._log_dir_of[tp] = log_dir
        for tp, (log_dir, lg) in sorted(futures.items()):
            self._adopt_loaded_future(tp, log_dir, lg)
        # Each dir's high watermarks for the logs in it (a partition moved between dirs may be in two files).
        for log_dir in self.online_log_dirs:
            try:
                for tp, hw in OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read().items():
                    if self._log_dir_of.get(tp) == log_dir:
                        self._logs[tp].update_high_watermark(hw)
                (log_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
                fsync_dir(log_dir)
            except OSError as exc:
                self._fail_at_startup(log_dir, f"Error while loading log dir {log_dir}: {exc.strerror or exc}")
        self._delete_pending_dirs(1 << 62)

    def _adopt_loaded_future(self, tp: TopicPartition, log_dir: Path, lg: Log) -> None:
        """A future replica found at start-up: its move resumes (Kafka resumes it too). Without a current log the
        broker stopped inside a swap, after the current log was renamed for deletion and before the copy took
        its name (``complete_move`` renames in that order): the copy, flushed and complete, becomes the log."""
        current_dir = self._log_dir_of.get(tp)
        if current_dir is None:
            live = log_dir / log_dir_name(*tp)
            log.warning("%s: a move between log dirs was interrupted after its swap began; the copy in %s "
                        "becomes the log", lg.dir.name, log_dir)
            lg.close_handlers()
            os.replace(lg.dir, live)
            fsync_dir(log_dir)
            self._logs[tp] = self._load_log(log_dir, live, False, {}, {})
            self._log_dir_of[tp] = log_dir
        elif current_dir == log_dir:
            log.warning("%s: a future replica in its current log's own dir; deleting it", lg.dir)
            lg.close_handlers()
            target = lg.dir.with_name(delete_dir_name(*tp))
            os.replace(lg.dir, target)
            self._pending_dir_deletes.append((0, target, None))
        else:
            self._futures[tp] = lg
            self._future_dir_of[tp] = log_dir

    def _load_log(self, log_dir: Path, path: Path, clean: bool, recovery_points: Mapping[TopicPartition, int],
                  start_offsets: Mapping[TopicPartition, int]) -> Log:
        topic, partition = parse_topic_partition(path.name)
        tp = (topic, partition)
        lg = Log(
            path,
            self.config_for(topic),
            log_start_offset=start_offsets.get(tp, 0),
            recovery_point=recovery_points.get(tp, 0),
            had_clean_shutdown=clean,
            time_ms=self._time_ms,
            producer_id_expiration_ms=self._producer_id_expiration_ms,
            descriptor_cache=self.descriptor_cache,
        )
        # A future replica is never cleaned (its move pauses cleaning of the current log): no guard.
        lg.rewrite_guard = None if lg.is_future else self.cleaning_paused
        lg.io_error_handler = self._on_io_error
        return lg

    def load_high_watermarks(self) -> dict[TopicPartition, int]:
        """The replication-offset-checkpoint of every dir; the replica manager seeds high watermarks from it."""
        out: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            out.update(OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read())
        return out

    # -- access ---------------------------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    @property
    def all_logs(self) -> list[Log]:
        """Every current log (future replicas are ``future_logs``)."""
        with self._lock:
            return list(self._logs.values())

    @property
    def future_logs(self) -> list[Log]:
        """The future replicas of partitions being moved between log dirs."""
        with self._lock:
            return list(self._futures.values())

    def get_future_log(self, topic: str, partition: int) -> Log | None:
        return self._futures.get((topic, partition))

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding the partition's current log."""
        return self._log_dir_of.get((topic, partition))

    # -- log directory failure --------------------------------------------------------------------------------
    @property
    def online_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self._offline_dirs]

    @property
    def offline_log_dirs(self) -> dict[Path, str]:
        """Offline directories and why they went offline."""
        return dict(self._offline_dirs)

    @property
    def offline_partitions(self) -> list[TopicPartition]:
        """Partitions whose log was in a directory that went offline."""
        with self._lock:
            return sorted(self._offline_partitions)

    def is_offline(self, topic: str, partition: int) -> bool:
        """The partition's log was in a directory that went offline."""
        return (topic, partition) in self._offline_partitions

    def add_dir_failure_listener(self, listener: Callable[[Path, list[TopicPartition]], None]) -> None:
        """``listener(dir, partitions)`` runs on the manager's failure thread once a directory went offline,
        with the partitions whose logs it held."""
        self._dir_failure_listeners.append(listener)

    def _on_io_error(self, log_dir: Path, exc: OSError) -> None:
        """A log's io_error_handler: queue the directory for the failure thread (never blocks, takes no lock
        the failing log's caller might be waiting for)."""
        self._failed_dirs.put((log_dir, exc))
        thread = self._failure_thread
        if thread is None or not thread.is_alive():
            thread = threading.Thread(target=self._handle_failures, name="log-dir-failure", daemon=True)
            self._failure_thread = thread
            thread.start()

    def _handle_failures(self) -> None:
        while True:
            try:
                log_dir, exc = self._failed_dirs.get(timeout=1.0)
            except queue.Empty:
                return
            self.take_dir_offline(log_dir, f"{exc.strerror or exc}")

    def take_dir_offline(self, log_dir: Path, reason: str) -> list[TopicPartition]:
        """Take ``log_dir`` offline (idempotent): close its logs without flushing, forget them, remember their
        partitions as offline, tell the listeners. Returns the partitions taken offline."""
        log_dir = Path(log_dir).resolve()
        with self._lock:
            if log_dir not in self.log_dirs or log_dir in self._offline_dirs:
                return []
            self._offline_dirs[log_dir] = reason
            gone = [tp for tp, d in self._log_dir_of.items() if d == log_dir]
            for tp in gone:
                lg = self._logs.pop(tp)
                del self._log_dir_of[tp]
                self._offline_partitions.add(tp)
                with contextlib.suppress(OSError):
                    lg.close_handlers()
            # Moves stop (Kafka's handleLogDirFailure): those into this dir lose their copy (its files stay, and
            # are deleted when the dir is back, or resumed if the move is asked again), those out of it keep
            # theirs on disk, resumed at the next start.
            stopped = [tp for tp, d in self._future_dir_of.items() if d == log_dir or tp in self._offline_partitions]
            for tp in stopped:
                future = self._futures.pop(tp)
                del self._future_dir_of[tp]
                with contextlib.suppress(OSError):
                    future.close_handlers()
                paused = self._paused_for_move.pop(tp, None)
                if paused is not None:
                    self.cleaner.resume_cleaning(paused)
        log.error("log directory %s is offline (%s): %d partitions with it; %d of %d directories left online",
                  log_dir, reason, len(gone), len(self.online_log_dirs), len(self.log_dirs))
        for listener in list(self._dir_failure_listeners):
            try:
                listener(log_dir, gone)
            except Exception:
                log.exception("log directory failure listener failed")
        return gone

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created empty in the dir holding the fewest partitions if it does not exist.

        Raises KafkaStorageError for a partition whose directory went offline (its data is there, not lost,
        until a restart brings the directory back) and when no directory is online.
        """
        tp = (topic, partition)
        found = self.get_or_create_logs([tp], config=config, raise_errors=True)
        return found[tp]

    def get_or_create_logs(self, partitions: Sequence[TopicPartition], *, config: LogConfig | None = None,
                           prepare: Callable[[Log], None] | None = None, threads: int = CREATE_THREADS,
                           raise_errors: bool = False) -> dict[TopicPartition, Log]:
        """``get_or_create_log`` for many partitions at once, which a broker becoming leader or follower of a
        thousand new partitions needs to be fast: the missing logs are created by ``threads`` threads, each log
        then handed to ``prepare`` there (the replica manager writes the new leader epoch, an fsynced
        checkpoint), and every parent dir is fsynced once at the end rather than once per log. Durability is
        the same (nothing is returned before its directory entry is on disk); the time is not, because
        fsyncs issued together on one filesystem commit together (on the test machine ~9 ms each one after the
        other, ~1-2 ms each from four threads). ``prepare`` runs for the created logs only.

        A partition whose creation fails is left out of the result (the error is logged), so one bad partition
        does not fail its neighbours; the caller finds it missing. With ``raise_errors`` the first failure is
        raised instead (after the others were registered).
        """
        with self._create_lock:
            out: dict[TopicPartition, Log] = {}
            planned: list[tuple[TopicPartition, Path]] = []
            with self._lock:
                counts = {d: 0 for d in self.online_log_dirs}
                for d in [*self._log_dir_of.values(), *self._future_dir_of.values()]:
                    if d in counts:
                        counts[d] += 1
                for tp in dict.fromkeys(partitions):
                    existing = self._logs.get(tp)
                    if existing is not None:
                        out[tp] = existing
                        continue
                    if tp in self._offline_partitions:
                        raise KafkaStorageError(f"{tp[0]}-{tp[1]} is in an offline log directory")
                    if not counts:
                        raise KafkaStorageError(
                            f"every log directory is offline: {sorted(map(str, self.log_dirs))}")
                    preferred = self._preferred_dirs.get(tp)
                    if preferred is not None and preferred in counts:
                        log_dir = preferred  # asked for by AlterReplicaLogDirs before the replica existed here
                    else:
                        log_dir = min(counts, key=lambda d: (counts[d], self.log_dirs.index(d)))
                    counts[log_dir] += 1
                    planned.append((tp, log_dir))
            if not planned:
                return out

            def create(job: tuple[TopicPartition, Path]) -> Log | Exception:
                (topic, partition), log_dir = job
                try:
                    lg = Log(log_dir / f"{topic}-{partition}", config or self.config_for(topic),
                             time_ms=self._time_ms, producer_id_expiration_ms=self._producer_id_expiration_ms,
                             descriptor_cache=self.descriptor_cache)
                    lg.rewrite_guard = self.cleaning_paused
                    lg.io_error_handler = self._on_io_error
                    return lg
                except (OSError, KafkaStorageError) as exc:
                    log.error("creating the log of %s-%d in %s failed: %s", topic, partition, log_dir, exc)
                    return exc

            def prepared(lg: Log | Exception) -> Log | Exception:
                if isinstance(lg, Exception) or prepare is None:
                    return lg
                try:
                    prepare(lg)
                    return lg
                except (OSError, KafkaStorageError) as exc:
                    log.error("preparing the new log of %s-%d failed: %s", lg.topic, lg.partition, exc)
                    lg.close_handlers()
                    return exc

            # Creation (directories and files in one parent) goes one after the other: on ext4 under load,
            # creations from several threads contend on the parent directory and the journal and come out
            # slower. ``prepare`` (an fsynced checkpoint each) goes on several threads, whose fsyncs commit
            # together.
            created = [create(job) for job in planned]
            if len(created) == 1 or threads <= 1:
                created = [prepared(lg) for lg in created]
            else:
                with ThreadPoolExecutor(max_workers=min(threads, len(created)),
                                        thread_name_prefix="log-create") as pool:
                    created = list(pool.map(prepared, created))
            for log_dir in {d for _, d in planned}:
                fsync_dir(log_dir)
            failure: Exception | None = None
            with self._lock:
                for (tp, log_dir), lg in zip(planned, created, strict=True):
                    if isinstance(lg, Exception):
                        failure = failure or lg
                        continue
                    self._logs[tp] = lg
                    self._log_dir_of[tp] = log_dir
                    self._preferred_dirs.pop(tp, None)  # satisfied (Kafka forgets it once used)
                    out[tp] = lg
            self._check_map_budget()
            if failure is not None and raise_errors:
                raise failure
            return out

    def _check_map_budget(self) -> None:
        """Warn (once per crossing) when the logs held need more memory mappings than the kernel allows one
        process: every log's active segment maps its two indexes once it holds records, and past
        ``vm.max_map_count`` an append's mapping fails with ENOMEM and takes its log dir offline."""
        limit = mapping.max_map_count()
        if limit is None:
            return
        logs = len(self._logs) + len(self._futures)
        needed = mappings_needed(logs)
        if needed > limit and not self._map_warned:
            self._map_warned = True
            log.warning("%d logs need about %d memory mappings once written (two indexes each, %d for the rest of "
                        "the process), over vm.max_map_count %d: appends will fail with ENOMEM and take their log "
                        "dir offline; raise it (sysctl -w vm.max_map_count=%d) as for Kafka", logs, needed,
                        MAP_RESERVE, limit, max(262_144, 4 * logs + MAP_RESERVE))
        elif needed <= limit:
            self._map_warned = False

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log and rename its dir ``<topic>-<partition>.<uuid>-delete``; files go later.

        A cleaner pass over the log is stopped first (it would be writing ``.cleaned`` files into a directory
        being renamed) and the log's entry leaves ``cleaner-offset-checkpoint``, so a partition re-created
        under the same name starts dirty from its first offset.
        """
        self.cancel_move(topic, partition)
        lg = self.get_log(topic, partition)
        if lg is None:
            return False
        # Outside the manager lock: the wait for a running pass must not hold up every other partition. The key
        # is kept: a move between dirs may rename the log meanwhile.
        key = lg.dir
        self.cleaner.abort_and_pause_cleaning(key)
        try:
            with self._lock:
                tp = (topic, partition)
                if self._logs.get(tp) is not lg:
                    return False
                del self._logs[tp]
                log_dir = self._log_dir_of.pop(tp)
                self.cleaner.update_checkpoint(lg, None)
                lg.close_handlers()
                target = lg.dir.with_name(delete_dir_name(topic, partition))
                os.replace(lg.dir, target)
                fsync_dir(log_dir)
                delay = lg.config.file_delete_delay_ms
                self._pending_dir_deletes.append((self._time_ms() + delay, target, None))
                if delay == 0:
                    self._delete_pending_dirs(self._time_ms())
                if self._map_warned:
                    self._check_map_budget()  # re-armed once back under the limit
                return True
        finally:
            self.cleaner.resume_cleaning(key)

    # -- moves between log directories (AlterReplicaLogDirs, KIP-113; the copying is log_mover.py's) ---------------
    def resolve_log_dir(self, name: str) -> Path:
        """The log dir a request names: as DescribeLogDirs reports it, or as configured, made absolute.
        LogDirNotFoundError for anything else (Kafka compares with the configured dirs' absolute paths)."""
        found = self._dir_names.get(name)
        if found is None:
            raise LogDirNotFoundError(f"Log dir {name} is not found in the config.")
        return found

    def is_log_dir_online(self, log_dir: Path) -> bool:
        return log_dir in self.log_dirs and log_dir not in self._offline_dirs

    def preferred_log_dir(self, topic: str, partition: int) -> Path | None:
        """Where the partition's log will be created, as asked before it existed here."""
        return self._preferred_dirs.get((topic, partition))

    def alter_replica_log_dir(self, topic: str, partition: int, log_dir: str) -> bool:
        """Move the partition's log to ``log_dir``, Kafka 2.6's ``alterReplicaLogDirs`` step by step: a future
        replica's name longer than 255 bytes is INVALID_TOPIC_EXCEPTION; a dir not configured LOG_DIR_NOT_FOUND,
        an offline one KAFKA_STORAGE_ERROR, as is a partition whose log is in an offline dir; a move under way
        to another dir is cancelled (its copy deleted); the dir is remembered for a replica created here later
        (unless the log or its copy is already there); a partition with no log here is ReplicaNotAvailableError
        (the caller answers UNKNOWN_TOPIC_OR_PARTITION for a partition its metadata does not know); no copy is
        started while any dir is offline (KAFKA_STORAGE_ERROR), so a partition never gets copies in two dirs.

        Returns True when a move started (its copy created, cleaning of the log paused until it ends), False
        when nothing needs to move: the log is in that dir already (which also ends a move elsewhere, as in
        Kafka), or is already being moved there.
        """
        tp = (topic, partition)
        if len(future_dir_name(topic, partition).encode()) > MAX_DIR_NAME_BYTES:
            raise InvalidTopicError("The topic name is too long.")
        dest = self.resolve_log_dir(log_dir)
        with self._create_lock:
            with self._lock:
                if dest in self._offline_dirs:
                    raise KafkaStorageError(f"Log directory {dest} is offline")
                if tp in self._offline_partitions:
                    raise KafkaStorageError(f"Partition {topic}-{partition} is offline")
            if self._future_dir_of.get(tp, dest) != dest:
                self.cancel_move(topic, partition)
            with self._lock:
                current_dir = self._log_dir_of.get(tp)
                if current_dir != dest and self._future_dir_of.get(tp) != dest:
                    self._preferred_dirs[tp] = dest
                current = self._logs.get(tp)
                if current is None or current_dir is None:
                    raise ReplicaNotAvailableError(f"no replica of {topic}-{partition} on this broker")
                if current_dir == dest or tp in self._futures:
                    return False
                if self._offline_dirs:
                    raise KafkaStorageError(f"Can not create log for {topic}-{partition} because log directories "
                                            f"{','.join(map(str, self._offline_dirs))} are offline")
            # Outside the manager lock: the wait for a running pass must not hold up every other partition.
            self.cleaner.abort_and_pause_cleaning(current.dir)
            try:
                future = Log(dest / future_dir_name(topic, partition), current.config, time_ms=self._time_ms,
                             producer_id_expiration_ms=self._producer_id_expiration_ms,
                             descriptor_cache=self.descriptor_cache)
                fsync_dir(dest)
            except (OSError, StorageError) as exc:
                self.cleaner.resume_cleaning(current.dir)
                if isinstance(exc, OSError):
                    self._on_io_error(dest, exc)
                    raise KafkaStorageError(f"creating the future log of {topic}-{partition} in {dest} failed: "
                                            f"{exc.strerror or exc}") from exc
                raise
            future.io_error_handler = self._on_io_error
            with self._lock:
                if self._logs.get(tp) is not current:  # deleted (or its dir failed) meanwhile
                    self.cleaner.resume_cleaning(current.dir)
                    future.close_handlers()
                    delete_log_dir(future.dir)
                    raise ReplicaNotAvailableError(f"the log of {topic}-{partition} went away")
                self._futures[tp] = future
                self._future_dir_of[tp] = dest
                self._paused_for_move[tp] = current.dir
                self._preferred_dirs.pop(tp, None)
        log.info("moving %s-%d from %s to %s", topic, partition, current.dir.parent, dest)
        self.mover.wake()
        return True

    def cancel_move(self, topic: str, partition: int) -> bool:
        """Stop moving the partition and delete its copy (a move to another dir was asked, or the partition is
        deleted); True if there was a move."""
        tp = (topic, partition)
        with self._lock:
            future = self._futures.pop(tp, None)
            dest = self._future_dir_of.pop(tp, None)
            paused = self._paused_for_move.pop(tp, None)
            if future is None or dest is None:
                return False
            with contextlib.suppress(OSError):
                future.close_handlers()
            try:
                target = future.dir.with_name(delete_dir_name(topic, partition))
                os.replace(future.dir, target)
                fsync_dir(dest)
                self._pending_dir_deletes.append((0, target, None))
                self._delete_pending_dirs(self._time_ms())
            except OSError as exc:
                log.warning("deleting the copy of %s-%d in %s failed: %s", topic, partition, dest, exc)
        if paused is not None:
            self.cleaner.resume_cleaning(paused)
        log.info("cancelled the move of %s-%d to %s", topic, partition, dest)
        return True

    # LogMoveHost: what the copier threads ask.
    def moves_pending(self) -> list[TopicPartition]:
        with self._lock:
            return list(self._futures)

    def move_pair(self, tp: TopicPartition) -> tuple[Log, Log] | None:
        with self._lock:
            current, future = self._logs.get(tp), self._futures.get(tp)
            return None if current is None or future is None else (current, future)

    def complete_move(self, tp: TopicPartition, truncations: int, catch_up_bytes: int,
                      copy: Callable[[Log, Log, int], int]) -> bool:
        """The swap (Kafka's ``replaceCurrentWithFutureLog``), under the manager's lock and the current log's,
        so no append, truncation, retention or deletion runs meanwhile: copy what the current log gained since
        (at most ``catch_up_bytes``, else give up for now), flush the copy, rename the current dir
        ``<tp>.<id>-delete`` and the copy's ``<tp>``, each followed by an fsync of its parent, and let the log
        every caller holds take the copy's segments (``Log.exchange_segments``). The old segments stay readable
        for reads in flight and go after ``file.delete.delay.ms``.

        A crash between the two renames leaves a copy without a current log, which the next start makes the log
        (``_adopt_loaded_future``); the copy was complete and flushed, and the old one is only deleted. Kafka
        renames the other way round and refuses to start with the partition in two dirs.
        """
        with self._lock:
            current, future = self._logs.get(tp), self._futures.get(tp)
            if current is None or future is None:
                return False
            source, dest = self._log_dir_of[tp], self._future_dir_of[tp]
            with current.lock, future.lock:
                if current.truncations != truncations or current.failed or future.failed:
                    return False
                copied = 0
                while future.log_end_offset < current.log_end_offset and copied <= catch_up_bytes:
                    n = copy(current, future, catch_up_bytes)
                    if n == 0:
                        break
                    copied += n
                if future.log_end_offset != current.log_end_offset:
                    return False
                old_dir = current.dir
                try:
                    future.flush()
                except StorageError:
                    return False  # its dir goes offline (the failure thread drops the move)
                try:
                    current.rename_dir(source / delete_dir_name(*tp))
                    fsync_dir(source)
                except OSError as exc:
                    self._on_io_error(source, exc)
                    return False
                try:
                    future.rename_dir(dest / log_dir_name(*tp))
                    fsync_dir(dest)
                except OSError as exc:
                    with contextlib.suppress(OSError):
                        current.rename_dir(old_dir)
                        fsync_dir(source)
                    self._on_io_error(dest, exc)
                    return False
                current.exchange_segments(future)
            # ``future`` now holds the old segments, in the renamed source dir.
            del self._futures[tp]
            del self._future_dir_of[tp]
            self._log_dir_of[tp] = dest
            paused = self._paused_for_move.pop(tp, None)
            delay = current.config.file_delete_delay_ms
            self._pending_dir_deletes.append((self._time_ms() + delay, future.dir, future))
            if delay == 0:
                self._delete_pending_dirs(self._time_ms())
        self.cleaner.alter_checkpoint_dir(tp, source, dest)
        if paused is not None:
            self.cleaner.resume_cleaning(paused)
        for log_dir in (source, dest):
            self._checkpoint_dir(log_dir)
        return True

    def truncate_to(self, topic: str, partition: int, target_offset: int) -> bool:
        """``Log.truncate_to`` of a managed log (which runs inside ``cleaning_paused``)."""
        return self._require(topic, partition).truncate_to(target_offset)

    def truncate_fully_and_start_at(self, topic: str, partition: int, new_offset: int) -> None:
        """``Log.truncate_fully_and_start_at`` of a managed log (which runs inside ``cleaning_paused``)."""
        self._require(topic, partition).truncate_fully_and_start_at(new_offset)

    @contextlib.contextmanager
    def cleaning_paused(self, lg: Log) -> Iterator[None]:
        """Every managed log's ``rewrite_guard``: no cleaner pass while a truncation rewrites the log.

        A clean point past the new end would make the next pass skip the records appended there, so it moves
        back to the active segment's base offset, as Kafka's LogManager.truncateTo does (a no-op when nothing
        was cut: passes never clean into the active segment).
        """
        key = lg.dir  # a move between dirs may rename the log before the truncation takes its lock
        self.cleaner.abort_and_pause_cleaning(key)
        try:
            yield
            self.cleaner.maybe_truncate_checkpoint(lg, lg.active_segment.base_offset)
        finally:
            self.cleaner.resume_cleaning(key)

    def _require(self, topic: str, partition: int) -> Log:
        lg = self.get_log(topic, partition)
        if lg is None:
            raise LogDirError(f"no log for {topic}-{partition}")
        return lg

    def _delete_pending_dirs(self, now: int) -> None:
        due = [(p, lg) for t, p, lg in self._pending_dir_deletes if t <= now]
        self._pending_dir_deletes = [entry for entry in self._pending_dir_deletes if entry[0] > now]
        for path, lg in due:
            if lg is not None:
                with contextlib.suppress(OSError):
                    lg.close_handlers()
            if path.exists():
                delete_log_dir(path)

    def delete_due_logs(self) -> None:
        """Remove the renamed directories of deleted and moved logs whose ``file.delete.delay.ms`` has passed
        (Kafka's kafka-delete-logs task; cheap when nothing is due, so the broker runs it every second)."""
        with self._lock:
            now = self._time_ms()
            if any(t <= now for t, _, _ in self._pending_dir_deletes):
                self._delete_pending_dirs(now)

    # -- periodic tasks ---------------------------------------------------------------------------------------
    def _by_dir(self, *, futures: bool = True) -> dict[Path, list[Log]]:
        """The logs of each online dir, future replicas included unless ``futures`` is false (a dir never holds
        a partition's current log and its future replica both)."""
        with self._lock:
            out: dict[Path, list[Log]] = {d: [] for d in self.log_dirs if d not in self._offline_dirs}
            for tp, lg in self._logs.items():
                out[self._log_dir_of[tp]].append(lg)
            if futures:
                for tp, lg in self._futures.items():
                    out[self._future_dir_of[tp]].append(lg)
            return out

    def _write_checkpoint(self, name: str, value: Callable[[Log], int], *, futures: bool = True,
                          only: Path | None = None) -> None:
        """One checkpoint file per online dir; a dir whose file cannot be written goes offline (Kafka does the
        same: a failed checkpoint is a failed log dir)."""
        for log_dir, logs in self._by_dir(futures=futures).items():
            if only is not None and log_dir != only:
                continue
            path = log_dir / name
            writer = self._checkpoint_writers.get(path)
            if writer is None:
                writer = self._checkpoint_writers.setdefault(path, OffsetCheckpointWriter(path))
            try:
                writer.write({(lg.topic, lg.partition): value(lg) for lg in logs})
            except OSError as exc:
                self.take_dir_offline(log_dir, f"writing {name} failed: {exc.strerror or exc}")

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        # Kafka only records logs whose start moved past their first segment; recording all is equivalent.
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        # Current logs only: a future replica's high watermark is the current log's, cut to what it holds.
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark, futures=False)

    def _checkpoint_dir(self, log_dir: Path) -> None:
        """Every offset checkpoint of one dir now (a log left or entered it)."""
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point, only=log_dir)
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset, only=log_dir)
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark, futures=False,
                               only=log_dir)

    def cleanup_logs(self, log_start_moved: list[tuple[str, int]] | None = None) -> int:
        """Retention pass over every log, then removal of ``.deleted`` files past their delay.

        Also expires idle producer ids (each log checks at most every 10 minutes), so this pass must run at
        least that often for Kafka's cadence: ``log.retention.check.interval.ms`` defaults to 5 minutes.
        ``log_start_moved`` gets the partitions whose log start offset the pass moved (followers' fetch sessions
        must tell them).
        """
        deleted = 0
        now = self._time_ms()
        for lg in self.all_logs:
            if lg.closed:
                continue
            start = lg.log_start_offset
            if not lg.config.compact:
                deleted += lg.delete_old_segments()
            elif self.cleaner.pause_cleaning_if_idle(key := lg.dir):
                # compact,delete (or a log start moved by DeleteRecords): segments must not vanish under a
                # pass that is rewriting them, so a log being cleaned waits for the next check instead.
                try:
                    deleted += lg.delete_old_segments()
                finally:
                    self.cleaner.resume_cleaning(key)
            if log_start_moved is not None and lg.log_start_offset != start:
                log_start_moved.append((lg.topic, lg.partition))
            lg.purge_deleted_segments(now)
            lg.maybe_remove_expired_producers(now)
        with self._lock:
            self._delete_pending_dirs(now)
        return deleted

    def clean_compacted_logs(self) -> int:
        """One cleaner pass over every ``compact`` log dirty enough to clean; returns how many were cleaned.

        Blocking (reads and rewrites segments): the broker runs it off its event loop every
        ``log.cleaner.backoff.ms`` when ``log.cleaner.enable`` is set. Logs paused by a truncation or deletion
        in progress are skipped until the next pass.
        """
        cleaned = 0
        for lg in self.all_logs:
            if lg.config.compact and not lg.closed and self.cleaner.clean_log(lg) is not None:
                cleaned += 1
        return cleaned

    def flush_dirty_logs(self) -> int:
        """Apply each log's ``flush.ms``; returns how many logs were flushed."""
        now = self._time_ms()
        return sum(1 for lg in self.all_logs + self.future_logs if not lg.closed and lg.maybe_flush(now))

    # -- shutdown ----------------------------------------------------------------------------------------------
    def abandon(self) -> None:
        """Drop every descriptor and dir lock without flushing, trimming or marking: exactly what a killed
        broker leaves on disk. For fault-injection tests; a real stop is ``shutdown``."""
        self.mover.shutdown()
        with self._lock:
            for lg in [*self._logs.values(), *self._futures.values()]:
                if not lg.closed:
                    lg.close_handlers()
            self._logs.clear()
            self._log_dir_of.clear()
            self._futures.clear()
            self._future_dir_of.clear()
            self._unlock_dirs()
            self._started = False

    def shutdown(self) -> None:
        """Stop any cleaner pass, flush and close every log, write the checkpoints and the clean-shutdown
        marker (blocking)."""
        # The copiers first: they append to future replicas and swap logs.
        self.mover.shutdown()
        # A pass still rewriting a log would race its close; stop it first (outside the lock, which a pass
        # starting right now needs to list the logs).
        logs = self.all_logs
        for lg in logs:
            self.cleaner.abort_and_pause_cleaning(lg.dir)
        try:
            self._shutdown_locked()
        finally:
            for lg in logs:
                self.cleaner.resume_cleaning(lg.dir)

    def _shutdown_locked(self) -> None:
        with self._lock:
            by_dir = self._by_dir()
            def close(log_dir: Path, lg: Log) -> tuple[Path, str] | None:
                try:
                    lg.close()
                    return None
                except (OSError, KafkaStorageError) as exc:
                    return log_dir, f"closing {lg.dir.name} failed: {exc}"

            with ThreadPoolExecutor(max_workers=self._threads * len(self.log_dirs),
                                    thread_name_prefix="log-close") as pool:
                failed = list(pool.map(lambda job: close(*job),
                                       [(d, lg) for d, logs in by_dir.items() for lg in logs]))
            for failure in failed:
                if failure is not None:
                    self.take_dir_offline(*failure)
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
            self.checkpoint_high_watermarks()
            self._delete_pending_dirs(1 << 62)
            for log_dir in self.online_log_dirs:  # an offline one is recovered at the next start
                try:
                    (log_dir / CLEAN_SHUTDOWN_FILE).touch()
                    fsync_dir(log_dir)
                except OSError as exc:
                    log.error("cannot mark %s cleanly shut down (%s): it will be recovered at the next start",
                              log_dir, exc)
            self._logs.clear()
            self._log_dir_of.clear()
            self._futures.clear()
            self._future_dir_of.clear()
            self._unlock_dirs()
            self._started = False
