"""Kafka's checkpoint files, written atomically.

Every checkpoint is text: a version line (``0``), a count line, then one entry per line::

    0
    2
    orders 0 1042        <- recovery-point-offset-checkpoint, replication-offset-checkpoint,
    orders 1 977            log-start-offset-checkpoint: "topic partition offset"

    0
    2
    3 0                  <- leader-epoch-checkpoint: "epoch start_offset"
    5 1200

A write goes to ``<file>.tmp``, is fsynced, renamed over the file and the directory is
fsynced, so a crash leaves either the old or the new checkpoint, never a torn one. Many
files at once (a clean shutdown's epoch checkpoints) keep that order with two syncs of
the file system instead of two fsyncs a file: every ``.tmp`` written, sync, every rename,
sync.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import sys
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from storage.errors import CheckpointError
from zkdata.int_text import INT32_MAX, java_int_in_range
from zkdata.znodes import topic_id_from_str, topic_id_to_str

if TYPE_CHECKING:
    from zkdata.znodes import TopicPartition

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_CHECKPOINT",
    "OffsetRows",
    "can_sync_filesystems",
    "epoch_checkpoint_text",
    "fsync_dir",
    "read_epoch_checkpoint",
    "read_offset_checkpoint",
    "sync_filesystems",
    "temporary_path",
    "write_atomically",
    "write_epoch_checkpoint",
    "write_offset_rows",
    "write_temporary",
]

RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT: Final = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
VERSION: Final = 0
_LONG_MAX: Final = 2**63 - 1


def fsync_dir(directory: Path) -> None:
    """fsync a directory, so the names created, renamed or removed in it are durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temporary_path(path: Path) -> Path:
    """Where a new version of ``path`` is written before it is renamed over it (a
    leftover is removed when the log is next loaded)."""
    return path.with_name(path.name + ".tmp")


def write_atomically(path: Path, text: str | Iterable[str | bytes]) -> None:
    """Replace ``path`` with ``text`` (or its pieces, in order): temp file, fsync, rename,
    fsync the directory."""
    tmp = temporary_path(path)
    _write(tmp, text, fsync=True)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_temporary(path: Path, text: str | Iterable[str | bytes]) -> Path:
    """Write ``text`` to ``path``'s temporary file, neither synced nor renamed: the first
    half of ``write_atomically`` for many files at once, whose caller syncs the file
    system (``sync_filesystems``) before renaming each one over its file, and again after
    (see ``LogManager.close``)."""
    tmp = temporary_path(path)
    _write(tmp, text, fsync=False)
    return tmp


