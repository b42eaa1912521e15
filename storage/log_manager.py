"""The broker's logs across its ``log.dirs`` (Kafka's LogManager).

Each log directory holds one folder per partition (``<topic>-<partition>``) and, beside
them, the per-directory checkpoint files (``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint``, ``log-start-offset-checkpoint``), a ``.lock`` held
while the broker runs, and ``.kafka_cleanshutdown`` after a clean shutdown.

``LogManager(log_dirs, broker_config)`` locks the directories and loads every partition
(recovering those a crash left unflushed, in parallel); ``start()`` starts the background
thread (retention, flushes, checkpoints, delayed deletions); ``close()`` stops it,
flushes and closes every log, writes the checkpoints and the clean-shutdown marker.

A log directory fails (KIP-112) when an I/O error meets any of its logs or files: the
error is reported to ``dir_failures`` (a LogDirFailureChannel) where it happens, and
the broker's failure handler later calls ``handle_log_dir_failure``, which takes the
directory's logs out of the manager and closes them. From the report on, nothing more
is written into the directory (no checkpoint, no new log, no clean-shutdown marker).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from array import array
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from broker.config import BrokerConfig, TopicConfig, effective_topic_config
from storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    OffsetRows,
    can_sync_filesystems,
    fsync_dir,
    read_offset_checkpoint,
    read_topic_ids,
    sync_filesystems,
    topic_ids_text,
    write_atomically,
    write_offset_rows,
)
from storage.cleaner import CLEANER_OFFSET_CHECKPOINT, LogCleaner
from storage.errors import CheckpointError, KafkaStorageError, LogDirLockedError, StorageError
from storage.log import (
    LONG_MAX,
    LogConfig,
    OffsetsMoved,
    PartitionLog,
    RecoveryReport,
    high_watermark_of,
    log_dir_name,
    log_start_offset_of,
    parse_log_dir_name,
    recovery_point_of,
)
from storage.log_dir_failure import LogDirFailureChannel
from storage.partition_dir import PartitionDir, join_partition_dir
from storage.scheduler import Scheduler, monotonic_ms
from zkdata.znodes import TopicPartition

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "DELETE_SUFFIX",
    "LOCK_FILE",
    "STRAY_SUFFIX",
    "TOPIC_IDS_FILE",
    "LockedLogDirs",
    "LogManager",
    "lock_log_dirs",
]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
LOCK_FILE: Final = ".lock"
DELETE_SUFFIX: Final = "-delete"
# A log of another incarnation of its topic, set aside (kept for an operator to remove).
STRAY_SUFFIX: Final = "-stray"
# In each log directory: the topic id of its logs of each topic.
TOPIC_IDS_FILE: Final = "topic-ids"
_INITIAL_TASK_DELAY_MS: Final = 30_000  # Kafka's LogManager.InitialTaskDelayMs
# A checkpoint finds its moved logs' rows one by one unless more than this many moved and
# more than a sixteenth of its logs: then every log is read, in C, which is cheaper (at
# 100,000 logs, 10,000 moved: 65 ms one by one against 50 ms reading all).
_MOVED_ONE_BY_ONE_UP_TO: Final = 1_024


_last_ms = [0]


def _now_ms() -> int:
    """The wall clock in ms, as the same int object while the ms lasts: logs keep the times
    they were created and flushed, and a broker creating 100,000 logs in a burst then
    holds a few thousand ints, not 200,000 (another thread racing here only makes one
    more equal int)."""
    now = int(time.time() * 1000)
    last = _last_ms[0]
    if now == last:
        return last
    _last_ms[0] = now
    return now


class LockedLogDirs:
    """The ``.lock`` of each log directory, held by this process (``lock_log_dirs``), and
    the directories that could not be created or locked. A LogManager made with it takes
    the locks over; ``release()`` closes those it did not take."""

    def __init__(self, fds: dict[Path, int], failed: dict[Path, OSError]) -> None:
        self._fds = fds
        #: the directories that could not be created or locked (offline from the start)
        self.failed: Final = failed
        self._lock = threading.Lock()

    def holds(self, directory: str | os.PathLike[str]) -> bool:
        """Whether this process holds ``directory``'s lock (until taken over)."""
        with self._lock:
            return Path(directory) in self._fds

    def take(self, directory: Path) -> int | None:
        """The lock's file descriptor, now the caller's to close (None if not held)."""
        with self._lock:
            return self._fds.pop(directory, None)

    def release(self) -> None:
        with self._lock:
            fds, self._fds = list(self._fds.values()), {}
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _lock_dir(directory: Path) -> int:
    """Create ``directory`` if need be and lock it; the lock's file descriptor."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirLockedError(
            f"{directory} is in use by another broker (its {LOCK_FILE} is locked)"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_distinct(log_dirs: Sequence[str | os.PathLike[str]]) -> None:
    """ValueError if two of ``log_dirs`` are one directory (symbolic links resolved), as
    Kafka's createAndValidateLogDirs compares their canonical paths: its second lock would
    otherwise say the directory is in use by another broker."""
    seen: dict[str, str] = {}
    for configured in log_dirs:
        try:
            canonical = os.path.realpath(configured)
        except (OSError, ValueError):
            continue  # it cannot be created or locked either: offline from the start
        given = os.fspath(configured)
        if canonical in seen:
            raise ValueError(
                "Duplicate log directory found: "
                + ", ".join(os.fspath(d) for d in log_dirs)
                + f" ({given} is {seen[canonical]})"
            )
        seen[canonical] = given


def lock_log_dirs(log_dirs: Sequence[str | os.PathLike[str]]) -> LockedLogDirs:
    """Lock every log directory before anything is read or written in any of them
    (Kafka's LogManager locks its directories first of all, lockLogDirs): a second
    process started on a running broker's directories must stop before it touches the
    running broker's files (its state-change log, status file, meta.properties). One
    that cannot be created or locked (an I/O error) is listed in ``failed``; one that
    another process holds raises LogDirLockedError, the locks taken released; the same
    directory twice, ValueError, before any is touched."""
    _check_distinct(log_dirs)
    fds: dict[Path, int] = {}
    failed: dict[Path, OSError] = {}
    try:
        for configured in log_dirs:
            directory = Path(configured)
            try:
                fds[directory] = _lock_dir(directory)
            except OSError as exc:  # a LogDirLockedError is no OSError: it stops the start
                failed[directory] = exc
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise
    return LockedLogDirs(fds, failed)


@dataclass(slots=True)
class _Checkpointed:
    """What a checkpoint file holds: its partitions, in the manager's order; its row k is
    ``partitions[order[k]]``; its offsets and pieces (the sort is made once while the
    partitions stay the same, not at every write)."""

    partitions: list[TopicPartition]
    order: array[int]
    rows: OffsetRows
    # The manager's logs were these while its generation was this: while it stays so,
    # only the logs whose offset moved (OffsetsMoved) are read for the next write.
    generation: int


class LogManager:
    """Every partition log of a broker. Thread-safe."""

    def __init__(
        self,
        log_dirs: Sequence[str | os.PathLike[str]],
        config: BrokerConfig,
        *,
        topic_config: Callable[[str], LogConfig | TopicConfig] | None = None,
        topic_configs: Callable[[Sequence[str]], Mapping[str, LogConfig | TopicConfig]]
        | None = None,
        time_ms: Callable[[], int] = _now_ms,
        scheduler_time_ms: Callable[[], int] | None = None,
        dir_failures: LogDirFailureChannel | None = None,
        offline_at_start: Mapping[str, OSError] | None = None,
        locked: LockedLogDirs | None = None,
    ) -> None:
        """Lock and load ``log_dirs`` (their locks taken over from ``locked``, where the
        caller took them first: ``lock_log_dirs``). ``topic_config(topic)`` gives a topic's config
        for the logs found on disk (default: the broker's defaults), ``topic_configs(topics)``
        those of several at once, for the logs found at start (the broker reads them in one
        batch, as Kafka's LogManager.apply reads every topic's config before it loads: a
        read a topic would cost a restart ~0.6 s per 1,000 topics). I/O errors in a log
        directory go to ``dir_failures`` (a channel of its own by default).

        A directory that cannot be created, locked or read (or one of
        ``offline_at_start``, by path as configured: the broker could not read its
        meta.properties) is offline from the start, its partitions unknown (Kafka's
        createAndValidateLogDirs and loadLogs); StorageError if none is left. One that
        another process has locked still stops the start (LogDirLockedError), and the same
        directory twice (ValueError)."""
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        _check_distinct(log_dirs)
        self.config = config
        self.log_dirs = [Path(d) for d in log_dirs]
        self.dir_failures = dir_failures if dir_failures is not None else LogDirFailureChannel()
        # One bound method for every log (as _defer). ``offline_dirs``: the failed
        # directories (str paths, as logs name theirs), read without a lock (it only
        # grows): while it is empty (always, but after a failure) a check costs one
        # truth test.
        self._dir_failed = self.dir_failures.maybe_add_offline_log_dir
        self.offline_dirs = self.dir_failures.offline_dirs
        # The failed directories whose logs handle_log_dir_failure has taken out.
        self._handled_dirs: set[str] = set()
        self._default_config = LogConfig.from_topic_config(effective_topic_config(config))
        self._topic_config = topic_config
        self._topic_configs = topic_configs
        self._time_ms = time_ms
        # The scheduler's due times are monotonic (KafkaScheduler's are), not on the wall
        # clock the logs keep their times by; a test that gives its own ``time_ms`` drives
        # the scheduler with it too, unless it gives ``scheduler_time_ms``.
        if scheduler_time_ms is None:
            scheduler_time_ms = monotonic_ms if time_ms is _now_ms else time_ms
        self.scheduler = Scheduler("log-manager", scheduler_time_ms)
        self._defer = self.scheduler.defer  # one bound method for every log, not one each
        self._lock = threading.Lock()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        # The same logs by topic: a deletion's UpdateMetadata (ten of them for 100 topics)
        # looked for its topics' logs among all 100,000, three times each (py-spy).
        self._topic_logs: dict[str, dict[TopicPartition, PartitionLog]] = {}
        # Bumped whenever a log is added or removed (under _lock, after the change, so a
        # reader that reads it before the logs sees the change or a newer generation):
        # same generation, same logs in the same order.
        self._generation = 0
        # The logs whose checkpointed offsets moved since each checkpoint last read them.
        self._offsets_moved = OffsetsMoved()
        # The logs with a finite flush.ms, which the flusher looks at every second: not
        # the 100,000 others (their config is fixed when they are made).
        self._timed_flush: dict[TopicPartition, PartitionLog] = {}
        # The logs of compacted topics, which the cleaner looks at every
        # log.cleaner.backoff.ms: not the 100,000 others.
        self._compacted: dict[TopicPartition, PartitionLog] = {}
        self._dirs_to_sync: set[Path] = set()
        #: partitions per log directory: a new partition goes where there are fewest
        self._dir_counts: dict[Path, int] = {}
        #: what each checkpoint file holds
        self._checkpoint_lock = threading.Lock()
        self._checkpointed: dict[Path, _Checkpointed] = {}
        # One checkpoint file written at a time, from reading its offsets to its rename:
        # a write that read a log's recovery point before a truncation must not land
        # after the truncation's own write, or the file says the truncated offsets are
        # on disk again (see checkpoint_recovery_points_in).
        self._checkpoint_write_lock = threading.Lock()
        self._lock_fds: dict[Path, int] = {}
        # Each log directory's topic ids (TOPIC_IDS_FILE), by its str path: every log of
        # a topic in a directory is of the incarnation named there (see claim_topic).
        self._topic_ids: dict[str, dict[str, uuid.UUID]] = {}
        self._topic_ids_changed: set[str] = set()
        self._closed = False
        self._started = False
        #: what loading each partition found (torn tails truncated, segments recovered)
        self.recovery_reports: dict[TopicPartition, RecoveryReport] = {}
        #: compaction of the logs of compacted topics (started by ``start()``)
        self.cleaner = LogCleaner(
            self.compacted_logs,
            # Its checkpoint keeps the entry of a log whatever its policy (Kafka's cleaner
            # has all the logs): one that left compact may come back.
            log_of=lambda topic, partition: self._logs.get(TopicPartition(topic, partition)),
            threads=config.log_cleaner_threads if config.log_cleaner_enable else 0,
            backoff_ms=config.log_cleaner_backoff_ms,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            time_ms=time_ms,
        )
        try:
            for configured, directory in zip(log_dirs, self.log_dirs, strict=True):
                fd = locked.take(directory) if locked is not None else None
                if fd is not None:
                    self._lock_fds[directory] = fd
                failed = (offline_at_start or {}).get(os.fspath(configured))
                if failed is not None:
                    self._offline_at_start(directory, "its meta.properties cannot be read", failed)
                    continue
                if locked is not None and directory in locked.failed:
                    exc = locked.failed[directory]
                    self._offline_at_start(directory, "it cannot be created or locked", exc)
                    continue
                if fd is not None:
                    continue
                try:
                    self._lock_fds[directory] = _lock_dir(directory)
                except OSError as exc:
                    self._offline_at_start(directory, "it cannot be created or locked", exc)
            self._check_some_dir_is_live()
            self._load_logs()
            self._reconcile_cleaner_checkpoints()
            self._check_some_dir_is_live()
        except BaseException:
            self._unlock_dirs()
            raise

    def _offline_at_start(self, directory: Path, why: str, error: OSError) -> None:
        """``directory`` is offline from the start: no log of it is loaded or made."""
        key = os.fspath(directory)
        self.dir_failures.mark_offline(
            key, f"log directory {key} is offline from the start: {why} ({error})"
        )
        self._handled_dirs.add(key)
        fd = self._lock_fds.pop(directory, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _check_some_dir_is_live(self) -> None:
        if not self.live_log_dirs:
            raise StorageError(
                "none of the log directories "
                + ", ".join(os.fspath(d) for d in self.log_dirs)
                + " can be created, locked or read"
            )

    # --- start-up -----------------------------------------------------------------

    def _unlock_dirs(self) -> None:
        for fd in self._lock_fds.values():
            os.close(fd)
        self._lock_fds.clear()

    def _config_for(self, topic: str) -> LogConfig:
        if self._topic_config is None:
            return self._default_config
        return _as_log_config(self._topic_config(topic))

    def _load_logs(self) -> None:
        # (log directory, the partition's directory, partition, offsets, clean shutdown)
        jobs: list[tuple[Path, PartitionDir, TopicPartition, dict[str, int], bool]] = []
        clean_markers: list[Path] = []
        for directory in self.live_log_dirs:
            try:
                jobs += self._jobs_in(directory, clean_markers)
            except OSError as exc:
                self._offline_at_start(directory, "it cannot be read", exc)
        self._load(jobs, clean_markers)

    def _reconcile_cleaner_checkpoints(self) -> None:
        """The cleaner's checkpoint entries of partitions with no log in their directory
        are dropped, those past their logs' ends lowered (see LogCleaner.reconcile); a
        directory whose file cannot be written is offline."""
        for directory in self.live_log_dirs:
            key = os.fspath(directory)
            try:
                self.cleaner.reconcile(key, (pl for pl in self._logs.values() if pl.log_dir == key))
            except OSError as exc:
                self.handle_log_dir_failure(key)  # its logs leave
                self._offline_at_start(
                    directory, f"writing its {CLEANER_OFFSET_CHECKPOINT} failed", exc
                )

    def _jobs_in(
        self, directory: Path, clean_markers: list[Path]
    ) -> list[tuple[Path, PartitionDir, TopicPartition, dict[str, int], bool]]:
        """The partitions found in one log directory, to load."""
        jobs: list[tuple[Path, PartitionDir, TopicPartition, dict[str, int], bool]] = []
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        if clean:
            clean_markers.append(marker)
        try:
            recorded = read_topic_ids(directory / TOPIC_IDS_FILE)
        except CheckpointError as e:
            log.warning("%s; its logs take their topic ids from the next LeaderAndIsr", e)
            recorded = {}
        # A checkpoint that cannot be read costs its offsets, not the directory (Kafka
        # warns and resets the first two the same way): every log is recovered from its
        # first segment, starts at its first segment, and learns its high watermark
        # again from its leader or its followers.
        recovery = _read_or_reset(
            directory / RECOVERY_POINT_CHECKPOINT, "are recovered from their first segments"
        )
        starts = _read_or_reset(
            directory / LOG_START_OFFSET_CHECKPOINT, "start at their first segments"
        )
        hws = _read_or_reset(
            directory / REPLICATION_CHECKPOINT, "learn their high watermarks again"
        )
        # scandir: the entry's type comes with its name (no stat of each of 100,000s
        # of directories), and names sort as strings, not Paths.
        with os.scandir(directory) as found:
            entries = sorted((e.name, e.is_dir()) for e in found)
        parent = os.fspath(directory)
        for name, is_dir in entries:
            if not is_dir:
                continue
            if name.endswith(DELETE_SUFFIX):
                shutil.rmtree(directory / name, ignore_errors=True)
                continue
            if name.endswith(STRAY_SUFFIX):
                log.warning(
                    "%s is a log of a deleted incarnation of its topic, set aside; remove it"
                    " when its data is not wanted",
                    directory / name,
                )
                continue
            parsed = parse_log_dir_name(name)
            if parsed is None:
                log.warning("ignoring %s: not a <topic>-<partition> directory", directory / name)
                continue
            # Its parts, parsed once, here; no Path made per log (pathlib is slow
            # over 100,000s).
            child = PartitionDir.made(parent, *parsed)
            tp = TopicPartition(*parsed)
            offsets = {
                "recovery_point": recovery.get(parsed, 0),
                "log_start_offset": starts.get(parsed, 0),
                "high_watermark": hws.get(parsed, 0),
            }
            jobs.append((directory, child, tp, offsets, clean))
        # Only the topics this directory holds logs of need their ids (the others were
        # deleted, or moved away, after their last record here).
        held = {tp.topic for _d, _c, tp, _o, _cl in jobs}
        key = os.fspath(directory)
        self._topic_ids[key] = {t: i for t, i in recorded.items() if t in held}
        if len(self._topic_ids[key]) != len(recorded):
            self._topic_ids_changed.add(key)
        return jobs

    def _load(
        self,
        jobs: list[tuple[Path, PartitionDir, TopicPartition, dict[str, int], bool]],
        clean_markers: list[Path],
    ) -> None:
        """Load the partitions found (in parallel with num.recovery.threads.per.data.dir);
        a directory where one fails with an I/O error is offline, none of its logs kept."""
        seen: dict[TopicPartition, PartitionDir] = {}
        for _directory, child, tp, _offsets, _clean in jobs:
            if tp in seen:
                raise StorageError(
                    f"partition {tp} has two logs: {join_partition_dir(*seen[tp])} and "
                    f"{join_partition_dir(*child)}"
                )
            seen[tp] = child
        workers = max(1, self.config.num_recovery_threads_per_data_dir * len(self.log_dirs))
        found_configs: dict[str, LogConfig] = {}
        if self._topic_configs is not None and jobs:
            topics = sorted({tp.topic for _d, _c, tp, _o, _cl in jobs})
            found_configs = {t: _as_log_config(c) for t, c in self._topic_configs(topics).items()}

        def load(
            job: tuple[Path, PartitionDir, TopicPartition, dict[str, int], bool],
        ) -> PartitionLog | OSError:
            _directory, child, tp, offsets, clean = job
            try:
                config = found_configs.get(tp.topic)
                return PartitionLog(
                    child,
                    config if config is not None else self._config_for(tp.topic),
                    clean_shutdown=clean,
                    found=True,
                    defer=self._defer,
                    time_ms=self._time_ms,
                    dir_failed=self._dir_failed,
                    offsets_moved=self._offsets_moved,
                    **offsets,
                )
            except OSError as exc:
                return exc

        if workers == 1:  # Kafka's default: no pool (a future per log costs a tenth more)
            loaded = [load(job) for job in jobs]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="log-recovery") as pool:
                loaded = list(pool.map(load, jobs))
        for (directory, child, _tp, _offsets, _clean), result in zip(jobs, loaded, strict=True):
            if isinstance(result, OSError) and self.is_log_dir_online(directory):
                why = f"loading {join_partition_dir(*child)} failed"
                self._offline_at_start(directory, why, result)
        for (directory, _child, tp, _offsets, _clean), partition_log in zip(
            jobs, loaded, strict=True
        ):
            if isinstance(partition_log, OSError):
                continue
            if not self.is_log_dir_online(directory):
                partition_log.close_handlers()  # another log of its directory failed
                continue
            self._add(tp, partition_log)
            self._dir_counts[directory] = self._dir_counts.get(directory, 0) + 1
            report = partition_log.recovery_report
            if report is None:
                continue  # a directory without segments: nothing was recovered
            self.recovery_reports[tp] = report
            if report.truncated_bytes:
                log.warning(
                    "%s: recovery truncated %d bytes (%s); log end offset %d",
                    tp,
                    report.truncated_bytes,
                    report.truncation_reason,
                    report.log_end_offset,
                )
        # A crash from here on must not pass for a clean shutdown.
        for marker in clean_markers:
            if not self.is_log_dir_online(marker.parent):
                continue
            try:
                marker.unlink()
                fsync_dir(marker.parent)
            except OSError as exc:
                self.handle_log_dir_failure(os.fspath(marker.parent))  # its logs leave
                self._offline_at_start(marker.parent, f"removing {marker} failed", exc)

    # --- the logs -----------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> PartitionLog | None:
        return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def __contains__(self, tp: object) -> bool:
        return tp in self._logs

    def __len__(self) -> int:
        return len(self._logs)

    def held_topics(self, topics: Collection[str]) -> set[str]:
        """Those of ``topics`` that some log here is of (the logs ``update_topic_config``
        updates)."""
        with self._lock:
            return {topic for topic in topics if topic in self._topic_logs}

    def partitions_of(self, topics: Iterable[str]) -> list[TopicPartition]:
        """The partitions of ``topics`` that have a log here."""
        with self._lock:
            return [tp for topic in topics for tp in self._topic_logs.get(topic, ())]

    def get_or_create(
        self,
        tp: TopicPartition,
        config: LogConfig | TopicConfig | None = None,
        *,
        sync_dir: bool = True,
        is_new: bool = True,
        topic_id: uuid.UUID | None = None,
    ) -> PartitionLog:
        """The partition's log; a new one goes in the online log directory holding the
        fewest partitions. An existing log keeps the config it was made with.

        ``is_new=False`` (the controller says the partition is not new, so its log may
        exist) while a log directory is offline: KafkaStorageError instead of a new log,
        since the log may be in the failed directory (Kafka's getOrCreateLog). An I/O
        error making the log reports its directory and raises KafkaStorageError.

        ``sync_dir=False`` leaves the fsync of the log directory (which makes the new
        partition's folder durable) to ``sync_new_dirs``: one fsync for a LeaderAndIsr
        that creates thousands of partitions, not one each (an fsync of a directory with
        thousands of entries takes milliseconds).

        ``topic_id`` (the controller's id of the topic) is recorded for the directory of a
        new log if it recorded none: a directory holding a log of a topic always names
        its incarnation, even if ``forget_topic_ids`` dropped the record after the
        LeaderAndIsr's ``claim_topic``."""
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if self._closed:
                raise StorageError("the log manager is closed")
            candidates = self.log_dirs
            if self.offline_dirs:
                if not is_new:
                    raise KafkaStorageError(
                        f"cannot create the log of {tp}: log directories"
                        f" {', '.join(self.dir_failures.offline())} are offline"
                    )
                candidates = self.live_log_dirs
                if not candidates:
                    raise KafkaStorageError(f"cannot create the log of {tp}: no log dir is online")
            counts = self._dir_counts
            directory = min(candidates, key=lambda d: counts.get(d, 0))
            log_config = self._config_for(tp.topic) if config is None else _as_log_config(config)
            try:
                partition_log = PartitionLog(
                    os.path.join(directory, log_dir_name(tp.topic, tp.partition)),
                    log_config,
                    clean_shutdown=True,
                    defer=self._defer,
                    time_ms=self._time_ms,
                    dir_failed=self._dir_failed,
                    offsets_moved=self._offsets_moved,
                )
                if sync_dir:
                    fsync_dir(directory)
            except OSError as exc:
                message = f"creating the log of {tp} in {directory} failed: {exc}"
                if exc.errno == errno.ENAMETOOLONG:
                    # The partition's name, not the disk (a topic of 249 characters and
                    # partition 100000): this partition's error, the directory stays
                    # online (Kafka 2.8 takes it offline; item 41).
                    log.error("%s", message)
                else:
                    self._dir_failed(os.fspath(directory), message, exc)
                raise KafkaStorageError(message) from exc
            if not sync_dir:
                self._dirs_to_sync.add(directory)
            self._add(tp, partition_log)
            counts[directory] = counts.get(directory, 0) + 1
            if topic_id is not None and topic_id.int != 0:
                key = os.fspath(directory)
                ids = self._topic_ids.setdefault(key, {})
                if tp.topic not in ids:
                    ids[tp.topic] = topic_id
                    self._topic_ids_changed.add(key)
            return partition_log

    def compacted_logs(self) -> list[PartitionLog]:
        """The logs of compacted topics (the cleaner's)."""
        with self._lock:
            return list(self._compacted.values())

    def update_topic_config(self, topic: str, config: LogConfig | TopicConfig) -> int:
        """Every log of ``topic`` takes its new config (Kafka's updateTopicConfig): segments
        roll, retention deletes and flushes go by it from now on. A log whose policy leaves
        compact (``compact`` or ``compact,delete`` to ``delete``) has a cleaning of it
        under way aborted and waited for, its checkpoint kept (Kafka 3.1's, KAFKA-12840:
        Kafka 2.8 let it go on and swap in its cleaned segments, dropping records of a
        topic that had become delete-only). Returns how many logs."""
        log_config = _as_log_config(config)
        with self._lock:
            logs = list(self._topic_logs.get(topic, {}).items())
            leaving_compact = [
                plog for _tp, plog in logs if plog.config.compact and not log_config.compact
            ]
            for tp, partition_log in logs:
                partition_log.config = log_config
                if log_config.flush_ms != LONG_MAX:
                    self._timed_flush[tp] = partition_log
                else:
                    self._timed_flush.pop(tp, None)
                if log_config.compact:
                    self._compacted[tp] = partition_log
                else:
                    self._compacted.pop(tp, None)
        # After the config changed (a cleaning claimed from now on sees it) and outside
        # self._lock, which every get_or_create and deletion takes: the wait is for the
        # batch a cleaning is reading, at most, but it is not theirs to wait for.
        self.cleaner.abort_cleaning(leaving_compact)
        return len(logs)

    @property
    def live_log_dirs(self) -> list[Path]:
        """The log directories not failed, in configured order."""
        offline = self.offline_dirs
        if not offline:
            return list(self.log_dirs)
        return [d for d in self.log_dirs if os.fspath(d) not in offline]

    def is_log_dir_online(self, log_dir: str | os.PathLike[str]) -> bool:
        return os.fspath(log_dir) not in self.offline_dirs

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Stop serving the failed ``log_dir`` (Kafka's LogManager.handleLogDirFailure):
        its logs leave the manager and are closed without writing anything (their
        checkpoints are not written again), its lock is released. Returns the partitions
        whose logs were there (none if it was handled already). Never raises."""
        with self._lock:
            if log_dir in self._handled_dirs:
                return []
            self._handled_dirs.add(log_dir)
            removed = [(tp, pl) for tp, pl in self._logs.items() if pl.log_dir == log_dir]
            for tp, _pl in removed:
                self._remove(tp)
            path = Path(log_dir)
            self._dir_counts.pop(path, None)
            self._dirs_to_sync.discard(path)
            fd = self._lock_fds.pop(path, None)
        with self._checkpoint_lock:
            for checkpoint in [c for c in self._checkpointed if c.parent == path]:
                del self._checkpointed[checkpoint]
        for _tp, partition_log in removed:
            partition_log.close_handlers()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        log.warning(
            "logs of %d partitions are offline after the failure of log directory %s",
            len(removed),
            log_dir,
        )
        return [tp for tp, _pl in removed]

    def _add(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        self._logs[tp] = partition_log
        self._generation += 1
        self._topic_logs.setdefault(tp.topic, {})[tp] = partition_log
        if partition_log.config.flush_ms != LONG_MAX:
            self._timed_flush[tp] = partition_log
        if partition_log.config.compact:
            self._compacted[tp] = partition_log

    def _remove(self, tp: TopicPartition) -> PartitionLog | None:
        """Take ``tp``'s log out of the manager (under self._lock); the log, if it had one."""
        self._timed_flush.pop(tp, None)
        self._compacted.pop(tp, None)
        partition_log = self._logs.pop(tp, None)
        self._generation += 1
        if partition_log is not None:
            self._offsets_moved.forget(partition_log)
            of_topic = self._topic_logs[tp.topic]
            del of_topic[tp]
            if not of_topic:
                del self._topic_logs[tp.topic]
        return partition_log

    def sync_new_dirs(self) -> None:
        """fsync the log directories in which partitions were created with
        ``sync_dir=False``. One that fails is reported failed (not raised: its
        partitions are taken offline by the failure handler)."""
        with self._lock:
            dirs, self._dirs_to_sync = self._dirs_to_sync, set()
        for directory in sorted(dirs):
            if os.fspath(directory) in self.offline_dirs:
                continue
            try:
                fsync_dir(directory)
            except OSError as exc:
                self._dir_failed(
                    os.fspath(directory), f"fsync of log directory {directory} failed: {exc}", exc
                )

    def delete(self, tp: TopicPartition) -> bool:
        """Delete a partition's log: close it, rename its directory to
        ``<topic>-<partition>.<uuid>-delete`` and remove that after
        ``log.segment.delete.delay.ms`` (at once on close). Returns whether it existed.

        No log here while a log directory is offline: KafkaStorageError, since the log may
        be in that directory (Kafka's asyncDelete); a deletion answered done would leave
        it there for good."""
        deleted, failed = self.delete_many([tp])
        if tp in failed:
            raise failed[tp]
        return bool(deleted)

    def delete_many(
        self, tps: Iterable[TopicPartition]
    ) -> tuple[list[TopicPartition], dict[TopicPartition, KafkaStorageError]]:
        """``delete`` of each of ``tps``, as Kafka's batch asyncDelete: every directory
        renamed first, then each log directory's checkpoints written and its entries
        synced once for all of them. One at a time, a StopReplica deleting 100,000
        partitions wrote the directory's checkpoints (every log's row) 100,000 times:
        minutes of a broker's CPU, measured. Returns the partitions whose logs were
        deleted, and the error of each that could not be (KafkaStorageError, as
        ``delete`` raises it); a partition with no log here is in neither."""
        wanted = list(tps)
        moved, tail, failed = self._rename_out(wanted, DELETE_SUFFIX, "deleting")
        deleted = [tp for in_parent in moved.values() for tp in in_parent]
        offline = self.dir_failures.offline() if len(deleted) + len(failed) < len(wanted) else []
        if offline:
            done = set(deleted)
            for tp in wanted:
                if tp not in done and tp not in failed:
                    failed[tp] = KafkaStorageError(
                        f"cannot delete the log of {tp}: it may be in the offline log"
                        f" directories {', '.join(offline)}"
                    )
        if moved:
            # One task for the batch, and no name kept a log: a parent's entries that end
            # with the batch's unique tail are the logs renamed there (100,000 names were
            # 12 MiB held for the delay).
            parents = list(moved)
            self.scheduler.schedule(
                f"delete {len(deleted)} logs",
                lambda: _remove_renamed(parents, tail),
                self.config.log_segment_delete_delay_ms,
            )
        return deleted, failed

    def set_aside(self, tp: TopicPartition) -> Path | None:
        """Take a log of another incarnation of its topic out: close it and rename its
        directory to ``<topic>-<partition>.<uuid>-stray``, which is kept (an operator
        removes it). Where it went, or None if there was no log."""
        set_aside, failed = self.set_aside_many([tp])
        if tp in failed:
            raise failed[tp]
        return set_aside.get(tp)

    def set_aside_many(
        self, tps: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, Path], dict[TopicPartition, KafkaStorageError]]:
        """``set_aside`` of each of ``tps``, each directory's checkpoints written once
        (see ``delete_many``): where each log went, and the error of each that could not
        be set aside; a partition with no log here is in neither."""
        moved, tail, failed = self._rename_out(tps, STRAY_SUFFIX, "setting aside")
        set_aside = {
            tp: parent / (log_dir_name(tp.topic, tp.partition) + tail)
            for parent, in_parent in moved.items()
            for tp in in_parent
        }
        return set_aside, failed

    def _rename_out(
        self, tps: Iterable[TopicPartition], suffix: str, doing: str
    ) -> tuple[dict[Path, list[TopicPartition]], str, dict[TopicPartition, KafkaStorageError]]:
        """The partitions whose logs went, by log directory; the tail their directories'
        names took (``<topic>-<partition>`` + tail); the error of each that could not go."""
        failed: dict[TopicPartition, KafkaStorageError] = {}
        moved: dict[Path, list[TopicPartition]] = {}
        # Each log directory's Path made once for the batch (its hash kept with it), and
        # the logs' paths handled as strs: the Paths made per log were over a quarter of
        # a broker's time in a StopReplica deleting 100,000 partitions (py-spy).
        parent_paths: dict[str, Path] = {}
        # One id for the batch: each directory's name is its partition's already (Kafka
        # draws one per log; 100,000 draws were a fifth of a broker's deletion).
        tail = f".{uuid.uuid4().hex}{suffix}"
        # Two lists, not a tuple a log: 100,000 tuples and their list were 6.7 MiB of a
        # deletion's peak, the two lists 1.6 MiB.
        leaving: list[TopicPartition] = []
        leaving_logs: list[PartitionLog] = []
        for tp in tps:
            with self._lock:
                partition_log = self._remove(tp)
                if partition_log is None:
                    continue
                log_dir = partition_log.log_dir
                parent = parent_paths.get(log_dir) or parent_paths.setdefault(
                    log_dir, Path(log_dir)
                )
                self._dir_counts[parent] = self._dir_counts.get(parent, 1) - 1
            leaving.append(tp)
            leaving_logs.append(partition_log)
        # Their cleaner checkpoint entries go first, once their cleanings are aborted
        # (Kafka's asyncDelete: abortCleaning, updateCheckpoints with partitionToRemove,
        # then renameDir): a log made again for a partition starts dirty, even after a
        # kill before its rename. Not under self._lock: the cleaning waited for reads the
        # compacted logs. If a file cannot be written, its directory fails and the
        # deletion goes on, as Kafka's; the next start drops the entries (reconcile).
        forgotten = self.cleaner.forget_many(leaving_logs)
        for log_dir, exc in forgotten.items():
            path = parent_paths[log_dir] / CLEANER_OFFSET_CHECKPOINT
            self._dir_failed(log_dir, f"writing {path} failed: {exc}", exc)
        for tp, partition_log in zip(leaving, leaving_logs, strict=True):
            parent = parent_paths[partition_log.log_dir]
            source = partition_log.directory
            try:
                if suffix == DELETE_SUFFIX:
                    # Nothing written for a log about to go: Kafka renames a deleted log's
                    # directory without closing it, and closes only its handlers later.
                    # A full close writes its leader epoch checkpoint (a synced file):
                    # seconds for a StopReplica deleting 10,000 partitions, measured.
                    partition_log.close_handlers()
                else:
                    partition_log.close()
                os.rename(source, source + tail)
            except OSError as exc:
                message = f"{doing} the log of {tp} in {parent} failed: {exc}"
                self._dir_failed(partition_log.log_dir, message, exc)
                failed[tp] = KafkaStorageError(message)
                continue
            moved.setdefault(parent, []).append(tp)
        del leaving, leaving_logs
        # Once every directory is renamed: each parent's entries synced, then its
        # checkpoints written without the logs gone. A parent whose sync failed keeps
        # its renamed logs (not removed: not known gone), each answered failed.
        renamed_in = list(moved)
        for parent in renamed_in:
            in_parent = moved[parent]
            try:
                fsync_dir(parent)
            except OSError as exc:
                message = (
                    f"{doing} the logs of {len(in_parent)} partitions in {parent} failed: {exc}"
                )
                self._dir_failed(os.fspath(parent), message, exc)
                for tp in in_parent:
                    failed[tp] = KafkaStorageError(message)
                del moved[parent]
        self._write_checkpoints(renamed_in)
        return moved, tail, failed

    # --- truncation -----------------------------------------------------------------

    def truncate_to(self, partition_log: PartitionLog, offset: int) -> bool:
        """``partition_log.truncate_to(offset)``, then the cleaner's checkpoint of the
        log lowered to its active segment's base offset if above it (Kafka's
        LogManager.truncateTo): the truncated offsets are written again, never cleaned.
        A cleaning of the log under way refuses its swaps and records nothing (the log's
        truncation count moved), where Kafka aborts it first. Returns whether anything
        was cut."""
        truncated = partition_log.truncate_to(offset)
        if truncated:
            self._truncate_cleaner_checkpoint(partition_log)
        return truncated

    def truncate_fully_and_start_at(self, partition_log: PartitionLog, offset: int) -> None:
        """``partition_log.truncate_fully_and_start_at(offset)``, then the cleaner's
        checkpoint of the log lowered as ``truncate_to`` does (Kafka's
        LogManager.truncateFullyAndStartAt)."""
        partition_log.truncate_fully_and_start_at(offset)
        self._truncate_cleaner_checkpoint(partition_log)

    def _truncate_cleaner_checkpoint(self, partition_log: PartitionLog) -> None:
        try:
            self.cleaner.maybe_truncate_checkpoint(partition_log)
        except OSError as exc:
            path = Path(partition_log.log_dir) / CLEANER_OFFSET_CHECKPOINT
            message = f"writing {path} failed: {exc}"
            self._dir_failed(partition_log.log_dir, message, exc)
            raise KafkaStorageError(message) from exc

    # --- topic ids ------------------------------------------------------------------

    def claim_topic(self, topic: str, topic_id: uuid.UUID) -> list[TopicPartition]:
        """The controller says ``topic`` is ``topic_id`` (a LeaderAndIsr): each live log
        directory records it, and the logs of the topic in a directory that recorded
        another id are of an earlier incarnation (deleted while this broker was away,
        and created again), returned for the caller to set aside: else the new topic
        would take the old one's records as its own. A directory that recorded none
        adopts the id with its logs (Kafka's partition.metadata, one file a directory
        instead of one a partition). ``write_topic_ids`` makes the records durable."""
        with self._lock:
            earlier: set[str] = set()
            for directory in self.live_log_dirs:
                key = os.fspath(directory)
                ids = self._topic_ids.setdefault(key, {})
                recorded = ids.get(topic)
                if recorded == topic_id:
                    continue
                if recorded is not None:
                    earlier.add(key)
                ids[topic] = topic_id
                self._topic_ids_changed.add(key)
            if not earlier:
                return []
            return [
                tp
                for tp, partition_log in self._topic_logs.get(topic, {}).items()
                if partition_log.log_dir in earlier
            ]

    def forget_topic_ids(self, topics: Collection[str]) -> None:
        """These topics' logs here were deleted: each directory that holds no log of such
        a topic forgets its id (a directory needs a topic's id only to tell its logs'
        incarnation; a log made later records its id, see ``get_or_create``). Else
        ``topic-ids`` would keep every topic ever deleted. ``write_topic_ids`` makes it
        durable."""
        if not topics:
            return
        with self._lock:
            holding = {
                (partition_log.log_dir, topic)
                for topic in topics
                for partition_log in self._topic_logs.get(topic, {}).values()
            }
            for key, ids in self._topic_ids.items():
                for topic in topics:
                    if topic in ids and (key, topic) not in holding:
                        del ids[topic]
                        self._topic_ids_changed.add(key)

    def write_topic_ids(self) -> None:
        """Write the topic ids ``claim_topic`` recorded since the last call (a directory
        whose write fails goes offline, as with any I/O error in it)."""
        with self._lock:
            changed = {
                key: dict(self._topic_ids[key])
                for key in self._topic_ids_changed
                if key not in self.offline_dirs
            }
            self._topic_ids_changed.clear()
        for key, ids in changed.items():
            try:
                write_atomically(Path(key) / TOPIC_IDS_FILE, topic_ids_text(ids))
            except OSError as exc:
                self._dir_failed(key, f"writing the topic ids in {key} failed: {exc}", exc)

    # --- checkpoints --------------------------------------------------------------

    def _logs_in(self, directory: Path) -> tuple[list[TopicPartition], list[PartitionLog]]:
        """The logs in ``directory``: their partitions, and the logs in the same order (two
        lists, not 100,000 pairs made every few seconds to find nothing changed)."""
        logs = self.all_logs()
        if len(self.log_dirs) == 1:
            return list(logs), list(logs.values())
        wanted = os.fspath(directory)  # str compare: Path equality is slow over 100,000s
        partitions, found = [], []
        for tp, pl in logs.items():
            if pl.log_dir == wanted:  # a str: no Path made per log
                partitions.append(tp)
                found.append(pl)
        return partitions, found

    def _write_checkpoint(
        self, name: str, value: Callable[[PartitionLog], int], dirs: Iterable[Path]
    ) -> None:
        moved = self._moved_of(name)
        for directory in dirs:
            if self.offline_dirs and os.fspath(directory) in self.offline_dirs:
                continue  # nothing more is written into a failed directory
            try:
                with self._checkpoint_write_lock:
                    self._write_checkpoint_in(name, value, directory, moved)
            except OSError as exc:
                self._dir_failed(
                    os.fspath(directory), f"writing {directory / name} failed: {exc}", exc
                )

    def _moved_of(self, name: str) -> set[PartitionLog]:
        if name == REPLICATION_CHECKPOINT:
            return self._offsets_moved.high_watermark
        if name == RECOVERY_POINT_CHECKPOINT:
            return self._offsets_moved.recovery_point
        if name == LOG_START_OFFSET_CHECKPOINT:
            return self._offsets_moved.log_start
        raise ValueError(f"no offsets are checkpointed in {name!r}")

    def _write_checkpoint_in(
        self,
        name: str,
        value: Callable[[PartitionLog], int],
        directory: Path,
        moved_logs: set[PartitionLog],
    ) -> None:
        path = directory / name
        wanted = os.fspath(directory)  # str compare: Path equality is slow over 100,000s
        # Taken before the generation and the offsets are read (see OffsetsMoved).
        moved = OffsetsMoved.take(
            moved_logs, None if len(self.log_dirs) == 1 else (lambda pl: pl.log_dir == wanted)
        )
        try:
            self._write_offsets(path, value, directory, moved)
        except BaseException:
            moved_logs.update(moved)  # maybe not written: the next checkpoint reads them
            raise

    def _write_offsets(
        self,
        path: Path,
        value: Callable[[PartitionLog], int],
        directory: Path,
        moved: list[PartitionLog],
    ) -> None:
        # Read before the logs: a log added or removed between is a mismatch next time.
        generation = self._generation
        with self._checkpoint_lock:
            last = self._checkpointed.get(path)
            # The same logs as the file's: only the moved ones are read, not all
            # 100,000 of an idle broker every few seconds.
            if (
                last is not None
                and last.generation == generation
                and path.exists()
                and self._write_moved(path, last, value, moved)
            ):
                return
        partitions, logs = self._logs_in(directory)
        offsets = list(map(value, logs))
        del logs
        with self._checkpoint_lock:
            last = self._checkpointed.get(path)
            previous: OffsetRows | None = None
            if last is not None and last.partitions == partitions:
                order = last.order
                in_order = list(map(offsets.__getitem__, order))
                if path.exists():
                    # A file that would not change is left alone, and a changed one
                    # keeps its unchanged rows.
                    if in_order == last.rows.offsets:
                        self._checkpointed[path] = _Checkpointed(
                            partitions, order, last.rows, generation
                        )
                        return
                    previous = last.rows
            else:
                # Rows by topic and partition, whatever order the logs were made in.
                order = array("i", sorted(range(len(partitions)), key=partitions.__getitem__))
                in_order = list(map(offsets.__getitem__, order))
            del offsets
            rows = write_offset_rows(path, partitions, order, in_order, previous)
            self._checkpointed[path] = _Checkpointed(partitions, order, rows, generation)

    def _write_moved(
        self,
        path: Path,
        last: _Checkpointed,
        value: Callable[[PartitionLog], int],
        moved: list[PartitionLog],
    ) -> bool:
        """Write ``last``'s file again with the offsets of the ``moved`` logs (under
        _checkpoint_lock); False, writing nothing, if one of them is not in it (a log
        made since) or too many moved: the caller reads every log."""
        partitions, order, rows = last.partitions, last.order, last.rows
        count = len(order)
        if len(moved) > _MOVED_ONE_BY_ONE_UP_TO and len(moved) * 16 > count:
            return False
        changed: dict[int, int] = {}
        for partition_log in moved:
            tp = TopicPartition(partition_log.topic, partition_log.partition)
            # The rows are in topic-partition order: the row found by bisection.
            row = bisect.bisect_left(order, tp, key=partitions.__getitem__)
            if row == count or partitions[order[row]] != tp:
                return False
            offset = value(partition_log)
            if offset != rows.offsets[row]:
                changed[row] = offset
        if not changed:
            return True
        offsets = rows.offsets.copy()
        for row, offset in changed.items():
            offsets[row] = offset
        written = write_offset_rows(path, partitions, order, offsets, rows, changed)
        self._checkpointed[path] = _Checkpointed(partitions, order, written, last.generation)
        return True

    def checkpoint_high_watermarks(self) -> None:
        """Write each log's high watermark to its directory's
        ``replication-offset-checkpoint`` (also done every
        ``replica.high.watermark.checkpoint.interval.ms`` once started)."""
        self._write_checkpoint(REPLICATION_CHECKPOINT, high_watermark_of, self.log_dirs)

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, recovery_point_of, self.log_dirs)

    def checkpoint_recovery_points_in(self, log_dirs: Iterable[str]) -> None:
        """Write the recovery points of these log directories now (Kafka's
        LogManager.truncateTo): a truncation moved a log's recovery point back, and until
        the file says so a crash would have recovery trust the old one, and skip the
        segments where the truncated offsets are written again, not yet on disk. Call it
        after the truncations and before anything is appended after them."""
        wanted = set(log_dirs)
        self._write_checkpoint(
            RECOVERY_POINT_CHECKPOINT,
            recovery_point_of,
            [d for d in self.log_dirs if os.fspath(d) in wanted],
        )

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, log_start_offset_of, self.log_dirs)

    def _write_checkpoints(self, dirs: Iterable[Path]) -> None:
        targets = list(dirs)
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, recovery_point_of, targets)
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, log_start_offset_of, targets)
        self._write_checkpoint(REPLICATION_CHECKPOINT, high_watermark_of, targets)

    # --- background work ----------------------------------------------------------

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; returns the segments deleted."""
        deleted = 0
        for tp, partition_log in self.all_logs().items():
            try:
                deleted += partition_log.delete_old_segments(now_ms)
            except KafkaStorageError as e:
                log.error("retention of %s failed: %s", tp, e)  # its directory is reported
            except StorageError:
                log.exception("retention of %s failed", tp)
        return deleted

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """Flush the logs whose ``flush.ms`` has passed; returns how many were flushed."""
        with self._lock:
            timed = list(self._timed_flush.values())
        flushed = 0
        for partition_log in timed:
            try:
                flushed += partition_log.maybe_flush(now_ms)
            except KafkaStorageError as e:
                # Its directory is reported; the other logs are still flushed.
                log.error("flush of %s failed: %s", partition_log, e)
        return flushed

    def start(self) -> None:
        """Start the background thread: retention every log.retention.check.interval.ms,
        the flush.ms check, the recovery point and log start checkpoints every
        log.flush.offset.checkpoint.interval.ms, the high watermark checkpoint every
        replica.high.watermark.checkpoint.interval.ms, and delayed deletions."""
        if self._started:
            return
        self._started = True
        self.schedule_tasks()
        self.scheduler.start()
        self.cleaner.start()

    def schedule_tasks(self) -> None:
        """Put the periodic tasks on the scheduler (``start()`` does; tests that drive
        ``scheduler.run_pending`` with their own clock call it instead)."""
        config = self.config

        def periodic(name: str, action: Callable[[], object], period_ms: int) -> None:
            # A negative period runs the task once, after Kafka's initial delay
            # (KafkaScheduler); 0 is refused by BrokerConfig, and by the scheduler.
            if period_ms < LONG_MAX:
                delay = min(_INITIAL_TASK_DELAY_MS, period_ms)
                if period_ms < 0:
                    delay = _INITIAL_TASK_DELAY_MS
                self.scheduler.schedule(name, action, delay, period_ms)

        periodic("log-retention", self.cleanup_logs, config.log_retention_check_interval_ms)
        # Kafka's flusher would run once with a negative log.flush.scheduler.interval.ms;
        # flush.ms is still checked at least once a second here.
        scheduler_interval = config.log_flush_scheduler_interval_ms
        flush_check = min(
            scheduler_interval if scheduler_interval >= 0 else LONG_MAX,
            config.log_flush_interval_ms,
            1000,
        )
        periodic("log-flusher", self.flush_dirty_logs, max(flush_check, 1))
        periodic(
            "recovery-point-checkpoint",
            self.checkpoint_recovery_points,
            config.log_flush_offset_checkpoint_interval_ms,
        )
        periodic(
            "log-start-offset-checkpoint",
            self.checkpoint_log_start_offsets,
            config.log_flush_offset_checkpoint_interval_ms,
        )
        periodic(
            "high-watermark-checkpoint",
            self.checkpoint_high_watermarks,
            config.replica_high_watermark_checkpoint_interval_ms,
        )

    def close(self) -> None:
        """Clean shutdown: stop the background thread, finish delayed deletions, flush
        and close every log, write every checkpoint, then ``.kafka_cleanshutdown`` in
        each directory (so the next start skips recovery) and release the locks.

        Directory by directory, as Kafka's LogManager.shutdown: one whose I/O fails now
        (its disk filled since its last write) is failed like any other, nothing more is
        written there, not even its marker (its logs are recovered at the next start),
        and the others still close cleanly. The failure is the directory's, not the
        shutdown's: it is reported to ``dir_failures``, not raised."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.cleaner.close()
            self.scheduler.close()
            self.scheduler.drain_one_offs()
            by_dir: dict[str, list[PartitionLog]] = {}
            for partition_log in self.all_logs().values():
                # Nothing more is written to it (an append under way ends first): what
                # is flushed below, and then marked clean, is the whole log.
                partition_log.seal()
                by_dir.setdefault(partition_log.log_dir, []).append(partition_log)
            sync = can_sync_filesystems()
            for directory in self.live_log_dirs:
                logs = by_dir.get(os.fspath(directory), [])
                try:
                    if sync:
                        self._flush_by_syncing_filesystems(logs, [directory])
                    else:
                        for partition_log in logs:
                            partition_log.flush()
                except OSError as exc:
                    self._failed_at_close(directory, "flushing its logs", exc)
            self._write_checkpoints(self.live_log_dirs)
            for directory in self.live_log_dirs:
                try:
                    for partition_log in by_dir.get(os.fspath(directory), []):
                        partition_log.close()
                    marker = directory / CLEAN_SHUTDOWN_FILE
                    marker.touch()
                    fsync_dir(directory)
                except OSError as exc:
                    self._failed_at_close(directory, "closing its logs", exc)
                    with contextlib.suppress(OSError):
                        (directory / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
            offline = self.offline_dirs
            for log_dir, logs in by_dir.items():
                if log_dir in offline:
                    for partition_log in logs:
                        partition_log.close_handlers()  # writes nothing, never raises
        finally:
            self._unlock_dirs()

    def _failed_at_close(self, directory: Path, what: str, error: OSError) -> None:
        self._dir_failed(
            os.fspath(directory), f"{what} in {directory} at shutdown failed: {error}", error
        )

    def _flush_by_syncing_filesystems(self, logs: list[PartitionLog], dirs: list[Path]) -> None:
        """Flush every log as ``PartitionLog.flush`` does, its fsyncs replaced by syncs of
        the file systems: a broker of 30,000 partitions spent 11 s here on two fsyncs of
        each leader epoch checkpoint and one of each new log's directory (and would on a
        slower disk for minutes), during which its registration stayed in ZooKeeper.

        The order keeps flush's guarantees: the new epoch checkpoints are written beside
        the old ones; one sync makes them, the logs' data and their new files durable; the
        renames; a second sync makes those durable; only then do the recovery points move
        to the log ends (the checkpoints and the clean-shutdown marker are written after
        this). A crash at any step leaves whole checkpoints and no marker. Epoch entries
        no batch carries are not written (see LeaderEpochCache.stage)."""
        truncations = [partition_log.truncations for partition_log in logs]
        ends = [partition_log.log_end_offset for partition_log in logs]
        staged = [
            (pl, entries)
            for pl, end in zip(logs, ends, strict=True)
            if (entries := pl.epoch_cache.stage(end)) is not None
        ]
        sync_filesystems(dirs)
        for partition_log, entries in staged:
            partition_log.epoch_cache.commit(entries)
        if any(entries.written is not None for _pl, entries in staged):
            sync_filesystems(dirs)
        for partition_log, end, count in zip(logs, ends, truncations, strict=True):
            partition_log.synced_to(end, count)


def _read_or_reset(path: Path, meaning: str) -> dict[tuple[str, int], int]:
    try:
        return read_offset_checkpoint(path)
    except CheckpointError as e:
        log.warning("%s; ignored: the logs there are %s", e, meaning)
        return {}


def _as_log_config(config: LogConfig | TopicConfig) -> LogConfig:
    return config if isinstance(config, LogConfig) else LogConfig.from_topic_config(config)


def _remove_renamed(parents: list[Path], tail: str) -> None:
    """Remove each directory in ``parents`` whose name ends with ``tail`` (a batch's)."""
    for parent in parents:
        try:
            with os.scandir(parent) as found:
                names = [e.name for e in found if e.name.endswith(tail)]
        except OSError as exc:
            # Its directory failed meanwhile (or went): the next start removes them.
            log.warning("removing deleted logs in %s: %s", parent, exc)
            continue
        for name in names:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
