"""The state-change log: one JSON object per line in `<log dir>/state-change.log`.

Every broker writes one. Its schema (version 1, documented in docs/state-change-log.md)
is what the failover analytics read, so fields are only ever added, never renamed. Each
line is written and flushed whole, under a lock, so concurrent threads never interleave
and a SIGKILL loses nothing that was already logged.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import IO, Any, Final, NamedTuple

log = logging.getLogger(__name__)

# Lines one write joins into a string (StateChangeLog._write_lines): ~250 KB of text.
_LINES_PER_WRITE: Final = 1000

SCHEMA_VERSION = 1
FILE_NAME = "state-change.log"
# After a failed write (its disk full, say): how often the file is tried again.
RETRY_S = 5.0
# A rolled file is named after the hour its lines were written in, local time, as Kafka's
# log4j.properties rolls it (DailyRollingFileAppender, DatePattern '.'yyyy-MM-dd-HH).
ROLL_SUFFIX = "%Y-%m-%d-%H"
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".snappy", ".deflate")
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _compact_encoder() -> Callable[[Any], str]:
    """json.dumps(obj, separators=(",", ":")), line for line, made once.

    JSONEncoder.encode builds a new C encoder (and a circular-reference dict) on every
    call, which is most of the cost of a short row: a failover or a broker loss logs
    10,000s of them, on the controller's event thread and in a broker's LeaderAndIsr
    handling. This one C encoder does the same encoding with no circular-reference
    check (rows are flat, and the check's shared dict would not be thread-safe)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the plain encoder
        return _COMPACT.encode
    encode_obj = make(
        None, _COMPACT.default, encode_basestring_ascii, None, ":", ",", False, False, True
    )

    def encode(obj: Any) -> str:
        if isinstance(obj, str):
            return encode_basestring_ascii(obj)  # as JSONEncoder.encode does
        return "".join(encode_obj(obj, 0))

    return encode


_encode = _compact_encoder()

# Why the controller wrote a partition state.
REASONS = ("new", "offline", "unclean", "preferred", "reassign", "controlled_shutdown", "deleted")


class PartitionStateRow(NamedTuple):
    """A partition_state line's own fields, in their order on the line."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: Sequence[int]
    reason: str
    replicas: Sequence[int]
    zk_version: int


class LeaderAndIsrRow(NamedTuple):
    """A leader_and_isr line's own fields, in their order on the line (error: None when
    applied)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: Sequence[int]
    replicas: Sequence[int]
    controller_id: int
    controller_epoch: int
    result: str
    error: str | None

    @classmethod
    def of_request(
        cls,
        topic: str,
        state: dict[str, Any],
        controller_id: int,
        controller_epoch: int,
        error: str | None,
    ) -> LeaderAndIsrRow:
        """The row of one partition state of a LeaderAndIsr request, applied (``error``
        None) or rejected with ``error``."""
        return cls(
            topic,
            state["partition_index"],
            state["leader"],
            state["leader_epoch"],
            state["isr"],
            state["replicas"],
            controller_id,
            controller_epoch,
            "applied" if error is None else "rejected",
            error,
        )


class _Texts:
    """The JSON text of the strings and int lists of one batch of rows, each made once: a
    broker loss logs 10,000s of rows that share a few topics, ISRs and replica lists.
    Writing the lines from these by formatting is ~4x faster than a dict per row through
    the C encoder, on the controller's event thread and before a broker answers."""

    __slots__ = ("_ints", "_strings")

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._ints: dict[tuple[int, ...], str] = {}

    def string(self, value: str) -> str:
        text = self._strings.get(value)
        if text is None:
            text = self._strings[value] = encode_basestring_ascii(value)
        return text

    def ints(self, values: Sequence[int]) -> str:
        key = values if type(values) is tuple else tuple(values)
        text = self._ints.get(key)
        if text is None:
            text = self._ints[key] = _encode([int(v) for v in key])
        return text