def _write(path: Path, text: str | Iterable[str | bytes], *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        for piece in [text] if isinstance(text, str) else text:
            view = memoryview(piece.encode() if isinstance(piece, str) else piece)
            while view:
                view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _load_syncfs() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syncfs: Callable[[int], int] = libc.syncfs
    except (OSError, AttributeError):
        return None
    return syncfs


_SYNCFS: Final = _load_syncfs()


def _syncfs(fd: int) -> None:
    if _SYNCFS is None:
        raise OSError(errno.ENOSYS, "syncfs is not available here")
    if _SYNCFS(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"syncfs: {os.strerror(code)}")


def can_sync_filesystems() -> bool:
    """Whether ``sync_filesystems`` works here (Linux's syncfs(2))."""
    return _SYNCFS is not None


def sync_filesystems(directories: Iterable[Path]) -> None:
    """Make everything written to the file systems holding ``directories`` durable:
    syncfs(2) once per file system. For thousands of files this takes a fraction of
    fsyncing each one (and its directory), which ext4 commits one at a time; PostgreSQL
    syncs its data directory so at start-up (``recovery_init_sync_method=syncfs``).
    It also writes out what other processes left unwritten there, a cost paid where it
    is used: once, at a clean shutdown. Since Linux 5.8 it reports a write-back error of
    any file there; raises OSError."""
    seen: set[int] = set()
    for directory in directories:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            device = os.fstat(fd).st_dev
            if device not in seen:
                seen.add(device)
                _syncfs(fd)
        finally:
            os.close(fd)


def _number(text: str, high: int) -> int | None:
    """The number ``text`` writes as Kafka's CheckpointFile reads it (Integer.parseInt,
    Long.parseLong: zkdata/int_text.py), if from 0 to ``high``, else None."""
    return java_int_in_range(text, 0, high)


# Kafka's CheckpointFile splits an entry line with Pattern.compile("\\s+"): ASCII
# whitespace only (str.split() also splits at U+00A0, U+2003, \x1c...).
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")


def _fields(line: str) -> list[str]:
    """``line`` split as Java's Pattern.split splits it: a leading empty field kept (a line
    starting with whitespace), trailing empty ones dropped, "" one empty field."""
    parts = line.split(" ")
    if "" in parts or not line.isprintable():  # rare: runs of spaces, tabs, others
        parts = _JAVA_WHITESPACE.split(line)
        if len(parts) > 1:
            while parts and not parts[-1]:
                parts.pop()
    return parts


def _lines(path: Path) -> list[str]:
    """The entry lines of a checkpoint, after checking its version and count. Lines end
    as BufferedReader.readLine ends them (\n, \r or \r\n: read_text's newlines), not at
    the other breaks splitlines() knows (\x0b, \x1c, U+0085...); a blank one is an entry,
    malformed (Kafka's fromLine gets it)."""
    try:
        lines = path.read_text().split("\n")
        if lines[-1] == "":  # the end of the last line, not one more
            lines.pop()
    except UnicodeDecodeError as e:  # garbage bytes where text was written
        raise CheckpointError(f"{path}: not text ({e.reason} at byte {e.start})") from None
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing version or count line")
    if _number(lines[0], INT32_MAX) != VERSION:
        raise CheckpointError(f"{path}: unrecognized version {lines[0]!r} (expected 0)")
    count = _number(lines[1], INT32_MAX)
    if count is None:
        raise CheckpointError(f"{path}: malformed count line {lines[1]!r}")
    entries = lines[2:]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> offset``; an absent file is empty."""
    if not path.exists():
        return {}
    result: dict[tuple[str, int], int] = {}
    for line in _lines(path):
        parts = _fields(line)
        if len(parts) != 3:
            raise CheckpointError(f"{path}: malformed line {line!r}")
        # Kafka's partition is an Int and its offset a Long; neither is below 0 here.
        partition = _number(parts[1], INT32_MAX)
        offset = _number(parts[2], _LONG_MAX)
        if partition is None or offset is None:
            raise CheckpointError(f"{path}: malformed line {line!r}")
        result[(parts[0], partition)] = offset
    return result


def read_topic_ids(path: Path) -> dict[str, uuid.UUID]:
    """``topic -> topic id`` of a log directory's logs (``topic_ids_text``); an absent file
    is empty."""
    if not path.exists():
        return {}
    result: dict[str, uuid.UUID] = {}
    for line in _lines(path):
        parts = _fields(line)
        try:
            topic, text = parts
            result[topic] = topic_id_from_str(text)
        except ValueError:  # not two fields, or not an id
            raise CheckpointError(f"{path}: malformed line {line!r}") from None
    return result


def topic_ids_text(ids: Mapping[str, uuid.UUID]) -> str:
    """A checkpoint's layout: the version, the count, then ``<topic> <topic id>`` lines
    (the id as Kafka prints it)."""
    rows = [f"{topic} {topic_id_to_str(tid)}" for topic, tid in sorted(ids.items())]
    return "\n".join([str(VERSION), str(len(rows)), *rows]) + "\n"


# Lines formatted and written per piece: a checkpoint of 100,000 partitions never holds
# every line (and the whole text) at once.
_LINES_PER_PIECE = 1_000


@dataclass(slots=True)
class OffsetRows:
    """What write_offset_rows wrote: the rows' offsets in file order, and where each
    piece of rows lies in the file (start and end byte)."""

    offsets: list[int]
    spans: list[tuple[int, int]]


def write_offset_rows(
    path: Path,
    partitions: Sequence[TopicPartition],
    order: Sequence[int],
    offsets: list[int],
    previous: OffsetRows | None = None,
    changed: Collection[int] | None = None,
) -> OffsetRows:
    """An offset checkpoint whose row k is ``partitions[order[k]]`` at ``offsets[k]``.
    ``previous``: what the file holds now, written by this function with the same
    partitions and order; a piece of rows whose offsets are unchanged is copied from it
    instead of formatted again (one high watermark moved among 100,000 partitions
    re-formats one piece, not every row). ``changed``: the only rows whose offsets
    differ from ``previous``'s, if the caller knows (the pieces are not compared)."""
    count = len(order)
    spans: list[tuple[int, int]] = []
    changed_pieces = None if changed is None else {row // _LINES_PER_PIECE for row in changed}

    def pieces() -> Iterator[bytes]:
        header = f"{VERSION}\n{count}\n".encode()
        yield header
        position = len(header)
        old = _open_previous(path, previous)
        try:
            for k, first in enumerate(range(0, count, _LINES_PER_PIECE)):
                last = min(first + _LINES_PER_PIECE, count)
                data = b""
                if (
                    old is not None
                    and previous is not None
                    and k < len(previous.spans)
                    and (
                        k not in changed_pieces
                        if changed_pieces is not None
                        else previous.offsets[first:last] == offsets[first:last]
                    )
                ):
                    start, end = previous.spans[k]
                    data = os.pread(old, end - start, start)
                    if len(data) != end - start:
                        data = b""
                if not data:
                    data = "".join(
                        f"{tp.topic} {tp.partition} {offsets[j]}\n"
                        for tp, j in zip(
                            map(partitions.__getitem__, order[first:last]),
                            range(first, last),
                            strict=True,
                        )
                    ).encode()
                spans.append((position, position + len(data)))
                position += len(data)
                yield data
        finally:
            if old is not None:
                os.close(old)

    write_atomically(path, pieces())
    return OffsetRows(offsets, spans)


def _open_previous(path: Path, previous: OffsetRows | None) -> int | None:
    """The checkpoint file now at ``path``, if it is what ``previous`` says (its size)."""
    if previous is None or not previous.spans:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    if os.fstat(fd).st_size != previous.spans[-1][1]:
        os.close(fd)
        return None
    return fd


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """``[(epoch, start_offset), ...]`` in file order; an absent file is empty."""
    if not path.exists():
        return []
    result: list[tuple[int, int]] = []
    for line in _lines(path):
        parts = _fields(line)
        if len(parts) != 2:
            raise CheckpointError(f"{path}: malformed line {line!r}")
        # Kafka's epoch is an Int and its offset a Long, and its cache takes neither below
        # 0 (LeaderEpochFileCache.assign): an epoch past 32 bits would be asked about in an
        # OffsetsForLeaderEpoch that cannot be encoded, and a negative one answered there.
        epoch = _number(parts[0], INT32_MAX)
        offset = _number(parts[1], _LONG_MAX)
        if epoch is None or offset is None:
            raise CheckpointError(f"{path}: malformed line {line!r}")
        result.append((epoch, offset))
    return result


def epoch_checkpoint_text(entries: Iterable[tuple[int, int]]) -> str:
    items = list(entries)
    body = "".join(f"{epoch} {offset}\n" for epoch, offset in items)
    return f"{VERSION}\n{len(items)}\n{body}"


def write_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    write_atomically(path, epoch_checkpoint_text(entries))
