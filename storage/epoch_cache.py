"""The leader epoch cache (KIP-101): which leader epoch started at which offset.

A partition's ``leader-epoch-checkpoint`` holds ``epoch start_offset`` pairs, epochs and
start offsets both strictly increasing. A leader records ``(its epoch, log end offset)``
when it first writes in its epoch (or when it becomes leader); a follower records an
entry whenever a fetched batch carries another epoch than its latest. With it a follower
that has just seen a new leader asks OffsetsForLeaderEpoch for the end offset of its own
latest epoch and truncates exactly where its log and the leader's diverged.

The semantics are Kafka 2.8's ``LeaderEpochFileCache``; every change is written through
to the checkpoint file (changes happen once per leader change, not per append).
"""

from __future__ import annotations

import bisect
import os
import threading
from pathlib import Path
from typing import Final, NamedTuple

from storage.checkpoints import (
    epoch_checkpoint_text,
    read_epoch_checkpoint,
    temporary_path,
    write_epoch_checkpoint,
    write_temporary,
)
from storage.errors import CheckpointError
from storage.partition_dir import PartitionDir, join_partition_dir
from zkdata.int_text import INT32_MAX
from zkdata.znodes import SharedValues

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
]

LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


# Changes of every cache take this one lock (a broker holds 100,000s of caches, and
# changes are rare: leader changes and truncations). Readers take none: the entries are
# an immutable tuple, replaced whole.
_CHANGING = threading.Lock()

# A leader's epoch on an empty log starts at offset 0: after a cold start, 100,000s of idle
# logs hold one entry of a few such (epoch, 0), and a tuple and an entry each took 112
# bytes. Equal entries are one object here: ``commit``'s identity check asks whether the
# entries changed since ``stage``, and entries equal to those staged stage the same file.
_FROM_ZERO: SharedValues[tuple[EpochEntry, ...]] = SharedValues(4096)


def _shared(entries: tuple[EpochEntry, ...]) -> tuple[EpochEntry, ...]:
    if len(entries) == 1 and entries[0].start_offset == 0:
        return _FROM_ZERO(entries)
    return entries


class Staged(NamedTuple):
    """A cache's entries when ``stage`` ran, and those it wrote (None: nothing to write)."""

    entries: tuple[EpochEntry, ...]
    written: tuple[EpochEntry, ...] | None