def _hour_start(t: float) -> float:
    """The start of the local-time hour holding ``t`` (seconds since the epoch)."""
    lt = time.localtime(t)
    return time.mktime((*lt[:4], 0, 0, lt.tm_wday, lt.tm_yday, lt.tm_isdst))


def rolled_files(directory: str | Path) -> list[Path]:
    """The rolled state-change logs in ``directory``, oldest first: state-change.log.<hour>
    (``ROLL_SUFFIX``), then a second roll of the same hour (a clock set back) with .1,
    .2, ...; files rotated by other tools (logrotate's .1, .2, ...) are listed too, in name
    order, but not compressed ones (.gz, ...: `zkctl report` reads those)."""

    def key(path: Path) -> tuple[str, int, str]:
        hour, _, n = path.name[len(FILE_NAME) + 1 :].partition(".")
        return (hour, int(n) if n.isdigit() else 0, n)

    try:
        entries = [
            p
            for p in Path(directory).glob(FILE_NAME + ".*")
            if not p.name.endswith(_COMPRESSED) and p.is_file()
        ]
    except OSError:
        return []
    return sorted(entries, key=key)


def log_files(directory: str | Path) -> list[Path]:
    """Every state-change log of a log directory in the order written: the rolled ones,
    then ``state-change.log`` (if there is one)."""
    current = Path(directory) / FILE_NAME
    return [*rolled_files(directory), *([current] if current.is_file() else [])]


class LogReader:
    """Reads one log directory's state-change logs as they grow, across hourly rolls and
    outside rotations: each ``read_new`` returns the whole lines appended since the last
    (on the first, every file's from its start), in the order written. A line still being
    written waits for the next call. Files are known by (device, inode), so a file renamed
    by a roll is read on from where it was left; one truncated in place is read again
    from its start. When a file read before is gone (removed, or replaced by another),
    every file there is read again from its start, and ``restarted`` says so: what the
    caller kept of the earlier lines is no longer what the directory holds."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._offsets: dict[tuple[int, int], int] = {}
        self._current: tuple[int, int] | None = None
        self.restarted = False  # by the last read_new

    def read_new(self) -> list[bytes]:
        lines: list[bytes] = []
        self.restarted = False
        opened: list[IO[bytes]] = []
        try:
            try:
                current = open(self.directory / FILE_NAME, "rb")  # noqa: SIM115 - closed below
                opened.append(current)
                key = self._identity(current)
            except FileNotFoundError:
                key = None
            if key is None or key != self._current:
                # Rolled or rotated since (or the first call): the files it was rolled to,
                # listed after opening the current one, so a roll in between is in the list.
                rolled = []
                for path in rolled_files(self.directory):
                    try:
                        f = open(path, "rb")  # noqa: SIM115 - closed below
                    except OSError:
                        continue
                    opened.append(f)
                    if self._identity(f) != key:
                        rolled.append(f)
                present = {self._identity(f) for f in opened}
                if not present.issuperset(self._offsets):
                    self._offsets.clear()
                    self.restarted = True
                for rolled_file in rolled:
                    self._read(rolled_file, lines)
                self._current = key
            if key is not None:
                self._read(opened[0], lines)
        finally:
            for file in opened:
                file.close()
        return lines

    @staticmethod
    def _identity(f: IO[bytes]) -> tuple[int, int]:
        st = os.fstat(f.fileno())
        return (st.st_dev, st.st_ino)

    def _read(self, f: IO[bytes], lines: list[bytes]) -> None:
        st = os.fstat(f.fileno())
        key = (st.st_dev, st.st_ino)
        start = self._offsets.get(key, 0)
        if st.st_size < start:
            start = 0  # truncated in place (logrotate's copytruncate)
        if st.st_size == start:
            return
        f.seek(start)
        data = f.read(st.st_size - start)
        whole = data.rfind(b"\n") + 1
        self._offsets[key] = start + whole
        lines.extend(data[:whole].splitlines())


class StateChangeLog:
    """A broker's state-change log. ``hourly``: roll the file at the first write in each
    new hour, as Kafka's log4j config does (the broker's; off by default so that a test
    writing across an hour's end finds every line in one file). Every write also checks
    that the path still names the open file: a file renamed or removed from outside (a
    logrotate without copytruncate) is let go, and the path opened again."""

    def __init__(
        self,
        log_dir: str | Path | None,
        broker_id: int,
        *,
        retry_s: float = RETRY_S,
        hourly: bool = False,
    ) -> None:
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self.path: Path | None = None
        self._retry_s = retry_s
        self._closed = False
        # While writing fails: when it is tried again, and the lines lost since it began
        # failing (those whose write was refused or never tried; a refused one may have
        # left a torn piece).
        self._failing = False
        self._retry_at = 0.0
        self._lost_lines = 0
        # The open file's (device, inode), to see it renamed or removed from outside.
        self._identity: tuple[int, int] | None = None
        # Hourly rolls: the start of the hour the open file's lines belong to, and when
        # the next roll is due (infinity: never).
        self._hourly = hourly
        self._clock: Callable[[], float] = time.time
        self._period = 0.0
        self._roll_at = float("inf")
        if log_dir is not None:
            self.path = Path(log_dir) / FILE_NAME
            self.path.parent.mkdir(parents=True, exist_ok=True)
            file, stat = self._open_file()
            self._file = file
            if hourly:
                # A file left by an earlier run belongs to the hour it was last written in
                # (log4j's DailyRollingFileAppender does the same, from lastModified before
                # writing): rolled at the first write of a later hour. Taken before a torn
                # line is ended, which makes the mtime now.
                self._start_period(stat.st_mtime)
            try:
                self._end_torn_line(file, stat)
            except (OSError, ValueError) as e:
                # The disk is full (the crash that tore the line, say): the broker starts
                # without writing, and the file is tried again as after any failed write;
                # that retry ends the torn line.
                self._failed(e, 0)

    def _open(self) -> IO[str]:
        """The file opened for appending, starting on a line of its own."""
        return self._ended_torn_line(*self._open_file())

    def _ended_torn_line(self, file: IO[str], stat: os.stat_result) -> IO[str]:
        """``file``, its torn last line ended (closed if that fails)."""
        try:
            self._end_torn_line(file, stat)
        except (OSError, ValueError):
            with contextlib.suppress(OSError, ValueError):
                file.close()
            raise
        return file

    def _open_file(self) -> tuple[IO[str], os.stat_result]:
        """The file opened for appending, and its stat before anything is written."""
        assert self.path is not None
        file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept until rolled or closed
        try:
            stat = os.fstat(file.fileno())
        except OSError:
            with contextlib.suppress(OSError, ValueError):
                file.close()
            raise
        self._identity = (stat.st_dev, stat.st_ino)
        return file, stat

    def _end_torn_line(self, file: IO[str], stat: os.stat_result) -> None:
        """A write cut off by a SIGKILL or a full disk (in this process or an earlier one)
        may have left a torn piece without its newline, which readers skip as one
        malformed line: a line appended to it would be lost with it, so it is ended."""
        assert self.path is not None
        if stat.st_size > 0:
            with open(self.path, "rb") as tail:
                tail.seek(-1, os.SEEK_END)
                if tail.read(1) != b"\n":
                    file.write("\n")
                    file.flush()

    def _start_period(self, t: float) -> None:
        self._period = _hour_start(t)
        self._roll_at = _hour_start(self._period + 3600 + 1800)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                file, self._file = self._file, None
                try:
                    file.close()
                except (OSError, ValueError) as e:
                    log.error("could not close the state-change log %s: %s", self.path, e)

    def write(self, event: str, **fields: Any) -> None:
        record = {
            "ts": time.time_ns() // 1_000_000,
            "v": SCHEMA_VERSION,
            "broker": self.broker_id,
            "event": event,
        }
        record.update(fields)
        line = _encode(record) + "\n"
        self._write_text(line)

    def write_many(self, event: str, rows: Iterable[dict[str, Any]], **tail: Any) -> None:
        """Many lines of one event kind in one write (a failover can log thousands): each
        the record ``{common fields, **row, **tail}``."""
        ts = time.time_ns() // 1_000_000
        head = {"ts": ts, "v": SCHEMA_VERSION, "broker": self.broker_id, "event": event}
        # The common fields and the tail are encoded once, each row's own between them: the
        # same line as encoding the merged record (a failover logs 100,000 rows, a broker
        # loss 10,000s), made without a merged dict per row.
        prefix = _encode(head)[:-1] + ","
        suffix = "," + _encode(tail)[1:] + "\n" if tail else "}\n"
        reserved = head.keys() | tail.keys()
        self._write_lines(
            prefix + _encode(row)[1:-1] + suffix
            if row and row.keys().isdisjoint(reserved)
            else _encode({**head, **row, **tail}) + "\n"
            for row in rows
        )

    def _line_prefix(self, event: str) -> str:
        """A line's common fields, up to the comma before the row's own."""
        head = {
            "ts": time.time_ns() // 1_000_000,
            "v": SCHEMA_VERSION,
            "broker": self.broker_id,
            "event": event,
        }
        return _encode(head)[:-1] + ","

    def _write_text(self, text: str) -> None:
        if text:
            with self._lock:
                self._write_locked(text)

    def _write_lines(self, lines: Iterable[str]) -> None:
        """Write the lines (each ending in a newline) in pieces of _LINES_PER_WRITE, under
        one hold of the lock: a request's lines stay together, and no more than a piece
        of them is ever one string (a broker loss's 10,000 LeaderAndIsr lines, joined
        and then encoded by the file, took 7 MiB at once)."""
        rest = iter(lines)
        with self._lock:
            while piece := "".join(itertools.islice(rest, _LINES_PER_WRITE)):
                self._write_locked(piece)

    def _write_locked(self, text: str) -> None:
        """Write ``text``, the lock held."""
        # No error of the file's handling (roll, open, write, flush) reaches the
        # thread writing (the controller's event thread, a broker's LeaderAndIsr
        # handling), as none of log4j's reaches Kafka's: it is logged, the lines lost.
        try:
            if self._file is None and self._failing:
                self._reopen()
            # Also after a reopening: a file reopened after its hour is rolled first.
            if self._file is not None:
                self._follow_path()
            if self._file is None:
                if self._failing:
                    self._lost_lines += text.count("\n")
                return
            assert self._file is not None
            self._file.write(text)
            self._file.flush()
        except (OSError, ValueError) as e:
            self._failed(e, text.count("\n"))
            return
        if self._failing:
            log.warning(
                "the state-change log %s is written again; up to %d lines were lost",
                self.path,
                self._lost_lines,
            )
            self._failing, self._lost_lines = False, 0

    def _failed(self, error: Exception, lines: int) -> None:
        """The log's directory failed (disk full, device gone): the broker and the thread
        writing carry on without it. The file is dropped (its buffer would otherwise
        hold every later line) and tried again every ``retry_s`` while lines come, as
        log4j's appender keeps trying Kafka's (an operator may free the disk); the lines
        in between are lost."""
        file, self._file = self._file, None
        self._lost_lines += lines
        self._retry_at = time.monotonic() + self._retry_s
        if not self._failing:
            self._failing = True
            log.error(
                "could not write the state-change log %s (%s); its lines are lost until"
                " it can be written again (tried every %g s)",
                self.path,
                error,
                self._retry_s,
            )
        if file is not None:
            with contextlib.suppress(OSError, ValueError):
                file.close()

    def _reopen(self) -> None:
        """Open the file again once its retry is due (the write that follows says whether
        it is back); it then starts on a line of its own (a refused write may have left a
        torn piece, which readers skip as one)."""
        if self._closed or self.path is None or time.monotonic() < self._retry_at:
            return
        self._retry_at = time.monotonic() + self._retry_s
        with contextlib.suppress(OSError, ValueError):
            self._file = self._open()

    def _follow_path(self) -> None:
        """Before a write: roll the file if its hour is over, and open the path again if
        it no longer names the open file (renamed or removed from outside)."""
        assert self.path is not None
        if self._clock() >= self._roll_at:
            self._roll()
            return
        try:
            stat = os.stat(self.path)
            if (stat.st_dev, stat.st_ino) == self._identity:
                return
        except OSError:
            pass  # gone: made again
        self._replace_file(f"{self.path} was renamed or removed; writing to a new one")

    def _roll(self) -> None:
        """The file renamed after its hour (state-change.log.YYYY-MM-DD-HH, another roll of
        the same hour getting .1, .2, ...: none is overwritten), and a new one started.
        Rolled files are kept: nothing here deletes any (neither does Kafka's log4j)."""
        assert self.path is not None
        base = f"{self.path}.{time.strftime(ROLL_SUFFIX, time.localtime(self._period))}"
        # The next roll is set before anything that can fail: a roll that fails (a failing
        # disk) is tried again in the next hour, not at every write.
        self._start_period(self._clock())
        target = Path(base)
        try:
            n = 0
            while target.exists():
                n += 1
                target = Path(f"{base}.{n}")
            stat = os.stat(self.path)
            if (stat.st_dev, stat.st_ino) == self._identity:
                os.rename(self.path, target)
        except FileNotFoundError:
            pass  # removed from outside: a new one is begun
        except OSError as e:
            if not self._names_open_file():
                self._failed(e, 0)  # the disk failing: tried again every retry_s
                return
            log.error("could not roll the state-change log %s to %s: %s", self.path, target, e)
            return  # kept: written on, and tried again in the next hour
        self._replace_file(None)

    def _names_open_file(self) -> bool:
        """Whether the path still names the open file (False when that cannot be told)."""
        assert self.path is not None
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) == self._identity

    def _replace_file(self, why: str | None) -> None:
        """Close the open file and open the path again (a new file if it is gone)."""
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError, ValueError):
                file.close()
        try:
            self._file = self._open()
        except (OSError, ValueError) as e:
            self._failed(e, 0)
            return
        if why is not None:
            log.warning("the state-change log %s", why)

    # --- the controller's records -------------------------------------------------------

    def controller_elected(self, epoch: int, epoch_zk_version: int) -> None:
        self.write(
            "controller_elected",
            controller=self.broker_id,
            controller_epoch=epoch,
            epoch_zk_version=epoch_zk_version,
        )

    def controller_resigned(self, epoch: int, reason: str) -> None:
        self.write(
            "controller_resigned", controller=self.broker_id, controller_epoch=epoch, reason=reason
        )

    def controller_seen(self, controller: int, reason: str) -> None:
        """A broker learned who the controller is (-1: none), e.g. after losing an election."""
        self.write("controller_seen", controller=controller, reason=reason)

    def failover_loaded(
        self, epoch: int, brokers: int, partitions: int, timings_ms: dict[str, float]
    ) -> None:
        self.write(
            "controller_failover",
            controller_epoch=epoch,
            live_brokers=brokers,
            partitions=partitions,
            **{k: round(v, 1) for k, v in timings_ms.items()},
        )

    def broker_change(
        self,
        epoch: int,
        new: Iterable[int],
        dead: Iterable[int],
        bounced: Iterable[int],
        live: Iterable[int],
    ) -> None:
        self.write(
            "broker_change",
            controller_epoch=epoch,
            new=sorted(new),
            dead=sorted(dead),
            bounced=sorted(bounced),
            live=sorted(live),
        )

    def partition_states(self, epoch: int, rows: Iterable[PartitionStateRow]) -> None:
        """One partition_state line per row, then the controller epoch (the line
        write_many would write for the row as a dict)."""
        texts = _Texts()
        string, ints = texts.string, texts.ints
        prefix = self._line_prefix("partition_state")
        suffix = f',"controller_epoch":{int(epoch)}}}\n'
        self._write_lines(
            f'{prefix}"topic":{string(r.topic)},"partition":{int(r.partition)},'
            f'"leader":{int(r.leader)},"leader_epoch":{int(r.leader_epoch)},'
            f'"isr":{ints(r.isr)},"reason":{string(r.reason)},'
            f'"replicas":{ints(r.replicas)},"zk_version":{int(r.zk_version)}{suffix}'
            for r in rows
        )

    def partition_states_found(
        self, epoch: int, rows: Iterable[PartitionStateRow], why: str
    ) -> None:
        """The partition_state lines of writes found in ZooKeeper after their answer was
        lost: each the line ``partition_states`` writes, with ``why`` added."""
        self.write_many(
            "partition_state",
            ({**r._asdict(), "why": why} for r in rows),
            controller_epoch=int(epoch),
        )

    # --- the broker's records -----------------------------------------------------------

    def leader_and_isr(self, rows: Iterable[LeaderAndIsrRow]) -> None:
        """One leader_and_isr line per row: result "applied" or "rejected", with the
        error (the line write_many would write for the row as a dict)."""
        texts = _Texts()
        string, ints = texts.string, texts.ints
        prefix = self._line_prefix("leader_and_isr")

        def end(r: LeaderAndIsrRow) -> str:
            return (
                f'"leader":{int(r.leader)},"leader_epoch":{int(r.leader_epoch)},'
                f'"isr":{ints(r.isr)},"replicas":{ints(r.replicas)},'
                f'"controller_id":{int(r.controller_id)},'
                f'"controller_epoch":{int(r.controller_epoch)},"result":{string(r.result)},'
                f'"error":{"null" if r.error is None else string(r.error)}}}\n'
            )

        # A line's start up to its partition, per topic, and its end from "leader" on, per
        # distinct fields there: a broker loss logs 10,000s of rows sharing a few of each.
        # Equal fields make equal text (each goes through int() or the encoder), so
        # keying by them is exact; a row holding a list (a request's own) is not a key.
        starts: dict[str, str] = {}
        ends: dict[tuple[Any, ...], str] = {}

        def lines() -> Iterator[str]:
            for r in rows:
                try:
                    start = starts[r.topic]
                except KeyError:
                    start = starts[r.topic] = f'{prefix}"topic":{string(r.topic)},"partition":'
                try:
                    text = ends[r[2:]]
                except KeyError:
                    text = ends[r[2:]] = end(r)
                except TypeError:
                    text = end(r)
                yield f"{start}{int(r.partition)},{text}"

        self._write_lines(lines())

    def request_rejected(
        self, api: str, controller_id: int, controller_epoch: int, broker_epoch: int, error: str
    ) -> None:
        self.write(
            "request_rejected",
            api=api,
            controller_id=controller_id,
            controller_epoch=controller_epoch,
            broker_epoch=broker_epoch,
            error=error,
        )

    def broker_registered(self, broker_epoch: int, host: str, port: int) -> None:
        self.write("broker_registered", broker_epoch=broker_epoch, host=host, port=port)

    def session_state(self, state: str) -> None:
        self.write("zookeeper_session", state=state)


def open_for_broker(log_dirs: list[str], broker_id: int) -> StateChangeLog:
    """The log in the broker's first log directory, created if need be. A directory that
    cannot be (it failed) leaves the broker without one, logged: it starts anyway. A file
    that can be opened but not written (a full disk) is tried again while lines come."""
    directory = log_dirs[0] if log_dirs else None
    if directory is not None:
        try:
            os.makedirs(directory, exist_ok=True)
            return StateChangeLog(directory, broker_id, hourly=True)
        except OSError as e:
            log.error("cannot open the state-change log in %s (%s): not writing one", directory, e)
    return StateChangeLog(None, broker_id)