class LeaderEpochCache:
    """The epoch -> start offset entries of one partition, persisted in ``path`` (None:
    in memory only), or in ``file_name`` in the directory ``path``."""

    # A broker holds 100,000s of these: the directory is kept as its parts
    # (storage/partition_dir.py), whose strings every log shares.
    __slots__ = ("_entries", "_name", "_parent", "_partition", "_topic", "_written")

    def __init__(
        self,
        path: Path | str | PartitionDir | None,
        *,
        file_name: str | None = None,
        present: bool = True,
    ) -> None:
        """``present=False``: the caller knows there is no checkpoint file (it listed the
        directory), so none is looked for."""
        self._name: str | None
        directory: Path | str | PartitionDir | None
        if path is None or file_name is not None:
            directory, self._name = path, file_name
        elif isinstance(path, PartitionDir):
            raise TypeError("a PartitionDir is a directory: give the file_name too")
        else:
            directory, self._name = os.path.split(os.fspath(path))
        if directory is None:
            self._parent, self._topic, self._partition = None, None, -1
        else:
            self._parent, self._topic, self._partition = PartitionDir.of(directory)
        self._entries: tuple[EpochEntry, ...] = ()
        # The entries as the checkpoint file holds them (those assigned since differ):
        # a write is due when they are not the entries. (A clean shutdown's ``commit``
        # counts the entries it leaves out as written.)
        self._written: tuple[EpochEntry, ...] = ()
        checkpoint = self.path if present else None
        if checkpoint is not None:
            read: list[EpochEntry] = []
            for epoch, offset in read_epoch_checkpoint(checkpoint):
                entry = EpochEntry(epoch, offset)
                if read and (epoch <= read[-1].epoch or offset < read[-1].start_offset):
                    raise CheckpointError(f"{checkpoint}: entries not increasing at {entry}")
                read.append(entry)
            self._entries = self._written = _shared(tuple(read))

    @property
    def path(self) -> Path | None:
        if self._parent is None or self._name is None:
            return None
        return Path(join_partition_dir(self._parent, self._topic, self._partition), self._name)

    # --- queries --------------------------------------------------------------------

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        entries = self._entries
        return entries[-1].epoch if entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[0] if entries else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: ``(epoch, end offset)`` for ``requested_epoch``.

        * the latest epoch: (it, the log end offset);
        * an epoch between known ones: (the largest known epoch <= requested, the start
          offset of the first epoch above requested);
        * an epoch below every known one: (requested, the earliest entry's start offset):
          that history was deleted, and the follower should start from there (Kafka 2.8);
        * UNDEFINED_EPOCH, an epoch above the latest, or an empty cache:
          (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
        """
        entries = self._entries  # one snapshot for the whole answer
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(entries, requested_epoch, key=lambda e: e.epoch)
        if higher == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, entries[0].start_offset
        return entries[higher - 1].epoch, entries[higher].start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (None below the earliest entry)."""
        entries = self._entries
        slot = bisect.bisect_right(entries, offset, key=lambda e: e.start_offset)
        return entries[slot - 1].epoch if slot else None

    # --- changes --------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``. A no-op if ``epoch`` is the
        latest and starts no later; otherwise entries that are not below the new one in
        both epoch and start offset are dropped first (Kafka's monotonicity rule).
        Returns whether anything changed."""
        if not 0 <= epoch <= INT32_MAX or start_offset < 0:  # Kafka's epoch is an Int
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        with _CHANGING:
            entries = self._entries
            if entries and entries[-1].epoch == epoch and entries[-1].start_offset <= start_offset:
                return False
            keep = len(entries)
            while keep and (
                entries[keep - 1].epoch >= epoch or entries[keep - 1].start_offset >= start_offset
            ):
                keep -= 1
            self._entries = _shared((*entries[:keep], EpochEntry(epoch, start_offset)))
            # Written later (``flush``, before the log's recovery point moves past it, and
            # at close), not fsynced here: a new leader of 10,000 partitions would wait
            # 10,000 fsyncs. Nothing is lost in a crash: an epoch's batches carry it in
            # their headers, and recovery re-reads the batches above the recovery point;
            # an epoch with no batches needs no entry (a later epoch starts where it
            # would have ended).
            return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated
        to it)."""
        with _CHANGING:
            entries = self._entries
            if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
                return
            keep = len(entries)
            while keep and entries[keep - 1].start_offset >= end_offset:
                keep -= 1
            self._entries = _shared(entries[:keep])
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop the entries at or below it, and
        keep the last dropped one's epoch as starting at ``start_offset``."""
        with _CHANGING:
            entries = self._entries
            keep = bisect.bisect_right(entries, start_offset, key=lambda e: e.start_offset)
            if keep == 0:
                return
            last_dropped = entries[keep - 1]
            if keep == 1 and last_dropped.start_offset == start_offset:
                return
            self._entries = (EpochEntry(last_dropped.epoch, start_offset), *entries[keep:])
            self._flush()

    def clear(self) -> None:
        with _CHANGING:
            if self._entries:
                self._entries = ()
                self._flush()

    def flush(self) -> None:
        """Make entries assigned since the last write durable."""
        with _CHANGING:
            if self._dirty():
                self._flush()

    def stage(self, end_offset: int) -> Staged | None:
        """For a clean shutdown (LogManager.close syncs the file system, then ``commit``s
        every staged cache, then syncs again): write the entries the checkpoint lacks to
        its temporary file, neither synced nor renamed. Entries starting at or after
        ``end_offset``, the log end, are left out: no batch carries them, the next load
        would drop them (as Kafka's does, writing the file again), and an epoch without
        batches needs no entry. So a broker's idle partitions, each given a new epoch by
        a LeaderAndIsr, are neither written at the shutdown nor rewritten at the start.
        None if there was nothing assigned since the last write."""
        with _CHANGING:
            entries = self._entries
            if self._parent is None or entries == self._written:
                return None
            keep = len(entries)
            while keep and entries[keep - 1].start_offset >= end_offset:
                keep -= 1
            durable = entries[:keep]
            path = self.path
            if durable == self._written or path is None:
                return Staged(entries, None)
            write_temporary(path, epoch_checkpoint_text(durable))
            return Staged(entries, durable)

    def commit(self, staged: Staged) -> None:
        """Rename the file ``stage`` wrote over the checkpoint, unless the entries changed
        since (a truncation then wrote its own; an assignment is left for the next
        flush). The entries left out are not written later either."""
        with _CHANGING:
            path = self.path
            if path is None or self._entries is not staged.entries:
                return
            if staged.written is not None:
                os.replace(temporary_path(path), path)
            # What was left out needs no write either (see stage): the cache is clean.
            self._written = self._entries

    def _dirty(self) -> bool:
        return self._parent is not None and self._entries != self._written

    def _flush(self) -> None:
        checkpoint = self.path
        if checkpoint is not None:
            write_epoch_checkpoint(checkpoint, self._entries)
        self._written = self._entries
